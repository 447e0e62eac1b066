//! A host's address reserve (not in Contiv): a few addresses of a network a netplugin holds
//! ahead of its next pods, so a pod's flows can go to the switch before netmaster has answered
//! (docs/master.md, "Host address reserves").
//!
//! - A createEndpoint asking for `ReserveAddresses: n` from host `h` tops `h`'s reserve on the
//!   endpoint's network up to `n` in the same transaction and answers every address `h` holds
//!   there. Reserved addresses are marked used in the network's maps and have a reservation key
//!   naming `h` (`crate::state::reservations`), so no one else is handed them.
//! - A createEndpoint from `h` naming one of them in `ConfigEP.IPAddress` claims it (and the IPv6
//!   address reserved with it); from another host it is refused.
//! - When the network has no free address left, a createEndpoint that asked for none takes
//!   one from any host's reserve: a reserve never starves another host's pods (the holder's own
//!   claim then fails and it asks again without one).
//! - The reserves of a host whose netplugin is gone (no registration in two sweeps in a row)
//!   are given back by the leader ([`release_hosts`]), so a dead host leaks nothing.
//!
//! Each step is one transaction with the maps it changes: a crash at any point leaves an
//! address either free, reserved for one host, or bound to one endpoint.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use super::Target;
use crate::error::Result;
use crate::model::network::save_state as save_net_state;
use crate::state::CfgNetworkState;
use crate::state::addr_map6::Ipv6Map;
use crate::state::reservations::{self, Holder, HostReservation};
use crate::store::txn::Db;
use crate::store::{StateStore, Tx, keys};

/// Most addresses a host may hold in reserve on one network.
pub const MOST: u32 = 16;

/// One reserved address, as createEndpoint answers it.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ReservedAddress {
    pub IPv4Address: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub IPv6Address: String,
}

impl ReservedAddress {
    fn new(ip: Ipv4Addr, ip6: Option<Ipv6Addr>) -> Self {
        ReservedAddress {
            IPv4Address: ip.to_string(),
            IPv6Address: ip6.map(|a| a.to_string()).unwrap_or_default(),
        }
    }
}

/// Make `host` hold `want` (at most [`MOST`]) reserved addresses of the target's network,
/// fewer if the network runs out, and answer every address it holds there. Takes from the
/// network's maps (a group's own pool is never reserved from); the caller saves the target.
pub(super) async fn top_up(
    tx: &mut Tx<'_>,
    t: &mut Target,
    host: &str,
    want: u32,
) -> Result<Vec<ReservedAddress>> {
    let mut held = reservations::held_by(tx, &t.net.id, host).await?;
    let want = usize::try_from(want.min(MOST)).unwrap_or(0);
    while held.len() < want {
        let Some((ip, ip6)) = take_free(tx, &mut t.net).await? else {
            break;
        };
        reservations::reserve_for_host(tx, &t.net.id, ip, &HostReservation::new(host, ip6))?;
        t.net.reserve_generation += 1;
        held.push((ip, ip6));
    }
    Ok(held
        .into_iter()
        .map(|(ip, ip6)| ReservedAddress::new(ip, ip6))
        .collect())
}

/// The first free IPv4 address of the network (and the next IPv6 one on a dual-stack
/// network), marked used; `None` when either family has none left.
async fn take_free(
    tx: &mut Tx<'_>,
    net: &mut CfgNetworkState,
) -> Result<Option<(Ipv4Addr, Option<Ipv6Addr>)>> {
    let Some(ip) = super::take_network_address(tx, net).await? else {
        return Ok(None);
    };
    let Some(mut map6) = Ipv6Map::network(net)? else {
        return Ok(Some((ip, None)));
    };
    let mut last = net.ipv6_last_host.clone();
    let ip6 = match map6.allocate(tx, &mut last, None).await {
        Ok(ip6) => Some(ip6),
        // IPv6 exhausted: the IPv4 address goes back and nothing is reserved.
        Err(crate::error::Error::Conflict(_)) => None,
        Err(e) => return Err(e),
    };
    // Saved either way: loading the map may have converted the previous layout.
    map6.save(tx).await?;
    match ip6 {
        Some(ip6) => {
            net.ipv6_last_host = last;
            Ok(Some((ip, Some(ip6))))
        }
        None => {
            super::give_back_to_network(tx, net, Some(ip), None).await?;
            Ok(None)
        }
    }
}

/// For a network with no free IPv4 address: take one address (with its IPv6 one) out of any
/// host's reserve, for an endpoint that named none. The addresses stay marked used.
pub(super) async fn take_from_any(
    tx: &mut Tx<'_>,
    net: &mut CfgNetworkState,
) -> Result<Option<(Ipv4Addr, Option<Ipv6Addr>)>> {
    let found = reservations::of_network(tx, &net.id)
        .await?
        .into_iter()
        .find_map(|(ip, holder)| match holder {
            Holder::Host(r) => Some((ip, r.ipv6())),
            Holder::Anyone => None,
        });
    if let Some((ip, _)) = found {
        reservations::drop_reservation(tx, &net.id, ip);
        net.reserve_generation += 1;
    }
    Ok(found)
}

/// Every host reservation, by network id then host (one listing of every reservation: a few
/// per host and network).
async fn listed(
    store: &dyn StateStore,
) -> Result<BTreeMap<String, BTreeMap<String, Vec<Ipv4Addr>>>> {
    let all = keys::state(reservations::CATEGORY, "");
    let listing = crate::store::list_all(store, &all).await?;
    let mut out: BTreeMap<String, BTreeMap<String, Vec<Ipv4Addr>>> = BTreeMap::new();
    for kv in listing.entries {
        let Some((net_id, ip)) = kv.key.strip_prefix(&all).and_then(|r| r.rsplit_once('/')) else {
            continue;
        };
        let Ok(ip) = ip.parse::<Ipv4Addr>() else {
            continue;
        };
        // A record that does not decode is left to the transaction that meets it.
        if let Ok(Holder::Host(r)) = Holder::decode(&kv.key, &kv.value) {
            out.entry(net_id.to_string())
                .or_default()
                .entry(r.host)
                .or_default()
                .push(ip);
        }
    }
    Ok(out)
}

/// Give back every address the hosts `gone` hold in reserve on the networks of `held` (as
/// [`listed`]): one transaction per network, which re-reads each reservation (one claimed
/// meanwhile is left alone). Answers how many addresses came back.
async fn release_hosts(
    db: &Db,
    held: &BTreeMap<String, BTreeMap<String, Vec<Ipv4Addr>>>,
    gone: &BTreeSet<String>,
) -> Result<usize> {
    let mut released = 0;
    for (net_id, by_host) in held {
        if !by_host.keys().any(|h| gone.contains(h)) {
            continue;
        }
        released += db
            .write(async |tx| {
                let Some(mut net) = super::load_net_by_id(tx, net_id).await? else {
                    return Ok(0);
                };
                let mut n = 0;
                for (ip, holder) in reservations::of_network(tx, net_id).await? {
                    let Holder::Host(r) = holder else { continue };
                    if !gone.contains(&r.host) {
                        continue;
                    }
                    reservations::drop_reservation(tx, net_id, ip);
                    super::give_back_to_network(tx, &mut net, Some(ip), r.ipv6()).await?;
                    n += 1;
                }
                if n > 0 {
                    net.reserve_generation += 1;
                    save_net_state(tx, &net)?;
                }
                Ok::<_, crate::error::Error>(n)
            })
            .await?;
    }
    Ok(released)
}

/// One sweep of the leader's: the hosts holding a reserve without a netplugin registered
/// (`/contiv.io/service/netplugin/`) are noted; those noted by the sweep before too (so gone
/// for at least one sweep period, longer than a restart takes) get their reserves released.
/// `absent` carries the noted hosts from one sweep to the next. Answers the addresses released.
pub async fn sweep(db: &Db, absent: &mut BTreeSet<String>) -> Result<usize> {
    let live: BTreeSet<String> = crate::registry::list(db.store(), crate::registry::NETPLUGIN)
        .await?
        .into_iter()
        .map(|s| s.Hostname)
        .collect();
    let held = listed(db.store()).await?;
    let now_absent: BTreeSet<String> = held
        .values()
        .flat_map(|by_host| by_host.keys())
        .filter(|h| !live.contains(*h))
        .cloned()
        .collect();
    let gone: BTreeSet<String> = now_absent.intersection(absent).cloned().collect();
    *absent = now_absent;
    if gone.is_empty() {
        return Ok(0);
    }
    let released = release_hosts(db, &held, &gone).await?;
    tracing::info!(hosts = ?gone, released, "released the address reserves of hosts without a netplugin");
    absent.retain(|h| !gone.contains(h));
    Ok(released)
}

/// A deleted endpoint's addresses go to its host's reserve: they stay marked used with a
/// reservation for `host`; the host's addresses beyond its lowest `want` are freed. Answers
/// the reserve.
pub(super) async fn keep(
    tx: &mut Tx<'_>,
    net: &mut CfgNetworkState,
    host: &str,
    ip: Ipv4Addr,
    ip6: Option<Ipv6Addr>,
    want: u32,
) -> Result<Vec<ReservedAddress>> {
    reservations::reserve_for_host(tx, &net.id, ip, &HostReservation::new(host, ip6))?;
    net.reserve_generation += 1;
    let mut held = reservations::held_by(tx, &net.id, host).await?;
    held.sort();
    let want = usize::try_from(want.min(MOST)).unwrap_or(0);
    for (ip, ip6) in held.split_off(want.min(held.len())) {
        reservations::drop_reservation(tx, &net.id, ip);
        super::give_back_to_network(tx, net, Some(ip), ip6).await?;
    }
    Ok(held
        .into_iter()
        .map(|(ip, ip6)| ReservedAddress::new(ip, ip6))
        .collect())
}
