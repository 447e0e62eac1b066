//! Keeps `EpgPolicy` (`/contiv.io/state/policy/`) and `CfgPolicyRule` (`/contiv.io/state/policyRule/`)
//! in step with the model: a policy attached to an EPG compiles all its rules; a rule added to or
//! removed from a policy is compiled into, or removed from, every EPG that uses the policy.
//!
//! The `CfgPolicyRule` records are written as derived writes ([`Tx::put_derived`]): the `EpgPolicy`
//! record lists every compiled rule, so a policy of any size commits (etcd's 128-operation limit only
//! bounds the guarded part), and [`super::repair`] can rebuild them from the `EpgPolicy` records.

use super::{Resolved, compile};
use crate::error::{Error, Result};
use crate::model::{EndpointGroup, Network, Rule, list_with_prefix, load};
use crate::resources::ipv4::SubnetSpec;
use crate::resources::ipv6::Ipv6Subnet;
use crate::state::policy::RuleMap;
use crate::state::{CfgPolicyRule, EndpointGroupState, EpgPolicy};
use crate::store::Tx;

/// Resolve the EPG id and subnet a rule refers to.
pub async fn resolve(tx: &mut Tx<'_>, epg_id: u32, rule: &Rule) -> Result<Resolved> {
    let (group, network) = if rule.direction == "in" {
        (&rule.from_endpoint_group, &rule.from_network)
    } else {
        (&rule.to_endpoint_group, &rule.to_network)
    };
    let mut r = Resolved {
        epg_id,
        ..Default::default()
    };
    if !group.is_empty() {
        let id = EndpointGroupState::id_for(&rule.tenant_name, group);
        let state = tx
            .get::<EndpointGroupState>(&EndpointGroupState::key_for(&id), EndpointGroupState::KIND)
            .await?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "endpoint group {group} not found in tenant {}",
                    rule.tenant_name
                ))
            })?;
        r.remote_epg_id = state.endpoint_group_id;
    }
    if !network.is_empty() {
        let net = load::<Network>(tx, &format!("{}:{network}", rule.tenant_name))
            .await?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "network {network} not found in tenant {}",
                    rule.tenant_name
                ))
            })?;
        let s = SubnetSpec::parse("subnet", &net.subnet)?;
        r.remote_subnet = Some(format!("{}/{}", s.network, s.len));
        if !net.ipv6_subnet.is_empty() {
            let s6 = Ipv6Subnet::parse("ipv6Subnet", &net.ipv6_subnet)?;
            r.remote_subnet6 = Some(format!("{}/{}", s6.network, s6.len));
        }
    }
    Ok(r)
}

fn delete_compiled(tx: &mut Tx<'_>, map: &RuleMap) {
    for rule_id in map.OfnetRules.keys() {
        tx.delete_derived(&CfgPolicyRule::key_for(rule_id));
    }
}

/// Compile `rule` into `ep` (replacing a previous compilation) and write its `CfgPolicyRule`s.
async fn write_rule(tx: &mut Tx<'_>, ep: &mut EpgPolicy, rule: &Rule) -> Result<()> {
    if let Some(old) = ep.RuleMaps.remove(&rule.key) {
        delete_compiled(tx, &old);
    }
    let resolved = resolve(tx, ep.EndpointGroupID, rule).await?;
    let compiled = compile(&ep.EpgPolicyKey, rule, &resolved)?;
    let mut map = RuleMap {
        Rule: rule.clone(),
        OfnetRules: Default::default(),
    };
    for r in compiled {
        tx.put_derived(
            &CfgPolicyRule::key_for(&r.RuleId),
            CfgPolicyRule::KIND,
            &CfgPolicyRule {
                id: r.RuleId.clone(),
                rule: r.clone(),
            },
        )?;
        map.OfnetRules.insert(r.RuleId.clone(), r);
    }
    ep.RuleMaps.insert(rule.key.clone(), map);
    Ok(())
}

/// Attach policy `policy_key` (`tenant:policy`) to the EPG `epg_key` (`tenant:group`) with id `epg_id`.
pub async fn attach(tx: &mut Tx<'_>, epg_key: &str, epg_id: u32, policy_key: &str) -> Result<()> {
    let id = EpgPolicy::id_for(epg_key, policy_key);
    let mut ep = EpgPolicy {
        id: id.clone(),
        EpgPolicyKey: id,
        EndpointGroupID: epg_id,
        RuleMaps: Default::default(),
    };
    for rule in list_with_prefix::<Rule>(tx, &format!("{policy_key}:")).await? {
        write_rule(tx, &mut ep, &rule).await?;
    }
    tx.put(&EpgPolicy::key_for(&ep.id), EpgPolicy::KIND, &ep)?;
    Ok(())
}

/// Detach a policy from an EPG, deleting its compiled rules.
pub async fn detach(tx: &mut Tx<'_>, epg_key: &str, policy_key: &str) -> Result<()> {
    let key = EpgPolicy::key_for(&EpgPolicy::id_for(epg_key, policy_key));
    if let Some(ep) = tx.get::<EpgPolicy>(&key, EpgPolicy::KIND).await? {
        for map in ep.RuleMaps.values() {
            delete_compiled(tx, map);
        }
        tx.delete(&key);
    }
    Ok(())
}

/// The EPGs (model keys) that list the rule's policy.
async fn users(tx: &mut Tx<'_>, tenant: &str, policy: &str) -> Result<Vec<String>> {
    Ok(list_with_prefix::<EndpointGroup>(tx, &format!("{tenant}:"))
        .await?
        .into_iter()
        .filter(|g| g.policies.iter().any(|p| p == policy))
        .map(|g| g.key)
        .collect())
}

/// A rule was added to its policy: compile it into every EPG using the policy.
pub async fn rule_added(tx: &mut Tx<'_>, rule: &Rule) -> Result<()> {
    let policy_key = format!("{}:{}", rule.tenant_name, rule.policy_name);
    for epg_key in users(tx, &rule.tenant_name, &rule.policy_name).await? {
        let key = EpgPolicy::key_for(&EpgPolicy::id_for(&epg_key, &policy_key));
        if let Some(mut ep) = tx.get::<EpgPolicy>(&key, EpgPolicy::KIND).await? {
            write_rule(tx, &mut ep, rule).await?;
            tx.put(&key, EpgPolicy::KIND, &ep)?;
        }
    }
    Ok(())
}

/// A rule was removed from its policy: remove it from every EPG using the policy.
pub async fn rule_removed(tx: &mut Tx<'_>, rule: &Rule) -> Result<()> {
    let policy_key = format!("{}:{}", rule.tenant_name, rule.policy_name);
    for epg_key in users(tx, &rule.tenant_name, &rule.policy_name).await? {
        let key = EpgPolicy::key_for(&EpgPolicy::id_for(&epg_key, &policy_key));
        if let Some(mut ep) = tx.get::<EpgPolicy>(&key, EpgPolicy::KIND).await? {
            if let Some(map) = ep.RuleMaps.remove(&rule.key) {
                delete_compiled(tx, &map);
            }
            tx.put(&key, EpgPolicy::KIND, &ep)?;
        }
    }
    Ok(())
}
