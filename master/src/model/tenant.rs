//! `tenant` (key `tenantName`). Tenants have no config state of their own; they group networks, EPGs,
//! policies, netprofiles, app profiles and services, and cannot be deleted while any remain.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::link::LinkSet;
use super::{
    EndpointGroup, Netprofile, Network, Object, Policy, ServiceLb, list_with_prefix, validate,
};
use crate::error::{Error, Result};
use crate::model::app_profile::AppProfile;
use crate::state::CfgEndpointState;
use crate::store::{Tx, keys};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct TenantLinkSets {
    #[serde(rename = "AppProfiles", skip_serializing_if = "LinkSet::is_empty")]
    pub app_profiles: LinkSet,
    #[serde(rename = "EndpointGroups", skip_serializing_if = "LinkSet::is_empty")]
    pub endpoint_groups: LinkSet,
    #[serde(rename = "NetProfiles", skip_serializing_if = "LinkSet::is_empty")]
    pub net_profiles: LinkSet,
    #[serde(rename = "Networks", skip_serializing_if = "LinkSet::is_empty")]
    pub networks: LinkSet,
    #[serde(rename = "Policies", skip_serializing_if = "LinkSet::is_empty")]
    pub policies: LinkSet,
    #[serde(rename = "Servicelbs", skip_serializing_if = "LinkSet::is_empty")]
    pub servicelbs: LinkSet,
    #[serde(rename = "VolumeProfiles", skip_serializing_if = "LinkSet::is_empty")]
    pub volume_profiles: LinkSet,
    #[serde(rename = "Volumes", skip_serializing_if = "LinkSet::is_empty")]
    pub volumes: LinkSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Tenant {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(rename = "tenantName", skip_serializing_if = "String::is_empty")]
    pub tenant_name: String,
    #[serde(rename = "defaultNetwork", skip_serializing_if = "String::is_empty")]
    pub default_network: String,
    #[serde(rename = "link-sets")]
    pub link_sets: TenantLinkSets,
}

impl Tenant {
    pub fn named(name: &str) -> Self {
        Tenant {
            key: name.to_string(),
            tenant_name: name.to_string(),
            ..Default::default()
        }
    }
}

/// Counts of the objects that keep a tenant alive, read from the store (not from the link sets, so a
/// concurrent create is caught by the listing guard).
async fn members(tx: &mut Tx<'_>, tenant: &str) -> Result<[(&'static str, usize); 6]> {
    let p = format!("{tenant}:");
    Ok([
        ("networks", list_with_prefix::<Network>(tx, &p).await?.len()),
        (
            "endpoint groups",
            list_with_prefix::<EndpointGroup>(tx, &p).await?.len(),
        ),
        ("policies", list_with_prefix::<Policy>(tx, &p).await?.len()),
        (
            "netprofiles",
            list_with_prefix::<Netprofile>(tx, &p).await?.len(),
        ),
        (
            "app profiles",
            list_with_prefix::<AppProfile>(tx, &p).await?.len(),
        ),
        (
            "services",
            list_with_prefix::<ServiceLb>(tx, &p).await?.len(),
        ),
    ])
}

impl Object for Tenant {
    const TYPE: &'static str = "tenant";
    const PLURAL: &'static str = "tenants";

    fn derived_key(&self) -> String {
        self.tenant_name.clone()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn validate(&self) -> Result<()> {
        validate::name("tenantName", &self.tenant_name, 64)?;
        validate::optional_name("defaultNetwork", &self.default_network, 64)
    }
    fn keep_links(&mut self, stored: &Self) {
        self.link_sets = stored.link_sets.clone();
    }

    async fn derive_links(tx: &mut Tx<'_>, objs: &mut [Self]) -> Result<()> {
        super::derived::tenants(tx, objs).await
    }
    fn strip_derived(&mut self) {
        super::derived::strip_tenant(self);
    }

    async fn create(_tx: &mut Tx<'_>, _obj: &mut Self) -> Result<()> {
        Ok(())
    }

    async fn update(_tx: &mut Tx<'_>, old: &Self, _new: &mut Self) -> Result<()> {
        Err(Error::conflict(format!(
            "cannot change tenant {} after it is created",
            old.tenant_name
        )))
    }

    async fn delete(tx: &mut Tx<'_>, obj: &Self) -> Result<()> {
        for (what, n) in members(tx, &obj.tenant_name).await? {
            if n > 0 {
                return Err(Error::conflict(format!(
                    "cannot delete tenant {}: it has {n} {what}",
                    obj.tenant_name
                )));
            }
        }
        tx.delete(&super::network::prefix_lengths_key(&obj.tenant_name));
        Ok(())
    }

    async fn oper(tx: &mut Tx<'_>, obj: &Self) -> Result<Value> {
        let m = members(tx, &obj.tenant_name).await?;
        let suffix = format!(".{}", obj.tenant_name);
        let eps = tx
            .list::<CfgEndpointState>(
                &keys::state_prefix(keys::category::EPS),
                CfgEndpointState::KIND,
            )
            .await?;
        let total_eps = eps.iter().filter(|e| e.net_id.ends_with(&suffix)).count();
        let scope = format!("{}:", obj.tenant_name);
        let mut networks = Vec::new();
        for n in list_with_prefix::<Network>(tx, &scope).await? {
            let mut oper = Network::oper(tx, &n).await?;
            oper["networkName"] = json!(n.network_name);
            networks.push(oper);
        }
        let mut groups = Vec::new();
        for g in list_with_prefix::<EndpointGroup>(tx, &scope).await? {
            let mut oper = EndpointGroup::oper(tx, &g).await?;
            oper["groupName"] = json!(g.group_name);
            groups.push(oper);
        }
        Ok(json!({
            "networks": networks,
            "endpointGroups": groups,
            "totalNetworks": m[0].1,
            "totalEPGs": m[1].1,
            "totalPolicies": m[2].1,
            "totalNetprofiles": m[3].1,
            "totalAppProfiles": m[4].1,
            "totalServicelbs": m[5].1,
            "totalEndpoints": total_eps,
        }))
    }
}
