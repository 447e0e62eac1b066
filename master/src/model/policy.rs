//! `policy` (key `tenantName:policyName`): a named list of rules that EPGs attach to. A policy cannot be
//! deleted while an EPG uses it; deleting it deletes its rules.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::link::{Link, LinkSet};
use super::{EndpointGroup, Object, Rule, Tenant, list_with_prefix, load_required, validate};
use crate::error::{Error, Result};
use crate::store::Tx;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct PolicyLinkSets {
    #[serde(rename = "EndpointGroups", skip_serializing_if = "LinkSet::is_empty")]
    pub endpoint_groups: LinkSet,
    #[serde(rename = "Rules", skip_serializing_if = "LinkSet::is_empty")]
    pub rules: LinkSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct PolicyLinks {
    #[serde(rename = "Tenant", skip_serializing_if = "Link::is_empty")]
    pub tenant: Link,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Policy {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(rename = "policyName", skip_serializing_if = "String::is_empty")]
    pub policy_name: String,
    #[serde(rename = "tenantName", skip_serializing_if = "String::is_empty")]
    pub tenant_name: String,
    #[serde(rename = "link-sets")]
    pub link_sets: PolicyLinkSets,
    pub links: PolicyLinks,
}

async fn users(tx: &mut Tx<'_>, obj: &Policy) -> Result<Vec<EndpointGroup>> {
    Ok(
        list_with_prefix::<EndpointGroup>(tx, &format!("{}:", obj.tenant_name))
            .await?
            .into_iter()
            .filter(|g| g.policies.contains(&obj.policy_name))
            .collect(),
    )
}

impl Object for Policy {
    const TYPE: &'static str = "policy";
    const PLURAL: &'static str = "policys";

    fn derived_key(&self) -> String {
        format!("{}:{}", self.tenant_name, self.policy_name)
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn validate(&self) -> Result<()> {
        validate::name("policyName", &self.policy_name, 64)?;
        validate::name("tenantName", &self.tenant_name, 64)
    }
    fn keep_links(&mut self, stored: &Self) {
        self.link_sets = stored.link_sets.clone();
        self.links = stored.links.clone();
    }

    async fn derive_links(tx: &mut Tx<'_>, objs: &mut [Self]) -> Result<()> {
        super::derived::policies(tx, objs).await
    }
    fn strip_derived(&mut self) {
        super::derived::strip_policy(self);
    }

    async fn create(tx: &mut Tx<'_>, obj: &mut Self) -> Result<()> {
        load_required::<Tenant>(tx, &obj.tenant_name).await?;
        obj.links.tenant = Link::to(Tenant::TYPE, &obj.tenant_name);
        load_required::<Tenant>(tx, &obj.tenant_name)
            .await
            .map(|_| ())
    }

    async fn update(_tx: &mut Tx<'_>, _old: &Self, _new: &mut Self) -> Result<()> {
        // Only links can differ (the names make the key), so there is nothing to change.
        Ok(())
    }

    async fn delete(tx: &mut Tx<'_>, obj: &Self) -> Result<()> {
        let users = users(tx, obj).await?;
        if !users.is_empty() {
            let names: Vec<String> = users.into_iter().map(|g| g.group_name).collect();
            return Err(Error::conflict(format!(
                "policy {} is being used by endpoint groups {}",
                obj.key,
                names.join(", ")
            )));
        }
        // A policy's rules go with it, after it when there are more than a transaction holds
        // (derived deletes: no group uses the policy, so no compiled rule refers to them; one
        // left by an outage is deleted by the repair, which drops rules of missing policies).
        for rule in list_with_prefix::<Rule>(tx, &format!("{}:", obj.key)).await? {
            tx.delete_derived(&Rule::store_key(&rule.key));
        }
        Ok(())
    }

    async fn oper(tx: &mut Tx<'_>, obj: &Self) -> Result<Value> {
        let mut endpoints = Vec::new();
        for g in users(tx, obj).await? {
            let eps = crate::model::endpoint_group::endpoints_of_group(tx, &g).await?;
            endpoints.extend(eps.iter().map(crate::endpoint::endpoint_oper));
        }
        Ok(
            json!({ "numEndpoints": endpoints.len(), "policyViolations": 0, "endpoints": endpoints }),
        )
    }
}
