//! `appProfile` (key `tenantName:appProfileName`): a set of EPGs of one tenant. Outside ACI mode it only
//! maintains links (an EPG in an app profile cannot be deleted). A group may be in several app
//! profiles (as in Contiv); its one `AppProfile` link names one of them, and moves to another
//! profile listing the group when that one drops it.

use serde::{Deserialize, Serialize};

use super::link::{self, Link, LinkSet};
use super::{
    EndpointGroup, Object, Tenant, list_with_prefix, load_required, modify, modify_if_present,
    validate,
};
use crate::error::Result;
use crate::store::Tx;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct AppProfileLinkSets {
    #[serde(rename = "EndpointGroups", skip_serializing_if = "LinkSet::is_empty")]
    pub endpoint_groups: LinkSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct AppProfileLinks {
    #[serde(rename = "Tenant", skip_serializing_if = "Link::is_empty")]
    pub tenant: Link,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct AppProfile {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(rename = "appProfileName", skip_serializing_if = "String::is_empty")]
    pub app_profile_name: String,
    #[serde(rename = "tenantName", skip_serializing_if = "String::is_empty")]
    pub tenant_name: String,
    #[serde(rename = "endpointGroups", skip_serializing_if = "Vec::is_empty")]
    pub endpoint_groups: Vec<String>,
    #[serde(rename = "link-sets")]
    pub link_sets: AppProfileLinkSets,
    pub links: AppProfileLinks,
}

async fn link_groups(tx: &mut Tx<'_>, ap: &mut AppProfile) -> Result<()> {
    ap.link_sets.endpoint_groups.clear();
    for g in ap.endpoint_groups.clone() {
        let gk = format!("{}:{g}", ap.tenant_name);
        load_required::<EndpointGroup>(tx, &gk).await?;
        link::add(&mut ap.link_sets.endpoint_groups, EndpointGroup::TYPE, &gk);
        let key = ap.key.clone();
        modify::<EndpointGroup>(tx, &gk, |e| {
            if e.links.app_profile.is_empty() {
                e.links.app_profile = Link::to(AppProfile::TYPE, &key);
            }
        })
        .await?;
    }
    Ok(())
}

/// Drop `ap`'s claim on its groups: a group linked to `ap` is linked to another app profile of
/// the tenant that lists it, or to none.
async fn unlink_groups(tx: &mut Tx<'_>, ap: &AppProfile) -> Result<()> {
    if ap.endpoint_groups.is_empty() {
        return Ok(());
    }
    let others: Vec<AppProfile> =
        list_with_prefix::<AppProfile>(tx, &format!("{}:", ap.tenant_name))
            .await?
            .into_iter()
            .filter(|o| o.key != ap.key)
            .collect();
    for g in &ap.endpoint_groups {
        let gk = format!("{}:{g}", ap.tenant_name);
        let next = others
            .iter()
            .find(|o| o.endpoint_groups.contains(g))
            .map(|o| Link::to(AppProfile::TYPE, &o.key))
            .unwrap_or_default();
        modify_if_present::<EndpointGroup>(tx, &gk, |e| {
            if e.links.app_profile.key == ap.key {
                e.links.app_profile = next;
            }
        })
        .await?;
    }
    Ok(())
}

impl Object for AppProfile {
    const TYPE: &'static str = "appProfile";
    const PLURAL: &'static str = "appProfiles";

    fn derived_key(&self) -> String {
        format!("{}:{}", self.tenant_name, self.app_profile_name)
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn validate(&self) -> Result<()> {
        validate::name("appProfileName", &self.app_profile_name, 64)?;
        validate::name("tenantName", &self.tenant_name, 64)?;
        for g in &self.endpoint_groups {
            validate::name("endpointGroups", g, 64)?;
        }
        Ok(())
    }
    fn keep_links(&mut self, stored: &Self) {
        self.link_sets = stored.link_sets.clone();
        self.links = stored.links.clone();
    }

    async fn create(tx: &mut Tx<'_>, obj: &mut Self) -> Result<()> {
        load_required::<Tenant>(tx, &obj.tenant_name).await?;
        link_groups(tx, obj).await?;
        obj.links.tenant = Link::to(Tenant::TYPE, &obj.tenant_name);
        load_required::<Tenant>(tx, &obj.tenant_name)
            .await
            .map(|_| ())
    }

    async fn update(tx: &mut Tx<'_>, old: &Self, new: &mut Self) -> Result<()> {
        unlink_groups(tx, old).await?;
        link_groups(tx, new).await
    }

    async fn delete(tx: &mut Tx<'_>, obj: &Self) -> Result<()> {
        unlink_groups(tx, obj).await?;
        Ok(())
    }
}
