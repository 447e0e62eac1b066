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

/// A contiv rule attached to an EPG and the ofnet rules compiled from it.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RuleMap {
    pub Rule: Rule,
    pub OfnetRules: BTreeMap<String, OfnetPolicyRule>,
}

/// The attachment of one policy to one EPG.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct EpgPolicy {
    pub id: String,
    pub EpgPolicyKey: String,
    pub EndpointGroupID: u32,
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
}
