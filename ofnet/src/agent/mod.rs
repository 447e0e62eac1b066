//! The agent of one bridge: the actor that owns the bridge's datapath logic and is the only
//! writer of its flows.
//!
//! An [`Agent`] holds the datapath ([`VlanBridge`] or [`VxlanBridge`]), the latest endpoint-DB
//! snapshot, its own settings (uplinks, VTEPs, policy rules, ARP mode, services), the `ofctrl`
//! bridge and the flows that bridge holds, by owner. Every API call is one [`Update`]: the endpoint DB
//! applies its part, the datapath recomputes the parts of the owners the change touches (all of
//! them for networks and VTEPs), and only the difference goes to `ofctrl` as one transaction.
//! The call returns once the switch confirmed it (or once it was recorded, if no switch is connected: it goes out on connect). If the switch refuses, the
//! endpoint DB and the settings are put back, so the state always describes what is installed.
//! Updates apply in the order they were sent; the ones that wait while the switch confirms a
//! transaction go together as the next one, each keeping its own answer (`batch.rs`).
//!
//! The agent also receives the listener's switch events: ARP requests punted by the input
//! table are answered or re-injected ([`crate::arp`]); the connected switch is remembered for
//! packet-outs.
//!
//! Other crates use [`AgentHandle`] (`handle.rs`). `ops.rs` holds the operations and how each
//! splits into an endpoint-DB change, a settings change and the owners it touches;
//! `service.rs` serves the agent's RPC methods; `svcproxy.rs` answers connections to service
//! ports without providers and serves service statistics.

mod batch;
mod handle;
mod ops;
mod service;
mod svcproxy;
pub use service::AgentService;

pub use handle::AgentHandle;
pub use ops::AgentOp;
use ops::{SettingsUndo, Touched, apply_settings, endpoint_op, touched};

use crate::arp;
use crate::datapath::{
    Datapath, DatapathError, Desired, HeldPart, HostNatPort, Owner, PacketOut, RouterPort,
    Settings, Topology, host::HostAccessPort, service_owners,
};
use crate::epdb::{self, EndpointDb, EndpointDbError, EndpointOp, EndpointTable};
use crate::flows::policy::rule_flows;
use crate::inspect::{self, AgentExport};
use crate::model::{
    ArpMode, Bandwidth, BridgeKind, Endpoint, FwdMode, LocalEndpoint, MacAddr, Network, Node,
    PolicyRule,
};
use crate::netpol::{NetworkPolicy, PolicyRefused};
use crate::pipeline::id;
use crate::rpc::{self, Peer, RpcServer};
use crate::service::stats::ServiceStats;
use crate::service::{ServiceError, ServiceSpec, Services};
use crate::{VlanBridge, VlrouterBridge, VrouterBridge, VxlanBridge};
use actix::prelude::*;
use bytes::Bytes;
use ofctrl::{
    BridgeConfig, BridgeHandle, Listener, SwitchEvent, SwitchHandle, SwitchOptions, TxError,
};
use ofproto::action::Action;
use ofproto::nxm;
use ofproto::oxm::FieldId;
use ofproto::port::OFPP_CONTROLLER;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How to run an agent.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub kind: BridgeKind,
    /// Bridging or routing: with `kind`, which datapath the bridge runs (`vlan`, `vxlan`,
    /// `vrouter`).
    pub fwd_mode: FwdMode,
    /// The OVS bridge name (logs, inspect).
    pub bridge: String,
    /// This host's VTEP address: recorded as the originator of local endpoints; remote
    /// endpoints carrying it are this host's own and ignored.
    pub local_ip: Option<Ipv4Addr>,
    /// The address masters call this agent back on (`RegisterNode`'s `HostAddr`); `local_ip`
    /// when `None`. Contiv used the VTEP address; a host whose VTEP is not reachable from the
    /// master (emulated hosts) gives its control address.
    pub rpc_addr: Option<std::net::IpAddr>,
    pub arp_mode: ArpMode,
    /// Background gratuitous-ARP rounds for an endpoint group with its own VLAN, after one of
    /// its endpoints is added (VLAN bridge; reference: 15 rounds, 3 s apart).
    pub garp_repeats: u32,
    pub garp_interval: Duration,
    /// Inline DNS: where local endpoints' DNS queries go (punted in table 1); `None`: they
    /// are forwarded like any packet.
    pub dns: Option<tokio::sync::mpsc::UnboundedSender<DnsQuery>>,
}

/// A DNS query a local endpoint sent, as punted to the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsQuery {
    /// The endpoint's OpenFlow port.
    pub in_port: u32,
    /// The whole Ethernet frame.
    pub frame: Vec<u8>,
}

/// Send a frame out of a port (an answer to a punted packet).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct SendFrame {
    pub port: u32,
    pub frame: Vec<u8>,
}

impl AgentConfig {
    /// The datapath this configuration runs.
    pub fn datapath(&self) -> Box<dyn Datapath> {
        match (self.kind, self.fwd_mode) {
            (BridgeKind::Vxlan, FwdMode::Routing) => Box::new(VrouterBridge),
            (BridgeKind::Vxlan, FwdMode::Bridge) => Box::new(VxlanBridge),
            (BridgeKind::Vlan, FwdMode::Routing) => Box::new(VlrouterBridge),
            (BridgeKind::Vlan, FwdMode::Bridge) => Box::new(VlanBridge),
            (BridgeKind::Host, _) => Box::new(crate::datapath::host::HostBridge),
        }
    }

    pub fn new(kind: BridgeKind, bridge: impl Into<String>) -> AgentConfig {
        AgentConfig {
            kind,
            fwd_mode: FwdMode::Bridge,
            bridge: bridge.into(),
            local_ip: None,
            rpc_addr: None,
            arp_mode: ArpMode::Proxy,
            garp_repeats: 15,
            garp_interval: Duration::from_secs(3),
            dns: None,
        }
    }
}

/// Why an agent call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    EndpointDb(#[from] EndpointDbError),
    #[error(transparent)]
    Datapath(#[from] DatapathError),
    #[error("the switch refused the flows: {0}")]
    Switch(#[from] TxError),
    #[error("rule {0} already exists with different fields")]
    RuleExists(String),
    #[error("no rule {0}")]
    NoRule(String),
    #[error("no uplink on port {0}")]
    NoUplink(u32),
    #[error("no VTEP for {0}")]
    NoVtep(Ipv4Addr),
    #[error("port {port} is already VTEP {ip}")]
    VtepPortInUse { port: u32, ip: Ipv4Addr },
    #[error("{what} does not apply to a {kind} bridge")]
    WrongBridge {
        what: &'static str,
        kind: &'static str,
    },
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    PolicyRefused(#[from] PolicyRefused),
    #[error("service statistics: {0}")]
    Stats(ofctrl::SwitchError),
    #[error("master address {0} is not ip:port")]
    BadMaster(String),
    #[error(transparent)]
    Rpc(#[from] rpc::RpcError),
    #[error("the agent is not running")]
    Stopped,
}

/// Apply one [`AgentOp`].
#[derive(Debug, Message)]
#[rtype(result = "Result<(), AgentError>")]
pub struct Update(pub AgentOp);

/// Send gratuitous ARPs for the local endpoints of an endpoint group (VLAN bridge).
#[derive(Debug, Message)]
#[rtype(result = "usize")]
pub struct InjectGarps(pub u16);

/// The agent's state in the reference's inspect shape.
#[derive(Debug, Message)]
#[rtype(result = "AgentExport")]
pub struct Inspect;

/// What the agent holds, counted (cheap: no flow is computed, nothing is asked of the switch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentCounts {
    /// Endpoints on this bridge, this host's and other hosts'.
    pub endpoints: usize,
    /// Policy rules.
    pub rules: usize,
    /// Load-balanced services with a spec.
    pub services: usize,
    /// Providers over all services (each service's usable providers).
    pub service_providers: usize,
}

/// Ask for [`AgentCounts`].
#[derive(Debug, Message)]
#[rtype(result = "AgentCounts")]
pub struct Counts;

/// Register with a master (the reference's `OfnetAgent.AddMaster`): announce this agent and
/// its local endpoints to it, and from now on every local endpoint change.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), AgentError>")]
pub struct AddMaster(pub Node);

/// The port the agent's RPC server listens on (told to masters at registration).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct SetRpcPort(pub(crate) u16);

/// Forget a master (it stopped leading or went away): its connection and queue are dropped.
#[derive(Debug, Message)]
#[rtype(result = "bool")]
pub struct RemoveMaster(pub String);

/// Leave every master (the reference's shutdown: `OfnetMaster.UnRegisterNode`), so they stop
/// relaying to this agent. Each master gets a short time to answer.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Unregister;

impl Handler<Unregister> for Agent {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Unregister, _: &mut Context<Self>) -> Self::Result {
        let me = self.me();
        let peers: Vec<Peer> = std::mem::take(&mut self.masters)
            .into_values()
            .map(|(_, p)| p)
            .collect();
        Box::pin(async move {
            for peer in peers {
                let leave = peer.call::<_, serde_json::Value>("OfnetMaster.UnRegisterNode", &me);
                if let Err(e) = tokio::time::timeout(Duration::from_secs(2), leave).await {
                    tracing::warn!(master = %peer.addr(), error = %e, "UnRegisterNode not answered");
                }
                peer.close();
            }
        })
    }
}

impl Handler<RemoveMaster> for Agent {
    type Result = bool;

    fn handle(&mut self, RemoveMaster(key): RemoveMaster, _: &mut Context<Self>) -> bool {
        match self.masters.remove(&key) {
            Some((_, peer)) => {
                peer.close();
                true
            }
            None => false,
        }
    }
}

/// One background gratuitous-ARP round of an endpoint group; schedules the next.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct GarpRound(u16);

/// The flows the bridge holds besides the miss flows, in `ovs-ofctl` syntax.
#[derive(Debug, Message)]
#[rtype(result = "(Vec<String>, Vec<String>)")]
pub struct InstalledFlows;

/// The desired tables as data for `netctl trace` (see [`crate::trace`]).
#[derive(Debug, Message)]
#[rtype(result = "crate::trace::TableSet")]
pub struct TraceTables;

/// See the module documentation.
pub struct Agent {
    config: AgentConfig,
    datapath: Box<dyn Datapath>,
    bridge: BridgeHandle,
    epdb: Addr<EndpointDb>,
    endpoints: Arc<EndpointTable>,
    settings: Settings,
    installed: Desired,
    switch: Option<SwitchHandle>,
    stats: BTreeMap<String, u64>,
    /// Endpoint groups in background GARP, with their remaining rounds.
    garp_rounds: BTreeMap<u16, u32>,
    /// Masters by `host:port`.
    masters: BTreeMap<String, (Node, Peer)>,
    rpc_port: u16,
    /// Updates waiting for their batch (`batch.rs`).
    updates: batch::UpdateQueue,
}

impl Actor for Agent {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Next hops that did not answer yet are asked again (VLAN router; nothing otherwise).
        ctx.run_interval(Duration::from_secs(1), |act, _| act.resolve_next_hops());
    }
}

/// New parts by owner, and the switch changes that install them.
type Recomputed = (Vec<(Owner, HeldPart)>, Vec<ofctrl::Change>);

impl Agent {
    fn topology(&self) -> Topology<'_> {
        Topology {
            endpoints: &self.endpoints,
            settings: &self.settings,
        }
    }

    fn count(&mut self, counter: &str) {
        *self.stats.entry(counter.to_string()).or_default() += 1;
    }

    /// New parts for the owners an op touched and the switch changes they need.
    fn recompute(&self, touched: Touched) -> Result<Recomputed, AgentError> {
        let topo = self.topology();
        let owners = touched.owners(&self.installed, self.datapath.as_ref(), &topo);
        let updates = owners
            .into_iter()
            .map(|o| {
                let part = self.datapath.part(&topo, &o)?;
                Ok((o, part.into()))
            })
            .collect::<Result<Vec<_>, DatapathError>>()?;
        let changes = self.installed.plan(&updates)?;
        Ok((updates, changes))
    }

    /// Side effects after an op was installed (VLAN bridge): announce a new endpoint on the
    /// uplink, and keep announcing its group for a while if the group has its own VLAN; on a
    /// switch to flood mode, announce every endpoint (the physical network must learn them).
    fn after(&mut self, op: &AgentOp, removed: Option<Endpoint>, ctx: &mut Context<Self>) {
        self.announce(op, removed);
        if matches!(op, AgentOp::AddRoute { .. } | AgentOp::SetRouter(_)) {
            self.resolve_next_hops();
        }
        // Routing announces nothing at layer 2: the uplink only sees the router port.
        if self.config.kind != BridgeKind::Vlan || self.datapath.router_mac().is_some() {
            return;
        }
        match op {
            AgentOp::AddLocalEndpoint(l) => {
                let Some(ep) = self.endpoints.local(l.port_no).cloned() else {
                    return;
                };
                if let Some(out) = arp::garp(&self.topology(), &ep) {
                    self.send_packets(vec![out]);
                    self.count("GarpSent");
                }
                if let Some(out) = arp::unsolicited_na(&self.topology(), &ep) {
                    self.send_packets(vec![out]);
                    self.count("UnsolicitedNaSent");
                }
                if ep.endpoint_group_vlan != 0 && self.config.garp_repeats > 0 {
                    let fresh = self
                        .garp_rounds
                        .insert(ep.endpoint_group, self.config.garp_repeats)
                        .is_none();
                    if fresh {
                        ctx.notify_later(GarpRound(ep.endpoint_group), self.config.garp_interval);
                    }
                }
            }
            AgentOp::SetArpMode(ArpMode::Flood) => {
                let topo = self.topology();
                let packets: Vec<PacketOut> = self
                    .endpoints
                    .locals()
                    .filter_map(|e| arp::garp(&topo, e))
                    .collect();
                self.send_garps(packets);
            }
            _ => {}
        }
    }

    /// Tell every master about a local endpoint that was added, changed or removed.
    fn announce(&mut self, op: &AgentOp, removed: Option<Endpoint>) {
        let (method, ep) = match (op, removed) {
            (AgentOp::AddLocalEndpoint(l), _) => (
                "OfnetMaster.EndpointAdd",
                self.endpoints.local(l.port_no).cloned(),
            ),
            (AgentOp::RemoveLocalEndpoint(_), removed) => ("OfnetMaster.EndpointDel", removed),
            _ => return,
        };
        let Some(ep) = ep else {
            return;
        };
        for (master, peer) in self.masters.values() {
            if let Err(e) = peer.notify(method, &ep) {
                // A master that cannot keep up gets the full state when it reconnects.
                tracing::warn!(master = %master.key(), error = %e, "endpoint announcement dropped");
            }
        }
        if !self.masters.is_empty() {
            self.count(if method.ends_with("Add") {
                "EndpointAddSent"
            } else {
                "EndpointDelSent"
            });
        }
    }

    fn send_garps(&mut self, packets: Vec<PacketOut>) -> usize {
        let n = packets.len();
        *self.stats.entry("GarpSent".into()).or_default() += n as u64;
        self.send_packets(packets);
        n
    }

    fn group_garps(&self, epg: u16) -> Vec<PacketOut> {
        let topo = self.topology();
        self.endpoints
            .locals()
            .filter(|e| e.endpoint_group == epg)
            .filter_map(|e| arp::garp(&topo, e))
            .collect()
    }

    fn send_packets(&self, packets: Vec<PacketOut>) {
        let Some(switch) = self.switch.clone().filter(SwitchHandle::connected) else {
            return;
        };
        actix::spawn(async move {
            for p in packets {
                if let Err(e) = switch
                    .packet_out(OFPP_CONTROLLER, p.actions, Bytes::from(p.data))
                    .await
                {
                    tracing::warn!(error = %e, "packet-out failed");
                }
            }
        });
    }

    /// ARP requests for the next hops whose MAC is not known yet, out the uplink from the
    /// router port (VLAN router). Their answers come back through [`Agent::learn_neighbor`].
    fn resolve_next_hops(&mut self) {
        let s = &self.settings;
        let (Some(router), Some(uplink)) = (s.router, VlrouterBridge::uplink(&self.topology()))
        else {
            return;
        };
        let unresolved: BTreeSet<Ipv4Addr> = s
            .routes
            .values()
            .filter(|nh| !s.neighbors.contains_key(nh))
            .copied()
            .collect();
        let packets: Vec<PacketOut> = unresolved
            .into_iter()
            .map(|nh| PacketOut {
                actions: vec![ofproto::action::Action::output(uplink)],
                data: ofproto::packet::frame::arp_request(
                    ofproto::packet::ethernet::EthernetAddress(router.mac.octets()),
                    router.ip,
                    nh,
                    None,
                ),
            })
            .collect();
        if !packets.is_empty() {
            *self.stats.entry("NextHopArpSent".into()).or_default() += packets.len() as u64;
            self.send_packets(packets);
        }
    }

    /// An ARP packet from the uplink (VLAN router): when its sender is a next hop of a learned
    /// route with a MAC not yet known (or changed), learn it.
    fn learn_neighbor(&mut self, data: &[u8], ctx: &mut Context<Self>) {
        let Ok((_, arp)) = ofproto::packet::frame::parse_arp(data) else {
            return;
        };
        let ip = arp.source_protocol_addr;
        let mac = MacAddr(arp.source_hardware_addr.0);
        let s = &self.settings;
        if !s.routes.values().any(|nh| *nh == ip) || s.neighbors.get(&ip) == Some(&mac) {
            return;
        }
        self.count("NextHopLearned");
        ctx.address()
            .do_send(Update(AgentOp::LearnNeighbor { ip, mac }));
    }

    fn on_packet_in(&mut self, packet_in: &ofproto::packet_in::PacketIn, ctx: &mut Context<Self>) {
        self.count("PktRcvd");
        let Some(in_port) = packet_in.in_port() else {
            return;
        };
        if self.datapath.router_mac().is_some()
            && self.config.kind == BridgeKind::Vlan
            && self.settings.uplinks.contains(&in_port)
        {
            self.learn_neighbor(&packet_in.data, ctx);
            return;
        }
        if packet_in.table_id == id::SERVICE_DNAT {
            self.on_service_reject(in_port, &packet_in.data);
            return;
        }
        if packet_in.table_id == id::VLAN {
            // Table 1 punts only local endpoints' DNS queries.
            self.count("DnsQueryRcvd");
            if let Some(dns) = &self.config.dns {
                let _ = dns.send(DnsQuery {
                    in_port,
                    frame: packet_in.data.to_vec(),
                });
            }
            return;
        }
        let tun_id = packet_in
            .matching
            .get(FieldId::TUNNEL_ID)
            .or_else(|| packet_in.matching.get(nxm::TUN_ID))
            .map(|f| f.value_u128() as u64);
        if crate::nd::is_ipv6(&packet_in.data) {
            self.count("NdSolicitRcvd");
            let (packets, outcome) = crate::nd::handle_solicit(
                self.datapath.as_ref(),
                &self.topology(),
                in_port,
                tun_id,
                &packet_in.data,
            );
            tracing::debug!(bridge = %self.config.bridge, in_port, ?outcome, "neighbour solicitation");
            self.count(outcome.counter());
            self.send_packets(packets);
            return;
        }
        self.count("ArpReqRcvd");
        let (packets, outcome) = arp::handle_request(
            self.datapath.as_ref(),
            &self.topology(),
            in_port,
            tun_id,
            &packet_in.data,
        );
        tracing::debug!(bridge = %self.config.bridge, in_port, ?outcome, "ARP request");
        self.count(outcome.counter());
        self.send_packets(packets);
    }
}

impl Handler<SwitchEvent> for Agent {
    type Result = ();

    fn handle(&mut self, event: SwitchEvent, ctx: &mut Context<Self>) {
        match event {
            SwitchEvent::Connected(handle) => {
                self.count("SwitchConnected");
                self.switch = Some(handle);
            }
            SwitchEvent::Disconnected { dpid, .. } => {
                if self.switch.as_ref().is_some_and(|s| s.dpid() == dpid) {
                    self.switch = None;
                }
            }
            SwitchEvent::PacketIn { packet_in, .. } => self.on_packet_in(&packet_in, ctx),
            SwitchEvent::PortStatus { .. } | SwitchEvent::FlowRemoved { .. } => {}
        }
    }
}

impl Handler<AddMaster> for Agent {
    type Result = ResponseActFuture<Self, Result<(), AgentError>>;

    fn handle(&mut self, AddMaster(master): AddMaster, ctx: &mut Context<Self>) -> Self::Result {
        let Some(addr) = master.socket_addr() else {
            return Box::pin(fut::ready(Err(AgentError::BadMaster(master.key()))));
        };
        // Every new connection (the first, and after the master restarted) registers and
        // re-announces the local endpoints before anything else.
        let me = ctx.address();
        let greeting: rpc::Greeting = std::rc::Rc::new(move || {
            let me = me.clone();
            Box::pin(async move { me.send(RegistrationCalls).await.unwrap_or_default() })
        });
        let peer = Peer::with_greeting(addr, greeting);
        let key = master.key();
        self.masters.insert(key.clone(), (master, peer.clone()));
        Box::pin(async move { peer.connect().await }.into_actor(self).map(
            move |connected, act, _| {
                connected.map_err(|e| {
                    act.masters.remove(&key);
                    AgentError::Rpc(e)
                })
            },
        ))
    }
}

/// What a new connection to a master starts with: registration, then every local endpoint.
#[derive(Debug, Message)]
#[rtype(result = "Vec<(String, serde_json::Value)>")]
struct RegistrationCalls;

impl Handler<RegistrationCalls> for Agent {
    type Result = MessageResult<RegistrationCalls>;

    fn handle(&mut self, _: RegistrationCalls, _: &mut Context<Self>) -> Self::Result {
        let me = self.me();
        let mut calls = vec![(
            "OfnetMaster.RegisterNode".to_string(),
            serde_json::to_value(me).unwrap_or_default(),
        )];
        for ep in self.endpoints.locals() {
            if let Ok(v) = serde_json::to_value(ep) {
                calls.push(("OfnetMaster.EndpointAdd".to_string(), v));
            }
        }
        MessageResult(calls)
    }
}

impl Agent {
    /// This agent as masters know it (`RegisterNode`'s argument).
    fn me(&self) -> Node {
        Node {
            host_addr: self
                .config
                .rpc_addr
                .or(self.config.local_ip.map(std::net::IpAddr::V4))
                .map(|a| a.to_string())
                .unwrap_or_default(),
            host_port: self.rpc_port,
        }
    }
}

impl Handler<SetRpcPort> for Agent {
    type Result = ();

    fn handle(&mut self, SetRpcPort(port): SetRpcPort, _: &mut Context<Self>) {
        self.rpc_port = port;
    }
}

impl Handler<SendFrame> for Agent {
    type Result = ();

    fn handle(&mut self, SendFrame { port, frame }: SendFrame, _: &mut Context<Self>) {
        self.send_packets(vec![PacketOut {
            actions: vec![Action::output(port)],
            data: frame,
        }]);
    }
}

impl Handler<InjectGarps> for Agent {
    type Result = usize;

    fn handle(&mut self, InjectGarps(epg): InjectGarps, _: &mut Context<Self>) -> usize {
        if self.config.kind != BridgeKind::Vlan {
            return 0;
        }
        let packets = self.group_garps(epg);
        self.send_garps(packets)
    }
}

impl Handler<GarpRound> for Agent {
    type Result = ();

    fn handle(&mut self, GarpRound(epg): GarpRound, ctx: &mut Context<Self>) {
        let Some(left) = self.garp_rounds.get_mut(&epg) else {
            return;
        };
        *left = left.saturating_sub(1);
        let more = *left > 0;
        if !more {
            self.garp_rounds.remove(&epg);
        }
        let packets = self.group_garps(epg);
        self.send_garps(packets);
        if more {
            ctx.notify_later(GarpRound(epg), self.config.garp_interval);
        }
    }
}

impl Handler<Inspect> for Agent {
    type Result = MessageResult<Inspect>;

    fn handle(&mut self, _: Inspect, _: &mut Context<Self>) -> Self::Result {
        let masters: Vec<Node> = self.masters.values().map(|(n, _)| n.clone()).collect();
        MessageResult(inspect::export(
            &self.config,
            &self.endpoints,
            &self.settings,
            inspect::Live {
                datapath: self.datapath.as_ref(),
                connected: self.switch.as_ref().is_some_and(SwitchHandle::connected),
                stats: &self.stats,
                masters: &masters,
                rpc_port: self.rpc_port,
            },
        ))
    }
}

impl Handler<Counts> for Agent {
    type Result = MessageResult<Counts>;

    fn handle(&mut self, _: Counts, _: &mut Context<Self>) -> Self::Result {
        let services = &self.settings.services;
        MessageResult(AgentCounts {
            endpoints: self.endpoints.endpoints().count(),
            rules: self.settings.rules.len(),
            services: services.iter().filter(|(_, s)| s.spec.is_some()).count(),
            service_providers: services
                .iter()
                .map(|(_, s)| s.usable_providers().count())
                .sum(),
        })
    }
}

impl Handler<TraceTables> for Agent {
    type Result = MessageResult<TraceTables>;

    fn handle(&mut self, _: TraceTables, _: &mut Context<Self>) -> Self::Result {
        use crate::trace::{PortRole, TableSet};
        let mut t = TableSet::new(self.config.bridge.clone());
        t.host = self.config.local_ip;
        for spec in self.datapath.pipeline().table_specs() {
            t.names.insert(spec.id, spec.name.to_string());
            t.add_flow(
                ofctrl::bridge::miss_flow(&spec),
                Some("the table's miss flow".into()),
                None,
            );
        }
        for (owner, flow) in self.installed.owned_flows() {
            let rule = match owner {
                Owner::Rule(id) => Some(id.clone()),
                Owner::Netpol(o) => match o.as_ref() {
                    crate::netpol::compile::FlowOwner::Conj(c) => self
                        .settings
                        .netpols
                        .rule_of_conj(*c)
                        .map(|(p, d, i)| format!("{p} {} rule {i}", d.name())),
                    _ => None,
                },
                _ => None,
            };
            t.add_flow(flow.clone(), Some(owner.to_string()), rule);
        }
        for g in self.installed.groups() {
            t.add_group(g.clone());
        }
        for ep in self.endpoints.locals() {
            t.ports.insert(
                ep.port_no,
                PortRole::Endpoint {
                    id: ep.endpoint_id.clone(),
                    ipv4: ep.ip_addr,
                    ipv6: ep.ipv6_addr,
                    mac: ep.mac,
                    epg: ep.endpoint_group,
                },
            );
        }
        for (ip, port) in &self.settings.vteps {
            t.ports.insert(*port, PortRole::Vtep { remote: *ip });
        }
        for port in &self.settings.uplinks {
            t.ports.insert(*port, PortRole::Uplink);
        }
        for vrf in self.endpoints.vrfs() {
            t.vrfs.insert(vrf.vrf_id, vrf.vrf_name.clone());
        }
        for ep in self.endpoints.endpoints() {
            let host = if ep.port_no != 0 {
                self.config.local_ip
            } else {
                ep.originator_ip
            };
            let ips = ep
                .ip_addr
                .map(std::net::IpAddr::V4)
                .into_iter()
                .chain(ep.ipv6_addr.map(std::net::IpAddr::V6));
            for ip in ips {
                t.endpoints
                    .insert((ep.vrf.clone(), ip), (ep.endpoint_id.clone(), host));
            }
        }
        MessageResult(t)
    }
}

impl Handler<InstalledFlows> for Agent {
    type Result = MessageResult<InstalledFlows>;

    fn handle(&mut self, _: InstalledFlows, _: &mut Context<Self>) -> Self::Result {
        MessageResult((self.installed.flow_lines(), self.installed.group_lines()))
    }
}
