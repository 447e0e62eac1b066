//! Link sets computed when an object is read, never stored: a tenant's networks, groups,
//! policies, netprofiles, app profiles and services; a network's groups and services; a policy's
//! rules and groups. Stored, each would grow with the cluster in one value (a tenant of 2,000
//! networks and 2,000 groups reached 235 KB, and every create rewrote it); computed, every create
//! writes only its own key, and clients still read `link-sets` as Contiv served them.
//!
//! Each function fills the sets of a batch of objects from one listing per kind (the listing is
//! narrowed to the tenant when the batch has one tenant), so listing N objects costs O(N + M).

use std::collections::BTreeMap;

use super::link::{self, LinkSet};
use super::{
    AppProfile, EndpointGroup, Netprofile, Network, Object, Policy, Rule, ServiceLb, Tenant,
    list_with_prefix,
};
use crate::error::Result;
use crate::store::Tx;

/// The key prefix that covers every tenant in `tenants` (`"t:"` for one tenant, `""` otherwise).
fn scope<'a>(mut tenants: impl Iterator<Item = &'a str>) -> String {
    match (tenants.next(), tenants.next()) {
        (Some(t), None) => format!("{t}:"),
        _ => String::new(),
    }
}

/// Group `objs` of type `K` by `owner(obj)` into link sets.
fn sets_by<K: Object>(objs: &[K], owner: impl Fn(&K) -> String) -> BTreeMap<String, LinkSet> {
    let mut out: BTreeMap<String, LinkSet> = BTreeMap::new();
    for o in objs {
        link::add(out.entry(owner(o)).or_default(), K::TYPE, o.key());
    }
    out
}

async fn by_tenant<K: Object>(
    tx: &mut Tx<'_>,
    prefix: &str,
    tenant_of: impl Fn(&K) -> &str,
) -> Result<BTreeMap<String, LinkSet>> {
    let objs = list_with_prefix::<K>(tx, prefix).await?;
    Ok(sets_by(&objs, |o| tenant_of(o).to_string()))
}

pub async fn tenants(tx: &mut Tx<'_>, objs: &mut [Tenant]) -> Result<()> {
    if objs.is_empty() {
        return Ok(());
    }
    let p = scope(objs.iter().map(|t| t.tenant_name.as_str()));
    let mut networks = by_tenant::<Network>(tx, &p, |o| &o.tenant_name).await?;
    let mut groups = by_tenant::<EndpointGroup>(tx, &p, |o| &o.tenant_name).await?;
    let mut policies = by_tenant::<Policy>(tx, &p, |o| &o.tenant_name).await?;
    let mut profiles = by_tenant::<Netprofile>(tx, &p, |o| &o.tenant_name).await?;
    let mut apps = by_tenant::<AppProfile>(tx, &p, |o| &o.tenant_name).await?;
    let mut services = by_tenant::<ServiceLb>(tx, &p, |o| &o.tenant_name).await?;
    for t in objs {
        let n = &t.tenant_name;
        let s = &mut t.link_sets;
        s.networks = networks.remove(n).unwrap_or_default();
        s.endpoint_groups = groups.remove(n).unwrap_or_default();
        s.policies = policies.remove(n).unwrap_or_default();
        s.net_profiles = profiles.remove(n).unwrap_or_default();
        s.app_profiles = apps.remove(n).unwrap_or_default();
        s.servicelbs = services.remove(n).unwrap_or_default();
    }
    Ok(())
}

pub fn strip_tenant(t: &mut Tenant) {
    let s = &mut t.link_sets;
    for set in [
        &mut s.networks,
        &mut s.endpoint_groups,
        &mut s.policies,
        &mut s.net_profiles,
        &mut s.app_profiles,
        &mut s.servicelbs,
    ] {
        set.clear();
    }
}

pub async fn networks(tx: &mut Tx<'_>, objs: &mut [Network]) -> Result<()> {
    if objs.is_empty() {
        return Ok(());
    }
    let p = scope(objs.iter().map(|n| n.tenant_name.as_str()));
    let groups = list_with_prefix::<EndpointGroup>(tx, &p).await?;
    let mut groups = sets_by(&groups, |g| format!("{}:{}", g.tenant_name, g.network_name));
    let services = list_with_prefix::<ServiceLb>(tx, &p).await?;
    let mut services = sets_by(&services, |s| {
        format!("{}:{}", s.tenant_name, s.network_name)
    });
    for n in objs {
        n.link_sets.endpoint_groups = groups.remove(&n.key).unwrap_or_default();
        n.link_sets.servicelbs = services.remove(&n.key).unwrap_or_default();
    }
    Ok(())
}

pub fn strip_network(n: &mut Network) {
    n.link_sets.endpoint_groups.clear();
    n.link_sets.servicelbs.clear();
}

pub async fn policies(tx: &mut Tx<'_>, objs: &mut [Policy]) -> Result<()> {
    let (rules_prefix, groups_prefix) = match &*objs {
        [] => return Ok(()),
        [one] => (format!("{}:", one.key), format!("{}:", one.tenant_name)),
        many => (
            String::new(),
            scope(many.iter().map(|p| p.tenant_name.as_str())),
        ),
    };
    let rules = list_with_prefix::<Rule>(tx, &rules_prefix).await?;
    let mut rules = sets_by(&rules, |r| format!("{}:{}", r.tenant_name, r.policy_name));
    let groups = list_with_prefix::<EndpointGroup>(tx, &groups_prefix).await?;
    let mut users: BTreeMap<String, LinkSet> = BTreeMap::new();
    for g in &groups {
        for p in &g.policies {
            link::add(
                users.entry(format!("{}:{p}", g.tenant_name)).or_default(),
                EndpointGroup::TYPE,
                &g.key,
            );
        }
    }
    for p in objs {
        p.link_sets.rules = rules.remove(&p.key).unwrap_or_default();
        p.link_sets.endpoint_groups = users.remove(&p.key).unwrap_or_default();
    }
    Ok(())
}

pub fn strip_policy(p: &mut Policy) {
    p.link_sets.rules.clear();
    p.link_sets.endpoint_groups.clear();
}
