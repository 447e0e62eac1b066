//! Keeps `EpgPolicy` (`/contiv.io/state/policy/`) and `CfgPolicyRule` (`/contiv.io/state/policyRule/`)
//! in step with the model: a policy attached to an EPG compiles all its rules; a rule added to or
//! removed from a policy is compiled into, or removed from, every EPG that uses the policy.
//!
//! Stored layout: one small `EpgPolicy` record per attachment (names the EPG, the policy and the EPG
//! id) and one `CfgPolicyRule` per compiled rule, keyed `<attachment id>:<rule key>:<direction>` so
//! the rules of an attachment, or of one rule in it, are a key prefix. The compiled rules are
//! derived writes ([`Tx::put_derived`]): a policy of any size commits (etcd's 128-operation limit
//! only bounds the guarded part), they are written before the `EpgPolicy` that makes them count and
//! deleted after it, and [`super::repair`] rebuilds them from the model.

use super::{Resolved, compile};
use crate::error::{Error, Result};
use crate::model::{EndpointGroup, Network, Rule, list_with_prefix, load};
use crate::resources::ipv4::SubnetSpec;
use crate::resources::ipv6::Ipv6Subnet;
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

/// Write the compiled rules of a new `rule` in attachment `id` (EPG id `epg_id`). Rules cannot
/// change once created, so there is no earlier compilation to replace (leftovers of a cut-short
/// write are the repair's).
async fn write_rule(tx: &mut Tx<'_>, id: &str, epg_id: u32, rule: &Rule) -> Result<()> {
    let resolved = resolve(tx, epg_id, rule).await?;
    for r in compile(id, rule, &resolved)? {
        tx.put_derived(
            &CfgPolicyRule::key_for(&r.RuleId),
            CfgPolicyRule::KIND,
            &CfgPolicyRule {
                id: r.RuleId.clone(),
                rule: r,
            },
        )?;
    }
    Ok(())
}

/// Attach policy `policy_key` (`tenant:policy`) to the EPG `epg_key` (`tenant:group`) with id `epg_id`:
/// every rule's compiled records, then the small `EpgPolicy` record that makes them count (the
/// transaction writes the compiled records that do not fit it first; see `store::txn`).
pub async fn attach(tx: &mut Tx<'_>, epg_key: &str, epg_id: u32, policy_key: &str) -> Result<()> {
    let id = EpgPolicy::id_for(epg_key, policy_key);
    let rules = list_with_prefix::<Rule>(tx, &format!("{policy_key}:")).await?;
    let mut wanted = std::collections::BTreeSet::new();
    for rule in &rules {
        let resolved = resolve(tx, epg_id, rule).await?;
        for r in compile(&id, rule, &resolved)? {
            let key = CfgPolicyRule::key_for(&r.RuleId);
            tx.put_derived(
                &key,
                CfgPolicyRule::KIND,
                &CfgPolicyRule {
                    id: r.RuleId.clone(),
                    rule: r,
                },
            )?;
            wanted.insert(key);
        }
    }
    // Leftovers of an earlier attachment cut short (normally none).
    for (key, _) in tx.list_derived(&EpgPolicy::rules_prefix(&id)).await? {
        if !wanted.contains(&key) {
            tx.delete_derived(&key);
        }
    }
    let ep = EpgPolicy {
        id: id.clone(),
        EpgPolicyKey: id,
        EndpointGroupID: epg_id,
        RuleMaps: Default::default(),
    };
    tx.put(&EpgPolicy::key_for(&ep.id), EpgPolicy::KIND, &ep)?;
    Ok(())
}

/// Detach a policy from an EPG: the `EpgPolicy` record goes first, then its compiled rules.
pub async fn detach(tx: &mut Tx<'_>, epg_key: &str, policy_key: &str) -> Result<()> {
    let id = EpgPolicy::id_for(epg_key, policy_key);
    let key = EpgPolicy::key_for(&id);
    if tx.get_raw(&key).await?.is_some() {
        for (rule_key, _) in tx.list_derived(&EpgPolicy::rules_prefix(&id)).await? {
            tx.delete_derived(&rule_key);
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

/// A rule was added to its policy: compile it into every EPG using the policy. Writes only the
/// rule's own compiled records (O(1) whatever the policy's size); the `EpgPolicy` records are read,
/// not rewritten, so concurrent creates of different rules do not conflict.
pub async fn rule_added(tx: &mut Tx<'_>, rule: &Rule) -> Result<()> {
    let policy_key = format!("{}:{}", rule.tenant_name, rule.policy_name);
    for epg_key in users(tx, &rule.tenant_name, &rule.policy_name).await? {
        let id = EpgPolicy::id_for(&epg_key, &policy_key);
        if let Some(ep) = tx
            .get::<EpgPolicy>(&EpgPolicy::key_for(&id), EpgPolicy::KIND)
            .await?
        {
            write_rule(tx, &id, ep.EndpointGroupID, rule).await?;
        }
    }
    Ok(())
}

/// A rule was removed from its policy: remove its compiled records from every EPG using the policy.
pub async fn rule_removed(tx: &mut Tx<'_>, rule: &Rule) -> Result<()> {
    let policy_key = format!("{}:{}", rule.tenant_name, rule.policy_name);
    for epg_key in users(tx, &rule.tenant_name, &rule.policy_name).await? {
        let id = EpgPolicy::id_for(&epg_key, &policy_key);
        for (key, _) in tx
            .list_derived(&EpgPolicy::rule_prefix(&id, &rule.key))
            .await?
        {
            tx.delete_derived(&key);
        }
    }
    Ok(())
}
