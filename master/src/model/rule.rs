//! `rule` (key `tenantName:policyName:ruleId`). Rules are immutable; adding or deleting one
//! recompiles it into every EPG that uses its policy.

use serde::{Deserialize, Serialize};

use super::link::{self, Link, LinkSet};
use super::network::is_zero;
use super::{EndpointGroup, Network, Object, Policy, ReadAhead, load, load_required, validate};
use crate::error::{Error, Result};
use crate::policy::{attach, protocol_number};
use crate::store::Tx;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RuleLinkSets {
    #[serde(rename = "Policies", skip_serializing_if = "LinkSet::is_empty")]
    pub policies: LinkSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RuleLinks {
    #[serde(rename = "MatchEndpointGroup", skip_serializing_if = "Link::is_empty")]
    pub match_endpoint_group: Link,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Rule {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(rename = "ruleId", skip_serializing_if = "String::is_empty")]
    pub rule_id: String,
    #[serde(rename = "tenantName", skip_serializing_if = "String::is_empty")]
    pub tenant_name: String,
    #[serde(rename = "policyName", skip_serializing_if = "String::is_empty")]
    pub policy_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub direction: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub priority: i64,
    #[serde(rename = "fromEndpointGroup", skip_serializing_if = "String::is_empty")]
    pub from_endpoint_group: String,
    #[serde(rename = "toEndpointGroup", skip_serializing_if = "String::is_empty")]
    pub to_endpoint_group: String,
    #[serde(rename = "fromNetwork", skip_serializing_if = "String::is_empty")]
    pub from_network: String,
    #[serde(rename = "toNetwork", skip_serializing_if = "String::is_empty")]
    pub to_network: String,
    #[serde(rename = "fromIpAddress", skip_serializing_if = "String::is_empty")]
    pub from_ip_address: String,
    #[serde(rename = "toIpAddress", skip_serializing_if = "String::is_empty")]
    pub to_ip_address: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub port: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub action: String,
    #[serde(rename = "link-sets")]
    pub link_sets: RuleLinkSets,
    pub links: RuleLinks,
}

/// `IP`, `IP/len` or `IPv4-lastOctet[/len]` (IPv4 or IPv6), or empty.
fn ip_match(field: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Ok(());
    }
    let bad = || {
        Error::invalid(
            field,
            format!("{value:?} must be IPv4, IPv4/len, IPv4-octet, IPv6 or IPv6/len"),
        )
    };
    let (addr, len) = value
        .split_once('/')
        .map_or((value, None), |(a, l)| (a, Some(l)));
    let v6 = addr.contains(':');
    if let Some(l) = len {
        let l: u8 = l.parse().map_err(|_| bad())?;
        if l > if v6 { 128 } else { 32 } {
            return Err(bad());
        }
    }
    if v6 {
        addr.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
        return Ok(());
    }
    let (ip, last) = addr
        .split_once('-')
        .map_or((addr, None), |(a, o)| (a, Some(o)));
    ip.parse::<std::net::Ipv4Addr>().map_err(|_| bad())?;
    if let Some(o) = last {
        o.parse::<u8>().map_err(|_| bad())?;
    }
    Ok(())
}

/// An `in` rule may name `toIpAddress` only as the Kubernetes path uses it: the policy belongs to
/// exactly one EPG and the address is one of that EPG's endpoints.
async fn check_to_ip_on_in_rule(tx: &mut Tx<'_>, rule: &Rule) -> Result<()> {
    let users: Vec<EndpointGroup> =
        super::list_with_prefix::<EndpointGroup>(tx, &format!("{}:", rule.tenant_name))
            .await?
            .into_iter()
            .filter(|g| g.policies.contains(&rule.policy_name))
            .collect();
    let [group] = users.as_slice() else {
        return Err(Error::invalid(
            "toIpAddress",
            format!(
                "an in rule may set it only when policy {} is used by exactly one endpoint group ({} use it)",
                rule.policy_name,
                users.len()
            ),
        ));
    };
    let ip = rule.to_ip_address.split('/').next().unwrap_or_default();
    let eps = super::endpoint_group::endpoints_of_group(tx, group).await?;
    if !eps
        .iter()
        .any(|e| e.ip_address == ip || e.ipv6_address.split('/').next() == Some(ip))
    {
        return Err(Error::invalid(
            "toIpAddress",
            format!(
                "{ip} is not an endpoint of endpoint group {}",
                group.group_name
            ),
        ));
    }
    Ok(())
}

impl Object for Rule {
    const TYPE: &'static str = "rule";
    const PLURAL: &'static str = "rules";

    fn derived_key(&self) -> String {
        format!("{}:{}:{}", self.tenant_name, self.policy_name, self.rule_id)
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn normalize(&mut self) {
        if self.priority == 0 {
            self.priority = 1;
        }
    }
    fn validate(&self) -> Result<()> {
        validate::name("ruleId", &self.rule_id, 64)?;
        validate::name("tenantName", &self.tenant_name, 64)?;
        validate::name("policyName", &self.policy_name, 64)?;
        validate::one_of("direction", &self.direction, &["in", "out"])?;
        validate::range("priority", self.priority, 1, 100)?;
        validate::optional_name("fromEndpointGroup", &self.from_endpoint_group, 64)?;
        validate::optional_name("toEndpointGroup", &self.to_endpoint_group, 64)?;
        validate::optional_name("fromNetwork", &self.from_network, 64)?;
        validate::optional_name("toNetwork", &self.to_network, 64)?;
        ip_match("fromIpAddress", &self.from_ip_address)?;
        ip_match("toIpAddress", &self.to_ip_address)?;
        protocol_number(&self.protocol)?;
        validate::range("port", self.port, 0, 65535)?;
        validate::one_of("action", &self.action, &["allow", "deny"])?;
        if self.direction == "in" {
            if !self.to_endpoint_group.is_empty() || !self.to_network.is_empty() {
                return Err(Error::invalid(
                    "direction",
                    "an in rule cannot set toEndpointGroup or toNetwork",
                ));
            }
            if !self.from_network.is_empty()
                && (!self.from_ip_address.is_empty() || !self.from_endpoint_group.is_empty())
            {
                return Err(Error::invalid(
                    "fromNetwork",
                    "cannot be combined with fromIpAddress or fromEndpointGroup",
                ));
            }
        } else {
            if !self.from_endpoint_group.is_empty()
                || !self.from_network.is_empty()
                || !self.from_ip_address.is_empty()
            {
                return Err(Error::invalid(
                    "direction",
                    "an out rule cannot set fromEndpointGroup, fromNetwork or fromIpAddress",
                ));
            }
            if !self.to_network.is_empty()
                && (!self.to_ip_address.is_empty() || !self.to_endpoint_group.is_empty())
            {
                return Err(Error::invalid(
                    "toNetwork",
                    "cannot be combined with toIpAddress or toEndpointGroup",
                ));
            }
        }
        Ok(())
    }
    fn keep_links(&mut self, stored: &Self) {
        self.link_sets = stored.link_sets.clone();
        self.links = stored.links.clone();
    }

    fn read_ahead(&self, _key: &str) -> ReadAhead {
        let tenant = &self.tenant_name;
        let mut keys = vec![Policy::store_key(&format!("{tenant}:{}", self.policy_name))];
        let (group, network) = if self.direction == "in" {
            (&self.from_endpoint_group, &self.from_network)
        } else {
            (&self.to_endpoint_group, &self.to_network)
        };
        if !group.is_empty() {
            keys.push(EndpointGroup::store_key(&format!("{tenant}:{group}")));
            keys.push(crate::state::EndpointGroupState::key_for(
                &crate::state::EndpointGroupState::id_for(tenant, group),
            ));
        }
        if !network.is_empty() {
            keys.push(Network::store_key(&format!("{tenant}:{network}")));
        }
        ReadAhead {
            keys,
            // The groups using the policy (see `attach::rule_added`).
            prefixes: vec![format!(
                "{}{tenant}:",
                crate::store::keys::model_prefix(EndpointGroup::TYPE)
            )],
        }
    }

    async fn create(tx: &mut Tx<'_>, obj: &mut Self) -> Result<()> {
        let policy_key = format!("{}:{}", obj.tenant_name, obj.policy_name);
        load_required::<Policy>(tx, &policy_key).await?;
        if obj.direction == "in" && !obj.to_ip_address.is_empty() {
            check_to_ip_on_in_rule(tx, obj).await?;
        }
        let group = if obj.direction == "in" {
            &obj.from_endpoint_group
        } else {
            &obj.to_endpoint_group
        };
        if !group.is_empty() {
            let key = format!("{}:{group}", obj.tenant_name);
            load_required::<EndpointGroup>(tx, &key).await?;
            obj.links.match_endpoint_group = Link::to(EndpointGroup::TYPE, &key);
        }
        let network = if obj.direction == "in" {
            &obj.from_network
        } else {
            &obj.to_network
        };
        if !network.is_empty()
            && load::<Network>(tx, &format!("{}:{network}", obj.tenant_name))
                .await?
                .is_none()
        {
            return Err(Error::not_found(format!(
                "network {network} not found in tenant {}",
                obj.tenant_name
            )));
        }
        link::add(&mut obj.link_sets.policies, Policy::TYPE, &policy_key);
        attach::rule_added(tx, obj).await
    }

    async fn update(_tx: &mut Tx<'_>, old: &Self, _new: &mut Self) -> Result<()> {
        Err(Error::conflict(format!(
            "cannot update rule {} after it is created",
            old.key
        )))
    }

    async fn delete(tx: &mut Tx<'_>, obj: &Self) -> Result<()> {
        attach::rule_removed(tx, obj).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_addresses_of_either_family_are_accepted_and_bad_ones_named() {
        for ok in [
            "10.1.1.0/24",
            "10.1.1.1-5",
            "fd00::1",
            "fd00:99:3::/64",
            "::/0",
        ] {
            assert!(ip_match("fromIpAddress", ok).is_ok(), "{ok}");
        }
        for bad in ["fd00::/129", "fd00::1-5", "fd00:::1", "10.1.1.0/33"] {
            let err = ip_match("fromIpAddress", bad).unwrap_err().to_string();
            assert!(
                err.contains("fromIpAddress") && err.contains(bad),
                "{bad}: {err}"
            );
        }
    }
}
