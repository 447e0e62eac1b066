//! The `/plugin/*` operations netplugin calls (reference §2.4): address allocation and release, and
//! endpoint create/delete/update. Each is one optimistic transaction, so the address, the counters
//! and the endpoint record commit together or not at all.
//!
//! Request and response bodies use Contiv's Go field names; they are public so the REST client (and
//! netplugin through it) share them.

#![allow(non_snake_case)]

pub mod batch;
pub mod reserve;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::model::endpoint_group::{load_state as load_epg_state, save_state as save_epg_state};
use crate::model::network::{load_state as load_net_state, save_state as save_net_state};
use crate::model::service_lb::follow_endpoint;
use crate::resources::ipv4::mac_from_ipv4;
use crate::state::addr_map::{self, AddrMap};
use crate::state::addr_map6::Ipv6Map;
use crate::state::reservations::{self, Claimed};
use crate::state::{CfgEndpointState, CfgNetworkState, EndpointGroupState};
use crate::store::txn::Db;
use crate::store::{Tx, keys};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct AddressAllocRequest {
    pub NetworkID: String,
    pub AddressPool: String,
    pub PreferredIPv4Address: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct AddressAllocResponse {
    pub NetworkID: String,
    /// `a.b.c.d/len`.
    pub IPv4Address: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct AddressReleaseRequest {
    pub NetworkID: String,
    pub IPv4Address: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ConfigEp {
    pub Container: String,
    pub Host: String,
    pub IPAddress: String,
    pub IPv6Address: String,
    pub ServiceName: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct CreateEndpointRequest {
    pub TenantName: String,
    pub NetworkName: String,
    pub ServiceName: String,
    pub EndpointID: String,
    pub EPCommonName: String,
    pub ConfigEP: ConfigEp,
    /// Not in Contiv: the container's labels, recorded with the endpoint in the same
    /// transaction (what a later updateEndpoint `start` event would do), so one call attaches
    /// a labelled pod. An older netmaster ignores the field and answers without labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub Labels: BTreeMap<String, String>,
    /// Not in Contiv: how many addresses of the network `ConfigEP.Host` wants to hold in
    /// reserve for its next pods ([`reserve`]); the answer lists them. 0: none.
    #[serde(skip_serializing_if = "is_zero")]
    pub ReserveAddresses: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct EndpointResponse {
    pub EndpointConfig: CfgEndpointState,
    /// Not in Contiv: every address the endpoint's host holds in reserve on its network after
    /// this create, when the request asked for a reserve (absent otherwise, and when the
    /// endpoint existed already).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub HostReserve: Option<Vec<reserve::ReservedAddress>>,
    /// Not in Contiv: the network's reserve generation `HostReserve` was read at (a host
    /// applies a listing only if none newer was applied).
    #[serde(skip_serializing_if = "is_zero64")]
    pub ReserveGeneration: u64,
}

fn is_zero64(n: &u64) -> bool {
    *n == 0
}

impl EndpointResponse {
    /// The answer for `endpoint`, with the host's reserve (if one was asked for) as of the
    /// network's reserve generation `net`'s record now holds.
    fn new(
        endpoint: CfgEndpointState,
        host_reserve: Option<Vec<reserve::ReservedAddress>>,
        net: &CfgNetworkState,
    ) -> Self {
        EndpointResponse {
            EndpointConfig: endpoint,
            ReserveGeneration: host_reserve.as_ref().map_or(0, |_| net.reserve_generation),
            HostReserve: host_reserve,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct DeleteEndpointRequest {
    pub TenantName: String,
    pub NetworkName: String,
    pub ServiceName: String,
    pub EndpointID: String,
    pub IPv4Address: String,
    /// Not in Contiv: the size of the endpoint's host's reserve ([`reserve`]); with it the
    /// endpoint's addresses go to that reserve and the answer lists it. 0: freed as usual.
    #[serde(skip_serializing_if = "is_zero")]
    pub ReserveAddresses: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct UpdateEndpointRequest {
    pub IPAddress: String,
    pub ContainerID: String,
    pub Labels: BTreeMap<String, String>,
    pub Tenant: String,
    pub Network: String,
    /// `start` or `die`.
    pub Event: String,
    pub EndpointID: String,
    pub EPCommonName: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct UpdateEndpointResponse {
    pub IPAddress: String,
}

/// Contiv's `EndpointOper` JSON for one endpoint (empty fields omitted).
pub fn endpoint_oper(ep: &CfgEndpointState) -> Value {
    // `[ipv4, ipv6]`, the IPv6 slot empty when there is none (as Contiv answers).
    let ips = [ep.ip_address.clone(), ep.ipv6_address.clone()];
    let labels = if ep.labels.is_empty() {
        String::new()
    } else {
        let inner: Vec<String> = ep.labels.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        format!("map[{}]", inner.join(" "))
    };
    let mut v = json!({
        "containerID": ep.container_id,
        "containerName": ep.ep_common_name,
        "endpointGroupId": ep.endpoint_group_id,
        "endpointGroupKey": ep.endpoint_group_key,
        "endpointID": ep.endpoint_id,
        "homingHost": ep.homing_host,
        "intfName": ep.intf_name,
        "ipAddress": ips,
        "labels": labels,
        "macAddress": ep.mac_address,
        "network": ep.net_id,
        "serviceName": ep.service_name,
        "vtepIP": ep.vtep_ip,
    });
    if let Some(obj) = v.as_object_mut() {
        obj.retain(|_, val| !matches!(val, Value::String(s) if s.is_empty()) && val != &json!(0));
    }
    v
}

/// Where an address comes from: a network's map, or an EPG pool inside it.
struct Target {
    net: CfgNetworkState,
    epg: Option<EndpointGroupState>,
}

impl Target {
    /// Whether the group hands out addresses of its own pool (not the network's).
    fn has_own_pool(&self) -> bool {
        self.epg.as_ref().is_some_and(|g| !g.ip_pool.is_empty())
    }
}

fn strip_len(addr: &str) -> &str {
    addr.split('/').next().unwrap_or(addr)
}

fn parse_v4(field: &str, text: &str) -> Result<Ipv4Addr> {
    strip_len(text)
        .parse()
        .map_err(|_| Error::invalid(field, format!("{text:?} is not an IPv4 address")))
}

async fn load_net_by_id(tx: &mut Tx<'_>, id: &str) -> Result<Option<CfgNetworkState>> {
    Ok(tx
        .get::<CfgNetworkState>(&CfgNetworkState::key_for(id), CfgNetworkState::KIND)
        .await?)
}

/// Resolve `<net>.<tenant>`, `<net>:<epg>.<tenant>`, or (empty id) an `AddressPool` of
/// `subnet/len[:tenant]`.
async fn resolve_target(tx: &mut Tx<'_>, network_id: &str, pool: &str) -> Result<Target> {
    if network_id.is_empty() {
        let (subnet, tenant) = pool
            .split_once(':')
            .map_or((pool, None), |(s, t)| (s, Some(t)));
        let (ip, len) = subnet.split_once('/').ok_or_else(|| {
            Error::invalid(
                "AddressPool",
                format!("{pool:?} must be subnet/len[:tenant]"),
            )
        })?;
        let nets = tx
            .list::<CfgNetworkState>(
                &keys::state_prefix(keys::category::NETS),
                CfgNetworkState::KIND,
            )
            .await?;
        let net = nets
            .into_iter()
            .find(|n| {
                n.subnet_ip == ip
                    && n.subnet_len.to_string() == len
                    && tenant.is_none_or(|t| n.tenant == t)
            })
            .ok_or_else(|| Error::not_found(format!("no network with subnet {subnet}")))?;
        return Ok(Target { net, epg: None });
    }
    if let Some((net_name, rest)) = network_id.split_once(':') {
        // `<epg>.<tenant>`: names may contain dots, so try each split until an EPG exists.
        for (i, _) in rest.match_indices('.') {
            let (group, tenant) = (&rest[..i], &rest[i + 1..]);
            let id = EndpointGroupState::id_for(tenant, group);
            if let Some(epg) = tx
                .get::<EndpointGroupState>(
                    &EndpointGroupState::key_for(&id),
                    EndpointGroupState::KIND,
                )
                .await?
            {
                let net = load_net_state(tx, tenant, net_name).await?;
                return Ok(Target {
                    net,
                    epg: Some(epg),
                });
            }
        }
        return Err(Error::not_found(format!(
            "endpoint group for {network_id} not found"
        )));
    }
    let net = load_net_by_id(tx, network_id)
        .await?
        .ok_or_else(|| Error::not_found(format!("network {network_id} not found")))?;
    Ok(Target { net, epg: None })
}

/// Allocate (or claim `preferred`) in the target's map (the group's pool, or the network's).
/// Writes the changed chunk; the caller saves the target.
async fn take_address(
    tx: &mut Tx<'_>,
    t: &mut Target,
    preferred: Option<Ipv4Addr>,
) -> Result<Ipv4Addr> {
    let subnet = t.net.subnet()?;
    let pool = match &mut t.epg {
        Some(epg) => AddrMap::group(epg, &subnet)?,
        None => None,
    };
    let ip = match (pool, &mut t.epg) {
        (Some(mut map), Some(epg)) => {
            let ip = map.allocate(tx, &subnet, preferred).await?;
            addr_map::save_group(tx, &mut map, epg).await?;
            ip
        }
        _ => {
            let mut map = AddrMap::network(&mut t.net)?;
            let ip = map.allocate(tx, &subnet, preferred).await?;
            addr_map::save_network(tx, &mut map, &mut t.net).await?;
            ip
        }
    };
    t.net.ep_addr_count += 1;
    Ok(ip)
}

async fn give_back_address(tx: &mut Tx<'_>, t: &mut Target, ip: Ipv4Addr) -> Result<()> {
    let subnet = t.net.subnet()?;
    let pool = match &mut t.epg {
        Some(epg) => AddrMap::group(epg, &subnet)?,
        None => None,
    };
    match (pool, &mut t.epg) {
        (Some(mut map), Some(epg)) => {
            map.release(tx, &subnet, ip).await?;
            addr_map::save_group(tx, &mut map, epg).await?;
            t.net.ep_addr_count = t.net.ep_addr_count.saturating_sub(1);
            Ok(())
        }
        _ => give_back_to_network(tx, &mut t.net, Some(ip), None).await,
    }
}

/// Free `ip` in the network's own map and `ip6` in its IPv6 map (if it has one).
async fn give_back_to_network(
    tx: &mut Tx<'_>,
    net: &mut CfgNetworkState,
    ip: Option<Ipv4Addr>,
    ip6: Option<Ipv6Addr>,
) -> Result<()> {
    if let Some(ip) = ip {
        let subnet = net.subnet()?;
        let mut map = AddrMap::network(net)?;
        map.release(tx, &subnet, ip).await?;
        addr_map::save_network(tx, &mut map, net).await?;
        net.ep_addr_count = net.ep_addr_count.saturating_sub(1);
    }
    if let Some(ip6) = ip6
        && let Some(mut map6) = Ipv6Map::network(net)?
    {
        map6.release(tx, ip6).await?;
        map6.save(tx).await?;
    }
    Ok(())
}

fn save_target(tx: &mut Tx<'_>, t: &Target) -> Result<()> {
    save_net_state(tx, &t.net)?;
    if let Some(epg) = &t.epg {
        save_epg_state(tx, epg)?;
    }
    Ok(())
}

/// `POST /plugin/allocAddress`.
pub async fn alloc_address(db: &Db, req: &AddressAllocRequest) -> Result<AddressAllocResponse> {
    let preferred = if req.PreferredIPv4Address.is_empty() {
        None
    } else {
        Some(parse_v4("PreferredIPv4Address", &req.PreferredIPv4Address)?)
    };
    db.write(async |tx| {
        let mut t = resolve_target(tx, &req.NetworkID, &req.AddressPool).await?;
        let ip = take_address(tx, &mut t, preferred).await?;
        reservations::reserve(tx, &t.net.id, ip)?;
        save_target(tx, &t)?;
        let network_id = if req.NetworkID.is_empty() {
            t.net.id.clone()
        } else {
            req.NetworkID.clone()
        };
        Ok(AddressAllocResponse {
            NetworkID: network_id,
            IPv4Address: format!("{ip}/{}", t.net.subnet_len),
        })
    })
    .await
}

/// `POST /plugin/releaseAddress`. Frees an address reserved by allocAddress; an address bound to an
/// endpoint (deleteEndpoint frees those) or already free is left alone, so a late or repeated release
/// can never free an address someone else now holds.
pub async fn release_address(db: &Db, req: &AddressReleaseRequest) -> Result<()> {
    let ip = parse_v4("IPv4Address", &req.IPv4Address)?;
    db.write(async |tx| {
        let mut t = resolve_target(tx, &req.NetworkID, "").await?;
        if reservations::claim(tx, &mut t.net, ip, None).await? == Claimed::Anyone {
            give_back_address(tx, &mut t, ip).await?;
            save_target(tx, &t)?;
        }
        Ok(())
    })
    .await
}

/// A createEndpoint request, checked and parsed (done before any store access).
#[derive(Debug, Clone, PartialEq)]
pub struct NewEndpoint {
    pub tenant: String,
    pub network: String,
    /// EPG name, or empty.
    pub group: String,
    pub container: String,
    pub endpoint_id: String,
    pub host: String,
    pub common_name: String,
    pub preferred: Option<Ipv4Addr>,
    pub preferred6: Option<Ipv6Addr>,
    /// Labels to record (empty: none, and an existing endpoint's are left alone).
    pub labels: BTreeMap<String, String>,
    /// Addresses the host wants in reserve afterwards (0: none; see [`reserve`]).
    pub reserve: u32,
}

impl NewEndpoint {
    pub fn parse(req: &CreateEndpointRequest) -> Result<Self> {
        crate::model::validate::name("TenantName", &req.TenantName, 64)?;
        crate::model::validate::name("NetworkName", &req.NetworkName, 64)?;
        let container = if req.ConfigEP.Container.is_empty() {
            &req.EndpointID
        } else {
            &req.ConfigEP.Container
        };
        if container.is_empty() {
            return Err(Error::invalid(
                "ConfigEP.Container",
                "is required (or EndpointID)",
            ));
        }
        let preferred = if req.ConfigEP.IPAddress.is_empty() {
            None
        } else {
            Some(parse_v4("ConfigEP.IPAddress", &req.ConfigEP.IPAddress)?)
        };
        let preferred6 = if req.ConfigEP.IPv6Address.is_empty() {
            None
        } else {
            Some(
                strip_len(&req.ConfigEP.IPv6Address)
                    .parse::<Ipv6Addr>()
                    .map_err(|_| {
                        Error::invalid(
                            "ConfigEP.IPv6Address",
                            format!("{:?} is not an IPv6 address", req.ConfigEP.IPv6Address),
                        )
                    })?,
            )
        };
        Ok(NewEndpoint {
            tenant: req.TenantName.clone(),
            network: req.NetworkName.clone(),
            group: if req.ServiceName.is_empty() {
                req.ConfigEP.ServiceName.clone()
            } else {
                req.ServiceName.clone()
            },
            container: container.clone(),
            endpoint_id: if req.EndpointID.is_empty() {
                container.clone()
            } else {
                req.EndpointID.clone()
            },
            host: req.ConfigEP.Host.clone(),
            common_name: req.EPCommonName.clone(),
            preferred,
            preferred6,
            labels: req.Labels.clone(),
            reserve: if req.ConfigEP.Host.is_empty() {
                0
            } else {
                req.ReserveAddresses
            },
        })
    }
}

/// `POST /plugin/createEndpoint` without batching. Idempotent: an existing endpoint is returned
/// unchanged.
pub async fn create_endpoint(db: &Db, req: &CreateEndpointRequest) -> Result<CfgEndpointState> {
    let ne = NewEndpoint::parse(req)?;
    db.write(async |tx| create_endpoint_in(tx, &ne).await)
        .await
        .map(|r| r.EndpointConfig)
}

/// Create an endpoint inside a transaction: address (reserved, preferred or first free), IPv6,
/// MAC, counters and the endpoint record; with labels, also the providers of the tenant's
/// services (as updateEndpoint's `start` event); with `reserve`, the host's reserve topped up.
pub async fn create_endpoint_in(tx: &mut Tx<'_>, ne: &NewEndpoint) -> Result<EndpointResponse> {
    let net_id = CfgNetworkState::id_for(&ne.tenant, &ne.network);
    let ep_id = CfgEndpointState::id_for(&net_id, &ne.container);
    let ep_key = CfgEndpointState::key_for(&ep_id);
    if let Some(mut existing) = tx
        .get::<CfgEndpointState>(&ep_key, CfgEndpointState::KIND)
        .await?
    {
        if !ne.labels.is_empty() && existing.labels != ne.labels {
            let before = existing.clone();
            existing.labels = ne.labels.clone();
            tx.put(&ep_key, CfgEndpointState::KIND, &existing)?;
            follow_endpoint(tx, &ne.tenant, Some(&before), Some(&existing)).await?;
        }
        return Ok(EndpointResponse {
            EndpointConfig: existing,
            ..EndpointResponse::default()
        });
    }
    let net = load_net_state(tx, &ne.tenant, &ne.network).await?;
    let epg = if ne.group.is_empty() {
        None
    } else {
        Some(load_epg_state(tx, &ne.tenant, &ne.group).await?)
    };
    if let Some(g) = &epg
        && g.network_name != ne.network
    {
        return Err(Error::invalid(
            "ServiceName",
            format!(
                "endpoint group {} is on network {}, not {}",
                ne.group, g.network_name, ne.network
            ),
        ));
    }
    let mut t = Target { net, epg };
    let own_pool = t.has_own_pool();
    // An address handed out by allocAddress, or in this host's reserve, is already marked
    // used: claim the reservation (a host's reserve holds network addresses, so not for a
    // group with its own pool).
    let claimed = match ne.preferred {
        Some(ip) => {
            let host = (!own_pool).then_some(ne.host.as_str());
            reservations::claim(tx, &mut t.net, ip, host).await?
        }
        None => Claimed::Nothing,
    };
    let (ip, reserved6) = match (ne.preferred, claimed) {
        (Some(ip), Claimed::Anyone) => (ip, None),
        (Some(ip), Claimed::Reserve(ip6)) => {
            t.net.reserve_generation += 1;
            (ip, ip6)
        }
        (None, _) if !own_pool => match take_network_address(tx, &mut t.net).await? {
            Some(ip) => (ip, None),
            // Nothing free: take from a host's reserve rather than fail.
            None => match reserve::take_from_any(tx, &mut t.net).await? {
                Some(found) => found,
                None => (take_address(tx, &mut t, None).await?, None),
            },
        },
        (other, _) => (take_address(tx, &mut t, other).await?, None),
    };
    let mut ipv6_address = String::new();
    if let Some(mut map6) = Ipv6Map::network(&mut t.net)? {
        let ip6 = match (reserved6, ne.preferred6) {
            (Some(ip6), None) => ip6,
            (Some(ip6), Some(p)) if p == ip6 => ip6,
            (reserved6, preferred6) => {
                // The reserve's IPv6 address goes back when another one was asked for.
                if let Some(r) = reserved6 {
                    map6.release(tx, r).await?;
                }
                let mut last = t.net.ipv6_last_host.clone();
                let ip6 = map6.allocate(tx, &mut last, preferred6).await?;
                t.net.ipv6_last_host = last;
                ip6
            }
        };
        map6.save(tx).await?;
        ipv6_address = ip6.to_string();
    }
    t.net.ep_count += 1;
    if let Some(g) = &mut t.epg {
        g.ep_count += 1;
    }
    let ep = CfgEndpointState {
        id: ep_id.clone(),
        net_id,
        endpoint_id: ne.endpoint_id.clone(),
        service_name: ne.group.clone(),
        endpoint_group_id: t.epg.as_ref().map_or(0, |g| g.endpoint_group_id),
        endpoint_group_key: t.epg.as_ref().map_or(String::new(), |g| g.id.clone()),
        ip_address: ip.to_string(),
        ipv6_address,
        mac_address: mac_from_ipv4(ip),
        homing_host: ne.host.clone(),
        container_id: ne.container.clone(),
        ep_common_name: ne.common_name.clone(),
        labels: ne.labels.clone(),
        ..Default::default()
    };
    let host_reserve = if ne.reserve > 0 {
        Some(reserve::top_up(tx, &mut t, &ne.host, ne.reserve).await?)
    } else {
        None
    };
    save_target(tx, &t)?;
    tx.put(&ep_key, CfgEndpointState::KIND, &ep)?;
    if !ep.labels.is_empty() {
        follow_endpoint(tx, &ne.tenant, None, Some(&ep)).await?;
    }
    Ok(EndpointResponse::new(ep, host_reserve, &t.net))
}

/// The first free address of the network's own map, marked used; `None` when it has none
/// left (the map is saved either way: loading it may have converted the previous layout).
async fn take_network_address(
    tx: &mut Tx<'_>,
    net: &mut CfgNetworkState,
) -> Result<Option<Ipv4Addr>> {
    let subnet = net.subnet()?;
    let mut map = AddrMap::network(net)?;
    let ip = match map.first_free(tx).await? {
        Some(_) => Some(map.allocate(tx, &subnet, None).await?),
        None => None,
    };
    addr_map::save_network(tx, &mut map, net).await?;
    if ip.is_some() {
        net.ep_addr_count += 1;
    }
    Ok(ip)
}

/// Delete an endpoint inside a transaction: free its addresses, fix counters, drop it from
/// services. With `reserve`, its addresses go to its host's reserve instead (the host's lowest
/// `reserve` addresses are kept, the rest freed), so the host's next pod gets the lowest
/// address, as the network's first free one would be.
pub async fn delete_endpoint_in(
    tx: &mut Tx<'_>,
    ep_id: &str,
    reserve: u32,
) -> Result<EndpointResponse> {
    let ep_key = CfgEndpointState::key_for(ep_id);
    let ep = tx
        .get::<CfgEndpointState>(&ep_key, CfgEndpointState::KIND)
        .await?
        .ok_or_else(|| Error::not_found(format!("endpoint {ep_id} not found")))?;
    let net = load_net_by_id(tx, &ep.net_id)
        .await?
        .ok_or_else(|| Error::not_found(format!("network {} not found", ep.net_id)))?;
    let epg = if ep.endpoint_group_key.is_empty() {
        None
    } else {
        tx.get::<EndpointGroupState>(
            &EndpointGroupState::key_for(&ep.endpoint_group_key),
            EndpointGroupState::KIND,
        )
        .await?
    };
    let mut t = Target { net, epg };
    let ip = ep.ip_address.parse::<Ipv4Addr>().ok();
    let ip6 = ep.ipv6_address.parse::<Ipv6Addr>().ok();
    let host_reserve = match ip {
        Some(ip) if reserve > 0 && !t.has_own_pool() && !ep.homing_host.is_empty() => {
            Some(reserve::keep(tx, &mut t.net, &ep.homing_host, ip, ip6, reserve).await?)
        }
        _ => {
            if let Some(ip) = ip {
                give_back_address(tx, &mut t, ip).await?;
            }
            give_back_to_network(tx, &mut t.net, None, ip6).await?;
            None
        }
    };
    t.net.ep_count = t.net.ep_count.saturating_sub(1);
    if let Some(g) = &mut t.epg {
        g.ep_count = g.ep_count.saturating_sub(1);
    }
    save_target(tx, &t)?;
    tx.delete(&ep_key);
    if !ep.labels.is_empty() {
        follow_endpoint(tx, &t.net.tenant, Some(&ep), None).await?;
    }
    Ok(EndpointResponse::new(ep, host_reserve, &t.net))
}

/// The endpoint id a deleteEndpoint request names.
pub fn endpoint_id_of(req: &DeleteEndpointRequest) -> String {
    CfgEndpointState::id_for(
        &CfgNetworkState::id_for(&req.TenantName, &req.NetworkName),
        &req.EndpointID,
    )
}

/// `POST /plugin/deleteEndpoint` without batching.
pub async fn delete_endpoint(db: &Db, req: &DeleteEndpointRequest) -> Result<CfgEndpointState> {
    let ep_id = endpoint_id_of(req);
    db.write(async |tx| delete_endpoint_in(tx, &ep_id, req.ReserveAddresses).await)
        .await
        .map(|r| r.EndpointConfig)
}

/// `POST /plugin/updateEndpoint`: record a container's labels ("start") or forget them ("die"), and
/// recompute the providers of the tenant's services.
pub async fn update_endpoint(
    db: &Db,
    req: &UpdateEndpointRequest,
) -> Result<UpdateEndpointResponse> {
    db.write(async |tx| {
        let net_id = CfgNetworkState::id_for(&req.Tenant, &req.Network);
        let direct = CfgEndpointState::key_for(&CfgEndpointState::id_for(&net_id, &req.EndpointID));
        let mut ep = match tx
            .get::<CfgEndpointState>(&direct, CfgEndpointState::KIND)
            .await?
        {
            Some(ep) => ep,
            None => tx
                .list::<CfgEndpointState>(
                    &format!("{}{net_id}-", keys::state_prefix(keys::category::EPS)),
                    CfgEndpointState::KIND,
                )
                .await?
                .into_iter()
                .find(|e| {
                    e.endpoint_id == req.EndpointID
                        || (!req.IPAddress.is_empty() && e.ip_address == strip_len(&req.IPAddress))
                })
                .ok_or_else(|| {
                    Error::not_found(format!(
                        "endpoint {} not found in network {net_id}",
                        req.EndpointID
                    ))
                })?,
        };
        let before = ep.clone();
        match req.Event.as_str() {
            "start" => {
                ep.labels = req.Labels.clone();
                if !req.ContainerID.is_empty() {
                    ep.container_id = req.ContainerID.clone();
                }
                if !req.EPCommonName.is_empty() {
                    ep.ep_common_name = req.EPCommonName.clone();
                }
            }
            "die" => ep.labels.clear(),
            other => {
                return Err(Error::invalid(
                    "Event",
                    format!("{other:?} must be start or die"),
                ));
            }
        }
        tx.put(
            &CfgEndpointState::key_for(&ep.id),
            CfgEndpointState::KIND,
            &ep,
        )?;
        follow_endpoint(tx, &req.Tenant, Some(&before), Some(&ep)).await?;
        Ok(UpdateEndpointResponse {
            IPAddress: ep.ip_address,
        })
    })
    .await
}

/// `GET /api/v1/inspect/endpoints/{key}/`: the first endpoint whose endpoint id, container id or
/// common name contains `key`.
pub async fn inspect_endpoint(db: &Db, key: &str) -> Result<Value> {
    db.read(async |tx| {
        let eps = tx
            .list::<CfgEndpointState>(
                &keys::state_prefix(keys::category::EPS),
                CfgEndpointState::KIND,
            )
            .await?;
        let ep = eps
            .into_iter()
            .find(|e| {
                e.endpoint_id.contains(key)
                    || e.container_id.contains(key)
                    || e.ep_common_name.contains(key)
            })
            .ok_or_else(|| Error::not_found(format!("endpoint {key} not found")))?;
        let mut oper = endpoint_oper(&ep);
        if let Some(port) = tx
            .get::<Value>(
                &keys::oper(keys::category::EPS, &ep.id),
                "OperEndpointState",
            )
            .await?
            && let Some(name) = port.get("portName").and_then(Value::as_str)
            && !name.is_empty()
        {
            oper["virtualPort"] = json!(format!("v{name}"));
        }
        Ok(json!({ "Oper": oper }))
    })
    .await
}

/// `DELETE /debug/epcleanup/tenant/{tenant}/{category}/{id}`: delete the endpoints of a network
/// (`net`), a group (`group`) or whose endpoint id contains `id` (`ep`). Returns the deleted ones.
pub async fn cleanup(
    db: &Db,
    tenant: &str,
    category: &str,
    id: &str,
) -> Result<Vec<CfgEndpointState>> {
    if !matches!(category, "net" | "group" | "ep") {
        return Err(Error::invalid(
            "category",
            format!("{category:?} must be net, group or ep"),
        ));
    }
    db.write(async |tx| {
        let suffix = format!(".{tenant}");
        let eps = tx
            .list::<CfgEndpointState>(
                &keys::state_prefix(keys::category::EPS),
                CfgEndpointState::KIND,
            )
            .await?;
        let victims: Vec<String> = eps
            .into_iter()
            .filter(|e| e.net_id.ends_with(&suffix))
            .filter(|e| match category {
                "net" => e.net_id == CfgNetworkState::id_for(tenant, id),
                "group" => e.endpoint_group_key == EndpointGroupState::id_for(tenant, id),
                _ => e.endpoint_id.contains(id),
            })
            .map(|e| e.id)
            .collect();
        let mut deleted = Vec::new();
        for ep_id in victims {
            deleted.push(delete_endpoint_in(tx, &ep_id, 0).await?.EndpointConfig);
        }
        Ok(deleted)
    })
    .await
}
