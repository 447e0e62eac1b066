//! Policy state: `EpgPolicy` (`/contiv.io/state/policy/<tenant>:<group>:<tenant>:<policy>`) and the
//! compiled `CfgPolicyRule`s (`/contiv.io/state/policyRule/<RuleId>`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::rule::Rule;
use crate::store::keys;

/// One directional rule as ofnet agents install it (reference §5.8). Go field names, no renames.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct OfnetPolicyRule {
    pub RuleId: String,
    pub Priority: u32,
    pub SrcEndpointGroup: u32,
    pub DstEndpointGroup: u32,
    pub SrcIpAddr: String,
    pub DstIpAddr: String,
    pub IpProtocol: u8,
    pub SrcPort: u16,
    pub DstPort: u16,
    pub TcpFlags: String,
    pub Action: String,
}

/// `CfgPolicyRule`: an [`OfnetPolicyRule`] flattened next to `id`. Contiv left `id` empty; we set it to
/// the rule id so the record names itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CfgPolicyRule {
    pub id: String,
    #[serde(flatten)]
    pub rule: OfnetPolicyRule,
}

impl CfgPolicyRule {
    pub const KIND: &'static str = "CfgPolicyRule";

    pub fn key_for(rule_id: &str) -> String {
        keys::state(keys::category::POLICY_RULE, rule_id)
    }
}

/// A contiv rule attached to an EPG and the ofnet rules compiled from it: the previous layout,
/// where the `EpgPolicy` record embedded every one of them. Only read, to convert such records
/// when netmaster becomes leader (`policy::repair`).
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RuleMap {
    #[serde(default)]
    pub Rule: Rule,
    #[serde(default)]
    pub OfnetRules: BTreeMap<String, OfnetPolicyRule>,
}

/// The attachment of one policy to one EPG: one small record whatever the policy's size. Its
/// compiled rules are the `CfgPolicyRule` records whose id starts with `<id>:`
/// ([`EpgPolicy::rules_prefix`]); agents install a compiled rule only while its attachment exists.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct EpgPolicy {
    pub id: String,
    pub EpgPolicyKey: String,
    pub EndpointGroupID: u32,
    /// Previous layout only (every rule and compiled rule in this one value); never written now.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub RuleMaps: BTreeMap<String, RuleMap>,
}

impl EpgPolicy {
    pub const KIND: &'static str = "EpgPolicy";

    /// `<tenant>:<group>:<tenant>:<policy>` (EPG key then policy key).
    pub fn id_for(epg_key: &str, policy_key: &str) -> String {
        format!("{epg_key}:{policy_key}")
    }

    pub fn key_for(id: &str) -> String {
        keys::state(keys::category::POLICY, id)
    }

    /// The store prefix of the compiled rules of attachment `id`.
    pub fn rules_prefix(id: &str) -> String {
        CfgPolicyRule::key_for(&format!("{id}:"))
    }

    /// The store prefix of the compiled rules of `rule_key` (`tenant:policy:ruleId`) in
    /// attachment `id`.
    pub fn rule_prefix(id: &str, rule_key: &str) -> String {
        CfgPolicyRule::key_for(&format!("{id}:{rule_key}:"))
    }

    /// The attachment id a compiled rule id belongs to: rule ids are
    /// `<tenant>:<group>:<tenant>:<policy>:<tenant>:<policy>:<ruleId>:<dir>`; names never contain
    /// `:`, so the attachment is the first four fields.
    pub fn id_of_rule(rule_id: &str) -> Option<&str> {
        let mut end = 0;
        for (n, (i, _)) in rule_id.match_indices(':').enumerate() {
            if n == 3 {
                end = i;
                break;
            }
        }
        (end > 0).then(|| &rule_id[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_ids_name_their_attachment() {
        assert_eq!(EpgPolicy::id_of_rule("t:g:t:p:t:p:1:inRx"), Some("t:g:t:p"));
        assert_eq!(EpgPolicy::id_of_rule("t:g:t"), None);
        assert!(EpgPolicy::rule_prefix("t:g:t:p", "t:p:1").ends_with("/t:g:t:p:t:p:1:"));
    }
}
