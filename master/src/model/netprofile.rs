//! `netprofile` (key `tenantName:profileName`): bandwidth, DSCP and burst that EPGs copy into their
//! state. Updating a profile rewrites every EPG that uses it; a profile in use cannot be deleted.

use serde::{Deserialize, Serialize};

use super::endpoint_group::{load_state, save_state};
use super::link::{Link, LinkSet};
use super::network::is_zero;
use super::{EndpointGroup, Object, Tenant, list_with_prefix, load_required, validate};
use crate::error::{Error, Result};
use crate::store::Tx;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct NetprofileLinkSets {
    #[serde(rename = "EndpointGroups", skip_serializing_if = "LinkSet::is_empty")]
    pub endpoint_groups: LinkSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct NetprofileLinks {
    #[serde(rename = "Tenant", skip_serializing_if = "Link::is_empty")]
    pub tenant: Link,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Netprofile {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(rename = "profileName", skip_serializing_if = "String::is_empty")]
    pub profile_name: String,
    #[serde(rename = "tenantName", skip_serializing_if = "String::is_empty")]
    pub tenant_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bandwidth: String,
    #[serde(rename = "DSCP", skip_serializing_if = "is_zero")]
    pub dscp: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub burst: i64,
    #[serde(rename = "link-sets")]
    pub link_sets: NetprofileLinkSets,
    pub links: NetprofileLinks,
}

/// Bandwidth text: digits, an optional space, and a unit (`kbps`/`Mbps`/..., `k`/`M`/`G`, `kb`/`Mb`/`gb`...).
pub fn validate_bandwidth(value: &str) -> Result<()> {
    if value.is_empty() {
        return Ok(());
    }
    validate::max_len("bandwidth", value, 64)?;
    let bad = || {
        Error::invalid(
            "bandwidth",
            format!(
                "{value:?} must be a number with a unit like \"10 kbps\", \"100mbps\", \"6Mbps\" or \"18Mb\""
            ),
        )
    };
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() || digits.starts_with('0') {
        return Err(bad());
    }
    let unit = value[digits.len()..]
        .strip_prefix(' ')
        .unwrap_or(&value[digits.len()..]);
    const UNITS: [&str; 20] = [
        "kbps", "mbps", "gbps", "Kbps", "Mbps", "Gbps", "k", "m", "g", "K", "M", "G", "kb", "Kb",
        "Gb", "gb", "Mb", "mb", "KB", "MB",
    ];
    if UNITS[..18].contains(&unit) {
        Ok(())
    } else {
        Err(bad())
    }
}

/// Bandwidth in kbit/s as OVS ingress policing takes it: digits × 1024^(k=1, m=2, g=3) / 1000.
pub fn bandwidth_kbps(value: &str) -> Option<u64> {
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    let n: u64 = digits.parse().ok()?;
    let unit = value[digits.len()..]
        .trim_start()
        .chars()
        .next()?
        .to_ascii_lowercase();
    let scale = match unit {
        'k' => 1024,
        'm' => 1024 * 1024,
        'g' => 1024 * 1024 * 1024,
        _ => return None,
    };
    Some(n * scale / 1000)
}

impl Object for Netprofile {
    const TYPE: &'static str = "netprofile";
    const PLURAL: &'static str = "netprofiles";

    fn derived_key(&self) -> String {
        format!("{}:{}", self.tenant_name, self.profile_name)
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn validate(&self) -> Result<()> {
        validate::name("profileName", &self.profile_name, 64)?;
        validate::name("tenantName", &self.tenant_name, 64)?;
        validate_bandwidth(&self.bandwidth)?;
        validate::range("DSCP", self.dscp, 0, 63)?;
        validate::range("burst", self.burst, 0, 10486)?;
        if self.burst == 1 {
            return Err(Error::invalid(
                "burst",
                "Invalid Burst size: must be 0 (unset) or at least 2",
            ));
        }
        Ok(())
    }
    fn keep_links(&mut self, stored: &Self) {
        self.link_sets = stored.link_sets.clone();
        self.links = stored.links.clone();
    }

    async fn create(tx: &mut Tx<'_>, obj: &mut Self) -> Result<()> {
        load_required::<Tenant>(tx, &obj.tenant_name).await?;
        obj.links.tenant = Link::to(Tenant::TYPE, &obj.tenant_name);
        load_required::<Tenant>(tx, &obj.tenant_name)
            .await
            .map(|_| ())
    }

    async fn update(tx: &mut Tx<'_>, _old: &Self, new: &mut Self) -> Result<()> {
        for g in list_with_prefix::<EndpointGroup>(tx, &format!("{}:", new.tenant_name)).await? {
            if g.net_profile != new.profile_name {
                continue;
            }
            let mut state = load_state(tx, &g.tenant_name, &g.group_name).await?;
            state.dscp = u32::try_from(new.dscp).unwrap_or(0);
            state.bandwidth = new.bandwidth.clone();
            state.burst = u32::try_from(new.burst).unwrap_or(0);
            save_state(tx, &state)?;
        }
        Ok(())
    }

    async fn delete(tx: &mut Tx<'_>, obj: &Self) -> Result<()> {
        let users: Vec<String> =
            list_with_prefix::<EndpointGroup>(tx, &format!("{}:", obj.tenant_name))
                .await?
                .into_iter()
                .filter(|g| g.net_profile == obj.profile_name)
                .map(|g| g.group_name)
                .collect();
        if !users.is_empty() {
            return Err(Error::conflict(format!(
                "NetProfile {} is being used by {}",
                obj.key,
                users.join(", ")
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_forms() {
        for ok in ["10 kbps", "100mbps", "6Mbps", "18Mb", "5G", "1 k", ""] {
            assert!(validate_bandwidth(ok).is_ok(), "{ok}");
        }
        for bad in ["0kbps", "10", "10 tbps", "kbps", "10  kbps"] {
            assert!(validate_bandwidth(bad).is_err(), "{bad}");
        }
        assert_eq!(bandwidth_kbps("6Mbps"), Some(6291));
        assert_eq!(bandwidth_kbps("10 kbps"), Some(10));
    }
}
