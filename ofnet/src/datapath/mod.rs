//! Bridge datapaths: what flows and groups a bridge should hold, computed as values.
//!
//! A datapath is a pure function of the [`Topology`] (the endpoint DB snapshot plus the
//! agent's uplinks, VTEPs, policy rules and ARP mode) to the complete [`Desired`] set of flows
//! and groups. The agent recomputes it after every change and sends only the difference
//! ([`Desired::diff`]) to `ofctrl`. Keeping the whole set as a function of the state (instead of
//! patching flows per event) means an order of events can never leave a stale flow behind: a
//! VTEP added after its remote endpoints, a network added after its VTEP, a remote endpoint
//! removed, all converge to the same table. The cost is linear in the number of flows per
//! change (a few thousand flows take well under a millisecond to build).
//!
//! - [`vlan::VlanBridge`]: VLAN networks (access ports, trunk uplinks, normal switching).
//! - [`vxlan::VxlanBridge`]: VXLAN networks (local VLANs, VTEPs, MAC table, flood groups).

pub mod vlan;
pub mod vxlan;

use crate::epdb::EndpointTable;
use crate::flows::{self, policy::RuleError};
use crate::model::{ArpMode, BridgeKind, Endpoint, PolicyRule};
use crate::pipeline::{Pipeline, PipelineError, id};
use crate::text;
use ofctrl::{Change, Flow, FlowKey, Group};
use ofproto::action::Action;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;

/// The agent's own part of the state (the rest is the endpoint DB).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub arp_mode: ArpMode,
    /// Uplink ports (VLAN bridge).
    pub uplinks: BTreeSet<u32>,
    /// VTEP ports by remote host address (VXLAN bridge).
    pub vteps: BTreeMap<Ipv4Addr, u32>,
    /// Policy rules by id.
    pub rules: BTreeMap<String, PolicyRule>,
}

/// Everything a datapath computes flows from.
#[derive(Debug, Clone, Copy)]
pub struct Topology<'a> {
    pub endpoints: &'a EndpointTable,
    pub settings: &'a Settings,
}

impl Topology<'_> {
    /// The VRF id of an endpoint's VRF, if the VRF has a network on this bridge.
    pub fn vrf_of(&self, ep: &Endpoint) -> Option<u8> {
        self.endpoints.vrf_id(&ep.vrf)
    }
}

/// Why a datapath could not compute its flows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatapathError {
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// Two objects want the same flow (same table, priority and match) with different
    /// actions, e.g. two policy rules with the same match, or a remote endpoint claiming a
    /// local endpoint's MAC.
    #[error("two objects want different actions for the flow {flow}")]
    Conflict { flow: String },
    #[error("two groups with id {0}")]
    GroupConflict(u32),
}

/// The complete set of flows and groups a bridge should hold.
#[derive(Debug, Clone, Default)]
pub struct Desired {
    flows: HashMap<FlowKey, Flow>,
    groups: BTreeMap<u32, Group>,
}

impl Desired {
    pub fn new() -> Desired {
        Desired::default()
    }

    /// Add a flow; an identical one already present is fine, a different one with the same
    /// key is a conflict.
    pub fn add(&mut self, flow: Flow) -> Result<(), DatapathError> {
        match self.flows.get(&flow.key) {
            Some(have) if have.instructions != flow.instructions => Err(DatapathError::Conflict {
                flow: text::flow(&flow),
            }),
            Some(_) => Ok(()),
            None => {
                self.flows.insert(flow.key.clone(), flow);
                Ok(())
            }
        }
    }

    pub fn add_all(&mut self, flows: impl IntoIterator<Item = Flow>) -> Result<(), DatapathError> {
        flows.into_iter().try_for_each(|f| self.add(f))
    }

    pub fn add_group(&mut self, group: Group) -> Result<(), DatapathError> {
        if self.groups.contains_key(&group.id) {
            return Err(DatapathError::GroupConflict(group.id));
        }
        self.groups.insert(group.id, group);
        Ok(())
    }

    pub fn flows(&self) -> impl Iterator<Item = &Flow> {
        self.flows.values()
    }

    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values()
    }

    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// The flows in `ovs-ofctl` syntax, sorted (see [`text::sorted`]).
    pub fn flow_lines(&self) -> Vec<String> {
        text::flows(self.flows.values())
    }

    /// The groups in `ovs-ofctl dump-groups` syntax, by id.
    pub fn group_lines(&self) -> Vec<String> {
        self.groups.values().map(text::group).collect()
    }

    /// The changes that turn `self` (what the bridge holds) into `next`.
    pub fn diff(&self, next: &Desired) -> Vec<Change> {
        let mut out = Vec::new();
        for (id, g) in &next.groups {
            if self.groups.get(id) != Some(g) {
                out.push(Change::AddGroup(g.clone()));
            }
        }
        for (k, f) in &next.flows {
            if self.flows.get(k) != Some(f) {
                out.push(Change::AddFlow(f.clone()));
            }
        }
        for k in self.flows.keys() {
            if !next.flows.contains_key(k) {
                out.push(Change::RemoveFlow(k.clone()));
            }
        }
        for id in self.groups.keys() {
            if !next.groups.contains_key(id) {
                out.push(Change::RemoveGroup(*id));
            }
        }
        out
    }
}

/// A packet the controller sends: `actions` applied to `data` (a whole Ethernet frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOut {
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
}

/// One bridge kind's logic.
pub trait Datapath: std::fmt::Debug {
    fn kind(&self) -> BridgeKind;

    fn pipeline(&self) -> &'static Pipeline;

    /// Every flow and group the bridge should hold for `topo`.
    fn desired(&self, topo: &Topology<'_>) -> Result<Desired, DatapathError>;

    /// Packet-outs that carry an ARP request (`frame`, untagged, from local endpoint `src`)
    /// whose target no agent knows beyond this host: toward every VTEP, or out one uplink.
    fn forward_arp(&self, topo: &Topology<'_>, src: &Endpoint, frame: &[u8]) -> Vec<PacketOut>;
}

/// The flows every bridge datapath has: the destination-group entries of every endpoint whose
/// VRF exists on this bridge, and the policy rules.
fn shared_flows(
    p: &'static Pipeline,
    topo: &Topology<'_>,
    out: &mut Desired,
) -> Result<(), DatapathError> {
    let dst = p.table(id::DST_GROUP)?;
    for ep in topo.endpoints.endpoints() {
        if let Some(vrf) = topo.vrf_of(ep) {
            out.add_all(flows::dst_group(dst, ep, vrf, id::POLICY)?)?;
        }
    }
    let policy = p.table(id::POLICY)?;
    for rule in topo.settings.rules.values() {
        out.add(flows::policy::rule_flow(policy, rule, id::SERVICE_SNAT)?)?;
    }
    Ok(())
}

/// Pick one of `ports` for traffic of `mac`, the same one every time while the set is the
/// same (the reference hashes the source MAC over the active uplink members).
fn pick_by_mac(ports: &BTreeSet<u32>, mac: [u8; 6]) -> Option<u32> {
    if ports.is_empty() {
        return None;
    }
    let h = mac.iter().fold(0usize, |acc, b| {
        acc.wrapping_mul(31).wrapping_add(usize::from(*b))
    });
    ports.iter().nth(h % ports.len()).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofproto::matches::Match;

    fn f(port: u32, out: u8) -> Flow {
        Flow::new(
            1,
            10,
            Match::new().in_port(port),
            vec![ofproto::instruction::Instruction::GotoTable(out)],
        )
    }

    #[test]
    fn conflicting_flows_are_refused_identical_ones_merge() {
        let mut d = Desired::new();
        d.add(f(1, 3)).unwrap();
        d.add(f(1, 3)).unwrap();
        assert!(matches!(
            d.add(f(1, 4)),
            Err(DatapathError::Conflict { .. })
        ));
        assert_eq!(d.flow_count(), 1);
    }

    #[test]
    fn diff_adds_changed_and_new_removes_gone() {
        let mut a = Desired::new();
        a.add(f(1, 3)).unwrap();
        a.add(f(2, 3)).unwrap();
        let mut b = Desired::new();
        b.add(f(1, 4)).unwrap();
        b.add(f(3, 3)).unwrap();
        let changes = a.diff(&b);
        let adds = changes
            .iter()
            .filter(|c| matches!(c, Change::AddFlow(_)))
            .count();
        let removes: Vec<_> = changes
            .iter()
            .filter_map(|c| match c {
                Change::RemoveFlow(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(adds, 2);
        assert_eq!(removes, vec![f(2, 3).key]);
        assert!(b.diff(&b).is_empty());
    }

    #[test]
    fn mac_pick_is_stable_and_covers_members() {
        let ports: BTreeSet<u32> = [5, 6].into();
        assert_eq!(
            pick_by_mac(&ports, [2, 2, 0, 0, 0, 1]),
            pick_by_mac(&ports, [2, 2, 0, 0, 0, 1])
        );
        let picked: BTreeSet<u32> = (0..16u8)
            .filter_map(|i| pick_by_mac(&ports, [2, 2, 0, 0, 0, i]))
            .collect();
        assert_eq!(picked, ports);
        assert_eq!(pick_by_mac(&BTreeSet::new(), [0; 6]), None);
    }
}
