//! Policy rules (reference §4.1: the `state/policyRule` watch): netmaster compiles each policy
//! rule into directional ofnet rules (`CfgPolicyRule`); netplugin installs every one on both
//! agents (an endpoint group may have members on either bridge).
//!
//! Contract: applying a rule is idempotent; a rule whose fields changed is replaced; removing
//! an unknown rule succeeds.

use master::state::OfnetPolicyRule;
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

impl Driver {
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
