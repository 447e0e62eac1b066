//! `extContractsGroup` (key `tenantName:contractsGroupName`): named ACI contracts an EPG provides or
//! consumes. Immutable; cannot be deleted while an EPG refers to it.

use serde::{Deserialize, Serialize};

use super::link::LinkSet;
use super::{EndpointGroup, Object, list_with_prefix, validate};
use crate::error::{Error, Result};
use crate::store::Tx;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ExtContractsGroupLinkSets {
    #[serde(rename = "EndpointGroups", skip_serializing_if = "LinkSet::is_empty")]
    pub endpoint_groups: LinkSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ExtContractsGroup {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(
        rename = "contractsGroupName",
        skip_serializing_if = "String::is_empty"
    )]
    pub contracts_group_name: String,
    #[serde(rename = "tenantName", skip_serializing_if = "String::is_empty")]
    pub tenant_name: String,
    #[serde(rename = "contractsType", skip_serializing_if = "String::is_empty")]
    pub contracts_type: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contracts: Vec<String>,
    #[serde(rename = "link-sets")]
    pub link_sets: ExtContractsGroupLinkSets,
}

impl Object for ExtContractsGroup {
    const TYPE: &'static str = "extContractsGroup";
    const PLURAL: &'static str = "extContractsGroups";

    fn derived_key(&self) -> String {
        format!("{}:{}", self.tenant_name, self.contracts_group_name)
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn validate(&self) -> Result<()> {
        validate::name("contractsGroupName", &self.contracts_group_name, 64)?;
        validate::name("tenantName", &self.tenant_name, 64)?;
        validate::one_of(
            "contractsType",
            &self.contracts_type,
            &["provided", "consumed"],
        )?;
        if self.contracts.is_empty() {
            return Err(Error::invalid(
                "contracts",
                "at least one contract is required",
            ));
        }
        Ok(())
    }
    fn keep_links(&mut self, stored: &Self) {
        self.link_sets = stored.link_sets.clone();
    }

    async fn create(_tx: &mut Tx<'_>, _obj: &mut Self) -> Result<()> {
        Ok(())
    }

    async fn update(_tx: &mut Tx<'_>, old: &Self, _new: &mut Self) -> Result<()> {
        Err(Error::conflict(format!(
            "cannot update external contracts group {} after it is created",
            old.key
        )))
    }

    async fn delete(tx: &mut Tx<'_>, obj: &Self) -> Result<()> {
        let users: Vec<String> =
            list_with_prefix::<EndpointGroup>(tx, &format!("{}:", obj.tenant_name))
                .await?
                .into_iter()
                .filter(|g| g.ext_contracts_grps.contains(&obj.contracts_group_name))
                .map(|g| g.group_name)
                .collect();
        if !users.is_empty() {
            return Err(Error::conflict(format!(
                "external contracts group {} is used by endpoint groups {}",
                obj.key,
                users.join(", ")
            )));
        }
        Ok(())
    }
}
