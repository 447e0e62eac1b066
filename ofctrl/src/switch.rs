//! The per-connection actor: one [`Switch`] owns one OpenFlow connection.
//!
//! It runs the handshake (HELLO with OpenFlow 1.3 only, FEATURES for the datapath id, the
//! switch config, PORT_DESC), keeps the connection alive with echoes both ways and drops a peer
//! that stays silent, allocates xids and correlates replies (reassembling multipart replies),
//! and runs transactions that resolve only once the switch confirmed them: as one ONF bundle
//! (atomic) or as messages fenced by a barrier. Everything the switch says unasked (packet-in,
//! port status, flow removed) goes to the subscribers as a [`SwitchEvent`].
//!
//! Other code holds a [`SwitchHandle`], never the actor type.

use crate::desired::Flow;
use crate::error::{RequestFailure, SwitchError, TxError};
use crate::wire::{Incoming, Out, SwitchCodec};
use actix::io::{FramedWrite, WriteHandler};
use actix::prelude::*;
use bytes::{Bytes, BytesMut};
use ofproto::bundle::{BUNDLE_ATOMIC, BUNDLE_ORDERED, BundleAdd, BundleControl, BundleCtrlType};
use ofproto::codec::CodecError;
use ofproto::config::SwitchConfig;
use ofproto::error::ErrorMsg;
use ofproto::features::FeaturesReply;
use ofproto::flow_removed::FlowRemoved;
use ofproto::hello::Hello;
use ofproto::meter::MeterModCommand;
use ofproto::multipart::{
    FlowStats, FlowStatsRequest, GroupDesc, MeterConfig, MultipartReplyBody, MultipartRequest,
    MultipartRequestBody, PortStats,
};
use ofproto::packet_in::PacketIn;
use ofproto::packet_out::PacketOut;
use ofproto::port::{Port, PortStatus};
use ofproto::{Action, Message};
use std::collections::HashMap;

/// `OFPM_ALL`: every meter (in meter statistics and configuration requests).
const OFPM_ALL: u32 = 0xffff_ffff;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, WriteHalf};
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;

/// At most one log line per connection about undecodable messages in this interval.
const UNDECODABLE_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Timers of a switch connection.
#[derive(Debug, Clone, Copy)]
pub struct SwitchOptions {
    /// Send an echo request after this long.
    pub echo_interval: Duration,
    /// Drop the connection when nothing was received for this long.
    pub dead_after: Duration,
    /// Drop the connection when the handshake has not finished after this long.
    pub handshake_timeout: Duration,
    /// Give up on a request's reply after this long; a transaction gets this plus one second
    /// per thousand messages.
    pub request_timeout: Duration,
}

impl Default for SwitchOptions {
    fn default() -> Self {
        SwitchOptions {
            echo_interval: Duration::from_secs(5),
            dead_after: Duration::from_secs(15),
            handshake_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// How a transaction is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxMode {
    /// One ONF bundle, committed atomically: all or nothing.
    Bundle,
    /// The messages one after another, then a barrier; earlier ones stay applied if a later
    /// one fails.
    Barrier,
}

/// What the handshake learned about the switch.
#[derive(Debug, Clone)]
pub struct SwitchInfo {
    /// The datapath id: the switch's identity.
    pub dpid: u64,
    /// Where the connection comes from (`127.0.0.1:40312`, `unix`).
    pub peer: String,
    pub features: FeaturesReply,
    /// Ports at connect time (later changes arrive as [`SwitchEvent::PortStatus`]).
    pub ports: Vec<Port>,
}

/// Something a switch told us, delivered to every subscriber.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub enum SwitchEvent {
    /// The handshake finished; the handle is ready for requests.
    Connected(SwitchHandle),
    /// The connection ended (closed, timed out or failed).
    Disconnected {
        dpid: u64,
        peer: String,
    },
    PortStatus {
        dpid: u64,
        status: PortStatus,
    },
    PacketIn {
        dpid: u64,
        packet_in: PacketIn,
    },
    FlowRemoved {
        dpid: u64,
        removed: FlowRemoved,
    },
}

/// A cheap, cloneable reference to a connected switch.
#[derive(Clone)]
pub struct SwitchHandle {
    addr: Addr<Switch>,
    info: Arc<SwitchInfo>,
}

impl std::fmt::Debug for SwitchHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SwitchHandle(dpid={:#018x}, peer={})",
            self.info.dpid, self.info.peer
        )
    }
}

impl SwitchHandle {
    pub fn dpid(&self) -> u64 {
        self.info.dpid
    }

    pub fn info(&self) -> &SwitchInfo {
        &self.info
    }

    /// True while the connection is up.
    pub fn connected(&self) -> bool {
        self.addr.connected()
    }

    /// Send a request and wait for its reply (all parts of a multipart reply).
    pub async fn request(&self, msg: Message) -> Result<Vec<Message>, SwitchError> {
        self.addr
            .send(Request(msg))
            .await
            .map_err(|_| SwitchError::Disconnected)?
    }

    /// Send a message that has no reply; an error the switch sends later is only logged.
    pub async fn send(&self, msg: Message) -> Result<(), SwitchError> {
        self.addr
            .send(Send(msg))
            .await
            .map_err(|_| SwitchError::Disconnected)?
    }

    /// Send flow, group and meter mods and resolve once the switch confirmed all of them.
    /// Meter mods go outside the bundle (Open vSwitch refuses them inside one): adds and
    /// modifies before it, so its flows find their meters, deletes after it, because deleting
    /// a meter deletes the flows still using it.
    pub async fn transact(
        &self,
        requests: Vec<impl Into<TxRequest>>,
        mode: TxMode,
    ) -> Result<(), TxError> {
        let mut before = Vec::new();
        let mut rest = Vec::new();
        let mut after = Vec::new();
        for r in requests {
            let r = r.into();
            match &r {
                TxRequest::Message(Message::MeterMod(mm))
                    if mm.command == MeterModCommand::Delete =>
                {
                    after.push(r)
                }
                TxRequest::Message(Message::MeterMod(_)) => before.push(r),
                _ => rest.push(r),
            }
        }
        self.run_tx(before, TxMode::Barrier).await?;
        self.run_tx(rest, mode).await?;
        self.run_tx(after, TxMode::Barrier).await
    }

    async fn run_tx(&self, requests: Vec<TxRequest>, mode: TxMode) -> Result<(), TxError> {
        if requests.is_empty() {
            return Ok(());
        }
        self.addr
            .send(Transact { requests, mode })
            .await
            .map_err(|_| TxError::Switch(SwitchError::Disconnected))?
    }

    /// A barrier round trip: everything sent before it has been processed.
    pub async fn barrier(&self) -> Result<(), SwitchError> {
        self.request(Message::BarrierRequest).await.map(|_| ())
    }

    /// Send a multipart request and collect the entries of every reply part; `entries` takes
    /// the entries out of a part of the expected kind.
    async fn multipart<T>(
        &self,
        body: MultipartRequestBody,
        entries: impl Fn(MultipartReplyBody) -> Option<Vec<T>>,
    ) -> Result<Vec<T>, SwitchError> {
        let parts = self
            .request(Message::MultipartRequest(MultipartRequest::new(body)))
            .await?;
        let mut out = Vec::new();
        for part in parts {
            let Message::MultipartReply(reply) = part else {
                return Err(SwitchError::unexpected(&part));
            };
            let kind = reply.kind();
            out.extend(entries(reply.body).ok_or_else(|| {
                SwitchError::BadReply(format!("multipart reply of kind {kind:?}"))
            })?);
        }
        Ok(out)
    }

    /// Flow statistics for the flows `request` selects.
    pub async fn flow_stats(
        &self,
        request: FlowStatsRequest,
    ) -> Result<Vec<FlowStats>, SwitchError> {
        self.multipart(MultipartRequestBody::Flow(request), |b| match b {
            MultipartReplyBody::Flow(v) => Some(v),
            _ => None,
        })
        .await
    }

    /// Every flow of every table.
    pub async fn all_flows(&self) -> Result<Vec<FlowStats>, SwitchError> {
        self.flow_stats(FlowStatsRequest::default()).await
    }

    /// Port counters for one port, or every port with `OFPP_ANY`.
    pub async fn port_stats(&self, port_no: u32) -> Result<Vec<PortStats>, SwitchError> {
        self.multipart(MultipartRequestBody::PortStats { port_no }, |b| match b {
            MultipartReplyBody::PortStats(v) => Some(v),
            _ => None,
        })
        .await
    }

    /// Every group the switch holds.
    pub async fn group_desc(&self) -> Result<Vec<GroupDesc>, SwitchError> {
        self.multipart(MultipartRequestBody::GroupDesc, |b| match b {
            MultipartReplyBody::GroupDesc(v) => Some(v),
            _ => None,
        })
        .await
    }

    /// Every meter the switch holds, with its bands.
    pub async fn meter_config(&self) -> Result<Vec<MeterConfig>, SwitchError> {
        self.multipart(
            MultipartRequestBody::MeterConfig { meter_id: OFPM_ALL },
            |b| match b {
                MultipartReplyBody::MeterConfig(v) => Some(v),
                _ => None,
            },
        )
        .await
    }

    /// Send a packet out: `data` is the whole frame, processed as if it came in on `in_port`
    /// (`OFPP_CONTROLLER` when it comes from nowhere).
    pub async fn packet_out(
        &self,
        in_port: u32,
        actions: Vec<Action>,
        data: Bytes,
    ) -> Result<(), SwitchError> {
        let mut po = PacketOut::new(actions, data);
        po.in_port = in_port.into();
        self.send(Message::PacketOut(po)).await
    }

    /// Close the connection.
    pub fn close(&self) {
        self.addr.do_send(Close);
    }
}

/// Start the actor for an accepted connection.
pub(crate) fn spawn<T>(
    stream: T,
    peer: String,
    options: SwitchOptions,
    subscribers: Vec<Recipient<SwitchEvent>>,
) -> Addr<Switch>
where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let (r, w) = tokio::io::split(Box::new(stream) as Box<dyn Transport>);
    Switch::create(|ctx| {
        ctx.add_stream(FramedRead::new(r, SwitchCodec::default()));
        Switch {
            writer: FramedWrite::new(w, SwitchCodec::default(), ctx),
            peer,
            options,
            subscribers,
            phase: Phase::AwaitHello,
            features: None,
            ports: Vec::new(),
            handshake_xid: 0,
            info: None,
            next_xid: 1,
            next_bundle: 1,
            next_tx: 1,
            replies: HashMap::new(),
            tx_xids: HashMap::new(),
            tx_ranges: Vec::new(),
            txs: HashMap::new(),
            last_rx: Instant::now(),
            undecodable: 0,
            undecodable_logged: None,
        }
    })
}

/// Both halves of a switch connection (TCP or unix socket).
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Transport for T {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitHello,
    AwaitFeatures,
    AwaitPortDesc,
    Ready,
}

/// A request waiting for its reply.
struct PendingReply {
    request: Message,
    parts: Vec<Message>,
    reply: oneshot::Sender<Result<Vec<Message>, SwitchError>>,
}

/// What an xid of a transaction stands for.
#[derive(Debug, Clone, Copy)]
enum TxRole {
    /// The bundle open request.
    Open,
    /// Request number `n` of the transaction.
    Request(usize),
    /// The barrier or bundle commit that ends the transaction.
    Final,
}

/// The xids `first .. first + count` (wrapping) are requests `0 .. count` of transaction `tx`.
struct XidRange {
    first: u32,
    count: u32,
    tx: u64,
}

struct PendingTx {
    requests: Vec<TxRequest>,
    xids: Vec<u32>,
    failures: Vec<RequestFailure>,
    bundle_error: Option<ErrorMsg>,
    reply: oneshot::Sender<Result<(), TxError>>,
}

/// The actor. See the module documentation.
pub struct Switch {
    writer: FramedWrite<Out, WriteHalf<Box<dyn Transport>>, SwitchCodec>,
    peer: String,
    options: SwitchOptions,
    subscribers: Vec<Recipient<SwitchEvent>>,
    phase: Phase,
    features: Option<FeaturesReply>,
    ports: Vec<Port>,
    handshake_xid: u32,
    /// Set once the handshake finished.
    info: Option<Arc<SwitchInfo>>,
    next_xid: u32,
    next_bundle: u32,
    next_tx: u64,
    replies: HashMap<u32, PendingReply>,
    tx_xids: HashMap<u32, (u64, TxRole)>,
    /// The requests of bundle transactions: consecutive xids each.
    tx_ranges: Vec<XidRange>,
    txs: HashMap<u64, PendingTx>,
    last_rx: Instant,
    /// Messages that did not decode since the last log line about them, and when that was (one
    /// line a minute per connection, however much garbage arrives).
    undecodable: u64,
    undecodable_logged: Option<Instant>,
}

#[derive(Message)]
#[rtype(result = "Result<Vec<Message>, SwitchError>")]
struct Request(Message);

#[derive(Message)]
#[rtype(result = "Result<(), SwitchError>")]
struct Send(Message);

#[derive(Message)]
#[rtype(result = "Result<(), TxError>")]
struct Transact {
    requests: Vec<TxRequest>,
    mode: TxMode,
}

/// One request of a transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum TxRequest {
    /// A message, sent as it is.
    Message(Message),
    /// Add (or replace) a flow of a bridge's desired state under cookie generation
    /// `generation`: its FLOW_MOD is encoded straight from the shared flow, which is never
    /// copied into a `FlowMod` (a 100,000-flow change would copy every match and action).
    AddFlow { flow: Arc<Flow>, generation: u16 },
}

impl TxRequest {
    /// The message this request sends (for an added flow, a `FlowMod` with copies of its
    /// parts: for barrier mode and error reports only).
    pub fn to_message(&self) -> Message {
        match self {
            TxRequest::Message(m) => m.clone(),
            TxRequest::AddFlow { flow, generation } => Message::FlowMod(flow.flow_mod(*generation)),
        }
    }

    /// Append the request as a message of bundle `bundle_id` (see
    /// [`BundleAdd::encode_borrowed`]).
    fn encode_bundled(
        &self,
        bundle_id: u32,
        flags: u16,
        xid: u32,
        out: &mut BytesMut,
    ) -> Result<(), ofproto::EncodeError> {
        match self {
            TxRequest::Message(m) => BundleAdd::encode_borrowed(bundle_id, flags, xid, m, out),
            TxRequest::AddFlow { flow, generation } => {
                let fixed = flow.flow_mod_fixed(*generation);
                let fm = fixed.borrowing(&flow.key.matches, &flow.instructions);
                BundleAdd::encode_flow_mod(bundle_id, flags, xid, fm, out)
            }
        }
    }
}

impl From<Message> for TxRequest {
    fn from(m: Message) -> TxRequest {
        TxRequest::Message(m)
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct Close;

impl Actor for Switch {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        tracing::debug!(peer = %self.peer, "switch connected, sending HELLO");
        let xid = self.xid();
        self.writer
            .write(Out::message(xid, Message::Hello(Hello::of13())));
        ctx.run_interval(self.options.echo_interval, |this, ctx| {
            if this.last_rx.elapsed() > this.options.dead_after {
                tracing::warn!(
                    peer = %this.peer,
                    silent_s = this.last_rx.elapsed().as_secs(),
                    "switch stopped answering; dropping the connection"
                );
                ctx.stop();
                return;
            }
            let xid = this.xid();
            this.writer
                .write(Out::message(xid, Message::EchoRequest(Bytes::new())));
        });
        ctx.run_later(self.options.handshake_timeout, |this, ctx| {
            if this.phase != Phase::Ready {
                tracing::warn!(peer = %this.peer, phase = ?this.phase, "handshake timed out");
                ctx.stop();
            }
        });
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        for (_, p) in self.replies.drain() {
            let _ = p.reply.send(Err(SwitchError::Disconnected));
        }
        for (_, t) in self.txs.drain() {
            let _ = t
                .reply
                .send(Err(TxError::Switch(SwitchError::Disconnected)));
        }
        if let Some(info) = &self.info {
            tracing::info!(dpid = %format_args!("{:#x}", info.dpid), peer = %self.peer, "switch disconnected");
            self.notify(SwitchEvent::Disconnected {
                dpid: info.dpid,
                peer: self.peer.clone(),
            });
        }
    }
}

impl WriteHandler<CodecError> for Switch {
    fn error(&mut self, err: CodecError, _: &mut Context<Self>) -> Running {
        tracing::warn!(peer = %self.peer, error = %err, "writing to the switch failed");
        Running::Stop
    }
}

impl StreamHandler<Result<Incoming, CodecError>> for Switch {
    fn handle(&mut self, item: Result<Incoming, CodecError>, ctx: &mut Context<Self>) {
        self.last_rx = Instant::now();
        match item {
            Ok(Incoming::Message(xid, msg)) => self.on_message(xid, msg, ctx),
            Ok(Incoming::Undecodable {
                xid,
                msg_type,
                error,
            }) => {
                // One message we cannot read does not make the connection unusable.
                self.undecodable += 1;
                if self
                    .undecodable_logged
                    .is_none_or(|t| t.elapsed() >= UNDECODABLE_LOG_INTERVAL)
                {
                    tracing::warn!(peer = %self.peer, xid, %msg_type, %error, count = self.undecodable, "ignoring messages that do not decode (logged at most once a minute per connection)");
                    self.undecodable = 0;
                    self.undecodable_logged = Some(Instant::now());
                }
                if let Some(p) = self.replies.remove(&xid) {
                    let _ = p.reply.send(Err(SwitchError::BadReply(error.to_string())));
                }
            }
            Ok(Incoming::WrongVersion(version)) => {
                tracing::warn!(
                    peer = %self.peer,
                    version,
                    "peer speaks OpenFlow version {version:#04x}; only OpenFlow 1.3 (0x04) is supported"
                );
                let err = hello_incompatible(
                    "only OpenFlow 1.3 is supported; configure the bridge with protocols=OpenFlow13",
                );
                self.writer.write(Out::message(0, Message::Error(err)));
                self.writer.close();
                ctx.stop();
            }
            Err(e) => {
                tracing::warn!(peer = %self.peer, error = %e, "switch connection failed");
                ctx.stop();
            }
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Handler<Request> for Switch {
    type Result = ResponseFuture<Result<Vec<Message>, SwitchError>>;

    fn handle(&mut self, Request(msg): Request, _: &mut Context<Self>) -> Self::Result {
        if let Err(e) = msg.check() {
            let e = SwitchError::Invalid {
                request: crate::error::describe(&msg),
                reason: e.to_string(),
            };
            return Box::pin(async move { Err(e) });
        }
        let (tx, rx) = oneshot::channel();
        let xid = self.xid();
        let timeout = self.options.request_timeout;
        self.writer.write(Out::message(xid, msg.clone()));
        self.replies.insert(
            xid,
            PendingReply {
                request: msg,
                parts: Vec::new(),
                reply: tx,
            },
        );
        Box::pin(async move {
            match tokio::time::timeout(timeout, rx).await {
                Ok(reply) => reply.unwrap_or(Err(SwitchError::Disconnected)),
                Err(_) => Err(SwitchError::Timeout(timeout)),
            }
        })
    }
}

impl Handler<Send> for Switch {
    type Result = Result<(), SwitchError>;

    fn handle(&mut self, Send(msg): Send, _: &mut Context<Self>) -> Self::Result {
        msg.check().map_err(|e| SwitchError::Invalid {
            request: crate::error::describe(&msg),
            reason: e.to_string(),
        })?;
        let xid = self.xid();
        self.writer.write(Out::message(xid, msg));
        Ok(())
    }
}

impl Handler<Transact> for Switch {
    type Result = ResponseFuture<Result<(), TxError>>;

    fn handle(&mut self, tx: Transact, _: &mut Context<Self>) -> Self::Result {
        let refuse = |index: usize, msg: &Message, e: ofproto::EncodeError| {
            let e = TxError::Invalid {
                index,
                request: crate::error::describe(msg),
                reason: e.to_string(),
            };
            Box::pin(async move { Err(e) }) as Self::Result
        };
        let (reply, rx) = oneshot::channel();
        let timeout =
            self.options.request_timeout + Duration::from_millis(tx.requests.len() as u64);
        let id = self.next_tx;
        self.next_tx += 1;
        let mut xids = Vec::with_capacity(2);
        match tx.mode {
            TxMode::Barrier => {
                // Refuse the whole transaction before sending anything if one request is
                // malformed.
                let messages: Vec<Message> =
                    tx.requests.iter().map(TxRequest::to_message).collect();
                for (index, msg) in messages.iter().enumerate() {
                    if let Err(e) = msg.check() {
                        return refuse(index, msg, e);
                    }
                }
                for (i, msg) in messages.into_iter().enumerate() {
                    let xid = self.xid();
                    self.writer.write(Out::message(xid, msg));
                    self.tx_xids.insert(xid, (id, TxRole::Request(i)));
                    xids.push(xid);
                }
                let xid = self.xid();
                self.writer
                    .write(Out::message(xid, Message::BarrierRequest));
                self.tx_xids.insert(xid, (id, TxRole::Final));
                xids.push(xid);
            }
            TxMode::Bundle => {
                // Every bundle add is encoded once, from the request itself, into one buffer
                // (and checked while encoding: nothing is sent if one is malformed); the
                // requests get consecutive xids, so the transaction keeps one range of them
                // instead of one map entry each.
                let Some(first) = self.xid_block(tx.requests.len()) else {
                    return refuse(
                        0,
                        &Message::BarrierRequest,
                        ofproto::EncodeError::TooLong {
                            what: "transaction",
                            len: tx.requests.len(),
                        },
                    );
                };
                let bundle_id = self.next_bundle;
                let flags = BUNDLE_ATOMIC | BUNDLE_ORDERED;
                let mut adds = BytesMut::with_capacity(tx.requests.len() * 160);
                for (i, request) in tx.requests.iter().enumerate() {
                    // Open vSwitch reports a failing bundled message under this xid and
                    // requires it to equal the outer one.
                    let xid = first.wrapping_add(i as u32);
                    if let Err(e) = request.encode_bundled(bundle_id, flags, xid, &mut adds) {
                        return refuse(i, &request.to_message(), e);
                    }
                }
                self.next_bundle = self.next_bundle.wrapping_add(1);
                let xid = self.xid();
                self.writer.write(Out::message(
                    xid,
                    Message::BundleControl(BundleControl::new(
                        bundle_id,
                        BundleCtrlType::OpenRequest,
                        flags,
                    )),
                ));
                self.tx_xids.insert(xid, (id, TxRole::Open));
                xids.push(xid);
                self.writer.write(Out::Encoded(adds));
                self.tx_ranges.push(XidRange {
                    first,
                    count: tx.requests.len() as u32,
                    tx: id,
                });
                let xid = self.xid();
                self.writer.write(Out::message(
                    xid,
                    Message::BundleControl(BundleControl::new(
                        bundle_id,
                        BundleCtrlType::CommitRequest,
                        flags,
                    )),
                ));
                self.tx_xids.insert(xid, (id, TxRole::Final));
                xids.push(xid);
            }
        }
        self.txs.insert(
            id,
            PendingTx {
                requests: tx.requests,
                xids,
                failures: Vec::new(),
                bundle_error: None,
                reply,
            },
        );
        Box::pin(async move {
            match tokio::time::timeout(timeout, rx).await {
                Ok(reply) => reply.unwrap_or(Err(TxError::Switch(SwitchError::Disconnected))),
                Err(_) => Err(TxError::Switch(SwitchError::Timeout(timeout))),
            }
        })
    }
}

impl Handler<Close> for Switch {
    type Result = ();

    fn handle(&mut self, _: Close, ctx: &mut Context<Self>) {
        self.writer.close();
        ctx.stop();
    }
}

impl Switch {
    /// `n` consecutive xids (none of them zero); the first, or `None` when `n` does not fit.
    fn xid_block(&mut self, n: usize) -> Option<u32> {
        let n = u32::try_from(n).ok().filter(|n| *n < u32::MAX / 2)?;
        if self.next_xid.checked_add(n).is_none() {
            self.next_xid = 1;
        }
        let first = self.next_xid;
        self.next_xid = first + n;
        if self.next_xid == u32::MAX {
            self.next_xid = 1;
        }
        Some(first)
    }

    /// The transaction and role of `xid`, if it belongs to one.
    fn tx_of(&self, xid: u32) -> Option<(u64, TxRole)> {
        if let Some(&found) = self.tx_xids.get(&xid) {
            return Some(found);
        }
        self.tx_ranges.iter().find_map(|r| {
            let i = xid.wrapping_sub(r.first);
            (i < r.count).then_some((r.tx, TxRole::Request(i as usize)))
        })
    }

    fn xid(&mut self) -> u32 {
        let xid = self.next_xid;
        // Zero is left out: some switches use it for unsolicited messages.
        self.next_xid = self.next_xid.checked_add(1).unwrap_or(1);
        xid
    }

    fn notify(&self, event: SwitchEvent) {
        for s in &self.subscribers {
            s.do_send(event.clone());
        }
    }

    fn on_message(&mut self, xid: u32, msg: Message, ctx: &mut Context<Self>) {
        match msg {
            Message::EchoRequest(data) => self
                .writer
                .write(Out::message(xid, Message::EchoReply(data))),
            Message::Hello(hello) if self.phase == Phase::AwaitHello => {
                if !hello.supports(ofproto::header::OFP_VERSION) {
                    tracing::warn!(peer = %self.peer, "switch does not offer OpenFlow 1.3 in its HELLO");
                    let err = hello_incompatible("only OpenFlow 1.3 is supported");
                    self.writer.write(Out::message(xid, Message::Error(err)));
                    ctx.stop();
                    return;
                }
                self.handshake_xid = self.xid();
                self.writer
                    .write(Out::message(self.handshake_xid, Message::FeaturesRequest));
                self.phase = Phase::AwaitFeatures;
            }
            Message::FeaturesReply(f) if self.phase == Phase::AwaitFeatures => {
                self.features = Some(f);
                // Table misses sent to the controller carry the whole packet.
                let xid = self.xid();
                self.writer.write(Out::message(
                    xid,
                    Message::SetConfig(SwitchConfig {
                        flags: 0,
                        miss_send_len: 0xffff,
                    }),
                ));
                self.handshake_xid = self.xid();
                self.writer.write(Out::message(
                    self.handshake_xid,
                    Message::MultipartRequest(MultipartRequest::new(
                        MultipartRequestBody::PortDesc,
                    )),
                ));
                self.phase = Phase::AwaitPortDesc;
            }
            Message::MultipartReply(reply)
                if self.phase == Phase::AwaitPortDesc && xid == self.handshake_xid =>
            {
                let more = reply.more();
                if let MultipartReplyBody::PortDesc(ports) = reply.body {
                    self.ports.extend(ports);
                }
                if !more {
                    self.handshake_done(ctx);
                }
            }
            Message::PacketIn(packet_in) => {
                if let Some(info) = &self.info {
                    self.notify(SwitchEvent::PacketIn {
                        dpid: info.dpid,
                        packet_in,
                    });
                }
            }
            Message::PortStatus(status) => {
                if let Some(info) = &self.info {
                    self.notify(SwitchEvent::PortStatus {
                        dpid: info.dpid,
                        status,
                    });
                }
            }
            Message::FlowRemoved(removed) => {
                if let Some(info) = &self.info {
                    self.notify(SwitchEvent::FlowRemoved {
                        dpid: info.dpid,
                        removed,
                    });
                }
            }
            Message::Error(err) => self.on_error(xid, err),
            // Replies to our keepalive echoes are awaited by nobody; a caller's echo is.
            Message::EchoReply(_) if !self.replies.contains_key(&xid) => {}
            other => self.on_reply(xid, other),
        }
    }

    fn handshake_done(&mut self, ctx: &mut Context<Self>) {
        let Some(features) = self.features else {
            ctx.stop();
            return;
        };
        let info = Arc::new(SwitchInfo {
            dpid: features.datapath_id,
            peer: self.peer.clone(),
            features,
            ports: std::mem::take(&mut self.ports),
        });
        tracing::info!(dpid = %format_args!("{:#x}", info.dpid), peer = %self.peer, ports = info.ports.len(), "switch ready");
        self.info = Some(info.clone());
        self.phase = Phase::Ready;
        self.notify(SwitchEvent::Connected(SwitchHandle {
            addr: ctx.address(),
            info,
        }));
    }

    fn on_reply(&mut self, xid: u32, msg: Message) {
        if let Some((tx, role)) = self.tx_of(xid) {
            match role {
                TxRole::Final => self.finish_tx(tx),
                TxRole::Open | TxRole::Request(_) => {}
            }
            return;
        }
        let Some(mut pending) = self.replies.remove(&xid) else {
            tracing::debug!(peer = %self.peer, xid, "reply nobody waits for: {}", crate::error::describe(&msg));
            return;
        };
        let more = matches!(&msg, Message::MultipartReply(r) if r.more());
        pending.parts.push(msg);
        if more {
            self.replies.insert(xid, pending);
        } else {
            let _ = pending.reply.send(Ok(pending.parts));
        }
    }

    fn on_error(&mut self, xid: u32, err: ErrorMsg) {
        if let Some((tx, role)) = self.tx_of(xid) {
            if let Some(t) = self.txs.get_mut(&tx) {
                match role {
                    TxRole::Request(index) => t.failures.push(RequestFailure {
                        index,
                        xid,
                        request: t.requests[index].to_message(),
                        error: err,
                    }),
                    TxRole::Open => t.bundle_error = Some(err),
                    TxRole::Final => {
                        t.bundle_error.get_or_insert(err);
                        self.finish_tx(tx);
                    }
                }
            }
            return;
        }
        match self.replies.remove(&xid) {
            Some(p) => {
                let _ = p.reply.send(Err(SwitchError::Rejected {
                    request: crate::error::describe(&p.request),
                    error: err,
                }));
            }
            None => {
                tracing::warn!(peer = %self.peer, xid, error = %err, "switch reported an error for a message nobody waits for")
            }
        }
    }

    fn finish_tx(&mut self, id: u64) {
        let Some(t) = self.txs.remove(&id) else {
            return;
        };
        for xid in &t.xids {
            self.tx_xids.remove(xid);
        }
        self.tx_ranges.retain(|r| r.tx != id);
        let result = if t.failures.is_empty() && t.bundle_error.is_none() {
            Ok(())
        } else {
            Err(TxError::Rejected {
                failures: t.failures,
                bundle: t.bundle_error,
            })
        };
        let _ = t.reply.send(result);
    }
}

/// OFPET_HELLO_FAILED / OFPHFC_INCOMPATIBLE with a human explanation (the spec asks for ASCII
/// text in the data of a hello failure).
fn hello_incompatible(why: &'static str) -> ErrorMsg {
    ErrorMsg {
        kind: ofproto::ErrorKind::Standard {
            err_type: 0,
            code: 0,
        },
        data: Bytes::from_static(why.as_bytes()),
    }
}
