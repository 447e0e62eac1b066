//! Makes the compiled policy rules (`/contiv.io/state/policyRule/`) match the model: for every
//! attachment (`EpgPolicy`, `/contiv.io/state/policy/`) the rules of its policy, compiled. Run on
//! each leader start (reference §2.1 re-adds all EPG policy rules there), and whenever a write left
//! derived records behind (see `store::txn`): a compiled rule that is missing or differs is written;
//! one whose attachment does not exist (an attach cut short before its `EpgPolicy` was written, a
//! detach cut short after) or whose rule is gone is deleted.
//!
//! Rule objects whose policy is gone (a policy delete whose rules did not all fit its transaction,
//! cut short) are deleted.
//!
//! Upgrade: an `EpgPolicy` of the previous layout (every rule and compiled rule embedded in
//! `RuleMaps`) is rewritten as the small record; its compiled rules are recompiled from the model.
//!
//! The whole repair is one transaction through [`Db::write`]: it takes the local writer lock and its
//! guarded part checks that the attachments, rules, group ids and networks did not change since
//! they were listed (four prefix guards, whatever the cluster's size); the rewrites are derived
//! writes, so any number of them is split into limit-sized transactions. If an `EpgPolicy` record
//! cannot be decoded, nothing is deleted (its rules cannot be told from orphans).

use std::collections::{BTreeMap, BTreeSet};

use super::{Resolved, compile};
use crate::error::Result;
use crate::model::{Network, Object, Policy, Rule, list_with_prefix};
use crate::resources::ipv4::SubnetSpec;
use crate::state::{CfgPolicyRule, EndpointGroupState, EpgPolicy};
use crate::store::keys::{self, category};
use crate::store::txn::{Db, decode};

/// What a repair changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repair {
    /// Compiled rules written (missing or different from what the model compiles to).
    pub written: usize,
    /// Compiled rules deleted (no attachment or no rule for them).
    pub deleted: usize,
    /// `EpgPolicy` records that could not be decoded (deletions were skipped).
    pub corrupt: usize,
    /// `EpgPolicy` records of the previous layout rewritten as small records.
    pub converted: usize,
    /// Rules that could not be compiled (a group or network they name is gone); left out.
    pub uncompiled: usize,
    /// Rule objects of a deleted policy (a policy delete cut short), deleted.
    pub orphan_rules: usize,
}

/// The (EPG key, policy key) of an attachment id `<tenant>:<group>:<tenant>:<policy>`.
fn split_id(id: &str) -> Option<(&str, &str)> {
    let fields: Vec<&str> = id.split(':').collect();
    (fields.len() == 4).then(|| {
        let cut = fields[0].len() + 1 + fields[1].len();
        (&id[..cut], &id[cut + 1..])
    })
}

/// Make `state/policyRule` match the attachments and the rules of their policies.
pub async fn reconcile(db: &Db) -> Result<Repair> {
    let repair = db
        .write(async |tx| {
            let mut repair = Repair::default();
            let mut attachments: Vec<EpgPolicy> = Vec::new();
            for (key, bytes) in tx.list_raw(&keys::state_prefix(category::POLICY)).await? {
                match decode::<EpgPolicy>(&key, EpgPolicy::KIND, &bytes) {
                    Ok(mut ep) => {
                        if !ep.RuleMaps.is_empty() {
                            ep.RuleMaps.clear();
                            tx.put(&key, EpgPolicy::KIND, &ep)?;
                            repair.converted += 1;
                        }
                        attachments.push(ep);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "policy repair: skipping an undecodable EpgPolicy");
                        repair.corrupt += 1;
                    }
                }
            }
            let policies: BTreeSet<String> = list_with_prefix::<Policy>(tx, "")
                .await?
                .into_iter()
                .map(|p| p.key)
                .collect();
            let mut rules: BTreeMap<String, Vec<Rule>> = BTreeMap::new();
            for rule in list_with_prefix::<Rule>(tx, "").await? {
                let policy_key = format!("{}:{}", rule.tenant_name, rule.policy_name);
                if !policies.contains(&policy_key) {
                    // Left by a policy delete cut short.
                    tx.delete_derived(&Rule::store_key(&rule.key));
                    repair.orphan_rules += 1;
                    continue;
                }
                rules
                    .entry(format!("{}:{}", rule.tenant_name, rule.policy_name))
                    .or_default()
                    .push(rule);
            }
            let mut group_ids: BTreeMap<String, u32> = BTreeMap::new();
            for (key, bytes) in tx.list_raw(&keys::state_prefix(category::EPGS)).await? {
                if let Ok(g) = decode::<EndpointGroupState>(&key, EndpointGroupState::KIND, &bytes) {
                    let id = key.rsplit('/').next().unwrap_or_default().to_string();
                    group_ids.insert(id, g.endpoint_group_id);
                }
            }
            let mut subnets: BTreeMap<String, String> = BTreeMap::new();
            for net in tx
                .list::<Network>(&keys::model_prefix(Network::TYPE), Network::TYPE)
                .await?
            {
                if let Ok(s) = SubnetSpec::parse("subnet", &net.subnet) {
                    subnets.insert(net.key.clone(), format!("{}/{}", s.network, s.len));
                }
            }
            let mut wanted: BTreeMap<String, CfgPolicyRule> = BTreeMap::new();
            for ep in &attachments {
                let Some((_, policy_key)) = split_id(&ep.id) else {
                    continue;
                };
                for rule in rules.get(policy_key).map(Vec::as_slice).unwrap_or_default() {
                    let (group, network) = if rule.direction == "in" {
                        (&rule.from_endpoint_group, &rule.from_network)
                    } else {
                        (&rule.to_endpoint_group, &rule.to_network)
                    };
                    let mut r = Resolved {
                        epg_id: ep.EndpointGroupID,
                        ..Default::default()
                    };
                    let mut ok = true;
                    if !group.is_empty() {
                        match group_ids.get(&EndpointGroupState::id_for(&rule.tenant_name, group)) {
                            Some(id) => r.remote_epg_id = *id,
                            None => ok = false,
                        }
                    }
                    if !network.is_empty() {
                        match subnets.get(&format!("{}:{network}", rule.tenant_name)) {
                            Some(s) => r.remote_subnet = Some(s.clone()),
                            None => ok = false,
                        }
                    }
                    match compile(&ep.id, rule, &r) {
                        Ok(compiled) if ok => {
                            for c in compiled {
                                wanted.insert(
                                    CfgPolicyRule::key_for(&c.RuleId),
                                    CfgPolicyRule {
                                        id: c.RuleId.clone(),
                                        rule: c,
                                    },
                                );
                            }
                        }
                        _ => {
                            tracing::warn!(rule = %rule.key, attachment = %ep.id, "policy repair: rule cannot be compiled");
                            repair.uncompiled += 1;
                        }
                    }
                }
            }
            let stored = tx
                .list_derived(&keys::state_prefix(category::POLICY_RULE))
                .await?;
            let attached: BTreeSet<&str> = attachments.iter().map(|e| e.id.as_str()).collect();
            for (key, _) in &stored {
                if wanted.contains_key(key) || repair.corrupt > 0 {
                    continue;
                }
                // A rule left out because it cannot be compiled keeps what it had.
                let id = key.rsplit('/').next().unwrap_or_default();
                let kept = repair.uncompiled > 0
                    && EpgPolicy::id_of_rule(id).is_some_and(|a| attached.contains(a));
                if !kept {
                    tx.delete_derived(key);
                    repair.deleted += 1;
                }
            }
            let stored: BTreeMap<String, Vec<u8>> = stored.into_iter().collect();
            for (key, rule) in &wanted {
                let same = stored.get(key).is_some_and(|bytes| {
                    decode::<CfgPolicyRule>(key, CfgPolicyRule::KIND, bytes)
                        .is_ok_and(|have| have == *rule)
                });
                if !same {
                    tx.put_derived(key, CfgPolicyRule::KIND, rule)?;
                    repair.written += 1;
                }
            }
            Ok::<_, crate::error::Error>(repair)
        })
        .await?;
    if repair != Repair::default() {
        tracing::info!(
            written = repair.written,
            deleted = repair.deleted,
            corrupt = repair.corrupt,
            converted = repair.converted,
            uncompiled = repair.uncompiled,
            orphan_rules = repair.orphan_rules,
            "compiled policy rules repaired"
        );
    }
    Ok(repair)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_ids_split_into_group_and_policy() {
        assert_eq!(split_id("t:g:t:p"), Some(("t:g", "t:p")));
        assert_eq!(split_id("t:g:t"), None);
    }
}
