//! The agent of one bridge: the actor that owns the bridge's datapath logic and is the only
//! writer of its flows.
//!
//! An [`Agent`] holds the datapath ([`VlanBridge`] or [`VxlanBridge`]), the latest endpoint-DB
//! snapshot, its own settings (uplinks, VTEPs, policy rules, ARP mode), the `ofctrl` bridge and
//! the flows that bridge holds, by owner. Every API call is one [`Update`]: the endpoint DB
//! applies its part, the datapath recomputes the parts of the owners the change touches (all of
//! them for networks and VTEPs), and only the difference goes to `ofctrl` as one transaction. The call returns once the switch confirmed it (or once it was
//! recorded, if no switch is connected: it goes out on connect). If the switch refuses, the
//! endpoint DB and the settings are put back, so the state always describes what is installed.
//! Updates run one at a time (the mailbox waits), so they apply in the order they were sent.
//!
//! The agent also receives the listener's switch events: ARP requests punted by the input
//! table are answered or re-injected ([`crate::arp`]); the connected switch is remembered for
//! packet-outs.
//!
//! Other crates use [`AgentHandle`].

use crate::arp;
use crate::datapath::{
    Datapath, DatapathError, Desired, Owner, PacketOut, Part, Settings, Topology,
};
use crate::epdb::{self, EndpointDb, EndpointDbError, EndpointOp, EndpointTable};
use crate::flows::policy::rule_flow;
use crate::inspect::{self, AgentExport};
use crate::model::{ArpMode, BridgeKind, Endpoint, LocalEndpoint, Network, Node, PolicyRule};
use crate::pipeline::id;
use crate::rpc::{self, Peer, RpcServer};
use crate::{VlanBridge, VxlanBridge};
use actix::prelude::*;
use bytes::Bytes;
use ofctrl::{
    BridgeConfig, BridgeHandle, Listener, SwitchEvent, SwitchHandle, SwitchOptions, TxError,
};
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
    /// The OVS bridge name (logs, inspect).
    pub bridge: String,
    /// This host's VTEP address: recorded as the originator of local endpoints; remote
    /// endpoints carrying it are this host's own and ignored.
    pub local_ip: Option<Ipv4Addr>,
    pub arp_mode: ArpMode,
    /// Background gratuitous-ARP rounds for an endpoint group with its own VLAN, after one of
    /// its endpoints is added (VLAN bridge; reference: 15 rounds, 3 s apart).
    pub garp_repeats: u32,
    pub garp_interval: Duration,
}

impl AgentConfig {
    pub fn new(kind: BridgeKind, bridge: impl Into<String>) -> AgentConfig {
        AgentConfig {
            kind,
            bridge: bridge.into(),
            local_ip: None,
            arp_mode: ArpMode::Proxy,
            garp_repeats: 15,
            garp_interval: Duration::from_secs(3),
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
    #[error("master address {0} is not ip:port")]
    BadMaster(String),
    #[error(transparent)]
    Rpc(#[from] rpc::RpcError),
    #[error("the agent is not running")]
    Stopped,
}

/// One change through the agent API.
#[derive(Debug, Clone)]
pub enum AgentOp {
    AddNetwork(Network),
    /// By VLAN.
    RemoveNetwork(u16),
    AddLocalEndpoint(LocalEndpoint),
    /// New DSCP of the local endpoint on `port` (0: stop marking).
    UpdateLocalEndpoint {
        port: u32,
        dscp: u8,
    },
    RemoveLocalEndpoint(u32),
    /// An endpoint of another host, as the master relays it.
    AddRemoteEndpoint(Endpoint),
    RemoveRemoteEndpoint(String),
    AddUplink(u32),
    RemoveUplink(u32),
    AddVtep {
        ip: Ipv4Addr,
        port: u32,
    },
    RemoveVtep(Ipv4Addr),
    SetArpMode(ArpMode),
    AddRule(PolicyRule),
    RemoveRule(String),
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

/// Register with a master (the reference's `OfnetAgent.AddMaster`): announce this agent and
/// its local endpoints to it, and from now on every local endpoint change.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), AgentError>")]
pub struct AddMaster(pub Node);

/// The port the agent's RPC server listens on (told to masters at registration).
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct SetRpcPort(u16);

/// One background gratuitous-ARP round of an endpoint group; schedules the next.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct GarpRound(u16);

/// The flows the bridge holds besides the miss flows, in `ovs-ofctl` syntax.
#[derive(Debug, Message)]
#[rtype(result = "(Vec<String>, Vec<String>)")]
pub struct InstalledFlows;

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
}

/// Handle to a running agent: the API other crates call.
#[derive(Clone)]
pub struct AgentHandle {
    addr: Addr<Agent>,
    bridge: BridgeHandle,
    kind: BridgeKind,
}

impl AgentHandle {
    /// Start the endpoint DB, the `ofctrl` bridge and the agent (inside an actix system).
    /// Connect switches with [`AgentHandle::listen_unix`] / [`AgentHandle::listen_tcp`], or
    /// subscribe [`AgentHandle::switch_events`] to a listener of your own.
    pub fn start(config: AgentConfig) -> AgentHandle {
        let datapath: Box<dyn Datapath> = match config.kind {
            BridgeKind::Vlan => Box::new(VlanBridge),
            BridgeKind::Vxlan => Box::new(VxlanBridge),
        };
        let bridge = BridgeHandle::start(BridgeConfig::new(
            config.bridge.clone(),
            datapath.pipeline().table_specs(),
        ));
        let epdb = EndpointDb::default().start();
        let settings = Settings {
            arp_mode: config.arp_mode,
            ..Settings::default()
        };
        let kind = config.kind;
        let agent = Agent {
            config,
            datapath,
            bridge: bridge.clone(),
            epdb,
            endpoints: Arc::new(EndpointTable::new()),
            settings,
            installed: Desired::new(),
            switch: None,
            stats: BTreeMap::new(),
            garp_rounds: BTreeMap::new(),
            masters: BTreeMap::new(),
            rpc_port: 0,
        };
        // The input table's ARP punt depends on the ARP mode alone: compute the empty state's
        // flows once so they are installed from the first connect.
        let addr = Agent::create(|ctx| {
            ctx.notify(Update(AgentOp::SetArpMode(agent.settings.arp_mode)));
            agent
        });
        AgentHandle { addr, bridge, kind }
    }

    pub fn kind(&self) -> BridgeKind {
        self.kind
    }

    /// The `ofctrl` bridge (status, switch handle).
    pub fn bridge(&self) -> &BridgeHandle {
        &self.bridge
    }

    /// Who must hear a listener's switch events: the bridge (reconciliation) and the agent
    /// (packet-ins).
    pub fn switch_events(&self) -> Vec<Recipient<SwitchEvent>> {
        vec![self.bridge.events(), self.addr.clone().recipient()]
    }

    /// Accept this bridge's switch on a unix socket (`ovs-vsctl set-controller br unix:PATH`).
    pub async fn listen_unix(&self, path: &Path) -> std::io::Result<Listener> {
        Listener::unix(path, SwitchOptions::default(), self.switch_events()).await
    }

    /// Accept this bridge's switch on TCP (`tcp:127.0.0.1:6634` in the reference).
    pub async fn listen_tcp(&self, addr: std::net::SocketAddr) -> std::io::Result<Listener> {
        Listener::tcp(addr, SwitchOptions::default(), self.switch_events()).await
    }

    pub async fn update(&self, op: AgentOp) -> Result<(), AgentError> {
        self.addr
            .send(Update(op))
            .await
            .map_err(|_| AgentError::Stopped)?
    }

    pub async fn add_network(&self, n: Network) -> Result<(), AgentError> {
        self.update(AgentOp::AddNetwork(n)).await
    }

    pub async fn remove_network(&self, vlan: u16) -> Result<(), AgentError> {
        self.update(AgentOp::RemoveNetwork(vlan)).await
    }

    pub async fn add_local_endpoint(&self, ep: LocalEndpoint) -> Result<(), AgentError> {
        self.update(AgentOp::AddLocalEndpoint(ep)).await
    }

    pub async fn update_local_endpoint(&self, port: u32, dscp: u8) -> Result<(), AgentError> {
        self.update(AgentOp::UpdateLocalEndpoint { port, dscp })
            .await
    }

    pub async fn remove_local_endpoint(&self, port: u32) -> Result<(), AgentError> {
        self.update(AgentOp::RemoveLocalEndpoint(port)).await
    }

    pub async fn add_remote_endpoint(&self, ep: Endpoint) -> Result<(), AgentError> {
        self.update(AgentOp::AddRemoteEndpoint(ep)).await
    }

    pub async fn remove_remote_endpoint(&self, id: impl Into<String>) -> Result<(), AgentError> {
        self.update(AgentOp::RemoveRemoteEndpoint(id.into())).await
    }

    pub async fn add_uplink(&self, port: u32) -> Result<(), AgentError> {
        self.update(AgentOp::AddUplink(port)).await
    }

    pub async fn remove_uplink(&self, port: u32) -> Result<(), AgentError> {
        self.update(AgentOp::RemoveUplink(port)).await
    }

    pub async fn add_vtep(&self, ip: Ipv4Addr, port: u32) -> Result<(), AgentError> {
        self.update(AgentOp::AddVtep { ip, port }).await
    }

    pub async fn remove_vtep(&self, ip: Ipv4Addr) -> Result<(), AgentError> {
        self.update(AgentOp::RemoveVtep(ip)).await
    }

    pub async fn set_arp_mode(&self, mode: ArpMode) -> Result<(), AgentError> {
        self.update(AgentOp::SetArpMode(mode)).await
    }

    pub async fn add_rule(&self, rule: PolicyRule) -> Result<(), AgentError> {
        self.update(AgentOp::AddRule(rule)).await
    }

    pub async fn remove_rule(&self, id: impl Into<String>) -> Result<(), AgentError> {
        self.update(AgentOp::RemoveRule(id.into())).await
    }

    /// Send gratuitous ARPs for the local endpoints of `epg`; returns how many were sent.
    pub async fn inject_garps(&self, epg: u16) -> Result<usize, AgentError> {
        self.addr
            .send(InjectGarps(epg))
            .await
            .map_err(|_| AgentError::Stopped)
    }

    /// Serve the agent's RPC methods (`OfnetAgent.*`, `PolicyAgent.*`) on `addr` (the
    /// reference uses port 9002 for the vxlan agent, 9003 for the vlan agent).
    pub async fn serve_rpc(&self, addr: std::net::SocketAddr) -> std::io::Result<RpcServer> {
        let server = rpc::serve(addr, AgentService(self.clone())).await?;
        self.addr.do_send(SetRpcPort(server.local_addr().port()));
        Ok(server)
    }

    /// Register with a master (see [`AddMaster`]).
    pub async fn add_master(&self, master: Node) -> Result<(), AgentError> {
        self.addr
            .send(AddMaster(master))
            .await
            .map_err(|_| AgentError::Stopped)?
    }

    /// The agent's state in the reference's inspect shape.
    pub async fn inspect(&self) -> Result<AgentExport, AgentError> {
        self.addr
            .send(Inspect)
            .await
            .map_err(|_| AgentError::Stopped)
    }

    /// The flows (sorted) and groups the agent installed, in `ovs-ofctl` syntax.
    pub async fn installed_flows(&self) -> Result<(Vec<String>, Vec<String>), AgentError> {
        self.addr
            .send(InstalledFlows)
            .await
            .map_err(|_| AgentError::Stopped)
    }
}

impl Actor for Agent {
    type Context = Context<Self>;
}

/// How an op splits into an endpoint-DB change and a settings change.
fn endpoint_op(op: &AgentOp, local_ip: Option<Ipv4Addr>) -> Option<EndpointOp> {
    Some(match op {
        AgentOp::AddNetwork(n) => EndpointOp::AddNetwork(n.clone()),
        AgentOp::RemoveNetwork(v) => EndpointOp::RemoveNetwork(*v),
        AgentOp::AddLocalEndpoint(e) => EndpointOp::AddLocal {
            endpoint: e.clone(),
            originator: local_ip,
        },
        AgentOp::UpdateLocalEndpoint { port, dscp } => EndpointOp::UpdateLocal {
            port: *port,
            dscp: *dscp,
        },
        AgentOp::RemoveLocalEndpoint(p) => EndpointOp::RemoveLocal(*p),
        AgentOp::AddRemoteEndpoint(e) => EndpointOp::AddRemote(e.clone()),
        AgentOp::RemoveRemoteEndpoint(id) => EndpointOp::RemoveRemote(id.clone()),
        _ => return None,
    })
}

/// New parts by owner, and the switch changes that install them.
type Recomputed = (Vec<(Owner, Part)>, Vec<ofctrl::Change>);

/// The owners whose flows an op can change; `None` when it can change any (networks change
/// VRFs, VTEPs change every network and remote endpoint: rare, so recompute everything).
fn touched(op: &AgentOp, before: &EndpointTable, after: &EndpointTable) -> Option<Vec<Owner>> {
    Some(match op {
        AgentOp::AddNetwork(_)
        | AgentOp::RemoveNetwork(_)
        | AgentOp::AddVtep { .. }
        | AgentOp::RemoveVtep(_) => return None,
        AgentOp::AddLocalEndpoint(l) => {
            let mut v = vec![Owner::LocalEndpoint(l.port_no), Owner::Network(l.vlan)];
            // A remote endpoint with the same id that moved here is replaced.
            if let Some(ep) = after.local(l.port_no) {
                v.push(Owner::RemoteEndpoint(ep.endpoint_id.clone()));
            }
            v
        }
        AgentOp::UpdateLocalEndpoint { port, .. } => vec![Owner::LocalEndpoint(*port)],
        AgentOp::RemoveLocalEndpoint(port) => {
            let mut v = vec![Owner::LocalEndpoint(*port)];
            if let Some(ep) = before.local(*port) {
                v.push(Owner::Network(ep.vlan));
            }
            v
        }
        AgentOp::AddRemoteEndpoint(ep) => vec![Owner::RemoteEndpoint(ep.endpoint_id.clone())],
        AgentOp::RemoveRemoteEndpoint(id) => vec![Owner::RemoteEndpoint(id.clone())],
        AgentOp::AddUplink(p) | AgentOp::RemoveUplink(p) => vec![Owner::Uplink(*p)],
        AgentOp::SetArpMode(_) => vec![Owner::Input],
        AgentOp::AddRule(r) => vec![Owner::Rule(r.rule_id.clone())],
        AgentOp::RemoveRule(id) => vec![Owner::Rule(id.clone())],
    })
}

/// Apply the settings part of an op to `s`, checked; on error `s` is unchanged.
fn apply_settings(
    datapath: &dyn Datapath,
    s: &mut Settings,
    op: &AgentOp,
) -> Result<(), AgentError> {
    let kind = datapath.kind();
    let only = |want: BridgeKind, what: &'static str| {
        if kind == want {
            Ok(())
        } else {
            Err(AgentError::WrongBridge {
                what,
                kind: kind.name(),
            })
        }
    };
    match op {
        AgentOp::AddUplink(p) => {
            only(BridgeKind::Vlan, "an uplink")?;
            s.uplinks.insert(*p);
        }
        AgentOp::RemoveUplink(p) => {
            s.uplinks
                .remove(p)
                .then_some(())
                .ok_or(AgentError::NoUplink(*p))?;
        }
        AgentOp::AddVtep { ip, port } => {
            only(BridgeKind::Vxlan, "a VTEP")?;
            if let Some((other, _)) = s.vteps.iter().find(|(i, p)| *p == port && *i != ip) {
                return Err(AgentError::VtepPortInUse {
                    port: *port,
                    ip: *other,
                });
            }
            s.vteps.insert(*ip, *port);
        }
        AgentOp::RemoveVtep(ip) => {
            s.vteps.remove(ip).ok_or(AgentError::NoVtep(*ip))?;
        }
        AgentOp::SetArpMode(m) => s.arp_mode = *m,
        AgentOp::AddRule(r) => {
            match s.rules.get(&r.rule_id) {
                Some(have) if have == r => {}
                Some(_) => return Err(AgentError::RuleExists(r.rule_id.clone())),
                None => {
                    // Validate alone first so the error names the rule, not a conflict.
                    let table = datapath
                        .pipeline()
                        .table(id::POLICY)
                        .map_err(DatapathError::from)?;
                    rule_flow(table, r, id::SERVICE_SNAT).map_err(DatapathError::from)?;
                    s.rules.insert(r.rule_id.clone(), r.clone());
                }
            }
        }
        AgentOp::RemoveRule(rid) => {
            s.rules
                .remove(rid)
                .ok_or_else(|| AgentError::NoRule(rid.clone()))?;
        }
        _ => {}
    }
    Ok(())
}

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

    /// New parts for `owners` (all owners when `None`) and the switch changes they need.
    fn recompute(&self, owners: Option<Vec<Owner>>) -> Result<Recomputed, AgentError> {
        let topo = self.topology();
        let owners: BTreeSet<Owner> = match owners {
            Some(o) => o.into_iter().collect(),
            None => self
                .installed
                .owners()
                .cloned()
                .chain(self.datapath.owners(&topo))
                .collect(),
        };
        let updates = owners
            .into_iter()
            .map(|o| {
                let part = self.datapath.part(&topo, &o)?;
                Ok((o, part))
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
        if self.config.kind != BridgeKind::Vlan {
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
        for (_, peer) in self.masters.values() {
            peer.notify(method, &ep);
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

    fn on_packet_in(&mut self, packet_in: &ofproto::packet_in::PacketIn) {
        self.count("PktRcvd");
        let Some(in_port) = packet_in.in_port() else {
            return;
        };
        let tun_id = packet_in
            .matching
            .get(FieldId::TUNNEL_ID)
            .or_else(|| packet_in.matching.get(nxm::TUN_ID))
            .map(|f| f.value_u128() as u64);
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

impl Handler<Update> for Agent {
    type Result = AtomicResponse<Self, Result<(), AgentError>>;

    fn handle(&mut self, Update(op): Update, _: &mut Context<Self>) -> Self::Result {
        if let AgentOp::AddRemoteEndpoint(ep) = &op
            && ep.originator_ip.is_some()
            && ep.originator_ip == self.config.local_ip
        {
            // Our own endpoint, echoed back by the master.
            return AtomicResponse::new(Box::pin(fut::ready(Ok(()))));
        }
        let epdb = self.epdb.clone();
        let ep_op = endpoint_op(&op, self.config.local_ip);
        let db_changed = ep_op.is_some();
        let fetch = async move {
            match ep_op {
                Some(o) => epdb
                    .send(epdb::Apply(o))
                    .await
                    .map_err(|_| AgentError::Stopped)?
                    .map(Some)
                    .map_err(AgentError::from),
                None => Ok(None),
            }
        };
        let work = fetch.into_actor(self).then(move |snapshot, act, _| {
            let prev_endpoints = act.endpoints.clone();
            let prev_settings = act.settings.clone();
            let rollback = move |act: &mut Agent| {
                if db_changed {
                    act.epdb.do_send(epdb::Restore(prev_endpoints.clone()));
                }
                act.endpoints = prev_endpoints;
                act.settings = prev_settings;
            };
            let before = act.endpoints.clone();
            let removed = match &op {
                AgentOp::RemoveLocalEndpoint(p) => before.local(*p).cloned(),
                _ => None,
            };
            let next = snapshot.and_then(|snap| {
                if let Some(s) = snap {
                    act.endpoints = s;
                }
                apply_settings(act.datapath.as_ref(), &mut act.settings, &op)?;
                act.recompute(touched(&op, &before, &act.endpoints))
            });
            let (updates, changes) = match next {
                Ok(n) => n,
                Err(e) => {
                    // A refused endpoint-DB change changed nothing there.
                    if !matches!(e, AgentError::EndpointDb(_)) {
                        rollback(act);
                    }
                    return futures::future::Either::Left(fut::ready(Err(e)));
                }
            };
            let bridge = act.bridge.clone();
            futures::future::Either::Right(
                async move { bridge.apply(changes).await }
                    .into_actor(act)
                    .map(move |applied, act, ctx| match applied {
                        Ok(_) => {
                            act.installed.commit(updates);
                            act.after(&op, removed, ctx);
                            Ok(())
                        }
                        Err(e) => {
                            rollback(act);
                            Err(AgentError::Switch(e))
                        }
                    }),
            )
        });
        AtomicResponse::new(Box::pin(work))
    }
}

impl Handler<SwitchEvent> for Agent {
    type Result = ();

    fn handle(&mut self, event: SwitchEvent, _: &mut Context<Self>) {
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
            SwitchEvent::PacketIn { packet_in, .. } => self.on_packet_in(&packet_in),
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
        let me = Node {
            host_addr: self
                .config
                .local_ip
                .map(|a| a.to_string())
                .unwrap_or_default(),
            host_port: self.rpc_port,
        };
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

impl Handler<SetRpcPort> for Agent {
    type Result = ();

    fn handle(&mut self, SetRpcPort(port): SetRpcPort, _: &mut Context<Self>) {
        self.rpc_port = port;
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
                connected: self.switch.as_ref().is_some_and(SwitchHandle::connected),
                stats: &self.stats,
                masters: &masters,
                rpc_port: self.rpc_port,
            },
        ))
    }
}

impl Handler<InstalledFlows> for Agent {
    type Result = MessageResult<InstalledFlows>;

    fn handle(&mut self, _: InstalledFlows, _: &mut Context<Self>) -> Self::Result {
        MessageResult((self.installed.flow_lines(), self.installed.group_lines()))
    }
}

/// The agent's RPC methods, served by [`AgentHandle::serve_rpc`]. Every method answers
/// `true`, as in the reference; a refused change answers its error.
#[derive(Clone)]
struct AgentService(AgentHandle);

impl rpc::Service for AgentService {
    fn call(
        &self,
        method: String,
        params: serde_json::Value,
    ) -> futures::future::LocalBoxFuture<'static, Result<serde_json::Value, String>> {
        let agent = self.0.clone();
        Box::pin(async move {
            let m = method.as_str();
            let done = match m {
                "OfnetAgent.AddMaster" => agent.add_master(rpc::params(m, params)?).await,
                "OfnetAgent.EndpointAdd" => {
                    agent.add_remote_endpoint(rpc::params(m, params)?).await
                }
                "OfnetAgent.EndpointDel" => {
                    let ep: Endpoint = rpc::params(m, params)?;
                    match agent.remove_remote_endpoint(ep.endpoint_id).await {
                        // Unknown (or our own): nothing to remove.
                        Err(AgentError::EndpointDb(
                            EndpointDbError::NoEndpoint(_) | EndpointDbError::EndpointIsLocal(_),
                        )) => Ok(()),
                        other => other,
                    }
                }
                "OfnetAgent.InjectGARPs" => agent
                    .inject_garps(rpc::params(m, params)?)
                    .await
                    .map(|_| ()),
                "OfnetAgent.DummyRpc" => Ok(()),
                "PolicyAgent.AddRule" => agent.add_rule(rpc::params(m, params)?).await,
                "PolicyAgent.DelRule" => {
                    let rule: PolicyRule = rpc::params(m, params)?;
                    agent.remove_rule(rule.rule_id).await
                }
                other => return Err(format!("unknown method {other}")),
            };
            done.map(|()| serde_json::Value::Bool(true))
                .map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MacAddr, RuleAction};

    /// A small deterministic pseudo-random sequence (no dependency, reproducible failures).
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    fn random_op(r: &mut Lcg) -> AgentOp {
        let vteps = [
            Ipv4Addr::new(192, 168, 77, 2),
            Ipv4Addr::new(192, 168, 77, 3),
        ];
        let vlan = 2 + r.next(3) as u16;
        match r.next(12) {
            0 => AgentOp::AddNetwork(Network {
                vlan,
                vni: 5000 + u32::from(vlan),
                gateway: None,
                vrf: if vlan == 4 { "t2" } else { "t1" }.into(),
            }),
            1 => AgentOp::RemoveNetwork(vlan),
            2 | 3 => {
                let n = r.next(8) as u8;
                AgentOp::AddLocalEndpoint(LocalEndpoint {
                    port_no: u32::from(n) + 1,
                    mac: MacAddr([2, 2, 10, 1, 1, n]),
                    vlan,
                    ipv4: Some(Ipv4Addr::new(10, 1, 1, n)),
                    ipv6: None,
                    epg: r.next(3) as u16,
                    epg_vlan: 0,
                    dscp: 0,
                })
            }
            4 => AgentOp::RemoveLocalEndpoint(r.next(8) as u32 + 1),
            5 => AgentOp::UpdateLocalEndpoint {
                port: r.next(8) as u32 + 1,
                dscp: r.next(3) as u8 * 10,
            },
            6 | 7 => {
                let n = 100 + r.next(8) as u8;
                AgentOp::AddRemoteEndpoint(Endpoint {
                    endpoint_id: format!("10.1.1.{n}:t1"),
                    endpoint_type: 2,
                    endpoint_group: r.next(3) as u16,
                    ip_addr: Some(Ipv4Addr::new(10, 1, 1, n)),
                    ip_mask: None,
                    ipv6_addr: None,
                    ipv6_mask: None,
                    vrf: "t1".into(),
                    mac: MacAddr([2, 2, 10, 1, 1, n]),
                    vlan: 9,
                    vni: 5000 + 2 + r.next(3) as u32,
                    endpoint_group_vlan: 0,
                    originator_ip: Some(vteps[r.next(2) as usize]),
                    originator_mac: String::new(),
                    timestamp: String::new(),
                    port_no: 0,
                    dscp: 0,
                })
            }
            8 => AgentOp::RemoveRemoteEndpoint(format!("10.1.1.{}:t1", 100 + r.next(8))),
            9 => AgentOp::AddVtep {
                ip: vteps[r.next(2) as usize],
                port: 50 + r.next(2) as u32,
            },
            10 => AgentOp::RemoveVtep(vteps[r.next(2) as usize]),
            _ => {
                let mut rule = PolicyRule::new(format!("r{}", r.next(3)), 1, RuleAction::Deny);
                rule.dst_endpoint_group = r.next(3) as u16;
                if r.next(2) == 0 {
                    AgentOp::AddRule(rule)
                } else {
                    AgentOp::RemoveRule(rule.rule_id)
                }
            }
        }
    }

    /// Updating only the owners an op touches gives exactly the table built from scratch,
    /// after every op of a long random sequence.
    #[test]
    fn incremental_updates_equal_the_table_built_from_scratch() {
        for (datapath, seed) in [
            (Box::new(VxlanBridge) as Box<dyn Datapath>, 1u64),
            (Box::new(VxlanBridge), 2),
            (Box::new(VlanBridge), 3),
        ] {
            let mut r = Lcg(seed);
            let mut table = EndpointTable::new();
            let mut settings = Settings::default();
            // As the agent starts: the input table's flows are there before any op.
            let mut installed = datapath
                .desired(&Topology {
                    endpoints: &table,
                    settings: &settings,
                })
                .unwrap();
            let mut applied = 0;
            for step in 0..600 {
                let op = random_op(&mut r);
                let before = table.clone();
                if let Some(e) = endpoint_op(&op, None)
                    && table.apply(e).is_err()
                {
                    continue;
                }
                let mut s = settings.clone();
                if apply_settings(datapath.as_ref(), &mut s, &op).is_err() {
                    table = before;
                    continue;
                }
                let topo = Topology {
                    endpoints: &table,
                    settings: &s,
                };
                let owners: BTreeSet<Owner> = match touched(&op, &before, &table) {
                    Some(o) => o.into_iter().collect(),
                    None => installed
                        .owners()
                        .cloned()
                        .chain(datapath.owners(&topo))
                        .collect(),
                };
                let updates: Vec<(Owner, Part)> = owners
                    .into_iter()
                    .map(|o| {
                        let p = datapath.part(&topo, &o).unwrap();
                        (o, p)
                    })
                    .collect();
                if installed.plan(&updates).is_err() {
                    // A conflicting op (e.g. a remote endpoint claiming a local MAC) is refused.
                    table = before;
                    continue;
                }
                installed.commit(updates);
                settings = s;
                applied += 1;
                let topo = Topology {
                    endpoints: &table,
                    settings: &settings,
                };
                let scratch = datapath.desired(&topo).unwrap();
                assert_eq!(
                    installed.flow_lines(),
                    scratch.flow_lines(),
                    "{:?} step {step}: flows after {op:?}",
                    datapath.kind()
                );
                assert_eq!(
                    installed.group_lines(),
                    scratch.group_lines(),
                    "{:?} step {step}: groups after {op:?}",
                    datapath.kind()
                );
            }
            assert!(applied > 200, "only {applied} ops applied");
        }
    }
}
