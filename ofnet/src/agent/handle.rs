//! [`AgentHandle`]: the API other crates call, one async method per agent operation.

use super::service::AgentService;
use super::svcproxy::GetServiceStats;
use super::*;
use crate::rpc;

/// Handle to a running agent: the API other crates call.
#[derive(Clone)]
pub struct AgentHandle {
    addr: Addr<Agent>,
    bridge: BridgeHandle,
    /// The ports the switch reports (a new port's number as soon as the switch has it).
    ports: ofctrl::PortsHandle,
    kind: BridgeKind,
}

impl AgentHandle {
    /// Start the endpoint DB, the `ofctrl` bridge and the agent (inside an actix system).
    /// Connect switches with [`AgentHandle::listen_unix`] / [`AgentHandle::listen_tcp`], or
    /// subscribe [`AgentHandle::switch_events`] to a listener of your own.
    pub fn start(config: AgentConfig) -> AgentHandle {
        AgentHandle::start_with(config, |_| {})
    }

    /// [`AgentHandle::start`], with a say in how `ofctrl` runs the bridge: where it keeps
    /// its flow generation across restarts (netplugin: the bridge's OVSDB `external_ids`),
    /// which datapath id may drive it, bundles or barriers. The tables are the pipeline's.
    pub fn start_with(
        config: AgentConfig,
        customize: impl FnOnce(&mut BridgeConfig),
    ) -> AgentHandle {
        let datapath = config.datapath();
        let mut bridge_config =
            BridgeConfig::new(config.bridge.clone(), datapath.pipeline().table_specs());
        customize(&mut bridge_config);
        bridge_config.tables = datapath.pipeline().table_specs();
        let mut ctx = Context::new();
        let bridge = BridgeHandle::start(bridge_config);
        let epdb = EndpointDb::default().start();
        let settings = Settings {
            arp_mode: config.arp_mode,
            dns_punt: config.dns.is_some(),
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
            updates: Default::default(),
        };
        // The input table's ARP punt depends on the ARP mode alone: compute the empty state's
        // flows once so they are installed from the first connect.
        ctx.notify(Update(AgentOp::SetArpMode(agent.settings.arp_mode)));
        let addr = ctx.run(agent);
        AgentHandle {
            addr,
            bridge,
            ports: ofctrl::SwitchPorts::start_table(),
            kind,
        }
    }

    pub fn kind(&self) -> BridgeKind {
        self.kind
    }

    /// The `ofctrl` bridge (status, switch handle).
    pub fn bridge(&self) -> &BridgeHandle {
        &self.bridge
    }

    /// Who must hear a listener's switch events: the bridge (reconciliation), the agent
    /// (packet-ins) and the port table (port numbers).
    pub fn switch_events(&self) -> Vec<Recipient<SwitchEvent>> {
        vec![
            self.bridge.events(),
            self.addr.clone().recipient(),
            self.ports.events(),
        ]
    }

    /// True once the connected switch reports port `name` under number `port_no` (at once
    /// if it has); false if the agent is gone. It waits as long as the caller does: race it
    /// against the port's number in OVSDB, which also reports a port the switch cannot open.
    pub fn switch_has_port(
        &self,
        name: &str,
        port_no: u32,
    ) -> impl std::future::Future<Output = bool> + use<> {
        self.ports.installed(name, port_no)
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

    /// New DSCP (0: stop marking) and bandwidth limit (`None`: lift it) of a local endpoint.
    pub async fn update_local_endpoint(
        &self,
        port: u32,
        dscp: u8,
        bandwidth: Option<Bandwidth>,
    ) -> Result<(), AgentError> {
        self.update(AgentOp::UpdateLocalEndpoint {
            port,
            dscp,
            bandwidth,
        })
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

    /// The host's router port, or none (VLAN router).
    pub async fn set_router(&self, router: Option<RouterPort>) -> Result<(), AgentError> {
        self.update(AgentOp::SetRouter(router)).await
    }

    /// The host NAT port, or none (VXLAN router): pods reach the host through it and the host
    /// reaches each pod by its private address.
    pub async fn set_host_nat(&self, nat: Option<HostNatPort>) -> Result<(), AgentError> {
        self.update(AgentOp::SetHostNat(nat)).await
    }

    /// Add (or replace) a pod's host-access port (host bridge).
    pub async fn add_host_access(&self, port: HostAccessPort) -> Result<(), AgentError> {
        self.update(AgentOp::AddHostAccess(port)).await
    }

    /// Remove a pod's host-access port (host bridge); an unknown port is fine.
    pub async fn remove_host_access(&self, port: u32) -> Result<(), AgentError> {
        self.update(AgentOp::RemoveHostAccess(port)).await
    }

    /// A prefix learned by BGP (or its new next hop): routed out the uplink once the next
    /// hop's MAC is known (VLAN router).
    pub async fn add_route(
        &self,
        prefix: ipnet::Ipv4Net,
        next_hop: Ipv4Addr,
    ) -> Result<(), AgentError> {
        self.update(AgentOp::AddRoute { prefix, next_hop }).await
    }

    /// A next hop's MAC learned elsewhere than from the uplink's ARP (VLAN router): the host's
    /// neighbour table at a restart, so learned routes are in the first flow table.
    pub async fn learn_neighbor(&self, ip: Ipv4Addr, mac: MacAddr) -> Result<(), AgentError> {
        self.update(AgentOp::LearnNeighbor { ip, mac }).await
    }

    /// A learned prefix was withdrawn.
    pub async fn remove_route(&self, prefix: ipnet::Ipv4Net) -> Result<(), AgentError> {
        self.update(AgentOp::RemoveRoute(prefix)).await
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

    /// Remove `remove` (unknown ids are fine), then add or replace `add`, as one switch
    /// transaction (one bundle); all or nothing.
    pub async fn set_rules(
        &self,
        add: Vec<Arc<PolicyRule>>,
        remove: Vec<String>,
    ) -> Result<(), AgentError> {
        self.update(AgentOp::SetRules { add, remove }).await
    }

    /// Add or replace a load-balanced service. Open connections keep their providers. Refused
    /// ([`AgentError::Service`]): a VIP another service has, a
    /// port listed twice, port 0.
    pub async fn add_service(
        &self,
        name: impl Into<String>,
        spec: ServiceSpec,
    ) -> Result<(), AgentError> {
        self.update(AgentOp::AddService {
            name: name.into(),
            spec,
        })
        .await
    }

    /// Remove a service: its spec, providers, groups and flows. An unknown name is `Ok`
    /// (idempotent).
    pub async fn remove_service(&self, name: &str) -> Result<(), AgentError> {
        self.update(AgentOp::RemoveService(name.to_string())).await
    }

    /// Set a service's providers (before or after its spec). A provider added gets new
    /// connections at once; the connections of a provider that left end (their packets are
    /// dropped), the others' are untouched. With no provider, new connections are rejected.
    pub async fn set_service_providers(
        &self,
        name: impl Into<String>,
        providers: Vec<Ipv4Addr>,
    ) -> Result<(), AgentError> {
        self.update(AgentOp::SetServiceProviders {
            name: name.into(),
            providers,
        })
        .await
    }

    /// Add or replace one Kubernetes NetworkPolicy, as one switch transaction. A policy the
    /// switch cannot enforce exactly is refused ([`AgentError::PolicyRefused`], naming it and
    /// why) and nothing changes: a previous version stays installed.
    pub async fn upsert_network_policy(&self, policy: NetworkPolicy) -> Result<(), AgentError> {
        policy.check()?;
        self.update(AgentOp::SetNetworkPolicies {
            upsert: vec![policy],
            delete: Vec::new(),
        })
        .await
    }

    /// Remove a NetworkPolicy (an unknown id is `Ok`): its allowances end, and pods no other
    /// policy selects are no longer isolated.
    pub async fn delete_network_policy(&self, id: &str) -> Result<(), AgentError> {
        self.update(AgentOp::SetNetworkPolicies {
            upsert: Vec::new(),
            delete: vec![id.to_string()],
        })
        .await
    }

    /// Remove `delete`, then add or replace `upsert`, as ONE switch transaction (one bundle).
    /// Policies that cannot be enforced exactly are left out (an installed version of them
    /// stays as it was) and returned; the others are applied.
    pub async fn set_network_policies(
        &self,
        upsert: Vec<NetworkPolicy>,
        delete: Vec<String>,
    ) -> Result<Vec<PolicyRefused>, AgentError> {
        let (upsert, refused) = split_refused(upsert);
        self.update(AgentOp::SetNetworkPolicies { upsert, delete })
            .await?;
        Ok(refused)
    }

    /// Make `policies` the whole set of NetworkPolicies (e.g. after a re-list), as ONE switch
    /// transaction: every installed policy not in it is removed. Refused policies are
    /// returned; an installed version of a refused policy stays.
    pub async fn replace_network_policies(
        &self,
        policies: Vec<NetworkPolicy>,
    ) -> Result<Vec<PolicyRefused>, AgentError> {
        let (policies, refused) = split_refused(policies);
        let keep = refused.iter().map(|r| r.policy.clone()).collect();
        self.update(AgentOp::ReplaceNetworkPolicies { policies, keep })
            .await?;
        Ok(refused)
    }

    /// Service statistics in netplugin's `/svcstats` shape, from the flow statistics of tables
    /// 3 and 6 polled now (zero counters while no switch is connected).
    pub async fn service_stats(&self) -> Result<ServiceStats, AgentError> {
        self.addr
            .send(GetServiceStats)
            .await
            .map_err(|_| AgentError::Stopped)?
    }

    /// Send `frame` out of `port` (e.g. the inline DNS's answer to a punted query).
    pub fn send_frame(&self, port: u32, frame: Vec<u8>) {
        self.addr.do_send(SendFrame { port, frame });
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

    /// Tell masters this port at registration (when serving RPC with a service of one's own,
    /// e.g. one wrapping [`super::AgentService`]).
    pub fn set_rpc_port(&self, port: u16) {
        self.addr.do_send(SetRpcPort(port));
    }

    /// Leave every master (`OfnetMaster.UnRegisterNode`), e.g. at shutdown.
    pub async fn unregister(&self) {
        let _ = self.addr.send(super::Unregister).await;
    }

    /// Forget the master `host:port`; true if it was known.
    pub async fn remove_master(&self, key: impl Into<String>) -> Result<bool, AgentError> {
        self.addr
            .send(super::RemoveMaster(key.into()))
            .await
            .map_err(|_| AgentError::Stopped)
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

    /// Endpoints, rules, services and providers the agent holds (for metrics).
    pub async fn counts(&self) -> Result<AgentCounts, AgentError> {
        self.addr
            .send(Counts)
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

    /// The desired tables as data, with table names, owners and ports (see [`crate::trace`]).
    pub async fn trace_tables(&self) -> Result<crate::trace::TableSet, AgentError> {
        self.addr
            .send(TraceTables)
            .await
            .map_err(|_| AgentError::Stopped)
    }

    /// The switch's actual flows and groups, in the same shape as [`Self::trace_tables`]
    /// (owners taken from the desired flow with the same key; ports, VRFs and endpoints as
    /// the agent knows them). `None` while no switch is connected.
    pub async fn actual_tables(&self) -> Result<Option<crate::trace::TableSet>, AgentError> {
        let desired = self.trace_tables().await?;
        let Some(switch) = self.bridge.switch().await else {
            return Ok(None);
        };
        let (Ok(flows), Ok(groups)) = (switch.all_flows().await, switch.group_desc().await) else {
            return Ok(None);
        };
        let mut t = crate::trace::TableSet::new(desired.bridge.clone());
        t.host = desired.host;
        t.names = desired.names.clone();
        t.ports = desired.ports.clone();
        t.vrfs = desired.vrfs.clone();
        t.endpoints = desired.endpoints.clone();
        for fs in flows {
            let cookie = ofctrl::Cookie(fs.cookie);
            let mut flow =
                ofctrl::Flow::new(fs.table_id, fs.priority, fs.matching, fs.instructions)
                    .owned_by(cookie.category(), cookie.object());
            flow.idle_timeout = fs.idle_timeout;
            flow.hard_timeout = fs.hard_timeout;
            let text = crate::text::matches(&flow.key.matches);
            let (owner, rule) = desired
                .flows
                .get(&flow.key.table)
                .and_then(|fs| {
                    fs.iter().find(|d| {
                        d.flow.key.priority == flow.key.priority
                            && crate::text::matches(&d.flow.key.matches) == text
                    })
                })
                .map(|d| (d.owner.clone(), d.rule.clone()))
                .unwrap_or((None, None));
            t.add_flow(flow, owner, rule);
        }
        for g in groups {
            t.add_group(ofctrl::Group {
                id: g.group_id,
                group_type: g.group_type,
                buckets: g.buckets,
            });
        }
        Ok(Some(t))
    }
}

/// The policies the switch can enforce, and the refusals of the others.
fn split_refused(policies: Vec<NetworkPolicy>) -> (Vec<NetworkPolicy>, Vec<PolicyRefused>) {
    let mut ok = Vec::new();
    let mut refused = Vec::new();
    for p in policies {
        match p.check() {
            Ok(()) => ok.push(p),
            Err(e) => {
                tracing::warn!(policy = %e.policy, reason = %e.reason, "network policy refused");
                refused.push(e);
            }
        }
    }
    (ok, refused)
}
