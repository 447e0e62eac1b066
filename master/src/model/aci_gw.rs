//! `aciGw` (key `name`, always `aciGw`): settings for the ACI gateway. Stored and validated only; no
//! ACI gateway is driven by this implementation.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{AppProfile, Object, list_with_prefix, validate};
use crate::error::{Error, Result};
use crate::store::Tx;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct AciGw {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(rename = "enforcePolicies", skip_serializing_if = "String::is_empty")]
    pub enforce_policies: String,
    #[serde(
        rename = "includeCommonTenant",
        skip_serializing_if = "String::is_empty"
    )]
    pub include_common_tenant: String,
    #[serde(rename = "nodeBindings", skip_serializing_if = "String::is_empty")]
    pub node_bindings: String,
    #[serde(rename = "pathBindings", skip_serializing_if = "String::is_empty")]
    pub path_bindings: String,
    #[serde(rename = "physicalDomain", skip_serializing_if = "String::is_empty")]
    pub physical_domain: String,
}

/// `topology/pod-N/node-N` (N up to 4 digits).
fn node_binding(b: &str) -> bool {
    let Some(rest) = b.strip_prefix("topology/pod-") else {
        return false;
    };
    let Some((pod, node)) = rest.split_once("/node-") else {
        return false;
    };
    let num = |s: &str| !s.is_empty() && s.len() <= 4 && s.chars().all(|c| c.is_ascii_digit());
    num(pod) && num(node)
}

/// `topology/pod-N/paths-N/pathep-[ethN/N]`.
fn path_binding(b: &str) -> bool {
    let Some(rest) = b.strip_prefix("topology/pod-") else {
        return false;
    };
    let Some((_, rest)) = rest.split_once("/paths-") else {
        return false;
    };
    let Some((_, ep)) = rest.split_once("/pathep-[eth") else {
        return false;
    };
    ep.ends_with(']') && ep.contains('/')
}

impl Object for AciGw {
    const TYPE: &'static str = "aciGw";
    const PLURAL: &'static str = "aciGws";

    fn derived_key(&self) -> String {
        self.name.clone()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn validate(&self) -> Result<()> {
        validate::one_of("name", &self.name, &["aciGw"])?;
        validate::one_of("enforcePolicies", &self.enforce_policies, &["yes", "no"])?;
        validate::one_of(
            "includeCommonTenant",
            &self.include_common_tenant,
            &["yes", "no"],
        )?;
        if !self.node_bindings.is_empty() && !self.node_bindings.split(',').all(node_binding) {
            return Err(Error::invalid(
                "nodeBindings",
                "must be a comma list of topology/pod-N/node-N",
            ));
        }
        if !self.path_bindings.is_empty() && !self.path_bindings.split(',').all(path_binding) {
            return Err(Error::invalid(
                "pathBindings",
                "must be a comma list of topology/pod-N/paths-N/pathep-[ethN/N]",
            ));
        }
        validate::optional_name("physicalDomain", &self.physical_domain, 128)
    }
    fn keep_links(&mut self, _stored: &Self) {}

    async fn create(_tx: &mut Tx<'_>, _obj: &mut Self) -> Result<()> {
        Ok(())
    }
    async fn update(_tx: &mut Tx<'_>, _old: &Self, _new: &mut Self) -> Result<()> {
        Ok(())
    }
    /// Refused while app profiles exist (as Contiv does): they are what the gateway serves.
    async fn delete(tx: &mut Tx<'_>, _obj: &Self) -> Result<()> {
        let profiles = list_with_prefix::<AppProfile>(tx, "").await?.len();
        if profiles > 0 {
            return Err(Error::conflict(format!(
                "the ACI gateway settings cannot be deleted while {profiles} app profile(s) \
                 exist; delete the app profiles first"
            )));
        }
        Ok(())
    }
    async fn oper(tx: &mut Tx<'_>, _obj: &Self) -> Result<Value> {
        Ok(json!({ "numAppProfiles": list_with_prefix::<AppProfile>(tx, "").await?.len() }))
    }
}
