//! This host's endpoints (reference §4.2 `CreateEndpoint`/`DeleteEndpoint`, §7.3): netmaster's
//! `/plugin/createEndpoint`, the veth pair into the pod, the OVS access port, the agent's local
//! endpoint, and the oper state in etcd, undone in reverse on any failure.
//!
//! Contract:
//! - [`Driver::attach`] either completes every step or leaves nothing (no port, veth, address
//!   or state); attaching the same pod again returns the same endpoint.
//! - In `--mode kubernetes` the pod also gets an on-link route for the service subnet
//!   ([`crate::kubesvc::route`]).
//! - [`Driver::detach`] removes whatever exists and succeeds when nothing is left, so a
//!   second DEL (or a DEL after a half-done ADD) succeeds.
//! - [`Driver::reconcile`] (start-up) keeps every endpoint whose config still exists and
//!   whose port and veth are still there, re-learning the OpenFlow port from OVSDB; it removes
//!   only what no longer exists in config. Nothing is re-created, so pod traffic continues.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use ipnet::IpNet;
use master::endpoint::{
    ConfigEp, CreateEndpointRequest, DeleteEndpointRequest, EndpointResponse, UpdateEndpointRequest,
};
use master::state::{CfgEndpointState, CfgNetworkState, EndpointGroupState};
use ofnet::service::flows as hairpin;
use ofnet::{BridgeKind, LocalEndpoint};

use super::reserve::Reserved;
use super::{Driver, OFPORT_TIMEOUT, bandwidth_of, bridge_kind, bridge_name, policing_of};
use crate::error::{PluginError, Result};
use crate::netlink::{MacAddr, PodInterfaceSpec, in_netns};
use crate::oper::{OperEndpointState, port_name_for};
use crate::ovsdb::PortSpec;

/// The first number past the OpenFlow port range (`OFPP_MAX` is 0xff00; the ones above are
/// reserved ports).
const OFPORT_MAX: u32 = 0xff00;

/// A pod to attach.
#[derive(Debug, Clone, Default)]
pub struct PodAttach {
    pub tenant: String,
    pub network: String,
    /// Endpoint group; empty for none.
    pub group: String,
    /// The endpoint id (the infra container id).
    pub container_id: String,
    pub pod_name: String,
    pub pod_namespace: String,
    pub netns: PathBuf,
    pub ifname: String,
    pub labels: BTreeMap<String, String>,
    /// An IPv4 address reserved for it by `/plugin/allocAddress` (Docker's IPAM); empty:
    /// netmaster picks one.
    pub address: String,
    /// The runtime moves the pod end into its sandbox itself (Docker's `Join`): the pair is
    /// created in the host namespace with the pod end named `ifname`, left down and without
    /// addresses or routes (the runtime sets them); `netns` is not used.
    pub handover: bool,
}

/// A pod to detach: found by container id (and interface), or by the labels' network when
/// this host has no record of it.
#[derive(Debug, Clone, Default)]
pub struct PodDetach {
    pub tenant: String,
    pub network: String,
    pub container_id: String,
    /// Informational: the pair is removed from its host end, wherever the pod end is.
    pub netns: Option<PathBuf>,
    pub ifname: String,
}

/// One local endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEndpointInfo {
    pub oper: OperEndpointState,
    pub ofport: u32,
    pub kind: BridgeKind,
    /// Network addresses and gateways, for CNI results.
    pub prefix_len: u8,
    pub ipv6_prefix_len: u8,
    pub gateway: String,
    pub ipv6_gateway: String,
    /// The pod's interface on the host bridge (`host1`), if it has one
    /// ([`super::hostaccess`]).
    pub host_access: Option<ofnet::HostAccessPort>,
}

/// An endpoint's `aa:bb:cc:dd:ee:ff` MAC; the error names the endpoint.
pub(super) fn parse_mac(text: &str, id: &str) -> Result<MacAddr> {
    let mut out = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut out {
        *byte = parts
            .next()
            .and_then(|p| u8::from_str_radix(p, 16).ok())
            .ok_or_else(|| PluginError::Invalid {
                field: "macAddress",
                problem: format!("{text:?} of endpoint {id}"),
            })?;
    }
    Ok(MacAddr(out))
}

fn invalid_ip(field: &'static str, text: &str, id: &str) -> PluginError {
    PluginError::Invalid {
        field,
        problem: format!("{text:?} of endpoint {id}"),
    }
}

/// The interface the pod gets for an endpoint of `net`.
fn interface_spec(
    oper: &OperEndpointState,
    net: &CfgNetworkState,
    mtu: u32,
) -> Result<PodInterfaceSpec> {
    let mut addresses = Vec::new();
    let ip: Ipv4Addr = oper
        .ip_address
        .parse()
        .map_err(|_| invalid_ip("ipAddress", &oper.ip_address, &oper.id))?;
    addresses.push(
        IpNet::new(IpAddr::V4(ip), net.subnet_len)
            .map_err(|_| invalid_ip("subnetLen", &net.subnet_len.to_string(), &oper.id))?,
    );
    if !oper.ipv6_address.is_empty() {
        let ip6: Ipv6Addr = oper
            .ipv6_address
            .split('/')
            .next()
            .unwrap_or_default()
            .parse()
            .map_err(|_| invalid_ip("ipv6Address", &oper.ipv6_address, &oper.id))?;
        addresses.push(
            IpNet::new(IpAddr::V6(ip6), net.ipv6_subnet_len).map_err(|_| {
                invalid_ip("ipv6SubnetLen", &net.ipv6_subnet_len.to_string(), &oper.id)
            })?,
        );
    }
    let mut gateways = Vec::new();
    for (field, gw) in [
        ("gateway", &net.gateway),
        ("ipv6Gateway", &net.ipv6_gateway),
    ] {
        if !gw.is_empty() {
            gateways.push(
                gw.parse::<IpAddr>()
                    .map_err(|_| invalid_ip(field, gw, &oper.id))?,
            );
        }
    }
    Ok(PodInterfaceSpec {
        netns: PathBuf::from(&oper.netns),
        host_name: oper.ovs_port(),
        ifname: oper.intf_name.clone(),
        mtu,
        mac: Some(parse_mac(&oper.mac_address, &oper.id)?),
        addresses,
        gateways,
    })
}

/// The agent's view of a local endpoint.
fn local_endpoint(
    oper: &OperEndpointState,
    net: &CfgNetworkState,
    group: Option<&EndpointGroupState>,
    ofport: u32,
) -> Result<LocalEndpoint> {
    let vlan = u16::try_from(net.pkt_tag).unwrap_or(0);
    // A group with its own VLAN (ACI mode) tags its GARPs with it.
    let epg_vlan = group
        .filter(|g| g.pkt_tag != net.pkt_tag && g.pkt_tag_type == "vlan")
        .and_then(|g| u16::try_from(g.pkt_tag).ok())
        .unwrap_or(0);
    Ok(LocalEndpoint {
        port_no: ofport,
        mac: ofnet::MacAddr(parse_mac(&oper.mac_address, &oper.id)?.0),
        vlan,
        ipv4: oper.ip_address.parse().ok(),
        ipv6: oper
            .ipv6_address
            .split('/')
            .next()
            .and_then(|s| s.parse().ok()),
        epg: u16::try_from(oper.endpoint_group_id).unwrap_or(0),
        epg_vlan,
        dscp: group.and_then(|g| u8::try_from(g.dscp).ok()).unwrap_or(0),
        bandwidth: bandwidth_of(policing_of(group)?),
    })
}

/// The endpoint netmaster will record for `pod` given `reserved` from this host's reserve
/// (what createEndpoint makes of a new endpoint: the MAC follows the address, the group's id
/// and key), so the flows, addresses and oper state need not wait for its answer.
fn provisional_endpoint(
    pod: &PodAttach,
    ep_id: &str,
    group: Option<&EndpointGroupState>,
    reserved: &Reserved,
) -> CfgEndpointState {
    CfgEndpointState {
        id: ep_id.to_string(),
        net_id: CfgNetworkState::id_for(&pod.tenant, &pod.network),
        endpoint_id: pod.container_id.clone(),
        service_name: pod.group.clone(),
        endpoint_group_id: group.map_or(0, |g| g.endpoint_group_id),
        endpoint_group_key: group.map_or(String::new(), |g| g.id.clone()),
        ip_address: reserved.ipv4.to_string(),
        ipv6_address: reserved.ipv6.map(|a| a.to_string()).unwrap_or_default(),
        mac_address: master::resources::ipv4::mac_from_ipv4(reserved.ipv4),
        ..CfgEndpointState::default()
    }
}

/// The tag of the endpoint's access port: its group's own VLAN if it has one (ACI), else
/// the network's VLAN (on the VXLAN bridge: the local VLAN).
fn access_tag(net: &CfgNetworkState, group: Option<&EndpointGroupState>) -> u16 {
    let tag = group
        .filter(|g| g.pkt_tag_type == "vlan" && g.pkt_tag != 0)
        .map_or(net.pkt_tag, |g| g.pkt_tag);
    u16::try_from(tag).unwrap_or(0)
}

/// Turn transmit checksum offload off on `ifname` in the calling thread's namespace (as
/// `ethtool -K <ifname> tx off`, over netlink: no process per pod). Needed with OVS's
/// userspace datapath only: a veth leaves TCP/UDP checksums to the receiver's hardware, which
/// the userspace datapath does not complete, so without this ping works and TCP does not.
/// `Some(problem)` on failure.
pub(crate) fn disable_tx_offload(ifname: &str) -> Option<String> {
    crate::netlink::ethtool::disable_tx_checksum(ifname)
        .err()
        .map(|e| format!("ethtool netlink FEATURES_SET on {ifname}: {e}"))
}

/// How long each step of one attach took (steps that run at once overlap), for the debug log
/// and `netplugin_cni_add_step_duration_seconds`. Steps: `lookup` (network and group),
/// `netmaster` (createEndpoint: REST + etcd transaction), `labels` (updateEndpoint), `veth`
/// (pair into the pod namespace), `ovsdb` (port transaction until the cache has it), `ofport`
/// (until the switch reports the port or OVSDB has its number), `pod_side` (MAC, addresses, routes, offload), `flows`
/// (bundle confirmed by the switch), `oper` (oper state in etcd), `flows_moved` (only when
/// ovs-vswitchd did not give the port the number asked for).
#[derive(Default)]
struct StepLog {
    steps: std::sync::Mutex<Vec<(&'static str, std::time::Duration)>>,
}

impl StepLog {
    fn record(&self, step: &'static str, elapsed: std::time::Duration) {
        match self.steps.lock() {
            Ok(mut s) => s.push((step, elapsed)),
            Err(p) => p.into_inner().push((step, elapsed)),
        }
    }

    /// Run `work` and record how long it took as `step`.
    async fn time<T>(&self, step: &'static str, work: impl std::future::Future<Output = T>) -> T {
        let start = std::time::Instant::now();
        let out = work.await;
        self.record(step, start.elapsed());
        out
    }

    fn take(&self) -> Vec<(&'static str, std::time::Duration)> {
        match self.steps.lock() {
            Ok(mut s) => std::mem::take(&mut *s),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        }
    }
}

/// `step 1.2 ms, step 0.3 ms, ...`
fn format_steps(steps: &[(&'static str, std::time::Duration)]) -> String {
    steps
        .iter()
        .map(|(step, d)| format!("{step} {:.1} ms", d.as_secs_f64() * 1000.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// IPv6 off on a pod's host end (see [`crate::netlink::Netlink::disable_ipv6_here`]); the
/// pod works without it, so a kernel without IPv6 or a read-only `/proc/sys` is only logged.
fn quiet_host_end(nl: &crate::netlink::Netlink, host_end: &str) {
    if let Err(e) = nl.disable_ipv6_here(host_end) {
        tracing::debug!(error = %e, "IPv6 left on");
    }
}

/// A new port's OpenFlow number from whichever says it first: the switch (its PORT_STATUS:
/// the port is installed under the number asked for; see `ofctrl::ports`) or OVSDB (the
/// number ovs-vswitchd wrote back a few milliseconds later, whatever it is, or the error why
/// it could not open the port). The switch's report is only taken for the number asked for: a
/// port numbered otherwise is for OVSDB to tell (and the flows move). Also says which it was
/// (`switch`, `ovsdb`).
async fn first_port_number(
    on_switch: Option<(u32, impl std::future::Future<Output = bool>)>,
    in_db: impl std::future::Future<Output = std::result::Result<u32, crate::ovsdb::OvsdbError>>,
) -> Result<(u32, &'static str)> {
    let on_switch = async move {
        if let Some((asked, installed)) = on_switch
            && installed.await
        {
            return asked;
        }
        // No number asked for, or the agent is gone: OVSDB alone answers.
        std::future::pending().await
    };
    let (on_switch, in_db) = (std::pin::pin!(on_switch), std::pin::pin!(in_db));
    match futures::future::select(on_switch, in_db).await {
        futures::future::Either::Left((asked, _)) => Ok((asked, "switch")),
        futures::future::Either::Right((in_db, _)) => Ok((in_db?, "ovsdb")),
    }
}

/// What a half-done attach has created, for the rollback.
#[derive(Default)]
struct Created {
    endpoint: bool,
    veth: bool,
    port: bool,
    ofport: Option<u32>,
    host_access: bool,
}

impl Driver {
    pub(crate) async fn load_network(
        &self,
        tenant: &str,
        network: &str,
    ) -> Result<CfgNetworkState> {
        let id = CfgNetworkState::id_for(tenant, network);
        let key = CfgNetworkState::key_for(&id);
        let kv = self
            .store
            .get(&key)
            .await?
            .ok_or_else(|| PluginError::UnknownNetwork {
                tenant: tenant.to_string(),
                network: network.to_string(),
            })?;
        serde_json::from_slice(&kv.value).map_err(|e| PluginError::Corrupt {
            kind: CfgNetworkState::KIND,
            key,
            reason: e.to_string(),
        })
    }

    pub(crate) async fn load_group(
        &self,
        tenant: &str,
        group: &str,
    ) -> Result<Option<EndpointGroupState>> {
        if group.is_empty() {
            return Ok(None);
        }
        let id = EndpointGroupState::id_for(tenant, group);
        if let Some(g) = self.group(&id) {
            return Ok(Some(g));
        }
        let key = EndpointGroupState::key_for(&id);
        let kv = self
            .store
            .get(&key)
            .await?
            .ok_or_else(|| PluginError::UnknownGroup {
                tenant: tenant.to_string(),
                group: group.to_string(),
            })?;
        serde_json::from_slice(&kv.value)
            .map(Some)
            .map_err(|e| PluginError::Corrupt {
                kind: EndpointGroupState::KIND,
                key,
                reason: e.to_string(),
            })
    }

    fn info(
        &self,
        oper: OperEndpointState,
        net: &CfgNetworkState,
        ofport: u32,
    ) -> LocalEndpointInfo {
        LocalEndpointInfo {
            oper,
            ofport,
            kind: bridge_kind(&net.pkt_tag_type),
            prefix_len: net.subnet_len,
            ipv6_prefix_len: net.ipv6_subnet_len,
            gateway: net.gateway.clone(),
            ipv6_gateway: net.ipv6_gateway.clone(),
            host_access: None,
        }
    }

    /// Attach a pod (see the module documentation).
    pub async fn attach(&self, pod: &PodAttach) -> Result<LocalEndpointInfo> {
        for (field, value) in [
            ("container id", &pod.container_id),
            ("CNI_IFNAME", &pod.ifname),
        ] {
            if value.is_empty() {
                return Err(PluginError::Invalid {
                    field,
                    problem: "is empty".into(),
                });
            }
        }
        if !pod.handover && !pod.netns.is_absolute() {
            return Err(PluginError::Invalid {
                field: "CNI_NETNS",
                problem: format!("{:?} is not an absolute path", pod.netns),
            });
        }
        let net_id = CfgNetworkState::id_for(&pod.tenant, &pod.network);
        let ep_id = CfgEndpointState::id_for(&net_id, &pod.container_id);
        let lock = self.endpoint_lock(&ep_id);
        let _turn = lock.lock().await;
        if let Some(have) = self.with_state(|s| s.local.get(&ep_id).cloned()) {
            if have.oper.netns == pod.netns.to_string_lossy() && have.oper.intf_name == pod.ifname {
                return Ok(have);
            }
            return Err(PluginError::EndpointExists(ep_id));
        }
        let steps = StepLog::default();
        let lookup_started = std::time::Instant::now();
        // The watch keeps networks current; etcd is asked only for one not seen yet.
        let net = match self.known_network(&net_id) {
            Some(net) => net,
            None => self.load_network(&pod.tenant, &pod.network).await?,
        };
        let group = self.load_group(&pod.tenant, &pod.group).await?;
        self.ensure_network(&net).await?;
        steps.record("lookup", lookup_started.elapsed());
        let mut created = Created::default();
        match self
            .attach_steps(pod, &net, group.as_ref(), &ep_id, &mut created, &steps)
            .await
        {
            Ok(info) => {
                let steps = steps.take();
                for (step, elapsed) in &steps {
                    self.metrics.add_step(step, *elapsed);
                }
                tracing::debug!(
                    endpoint = %ep_id,
                    total_ms = lookup_started.elapsed().as_secs_f64() * 1000.0,
                    steps = %format_steps(&steps),
                    "endpoint attached"
                );
                Ok(info)
            }
            Err(e) => {
                tracing::warn!(endpoint = %ep_id, error = %e, "attach failed; undoing");
                self.undo(pod, &net, &ep_id, &created).await;
                Err(e)
            }
        }
    }

    /// The attach itself, as two branches:
    /// - host: the veth pair, then the OVS port and its OpenFlow port number;
    /// - pod: netmaster's allocation, then (once the veth exists) the pod side (MAC,
    ///   addresses, routes) and the oper state, at once.
    ///
    /// The flows need the address and the OpenFlow port number asked for. With an address
    /// from this host's reserve ([`super::reserve`]) they go to the switch at once, while
    /// netmaster records the endpoint and ovs-vswitchd has not started on the port (it handles
    /// one thing at a time: flows sent during its port add wait for it); otherwise they follow
    /// netmaster's answer. Flows whose address or port number turn out otherwise are moved.
    async fn attach_steps(
        &self,
        pod: &PodAttach,
        net: &CfgNetworkState,
        group: Option<&EndpointGroupState>,
        ep_id: &str,
        created: &mut Created,
        steps: &StepLog,
    ) -> Result<LocalEndpointInfo> {
        let reserved = self.take_reserved(pod, net, group);
        let attached = self
            .attach_with(pod, net, group, ep_id, reserved, created, steps)
            .await;
        if let Some(r) = reserved {
            self.with_state(|s| s.reserve.finish(&net.id, r.ipv4));
        }
        attached
    }

    /// [`Self::attach_steps`] with `reserved`, an address of this host's reserve, or none.
    #[allow(clippy::too_many_arguments)]
    async fn attach_with(
        &self,
        pod: &PodAttach,
        net: &CfgNetworkState,
        group: Option<&EndpointGroupState>,
        ep_id: &str,
        reserved: Option<Reserved>,
        created: &mut Created,
        steps: &StepLog,
    ) -> Result<LocalEndpointInfo> {
        let kind = bridge_kind(&net.pkt_tag_type);
        let ovs_port = format!("v{}", port_name_for(ep_id));
        let planned = self.plan_ofport(bridge_name(kind), &ovs_port);
        // Rollback of the host side is idempotent, so it is marked before it starts.
        created.veth = true;
        created.port = true;
        // With an address from this host's reserve, the endpoint netmaster will record is
        // known before it answers.
        let provisional = reserved.map(|r| provisional_endpoint(pod, ep_id, group, &r));
        let early = match &provisional {
            Some(ep) => Some(local_endpoint(
                &self.oper_state(pod, ep_id, ep),
                net,
                group,
                planned,
            )?),
            None => None,
        };
        if early.is_some() {
            created.ofport = Some(planned);
        }
        let (veth_ready, veth_made) = futures::channel::oneshot::channel::<()>();
        let port = PortSpec::access(ovs_port.as_str(), access_tag(net, group))
            .endpoint_id(ep_id)
            .policing(policing_of(group)?)
            .ofport_request(planned);
        let host = self.host_side(pod, kind, &port, steps, veth_ready);
        let add_flows = |local: LocalEndpoint| async move {
            steps
                .time("flows", self.agent(kind).add_local_endpoint(local))
                .await
                .map_err(|e| PluginError::agent(kind, e))
        };
        let (created_endpoint, created_ofport) = (&mut created.endpoint, &mut created.ofport);
        let allocate = async {
            let ep = self.allocate(pod, net, group, reserved, steps).await?;
            *created_endpoint = true;
            Ok::<_, PluginError>(ep)
        };
        // The pod end must exist; if the host branch failed, its error is the answer.
        let pod_side = |oper: OperEndpointState| async move {
            if veth_made.await.is_err() {
                return Ok(None);
            }
            self.pod_side_and_oper(pod, net, &oper, steps).await?;
            Ok::<_, PluginError>(Some(oper))
        };
        let pod_branch = async {
            match (&provisional, &early) {
                (Some(prov), Some(early)) => {
                    // Flows, the pod's addresses and the oper state at once with netmaster's
                    // transaction; put right if netmaster answers otherwise.
                    let (flows, ep, plumbed) = futures::join!(
                        add_flows(early.clone()),
                        allocate,
                        pod_side(self.oper_state(pod, ep_id, prov))
                    );
                    let ep = ep?;
                    flows?;
                    let Some(plumbed) = plumbed? else {
                        return Ok(None);
                    };
                    let oper = self.oper_state(pod, ep_id, &ep);
                    if oper != plumbed {
                        steps
                            .time("readdress", self.readdress(net, &plumbed, &oper))
                            .await?;
                    }
                    let local = local_endpoint(&oper, net, group, planned)?;
                    Ok::<_, PluginError>(Some((oper, local)))
                }
                _ => {
                    let ep = allocate.await?;
                    let oper = self.oper_state(pod, ep_id, &ep);
                    let local = local_endpoint(&oper, net, group, planned)?;
                    // The flows name the port by the number asked for, so they go in while
                    // ovs-vswitchd is still adding the port (rolled back if anything fails).
                    *created_ofport = Some(planned);
                    let (flows, plumbed) =
                        futures::join!(add_flows(local.clone()), pod_side(oper.clone()));
                    flows?;
                    Ok(plumbed?.map(|_| (oper, local)))
                }
            }
        };
        let (ofport, pod_branch) = futures::join!(host, pod_branch);
        let ofport = ofport?;
        let Some((oper, local)) = pod_branch? else {
            return Err(PluginError::Invalid {
                field: "veth",
                problem: format!("the host branch of {ep_id} ended without a veth"),
            });
        };
        let announce = local.ipv4;
        let installed = early.unwrap_or_else(|| local.clone());
        let wanted = LocalEndpoint {
            port_no: ofport,
            ..local
        };
        if installed != wanted {
            // ovs-vswitchd numbers the port otherwise only if the number was taken meanwhile
            // (by a port added behind netplugin's back); netmaster answers another address
            // than the reserved one only for an endpoint that existed already (a retried ADD).
            tracing::info!(
                endpoint = ep_id,
                requested = planned,
                ofport,
                sent = ?installed.ipv4,
                address = ?wanted.ipv4,
                "the pod's flows named another port number or address; moving them"
            );
            self.agent(kind)
                .remove_local_endpoint(planned)
                .await
                .map_err(|e| PluginError::agent(kind, e))?;
            created.ofport = None;
            steps
                .time("flows_moved", self.agent(kind).add_local_endpoint(wanted))
                .await
                .map_err(|e| PluginError::agent(kind, e))?;
            created.ofport = Some(ofport);
        }
        self.bgp_local(kind, announce, true);
        let host_access = if self.wants_host_access(net, pod) {
            created.host_access = true;
            let access = self.add_host_access(&oper.port_name, &pod.netns);
            Some(steps.time("host_access", access).await?)
        } else {
            None
        };
        let info = LocalEndpointInfo {
            host_access,
            ..self.info(oper, net, ofport)
        };
        self.with_state(|s| s.local.insert(ep_id.to_string(), info.clone()));
        Ok(info)
    }

    /// Whether `pod` may take its address from this host's reserve: a reserve is kept
    /// (`--address-reserve`), the runtime leaves the address to us, the pod asks for none of
    /// its own, and its group hands out the network's addresses (one with its own pool does
    /// not).
    fn may_reserve(&self, pod: &PodAttach, group: Option<&EndpointGroupState>) -> bool {
        self.keeps_reserve()
            && !pod.handover
            && pod.address.is_empty()
            && group.is_none_or(|g| g.ip_pool.is_empty())
    }

    /// Whether this host keeps an address reserve: `--address-reserve` is not 0, and netplugin
    /// picks its pods' addresses (in Docker modes Docker's IPAM driver asks for each).
    fn keeps_reserve(&self) -> bool {
        self.cfg.address_reserve > 0 && !matches!(self.cfg.mode.as_str(), "docker" | "swarm-mode")
    }

    /// Keep the reserve a netmaster answer lists, if it lists one.
    fn listed_reserve(&self, net_id: &str, answer: &EndpointResponse) {
        let Some(held) = answer.HostReserve.as_deref() else {
            return;
        };
        self.with_state(|s| {
            // An older listing may name an address an endpoint has meanwhile: this host's, or
            // (taken from the reserve when the network ran out) one on another host. Only the
            // listed addresses are looked for.
            let listed: BTreeSet<&str> = held.iter().map(|r| r.IPv4Address.as_str()).collect();
            let in_use: BTreeSet<Ipv4Addr> = s
                .local
                .values()
                .map(|l| l.oper.ip_address.as_str())
                .chain(
                    s.remote
                        .values()
                        .filter_map(|r| r.agent_id.split(':').next()),
                )
                .filter(|ip| listed.contains(ip))
                .filter_map(|ip| ip.parse().ok())
                .collect();
            s.reserve
                .listed(net_id, answer.ReserveGeneration, held, |ip| {
                    in_use.contains(&ip)
                });
        });
    }

    /// Whether this host's reserve of `net` is down to half its size: only then does a
    /// createEndpoint ask netmaster to top it up (and list it), so most pods' transactions
    /// only claim their address.
    fn reserve_low(&self, net: &CfgNetworkState) -> bool {
        let ready = self.with_state(|s| s.reserve.ready(&net.id));
        ready <= usize::try_from(self.cfg.address_reserve / 2).unwrap_or(0)
    }

    /// An address from this host's reserve of `net`, if `pod` may have one and one is ready.
    fn take_reserved(
        &self,
        pod: &PodAttach,
        net: &CfgNetworkState,
        group: Option<&EndpointGroupState>,
    ) -> Option<Reserved> {
        if !self.may_reserve(pod, group) {
            return None;
        }
        self.with_state(|s| s.reserve.take(&net.id))
    }

    /// A pod plumbed and recorded as `plumbed` (an address from the reserve) that netmaster
    /// answered otherwise (an endpoint that existed already): its addresses and MAC replaced
    /// inside its namespace, and the oper state rewritten.
    async fn readdress(
        &self,
        net: &CfgNetworkState,
        plumbed: &OperEndpointState,
        oper: &OperEndpointState,
    ) -> Result<()> {
        tracing::info!(
            endpoint = %oper.id,
            plumbed = %plumbed.ip_address,
            recorded = %oper.ip_address,
            "netmaster recorded another address than the reserved one; re-addressing the pod"
        );
        let kind = bridge_kind(&net.pkt_tag_type);
        let old = interface_spec(plumbed, net, self.pod_mtu(kind))?;
        let new = interface_spec(oper, net, self.pod_mtu(kind))?;
        let netns = new.netns.clone();
        in_netns(&netns, move |nl| async move {
            for address in &old.addresses {
                nl.delete_address(&old.ifname, *address).await?;
            }
            if let Some(mac) = new.mac {
                nl.set_mac(&new.ifname, mac).await?;
            }
            for address in &new.addresses {
                nl.add_address(&new.ifname, *address).await?;
            }
            Ok(())
        })
        .await?;
        self.put_oper(oper).await
    }

    /// The oper state of the endpoint netmaster answered for `pod`.
    fn oper_state(&self, pod: &PodAttach, ep_id: &str, ep: &CfgEndpointState) -> OperEndpointState {
        OperEndpointState {
            id: ep.id.clone(),
            net_id: ep.net_id.clone(),
            endpoint_id: ep.endpoint_id.clone(),
            service_name: ep.service_name.clone(),
            endpoint_group_id: ep.endpoint_group_id,
            endpoint_group_key: ep.endpoint_group_key.clone(),
            ip_address: ep.ip_address.clone(),
            ipv6_address: ep.ipv6_address.clone(),
            mac_address: ep.mac_address.clone(),
            homing_host: self.cfg.host.clone(),
            intf_name: pod.ifname.clone(),
            port_name: port_name_for(ep_id),
            vtep_ip: self.cfg.vtep_ip.to_string(),
            container_id: pod.container_id.clone(),
            ep_common_name: pod.pod_name.clone(),
            netns: pod.netns.to_string_lossy().into_owned(),
            pod_namespace: pod.pod_namespace.clone(),
            tenant: pod.tenant.clone(),
            network: pod.network.clone(),
            labels: pod.labels.clone(),
        }
    }

    /// The pod's MAC, addresses, routes (and offload) inside its namespace, and the oper
    /// state in etcd, at once.
    async fn pod_side_and_oper(
        &self,
        pod: &PodAttach,
        net: &CfgNetworkState,
        oper: &OperEndpointState,
        steps: &StepLog,
    ) -> Result<()> {
        let kind = bridge_kind(&net.pkt_tag_type);
        let spec = interface_spec(oper, net, self.pod_mtu(kind))?;
        let pod_netns = spec.netns.clone();
        let tx_offload_off = self.cfg.ovs_datapath == "netdev";
        if pod.handover {
            // The runtime moves the pod end (still in the host namespace) and sets its
            // addresses and routes; it gets its MAC, and with the userspace datapath transmit
            // offload off, from the host worker (in the host namespace, so the netlink
            // request is too).
            let pod_end = self.host.run(move |nl| async move {
                if let Some(mac) = spec.mac {
                    nl.set_mac(&spec.ifname, mac).await?;
                }
                Ok(tx_offload_off
                    .then(|| disable_tx_offload(&spec.ifname))
                    .flatten())
            });
            let (pod_done, stored) = futures::join!(
                steps.time("pod_side", pod_end),
                steps.time("oper", self.put_oper(oper))
            );
            if let Some(problem) = pod_done? {
                return Err(PluginError::Offload {
                    ifname: pod.ifname.clone(),
                    problem,
                });
            }
            return stored;
        }
        // Kubernetes mode: cluster IPs on-link, so the pod ARPs for them (crate::kubesvc).
        let service_route = self.service_route;
        let pod_side = in_netns(&pod_netns, move |nl| async move {
            if let Some(mac) = spec.mac {
                nl.set_mac(&spec.ifname, mac).await?;
            }
            for address in &spec.addresses {
                nl.add_address(&spec.ifname, *address).await?;
            }
            nl.set_up(&spec.ifname).await?;
            for gateway in &spec.gateways {
                nl.add_default_route(&spec.ifname, *gateway).await?;
            }
            if let Some(subnet) = service_route {
                nl.add_onlink_route(&spec.ifname, subnet).await?;
            }
            // The hairpin source: where the pod's replies to its own connections to a service
            // that balanced them to itself go (ofnet's hairpin flows), reachable whatever the
            // pod's routes, one per family the pod has.
            for address in &spec.addresses {
                let source = match address.addr() {
                    IpAddr::V4(_) => IpAddr::V4(hairpin::HAIRPIN_SOURCE),
                    IpAddr::V6(_) => IpAddr::V6(hairpin::HAIRPIN_SOURCE6),
                };
                nl.add_static_neighbour(&spec.ifname, source, hairpin::hairpin_mac())
                    .await?;
            }
            // This thread is inside the pod's namespace.
            Ok(tx_offload_off
                .then(|| disable_tx_offload(&spec.ifname))
                .flatten())
        });
        let (pod_done, stored) = futures::join!(
            steps.time("pod_side", pod_side),
            steps.time("oper", self.put_oper(oper))
        );
        if let Some(problem) = pod_done? {
            return Err(PluginError::Offload {
                ifname: pod.ifname.clone(),
                problem,
            });
        }
        stored
    }

    /// netmaster's `/plugin/createEndpoint`: the address, MAC and group of the endpoint, and
    /// its labels. Names the address `reserved` from this host's reserve if it has one (and
    /// asks again without it if netmaster no longer holds it for this host), asks for the
    /// reserve to be topped up when it is low, and keeps the reserve netmaster lists.
    async fn allocate(
        &self,
        pod: &PodAttach,
        net: &CfgNetworkState,
        group: Option<&EndpointGroupState>,
        reserved: Option<Reserved>,
        steps: &StepLog,
    ) -> Result<CfgEndpointState> {
        let client = self.netmaster().await?;
        let mut request = CreateEndpointRequest {
            TenantName: pod.tenant.clone(),
            NetworkName: pod.network.clone(),
            ServiceName: pod.group.clone(),
            EndpointID: pod.container_id.clone(),
            EPCommonName: pod.pod_name.clone(),
            ConfigEP: ConfigEp {
                Container: pod.container_id.clone(),
                Host: self.cfg.host.clone(),
                ServiceName: pod.group.clone(),
                IPAddress: pod.address.clone(),
                ..ConfigEp::default()
            },
            Labels: pod.labels.clone(),
            ReserveAddresses: if self.may_reserve(pod, group) && self.reserve_low(net) {
                self.cfg.address_reserve
            } else {
                0
            },
        };
        if let Some(r) = reserved {
            request.ConfigEP.IPAddress = r.ipv4.to_string();
            request.ConfigEP.IPv6Address = r.ipv6.map(|a| a.to_string()).unwrap_or_default();
        }
        let mut answer = steps
            .time("netmaster", client.create_endpoint_reserving(&request))
            .await;
        if reserved.is_some()
            && let Err(e) = &answer
            && e.status() == Some(409)
        {
            // Not (or no longer) this host's to claim: netmaster picks one.
            tracing::info!(endpoint = %pod.container_id, error = %e, "reserved address refused; asking for any");
            request.ConfigEP.IPAddress.clear();
            request.ConfigEP.IPv6Address.clear();
            answer = steps
                .time("netmaster", client.create_endpoint_reserving(&request))
                .await;
        }
        if let Ok(r) = &answer {
            self.listed_reserve(&net.id, r);
        }
        let forget = |e: &master::client::ClientError| {
            if e.status().is_none() {
                self.forget_netmaster();
            }
        };
        let ep = answer.inspect_err(forget)?.EndpointConfig;
        // The pod's labels make it a provider of the services whose selectors they match;
        // deleting the endpoint withdraws it again. netmaster records them with the endpoint;
        // one that answers without them (older, no `Labels` in createEndpoint) gets
        // updateEndpoint's "start" event.
        if !pod.labels.is_empty() && ep.labels != pod.labels {
            let update = UpdateEndpointRequest {
                IPAddress: ep.ip_address.clone(),
                ContainerID: pod.container_id.clone(),
                Labels: pod.labels.clone(),
                Tenant: pod.tenant.clone(),
                Network: pod.network.clone(),
                Event: "start".into(),
                EndpointID: pod.container_id.clone(),
                EPCommonName: pod.pod_name.clone(),
            };
            steps
                .time("labels", client.update_endpoint(&update))
                .await
                .inspect_err(forget)?;
        }
        Ok(ep)
    }

    /// The veth pair (pod end born in the pod namespace under `CNI_IFNAME`, down), the host
    /// end up as OVS port `port` on `kind`'s bridge; returns its OpenFlow port number.
    /// `veth_ready` is told once the pair exists (and dropped untold if it could not be made).
    async fn host_side(
        &self,
        pod: &PodAttach,
        kind: BridgeKind,
        port: &PortSpec,
        steps: &StepLog,
        veth_ready: futures::channel::oneshot::Sender<()>,
    ) -> Result<u32> {
        let (host, ifname, netns, mtu) = (
            port.name.clone(),
            pod.ifname.clone(),
            pod.netns.clone(),
            self.pod_mtu(kind),
        );
        let handover = pod.handover;
        let veth = self.host.run(move |nl| async move {
            // A leftover of an interrupted attempt is replaced.
            if handover {
                nl.delete_link(&host).await?;
                nl.delete_link(&ifname).await?;
                nl.create_veth(&host, &ifname).await?;
                nl.set_mtu(&host, mtu).await?;
                nl.set_mtu(&ifname, mtu).await?;
                quiet_host_end(&nl, &host);
                nl.set_up(&host).await
            } else {
                // One netlink request unless a leftover is in the way.
                nl.create_veth_into(&host, &ifname, &netns, mtu, None)
                    .await?;
                // Before the pod's end comes up (the pod side waits for this step).
                quiet_host_end(&nl, &host);
                Ok(())
            }
        });
        steps.time("veth", veth).await?;
        let _ = veth_ready.send(());
        // Asked before the port is inserted, so the switch's report cannot come too early for
        // it (the agent's port table answers at once if it came first).
        let on_switch = port
            .ofport_request
            .map(|n| (n, self.agent(kind).switch_has_port(&port.name, n)));
        steps
            .time("ovsdb", self.ovsdb.ensure_port(bridge_name(kind), port))
            .await?;
        let in_db = self.ovsdb.wait_ofport(&port.name, OFPORT_TIMEOUT);
        let (ofport, source) = steps
            .time("ofport", first_port_number(on_switch, in_db))
            .await?;
        self.metrics.port_number_from(source);
        Ok(ofport)
    }

    /// The OpenFlow port number to ask for pod port `ovs_port` on `bridge`: its own if the
    /// port exists already (a leftover the attach keeps), else a number no interface of the
    /// bridge has or asked for, counting on from the highest of the last number asked for and
    /// the numbers in use (wrapping at the end of the range). Counting on rather than taking
    /// the lowest free number does what ovs-vswitchd does itself: a number freed a moment ago
    /// is not given to the next pod. Numbers asked for by attaches in flight stay unique
    /// because the counter moves under the state lock.
    fn plan_ofport(&self, bridge: &'static str, ovs_port: &str) -> u32 {
        let (own, used) = self.ovsdb.read(|c| {
            let own = c
                .interface(ovs_port)
                .and_then(|i| i.ofport)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0);
            (own, c.ofports_of_bridge(bridge))
        });
        if let Some(own) = own {
            return own;
        }
        self.with_state(|s| {
            let last = s.last_ofport.entry(bridge).or_insert(0);
            let highest = used.range(..OFPORT_MAX).next_back().copied().unwrap_or(0);
            let mut next = (*last).max(highest);
            // At most every number once: on a full bridge the request is for a taken
            // number, and ovs-vswitchd's own answer (no port) is the error.
            for _ in 0..OFPORT_MAX {
                next = if next + 1 >= OFPORT_MAX { 1 } else { next + 1 };
                if !used.contains(&next) {
                    break;
                }
            }
            *last = next;
            next
        })
    }

    async fn put_oper(&self, oper: &OperEndpointState) -> Result<()> {
        let key = OperEndpointState::key_for(&oper.id);
        let value = serde_json::to_vec(oper).map_err(|e| PluginError::Corrupt {
            kind: OperEndpointState::KIND,
            key: key.clone(),
            reason: e.to_string(),
        })?;
        self.store.put(&key, value).await?;
        Ok(())
    }

    /// Roll back a failed attach; each step logs (and otherwise ignores) its own failure.
    async fn undo(&self, pod: &PodAttach, net: &CfgNetworkState, ep_id: &str, created: &Created) {
        let kind = bridge_kind(&net.pkt_tag_type);
        if created.host_access
            && let Err(e) = self.remove_host_access(&port_name_for(ep_id), None).await
        {
            tracing::warn!(endpoint = ep_id, error = %e, "undo: host access");
        }
        if let Some(ofport) = created.ofport
            && let Err(e) = self.agent(kind).remove_local_endpoint(ofport).await
        {
            tracing::warn!(endpoint = ep_id, error = %e, "undo: agent endpoint");
        }
        let port = format!("v{}", port_name_for(ep_id));
        if created.port
            && let Err(e) = self.ovsdb.delete_port(&port).await
        {
            tracing::warn!(endpoint = ep_id, error = %e, "undo: OVS port");
        }
        // Deleting the host end removes the pair wherever its pod end is; an interface of the
        // pod that is not ours (a failed create because `CNI_IFNAME` exists) is left alone.
        if created.veth {
            let host = port.clone();
            if let Err(e) = self
                .host
                .run(move |nl| async move { nl.delete_link(&host).await })
                .await
            {
                tracing::warn!(endpoint = ep_id, error = %e, "undo: veth");
            }
        }
        // Written alongside the flows, so it may exist when a later step failed.
        if let Err(e) = self.store.delete(&OperEndpointState::key_for(ep_id)).await {
            tracing::warn!(endpoint = ep_id, error = %e, "undo: oper state");
        }
        if created.endpoint {
            self.release_endpoint(&pod.tenant, &pod.network, &pod.container_id)
                .await
                .unwrap_or_else(
                    |e| tracing::warn!(endpoint = ep_id, error = %e, "undo: netmaster endpoint"),
                );
        }
    }

    /// `/plugin/deleteEndpoint`; an endpoint netmaster does not know is already released.
    async fn release_endpoint(&self, tenant: &str, network: &str, container: &str) -> Result<()> {
        let client = self.netmaster().await?;
        // The addresses go to this host's reserve (netmaster frees them instead for a group
        // with its own pool), so the next pod here gets the lowest one again.
        let request = DeleteEndpointRequest {
            TenantName: tenant.to_string(),
            NetworkName: network.to_string(),
            EndpointID: container.to_string(),
            ReserveAddresses: if self.keeps_reserve() {
                self.cfg.address_reserve
            } else {
                0
            },
            ..DeleteEndpointRequest::default()
        };
        match client.delete_endpoint_reserving(&request).await {
            Ok(answer) => {
                self.listed_reserve(&CfgNetworkState::id_for(tenant, network), &answer);
                Ok(())
            }
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => {
                if e.status().is_none() {
                    self.forget_netmaster();
                }
                Err(e.into())
            }
        }
    }

    /// The local endpoint of a container (and interface, when given).
    pub fn find_local(&self, container_id: &str, ifname: &str) -> Option<LocalEndpointInfo> {
        self.with_state(|s| {
            s.local
                .values()
                .find(|l| {
                    l.oper.container_id == container_id
                        && (ifname.is_empty() || l.oper.intf_name == ifname)
                })
                .cloned()
        })
    }

    /// Detach a pod (see the module documentation).
    pub async fn detach(&self, pod: &PodDetach) -> Result<()> {
        let known = self.find_local(&pod.container_id, &pod.ifname);
        let (tenant, network, ep_id) = match &known {
            Some(l) => (
                l.oper.tenant.clone(),
                l.oper.network.clone(),
                l.oper.id.clone(),
            ),
            None => {
                let net_id = CfgNetworkState::id_for(&pod.tenant, &pod.network);
                (
                    pod.tenant.clone(),
                    pod.network.clone(),
                    CfgEndpointState::id_for(&net_id, &pod.container_id),
                )
            }
        };
        let lock = self.endpoint_lock(&ep_id);
        let _turn = lock.lock().await;
        let known = self.with_state(|s| s.local.get(&ep_id).cloned()).or(known);
        self.remove_local(&ep_id, known.as_ref()).await?;
        self.release_endpoint(&tenant, &network, &pod.container_id)
            .await?;
        Ok(())
    }

    /// Remove the host side of an endpoint: agent, OVS port, veth, oper state.
    async fn remove_local(&self, ep_id: &str, known: Option<&LocalEndpointInfo>) -> Result<()> {
        if let Some(l) = known {
            self.bgp_local(l.kind, l.oper.ip_address.parse().ok(), false);
            match self.agent(l.kind).remove_local_endpoint(l.ofport).await {
                Ok(()) => {}
                // Already gone from the agent (e.g. a reconcile that never re-added it).
                Err(ofnet::AgentError::EndpointDb(_)) => {}
                Err(e) => return Err(PluginError::agent(l.kind, e)),
            }
        }
        let port_name = known.map_or_else(|| port_name_for(ep_id), |l| l.oper.port_name.clone());
        // A known endpoint says whether it has host access; an unknown one may.
        match known.map(|l| l.host_access) {
            Some(None) => {}
            access => {
                let access_port = access.flatten().map(|h| h.port);
                self.remove_host_access(&port_name, access_port).await?;
            }
        }
        let ovs_port = format!("v{port_name}");
        self.ovsdb.delete_port(&ovs_port).await?;
        // The host end takes the pod end with it; the pod's interface is only ever ours
        // through this pair, so nothing in the pod namespace is deleted by name.
        self.host
            .run(move |nl| async move { nl.delete_link(&ovs_port).await })
            .await?;
        self.store
            .delete(&OperEndpointState::key_for(ep_id))
            .await?;
        self.with_state(|s| s.local.remove(ep_id));
        Ok(())
    }

    /// `DELETE /debug/reclaimEndpoint/{id}`: remove a local endpoint's host side (agent, OVS,
    /// veth, oper state) by endpoint id or container id. Returns false if there is none.
    pub async fn reclaim(&self, id: &str) -> Result<bool> {
        let found = self.with_state(|s| {
            s.local
                .values()
                .find(|l| l.oper.id == id || l.oper.container_id == id)
                .cloned()
        });
        let Some(l) = found else {
            return Ok(false);
        };
        let lock = self.endpoint_lock(&l.oper.id);
        let _turn = lock.lock().await;
        self.remove_local(&l.oper.id, Some(&l)).await?;
        Ok(true)
    }

    /// Start-up: re-learn this host's endpoints from their oper state and OVSDB (see the
    /// module documentation). Returns (kept, removed).
    pub async fn reconcile(&self) -> Result<(usize, usize)> {
        let listing = self.store.list(&OperEndpointState::prefix()).await?;
        let (mut kept, mut removed) = (0, 0);
        for kv in listing.entries {
            let Ok(oper) = serde_json::from_slice::<OperEndpointState>(&kv.value) else {
                tracing::warn!(key = %kv.key, "ignoring an oper state that does not parse");
                continue;
            };
            if oper.homing_host != self.cfg.host {
                continue;
            }
            match self.readopt(&oper).await {
                Ok(true) => kept += 1,
                Ok(false) => {
                    removed += 1;
                    if let Err(e) = self.remove_local(&oper.id, None).await {
                        tracing::warn!(endpoint = %oper.id, error = %e, "removing a stale endpoint");
                    }
                }
                Err(e) => {
                    tracing::warn!(endpoint = %oper.id, error = %e, "cannot re-adopt endpoint; leaving it for a DEL");
                }
            }
        }
        self.remove_orphan_ports().await?;
        Ok((kept, removed))
    }

    /// Re-adopt one endpoint if its config, port and veth still exist; false if it must go.
    async fn readopt(&self, oper: &OperEndpointState) -> Result<bool> {
        let cfg_key = CfgEndpointState::key_for(&oper.id);
        if self.store.get(&cfg_key).await?.is_none() {
            return Ok(false);
        }
        let Ok(net) = self.load_network(&oper.tenant, &oper.network).await else {
            return Ok(false);
        };
        let host_end = oper.ovs_port();
        let probe = host_end.clone();
        let veth = self
            .host
            .run(move |nl| async move { nl.link(&probe).await })
            .await?;
        let has_port = self.ovsdb.read(|c| c.port(&host_end).is_some());
        if veth.is_none() || !has_port {
            return Ok(false);
        }
        let group_name = oper.service_name.clone();
        let group = self
            .load_group(&oper.tenant, &group_name)
            .await
            .ok()
            .flatten();
        self.ensure_network(&net).await?;
        let kind = bridge_kind(&net.pkt_tag_type);
        // Same spec as at attach: an unchanged port is left alone (same uuids, same ofport).
        let port = PortSpec::access(host_end.clone(), access_tag(&net, group.as_ref()))
            .endpoint_id(&oper.id)
            .policing(policing_of(group.as_ref())?);
        self.ovsdb.ensure_port(bridge_name(kind), &port).await?;
        let ofport = self.ovsdb.wait_ofport(&host_end, OFPORT_TIMEOUT).await?;
        let local = local_endpoint(oper, &net, group.as_ref(), ofport)?;
        let announce = local.ipv4;
        self.agent(kind)
            .add_local_endpoint(local)
            .await
            .map_err(|e| PluginError::agent(kind, e))?;
        self.bgp_local(kind, announce, true);
        let host_access = self.readopt_host_access(&oper.port_name).await?;
        let info = LocalEndpointInfo {
            host_access,
            ..self.info(oper.clone(), &net, ofport)
        };
        self.with_state(|s| s.local.insert(oper.id.clone(), info));
        Ok(true)
    }

    /// Endpoint ports on our bridges that no endpoint owns (a crash between port creation and
    /// the oper state write): delete them and their veths.
    async fn remove_orphan_ports(&self) -> Result<()> {
        let owned: Vec<String> = self.with_state(|s| {
            s.local
                .values()
                .flat_map(|l| {
                    let access = l
                        .host_access
                        .map(|_| super::hostaccess::host_access_port(&l.oper.port_name));
                    std::iter::once(l.oper.ovs_port()).chain(access)
                })
                .collect()
        });
        let orphans: Vec<String> = self.ovsdb.read(|c| {
            [super::VXLAN_BRIDGE, super::VLAN_BRIDGE, super::HOST_BRIDGE]
                .iter()
                .flat_map(|b| c.ports_of_bridge(b))
                .filter(|p| {
                    (p.name.starts_with("vvport") || p.name.starts_with("hport"))
                        && !owned.contains(&p.name)
                })
                .map(|p| p.name)
                .collect()
        });
        for name in orphans {
            tracing::info!(port = %name, "removing an endpoint port no endpoint owns");
            self.ovsdb.delete_port(&name).await?;
            let host_end = name.clone();
            self.host
                .run(move |nl| async move { nl.delete_link(&host_end).await })
                .await?;
        }
        Ok(())
    }
}
