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

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use ipnet::IpNet;
use master::endpoint::{
    ConfigEp, CreateEndpointRequest, DeleteEndpointRequest, UpdateEndpointRequest,
};
use master::state::{CfgEndpointState, CfgNetworkState, EndpointGroupState};
use ofnet::{BridgeKind, LocalEndpoint};

use super::{Driver, OFPORT_TIMEOUT, bandwidth_of, bridge_kind, bridge_name, policing_of};
use crate::error::{PluginError, Result};
use crate::netlink::{MacAddr, PodInterfaceSpec, in_netns};
use crate::oper::{OperEndpointState, port_name_for};
use crate::ovsdb::PortSpec;

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

/// The tag of the endpoint's access port: its group's own VLAN if it has one (ACI), else
/// the network's VLAN (on the VXLAN bridge: the local VLAN).
fn access_tag(net: &CfgNetworkState, group: Option<&EndpointGroupState>) -> u16 {
    let tag = group
        .filter(|g| g.pkt_tag_type == "vlan" && g.pkt_tag != 0)
        .map_or(net.pkt_tag, |g| g.pkt_tag);
    u16::try_from(tag).unwrap_or(0)
}

/// Turn transmit checksum offload off on `ifname` in the calling thread's namespace, with
/// `ethtool` (no safe netlink API for it here). Needed with OVS's userspace datapath only:
/// a veth leaves TCP/UDP checksums to the receiver's hardware, which the userspace datapath
/// does not complete, so without this ping works and TCP does not. `Some(problem)` on failure.
fn disable_tx_offload(ifname: &str) -> Option<String> {
    match std::process::Command::new("ethtool")
        .args(["-K", ifname, "tx", "off"])
        .stdout(std::process::Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "ethtool -K {ifname} tx off: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("cannot run ethtool (install it): {e}")),
    }
}

/// Milliseconds per attach step, for the debug log.
struct StepTimer {
    last: std::time::Instant,
    steps: Vec<(&'static str, f64)>,
}

impl StepTimer {
    fn start() -> StepTimer {
        StepTimer {
            last: std::time::Instant::now(),
            steps: Vec::new(),
        }
    }

    fn mark(&mut self, step: &'static str) {
        let now = std::time::Instant::now();
        self.steps
            .push((step, (now - self.last).as_secs_f64() * 1000.0));
        self.last = now;
    }
}

impl std::fmt::Display for StepTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (step, ms)) in self.steps.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{step} {ms:.1} ms")?;
        }
        Ok(())
    }
}

/// What a half-done attach has created, for the rollback.
#[derive(Default)]
struct Created {
    endpoint: bool,
    veth: bool,
    port: bool,
    ofport: Option<u32>,
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
        // The watch keeps networks current; etcd is asked only for one not seen yet.
        let net = match self.known_network(&net_id) {
            Some(net) => net,
            None => self.load_network(&pod.tenant, &pod.network).await?,
        };
        let group = self.load_group(&pod.tenant, &pod.group).await?;
        self.ensure_network(&net).await?;
        let mut created = Created::default();
        match self
            .attach_steps(pod, &net, group.as_ref(), &ep_id, &mut created)
            .await
        {
            Ok(info) => Ok(info),
            Err(e) => {
                tracing::warn!(endpoint = %ep_id, error = %e, "attach failed; undoing");
                self.undo(pod, &net, &ep_id, &created).await;
                Err(e)
            }
        }
    }

    /// The attach itself. netmaster's allocation and the host side (veth pair, OVS port,
    /// OpenFlow port number) do not depend on each other and run at once; the pod side
    /// (MAC, addresses, routes) and the flows follow once both are done.
    async fn attach_steps(
        &self,
        pod: &PodAttach,
        net: &CfgNetworkState,
        group: Option<&EndpointGroupState>,
        ep_id: &str,
        created: &mut Created,
    ) -> Result<LocalEndpointInfo> {
        let mut timing = StepTimer::start();
        let kind = bridge_kind(&net.pkt_tag_type);
        let port_name = port_name_for(ep_id);
        let ovs_port = format!("v{port_name}");
        // Rollback of the host side is idempotent, so it is marked before it starts.
        created.veth = true;
        created.port = true;
        let (ep, ofport) = futures::join!(
            self.allocate(pod),
            self.host_side(pod, kind, &ovs_port, ep_id, access_tag(net, group), group)
        );
        let ep = ep?;
        created.endpoint = true;
        let ofport = ofport?;
        timing.mark("netmaster | veth + OVS port");
        let oper = OperEndpointState {
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
            port_name,
            vtep_ip: self.cfg.vtep_ip.to_string(),
            container_id: pod.container_id.clone(),
            ep_common_name: pod.pod_name.clone(),
            netns: pod.netns.to_string_lossy().into_owned(),
            pod_namespace: pod.pod_namespace.clone(),
            tenant: pod.tenant.clone(),
            network: pod.network.clone(),
            labels: pod.labels.clone(),
        };
        let spec = interface_spec(&oper, net, self.pod_mtu(kind))?;
        let pod_netns = spec.netns.clone();
        let tx_offload_off = self.cfg.ovs_datapath == "netdev";
        // Kubernetes mode: cluster IPs on-link, so the pod ARPs for them (crate::kubesvc).
        let service_route = self.service_route;
        if pod.handover {
            return self
                .attach_handover(spec, oper, net, group, ofport, created, timing)
                .await;
        }
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
            // This thread is inside the pod's namespace, so the child is too.
            Ok(tx_offload_off
                .then(|| disable_tx_offload(&spec.ifname))
                .flatten())
        });
        // The pod's addresses, the flows and the oper state are independent: all at once.
        let local = local_endpoint(&oper, net, group, ofport)?;
        let (pod_done, flows, stored) = futures::join!(
            pod_side,
            self.agent(kind).add_local_endpoint(local),
            self.put_oper(&oper)
        );
        if flows.is_ok() {
            created.ofport = Some(ofport);
        }
        if let Some(problem) = pod_done? {
            return Err(PluginError::Offload {
                ifname: pod.ifname.clone(),
                problem,
            });
        }
        flows.map_err(|e| PluginError::agent(kind, e))?;
        stored?;
        timing.mark("pod side + flows + oper state");
        tracing::debug!(endpoint = ep_id, steps = %timing, "endpoint attached");
        let info = self.info(oper, net, ofport);
        self.with_state(|s| s.local.insert(ep_id.to_string(), info.clone()));
        Ok(info)
    }

    /// The end of [`Driver::attach_steps`] for a runtime that moves the pod end itself: the
    /// pod end (in the host namespace) gets its MAC, and with the userspace datapath transmit
    /// offload off; flows and oper state as for a pod.
    #[allow(clippy::too_many_arguments)]
    async fn attach_handover(
        &self,
        spec: PodInterfaceSpec,
        oper: OperEndpointState,
        net: &CfgNetworkState,
        group: Option<&EndpointGroupState>,
        ofport: u32,
        created: &mut Created,
        mut timing: StepTimer,
    ) -> Result<LocalEndpointInfo> {
        let kind = bridge_kind(&net.pkt_tag_type);
        let tx_offload_off = self.cfg.ovs_datapath == "netdev";
        let ifname = spec.ifname.clone();
        let pod_end = self.host.run(move |nl| async move {
            if let Some(mac) = spec.mac {
                nl.set_mac(&spec.ifname, mac).await?;
            }
            // The worker thread is in the host namespace, so ethtool is too.
            Ok(tx_offload_off
                .then(|| disable_tx_offload(&spec.ifname))
                .flatten())
        });
        let local = local_endpoint(&oper, net, group, ofport)?;
        let (pod_done, flows, stored) = futures::join!(
            pod_end,
            self.agent(kind).add_local_endpoint(local),
            self.put_oper(&oper)
        );
        if flows.is_ok() {
            created.ofport = Some(ofport);
        }
        if let Some(problem) = pod_done? {
            return Err(PluginError::Offload { ifname, problem });
        }
        flows.map_err(|e| PluginError::agent(kind, e))?;
        stored?;
        timing.mark("pod end + flows + oper state");
        tracing::debug!(endpoint = %oper.id, steps = %timing, "endpoint attached for handover");
        let info = self.info(oper.clone(), net, ofport);
        self.with_state(|s| s.local.insert(oper.id.clone(), info.clone()));
        Ok(info)
    }

    /// netmaster's `/plugin/createEndpoint`: the address, MAC and group of the endpoint.
    async fn allocate(&self, pod: &PodAttach) -> Result<CfgEndpointState> {
        let client = self.netmaster().await?;
        let request = CreateEndpointRequest {
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
        };
        let forget = |e: &master::client::ClientError| {
            if e.status().is_none() {
                self.forget_netmaster();
            }
        };
        let ep = client.create_endpoint(&request).await.inspect_err(forget)?;
        // The pod's labels make it a provider of the services whose selectors they match
        // (netmaster's "start" event); deleting the endpoint withdraws it again.
        if !pod.labels.is_empty() {
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
            client.update_endpoint(&update).await.inspect_err(forget)?;
        }
        Ok(ep)
    }

    /// The veth pair (pod end born in the pod namespace under `CNI_IFNAME`, down), the host
    /// end up as an OVS access port; returns its OpenFlow port number.
    async fn host_side(
        &self,
        pod: &PodAttach,
        kind: BridgeKind,
        ovs_port: &str,
        ep_id: &str,
        tag: u16,
        group: Option<&EndpointGroupState>,
    ) -> Result<u32> {
        let (host, ifname, netns, mtu) = (
            ovs_port.to_string(),
            pod.ifname.clone(),
            pod.netns.clone(),
            self.pod_mtu(kind),
        );
        let handover = pod.handover;
        self.host
            .run(move |nl| async move {
                // A leftover of an interrupted attempt is replaced.
                nl.delete_link(&host).await?;
                if handover {
                    nl.delete_link(&ifname).await?;
                    nl.create_veth(&host, &ifname).await?;
                    nl.set_mtu(&host, mtu).await?;
                    nl.set_mtu(&ifname, mtu).await?;
                } else {
                    nl.create_veth_into(&host, &ifname, &netns, mtu, None)
                        .await?;
                }
                nl.set_up(&host).await
            })
            .await?;
        let port = PortSpec::access(ovs_port, tag)
            .endpoint_id(ep_id)
            .policing(policing_of(group)?);
        self.ovsdb.ensure_port(bridge_name(kind), &port).await?;
        Ok(self.ovsdb.wait_ofport(ovs_port, OFPORT_TIMEOUT).await?)
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
        let request = DeleteEndpointRequest {
            TenantName: tenant.to_string(),
            NetworkName: network.to_string(),
            EndpointID: container.to_string(),
            ..DeleteEndpointRequest::default()
        };
        match client.delete_endpoint(&request).await {
            Ok(_) => Ok(()),
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
            match self.agent(l.kind).remove_local_endpoint(l.ofport).await {
                Ok(()) => {}
                // Already gone from the agent (e.g. a reconcile that never re-added it).
                Err(ofnet::AgentError::EndpointDb(_)) => {}
                Err(e) => return Err(PluginError::agent(l.kind, e)),
            }
        }
        let port_name = known.map_or_else(|| port_name_for(ep_id), |l| l.oper.port_name.clone());
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
        self.agent(kind)
            .add_local_endpoint(local_endpoint(oper, &net, group.as_ref(), ofport)?)
            .await
            .map_err(|e| PluginError::agent(kind, e))?;
        let info = self.info(oper.clone(), &net, ofport);
        self.with_state(|s| s.local.insert(oper.id.clone(), info));
        Ok(true)
    }

    /// Endpoint ports on our bridges that no endpoint owns (a crash between port creation and
    /// the oper state write): delete them and their veths.
    async fn remove_orphan_ports(&self) -> Result<()> {
        let owned: Vec<String> =
            self.with_state(|s| s.local.values().map(|l| l.oper.ovs_port()).collect());
        let orphans: Vec<String> = self.ovsdb.read(|c| {
            [super::VXLAN_BRIDGE, super::VLAN_BRIDGE]
                .iter()
                .flat_map(|b| c.ports_of_bridge(b))
                .filter(|p| p.name.starts_with("vvport") && !owned.contains(&p.name))
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
