//! `network` (key `tenantName:networkName`). Creating a network takes its VLAN, or VNI plus local
//! VLAN, and writes `CfgNetworkState` with a fresh address map; networks are immutable afterwards and
//! cannot be deleted while endpoints, EPGs or services use them.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::link::{Link, LinkSet};
use super::{
    EndpointGroup, Global, Object, ReadAhead, ServiceLb, Tenant, list_with_prefix, load,
    load_required, validate,
};
use crate::endpoint::endpoint_oper;
use crate::error::{Error, Result};
use crate::model::global;
use crate::resources::ipv4::{SubnetSpec, format_ip_list};
use crate::resources::ipv6::Ipv6Subnet;
use crate::state::addr_map::AddrMap;
use crate::state::{CfgEndpointState, CfgNetworkState};
use crate::store::{Tx, keys};

/// Upgrade: give every network stored before the subnet index its index key, and every tenant
/// the record of the prefix lengths in use (leader start). Returns the index keys added.
pub async fn index_subnets(db: &crate::store::txn::Db) -> Result<usize> {
    db.write(async |tx| {
        let mut added = 0;
        let have: std::collections::BTreeSet<String> = tx
            .list_derived(&keys::state_prefix(keys::category::SUBNETS))
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let mut lengths: std::collections::BTreeMap<String, PrefixLengths> = Default::default();
        for n in tx
            .list::<Network>(&keys::model_prefix(Network::TYPE), Network::TYPE)
            .await?
        {
            let Ok(subnet) = SubnetSpec::parse("subnet", &n.subnet) else {
                continue;
            };
            lengths
                .entry(n.tenant_name.clone())
                .or_default()
                .insert(subnet.len);
            let key = subnet_index_key(&n.tenant_name, &subnet);
            if !have.contains(&key) {
                tx.put_derived(&key, "subnet index", &n.network_name)?;
                added += 1;
            }
        }
        for (tenant, mut in_use) in lengths {
            let key = prefix_lengths_key(&tenant);
            let stored: Option<PrefixLengths> = tx.get(&key, "subnet prefix lengths").await?;
            if let Some(stored) = &stored {
                in_use.0.extend(&stored.0);
            }
            if stored.as_ref() != Some(&in_use) {
                tx.put(&key, "subnet prefix lengths", &in_use)?;
            }
        }
        Ok::<_, Error>(added)
    })
    .await
}

/// The subnet index key of `subnet` in `tenant` (see `keys::category::SUBNETS`).
pub fn subnet_index_key(tenant: &str, subnet: &SubnetSpec) -> String {
    let bits = u32::from(subnet.network);
    let prefix: String = (0..subnet.len)
        .map(|i| {
            if bits & (1 << (31 - i)) != 0 {
                '1'
            } else {
                '0'
            }
        })
        .collect();
    keys::state(keys::category::SUBNETS, &format!("{tenant}/{prefix}"))
}

/// The key of a tenant's [`PrefixLengths`].
pub fn prefix_lengths_key(tenant: &str) -> String {
    keys::state(keys::category::SUBNET_LENGTHS, tenant)
}

/// The IPv4 prefix lengths a tenant's networks have, or had (a length is not taken out when its
/// last network goes: it only costs a read per later create). One small record per tenant that
/// changes only when a new length appears.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefixLengths(std::collections::BTreeSet<u8>);

impl PrefixLengths {
    fn insert(&mut self, len: u8) -> bool {
        self.0.insert(len)
    }
}

/// The network of `tenant` whose subnet overlaps `subnet`, if any, from the subnet index: a
/// network inside it (keys under its own), or one containing it (its key at a shorter length).
/// Containing subnets are looked up only at the lengths the tenant uses (all lengths when the
/// tenant has no record yet); the lengths record is read under guard and gets the new length, so
/// a concurrent create at a new length conflicts with this one instead of passing unseen.
async fn subnet_overlap(
    tx: &mut Tx<'_>,
    tenant: &str,
    subnet: &SubnetSpec,
) -> Result<Option<String>> {
    let own = subnet_index_key(tenant, subnet);
    if let Some((_, v)) = tx.list_raw(&own).await?.into_iter().next() {
        return Ok(Some(serde_json::from_slice(&v).unwrap_or_default()));
    }
    let lengths_key = prefix_lengths_key(tenant);
    let cut = own.len() - usize::from(subnet.len);
    let stored: Option<PrefixLengths> = tx.get(&lengths_key, "subnet prefix lengths").await?;
    let mut lengths = match stored.clone() {
        Some(l) => l,
        // No record (a tenant's first network): the lengths of the index keys it has.
        None => PrefixLengths(
            tx.list_raw(&own[..cut])
                .await?
                .iter()
                .filter_map(|(k, _)| u8::try_from(k.len() - cut).ok())
                .collect(),
        ),
    };
    let shorter: Vec<String> = (crate::resources::ipv4::MIN_PREFIX_LEN..subnet.len)
        .filter(|l| lengths.0.contains(l))
        .map(|l| own[..cut + usize::from(l)].to_string())
        .collect();
    let found = tx
        .get_many(&shorter)
        .await?
        .into_iter()
        .flatten()
        .next()
        .map(|v| serde_json::from_slice(&v).unwrap_or_default());
    if found.is_none() && (lengths.insert(subnet.len) || stored.is_none()) {
        tx.put(&lengths_key, "subnet prefix lengths", &lengths)?;
    }
    Ok(found)
}

/// Largest packet tag accepted for a VXLAN network (24-bit VNI).
pub const MAX_PKT_TAG: i64 = 16_777_216;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct NetworkLinkSets {
    #[serde(rename = "EndpointGroups", skip_serializing_if = "LinkSet::is_empty")]
    pub endpoint_groups: LinkSet,
    #[serde(rename = "Servicelbs", skip_serializing_if = "LinkSet::is_empty")]
    pub servicelbs: LinkSet,
    #[serde(rename = "Services", skip_serializing_if = "LinkSet::is_empty")]
    pub services: LinkSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct NetworkLinks {
    #[serde(rename = "Tenant", skip_serializing_if = "Link::is_empty")]
    pub tenant: Link,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Network {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(rename = "networkName", skip_serializing_if = "String::is_empty")]
    pub network_name: String,
    #[serde(rename = "tenantName", skip_serializing_if = "String::is_empty")]
    pub tenant_name: String,
    #[serde(rename = "nwType", skip_serializing_if = "String::is_empty")]
    pub nw_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub encap: String,
    #[serde(rename = "pktTag", skip_serializing_if = "is_zero")]
    pub pkt_tag: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subnet: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub gateway: String,
    #[serde(rename = "ipv6Subnet", skip_serializing_if = "String::is_empty")]
    pub ipv6_subnet: String,
    #[serde(rename = "ipv6Gateway", skip_serializing_if = "String::is_empty")]
    pub ipv6_gateway: String,
    #[serde(rename = "cfgdTag", skip_serializing_if = "String::is_empty")]
    pub cfgd_tag: String,
    #[serde(rename = "link-sets")]
    pub link_sets: NetworkLinkSets,
    pub links: NetworkLinks,
}

pub(crate) fn is_zero(v: &i64) -> bool {
    *v == 0
}

impl Network {
    pub fn state_id(&self) -> String {
        CfgNetworkState::id_for(&self.tenant_name, &self.network_name)
    }
}

/// The network's config state; `NotFound` if the network does not exist.
pub async fn load_state(tx: &mut Tx<'_>, tenant: &str, network: &str) -> Result<CfgNetworkState> {
    let id = CfgNetworkState::id_for(tenant, network);
    tx.get::<CfgNetworkState>(&CfgNetworkState::key_for(&id), CfgNetworkState::KIND)
        .await?
        .ok_or_else(|| Error::not_found(format!("network {network} not found in tenant {tenant}")))
}

pub fn save_state(tx: &mut Tx<'_>, state: &CfgNetworkState) -> Result<()> {
    Ok(tx.put(
        &CfgNetworkState::key_for(&state.id),
        CfgNetworkState::KIND,
        state,
    )?)
}

/// Endpoints of a network (their ids start with `<network>.<tenant>-`).
pub async fn endpoints_of(tx: &mut Tx<'_>, net_id: &str) -> Result<Vec<CfgEndpointState>> {
    let prefix = format!("{}{net_id}-", keys::state_prefix(keys::category::EPS));
    Ok(tx
        .list::<CfgEndpointState>(&prefix, CfgEndpointState::KIND)
        .await?)
}

/// Addresses of the map that are allocated (excluding network/broadcast and out-of-range hosts).
/// The network's allocated and available addresses, and those hosts hold in reserve for
/// their next pods (marked used in the map, but listed apart: no endpoint has them yet).
pub async fn allocated_and_available(
    tx: &mut Tx<'_>,
    state: &CfgNetworkState,
) -> Result<(Vec<Ipv4Addr>, Vec<Ipv4Addr>, Vec<Ipv4Addr>)> {
    use crate::state::reservations::{self, Holder};
    let subnet = state.subnet()?;
    let used = crate::state::addr_map::network_used(tx, state).await?;
    let reserved: std::collections::BTreeSet<Ipv4Addr> = reservations::of_network(tx, &state.id)
        .await?
        .into_iter()
        .filter(|(_, h)| matches!(h, Holder::Host(_)))
        .map(|(ip, _)| ip)
        .collect();
    let (first, last) = match subnet.range {
        Some((a, b)) => (
            subnet.index_of(a).unwrap_or(1),
            subnet.index_of(b).unwrap_or(subnet.size() - 2),
        ),
        None => (1, subnet.size().saturating_sub(2)),
    };
    let mut allocated = Vec::new();
    let mut available = Vec::new();
    for i in first..=last {
        let ip = subnet.ip_at(i);
        if !used.test(i) {
            available.push(ip);
        } else if !reserved.contains(&ip) {
            allocated.push(ip);
        }
    }
    Ok((allocated, available, reserved.into_iter().collect()))
}

impl Object for Network {
    const TYPE: &'static str = "network";
    const PLURAL: &'static str = "networks";

    fn derived_key(&self) -> String {
        format!("{}:{}", self.tenant_name, self.network_name)
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn normalize(&mut self) {
        if self.nw_type.is_empty() {
            self.nw_type = "data".into();
        }
    }
    fn validate(&self) -> Result<()> {
        validate::name("networkName", &self.network_name, 64)?;
        validate::name("tenantName", &self.tenant_name, 64)?;
        validate::one_of("nwType", &self.nw_type, &["infra", "data"])?;
        validate::one_of("encap", &self.encap, &["vlan", "vxlan"])?;
        let max_tag = if self.encap == "vlan" {
            4094
        } else {
            MAX_PKT_TAG
        };
        validate::range("pktTag", self.pkt_tag, 0, max_tag)?;
        if self.subnet.is_empty() {
            return Err(Error::invalid("subnet", "is required"));
        }
        let subnet = SubnetSpec::parse("subnet", &self.subnet)?;
        if let Some(gw) = validate::optional_ipv4("gateway", &self.gateway)?
            && !subnet.contains(gw)
        {
            return Err(Error::invalid(
                "gateway",
                format!("{gw} is outside subnet {}", self.subnet),
            ));
        }
        if !self.ipv6_subnet.is_empty() {
            let s6 = Ipv6Subnet::parse("ipv6Subnet", &self.ipv6_subnet)?;
            if let Some(gw) = validate::optional_ipv6("ipv6Gateway", &self.ipv6_gateway)?
                && !s6.contains(gw)
            {
                return Err(Error::invalid(
                    "ipv6Gateway",
                    format!("{gw} is outside {}", self.ipv6_subnet),
                ));
            }
        } else if !self.ipv6_gateway.is_empty() {
            return Err(Error::invalid("ipv6Gateway", "requires ipv6Subnet"));
        }
        validate::optional_name("cfgdTag", &self.cfgd_tag, 128)
    }
    fn keep_links(&mut self, stored: &Self) {
        self.link_sets = stored.link_sets.clone();
        self.links = stored.links.clone();
    }

    async fn derive_links(tx: &mut Tx<'_>, objs: &mut [Self]) -> Result<()> {
        super::derived::networks(tx, objs).await
    }
    fn strip_derived(&mut self) {
        super::derived::strip_network(self);
    }

    fn read_ahead(&self, key: &str) -> ReadAhead {
        let tenant = &self.tenant_name;
        let mut ahead = ReadAhead {
            keys: vec![
                Global::store_key("global"),
                Tenant::store_key(tenant),
                EndpointGroup::store_key(key),
                prefix_lengths_key(tenant),
            ],
            prefixes: Vec::new(),
        };
        ahead.keys.extend(global::pool_keys(&self.encap));
        if let Ok(subnet) = SubnetSpec::parse("subnet", &self.subnet) {
            ahead.prefixes.push(subnet_index_key(tenant, &subnet));
        }
        ahead
    }

    async fn create(tx: &mut Tx<'_>, obj: &mut Self) -> Result<()> {
        let glob = global::current(tx).await?.ok_or_else(|| {
            Error::conflict("Global configuration is not ready: create the global object first")
        })?;
        if glob.fwd_mode.is_empty() {
            return Err(Error::conflict(
                "Global configuration is not ready: fwdMode is not set",
            ));
        }
        let ranges = if obj.encap == "vlan" {
            &glob.vlans
        } else {
            &glob.vxlans
        };
        if ranges.is_empty() {
            return Err(Error::conflict(format!(
                "Global configuration is not ready: no {} range",
                obj.encap
            )));
        }
        load_required::<Tenant>(tx, &obj.tenant_name).await?;
        if load::<EndpointGroup>(tx, &obj.key).await?.is_some() {
            return Err(Error::conflict(format!(
                "an endpoint group named {} already exists",
                obj.key
            )));
        }
        let subnet = SubnetSpec::parse("subnet", &obj.subnet)?;
        let subnet6 = if obj.ipv6_subnet.is_empty() {
            None
        } else {
            Some(Ipv6Subnet::parse("ipv6Subnet", &obj.ipv6_subnet)?)
        };
        if let Some(other) = subnet_overlap(tx, &obj.tenant_name, &subnet).await? {
            return Err(Error::conflict(format!(
                "network {other} conflicts with subnet {}",
                obj.subnet
            )));
        }
        tx.put(
            &subnet_index_key(&obj.tenant_name, &subnet),
            "subnet index",
            &obj.network_name,
        )?;
        // IPv6 subnets are rare: compared against every network of the tenant.
        if let Some(s6) = &subnet6 {
            for other in list_with_prefix::<Network>(tx, &format!("{}:", obj.tenant_name)).await? {
                if other.network_name != obj.network_name
                    && !other.ipv6_subnet.is_empty()
                    && Ipv6Subnet::parse("ipv6Subnet", &other.ipv6_subnet)?.overlaps(s6)
                {
                    return Err(Error::conflict(format!(
                        "network {} conflicts with subnet {}",
                        other.network_name, obj.ipv6_subnet
                    )));
                }
            }
        }

        let requested = u32::try_from(obj.pkt_tag).unwrap_or(0);
        let (pkt_tag, ext_pkt_tag) = if obj.encap == "vlan" {
            let mut pool = global::vlan_pool(tx).await?;
            let vlan = pool.allocate(requested)?;
            global::save_vlan_pool(tx, &pool)?;
            (vlan, 0)
        } else {
            let mut pool = global::vxlan_pool(tx).await?;
            let (vni, local) = pool.allocate(requested)?;
            global::save_vxlan_pool(tx, &pool)?;
            (local, vni)
        };

        validate::optional_ipv4("gateway", &obj.gateway)?;
        let mut state = CfgNetworkState {
            id: obj.state_id(),
            tenant: obj.tenant_name.clone(),
            network_name: obj.network_name.clone(),
            nw_type: obj.nw_type.clone(),
            pkt_tag_type: obj.encap.clone(),
            pkt_tag,
            ext_pkt_tag,
            subnet_ip: subnet.network.to_string(),
            subnet_len: subnet.len,
            gateway: obj.gateway.clone(),
            ip_addr_range: subnet.range_text(),
            ep_addr_count: 0,
            ep_count: 0,
            ip_alloc_map: Default::default(),
            ip_alloc_full: Default::default(),
            ipv6_subnet_ip: subnet6.map(|s| s.network.to_string()).unwrap_or_default(),
            ipv6_subnet_len: subnet6.map_or(0, |s| s.len),
            ipv6_gateway: obj.ipv6_gateway.clone(),
            ipv6_alloc_map: Default::default(),
            ipv6_last_host: String::new(),
            network_tag: if obj.cfgd_tag.is_empty() {
                obj.state_id()
            } else {
                obj.cfgd_tag.clone()
            },
            ip_reservations: Default::default(),
            reserve_generation: 0,
        };
        // The IPv6 gateway is reserved in the chunked IPv6 map's fresh content (`addr_map6`).
        validate::optional_ipv6("ipv6Gateway", &obj.ipv6_gateway)?;
        // A fresh map stores no chunk, only which chunks have no free address.
        state.ip_alloc_full = AddrMap::network(&mut state)?.full().clone();
        save_state(tx, &state)?;
        obj.links.tenant = Link::to(Tenant::TYPE, &obj.tenant_name);
        load_required::<Tenant>(tx, &obj.tenant_name)
            .await
            .map(|_| ())
    }

    async fn update(_tx: &mut Tx<'_>, old: &Self, _new: &mut Self) -> Result<()> {
        Err(Error::conflict(format!(
            "cannot change parameters of network {} after it is created",
            old.key
        )))
    }

    async fn delete(tx: &mut Tx<'_>, obj: &Self) -> Result<()> {
        if let Ok(subnet) = SubnetSpec::parse("subnet", &obj.subnet) {
            tx.delete(&subnet_index_key(&obj.tenant_name, &subnet));
        }
        let epgs: Vec<String> =
            list_with_prefix::<EndpointGroup>(tx, &format!("{}:", obj.tenant_name))
                .await?
                .into_iter()
                .filter(|g| g.network_name == obj.network_name)
                .map(|g| g.group_name)
                .collect();
        if !epgs.is_empty() {
            return Err(Error::conflict(format!(
                "network {} is used by endpoint groups {}",
                obj.key,
                epgs.join(", ")
            )));
        }
        let svcs: Vec<String> = list_with_prefix::<ServiceLb>(tx, &format!("{}:", obj.tenant_name))
            .await?
            .into_iter()
            .filter(|s| s.network_name == obj.network_name)
            .map(|s| s.service_name)
            .collect();
        if !svcs.is_empty() {
            return Err(Error::conflict(format!(
                "network {} is used by services {}",
                obj.key,
                svcs.join(", ")
            )));
        }
        let state = load_state(tx, &obj.tenant_name, &obj.network_name).await?;
        if state.ep_count > 0 {
            return Err(Error::conflict(format!(
                "network {} has {} active endpoints",
                obj.key, state.ep_count
            )));
        }
        if state.pkt_tag_type == "vlan" {
            let mut pool = global::vlan_pool(tx).await?;
            pool.release(state.pkt_tag);
            global::save_vlan_pool(tx, &pool)?;
        } else {
            let mut pool = global::vxlan_pool(tx).await?;
            pool.release(state.ext_pkt_tag, state.pkt_tag);
            global::save_vxlan_pool(tx, &pool)?;
        }
        let mut state = state;
        AddrMap::network(&mut state)?.delete_all(tx).await?;
        if let Some(mut map6) = crate::state::addr_map6::Ipv6Map::network(&mut state)? {
            map6.delete_all(tx).await?;
        }
        crate::state::reservations::delete_all(tx, &state.id).await?;
        tx.delete(&CfgNetworkState::key_for(&state.id));
        Ok(())
    }

    async fn oper(tx: &mut Tx<'_>, obj: &Self) -> Result<Value> {
        let state = load_state(tx, &obj.tenant_name, &obj.network_name).await?;
        let (allocated, available, reserved) = allocated_and_available(tx, &state).await?;
        let gateway = state.gateway.parse::<Ipv4Addr>().ok();
        let eps = endpoints_of(tx, &state.id).await?;
        let mut oper = json!({
            "pktTag": state.pkt_tag,
            "externalPktTag": state.ext_pkt_tag,
            "numEndpoints": state.ep_count,
            // Endpoint addresses, as Contiv counts them: the gateway is listed, not counted.
            "allocatedAddressesCount": allocated.iter().filter(|a| Some(**a) != gateway).count(),
            "allocatedIPAddresses": format_ip_list(allocated),
            "availableIPAddresses": format_ip_list(available),
            "networkTag": state.network_tag,
            "endpoints": eps.iter().map(endpoint_oper).collect::<Vec<_>>(),
        });
        if !reserved.is_empty() {
            // Not in Contiv: addresses hosts hold for their next pods (docs/master.md).
            oper["hostReservedIPAddresses"] = json!(format_ip_list(reserved));
        }
        Ok(oper)
    }
}
