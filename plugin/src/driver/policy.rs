//! Policy rules (reference §4.1: the `state/policyRule` watch): netmaster compiles each policy
//! rule into directional ofnet rules (`CfgPolicyRule`); netplugin installs every one on both
//! agents (an endpoint group may have members on either bridge).
//!
//! Contract: applying a rule is idempotent; a rule whose fields changed is replaced; removing
//! an unknown rule succeeds.
//!
//! Attachments: a compiled rule belongs to the attachment (`EpgPolicy`, `state/policy/<id>`) its
//! id starts with, and is installed only while that attachment exists. netmaster writes an
//! attachment's compiled rules before the attachment and deletes them after it, so the switch
//! gets a policy whole or not at all. Changes are applied in batches ([`Driver::apply_policy`]):
//! every rule a batch of watch events adds or removes goes to each agent as one change, which
//! the agent installs as one switch transaction (one bundle).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use master::state::{CfgPolicyRule, EpgPolicy, OfnetPolicyRule};
use master::store::keys;
use ofnet::{AgentError, BridgeKind, PolicyRule, RuleAction};

use super::Driver;
use crate::error::{PluginError, Result};

/// netmaster's compiled rule as the agent's rule.
pub fn agent_rule(r: &OfnetPolicyRule) -> Result<PolicyRule> {
    let invalid = |field: &'static str, value: String| PluginError::Invalid {
        field,
        problem: format!("{value} of policy rule {}", r.RuleId),
    };
    let action = match r.Action.as_str() {
        "allow" => RuleAction::Allow,
        "deny" => RuleAction::Deny,
        other => return Err(invalid("Action", format!("{other:?}"))),
    };
    let priority =
        u16::try_from(r.Priority).map_err(|_| invalid("Priority", r.Priority.to_string()))?;
    let group = |field, v: u32| u16::try_from(v).map_err(|_| invalid(field, v.to_string()));
    let mut rule = PolicyRule::new(r.RuleId.clone(), priority, action);
    rule.src_endpoint_group = group("SrcEndpointGroup", r.SrcEndpointGroup)?;
    rule.dst_endpoint_group = group("DstEndpointGroup", r.DstEndpointGroup)?;
    rule.src_ip_addr = r.SrcIpAddr.clone();
    rule.dst_ip_addr = r.DstIpAddr.clone();
    rule.ip_protocol = r.IpProtocol;
    rule.src_port = r.SrcPort;
    rule.dst_port = r.DstPort;
    rule.tcp_flags = r.TcpFlags.clone();
    Ok(rule)
}

/// One change under `state/policy/` (attachments) or `state/policyRule/` (compiled rules).
#[derive(Debug, Clone)]
pub enum PolicyEvent {
    Put { key: String, value: Vec<u8> },
    Delete { key: String },
}

/// What the store holds: attachments and compiled rules by attachment (rules of attachments not
/// (yet) seen are kept, not installed). Memory is proportional to the rules in the store.
#[derive(Debug, Default)]
pub struct PolicyBook {
    attached: BTreeSet<String>,
    rules: BTreeMap<String, BTreeMap<String, OfnetPolicyRule>>,
}

/// The rules to install and remove after a batch of events (last change of an id wins).
#[derive(Debug, Default, PartialEq)]
pub struct RuleChanges {
    pub add: BTreeMap<String, OfnetPolicyRule>,
    pub remove: BTreeSet<String>,
}

impl RuleChanges {
    fn add(&mut self, r: OfnetPolicyRule) {
        self.remove.remove(&r.RuleId);
        self.add.insert(r.RuleId.clone(), r);
    }
    fn remove(&mut self, id: String) {
        self.add.remove(&id);
        self.remove.insert(id);
    }
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.remove.is_empty()
    }
}

/// The attachment a compiled rule belongs to; rules of other shapes are their own attachment
/// (always installed).
fn attachment_of(rule_id: &str) -> Option<String> {
    EpgPolicy::id_of_rule(rule_id).map(str::to_string)
}

impl PolicyBook {
    fn installed(&self, attachment: &Option<String>) -> bool {
        attachment
            .as_ref()
            .is_none_or(|a| self.attached.contains(a))
    }

    /// Every rule that is installed now.
    fn installed_rules(&self) -> impl Iterator<Item = &OfnetPolicyRule> {
        self.rules
            .iter()
            .filter(|(a, _)| a.is_empty() || self.attached.contains(*a))
            .flat_map(|(_, rules)| rules.values())
    }

    /// Apply one event; record in `out` what changes on the switch.
    pub fn apply(&mut self, event: PolicyEvent, out: &mut RuleChanges) {
        let attachments = keys::state_prefix(keys::category::POLICY);
        let rules = keys::state_prefix(keys::category::POLICY_RULE);
        match event {
            PolicyEvent::Put { key, value } => {
                if let Some(id) = key.strip_prefix(&attachments) {
                    if self.attached.insert(id.to_string()) {
                        for r in self.rules.get(id).into_iter().flat_map(|m| m.values()) {
                            out.add(r.clone());
                        }
                    }
                } else if key.starts_with(&rules) {
                    match serde_json::from_slice::<CfgPolicyRule>(&value) {
                        Ok(c) => {
                            let a = attachment_of(&c.rule.RuleId);
                            if self.installed(&a) {
                                out.add(c.rule.clone());
                            }
                            self.rules
                                .entry(a.unwrap_or_default())
                                .or_default()
                                .insert(c.rule.RuleId.clone(), c.rule);
                        }
                        Err(e) => tracing::warn!(%key, error = %e, "policy rule does not parse"),
                    }
                }
            }
            PolicyEvent::Delete { key } => {
                if let Some(id) = key.strip_prefix(&attachments) {
                    if self.attached.remove(id) {
                        for r in self.rules.get(id).into_iter().flat_map(|m| m.keys()) {
                            out.remove(r.clone());
                        }
                    }
                } else if let Some(rule_id) = key.strip_prefix(&rules) {
                    let a = attachment_of(rule_id);
                    if self.installed(&a) {
                        out.remove(rule_id.to_string());
                    }
                    let slot = a.unwrap_or_default();
                    if let Some(m) = self.rules.get_mut(&slot) {
                        m.remove(rule_id);
                        if m.is_empty() {
                            self.rules.remove(&slot);
                        }
                    }
                }
            }
        }
    }

    /// Start over from a full listing; record what changes on the switch.
    pub fn reset(&mut self, listing: Vec<PolicyEvent>, out: &mut RuleChanges) {
        let before: BTreeSet<String> = self.installed_rules().map(|r| r.RuleId.clone()).collect();
        *self = PolicyBook::default();
        let mut fresh = RuleChanges::default();
        for e in listing {
            self.apply(e, &mut fresh);
        }
        for id in before {
            if !fresh.add.contains_key(&id) {
                out.remove(id);
            }
        }
        for r in fresh.add.into_values() {
            out.add(r);
        }
    }
}

impl Driver {
    /// Apply a batch of policy events (`full`: they are a complete listing) as one change per
    /// agent.
    pub async fn apply_policy(&self, events: Vec<PolicyEvent>, full: bool) -> Result<()> {
        let mut changes = RuleChanges::default();
        self.with_state(|s| {
            if full {
                s.policy.reset(events, &mut changes);
            } else {
                for e in events {
                    s.policy.apply(e, &mut changes);
                }
            }
        });
        if changes.is_empty() {
            return Ok(());
        }
        let mut add = Vec::with_capacity(changes.add.len());
        for r in changes.add.values() {
            match agent_rule(r) {
                Ok(rule) => add.push(Arc::new(rule)),
                Err(e) => tracing::warn!(error = %e, "skipping a policy rule"),
            }
        }
        let remove: Vec<String> = changes.remove.into_iter().collect();
        for kind in [BridgeKind::Vxlan, BridgeKind::Vlan] {
            self.agent(kind)
                .set_rules(add.clone(), remove.clone())
                .await
                .map_err(|e| PluginError::agent(kind, e))?;
        }
        // One line per batch (a 10,000-rule policy is one line), naming a few rules so an
        // operator can match it with `netctl trace` and the REST log.
        let named: Vec<&str> = add
            .iter()
            .map(|r| r.rule_id.as_str())
            .chain(remove.iter().map(String::as_str))
            .take(3)
            .collect();
        tracing::info!(added = add.len(), removed = remove.len(), rules = ?named, "policy rules applied to both bridges");
        Ok(())
    }

    /// Install (or replace) a rule on both bridges.
    pub async fn apply_rule(&self, rule: &OfnetPolicyRule) -> Result<()> {
        let rule = agent_rule(rule)?;
        for kind in [BridgeKind::Vxlan, BridgeKind::Vlan] {
            let agent = self.agent(kind);
            match agent.add_rule(rule.clone()).await {
                Ok(()) => {}
                Err(AgentError::RuleExists(_)) => {
                    agent
                        .remove_rule(rule.rule_id.clone())
                        .await
                        .map_err(|e| PluginError::agent(kind, e))?;
                    agent
                        .add_rule(rule.clone())
                        .await
                        .map_err(|e| PluginError::agent(kind, e))?;
                }
                Err(e) => return Err(PluginError::agent(kind, e)),
            }
        }
        Ok(())
    }

    /// Remove a rule from both bridges.
    pub async fn remove_rule(&self, id: &str) -> Result<()> {
        for kind in [BridgeKind::Vxlan, BridgeKind::Vlan] {
            match self.agent(kind).remove_rule(id.to_string()).await {
                Ok(()) | Err(AgentError::NoRule(_)) => {}
                Err(e) => return Err(PluginError::agent(kind, e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_rule(id: &str) -> PolicyEvent {
        let rule = OfnetPolicyRule {
            RuleId: id.into(),
            Action: "allow".into(),
            ..Default::default()
        };
        PolicyEvent::Put {
            key: CfgPolicyRule::key_for(id),
            value: serde_json::to_vec(&CfgPolicyRule {
                id: id.into(),
                rule,
            })
            .unwrap(),
        }
    }

    fn ids(c: &RuleChanges) -> (Vec<&str>, Vec<&str>) {
        (
            c.add.keys().map(String::as_str).collect(),
            c.remove.iter().map(String::as_str).collect(),
        )
    }

    #[test]
    fn rules_count_only_while_their_attachment_exists() {
        let att = "t:g:t:p";
        let r1 = "t:g:t:p:t:p:1:inRx";
        let r2 = "t:g:t:p:t:p:2:inRx";
        let mut book = PolicyBook::default();
        let mut c = RuleChanges::default();
        // Compiled rules first: nothing to install yet.
        book.apply(put_rule(r1), &mut c);
        book.apply(put_rule(r2), &mut c);
        assert!(c.is_empty());
        // The attachment brings them all, in one change.
        let attach = PolicyEvent::Put {
            key: EpgPolicy::key_for(att),
            value: b"{}".to_vec(),
        };
        book.apply(attach.clone(), &mut c);
        assert_eq!(ids(&c), (vec![r1, r2], vec![]));
        // A rule deleted from the middle leaves; a new one comes.
        let mut c = RuleChanges::default();
        book.apply(
            PolicyEvent::Delete {
                key: CfgPolicyRule::key_for(r1),
            },
            &mut c,
        );
        book.apply(put_rule("t:g:t:p:t:p:3:inRx"), &mut c);
        assert_eq!(ids(&c), (vec!["t:g:t:p:t:p:3:inRx"], vec![r1]));
        // Detach: the attachment goes first and takes every rule with it.
        let mut c = RuleChanges::default();
        book.apply(
            PolicyEvent::Delete {
                key: EpgPolicy::key_for(att),
            },
            &mut c,
        );
        assert_eq!(ids(&c), (vec![], vec![r2, "t:g:t:p:t:p:3:inRx"]));
        let mut c = RuleChanges::default();
        book.apply(
            PolicyEvent::Delete {
                key: CfgPolicyRule::key_for(r2),
            },
            &mut c,
        );
        assert!(c.is_empty());
        // A fresh listing removes what is gone and (re)installs what is there.
        let mut c = RuleChanges::default();
        book.apply(attach.clone(), &mut c);
        let mut c = RuleChanges::default();
        book.reset(vec![attach, put_rule(r1)], &mut c);
        assert_eq!(ids(&c), (vec![r1], vec!["t:g:t:p:t:p:3:inRx"]));
    }

    #[test]
    fn compiled_rules_map_to_agent_rules() {
        let r = OfnetPolicyRule {
            RuleId: "p-1-in".into(),
            Priority: 12,
            DstEndpointGroup: 3,
            IpProtocol: 6,
            DstPort: 8000,
            Action: "deny".into(),
            ..Default::default()
        };
        let a = agent_rule(&r).unwrap();
        assert_eq!(
            (a.priority, a.dst_endpoint_group, a.dst_port, a.action),
            (12, 3, 8000, RuleAction::Deny)
        );
        let bad = OfnetPolicyRule {
            Action: "drop".into(),
            ..r
        };
        let err = agent_rule(&bad).unwrap_err().to_string();
        assert!(err.contains("Action") && err.contains("p-1-in"), "{err}");
    }
}
