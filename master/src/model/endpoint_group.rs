//! `endpointGroup` (key `tenantName:groupName`). Creating an EPG takes a persisted EPG id, reserves its
//! optional IP pool in the network's map, copies the network's tags and the netprofile's QoS into
//! `EndpointGroupState`, and attaches its policies. Network and pool are immutable; policies,
//! netprofile and external contracts can change.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::link::{self, Link, LinkSet};
use super::network::{self as network_model, endpoints_of};
use super::{
    ExtContractsGroup, Netprofile, Network, Object, Policy, ReadAhead, Tenant, load, load_required,
    modify, modify_if_present, validate,
};
use crate::endpoint::endpoint_oper;
use crate::error::{Error, Result};
use crate::model::global;
use crate::policy::attach;
use crate::resources::epg_id::EpgIdPool;
use crate::resources::ipv4::{format_ip_list, parse_pool};
use crate::state::addr_map::{self, AddrMap};
use crate::state::{CfgEndpointState, CfgNetworkState, EndpointGroupState};
use crate::store::{Tx, keys};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct EndpointGroupLinkSets {
    #[serde(rename = "ExtContractsGrps", skip_serializing_if = "LinkSet::is_empty")]
    pub ext_contracts_grps: LinkSet,
    #[serde(rename = "MatchRules", skip_serializing_if = "LinkSet::is_empty")]
    pub match_rules: LinkSet,
    #[serde(rename = "Policies", skip_serializing_if = "LinkSet::is_empty")]
    pub policies: LinkSet,
    #[serde(rename = "Services", skip_serializing_if = "LinkSet::is_empty")]
    pub services: LinkSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct EndpointGroupLinks {
    #[serde(rename = "AppProfile", skip_serializing_if = "Link::is_empty")]
    pub app_profile: Link,
    #[serde(rename = "NetProfile", skip_serializing_if = "Link::is_empty")]
    pub net_profile: Link,
    #[serde(rename = "Network", skip_serializing_if = "Link::is_empty")]
    pub network: Link,
    #[serde(rename = "Tenant", skip_serializing_if = "Link::is_empty")]
    pub tenant: Link,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct EndpointGroup {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(rename = "groupName", skip_serializing_if = "String::is_empty")]
    pub group_name: String,
    #[serde(rename = "tenantName", skip_serializing_if = "String::is_empty")]
    pub tenant_name: String,
    #[serde(rename = "networkName", skip_serializing_if = "String::is_empty")]
    pub network_name: String,
    #[serde(rename = "ipPool", skip_serializing_if = "String::is_empty")]
    pub ip_pool: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<String>,
    #[serde(rename = "extContractsGrps", skip_serializing_if = "Vec::is_empty")]
    pub ext_contracts_grps: Vec<String>,
    #[serde(rename = "netProfile", skip_serializing_if = "String::is_empty")]
    pub net_profile: String,
    #[serde(rename = "cfgdTag", skip_serializing_if = "String::is_empty")]
    pub cfgd_tag: String,
    #[serde(rename = "link-sets")]
    pub link_sets: EndpointGroupLinkSets,
    pub links: EndpointGroupLinks,
}

impl EndpointGroup {
    pub fn state_id(&self) -> String {
        EndpointGroupState::id_for(&self.tenant_name, &self.group_name)
    }
    fn network_key(&self) -> String {
        format!("{}:{}", self.tenant_name, self.network_name)
    }
    fn scoped(&self, name: &str) -> String {
        format!("{}:{name}", self.tenant_name)
    }
    fn group_tag(&self) -> String {
        if self.cfgd_tag.is_empty() {
            format!("{}.{}", self.group_name, self.tenant_name)
        } else {
            self.cfgd_tag.clone()
        }
    }
}

fn epg_ids_key() -> String {
    keys::state(keys::category::EPG_IDS, "global")
}

/// An EPG's state; `NotFound` when missing.
pub async fn load_state(tx: &mut Tx<'_>, tenant: &str, group: &str) -> Result<EndpointGroupState> {
    let id = EndpointGroupState::id_for(tenant, group);
    tx.get::<EndpointGroupState>(&EndpointGroupState::key_for(&id), EndpointGroupState::KIND)
        .await?
        .ok_or_else(|| {
            Error::not_found(format!(
                "endpoint group {group} not found in tenant {tenant}"
            ))
        })
}

pub fn save_state(tx: &mut Tx<'_>, state: &EndpointGroupState) -> Result<()> {
    Ok(tx.put(
        &EndpointGroupState::key_for(&state.id),
        EndpointGroupState::KIND,
        state,
    )?)
}

/// The endpoints that belong to an EPG.
pub async fn endpoints_of_group(
    tx: &mut Tx<'_>,
    g: &EndpointGroup,
) -> Result<Vec<CfgEndpointState>> {
    let net_id = crate::state::CfgNetworkState::id_for(&g.tenant_name, &g.network_name);
    let group_key = g.state_id();
    Ok(endpoints_of(tx, &net_id)
        .await?
        .into_iter()
        .filter(|e| e.endpoint_group_key == group_key)
        .collect())
}

async fn apply_netprofile(
    tx: &mut Tx<'_>,
    g: &mut EndpointGroup,
    state: &mut EndpointGroupState,
) -> Result<()> {
    if g.net_profile.is_empty() {
        state.dscp = 0;
        state.bandwidth.clear();
        state.burst = 0;
        g.links.net_profile = Link::default();
        return Ok(());
    }
    let np_key = g.scoped(&g.net_profile);
    let np = load_required::<Netprofile>(tx, &np_key).await?;
    state.dscp = u32::try_from(np.dscp).unwrap_or(0);
    state.bandwidth = np.bandwidth.clone();
    state.burst = u32::try_from(np.burst).unwrap_or(0);
    g.links.net_profile = Link::to(Netprofile::TYPE, &np_key);
    let key = g.key.clone();
    modify::<Netprofile>(tx, &np_key, |n| {
        link::add(&mut n.link_sets.endpoint_groups, EndpointGroup::TYPE, &key)
    })
    .await
}

async fn unlink_netprofile(tx: &mut Tx<'_>, g: &EndpointGroup) -> Result<()> {
    if g.net_profile.is_empty() {
        return Ok(());
    }
    let key = g.key.clone();
    modify_if_present::<Netprofile>(tx, &g.scoped(&g.net_profile), |n| {
        link::remove(&mut n.link_sets.endpoint_groups, &key)
    })
    .await
}

async fn link_contracts(tx: &mut Tx<'_>, g: &mut EndpointGroup) -> Result<()> {
    g.link_sets.ext_contracts_grps.clear();
    for name in g.ext_contracts_grps.clone() {
        let ck = g.scoped(&name);
        load_required::<ExtContractsGroup>(tx, &ck).await?;
        link::add(
            &mut g.link_sets.ext_contracts_grps,
            ExtContractsGroup::TYPE,
            &ck,
        );
        let key = g.key.clone();
        modify::<ExtContractsGroup>(tx, &ck, |c| {
            link::add(&mut c.link_sets.endpoint_groups, EndpointGroup::TYPE, &key)
        })
        .await?;
    }
    Ok(())
}

async fn unlink_contracts(tx: &mut Tx<'_>, g: &EndpointGroup) -> Result<()> {
    for name in &g.ext_contracts_grps {
        let key = g.key.clone();
        modify_if_present::<ExtContractsGroup>(tx, &g.scoped(name), |c| {
            link::remove(&mut c.link_sets.endpoint_groups, &key)
        })
        .await?;
    }
    Ok(())
}

async fn add_policy(
    tx: &mut Tx<'_>,
    g: &mut EndpointGroup,
    epg_id: u32,
    policy: &str,
) -> Result<()> {
    let pk = g.scoped(policy);
    if load::<Policy>(tx, &pk).await?.is_none() {
        return Err(Error::not_found(format!(
            "Policy {policy} not found in tenant {}",
            g.tenant_name
        )));
    }
    attach::attach(tx, &g.key, epg_id, &pk).await?;
    link::add(&mut g.link_sets.policies, Policy::TYPE, &pk);
    load_required::<Policy>(tx, &pk).await.map(|_| ())
}

async fn remove_policy(tx: &mut Tx<'_>, g: &mut EndpointGroup, policy: &str) -> Result<()> {
    let pk = g.scoped(policy);
    attach::detach(tx, &g.key, &pk).await?;
    link::remove(&mut g.link_sets.policies, &pk);
    Ok(())
}

fn unique(field: &str, names: &[String]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for n in names {
        validate::name(field, n, 64)?;
        if !seen.insert(n) {
            return Err(Error::invalid(field, format!("{n:?} is listed twice")));
        }
    }
    Ok(())
}

impl Object for EndpointGroup {
    const TYPE: &'static str = "endpointGroup";
    const PLURAL: &'static str = "endpointGroups";

    fn derived_key(&self) -> String {
        format!("{}:{}", self.tenant_name, self.group_name)
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn validate(&self) -> Result<()> {
        validate::name("groupName", &self.group_name, 64)?;
        validate::name("tenantName", &self.tenant_name, 64)?;
        validate::name("networkName", &self.network_name, 64)?;
        if !self.ip_pool.is_empty() {
            parse_pool("ipPool", &self.ip_pool)?;
        }
        unique("policies", &self.policies)?;
        unique("extContractsGrps", &self.ext_contracts_grps)?;
        validate::optional_name("netProfile", &self.net_profile, 64)?;
        validate::optional_name("cfgdTag", &self.cfgd_tag, 128)
    }
    fn keep_links(&mut self, stored: &Self) {
        self.link_sets = stored.link_sets.clone();
        self.links = stored.links.clone();
    }

    fn read_ahead(&self, key: &str) -> ReadAhead {
        let net = CfgNetworkState::id_for(&self.tenant_name, &self.network_name);
        ReadAhead::keys(vec![
            Tenant::store_key(&self.tenant_name),
            Network::store_key(&self.network_key()),
            Network::store_key(key),
            CfgNetworkState::key_for(&net),
            epg_ids_key(),
            super::Global::store_key("global"),
        ])
    }

    async fn create(tx: &mut Tx<'_>, obj: &mut Self) -> Result<()> {
        load_required::<Tenant>(tx, &obj.tenant_name).await?;
        load_required::<Network>(tx, &obj.network_key()).await?;
        if load::<Network>(tx, &obj.key).await?.is_some() {
            return Err(Error::conflict(format!(
                "a network named {} already exists",
                obj.key
            )));
        }
        let mut net = network_model::load_state(tx, &obj.tenant_name, &obj.network_name).await?;
        let subnet = net.subnet()?;

        // Reserve the pool in the network map; the EPG map marks everything outside the pool used.
        if !obj.ip_pool.is_empty() {
            let (a, b) = parse_pool("ipPool", &obj.ip_pool)?;
            let (ai, bi) = match (subnet.index_of(a), subnet.index_of(b)) {
                (Some(ai), Some(bi)) => (ai, bi),
                _ => {
                    return Err(Error::invalid(
                        "ipPool",
                        format!(
                            "{} is not inside subnet {}/{}",
                            obj.ip_pool, subnet.network, subnet.len
                        ),
                    ));
                }
            };
            let mut map = AddrMap::network(&mut net)?;
            if let Some(used) = map.first_used_in(tx, ai, bi).await? {
                return Err(Error::conflict(format!(
                    "ipPool {} overlaps allocated address {}",
                    obj.ip_pool,
                    subnet.ip_at(used)
                )));
            }
            for i in ai..=bi {
                map.put(tx, i, true).await?;
            }
            addr_map::save_network(tx, &mut map, &mut net).await?;
            network_model::save_state(tx, &net)?;
        }

        let mut ids = tx
            .get::<EpgIdPool>(&epg_ids_key(), "EpgIdPool")
            .await?
            .unwrap_or_default();
        let epg_id = ids.allocate()?;
        tx.put(&epg_ids_key(), "EpgIdPool", &ids)?;

        let mut state = EndpointGroupState {
            id: obj.state_id(),
            group_name: obj.group_name.clone(),
            tenant_name: obj.tenant_name.clone(),
            network_name: obj.network_name.clone(),
            endpoint_group_id: epg_id,
            pkt_tag_type: net.pkt_tag_type.clone(),
            pkt_tag: net.pkt_tag,
            ext_pkt_tag: net.ext_pkt_tag,
            ip_pool: obj.ip_pool.clone(),
            group_tag: obj.group_tag(),
            ..Default::default()
        };
        if let Some(map) = AddrMap::group(&mut state, &subnet)? {
            state.epg_ip_alloc_full = map.full().clone();
        }
        if global::current(tx).await?.is_some_and(|g| g.is_aci()) {
            // ACI fabrics tell EPGs apart by VLAN: each EPG gets its own from the VLAN pool.
            let mut pool = global::vlan_pool(tx).await?;
            state.pkt_tag = pool.allocate(0)?;
            state.pkt_tag_type = "vlan".into();
            state.ext_pkt_tag = 0;
            global::save_vlan_pool(tx, &pool)?;
        }
        apply_netprofile(tx, obj, &mut state).await?;
        save_state(tx, &state)?;
        link_contracts(tx, obj).await?;
        for p in obj.policies.clone() {
            add_policy(tx, obj, epg_id, &p).await?;
        }

        obj.links.network = Link::to(Network::TYPE, &obj.network_key());
        obj.links.tenant = Link::to(Tenant::TYPE, &obj.tenant_name);
        load_required::<Network>(tx, &obj.network_key())
            .await
            .map(|_| ())?;
        load_required::<Tenant>(tx, &obj.tenant_name)
            .await
            .map(|_| ())
    }

    async fn update(tx: &mut Tx<'_>, old: &Self, new: &mut Self) -> Result<()> {
        if new.network_name != old.network_name {
            return Err(Error::conflict(
                "Cannot change network association after epg is created.",
            ));
        }
        if new.ip_pool != old.ip_pool {
            return Err(Error::conflict(
                "Cannot change IP pool after epg is created.",
            ));
        }
        let mut state = load_state(tx, &old.tenant_name, &old.group_name).await?;
        let removed: Vec<String> = old
            .policies
            .iter()
            .filter(|p| !new.policies.contains(p))
            .cloned()
            .collect();
        let added: Vec<String> = new
            .policies
            .iter()
            .filter(|p| !old.policies.contains(p))
            .cloned()
            .collect();
        for p in &removed {
            remove_policy(tx, new, p).await?;
        }
        for p in &added {
            add_policy(tx, new, state.endpoint_group_id, p).await?;
        }
        if new.net_profile != old.net_profile {
            unlink_netprofile(tx, old).await?;
        }
        apply_netprofile(tx, new, &mut state).await?;
        if new.ext_contracts_grps != old.ext_contracts_grps {
            unlink_contracts(tx, old).await?;
            link_contracts(tx, new).await?;
        }
        state.group_tag = new.group_tag();
        save_state(tx, &state)
    }

    async fn delete(tx: &mut Tx<'_>, obj: &Self) -> Result<()> {
        if !obj.links.app_profile.is_empty() {
            return Err(Error::conflict(format!(
                "endpoint group {} is used by app profile {}",
                obj.key, obj.links.app_profile.key
            )));
        }
        let state = load_state(tx, &obj.tenant_name, &obj.group_name).await?;
        if state.ep_count != 0 {
            return Err(Error::conflict(format!(
                "Error: EPG {} has {} active endpoints",
                obj.group_name, state.ep_count
            )));
        }
        let mut g = obj.clone();
        for p in obj.policies.iter() {
            remove_policy(tx, &mut g, p).await?;
        }
        unlink_netprofile(tx, obj).await?;
        unlink_contracts(tx, obj).await?;

        if global::current(tx).await?.is_some_and(|g| g.is_aci()) {
            let mut pool = global::vlan_pool(tx).await?;
            pool.release(state.pkt_tag);
            global::save_vlan_pool(tx, &pool)?;
        }
        let mut ids = tx
            .get::<EpgIdPool>(&epg_ids_key(), "EpgIdPool")
            .await?
            .unwrap_or_default();
        ids.release(state.endpoint_group_id);
        tx.put(&epg_ids_key(), "EpgIdPool", &ids)?;

        if !state.ip_pool.is_empty() {
            let mut net =
                network_model::load_state(tx, &obj.tenant_name, &obj.network_name).await?;
            let subnet = net.subnet()?;
            let (a, b) = parse_pool("ipPool", &state.ip_pool)?;
            let mut map = AddrMap::network(&mut net)?;
            if let (Some(ai), Some(bi)) = (subnet.index_of(a), subnet.index_of(b)) {
                for i in ai..=bi {
                    map.put(tx, i, false).await?;
                }
            }
            addr_map::save_network(tx, &mut map, &mut net).await?;
            network_model::save_state(tx, &net)?;
            let mut state = state.clone();
            if let Some(mut pool) = AddrMap::group(&mut state, &subnet)? {
                pool.delete_all(tx).await?;
            }
        }
        tx.delete(&EndpointGroupState::key_for(&state.id));
        Ok(())
    }

    async fn oper(tx: &mut Tx<'_>, obj: &Self) -> Result<Value> {
        let state = load_state(tx, &obj.tenant_name, &obj.group_name).await?;
        let eps = endpoints_of_group(tx, obj).await?;
        let mut oper = json!({
            "pktTag": state.pkt_tag,
            "externalPktTag": state.ext_pkt_tag,
            "numEndpoints": state.ep_count,
            "groupTag": state.group_tag,
            "endpoints": eps.iter().map(endpoint_oper).collect::<Vec<_>>(),
        });
        if !state.ip_pool.is_empty() {
            let net = network_model::load_state(tx, &obj.tenant_name, &obj.network_name).await?;
            let subnet = net.subnet()?;
            let (a, b) = parse_pool("ipPool", &state.ip_pool)?;
            let (ai, bi) = (
                subnet.index_of(a).unwrap_or(0),
                subnet.index_of(b).unwrap_or(0),
            );
            let map = addr_map::group_used(tx, &state, &subnet).await?;
            let (used, free): (Vec<u64>, Vec<u64>) = (ai..=bi).partition(|&i| map.test(i));
            oper["allocatedIPAddresses"] =
                json!(format_ip_list(used.into_iter().map(|i| subnet.ip_at(i))));
            oper["availableIPAddresses"] =
                json!(format_ip_list(free.into_iter().map(|i| subnet.ip_at(i))));
        }
        Ok(oper)
    }
}
