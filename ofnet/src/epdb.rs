//! The endpoint DB: networks, VRFs and endpoints of one agent, and the actor that owns them.
//!
//! [`EndpointTable`] is the data and its rules (plain, synchronous, unit-tested): networks by
//! VLAN, VRF ids per tenant allocated from 1 and reference-counted by networks, all endpoints
//! by id, local endpoints by OpenFlow port. Every change is checked first and applied whole or
//! not at all.
//!
//! [`EndpointDb`] is the actor: it applies [`EndpointOp`]s and answers with an immutable
//! snapshot (`Arc<EndpointTable>`) of the result. The agent computes flows and answers ARP from
//! the snapshot it holds, so lookups never wait on a mailbox; if the switch then refuses the
//! flows, the agent puts the previous snapshot back with [`Restore`].

use crate::model::{
    Bandwidth, ENDPOINT_INTERNAL, Endpoint, LocalEndpoint, MAX_EPG, MAX_VLAN, MAX_VNI, Network,
};
use crate::timestamp;
use actix::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// A tenant's routing domain as the reference's inspect output shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Vrf {
    pub vrf_name: String,
    pub vrf_id: u8,
    pub num_networks: u32,
}

/// Why the endpoint DB refused a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointDbError {
    #[error("VLAN {0} is outside 1..=4094")]
    BadVlan(u16),
    #[error("VNI {0} is outside 0..=16777215")]
    BadVni(u32),
    #[error("endpoint group {0} is outside 0..=32767")]
    BadEpg(u16),
    #[error("VLAN {vlan} already carries a different network (vni {vni}, vrf {vrf})")]
    VlanInUse { vlan: u16, vni: u32, vrf: String },
    #[error("VNI {vni} is already mapped to VLAN {vlan}")]
    VniInUse { vni: u32, vlan: u16 },
    #[error("no VRF id left for tenant {0} (255 in use)")]
    VrfIdsExhausted(String),
    #[error("no network on VLAN {0}")]
    NoNetwork(u16),
    #[error("network on VLAN {vlan} still has local endpoints (first: port {port})")]
    NetworkInUse { vlan: u16, port: u32 },
    #[error("port {port} already holds endpoint {id}")]
    PortInUse { port: u32, id: String },
    #[error("endpoint {0} has neither an IPv4 nor an IPv6 address")]
    NoAddress(String),
    #[error("port 0 is not an endpoint port")]
    BadPort,
    #[error("endpoint {0} is local to this host")]
    EndpointIsLocal(String),
    #[error("no local endpoint on port {0}")]
    NoLocalEndpoint(u32),
    #[error("no endpoint {0}")]
    NoEndpoint(String),
}

/// Networks, VRFs and endpoints (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct EndpointTable {
    networks: BTreeMap<u16, Network>,
    vrfs: BTreeMap<String, Vrf>,
    /// Shared with older snapshots: copying the table copies pointers, not endpoints.
    endpoints: BTreeMap<String, Arc<Endpoint>>,
    local: BTreeMap<u32, String>,
    /// Endpoint ids by VRF and IPv6 address: a dual-stack endpoint's id names its IPv4
    /// address, and neighbour discovery looks endpoints up by their IPv6 one.
    by_ipv6: BTreeMap<(String, Ipv6Addr), String>,
}

impl EndpointTable {
    pub fn new() -> EndpointTable {
        EndpointTable::default()
    }

    pub fn networks(&self) -> impl Iterator<Item = &Network> {
        self.networks.values()
    }

    pub fn network(&self, vlan: u16) -> Option<&Network> {
        self.networks.get(&vlan)
    }

    /// The network carrying `vni` (VXLAN bridges).
    pub fn network_by_vni(&self, vni: u32) -> Option<&Network> {
        self.networks.values().find(|n| n.vni == vni && vni != 0)
    }

    pub fn vrfs(&self) -> impl Iterator<Item = &Vrf> {
        self.vrfs.values()
    }

    pub fn vrf_id(&self, vrf: &str) -> Option<u8> {
        self.vrfs.get(vrf).map(|v| v.vrf_id)
    }

    /// Every endpoint, local and remote, by id.
    pub fn endpoints(&self) -> impl Iterator<Item = &Endpoint> {
        self.endpoints.values().map(|e| &**e)
    }

    pub fn endpoint(&self, id: &str) -> Option<&Endpoint> {
        self.endpoints.get(id).map(|e| &**e)
    }

    /// The endpoint holding `ip` in `vrf`.
    /// The endpoint with address `ip` (IPv4 or IPv6) in `vrf`.
    pub fn find(&self, ip: IpAddr, vrf: &str) -> Option<&Endpoint> {
        self.endpoint(&Endpoint::id_for(ip, vrf))
            .or_else(|| match ip {
                IpAddr::V6(a) => self
                    .by_ipv6
                    .get(&(vrf.to_string(), a))
                    .and_then(|id| self.endpoint(id)),
                IpAddr::V4(_) => None,
            })
    }

    /// Store `ep` under its id, replacing (and unindexing) what was there.
    fn insert_endpoint(&mut self, ep: Endpoint) {
        let id = ep.endpoint_id.clone();
        self.remove_endpoint(&id);
        if let Some(a) = ep.ipv6_addr {
            self.by_ipv6.insert((ep.vrf.clone(), a), id.clone());
        }
        self.endpoints.insert(id, Arc::new(ep));
    }

    /// Remove endpoint `id` and its IPv6 index entry.
    fn remove_endpoint(&mut self, id: &str) -> Option<Arc<Endpoint>> {
        let ep = self.endpoints.remove(id)?;
        if let Some(a) = ep.ipv6_addr {
            let key = (ep.vrf.clone(), a);
            if self.by_ipv6.get(&key).is_some_and(|have| have == id) {
                self.by_ipv6.remove(&key);
            }
        }
        Some(ep)
    }

    pub fn local(&self, port: u32) -> Option<&Endpoint> {
        self.local.get(&port).and_then(|id| self.endpoint(id))
    }

    /// Local endpoints in port order.
    pub fn locals(&self) -> impl Iterator<Item = &Endpoint> {
        self.local.values().filter_map(|id| self.endpoint(id))
    }

    /// Whether any endpoint is local.
    pub fn has_locals(&self) -> bool {
        self.locals().next().is_some()
    }

    /// Remote endpoints in id order.
    pub fn remotes(&self) -> impl Iterator<Item = &Endpoint> {
        self.endpoints().filter(|e| !e.is_local())
    }

    /// Apply one change; on error nothing changed.
    pub fn apply(&mut self, op: EndpointOp) -> Result<(), EndpointDbError> {
        match op {
            EndpointOp::AddNetwork(n) => self.add_network(n),
            EndpointOp::RemoveNetwork(vlan) => self.remove_network(vlan),
            EndpointOp::AddLocal {
                endpoint,
                originator,
            } => self.add_local(&endpoint, originator),
            EndpointOp::UpdateLocal {
                port,
                dscp,
                bandwidth,
            } => {
                let id = self
                    .local
                    .get(&port)
                    .ok_or(EndpointDbError::NoLocalEndpoint(port))?;
                if let Some(ep) = self.endpoints.get_mut(id) {
                    let ep = Arc::make_mut(ep);
                    ep.dscp = dscp;
                    ep.bandwidth = bandwidth;
                }
                Ok(())
            }
            EndpointOp::RemoveLocal(port) => {
                let id = self
                    .local
                    .remove(&port)
                    .ok_or(EndpointDbError::NoLocalEndpoint(port))?;
                self.remove_endpoint(&id);
                Ok(())
            }
            EndpointOp::AddRemote(ep) => self.add_remote(ep),
            EndpointOp::RemoveRemote(id) => match self.endpoints.get(&id) {
                None => Err(EndpointDbError::NoEndpoint(id)),
                Some(e) if e.is_local() => Err(EndpointDbError::EndpointIsLocal(id)),
                Some(_) => {
                    self.remove_endpoint(&id);
                    Ok(())
                }
            },
        }
    }

    fn add_network(&mut self, n: Network) -> Result<(), EndpointDbError> {
        if n.vlan == 0 || n.vlan > MAX_VLAN {
            return Err(EndpointDbError::BadVlan(n.vlan));
        }
        if n.vni > MAX_VNI {
            return Err(EndpointDbError::BadVni(n.vni));
        }
        if let Some(have) = self.networks.get(&n.vlan) {
            if *have == n {
                return Ok(());
            }
            return Err(EndpointDbError::VlanInUse {
                vlan: n.vlan,
                vni: have.vni,
                vrf: have.vrf.clone(),
            });
        }
        if let Some(other) = self.network_by_vni(n.vni) {
            return Err(EndpointDbError::VniInUse {
                vni: n.vni,
                vlan: other.vlan,
            });
        }
        match self.vrfs.get_mut(&n.vrf) {
            Some(v) => v.num_networks += 1,
            None => {
                let used: Vec<u8> = self.vrfs.values().map(|v| v.vrf_id).collect();
                let id = (1..=u8::MAX)
                    .find(|i| !used.contains(i))
                    .ok_or_else(|| EndpointDbError::VrfIdsExhausted(n.vrf.clone()))?;
                self.vrfs.insert(
                    n.vrf.clone(),
                    Vrf {
                        vrf_name: n.vrf.clone(),
                        vrf_id: id,
                        num_networks: 1,
                    },
                );
            }
        }
        self.networks.insert(n.vlan, n);
        Ok(())
    }

    fn remove_network(&mut self, vlan: u16) -> Result<(), EndpointDbError> {
        let net = self
            .networks
            .get(&vlan)
            .cloned()
            .ok_or(EndpointDbError::NoNetwork(vlan))?;
        if let Some(ep) = self.locals().find(|e| e.vlan == vlan) {
            return Err(EndpointDbError::NetworkInUse {
                vlan,
                port: ep.port_no,
            });
        }
        // Remote endpoints of the network go with it: on a VXLAN bridge they are known by
        // VNI (their VLAN is their own host's), on a VLAN bridge by VLAN.
        let gone: Vec<String> = self
            .endpoints
            .values()
            .filter(|e| {
                !e.is_local()
                    && e.vrf == net.vrf
                    && if net.vni != 0 {
                        e.vni == net.vni
                    } else {
                        e.vlan == vlan
                    }
            })
            .map(|e| e.endpoint_id.clone())
            .collect();
        for id in gone {
            self.remove_endpoint(&id);
        }
        self.networks.remove(&vlan);
        if let Some(v) = self.vrfs.get_mut(&net.vrf) {
            v.num_networks -= 1;
            if v.num_networks == 0 {
                self.vrfs.remove(&net.vrf);
            }
        }
        Ok(())
    }

    fn add_local(
        &mut self,
        l: &LocalEndpoint,
        originator: Option<Ipv4Addr>,
    ) -> Result<(), EndpointDbError> {
        if l.port_no == 0 {
            return Err(EndpointDbError::BadPort);
        }
        if l.epg > MAX_EPG {
            return Err(EndpointDbError::BadEpg(l.epg));
        }
        let net = self
            .networks
            .get(&l.vlan)
            .ok_or(EndpointDbError::NoNetwork(l.vlan))?;
        let ip: IpAddr = match (l.ipv4, l.ipv6) {
            (Some(a), _) => a.into(),
            (None, Some(a)) => a.into(),
            (None, None) => return Err(EndpointDbError::NoAddress(format!("port {}", l.port_no))),
        };
        let id = Endpoint::id_for(ip, &net.vrf);
        let ep = Endpoint {
            endpoint_id: id.clone(),
            endpoint_type: ENDPOINT_INTERNAL,
            endpoint_group: l.epg,
            ip_addr: l.ipv4,
            ip_mask: l.ipv4.map(|_| Ipv4Addr::BROADCAST),
            ipv6_addr: l.ipv6,
            ipv6_mask: l.ipv6.map(|_| Ipv6Addr::from(u128::MAX)),
            vrf: net.vrf.clone(),
            mac: l.mac,
            vlan: l.vlan,
            vni: net.vni,
            endpoint_group_vlan: l.epg_vlan,
            originator_ip: originator,
            originator_mac: String::new(),
            // Announcements of an endpoint are ordered by this stamp (see `AddRemote`).
            timestamp: timestamp::now(),
            port_no: l.port_no,
            dscp: l.dscp,
            bandwidth: l.bandwidth,
        };
        if let Some(have_id) = self.local.get(&l.port_no) {
            // The same endpoint again (whenever it was stamped) changes nothing.
            if let Some(have) = self.endpoint(have_id)
                && (Endpoint {
                    timestamp: have.timestamp.clone(),
                    ..ep.clone()
                }) == *have
            {
                return Ok(());
            }
            return Err(EndpointDbError::PortInUse {
                port: l.port_no,
                id: have_id.clone(),
            });
        }
        if let Some(have) = self.endpoints.get(&id)
            && have.is_local()
        {
            return Err(EndpointDbError::PortInUse {
                port: have.port_no,
                id,
            });
        }
        // A remote endpoint with the same id moved here: the local one replaces it.
        self.local.insert(l.port_no, id);
        self.insert_endpoint(ep);
        Ok(())
    }

    fn add_remote(&mut self, mut ep: Endpoint) -> Result<(), EndpointDbError> {
        if ep.endpoint_group > MAX_EPG {
            return Err(EndpointDbError::BadEpg(ep.endpoint_group));
        }
        if ep.ip_addr.is_none() && ep.ipv6_addr.is_none() {
            return Err(EndpointDbError::NoAddress(ep.endpoint_id));
        }
        if let Some(have) = self.endpoint(&ep.endpoint_id) {
            if have.is_local() {
                return Err(EndpointDbError::EndpointIsLocal(ep.endpoint_id));
            }
            // Announcements can arrive out of order: an older one never replaces a newer one.
            let (new, old) = (
                timestamp::parse(&ep.timestamp),
                timestamp::parse(&have.timestamp),
            );
            if let (Some(new), Some(old)) = (new, old)
                && new < old
            {
                return Ok(());
            }
        }
        ep.port_no = 0;
        self.insert_endpoint(ep);
        Ok(())
    }
}

/// One change to the endpoint DB.
#[derive(Debug, Clone)]
pub enum EndpointOp {
    AddNetwork(Network),
    /// By VLAN; refused while local endpoints use it; removes its remote endpoints.
    RemoveNetwork(u16),
    /// `originator` is this agent's VTEP address, recorded in the endpoint.
    AddLocal {
        endpoint: LocalEndpoint,
        originator: Option<Ipv4Addr>,
    },
    /// New DSCP and bandwidth limit of a local endpoint.
    UpdateLocal {
        port: u32,
        dscp: u8,
        bandwidth: Option<Bandwidth>,
    },
    RemoveLocal(u32),
    /// Adds or replaces; an announcement older (by `Timestamp`) than the stored one is
    /// ignored.
    AddRemote(Endpoint),
    RemoveRemote(String),
}

/// Apply changes in order, each all-or-nothing: a refused one is left out and the next applies
/// to the table as it was. Answers, for each, the snapshot right after it or why it was
/// refused (one message for a batch of the agent's updates).
#[derive(Debug, Message)]
#[rtype(result = "Vec<Result<Arc<EndpointTable>, EndpointDbError>>")]
pub struct ApplyEach(pub Vec<EndpointOp>);

/// Put a snapshot back (the switch refused the flows of the change that produced the current
/// one).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Restore(pub Arc<EndpointTable>);

/// The current snapshot.
#[derive(Debug, Message)]
#[rtype(result = "Arc<EndpointTable>")]
pub struct Snapshot;

/// The actor owning an [`EndpointTable`].
#[derive(Debug, Default)]
pub struct EndpointDb {
    table: Arc<EndpointTable>,
}

impl Actor for EndpointDb {
    type Context = Context<Self>;
}

impl Handler<ApplyEach> for EndpointDb {
    type Result = MessageResult<ApplyEach>;

    fn handle(&mut self, ApplyEach(ops): ApplyEach, _: &mut Context<Self>) -> Self::Result {
        let answers = ops
            .into_iter()
            .map(|op| {
                let mut next = (*self.table).clone();
                next.apply(op)?;
                self.table = Arc::new(next);
                Ok(self.table.clone())
            })
            .collect();
        MessageResult(answers)
    }
}

impl Handler<Restore> for EndpointDb {
    type Result = ();

    fn handle(&mut self, Restore(table): Restore, _: &mut Context<Self>) {
        self.table = table;
    }
}

impl Handler<Snapshot> for EndpointDb {
    type Result = MessageResult<Snapshot>;

    fn handle(&mut self, _: Snapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.table.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MacAddr;

    fn net(vlan: u16, vni: u32, vrf: &str) -> Network {
        Network {
            vlan,
            vni,
            gateway: None,
            vrf: vrf.into(),
        }
    }

    fn local(port: u32, vlan: u16, ip: [u8; 4]) -> LocalEndpoint {
        LocalEndpoint {
            port_no: port,
            mac: MacAddr([2, 2, ip[0], ip[1], ip[2], ip[3]]),
            vlan,
            ipv4: Some(ip.into()),
            ipv6: None,
            epg: 0,
            epg_vlan: 0,
            dscp: 0,
            bandwidth: None,
        }
    }

    fn add_local(t: &mut EndpointTable, l: LocalEndpoint) -> Result<(), EndpointDbError> {
        t.apply(EndpointOp::AddLocal {
            endpoint: l,
            originator: None,
        })
    }

    #[test]
    fn vrf_ids_are_allocated_from_one_and_refcounted_by_networks() {
        let mut t = EndpointTable::new();
        t.apply(EndpointOp::AddNetwork(net(10, 0, "t1"))).unwrap();
        t.apply(EndpointOp::AddNetwork(net(11, 0, "t1"))).unwrap();
        t.apply(EndpointOp::AddNetwork(net(20, 0, "t2"))).unwrap();
        assert_eq!(t.vrf_id("t1"), Some(1));
        assert_eq!(t.vrf_id("t2"), Some(2));
        t.apply(EndpointOp::RemoveNetwork(10)).unwrap();
        assert_eq!(t.vrf_id("t1"), Some(1), "still one network in t1");
        t.apply(EndpointOp::RemoveNetwork(11)).unwrap();
        assert_eq!(t.vrf_id("t1"), None);
        t.apply(EndpointOp::AddNetwork(net(30, 0, "t3"))).unwrap();
        assert_eq!(t.vrf_id("t3"), Some(1), "freed ids are reused");
    }

    #[test]
    fn conflicting_networks_are_refused_and_identical_ones_are_no_ops() {
        let mut t = EndpointTable::new();
        t.apply(EndpointOp::AddNetwork(net(10, 5000, "t1")))
            .unwrap();
        t.apply(EndpointOp::AddNetwork(net(10, 5000, "t1")))
            .unwrap();
        assert!(matches!(
            t.apply(EndpointOp::AddNetwork(net(10, 6000, "t1"))),
            Err(EndpointDbError::VlanInUse { vlan: 10, .. })
        ));
        assert_eq!(
            t.apply(EndpointOp::AddNetwork(net(11, 5000, "t1"))),
            Err(EndpointDbError::VniInUse {
                vni: 5000,
                vlan: 10
            })
        );
        assert_eq!(
            t.apply(EndpointOp::AddNetwork(net(0, 1, "t1"))),
            Err(EndpointDbError::BadVlan(0))
        );
        assert_eq!(t.vrfs().next().map(|v| v.num_networks), Some(1));
    }

    #[test]
    fn local_endpoints_are_indexed_by_port_and_id_and_lookup_by_ip_and_vrf() {
        let mut t = EndpointTable::new();
        t.apply(EndpointOp::AddNetwork(net(10, 0, "t1"))).unwrap();
        add_local(&mut t, local(3, 10, [10, 1, 1, 2])).unwrap();
        let ep = t.local(3).unwrap();
        assert_eq!(ep.endpoint_id, "10.1.1.2:t1");
        assert_eq!(
            t.find(Ipv4Addr::new(10, 1, 1, 2).into(), "t1")
                .map(|e| e.port_no),
            Some(3)
        );
        assert!(t.find(Ipv4Addr::new(10, 1, 1, 2).into(), "t2").is_none());
        // Same port, other endpoint: refused; identical: no-op.
        add_local(&mut t, local(3, 10, [10, 1, 1, 2])).unwrap();
        assert!(matches!(
            add_local(&mut t, local(3, 10, [10, 1, 1, 3])),
            Err(EndpointDbError::PortInUse { port: 3, .. })
        ));
        assert_eq!(
            add_local(&mut t, local(4, 99, [10, 1, 1, 4])),
            Err(EndpointDbError::NoNetwork(99))
        );
        assert_eq!(
            t.apply(EndpointOp::RemoveNetwork(10)),
            Err(EndpointDbError::NetworkInUse { vlan: 10, port: 3 })
        );
        t.apply(EndpointOp::RemoveLocal(3)).unwrap();
        assert!(t.local(3).is_none() && t.endpoints().next().is_none());
        assert_eq!(
            t.apply(EndpointOp::RemoveLocal(3)),
            Err(EndpointDbError::NoLocalEndpoint(3))
        );
    }

    #[test]
    fn remote_endpoints_never_replace_local_ones_and_go_with_their_network() {
        let mut t = EndpointTable::new();
        t.apply(EndpointOp::AddNetwork(net(10, 5000, "t1")))
            .unwrap();
        add_local(&mut t, local(3, 10, [10, 1, 1, 2])).unwrap();
        let mut remote = t.local(3).unwrap().clone();
        remote.port_no = 0;
        assert!(matches!(
            t.apply(EndpointOp::AddRemote(remote.clone())),
            Err(EndpointDbError::EndpointIsLocal(_))
        ));
        remote.endpoint_id = "10.1.1.9:t1".into();
        remote.ip_addr = Some(Ipv4Addr::new(10, 1, 1, 9));
        remote.vlan = 77; // the remote host's own local VLAN
        remote.timestamp = "2026-11-21T06:41:53.55Z".into();
        t.apply(EndpointOp::AddRemote(remote.clone())).unwrap();
        assert_eq!(t.remotes().count(), 1);
        let mut stale = remote.clone();
        stale.timestamp = "2026-11-21T06:41:53.5Z".into();
        stale.mac = MacAddr([2, 2, 0, 0, 0, 1]);
        t.apply(EndpointOp::AddRemote(stale)).unwrap();
        assert_eq!(
            t.endpoint("10.1.1.9:t1").map(|e| e.mac),
            Some(remote.mac),
            "an older announcement does not replace a newer one"
        );
        t.apply(EndpointOp::RemoveLocal(3)).unwrap();
        t.apply(EndpointOp::RemoveNetwork(10)).unwrap();
        assert_eq!(t.remotes().count(), 0, "purged by VNI");
    }
    #[test]
    fn dual_stack_endpoints_are_found_by_either_address_until_removed() {
        let mut t = crate::fixtures::endpoints(10, &[]);
        let v6: Ipv6Addr = "fd00::2".parse().unwrap();
        t.apply(EndpointOp::AddLocal {
            endpoint: LocalEndpoint {
                port_no: 3,
                mac: crate::model::MacAddr([2, 2, 10, 1, 1, 2]),
                vlan: 10,
                ipv4: Some(Ipv4Addr::new(10, 1, 1, 2)),
                ipv6: Some(v6),
                epg: 0,
                epg_vlan: 0,
                dscp: 0,
                bandwidth: None,
            },
            originator: None,
        })
        .unwrap();
        let by_v4 = t.find(Ipv4Addr::new(10, 1, 1, 2).into(), "t1").unwrap();
        assert_eq!(by_v4.endpoint_id, "10.1.1.2:t1");
        assert_eq!(t.find(v6.into(), "t1").unwrap().endpoint_id, "10.1.1.2:t1");
        assert!(t.find(v6.into(), "t2").is_none(), "per VRF");
        let mut remote = by_v4.clone();
        remote.port_no = 0;
        remote.endpoint_id = "10.1.1.9:t1".into();
        remote.ip_addr = Some(Ipv4Addr::new(10, 1, 1, 9));
        remote.ipv6_addr = Some("fd00::9".parse().unwrap());
        t.apply(EndpointOp::AddRemote(remote)).unwrap();
        let r6: Ipv6Addr = "fd00::9".parse().unwrap();
        assert_eq!(t.find(r6.into(), "t1").unwrap().endpoint_id, "10.1.1.9:t1");
        t.apply(EndpointOp::RemoveLocal(3)).unwrap();
        t.apply(EndpointOp::RemoveRemote("10.1.1.9:t1".into()))
            .unwrap();
        assert!(t.find(v6.into(), "t1").is_none());
        assert!(t.find(r6.into(), "t1").is_none());
        assert!(t.by_ipv6.is_empty());
    }
}
