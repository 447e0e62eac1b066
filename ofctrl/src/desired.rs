//! The desired state of one bridge, and the minimal modifications between two states.
//!
//! Flows are keyed the way OpenFlow identifies them: table, priority and match. Two flows with
//! the same key are the same flow, whatever their actions; adding one replaces the other in
//! place. Groups are keyed by id, meters by id.
//!
//! A change is computed first ([`DesiredState::plan`]) and recorded only after the switch
//! confirmed it ([`DesiredState::commit`]), so a transaction the switch rejects leaves the
//! desired state exactly as it was.

use crate::cookie::Cookie;
use ofproto::flow_mod::FlowMod;
use ofproto::group::{Bucket, GroupType};
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::meter::MeterBand;
use std::borrow::Borrow;
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// What identifies a flow in a table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub table: u8,
    pub priority: u16,
    pub matches: Match,
}

/// A flow as its owner wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    pub key: FlowKey,
    /// Cookie category and object (the generation is the controller's business).
    pub category: u8,
    pub object: u64,
    pub instructions: Vec<Instruction>,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    /// Ask the switch for a FLOW_REMOVED when it expires or is deleted.
    pub notify_removed: bool,
}

impl Flow {
    /// A flow with no timeouts, category 0, object 0.
    pub fn new(table: u8, priority: u16, matches: Match, instructions: Vec<Instruction>) -> Flow {
        Flow {
            key: FlowKey {
                table,
                priority,
                matches,
            },
            category: 0,
            object: 0,
            instructions,
            idle_timeout: 0,
            hard_timeout: 0,
            notify_removed: false,
        }
    }

    /// Set the cookie's category and object.
    pub fn owned_by(mut self, category: u8, object: u64) -> Flow {
        self.category = category;
        self.object = object;
        self
    }

    /// The cookie this flow carries under `generation`.
    pub fn cookie(&self, generation: u16) -> Cookie {
        Cookie::new(generation, self.category, self.object)
    }

    /// The FLOW_MOD that installs (or replaces) this flow under `generation`.
    pub fn flow_mod(&self, generation: u16) -> FlowMod {
        FlowMod {
            matching: self.key.matches.clone(),
            instructions: self.instructions.clone(),
            ..self.flow_mod_fixed(generation)
        }
    }

    /// [`Flow::flow_mod`]'s fixed fields, with an empty match and no instructions: for
    /// encoding with the flow's own borrowed ([`ofproto::flow_mod::FlowMod::borrowing`]).
    pub fn flow_mod_fixed(&self, generation: u16) -> FlowMod {
        let fm = FlowMod::add(self.key.table, self.key.priority)
            .cookie(self.cookie(generation).0)
            .idle_timeout(self.idle_timeout)
            .hard_timeout(self.hard_timeout);
        if self.notify_removed {
            fm.flags(ofproto::flow_mod::OFPFF_SEND_FLOW_REM)
        } else {
            fm
        }
    }
}

/// A group as its owner wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub id: u32,
    pub group_type: GroupType,
    pub buckets: Vec<Bucket>,
}

/// `OFPMF_KBPS`: band rates are in kbit/s.
pub const OFPMF_KBPS: u16 = 1;
/// `OFPMF_BURST`: the bands' burst sizes apply.
pub const OFPMF_BURST: u16 = 4;
/// `OFPMF_STATS`: the switch counts what the meter passes and drops.
pub const OFPMF_STATS: u16 = 8;

/// A meter as its owner wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meter {
    pub id: u32,
    /// `OFPMF_*` bits.
    pub flags: u16,
    pub bands: Vec<MeterBand>,
}

impl Meter {
    /// A meter that drops what exceeds `rate_kbps`, allowing bursts of `burst_kbit`, and
    /// counts both.
    pub fn drop_above(id: u32, rate_kbps: u32, burst_kbit: u32) -> Meter {
        Meter {
            id,
            flags: OFPMF_KBPS | OFPMF_BURST | OFPMF_STATS,
            bands: vec![MeterBand::Drop {
                rate: rate_kbps,
                burst_size: burst_kbit,
            }],
        }
    }
}

/// One requested change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Add a flow, or replace the flow with the same key. The flow is shared: the desired state
    /// keeps this very allocation, so an owner that keeps its flows too (the ofnet agent) holds
    /// no second copy.
    AddFlow(Arc<Flow>),
    /// Remove the flow with this key (no-op if absent).
    RemoveFlow(FlowKey),
    /// Add a group, or replace the group with the same id. Shared like a flow: a service's
    /// select group carries a bucket per provider, and the owner keeps it too.
    AddGroup(Arc<Group>),
    /// Remove a group (no-op if absent).
    RemoveGroup(u32),
    /// Add a meter, or replace the meter with the same id.
    AddMeter(Meter),
    /// Remove a meter (no-op if absent). The switch deletes the flows still using it, so
    /// remove those flows (or point them elsewhere) in the same change.
    RemoveMeter(u32),
}

impl Change {
    /// Add `flow` (see [`Change::AddFlow`]).
    pub fn add_flow(flow: Flow) -> Change {
        Change::AddFlow(Arc::new(flow))
    }
}

/// The switch-level operations a set of changes needs (sent in a safe order by
/// [`crate::bridge::plan_requests`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    pub add_meters: Vec<Meter>,
    pub modify_meters: Vec<Meter>,
    pub add_groups: Vec<Arc<Group>>,
    pub modify_groups: Vec<Arc<Group>>,
    pub add_flows: Vec<Arc<Flow>>,
    pub remove_flows: Vec<FlowKey>,
    pub remove_groups: Vec<u32>,
    pub remove_meters: Vec<u32>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of switch operations.
    pub fn len(&self) -> usize {
        self.add_meters.len()
            + self.modify_meters.len()
            + self.add_groups.len()
            + self.modify_groups.len()
            + self.add_flows.len()
            + self.remove_flows.len()
            + self.remove_groups.len()
            + self.remove_meters.len()
    }
}

/// A flow in the desired table, found by its key: the key is stored once, inside the flow
/// (a `HashMap<FlowKey, Flow>` would hold every match twice).
#[derive(Debug, Clone)]
struct ByKey(Arc<Flow>);

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for ByKey {}

impl Hash for ByKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.key.hash(state);
    }
}

impl Borrow<FlowKey> for ByKey {
    fn borrow(&self) -> &FlowKey {
        &self.0.key
    }
}

/// The hasher of the flow tables: fast (foldhash), randomly seeded per table; the keys are
/// flows our own agents build, not input an attacker picks.
type FlowHasher = foldhash::fast::RandomState;

/// Everything a bridge should hold.
#[derive(Debug, Default, Clone)]
pub struct DesiredState {
    flows: HashSet<ByKey, FlowHasher>,
    groups: BTreeMap<u32, Arc<Group>>,
    meters: BTreeMap<u32, Meter>,
    /// Flows per table, kept with `flows` (metrics read it without walking every flow).
    per_table: BTreeMap<u8, usize>,
}

impl DesiredState {
    pub fn new() -> DesiredState {
        DesiredState::default()
    }

    /// The operations that turn the current desired state into the one with `changes` applied.
    /// Changes that would not alter anything (re-adding an identical flow, removing an absent
    /// one) produce no operation; later changes to the same key win over earlier ones.
    pub fn plan(&self, changes: &[Change]) -> Plan {
        // Copying a change copies no flow (each is an `Arc`), so there is one planner.
        self.plan_owned(changes.to_vec())
    }

    /// [`DesiredState::plan`], taking the changes: the flows, groups and meters of the plan are
    /// the changes' own (moved, not copied), so a 100,000-flow change is not cloned on its way to
    /// the switch and into the table.
    pub fn plan_owned(&self, changes: Vec<Change>) -> Plan {
        // The last change of each key wins: mark them, walking backwards.
        let mut last = vec![false; changes.len()];
        {
            let mut flows: HashSet<&FlowKey, FlowHasher> =
                HashSet::with_capacity_and_hasher(changes.len(), FlowHasher::default());
            let mut groups = std::collections::HashSet::new();
            let mut meters = std::collections::HashSet::new();
            for (i, c) in changes.iter().enumerate().rev() {
                last[i] = match c {
                    Change::AddFlow(f) => flows.insert(&f.key),
                    Change::RemoveFlow(k) => flows.insert(k),
                    Change::AddGroup(g) => groups.insert(g.id),
                    Change::RemoveGroup(id) => groups.insert(*id),
                    Change::AddMeter(m) => meters.insert(m.id),
                    Change::RemoveMeter(id) => meters.insert(*id),
                };
            }
        }
        let mut plan = Plan::default();
        for (c, last) in changes.into_iter().zip(last) {
            if !last {
                continue;
            }
            match c {
                Change::AddFlow(want) => {
                    if self.flows.get(&want.key).map(|e| &*e.0) != Some(&*want) {
                        plan.add_flows.push(want);
                    }
                }
                Change::RemoveFlow(key) => {
                    if self.flows.contains(&key) {
                        plan.remove_flows.push(key);
                    }
                }
                Change::AddGroup(want) => match self.groups.get(&want.id) {
                    Some(have) if *have == want => {}
                    Some(_) => plan.modify_groups.push(want),
                    None => plan.add_groups.push(want),
                },
                Change::RemoveGroup(id) => {
                    if self.groups.contains_key(&id) {
                        plan.remove_groups.push(id);
                    }
                }
                Change::AddMeter(want) => match self.meters.get(&want.id) {
                    Some(have) if *have == want => {}
                    Some(_) => plan.modify_meters.push(want),
                    None => plan.add_meters.push(want),
                },
                Change::RemoveMeter(id) => {
                    if self.meters.contains_key(&id) {
                        plan.remove_meters.push(id);
                    }
                }
            }
        }
        // The order `plan` gives (groups and meters by id; flows by table, higher priorities
        // first).
        plan.add_groups.sort_by_key(|g| g.id);
        plan.modify_groups.sort_by_key(|g| g.id);
        plan.remove_groups.sort_unstable();
        plan.add_meters.sort_by_key(|m| m.id);
        plan.modify_meters.sort_by_key(|m| m.id);
        plan.remove_meters.sort_unstable();
        plan.add_flows.sort_by(|a, b| {
            (a.key.table, std::cmp::Reverse(a.key.priority))
                .cmp(&(b.key.table, std::cmp::Reverse(b.key.priority)))
        });
        plan.remove_flows
            .sort_by_key(|k| (k.table, std::cmp::Reverse(k.priority)));
        plan
    }

    /// [`DesiredState::commit`], taking the plan (its flows move into the table).
    pub fn commit_owned(&mut self, plan: Plan) {
        for k in &plan.remove_flows {
            self.remove_flow(k);
        }
        for f in plan.add_flows {
            let table = f.key.table;
            if self.flows.replace(ByKey(f)).is_none() {
                *self.per_table.entry(table).or_default() += 1;
            }
        }
        for m in plan.add_meters.into_iter().chain(plan.modify_meters) {
            self.meters.insert(m.id, m);
        }
        for g in plan.add_groups.into_iter().chain(plan.modify_groups) {
            self.groups.insert(g.id, g);
        }
        for id in &plan.remove_groups {
            self.groups.remove(id);
        }
        for id in &plan.remove_meters {
            self.meters.remove(id);
        }
    }

    fn remove_flow(&mut self, k: &FlowKey) {
        if self.flows.remove(k)
            && let Some(n) = self.per_table.get_mut(&k.table)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_table.remove(&k.table);
            }
        }
    }

    /// Record a plan the switch confirmed.
    pub fn commit(&mut self, plan: &Plan) {
        self.commit_owned(plan.clone());
    }

    /// A plan that installs everything from scratch (after a switch restart or on a new
    /// generation).
    pub fn full(&self) -> Plan {
        let mut plan = Plan {
            add_meters: self.meters.values().cloned().collect(),
            add_groups: self.groups.values().cloned().collect(),
            add_flows: self.flows.iter().map(|e| e.0.clone()).collect(),
            ..Plan::default()
        };
        plan.add_flows.sort_by(|a, b| {
            (a.key.table, std::cmp::Reverse(a.key.priority))
                .cmp(&(b.key.table, std::cmp::Reverse(b.key.priority)))
        });
        plan
    }

    pub fn flows(&self) -> impl Iterator<Item = &Flow> {
        self.flows.iter().map(|e| &*e.0)
    }

    pub fn flow(&self, key: &FlowKey) -> Option<&Flow> {
        self.flows.get(key).map(|e| &*e.0)
    }

    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values().map(|g| &**g)
    }

    pub fn group(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id).map(|g| &**g)
    }

    pub fn meters(&self) -> impl Iterator<Item = &Meter> {
        self.meters.values()
    }

    pub fn meter(&self, id: u32) -> Option<&Meter> {
        self.meters.get(&id)
    }

    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Flows per table id (tables without flows are absent).
    pub fn flows_per_table(&self) -> &BTreeMap<u8, usize> {
        &self.per_table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofproto::action::Action;

    fn flow(table: u8, prio: u16, port: u32, out: u32) -> Flow {
        Flow::new(
            table,
            prio,
            Match::new().in_port(port),
            vec![Instruction::ApplyActions(vec![Action::output(out)])],
        )
    }

    #[test]
    fn adding_a_new_flow_plans_one_add() {
        let s = DesiredState::new();
        let plan = s.plan(&[Change::add_flow(flow(0, 10, 1, 2))]);
        assert_eq!(plan.add_flows.len(), 1);
        assert_eq!(plan.len(), 1);
    }

    #[test]
    fn identical_readd_is_no_op_and_changed_actions_replace() {
        let mut s = DesiredState::new();
        let p = s.plan(&[Change::add_flow(flow(0, 10, 1, 2))]);
        s.commit(&p);
        assert!(s.plan(&[Change::add_flow(flow(0, 10, 1, 2))]).is_empty());
        let p = s.plan(&[Change::add_flow(flow(0, 10, 1, 3))]);
        assert_eq!(p.add_flows, vec![Arc::new(flow(0, 10, 1, 3))]);
        assert!(
            p.remove_flows.is_empty(),
            "a replace is an add, not delete+add"
        );
    }

    #[test]
    fn removing_absent_is_no_op_and_add_then_remove_cancels() {
        let s = DesiredState::new();
        let f = flow(1, 5, 1, 2);
        assert!(s.plan(&[Change::RemoveFlow(f.key.clone())]).is_empty());
        assert!(
            s.plan(&[
                Change::add_flow(f.clone()),
                Change::RemoveFlow(f.key.clone())
            ])
            .is_empty()
        );
    }

    #[test]
    fn plan_does_not_change_state_until_commit() {
        let mut s = DesiredState::new();
        let p = s.plan(&[Change::add_flow(flow(0, 10, 1, 2))]);
        assert_eq!(s.flow_count(), 0);
        s.commit(&p);
        assert_eq!(s.flow_count(), 1);
        let p = s.plan(&[Change::RemoveFlow(flow(0, 10, 1, 2).key)]);
        assert_eq!(p.remove_flows.len(), 1);
        s.commit(&p);
        assert_eq!(s.flow_count(), 0);
    }

    #[test]
    fn meters_are_added_modified_and_removed_by_id() {
        let mut s = DesiredState::new();
        let p = s.plan(&[Change::AddMeter(Meter::drop_above(7, 10_000, 1000))]);
        assert_eq!(p.add_meters, vec![Meter::drop_above(7, 10_000, 1000)]);
        s.commit(&p);
        assert!(
            s.plan(&[Change::AddMeter(Meter::drop_above(7, 10_000, 1000))])
                .is_empty()
        );
        let p = s.plan(&[Change::AddMeter(Meter::drop_above(7, 5_000, 1000))]);
        assert_eq!(p.modify_meters.len(), 1);
        assert!(p.add_meters.is_empty());
        s.commit(&p);
        assert_eq!(s.meter(7), Some(&Meter::drop_above(7, 5_000, 1000)));
        assert_eq!(s.full().add_meters.len(), 1);
        let p = s.plan(&[Change::RemoveMeter(7), Change::RemoveMeter(8)]);
        assert_eq!(p.remove_meters, vec![7]);
        s.commit(&p);
        assert!(s.meter(7).is_none());
    }

    #[test]
    fn same_match_different_priority_are_different_flows() {
        let mut s = DesiredState::new();
        let p = s.plan(&[
            Change::add_flow(flow(0, 10, 1, 2)),
            Change::add_flow(flow(0, 11, 1, 2)),
        ]);
        s.commit(&p);
        assert_eq!(s.flow_count(), 2);
        assert_eq!(
            s.full().add_flows[0].key.priority,
            11,
            "higher priority first"
        );
    }

    #[test]
    fn a_mixed_change_plans_only_real_operations_and_ends_where_applying_it_in_order_would() {
        let mut base = DesiredState::new();
        let seed: Vec<Change> = (0..20u32)
            .map(|i| Change::add_flow(flow((i % 3) as u8, 10 + i as u16, i, 1)))
            .chain([Change::AddMeter(Meter::drop_above(3, 1000, 100))])
            .collect();
        base.commit(&base.plan(&seed));
        // Replace, re-add unchanged, remove, add then remove, remove then add, new ones, meters.
        let mut changes = vec![
            Change::add_flow(flow(0, 10, 0, 2)),
            Change::add_flow(flow(1, 11, 1, 1)),
            Change::RemoveFlow(flow(2, 12, 2, 1).key),
            Change::add_flow(flow(5, 50, 7, 7)),
            Change::RemoveFlow(flow(5, 50, 7, 7).key),
            Change::RemoveFlow(flow(0, 13, 3, 1).key),
            Change::add_flow(flow(0, 13, 3, 9)),
            Change::RemoveMeter(3),
            Change::AddMeter(Meter::drop_above(4, 2000, 100)),
            Change::RemoveFlow(flow(9, 1, 1, 1).key),
        ];
        changes.extend((100..130u32).map(|i| Change::add_flow(flow(4, 1 + (i % 7) as u16, i, 3))));
        // The model: every change applied in order to plain maps.
        let mut want_flows: BTreeMap<String, String> = base
            .flows()
            .map(|f| (format!("{:?}", f.key), format!("{f:?}")))
            .collect();
        let mut want_meters: BTreeMap<u32, Meter> =
            base.meters().map(|m| (m.id, m.clone())).collect();
        for c in &changes {
            match c {
                Change::AddFlow(f) => {
                    want_flows.insert(format!("{:?}", f.key), format!("{f:?}"));
                }
                Change::RemoveFlow(k) => {
                    want_flows.remove(&format!("{k:?}"));
                }
                Change::AddMeter(m) => {
                    want_meters.insert(m.id, m.clone());
                }
                Change::RemoveMeter(id) => {
                    want_meters.remove(id);
                }
                _ => {}
            }
        }
        let plan = base.plan_owned(changes);
        // Nothing for the unchanged re-add, the absent removal or the add-then-remove.
        assert_eq!(
            (plan.add_flows.len(), plan.remove_flows.len()),
            (32, 1),
            "{plan:?}"
        );
        assert_eq!(
            (plan.add_meters.len(), plan.remove_meters.clone()),
            (1, vec![3])
        );
        let mut after = base.clone();
        after.commit_owned(plan);
        let flows: BTreeMap<String, String> = after
            .flows()
            .map(|f| (format!("{:?}", f.key), format!("{f:?}")))
            .collect();
        assert_eq!(flows, want_flows);
        assert_eq!(
            after.meters().cloned().collect::<Vec<_>>(),
            want_meters.into_values().collect::<Vec<_>>()
        );
        assert_eq!(
            after.flows_per_table().values().sum::<usize>(),
            after.flow_count()
        );
        assert!(base.plan_owned(Vec::new()).is_empty());
    }
}
