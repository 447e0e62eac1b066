//! Addresses marked used in a network's map but not yet bound to an endpoint (not in Contiv): one
//! key each, `/contiv.io/state/ipReservations/<network id>/<address>`, so the set can grow without
//! growing the network's state record. Two kinds:
//! - handed out by `/plugin/allocAddress` (value `true`): any createEndpoint naming the address
//!   claims it;
//! - a host's reserve (value [`HostReservation`]): addresses a netplugin holds ahead of its next
//!   pods (`crate::endpoint::reserve`), claimable only by a createEndpoint from that host.
//!
//! The previous layout kept allocAddress's reservations in the network state's
//! `ipReservations`; those are still honoured and moved to keys at leader start.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::state::CfgNetworkState;
use crate::store::txn::decode;
use crate::store::{Tx, keys};

/// Category under `/contiv.io/state/`.
pub const CATEGORY: &str = "ipReservations";
const KIND: &str = "address reservation";

/// Key prefix of a network's reservations.
pub fn prefix(net_id: &str) -> String {
    keys::state(CATEGORY, &format!("{net_id}/"))
}

/// The key of `ip`'s reservation.
pub fn key(net_id: &str, ip: Ipv4Addr) -> String {
    format!("{}{ip}", prefix(net_id))
}

/// A host's reserved address: which host holds it and, on a dual-stack network, the IPv6
/// address reserved with it (marked used in the network's IPv6 map).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct HostReservation {
    pub host: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ipv6_address: String,
}

impl HostReservation {
    /// `host`'s reservation, with the IPv6 address reserved beside the IPv4 one (if any).
    pub fn new(host: &str, ipv6: Option<Ipv6Addr>) -> Self {
        HostReservation {
            host: host.to_string(),
            ipv6_address: ipv6.map(|a| a.to_string()).unwrap_or_default(),
        }
    }

    pub fn ipv6(&self) -> Option<Ipv6Addr> {
        self.ipv6_address.parse().ok()
    }
}

/// Who a reservation is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// allocAddress's: whoever names the address.
    Anyone,
    /// A host's reserve.
    Host(HostReservation),
}

impl Holder {
    /// A reservation record as stored at `key`.
    pub fn decode(key: &str, bytes: &[u8]) -> Result<Self> {
        if bytes.trim_ascii() == b"true" {
            return Ok(Holder::Anyone);
        }
        Ok(Holder::Host(decode(key, KIND, bytes)?))
    }
}

/// What claiming an address found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// No reservation (or one the caller may not take): the address is allocated as usual.
    Nothing,
    /// allocAddress's reservation, now dropped.
    Anyone,
    /// The caller's host reserve, now dropped; with the IPv6 address reserved with it.
    Reserve(Option<Ipv6Addr>),
}

/// Record `ip` as reserved (allocAddress).
pub fn reserve(tx: &mut Tx<'_>, net_id: &str, ip: Ipv4Addr) -> Result<()> {
    Ok(tx.put(&key(net_id, ip), KIND, &true)?)
}

/// Record `ip` as part of a host's reserve.
pub fn reserve_for_host(
    tx: &mut Tx<'_>,
    net_id: &str,
    ip: Ipv4Addr,
    holder: &HostReservation,
) -> Result<()> {
    Ok(tx.put(&key(net_id, ip), KIND, holder)?)
}

/// Drop the reservation of `ip` if `host` may take it: allocAddress's by anyone, a host's
/// reserve by that host only (another host's answers a conflict naming the holder; `host`
/// `None` — releaseAddress — leaves a host's reserve alone).
pub async fn claim(
    tx: &mut Tx<'_>,
    state: &mut CfgNetworkState,
    ip: Ipv4Addr,
    host: Option<&str>,
) -> Result<Claimed> {
    if state.ip_reservations.remove(&ip.to_string()) {
        return Ok(Claimed::Anyone);
    }
    let k = key(&state.id, ip);
    let Some(bytes) = tx.get_raw(&k).await? else {
        return Ok(Claimed::Nothing);
    };
    match Holder::decode(&k, &bytes)? {
        Holder::Anyone => {
            tx.delete(&k);
            Ok(Claimed::Anyone)
        }
        Holder::Host(held) if Some(held.host.as_str()) == host => {
            tx.delete(&k);
            Ok(Claimed::Reserve(held.ipv6()))
        }
        Holder::Host(_) if host.is_none() => Ok(Claimed::Nothing),
        Holder::Host(held) => Err(Error::conflict(format!(
            "address {ip} is held in reserve by host {} for its next pods; leave the address \
             empty to get a free one",
            held.host
        ))),
    }
}

/// Every reservation of a network, by address (a guarded listing: a top-up decided on it
/// conflicts with any other change to the network's reservations).
pub async fn of_network(tx: &mut Tx<'_>, net_id: &str) -> Result<Vec<(Ipv4Addr, Holder)>> {
    let prefix = prefix(net_id);
    let mut out = Vec::new();
    for (k, v) in tx.list_raw(&prefix).await? {
        let Some(ip) = k.strip_prefix(&prefix).and_then(|a| a.parse().ok()) else {
            continue;
        };
        out.push((ip, Holder::decode(&k, &v)?));
    }
    Ok(out)
}

/// The addresses `host` holds in reserve on a network (each with its IPv6 partner), from the
/// guarded listing of [`of_network`].
pub async fn held_by(
    tx: &mut Tx<'_>,
    net_id: &str,
    host: &str,
) -> Result<Vec<(Ipv4Addr, Option<Ipv6Addr>)>> {
    Ok(of_network(tx, net_id)
        .await?
        .into_iter()
        .filter_map(|(ip, holder)| match holder {
            Holder::Host(r) if r.host == host => Some((ip, r.ipv6())),
            _ => None,
        })
        .collect())
}

/// Drop a reservation found by [`of_network`].
pub fn drop_reservation(tx: &mut Tx<'_>, net_id: &str, ip: Ipv4Addr) {
    tx.delete(&key(net_id, ip));
}

/// Move the previous layout's reservations out of the state record into keys.
pub fn convert(tx: &mut Tx<'_>, state: &mut CfgNetworkState) -> Result<()> {
    for ip in std::mem::take(&mut state.ip_reservations) {
        if let Ok(ip) = ip.parse::<Ipv4Addr>() {
            reserve(tx, &state.id, ip)?;
        }
    }
    Ok(())
}

/// Buffer the deletes of every reservation of a network being deleted.
pub async fn delete_all(tx: &mut Tx<'_>, net_id: &str) -> Result<()> {
    for (k, _) in tx.list_derived(&prefix(net_id)).await? {
        tx.delete_derived(&k);
    }
    Ok(())
}
