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
use ofproto::group::{Bucket, GroupType};
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use std::collections::{BTreeMap, HashMap};

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
}

/// A group as its owner wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub id: u32,
    pub group_type: GroupType,
    pub buckets: Vec<Bucket>,
}

/// One requested change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Add a flow, or replace the flow with the same key.
    AddFlow(Flow),
    /// Remove the flow with this key (no-op if absent).
    RemoveFlow(FlowKey),
    /// Add a group, or replace the group with the same id.
    AddGroup(Group),
    /// Remove a group (no-op if absent).
    RemoveGroup(u32),
}

/// The switch-level operations a set of changes needs, in a safe order (see [`Plan::ops`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    pub add_groups: Vec<Group>,
    pub modify_groups: Vec<Group>,
    pub add_flows: Vec<Flow>,
    pub remove_flows: Vec<FlowKey>,
    pub remove_groups: Vec<u32>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.add_groups.is_empty()
            && self.modify_groups.is_empty()
            && self.add_flows.is_empty()
            && self.remove_flows.is_empty()
            && self.remove_groups.is_empty()
    }

    /// Number of switch operations.
    pub fn len(&self) -> usize {
        self.add_groups.len()
            + self.modify_groups.len()
            + self.add_flows.len()
            + self.remove_flows.len()
            + self.remove_groups.len()
    }
}

/// Everything a bridge should hold.
#[derive(Debug, Default, Clone)]
pub struct DesiredState {
    flows: HashMap<FlowKey, Flow>,
    groups: BTreeMap<u32, Group>,
}

impl DesiredState {
    pub fn new() -> DesiredState {
        DesiredState::default()
    }

    /// The operations that turn the current desired state into the one with `changes` applied.
    /// Changes that would not alter anything (re-adding an identical flow, removing an absent
    /// one) produce no operation; later changes to the same key win over earlier ones.
    pub fn plan(&self, changes: &[Change]) -> Plan {
        // Net effect per key first, so add-then-remove of the same flow is nothing at all.
        let mut flows: HashMap<&FlowKey, Option<&Flow>> = HashMap::new();
        let mut groups: BTreeMap<u32, Option<&Group>> = BTreeMap::new();
        for c in changes {
            match c {
                Change::AddFlow(f) => {
                    flows.insert(&f.key, Some(f));
                }
                Change::RemoveFlow(k) => {
                    flows.insert(k, None);
                }
                Change::AddGroup(g) => {
                    groups.insert(g.id, Some(g));
                }
                Change::RemoveGroup(id) => {
                    groups.insert(*id, None);
                }
            }
        }
        let mut plan = Plan::default();
        for (key, want) in flows {
            match (self.flows.get(key), want) {
                (Some(have), Some(want)) if have == want => {}
                (_, Some(want)) => plan.add_flows.push(want.clone()),
                (Some(_), None) => plan.remove_flows.push(key.clone()),
                (None, None) => {}
            }
        }
        for (id, want) in groups {
            match (self.groups.get(&id), want) {
                (Some(have), Some(want)) if have == want => {}
                (Some(_), Some(want)) => plan.modify_groups.push(want.clone()),
                (None, Some(want)) => plan.add_groups.push(want.clone()),
                (Some(_), None) => plan.remove_groups.push(id),
                (None, None) => {}
            }
        }
        // Deterministic order: tables ascending, higher priorities first.
        plan.add_flows.sort_by(|a, b| {
            (a.key.table, std::cmp::Reverse(a.key.priority))
                .cmp(&(b.key.table, std::cmp::Reverse(b.key.priority)))
        });
        plan.remove_flows
            .sort_by_key(|k| (k.table, std::cmp::Reverse(k.priority)));
        plan
    }

    /// Record a plan the switch confirmed.
    pub fn commit(&mut self, plan: &Plan) {
        for g in plan.add_groups.iter().chain(&plan.modify_groups) {
            self.groups.insert(g.id, g.clone());
        }
        for f in &plan.add_flows {
            self.flows.insert(f.key.clone(), f.clone());
        }
        for k in &plan.remove_flows {
            self.flows.remove(k);
        }
        for id in &plan.remove_groups {
            self.groups.remove(id);
        }
    }

    /// A plan that installs everything from scratch (after a switch restart or on a new
    /// generation).
    pub fn full(&self) -> Plan {
        let mut plan = Plan {
            add_groups: self.groups.values().cloned().collect(),
            add_flows: self.flows.values().cloned().collect(),
            ..Plan::default()
        };
        plan.add_flows.sort_by(|a, b| {
            (a.key.table, std::cmp::Reverse(a.key.priority))
                .cmp(&(b.key.table, std::cmp::Reverse(b.key.priority)))
        });
        plan
    }

    pub fn flows(&self) -> impl Iterator<Item = &Flow> {
        self.flows.values()
    }

    pub fn flow(&self, key: &FlowKey) -> Option<&Flow> {
        self.flows.get(key)
    }

    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values()
    }

    pub fn group(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id)
    }

    pub fn flow_count(&self) -> usize {
        self.flows.len()
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
        let plan = s.plan(&[Change::AddFlow(flow(0, 10, 1, 2))]);
        assert_eq!(plan.add_flows.len(), 1);
        assert_eq!(plan.len(), 1);
    }

    #[test]
    fn identical_readd_is_no_op_and_changed_actions_replace() {
        let mut s = DesiredState::new();
        let p = s.plan(&[Change::AddFlow(flow(0, 10, 1, 2))]);
        s.commit(&p);
        assert!(s.plan(&[Change::AddFlow(flow(0, 10, 1, 2))]).is_empty());
        let p = s.plan(&[Change::AddFlow(flow(0, 10, 1, 3))]);
        assert_eq!(p.add_flows, vec![flow(0, 10, 1, 3)]);
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
                Change::AddFlow(f.clone()),
                Change::RemoveFlow(f.key.clone())
            ])
            .is_empty()
        );
    }

    #[test]
    fn plan_does_not_change_state_until_commit() {
        let mut s = DesiredState::new();
        let p = s.plan(&[Change::AddFlow(flow(0, 10, 1, 2))]);
        assert_eq!(s.flow_count(), 0);
        s.commit(&p);
        assert_eq!(s.flow_count(), 1);
        let p = s.plan(&[Change::RemoveFlow(flow(0, 10, 1, 2).key)]);
        assert_eq!(p.remove_flows.len(), 1);
        s.commit(&p);
        assert_eq!(s.flow_count(), 0);
    }

    #[test]
    fn same_match_different_priority_are_different_flows() {
        let mut s = DesiredState::new();
        let p = s.plan(&[
            Change::AddFlow(flow(0, 10, 1, 2)),
            Change::AddFlow(flow(0, 11, 1, 2)),
        ]);
        s.commit(&p);
        assert_eq!(s.flow_count(), 2);
        assert_eq!(
            s.full().add_flows[0].key.priority,
            11,
            "higher priority first"
        );
    }
}
