//! Addresses handed out by `/plugin/allocAddress` and not yet bound to an endpoint (not in
//! Contiv): one key each, `/contiv.io/state/ipReservations/<network id>/<address>`, so the set
//! can grow without growing the network's state record. The previous layout kept them in the
//! network state's `ipReservations`; those are still honoured and moved to keys at leader start.

use std::net::Ipv4Addr;

use crate::error::Result;
use crate::state::CfgNetworkState;
use crate::store::{Tx, keys};

/// Category under `/contiv.io/state/`.
pub const CATEGORY: &str = "ipReservations";
const KIND: &str = "address reservation";

/// Key prefix of a network's reservations.
pub fn prefix(net_id: &str) -> String {
    keys::state(CATEGORY, &format!("{net_id}/"))
}

fn key(net_id: &str, ip: Ipv4Addr) -> String {
    format!("{}{ip}", prefix(net_id))
}

/// Record `ip` as reserved.
pub fn reserve(tx: &mut Tx<'_>, net_id: &str, ip: Ipv4Addr) -> Result<()> {
    Ok(tx.put(&key(net_id, ip), KIND, &true)?)
}

/// Drop the reservation of `ip`; whether there was one.
pub async fn claim(tx: &mut Tx<'_>, state: &mut CfgNetworkState, ip: Ipv4Addr) -> Result<bool> {
    if state.ip_reservations.remove(&ip.to_string()) {
        return Ok(true);
    }
    let k = key(&state.id, ip);
    if tx.get_raw(&k).await?.is_some() {
        tx.delete(&k);
        return Ok(true);
    }
    Ok(false)
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
