//! The OVS driver (reference §4.2): the bridges and their ofnet agents (VLAN, VXLAN, and in
//! bridge mode the host bridge), networks and endpoint groups as the agents need them, and
//! this host's endpoints ([`endpoint`]) with their host access ([`hostaccess`]).
//!
//! Contract:
//! - [`Driver::start`] makes the bridges exist (through OVSDB, `fail_mode=secure`, the
//!   controller target of each agent) and starts the agents, but does not let the switches
//!   connect: [`crate::daemon`] first replays the state (so the first reconcile after a
//!   restart installs the complete flow set, never an empty one), then listens.
//! - Networks and groups are applied idempotently: the etcd watch and a pod ADD racing it
//!   both call [`Driver::ensure_network`].
//! - Everything runs on the daemon's actix thread; the shared state sits behind short-lived
//!   locks that are never held across an `.await`.

pub mod bgp;
pub mod endpoint;
pub mod generation;
pub mod hostaccess;
pub mod hostnat;
pub mod infra;
pub mod policy;
pub mod remote;
pub mod reserve;
pub mod service;

use crate::metrics::PluginMetrics;
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use master::client::Client;
use master::registry;
use master::state::{CfgNetworkState, EndpointGroupState, GlobConfig};
use master::store::StateStore;
use ofnet::{AgentConfig, AgentHandle, ArpMode, BridgeKind, Network};
use serde_json::{Value, json};

use crate::config::{Config, HOST_BRIDGE, VLAN_BRIDGE, VXLAN_BRIDGE};
use crate::error::{PluginError, Result};
use crate::hostnet::HostNet;
use crate::ovsdb::{BridgeSpec, OvsdbClient, Policing, PortSpec};

pub use endpoint::{LocalEndpointInfo, PodAttach, PodDetach};
pub use infra::InfraEndpoint;

/// How long to wait for ovs-vswitchd to give a port its OpenFlow number.
pub const OFPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the driver knows about the cluster and this host.
#[derive(Default)]
struct State {
    /// Networks handed to an agent, by `<network>.<tenant>`: the state last seen and what
    /// the agent got.
    networks: BTreeMap<String, (CfgNetworkState, Network)>,
    /// Endpoint groups, by `<group>:<tenant>`.
    groups: BTreeMap<String, EndpointGroupState>,
    /// This host's endpoints, by `CfgEndpointState` id.
    local: BTreeMap<String, LocalEndpointInfo>,
    /// The host's endpoints on infra networks, by network id.
    infra: BTreeMap<String, InfraEndpoint>,
    /// Other hosts' endpoints installed on the VXLAN bridge, by endpoint id.
    remote: BTreeMap<String, remote::RemoteEndpoint>,
    vteps: remote::Vteps,
    arp_mode: ArpMode,
    /// Compiled policy rules and attachments seen in the store.
    policy: policy::PolicyBook,
    /// netctl services and their providers as stored (`state/serviceLB`, `state/serviceProvider`).
    services: service::ServiceBook,
    /// This host's Bgp object as applied (routing mode).
    bgp: Option<crate::bgp::SpeakerConfig>,
    /// The private subnet `contivh0` is plumbed for.
    pvt_subnet: String,
    /// `contivh0` as plumbed: on the VXLAN bridge (routing mode) or the host bridge.
    host_port: Option<ofnet::HostNatPort>,
    /// The host's routes through `contivh1` (routing mode, `driver::infra`).
    host_routes: std::collections::BTreeSet<ipnet::Ipv4Net>,
    /// The OpenFlow port number last asked for a pod's port, by bridge name.
    last_ofport: BTreeMap<&'static str, u32>,
    /// The addresses netmaster holds for this host's next pods.
    reserve: reserve::AddressReserve,
}

/// See the module documentation.
pub struct Driver {
    pub cfg: Config,
    pub ovsdb: OvsdbClient,
    pub host: HostNet,
    pub store: Arc<dyn StateStore>,
    vlan: AgentHandle,
    vxlan: AgentHandle,
    /// The host bridge's agent (its bridge and switch exist in bridge mode only).
    host_bridge: AgentHandle,
    /// The BGP actor (routing mode only).
    bgp: Option<crate::bgp::BgpHandle>,
    netmaster: Mutex<Option<Client>>,
    state: Mutex<State>,
    /// One lock per endpoint id: ADD and DEL of the same pod take turns.
    endpoint_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Lowest MTU of the host's links (loopback aside).
    host_mtu: u32,
    /// Kubernetes mode: the service subnet pods get an on-link route to (read once at start).
    service_route: Option<ipnet::Ipv4Net>,
    /// This daemon's metrics (`/metrics` on the debug listener).
    pub metrics: PluginMetrics,
    /// `--dns-enable`: the DNS queries both agents punt, until the DNS server takes them.
    dns_queries: Mutex<Option<crate::dns::Punted>>,
}

/// The bridge an encapsulation uses.
pub fn bridge_kind(pkt_tag_type: &str) -> BridgeKind {
    if pkt_tag_type == "vxlan" {
        BridgeKind::Vxlan
    } else {
        BridgeKind::Vlan
    }
}

pub fn bridge_name(kind: BridgeKind) -> &'static str {
    match kind {
        BridgeKind::Vxlan => VXLAN_BRIDGE,
        BridgeKind::Vlan => VLAN_BRIDGE,
        BridgeKind::Host => HOST_BRIDGE,
    }
}

pub fn arp_mode_of(global: &GlobConfig) -> ArpMode {
    if global.arp_mode == "flood" {
        ArpMode::Flood
    } else {
        ArpMode::Proxy
    }
}

/// The network as an agent sees it: the VLAN on the bridge (the packet tag, or on a VXLAN
/// bridge the local VLAN netmaster assigned), the VNI, gateway and VRF (tenant).
pub fn agent_network(net: &CfgNetworkState) -> Result<Network> {
    let vlan = u16::try_from(net.pkt_tag).map_err(|_| PluginError::Invalid {
        field: "pktTag",
        problem: format!("{} of network {} is not a VLAN", net.pkt_tag, net.id),
    })?;
    let gateway = if net.gateway.is_empty() {
        None
    } else {
        Some(
            net.gateway
                .parse::<Ipv4Addr>()
                .map_err(|_| PluginError::Invalid {
                    field: "gateway",
                    problem: format!("{:?} of network {}", net.gateway, net.id),
                })?,
        )
    };
    Ok(Network {
        vlan,
        vni: if bridge_kind(&net.pkt_tag_type) == BridgeKind::Vxlan {
            net.ext_pkt_tag
        } else {
            0
        },
        gateway,
        vrf: net.tenant.clone(),
    })
}

/// An EPG's `Bandwidth` ("10Mbps", "500kbps", "1gbps", a bare number = kbit/s) and `Burst`
/// (kbit) as OVS ingress policing.
pub fn policing_of(group: Option<&EndpointGroupState>) -> Result<Policing> {
    let Some(g) = group else {
        return Ok(Policing::default());
    };
    let text = g.bandwidth.trim().to_ascii_lowercase();
    if text.is_empty() {
        return Ok(Policing::default());
    }
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let invalid = || PluginError::Invalid {
        field: "Bandwidth",
        problem: format!(
            "{:?} of group {} must be a number with kbps, mbps or gbps",
            g.bandwidth, g.id
        ),
    };
    let number: u64 = number.parse().map_err(|_| invalid())?;
    let factor = match unit.trim() {
        "" | "k" | "kb" | "kbps" => 1,
        "m" | "mb" | "mbps" => 1_000,
        "g" | "gb" | "gbps" => 1_000_000,
        _ => return Err(invalid()),
    };
    let rate = u32::try_from(number.saturating_mul(factor)).map_err(|_| invalid())?;
    Ok(Policing {
        rate_kbps: rate,
        burst_kb: g.burst,
    })
}

/// OVS's ingress-policing burst when `ingress_policing_burst` is 0 (kbit).
const DEFAULT_BURST_KBIT: u32 = 8000;

/// The same limit as the endpoint's meter, which is what OVS's userspace datapath enforces
/// (it ignores ingress policing): `None` without a rate; a burst of 0 means OVS's policing
/// default, 8000 kbit.
pub fn bandwidth_of(policing: Policing) -> Option<ofnet::Bandwidth> {
    (policing.rate_kbps != 0).then_some(ofnet::Bandwidth {
        rate_kbps: policing.rate_kbps,
        burst_kbit: if policing.burst_kb == 0 {
            DEFAULT_BURST_KBIT
        } else {
            policing.burst_kb
        },
    })
}

/// Everyone who hears about a bridge's transactions: its metrics and, when on, the datapath
/// flusher (`crate::vswitchd`).
struct BridgeObservers(Vec<Box<dyn ofctrl::BridgeObserver>>);

impl ofctrl::BridgeObserver for BridgeObservers {
    fn applied(&self, operations: usize, elapsed: Duration, reconcile: bool) {
        for o in &self.0 {
            o.applied(operations, elapsed, reconcile);
        }
    }

    fn failed(&self, error: &ofctrl::TxError, reconcile: bool) {
        for o in &self.0 {
            o.failed(error, reconcile);
        }
    }
}

impl Driver {
    /// Create the bridges and start both agents (see the module documentation). Must run on
    /// an actix system.
    pub async fn start(
        cfg: Config,
        ovsdb: OvsdbClient,
        store: Arc<dyn StateStore>,
        global: &GlobConfig,
        metrics: PluginMetrics,
    ) -> Result<Arc<Driver>> {
        let host = HostNet::new(cfg.host_netns.clone());
        let mut bridges = vec![
            (VXLAN_BRIDGE, &cfg.vxlan_of_listen),
            (VLAN_BRIDGE, &cfg.vlan_of_listen),
        ];
        if cfg.fwd_mode() == ofnet::FwdMode::Bridge {
            bridges.push((HOST_BRIDGE, &cfg.host_of_listen));
        }
        for (bridge, listen) in bridges {
            let spec = BridgeSpec::new(bridge)
                .controller(listen.controller_target())
                .datapath_type(cfg.ovs_datapath.clone());
            ovsdb.ensure_bridge(&spec).await?;
        }
        let host_mtu = host
            .run(|nl| async move { nl.links().await })
            .await?
            .iter()
            .filter(|l| l.name != "lo" && l.mtu >= 1280)
            .map(|l| l.mtu)
            .min()
            .unwrap_or(1500);
        let arp_mode = arp_mode_of(global);
        let (dns_senders, dns_queries) = if cfg.dns_enable {
            let (senders, punted) = crate::dns::punt_channels();
            (Some(senders), Some(punted))
        } else {
            (None, None)
        };
        let flush = crate::vswitchd::Flusher {
            policy: cfg.datapath_flush,
            datapath: cfg.ovs_datapath.clone(),
            ovsdb: ovsdb.clone(),
            control: cfg.ovs_vswitchd_ctl.clone(),
            done: metrics.datapath_flushes.clone(),
        }
        .start();
        let agent = |kind, bridge: &str| {
            let mut config = AgentConfig::new(kind, bridge);
            config.fwd_mode = cfg.fwd_mode();
            config.dns = dns_senders.as_ref().and_then(|s| s.for_bridge(kind));
            config.local_ip = Some(cfg.vtep_ip);
            config.rpc_addr = Some(crate::ofnet_rpc::advertised_ip(&cfg));
            config.arp_mode = arp_mode;
            let generations = generation::OvsdbGenerations {
                ovsdb: ovsdb.clone(),
                bridge: bridge.to_string(),
            };
            let mut observers: Vec<Box<dyn ofctrl::BridgeObserver>> =
                vec![Box::new(metrics.bridge(bridge))];
            if let Some(flush) = &flush {
                observers.push(Box::new(flush.clone()));
            }
            AgentHandle::start_with(config, |b| {
                b.generations = Some(Box::new(generations));
                b.observer = Some(Box::new(BridgeObservers(observers)));
            })
        };
        let vxlan = agent(BridgeKind::Vxlan, VXLAN_BRIDGE);
        let vlan = agent(BridgeKind::Vlan, VLAN_BRIDGE);
        let host_bridge = agent(BridgeKind::Host, HOST_BRIDGE);
        let service_route = crate::kubesvc::route::pod_service_route(&cfg);
        let bgp = (cfg.fwd_mode() == ofnet::FwdMode::Routing).then(|| {
            crate::bgp::BgpHandle::start(
                crate::bgp::Speaker::new(cfg.bgp_dir.clone(), cfg.host_netns.clone()),
                vlan.clone(),
            )
        });
        let driver = Arc::new(Driver {
            cfg,
            ovsdb,
            host,
            store,
            vlan,
            vxlan,
            host_bridge,
            bgp,
            netmaster: Mutex::new(None),
            state: Mutex::new(State {
                arp_mode,
                pvt_subnet: global.pvt_subnet.clone(),
                ..State::default()
            }),
            endpoint_locks: Mutex::new(HashMap::new()),
            host_mtu,
            service_route,
            metrics,
            dns_queries: Mutex::new(dns_queries),
        });
        driver.add_uplinks().await?;
        driver.plumb_host_nat(&global.pvt_subnet).await?;
        Ok(driver)
    }

    /// The DNS queries the agents punt (`--dns-enable`); `Some` once.
    pub fn take_dns_queries(&self) -> Option<crate::dns::Punted> {
        self.dns_queries.lock().ok().and_then(|mut q| q.take())
    }

    pub fn agent(&self, kind: BridgeKind) -> &AgentHandle {
        match kind {
            BridgeKind::Vxlan => &self.vxlan,
            BridgeKind::Vlan => &self.vlan,
            BridgeKind::Host => &self.host_bridge,
        }
    }

    /// The MTU of a pod interface on a bridge: VXLAN leaves room for the 50-byte encapsulation.
    pub fn pod_mtu(&self, kind: BridgeKind) -> u32 {
        match kind {
            BridgeKind::Vxlan => self.host_mtu.saturating_sub(50),
            BridgeKind::Vlan | BridgeKind::Host => self.host_mtu,
        }
    }

    /// VLAN uplinks as trunk ports of the VLAN bridge (a single interface each; bonds are not
    /// built).
    async fn add_uplinks(&self) -> Result<()> {
        for uplink in &self.cfg.vlan_uplinks {
            let name = uplink.clone();
            self.host
                .run(move |nl| async move {
                    nl.require_link(&name).await?;
                    nl.set_up(&name).await
                })
                .await?;
            self.ovsdb
                .ensure_port(
                    VLAN_BRIDGE,
                    &PortSpec::trunk(uplink.clone()).endpoint_id("uplinkPort"),
                )
                .await?;
            let port = self.ovsdb.wait_ofport(uplink, OFPORT_TIMEOUT).await?;
            self.vlan
                .add_uplink(port)
                .await
                .map_err(|e| PluginError::agent(BridgeKind::Vlan, e))?;
        }
        Ok(())
    }

    /// The netmaster REST client: `--netmaster`, else the registered `netmaster` service.
    pub async fn netmaster(&self) -> Result<Client> {
        if let Ok(guard) = self.netmaster.lock()
            && let Some(client) = guard.as_ref()
        {
            return Ok(client.clone());
        }
        let url = match &self.cfg.netmaster {
            Some(url) => url.clone(),
            None => {
                let services = registry::list(self.store.as_ref(), registry::NETMASTER).await?;
                let svc = services.first().ok_or(PluginError::NoNetmaster)?;
                let scheme = if self.cfg.netmaster_cacert.is_some() {
                    "https"
                } else {
                    "http"
                };
                format!("{scheme}://{}:{}", svc.HostAddr, svc.Port)
            }
        };
        let client = Client::with_auth_flag(
            &url,
            self.cfg.netmaster_token.as_ref().map(|t| t.0.as_str()),
            self.cfg.netmaster_cacert.as_deref(),
            "--netmaster-cacert",
        )?;
        if let Ok(mut guard) = self.netmaster.lock() {
            *guard = Some(client.clone());
        }
        Ok(client)
    }

    /// Forget the netmaster address (after it could not be reached: it may have moved).
    pub fn forget_netmaster(&self) {
        if self.cfg.netmaster.is_none()
            && let Ok(mut guard) = self.netmaster.lock()
        {
            *guard = None;
        }
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        match self.state.lock() {
            Ok(mut guard) => f(&mut guard),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Hand a network to its bridge's agent (no-op when it has it already). netmaster
    /// rewrites a network's state on every endpoint (counters, address map); only a change of
    /// what the agent sees (tags, gateway, tenant) goes to the agent.
    pub async fn ensure_network(&self, net: &CfgNetworkState) -> Result<()> {
        let wanted = agent_network(net)?;
        let known = self.with_state(|s| match s.networks.get_mut(&net.id) {
            Some((cfg, have)) if *have == wanted => {
                *cfg = net.clone();
                true
            }
            _ => false,
        });
        if known {
            return Ok(());
        }
        let kind = bridge_kind(&net.pkt_tag_type);
        self.agent(kind)
            .add_network(wanted.clone())
            .await
            .map_err(|e| PluginError::agent(kind, e))?;
        self.with_state(|s| s.networks.insert(net.id.clone(), (net.clone(), wanted)));
        self.sync_host_routes().await?;
        Ok(())
    }

    /// The network as last seen (watch or ADD), if it was handed to an agent.
    pub fn known_network(&self, id: &str) -> Option<CfgNetworkState> {
        self.with_state(|s| s.networks.get(id).map(|(cfg, _)| cfg.clone()))
    }

    /// A network was deleted from the config: take it off its agent. Its endpoints are
    /// deleted by their pods' DELs; while any remain, the agent keeps the network.
    pub async fn remove_network(&self, id: &str) -> Result<()> {
        let Some((net, network)) = self.with_state(|s| s.networks.get(id).cloned()) else {
            return Ok(());
        };
        if net.nw_type == "infra" {
            self.remove_infra(&net).await?;
        }
        let kind = bridge_kind(&net.pkt_tag_type);
        let vlan = network.vlan;
        match self.agent(kind).remove_network(vlan).await {
            Ok(()) => {
                self.with_state(|s| s.networks.remove(id));
                self.sync_host_routes().await
            }
            Err(e) => Err(PluginError::agent(kind, e)),
        }
    }

    /// An endpoint group was created or changed: re-apply policing, the bandwidth meter and
    /// DSCP to its local endpoints.
    pub async fn update_group(&self, group: &EndpointGroupState) -> Result<()> {
        self.with_state(|s| s.groups.insert(group.id.clone(), group.clone()));
        let members: Vec<LocalEndpointInfo> = self.with_state(|s| {
            s.local
                .values()
                .filter(|l| l.oper.endpoint_group_key == group.id)
                .cloned()
                .collect()
        });
        let policing = policing_of(Some(group))?;
        let dscp = u8::try_from(group.dscp).unwrap_or(0);
        for member in members {
            self.ovsdb
                .set_ingress_policing(&member.oper.ovs_port(), policing)
                .await?;
            self.agent(member.kind)
                .update_local_endpoint(member.ofport, dscp, bandwidth_of(policing))
                .await
                .map_err(|e| PluginError::agent(member.kind, e))?;
        }
        Ok(())
    }

    pub fn remove_group(&self, id: &str) {
        self.with_state(|s| s.groups.remove(id));
    }

    pub fn group(&self, id: &str) -> Option<EndpointGroupState> {
        self.with_state(|s| s.groups.get(id).cloned())
    }

    /// Global config changed: follow its ARP mode and its private subnet.
    pub async fn update_global(&self, global: &GlobConfig) -> Result<()> {
        if self.with_state(|s| {
            std::mem::replace(&mut s.pvt_subnet, global.pvt_subnet.clone()) != global.pvt_subnet
        }) {
            self.plumb_host_nat(&global.pvt_subnet).await?;
        }
        let mode = arp_mode_of(global);
        if self.with_state(|s| std::mem::replace(&mut s.arp_mode, mode)) == mode {
            return Ok(());
        }
        for kind in [BridgeKind::Vxlan, BridgeKind::Vlan] {
            self.agent(kind)
                .set_arp_mode(mode)
                .await
                .map_err(|e| PluginError::agent(kind, e))?;
        }
        Ok(())
    }

    /// The per-endpoint lock.
    fn endpoint_lock(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = match self.endpoint_locks.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        // Drop locks nobody holds, so the map does not grow with every pod ever seen.
        locks.retain(|_, l| Arc::strong_count(l) > 1);
        locks.entry(id.to_string()).or_default().clone()
    }

    /// `/inspect/driver`: both agents' state in the reference's shape.
    pub async fn inspect(&self) -> Result<Value> {
        let vlan = self
            .vlan
            .inspect()
            .await
            .map_err(|e| PluginError::agent(BridgeKind::Vlan, e))?;
        let vxlan = self
            .vxlan
            .inspect()
            .await
            .map_err(|e| PluginError::agent(BridgeKind::Vxlan, e))?;
        if self.cfg.fwd_mode() == ofnet::FwdMode::Routing {
            return Ok(json!({ "vlan": vlan, "vxlan": vxlan }));
        }
        let host = self
            .host_bridge
            .inspect()
            .await
            .map_err(|e| PluginError::agent(BridgeKind::Host, e))?;
        Ok(json!({ "vlan": vlan, "vxlan": vxlan, "host": host }))
    }

    /// How many endpoints: this host's, and other hosts' installed here (metrics).
    pub fn endpoint_counts(&self) -> (usize, usize) {
        self.with_state(|s| (s.local.len(), s.remote.len()))
    }

    /// This host's endpoints.
    pub fn local_endpoints(&self) -> Vec<LocalEndpointInfo> {
        self.with_state(|s| s.local.values().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_strings_become_policing() {
        let mut g = EndpointGroupState {
            id: "web:t".into(),
            bandwidth: "10Mbps".into(),
            burst: 100,
            ..Default::default()
        };
        assert_eq!(
            policing_of(Some(&g)).unwrap(),
            Policing {
                rate_kbps: 10_000,
                burst_kb: 100
            }
        );
        g.bandwidth = "500 kbps".into();
        assert_eq!(policing_of(Some(&g)).unwrap().rate_kbps, 500);
        g.bandwidth = "fast".into();
        let err = policing_of(Some(&g)).unwrap_err().to_string();
        assert!(err.contains("Bandwidth") && err.contains("web:t"), "{err}");
        assert_eq!(policing_of(None).unwrap(), Policing::default());
        assert_eq!(bandwidth_of(Policing::default()), None);
        assert_eq!(
            bandwidth_of(Policing {
                rate_kbps: 500,
                burst_kb: 0
            }),
            Some(ofnet::Bandwidth {
                rate_kbps: 500,
                burst_kbit: 8000
            })
        );
    }

    #[test]
    fn networks_map_to_their_bridge() {
        let net = CfgNetworkState {
            id: "blue.t".into(),
            tenant: "t".into(),
            pkt_tag_type: "vxlan".into(),
            pkt_tag: 3,
            ext_pkt_tag: 5001,
            gateway: "10.1.0.1".into(),
            ..Default::default()
        };
        let n = agent_network(&net).unwrap();
        assert_eq!((n.vlan, n.vni, n.vrf.as_str()), (3, 5001, "t"));
        assert_eq!(bridge_kind("vxlan"), BridgeKind::Vxlan);
        assert_eq!(bridge_kind("vlan"), BridgeKind::Vlan);
        let bad = CfgNetworkState {
            gateway: "x".into(),
            ..net
        };
        assert!(agent_network(&bad).is_err());
    }
}
