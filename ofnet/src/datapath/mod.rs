//! Bridge datapaths: what flows and groups a bridge should hold, computed as values.
//!
//! A datapath is a pure function of the [`Topology`] (the endpoint DB snapshot plus the
//! agent's uplinks, VTEPs, policy rules and ARP mode) to flows and groups. They are computed
//! per [`Owner`], the object they exist for (a local endpoint, a remote endpoint, a network,
//! an uplink, a rule, the input table): [`Datapath::part`] gives an owner's complete [`Part`],
//! empty once the owner is gone. The agent recomputes only the owners a change touches and
//! [`Desired::plan`] turns the new parts into `ofctrl` changes, so an update costs what its
//! owners cost, not what the whole table costs. Changes that touch everything (a network, a
//! VTEP) recompute every owner; the result is the same as building the table from scratch
//! ([`Datapath::desired`]), which is what the golden tests compare.
//!
//! Every flow has exactly one owner: two owners wanting the same flow (same table, priority
//! and match) is a [`DatapathError::Conflict`], refused before anything reaches the switch.
//!
//! - [`vlan::VlanBridge`]: VLAN networks (access ports, trunk uplinks, normal switching).
//! - [`vxlan::VxlanBridge`]: VXLAN networks (local VLANs, VTEPs, MAC table, flood groups).
//! - [`vrouter::VrouterBridge`]: VXLAN networks in routing mode (router MAC, IP table, VTEPs).
//! - [`vlrouter::VlrouterBridge`]: VLAN networks in routing mode (router MAC, IP table, routes
//!   learned by BGP out the uplink).
//! - [`host::HostBridge`]: the host bridge (the host's port and each pod's host-access port).

pub mod host;
pub mod vlan;
pub mod vlrouter;
pub mod vrouter;
pub mod vxlan;

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::Arc;

use crate::epdb::EndpointTable;
use crate::flows::{self, policy::RuleError};
use crate::model::{ArpMode, BridgeKind, Endpoint, MacAddr, PolicyRule};
use crate::netpol::Policies;
use crate::netpol::compile::FlowOwner;
use crate::pipeline::{Pipeline, PipelineError, id};
use crate::service::{self, Services};
use crate::text;
use ofctrl::{Change, Flow, FlowKey, Group, Meter};
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
    pub rules: BTreeMap<String, Arc<PolicyRule>>,
    /// Load-balanced services and their client assignments.
    pub services: Services,
    /// The host's router port (VLAN router: the port carrying the router address BGP peers on).
    pub router: Option<RouterPort>,
    /// Prefixes learned by BGP, with their next hop (VLAN router).
    pub routes: BTreeMap<ipnet::Ipv4Net, Ipv4Addr>,
    /// Next hops' MACs, learned from ARP on the uplink (VLAN router).
    pub neighbors: BTreeMap<Ipv4Addr, MacAddr>,
    /// Kubernetes NetworkPolicies.
    pub netpols: Policies,
    /// Local endpoints' DNS queries go to the controller (inline DNS).
    pub dns_punt: bool,
    /// The host NAT port (VXLAN router: `contivh0`), or the host bridge's host port, or none.
    pub host_nat: Option<HostNatPort>,
    /// Pods' host-access ports by OpenFlow port (host bridge).
    pub host_access: BTreeMap<u32, host::HostAccessPort>,
}

impl Settings {
    /// Whether policy is stateful now: some policy rule or NetworkPolicy exists, so every IP
    /// packet is looked up in conntrack and new connections are committed.
    pub fn stateful(&self) -> bool {
        !self.rules.is_empty() || !self.netpols.is_empty()
    }
}

/// The VLAN router's router port: an internal port of the bridge holding the host's router
/// address (`inb01` in the reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterPort {
    pub port: u32,
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
}

/// The VXLAN router's host NAT port (`contivh0` in the reference): an internal port whose
/// host-side address is in the private subnet (`pvtSubnet`). Each local endpoint is known to
/// the host by a private address of that subnet, derived from its OpenFlow port
/// ([`HostNatPort::private_ip`]), so none is stored or allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostNatPort {
    pub port: u32,
    /// The host's address on the port, in `subnet`.
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
    pub subnet: ipnet::Ipv4Net,
}

impl HostNatPort {
    /// The private address of the local endpoint on OpenFlow port `port_no`: the subnet's
    /// address plus the port number (the reference's `<b0>.<b1>.<port>>8>.<port&255>` on a
    /// /16); `None` when the subnet has no room for it or it would be the host's own.
    pub fn private_ip(&self, port_no: u32) -> Option<Ipv4Addr> {
        let host_bits = 32 - u32::from(self.subnet.prefix_len());
        let room = if host_bits >= 32 {
            u32::MAX
        } else {
            (1u32 << host_bits) - 1
        };
        if port_no == 0 || port_no >= room {
            return None;
        }
        let ip = Ipv4Addr::from(u32::from(self.subnet.network()) | port_no);
        (ip != self.ip).then_some(ip)
    }
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
    /// Two owners want the same flow (same table, priority and match), e.g. two policy rules
    /// with the same match, or a remote endpoint claiming a local endpoint's MAC.
    #[error("{owner} and {other} both want the flow {flow}")]
    Conflict {
        flow: String,
        owner: Owner,
        other: Owner,
    },
    #[error("{owner} and {other} both want group {id}")]
    GroupConflict { id: u32, owner: Owner, other: Owner },
    #[error("{owner} and {other} both want meter {id}")]
    MeterConflict { id: u32, owner: Owner, other: Owner },
}

/// Whether `p` runs policy statefully now: some rule or NetworkPolicy exists and the pipeline
/// has the NetworkPolicy tables, where new connections are committed. The routing pipelines
/// use table 7 for routing and have none, so their Contiv rules stay stateless (as in the
/// reference) and NetworkPolicies are refused there.
fn stateful_policy(p: &Pipeline, topo: &Topology<'_>) -> bool {
    topo.settings.stateful() && p.has_netpol()
}

/// The object a flow or group exists for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Owner {
    /// The input table's fixed flows (depend on the ARP mode).
    Input,
    /// A local endpoint, by OpenFlow port.
    LocalEndpoint(u32),
    /// A remote endpoint, by id.
    RemoteEndpoint(String),
    Uplink(u32),
    /// A network, by VLAN: VTEP ingress, flood groups and flood flows.
    Network(u16),
    /// A policy rule, by id.
    Rule(String),
    /// A service's groups and the flows that depend on all its providers, by name.
    Service(String),
    /// The flows of one provider of a service (by service name and provider address): a
    /// provider that joins or leaves changes its own and its service's, not the others'.
    ServiceProvider(String, Ipv4Addr),
    /// The conntrack lookups (while any service has a spec, or policy is stateful), the
    /// services' shared hairpin flows and the stateful policy's shared flows.
    Conntrack,
    /// NetworkPolicy flows (by match, isolated pod or rule conjunction).
    Netpol(Box<FlowOwner>),
    /// The router port's plumbing (VLAN router).
    Router,
    /// A prefix learned by BGP (VLAN router).
    Route(ipnet::Ipv4Net),
    /// The host NAT port's own flows (VXLAN router), or the host bridge's host port.
    HostNat,
    /// A pod's host-access port on the host bridge, by OpenFlow port.
    HostAccess(u32),
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Input => write!(f, "the input table"),
            Owner::LocalEndpoint(p) => write!(f, "local endpoint on port {p}"),
            Owner::RemoteEndpoint(id) => write!(f, "remote endpoint {id}"),
            Owner::Uplink(p) => write!(f, "uplink {p}"),
            Owner::Network(v) => write!(f, "network on VLAN {v}"),
            Owner::Rule(id) => write!(f, "rule {id}"),
            Owner::Service(name) => write!(f, "service {name}"),
            Owner::ServiceProvider(name, ip) => write!(f, "service {name} provider {ip}"),
            Owner::Conntrack => write!(f, "the conntrack flows"),
            Owner::Netpol(o) => write!(f, "{o}"),
            Owner::Router => write!(f, "the router port"),
            Owner::Route(p) => write!(f, "route {p}"),
            Owner::HostNat => write!(f, "the host NAT port"),
            Owner::HostAccess(p) => write!(f, "host-access port {p}"),
        }
    }
}

/// The flows, groups and meters of one owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Part {
    pub flows: Vec<Flow>,
    pub groups: Vec<Group>,
    pub meters: Vec<Meter>,
}

impl Part {
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.groups.is_empty() && self.meters.is_empty()
    }
}

/// A part as [`Desired`] plans and keeps it: each flow behind an `Arc` that the change sent to
/// `ofctrl` shares ([`Change::AddFlow`]), so a flow both the agent and the bridge's desired
/// state hold is in memory once (flows are most of an agent's memory; see
/// docs/performance.md, "Memory").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldPart {
    /// Sized to the flows: a part is built once and only replaced.
    pub flows: Box<[Arc<Flow>]>,
    /// Groups and meters, which few owners have (services, endpoints with a bandwidth limit):
    /// behind one pointer, so that an owner table entry is 32 bytes, not 80 (thousands of
    /// owners: a rule, an endpoint, a provider each).
    extras: Option<Box<PartExtras>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PartExtras {
    groups: Box<[Arc<Group>]>,
    meters: Box<[Meter]>,
}

impl HeldPart {
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.extras.is_none()
    }

    pub fn groups(&self) -> &[Arc<Group>] {
        self.extras.as_ref().map_or(&[], |e| &e.groups)
    }

    pub fn meters(&self) -> &[Meter] {
        self.extras.as_ref().map_or(&[], |e| &e.meters)
    }
}

impl From<Part> for HeldPart {
    fn from(part: Part) -> HeldPart {
        // Not `into_iter().map(Arc::new).collect()` into a `Vec`: collecting in place keeps the
        // `Vec<Flow>`'s buffer, nine times what its pointers need, for as long as the part is
        // held (1.9 MB of 15 in `bench memory`); a boxed slice is allocated at its length.
        let flows: Box<[Arc<Flow>]> = part.flows.into_iter().map(Arc::new).collect();
        let extras = (!part.groups.is_empty() || !part.meters.is_empty()).then(|| {
            Box::new(PartExtras {
                groups: part.groups.into_iter().map(Arc::new).collect(),
                meters: part.meters.into_boxed_slice(),
            })
        });
        HeldPart { flows, extras }
    }
}

/// A local endpoint's meter and the input-table flow using it, when it has a bandwidth limit
/// (see [`flows::meter_input`]); added to its part by both datapaths.
fn meter_part(p: &'static Pipeline, ep: &Endpoint, part: &mut Part) -> Result<(), DatapathError> {
    if let Some(bw) = ep.bandwidth {
        let (flow, meter) = flows::meter_input(p.table(id::INPUT)?, ep.port_no, bw, id::VLAN)?;
        part.flows.push(flow);
        part.meters.push(meter);
    }
    Ok(())
}

/// Where a flow is: its owner, its index in the owner's part, and its key's hash. The owner is
/// the part's own key, shared: a slot per installed flow must not copy an owner's name.
#[derive(Debug, Clone)]
struct FlowSlot {
    owner: Arc<Owner>,
    index: u32,
    hash: u64,
}

/// The key of the flow a slot points at (`None` only if the slot is stale, which
/// [`Desired::commit`] never leaves behind).
fn slot_key<'a>(parts: &'a HashMap<Arc<Owner>, HeldPart>, slot: &FlowSlot) -> Option<&'a FlowKey> {
    let index = usize::try_from(slot.index).ok()?;
    parts.get(&*slot.owner)?.flows.get(index).map(|f| &f.key)
}

/// What the bridge holds (or should hold), by owner.
#[derive(Debug, Clone, Default)]
pub struct Desired {
    parts: HashMap<Arc<Owner>, HeldPart>,
    /// Which owner holds each flow key: a slot per flow, found by the key's hash and checked
    /// against the flow in its part, so no key is stored a second time (flows are most of an
    /// agent's memory; see docs/performance.md).
    flow_owner: hashbrown::HashTable<FlowSlot>,
    /// Fast and randomly seeded: the keys are flows the datapaths build.
    hasher: foldhash::fast::RandomState,
    group_owner: HashMap<u32, Owner>,
    meter_owner: HashMap<u32, Owner>,
}

impl Desired {
    pub fn new() -> Desired {
        Desired::default()
    }

    pub fn owners(&self) -> impl Iterator<Item = &Owner> {
        self.parts.keys().map(|o| &**o)
    }

    pub fn flows(&self) -> impl Iterator<Item = &Flow> {
        self.parts
            .values()
            .flat_map(|p| p.flows.iter().map(|f| &**f))
    }

    /// Every flow with its owner.
    pub fn owned_flows(&self) -> impl Iterator<Item = (&Owner, &Flow)> {
        self.parts
            .iter()
            .flat_map(|(o, p)| p.flows.iter().map(move |f| (&**o, &**f)))
    }

    /// The installed group with this id (as its owner's part holds it).
    fn installed_group(&self, id: u32) -> Option<&Arc<Group>> {
        self.group_owner
            .get(&id)
            .and_then(|o| self.parts.get(o))
            .and_then(|p| p.groups().iter().find(|g| g.id == id))
    }

    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.parts
            .values()
            .flat_map(|p| p.groups().iter().map(|g| &**g))
    }

    pub fn meters(&self) -> impl Iterator<Item = &Meter> {
        self.parts.values().flat_map(|p| p.meters())
    }

    pub fn flow_count(&self) -> usize {
        self.flow_owner.len()
    }

    /// The owner of the installed flow with key `key`, and the flow.
    fn installed(&self, key: &FlowKey) -> Option<(&Owner, &Arc<Flow>)> {
        let hash = self.hasher.hash_one(key);
        let slot = self
            .flow_owner
            .find(hash, |s| slot_key(&self.parts, s) == Some(key))?;
        let flow = self
            .parts
            .get(&*slot.owner)?
            .flows
            .get(usize::try_from(slot.index).ok()?)?;
        Some((&*slot.owner, flow))
    }

    /// The flows in `ovs-ofctl` syntax, sorted (see [`text::sorted`]).
    pub fn flow_lines(&self) -> Vec<String> {
        text::flows(self.flows())
    }

    /// The groups in `ovs-ofctl dump-groups` syntax, by id.
    pub fn group_lines(&self) -> Vec<String> {
        let mut groups: Vec<&Group> = self.groups().collect();
        groups.sort_by_key(|g| g.id);
        groups.into_iter().map(text::group).collect()
    }

    /// The changes that replace the parts of the given owners (an empty part removes the
    /// owner). Refuses a flow or group another owner holds. Does not change `self`; see
    /// [`Desired::commit`].
    pub fn plan(&self, updates: &[(Owner, HeldPart)]) -> Result<Vec<Change>, DatapathError> {
        let replaced: HashMap<&Owner, &HeldPart> = updates.iter().map(|(o, p)| (o, p)).collect();
        let mut new_flows: HashMap<&FlowKey, (&Owner, &Arc<Flow>), foldhash::fast::RandomState> =
            HashMap::default();
        let mut new_groups: HashMap<u32, (&Owner, &Arc<Group>)> = HashMap::new();
        let mut new_meters: HashMap<u32, (&Owner, &Meter)> = HashMap::new();
        for (owner, part) in &replaced {
            for m in part.meters() {
                let other = new_meters
                    .insert(m.id, (owner, m))
                    .map(|(o, _)| o)
                    .or_else(|| {
                        self.meter_owner
                            .get(&m.id)
                            .filter(|o| !replaced.contains_key(o))
                    });
                if let Some(other) = other {
                    return Err(DatapathError::MeterConflict {
                        id: m.id,
                        owner: (*owner).clone(),
                        other: other.clone(),
                    });
                }
            }
            for f in &part.flows {
                let other = new_flows
                    .insert(&f.key, (owner, f))
                    .map(|(o, _)| o)
                    .or_else(|| {
                        self.installed(&f.key)
                            .map(|(o, _)| o)
                            .filter(|o| !replaced.contains_key(o))
                    });
                if let Some(other) = other
                    && other != *owner
                {
                    return Err(DatapathError::Conflict {
                        flow: text::flow(f),
                        owner: (*owner).clone(),
                        other: other.clone(),
                    });
                }
            }
            for g in part.groups() {
                let other = new_groups
                    .insert(g.id, (owner, g))
                    .map(|(o, _)| o)
                    .or_else(|| {
                        self.group_owner
                            .get(&g.id)
                            .filter(|o| !replaced.contains_key(o))
                    });
                if let Some(other) = other {
                    return Err(DatapathError::GroupConflict {
                        id: g.id,
                        owner: (*owner).clone(),
                        other: other.clone(),
                    });
                }
            }
        }
        let mut out = Vec::new();
        let mut removed_groups = Vec::new();
        let mut removed_meters = Vec::new();
        for owner in replaced.keys() {
            let Some(old) = self.parts.get(*owner) else {
                continue;
            };
            for f in &old.flows {
                if !new_flows.contains_key(&f.key) {
                    out.push(Change::RemoveFlow(f.key.clone()));
                }
            }
            for g in old.groups() {
                if !new_groups.contains_key(&g.id) {
                    removed_groups.push(Change::RemoveGroup(g.id));
                }
            }
            for m in old.meters() {
                if !new_meters.contains_key(&m.id) {
                    removed_meters.push(Change::RemoveMeter(m.id));
                }
            }
        }
        for (id, (_, m)) in &new_meters {
            let have = self
                .meter_owner
                .get(id)
                .and_then(|o| self.parts.get(o))
                .and_then(|p| p.meters().iter().find(|h| h.id == *id));
            if have != Some(*m) {
                out.push(Change::AddMeter((*m).clone()));
            }
        }
        let installed_flow = |k: &FlowKey| self.installed(k).map(|(_, f)| &**f);
        for (id, (_, g)) in &new_groups {
            let have = self.installed_group(*id);
            if have != Some(*g) {
                out.push(Change::AddGroup(Arc::clone(g)));
            }
        }
        for (k, (_, f)) in &new_flows {
            if installed_flow(k) != Some(&***f) {
                out.push(Change::AddFlow(Arc::clone(f)));
            }
        }
        out.extend(removed_groups);
        out.extend(removed_meters);
        Ok(out)
    }

    /// Record parts the switch confirmed (after [`Desired::plan`] accepted them).
    pub fn commit(&mut self, mut updates: Vec<(Owner, HeldPart)>) {
        // A flow built again equal to the installed one was not sent (`plan` left it out), so
        // ofctrl still holds the installed `Arc`: keep that one, not the new copy.
        // The same for a group (a service's select group, rebuilt with the same buckets).
        for (_, part) in &mut updates {
            for f in &mut part.flows {
                if let Some((_, have)) = self.installed(&f.key)
                    && !Arc::ptr_eq(have, f)
                    && **have == **f
                {
                    *f = Arc::clone(have);
                }
            }
            if let Some(extras) = &mut part.extras {
                for g in &mut extras.groups {
                    if let Some(have) = self.installed_group(g.id)
                        && !Arc::ptr_eq(have, g)
                        && **have == **g
                    {
                        *g = Arc::clone(have);
                    }
                }
            }
        }
        let Desired {
            parts,
            flow_owner,
            hasher,
            group_owner,
            meter_owner,
        } = self;
        for (owner, part) in updates {
            // The installed key when the owner has a part already, so its slots keep sharing it.
            let (owner, old) = match parts.remove_entry(&owner) {
                Some((held, old)) => (held, Some(old)),
                None => (Arc::new(owner), None),
            };
            if let Some(old) = old {
                for (i, f) in old.flows.iter().enumerate() {
                    let index = u32::try_from(i).unwrap_or(u32::MAX);
                    if let Ok(slot) = flow_owner.find_entry(hasher.hash_one(&f.key), |s| {
                        s.owner == owner && s.index == index
                    }) {
                        slot.remove();
                    }
                }
                for g in old.groups() {
                    if group_owner.get(&g.id) == Some(&*owner) {
                        group_owner.remove(&g.id);
                    }
                }
                for m in old.meters() {
                    if meter_owner.get(&m.id) == Some(&*owner) {
                        meter_owner.remove(&m.id);
                    }
                }
            }
            if part.is_empty() {
                continue;
            }
            for g in part.groups() {
                group_owner.insert(g.id, (*owner).clone());
            }
            for m in part.meters() {
                meter_owner.insert(m.id, (*owner).clone());
            }
            parts.insert(Arc::clone(&owner), part);
            let Some(flows) = parts.get(&*owner).map(|p| &p.flows) else {
                continue;
            };
            for (i, f) in flows.iter().enumerate() {
                let slot = FlowSlot {
                    owner: Arc::clone(&owner),
                    index: u32::try_from(i).unwrap_or(u32::MAX),
                    hash: hasher.hash_one(&f.key),
                };
                // A key held before (by this part, earlier in it) is taken over: the last wins.
                match flow_owner.entry(
                    slot.hash,
                    |s| slot_key(parts, s) == Some(&f.key),
                    |s| s.hash,
                ) {
                    hashbrown::hash_table::Entry::Occupied(mut held) => *held.get_mut() = slot,
                    hashbrown::hash_table::Entry::Vacant(free) => {
                        free.insert(slot);
                    }
                }
            }
        }
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

    /// Every owner that has flows or groups in `topo`.
    fn owners(&self, topo: &Topology<'_>) -> Vec<Owner>;

    /// The complete part of `owner` in `topo` (empty if the owner does not exist).
    fn part(&self, topo: &Topology<'_>, owner: &Owner) -> Result<Part, DatapathError>;

    /// The MAC this datapath answers ARP and neighbour solicitations with for every known
    /// target and the gateway (routing datapaths); `None`: bridging, each target's own MAC.
    fn router_mac(&self) -> Option<[u8; 6]> {
        None
    }

    /// The reference's datapath name (`DpName`).
    fn name(&self) -> &'static str {
        self.pipeline().name
    }

    /// Packet-outs that carry an ARP request (`frame`, untagged, from local endpoint `src`)
    /// whose target no agent knows beyond this host: toward every VTEP, or out one uplink.
    fn forward_arp(&self, topo: &Topology<'_>, src: &Endpoint, frame: &[u8]) -> Vec<PacketOut>;

    /// Everything the bridge should hold for `topo`, built from scratch.
    fn desired(&self, topo: &Topology<'_>) -> Result<Desired, DatapathError> {
        let updates: Vec<(Owner, HeldPart)> = self
            .owners(topo)
            .into_iter()
            .map(|o| Ok((o.clone(), self.part(topo, &o)?.into())))
            .collect::<Result<_, DatapathError>>()?;
        let mut d = Desired::new();
        d.plan(&updates)?;
        d.commit(updates);
        Ok(d)
    }
}

/// The parts every bridge datapath computes the same way: policy rules.
fn rule_part(p: &'static Pipeline, topo: &Topology<'_>, id: &str) -> Result<Part, DatapathError> {
    let Some(rule) = topo.settings.rules.get(id) else {
        return Ok(Part::default());
    };
    let table = p.table(id::POLICY)?;
    Ok(Part {
        flows: flows::policy::rule_flows(table, rule, id::SERVICE_SNAT)?,
        groups: Vec::new(),
        meters: Vec::new(),
    })
}

/// The parts every bridge datapath computes the same way: services (the conntrack entry
/// flows, and each service's groups and flows). A provider's MAC comes from the endpoint DB
/// when it knows the provider's address in any VRF.
fn service_part(
    p: &'static Pipeline,
    topo: &Topology<'_>,
    owner: &Owner,
) -> Result<Part, DatapathError> {
    let services = &topo.settings.services;
    match owner {
        Owner::Conntrack if services.any_active() || stateful_policy(p, topo) => {
            // IPv6 packets are looked up only while a dual-stack service exists or policy
            // is stateful.
            let stateful = stateful_policy(p, topo);
            let mut families = vec![crate::flows::ETH_IPV4];
            if services.any_ipv6() || stateful {
                families.push(crate::flows::ETH_IPV6);
            }
            let mut flows = Vec::new();
            if stateful {
                flows.extend(crate::netpol::flows::stateful_flows(p)?);
            }
            for eth in families {
                for t in [id::SERVICE_DNAT, id::SERVICE_SNAT] {
                    flows.push(service::flows::conntrack_entry_for(p.table(t)?, eth)?);
                }
            }
            if services.any_active() {
                flows.extend(service::flows::hairpin_shared(
                    p.table(id::SERVICE_DNAT)?,
                    services.any_ipv6(),
                    p.tagged,
                )?);
            }
            Ok(Part {
                flows,
                groups: Vec::new(),
                meters: Vec::new(),
            })
        }
        Owner::Service(name) => {
            let Some((svc, spec)) = services.active(name) else {
                return Ok(Part::default());
            };
            let providers: Vec<service::flows::Provider> = svc
                .usable_providers()
                .map(|ip| provider_of(topo.endpoints, ip))
                .collect();
            let (flows, groups) = service_flows(name, spec, svc.index, &providers)
                .build_service(service_tables(p)?)?;
            Ok(Part {
                flows,
                groups,
                meters: Vec::new(),
            })
        }
        Owner::ServiceProvider(name, ip) => {
            let Some((svc, spec)) = services
                .active(name)
                .filter(|(svc, _)| svc.is_usable_provider(*ip))
            else {
                return Ok(Part::default());
            };
            let provider = provider_of(topo.endpoints, *ip);
            Ok(Part {
                flows: service_flows(name, spec, svc.index, &[])
                    .build_provider(&provider, service_tables(p)?)?,
                groups: Vec::new(),
                meters: Vec::new(),
            })
        }
        _ => Ok(Part::default()),
    }
}

/// [`service_part`] on a bridging datapath (VLAN, VXLAN): only local endpoints' packets reach
/// the balancing table (table 1 sends them to 3; uplink and tunnel traffic goes to 6), so on a
/// bridge without a local endpoint a service has no client and needs no flow or group. A host
/// whose pods are all on VXLAN networks keeps its services on that bridge alone, and a provider
/// joining rewrites one bridge's groups, not two. The conntrack flows stay (stateful policy
/// uses them too).
fn bridged_service_part(
    p: &'static Pipeline,
    topo: &Topology<'_>,
    owner: &Owner,
) -> Result<Part, DatapathError> {
    if matches!(owner, Owner::Service(_) | Owner::ServiceProvider(..))
        && !topo.endpoints.has_locals()
    {
        return Ok(Part::default());
    }
    service_part(p, topo, owner)
}

/// The flow builder of service `name`.
fn service_flows<'a>(
    name: &'a str,
    spec: &'a service::ServiceSpec,
    index: u32,
    providers: &'a [service::flows::Provider],
) -> service::flows::ServiceFlows<'a> {
    service::flows::ServiceFlows {
        name,
        spec,
        index,
        providers,
        affinity_table: Some(id::SERVICE_AFFINITY),
    }
}

/// Where the services' flows live in pipeline `p`.
fn service_tables(p: &'static Pipeline) -> Result<service::flows::ServiceTables, PipelineError> {
    Ok(service::flows::ServiceTables {
        dnat: p.table(id::SERVICE_DNAT)?,
        dnat_next: id::DST_GROUP,
        snat: p.table(id::SERVICE_SNAT)?,
        snat_next: p.after_service_snat(),
    })
}

/// The provider `ip`: the MAC and IPv6 address of the endpoint with address `ip` in any VRF of
/// this bridge, when the endpoint DB has it.
fn provider_of(endpoints: &EndpointTable, ip: Ipv4Addr) -> service::flows::Provider {
    let ep = endpoints
        .vrfs()
        .find_map(|v| endpoints.find(ip.into(), &v.vrf_name));
    service::flows::Provider {
        ip,
        mac: ep.map(|e| e.mac.octets()),
        ipv6: ep.and_then(|e| e.ipv6_addr),
    }
}

/// Every service owner of `services`: each service, and each provider of a service with a
/// spec.
pub fn service_owners(services: &Services) -> impl Iterator<Item = Owner> + '_ {
    services.iter().flat_map(|(name, svc)| {
        let providers = svc
            .active_spec()
            .map(|_| svc.usable_providers())
            .into_iter()
            .flatten()
            .map(|ip| Owner::ServiceProvider(name.clone(), ip));
        std::iter::once(Owner::Service(name.clone())).chain(providers)
    })
}

/// The flows of a NetworkPolicy owner.
fn netpol_part(
    p: &'static Pipeline,
    topo: &Topology<'_>,
    owner: &FlowOwner,
) -> Result<Part, DatapathError> {
    Ok(Part {
        flows: crate::netpol::flows::owner_flows(
            p,
            topo.settings.netpols.index(),
            |vrf| topo.endpoints.vrf_id(vrf),
            owner,
        )?,
        groups: Vec::new(),
        meters: Vec::new(),
    })
}

/// Every NetworkPolicy owner with flows.
pub fn netpol_owners(netpols: &Policies) -> impl Iterator<Item = Owner> + '_ {
    let index = netpols.index();
    index
        .clauses
        .keys()
        .map(|k| FlowOwner::Clause(k.clone()))
        .chain(index.allow_all.keys().map(|(d, vrf, a)| {
            FlowOwner::Clause(crate::netpol::compile::ClauseKey {
                dir: *d,
                vrf: vrf.clone(),
                clause: crate::netpol::compile::target_clause(*d, *a),
            })
        }))
        .chain(index.isolated.keys().cloned().map(FlowOwner::Isolation))
        .chain(index.conjs.keys().map(|c| FlowOwner::Conj(*c)))
        .map(|o| Owner::Netpol(Box::new(o)))
}

/// A local endpoint's classification (table 1: spoof guard, VRF, group, DSCP, DNS punt; then
/// table 3), its destination-group flows (table 4) and, while any service has a spec, its
/// hairpin flow (table 3: its own connections to a service balanced to itself), the same on
/// every datapath but for the VLAN pushed on ingress (VXLAN bridge only).
fn local_class_flows(
    p: &'static Pipeline,
    topo: &Topology<'_>,
    ep: &Endpoint,
    vrf_id: u8,
    push_vlan: Option<u16>,
) -> Result<Vec<Flow>, DatapathError> {
    let mut flows = flows::port_class(
        p.table(id::VLAN)?,
        &flows::PortClass {
            port: ep.port_no,
            mac: ep.mac.octets(),
            ipv4: ep.ip_addr,
            ipv6: ep.ipv6_addr,
            vrf_id,
            epg: ep.endpoint_group,
            push_vlan,
            dscp: ep.dscp,
            next: id::SERVICE_DNAT,
            dns_punt: topo.settings.dns_punt,
        },
    )?;
    flows.extend(dst_group_flows(p, topo, ep)?);
    if topo.settings.services.any_active() {
        let dnat = p.table(id::SERVICE_DNAT)?;
        let addrs = [ep.ip_addr.map(IpAddr::V4), ep.ipv6_addr.map(IpAddr::V6)];
        for addr in addrs.into_iter().flatten() {
            flows.push(service::flows::hairpin_snat(
                dnat,
                vrf_id,
                addr,
                ep.mac.octets(),
            )?);
        }
    }
    Ok(flows)
}

/// The destination-group flows of an endpoint whose VRF exists on this bridge.
fn dst_group_flows(
    p: &'static Pipeline,
    topo: &Topology<'_>,
    ep: &Endpoint,
) -> Result<Vec<Flow>, DatapathError> {
    match topo.vrf_of(ep) {
        Some(vrf) => Ok(flows::dst_group(
            p.table(id::DST_GROUP)?,
            ep,
            vrf,
            id::POLICY,
        )?),
        None => Ok(Vec::new()),
    }
}

/// Owners every bridge datapath has: the input table, endpoints, rules.
fn common_owners(topo: &Topology<'_>) -> Vec<Owner> {
    let mut out = vec![Owner::Input];
    out.extend(
        topo.endpoints
            .locals()
            .map(|e| Owner::LocalEndpoint(e.port_no)),
    );
    out.extend(
        topo.endpoints
            .remotes()
            .map(|e| Owner::RemoteEndpoint(e.endpoint_id.clone())),
    );
    out.extend(topo.settings.rules.keys().map(|id| Owner::Rule(id.clone())));
    out.extend(service_owners(&topo.settings.services));
    if topo.settings.services.any_active() || topo.settings.stateful() {
        out.push(Owner::Conntrack);
    }
    let mut netpol: Vec<Owner> = netpol_owners(&topo.settings.netpols).collect();
    netpol.sort();
    netpol.dedup();
    out.extend(netpol);
    out
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
    fn a_held_part_is_exact_and_small() {
        let mut flows = Vec::with_capacity(8);
        flows.extend([f(1, 2), f(2, 2)]);
        let held = HeldPart::from(Part {
            flows,
            ..Part::default()
        });
        assert_eq!(held.flows.len(), 2);
        assert!(held.groups().is_empty() && held.meters().is_empty());
        // The owner table holds a part inline, one per owner.
        assert_eq!(std::mem::size_of::<HeldPart>(), 24);
    }

    fn part(flows: Vec<Flow>) -> HeldPart {
        Part {
            flows,
            groups: Vec::new(),
            meters: Vec::new(),
        }
        .into()
    }

    fn adds_and_removes(changes: &[Change]) -> (usize, Vec<FlowKey>) {
        let adds = changes
            .iter()
            .filter(|c| matches!(c, Change::AddFlow(_)))
            .count();
        let removes = changes
            .iter()
            .filter_map(|c| match c {
                Change::RemoveFlow(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        (adds, removes)
    }

    /// The changes that move endpoint 3's part from `before` to `after` in `datapath`.
    fn endpoint_update(
        datapath: &dyn Datapath,
        table: &mut EndpointTable,
        bandwidth: Option<crate::model::Bandwidth>,
    ) -> (Vec<Change>, Desired) {
        let settings = Settings::default();
        let before = datapath
            .desired(&Topology {
                endpoints: table,
                settings: &settings,
            })
            .unwrap();
        table
            .apply(crate::epdb::EndpointOp::UpdateLocal {
                port: 3,
                dscp: 0,
                bandwidth,
            })
            .unwrap();
        let topo = Topology {
            endpoints: table,
            settings: &settings,
        };
        let owner = Owner::LocalEndpoint(3);
        let updates = vec![(owner.clone(), datapath.part(&topo, &owner).unwrap().into())];
        let changes = before.plan(&updates).unwrap();
        (changes, datapath.desired(&topo).unwrap())
    }

    #[test]
    fn a_bandwidth_limit_is_a_meter_on_the_endpoints_input_flow_and_lifting_it_removes_both() {
        let ten = crate::model::Bandwidth {
            rate_kbps: 10_000,
            burst_kbit: 1000,
        };
        let ip = std::net::Ipv4Addr::new(10, 1, 1, 3);
        for datapath in [&vlan::VlanBridge as &dyn Datapath, &vxlan::VxlanBridge] {
            let vni = if datapath.kind() == BridgeKind::Vxlan {
                5000
            } else {
                0
            };
            let mut t = crate::fixtures::endpoint_table(10, vni, &[(3, ip)], None);
            let (changes, limited) = endpoint_update(datapath, &mut t, Some(ten));
            let line = format!(
                "table=0, priority=10,in_port=3 actions=meter:3,goto_table:{}",
                id::VLAN
            );
            assert!(
                limited.flow_lines().contains(&line),
                "{:?}",
                limited.flow_lines()
            );
            assert_eq!(
                limited.meters().cloned().collect::<Vec<_>>(),
                vec![Meter::drop_above(3, 10_000, 1000)]
            );
            assert!(changes.contains(&Change::AddMeter(Meter::drop_above(3, 10_000, 1000))));
            assert_eq!(
                changes
                    .iter()
                    .filter(|c| matches!(c, Change::AddFlow(_)))
                    .count(),
                1,
                "only the metering flow is new: {changes:?}"
            );

            let (changes, free) = endpoint_update(datapath, &mut t, None);
            assert!(!free.flow_lines().contains(&line));
            assert_eq!(free.meters().count(), 0);
            assert!(changes.contains(&Change::RemoveMeter(3)), "{changes:?}");
        }
    }

    #[test]
    fn a_flow_another_owner_holds_is_a_conflict() {
        let mut d = Desired::new();
        let u = vec![(Owner::Uplink(1), part(vec![f(1, 3)]))];
        d.plan(&u).unwrap();
        d.commit(u);
        let err = d
            .plan(&[(Owner::LocalEndpoint(1), part(vec![f(1, 4)]))])
            .unwrap_err();
        assert!(matches!(err, DatapathError::Conflict { .. }), "{err}");
        // Within one update, too.
        let err = Desired::new()
            .plan(&[
                (Owner::LocalEndpoint(1), part(vec![f(1, 3)])),
                (Owner::LocalEndpoint(2), part(vec![f(1, 3)])),
            ])
            .unwrap_err();
        assert!(matches!(err, DatapathError::Conflict { .. }), "{err}");
    }

    #[test]
    fn replacing_a_part_adds_changed_and_new_and_removes_gone() {
        let mut d = Desired::new();
        let u = vec![(Owner::LocalEndpoint(1), part(vec![f(1, 3), f(2, 3)]))];
        d.plan(&u).unwrap();
        d.commit(u);
        let u = vec![(Owner::LocalEndpoint(1), part(vec![f(1, 4), f(3, 3)]))];
        let (adds, removes) = adds_and_removes(&d.plan(&u).unwrap());
        assert_eq!(adds, 2);
        assert_eq!(removes, vec![f(2, 3).key]);
        d.commit(u.clone());
        assert!(
            d.plan(&u).unwrap().is_empty(),
            "same part again: nothing to do"
        );
        let gone = vec![(Owner::LocalEndpoint(1), HeldPart::default())];
        let (adds, removes) = adds_and_removes(&d.plan(&gone).unwrap());
        assert_eq!((adds, removes.len()), (0, 2));
        d.commit(gone);
        assert_eq!(d.flow_count(), 0);
        assert_eq!(d.owners().count(), 0);
    }

    #[test]
    fn a_flow_built_again_unchanged_stays_the_one_the_switch_state_holds() {
        let mut d = Desired::new();
        let u = vec![(Owner::LocalEndpoint(1), part(vec![f(1, 3)]))];
        let changes = d.plan(&u).unwrap();
        let Some(Change::AddFlow(sent)) = changes.first() else {
            panic!("a new flow is added: {changes:?}");
        };
        assert!(
            Arc::ptr_eq(sent, &u[0].1.flows[0]),
            "the change shares the part's flow, no copy"
        );
        let sent = Arc::clone(sent);
        d.commit(u);
        // Rebuilt equal (a new allocation): nothing goes to the switch, so ofctrl keeps `sent`;
        // the agent must keep that one too, not a second copy.
        let again = vec![(Owner::LocalEndpoint(1), part(vec![f(1, 3)]))];
        assert!(d.plan(&again).unwrap().is_empty());
        d.commit(again);
        let held = &d.parts[&Owner::LocalEndpoint(1)].flows[0];
        assert!(Arc::ptr_eq(held, &sent), "one copy of an unchanged flow");
        // A changed flow is the new one.
        let changed = vec![(Owner::LocalEndpoint(1), part(vec![f(1, 4)]))];
        let fresh = Arc::clone(&changed[0].1.flows[0]);
        assert_eq!(d.plan(&changed).unwrap().len(), 1);
        d.commit(changed);
        assert!(Arc::ptr_eq(
            &d.parts[&Owner::LocalEndpoint(1)].flows[0],
            &fresh
        ));
    }

    #[test]
    fn a_group_built_again_unchanged_stays_the_one_the_switch_state_holds() {
        let group = |buckets: usize| Group {
            id: 7,
            group_type: ofproto::group::GroupType::Select,
            buckets: vec![
                ofproto::group::Bucket {
                    weight: 1,
                    watch_port: u32::MAX,
                    watch_group: u32::MAX,
                    actions: Vec::new(),
                };
                buckets
            ],
        };
        let with_group = |buckets| {
            vec![(
                Owner::Service("web".into()),
                HeldPart::from(Part {
                    groups: vec![group(buckets)],
                    ..Part::default()
                }),
            )]
        };
        let mut d = Desired::new();
        let u = with_group(2);
        let changes = d.plan(&u).unwrap();
        let Some(Change::AddGroup(sent)) = changes.first() else {
            panic!("a new group is added: {changes:?}");
        };
        assert!(Arc::ptr_eq(sent, &u[0].1.groups()[0]), "shared, no copy");
        let sent = Arc::clone(sent);
        d.commit(u);
        let again = with_group(2);
        assert!(d.plan(&again).unwrap().is_empty());
        d.commit(again);
        let held = &d.parts[&Owner::Service("web".into())].groups()[0];
        assert!(Arc::ptr_eq(held, &sent), "one copy of an unchanged group");
        let changed = with_group(3);
        let fresh = Arc::clone(&changed[0].1.groups()[0]);
        assert_eq!(d.plan(&changed).unwrap().len(), 1);
        d.commit(changed);
        assert!(Arc::ptr_eq(
            &d.parts[&Owner::Service("web".into())].groups()[0],
            &fresh
        ));
    }

    #[test]
    fn a_flow_can_move_between_owners_in_one_update() {
        let mut d = Desired::new();
        let u = vec![(Owner::Uplink(1), part(vec![f(1, 3)]))];
        d.plan(&u).unwrap();
        d.commit(u);
        let u = vec![
            (Owner::Uplink(1), HeldPart::default()),
            (Owner::LocalEndpoint(1), part(vec![f(1, 3)])),
        ];
        let (adds, removes) = adds_and_removes(&d.plan(&u).unwrap());
        assert_eq!(
            (adds, removes.len()),
            (0, 0),
            "same flow, new owner: no switch change"
        );
        d.commit(u);
        assert_eq!(d.flow_count(), 1);
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
