//! An IPv4 allocation map kept in fixed-size chunks, one etcd key each:
//! `/contiv.io/state/ipAlloc/<net|epg>/<state id>/<chunk>` holds bits `chunk * 4096 ..` of the map
//! (Contiv's bitset JSON, at most ~700 bytes). Not in Contiv, which kept the whole map in the
//! network's (or group's) state record, so every allocation rewrote up to 175 KB (a /12).
//!
//! A chunk equal to its *fresh* content (network, broadcast, gateway and hosts outside the
//! allocation range or pool used, everything else free) is not stored: a new network writes no
//! chunk, and a chunk whose addresses all came back is deleted. The owner record keeps one bit per
//! chunk saying "this chunk has no free address" (`ipAllocFull`, 32 bytes for a /12), so finding a
//! free address reads one chunk. An allocation therefore reads and writes the owner record and one
//! chunk; both are guarded by the transaction, so two allocations of the same address conflict and
//! one of them re-runs.
//!
//! The previous layout (the whole map in `ipAllocMap` / `epgIpAllocMap`) is converted the first
//! time a transaction loads the map ([`AddrMap::save`] then writes the chunks that differ from
//! their fresh content and empties the old field) or at leader start ([`convert_all`]).

use std::net::Ipv4Addr;

use crate::error::{Error, Result};
use crate::resources::Bitset;
use crate::resources::ipv4::SubnetSpec;
pub use crate::state::chunks::CHUNK_BITS;
use crate::state::chunks::ChunkStore;
use crate::state::{CfgNetworkState, EndpointGroupState};
use crate::store::{Tx, keys};

/// Category under `/contiv.io/state/`.
pub const CATEGORY: &str = "ipAlloc";

/// What a fresh map holds: which hosts are used before any allocation.
#[derive(Debug, Clone)]
struct Layout {
    size: u64,
    /// Allocatable hosts (inclusive); everything outside is used in the fresh map.
    lo: u64,
    hi: u64,
    /// Further hosts used in the fresh map (the gateway).
    reserved: Vec<u64>,
}

impl Layout {
    fn chunk_count(&self) -> u64 {
        self.size.div_ceil(CHUNK_BITS)
    }

    fn chunk_len(&self, c: u64) -> u64 {
        (self.size - c * CHUNK_BITS).min(CHUNK_BITS)
    }

    /// A chunk as a fresh map has it.
    fn fresh_chunk(&self, c: u64) -> Bitset {
        let start = c * CHUNK_BITS;
        let len = self.chunk_len(c);
        let mut b = Bitset::new(len);
        // Below `lo` and above `hi`: not for hand-out.
        if self.lo > start {
            b.set_range(0, self.lo - start - 1);
        }
        if self.hi < start + len - 1 {
            b.set_range((self.hi + 1).saturating_sub(start), len - 1);
        }
        for &r in &self.reserved {
            if (start..start + len).contains(&r) {
                b.set(r - start);
            }
        }
        b
    }

    /// Whether a fresh chunk `c` has no address to hand out, without building it when the
    /// answer is plain (the chunk's part of `lo..=hi` is empty, or larger than the reserved
    /// addresses could cover).
    fn fresh_chunk_full(&self, c: u64) -> bool {
        let start = c * CHUNK_BITS;
        let end = start + self.chunk_len(c); // exclusive
        let (from, to) = (self.lo.max(start), self.hi.min(end.saturating_sub(1)));
        if from > to || end == start {
            return true;
        }
        let reserved_here = self
            .reserved
            .iter()
            .filter(|r| (from..=to).contains(*r))
            .count();
        if (to - from + 1) > reserved_here as u64 {
            return false;
        }
        self.fresh_chunk(c).next_clear(0).is_none()
    }
}

/// One allocation map being read and changed inside a transaction.
#[derive(Debug, Clone)]
pub struct AddrMap {
    layout: Layout,
    /// One bit per chunk: no free address in it.
    full: Bitset,
    store: ChunkStore<u64>,
}

/// Key prefix of a network's map.
pub fn network_prefix(net_id: &str) -> String {
    keys::state(CATEGORY, &format!("net/{net_id}/"))
}

/// Key prefix of an endpoint group pool's map.
pub fn group_prefix(epg_id: &str) -> String {
    keys::state(CATEGORY, &format!("epg/{epg_id}/"))
}

/// The key of the first chunk of the map under `prefix` (to read it ahead).
pub fn first_chunk_key(prefix: &str) -> String {
    ChunkStore::<u64>::key_of(prefix, 0)
}

impl AddrMap {
    fn new(prefix: String, size: u64, lo: u64, hi: u64, reserved: Vec<u64>) -> Self {
        let layout = Layout {
            size,
            lo,
            hi,
            reserved,
        };
        let mut full = Bitset::new(layout.chunk_count());
        for c in 0..layout.chunk_count() {
            if layout.fresh_chunk_full(c) {
                full.set(c);
            }
        }
        AddrMap {
            layout,
            full,
            store: ChunkStore::new(prefix, "address map chunk"),
        }
    }

    /// A network's map. Takes the previous layout's `ipAllocMap` out of `state` if it has one.
    pub fn network(state: &mut CfgNetworkState) -> Result<Self> {
        let subnet = state.subnet()?;
        let size = subnet.size();
        let (lo, hi) = match subnet.range {
            Some((a, b)) => (
                subnet.index_of(a).unwrap_or(1),
                subnet.index_of(b).unwrap_or(size.saturating_sub(2)),
            ),
            None => (1, size.saturating_sub(2)),
        };
        let reserved = match state.gateway.parse::<Ipv4Addr>() {
            Ok(gw) => subnet.index_of(gw).into_iter().collect(),
            Err(_) => Vec::new(),
        };
        let mut m = AddrMap::new(network_prefix(&state.id), size, lo, hi, reserved);
        let legacy = std::mem::take(&mut state.ip_alloc_map);
        if !legacy.is_empty() {
            m.adopt(&legacy);
        } else if state.ip_alloc_full.len() == m.full.len() {
            m.full = state.ip_alloc_full.clone();
        }
        Ok(m)
    }

    /// The map of a group's ipPool (`None` without a pool). Takes the previous layout's
    /// `epgIpAllocMap` out of `state` if it has one.
    pub fn group(state: &mut EndpointGroupState, subnet: &SubnetSpec) -> Result<Option<Self>> {
        if state.ip_pool.is_empty() {
            return Ok(None);
        }
        let (a, b) = crate::resources::ipv4::parse_pool("ipPool", &state.ip_pool)?;
        let (Some(lo), Some(hi)) = (subnet.index_of(a), subnet.index_of(b)) else {
            return Err(Error::invalid(
                "ipPool",
                format!(
                    "{} is not inside subnet {}/{}",
                    state.ip_pool, subnet.network, subnet.len
                ),
            ));
        };
        let mut m = AddrMap::new(group_prefix(&state.id), subnet.size(), lo, hi, Vec::new());
        let legacy = std::mem::take(&mut state.epg_ip_alloc_map);
        if !legacy.is_empty() {
            m.adopt(&legacy);
        } else if state.epg_ip_alloc_full.len() == m.full.len() {
            m.full = state.epg_ip_alloc_full.clone();
        }
        Ok(Some(m))
    }

    /// Take every bit from a whole map of the previous layout.
    fn adopt(&mut self, whole: &Bitset) {
        let mut chunks = Vec::new();
        for c in 0..self.layout.chunk_count() {
            let start = c * CHUNK_BITS;
            let mut chunk = Bitset::new(self.layout.chunk_len(c));
            for i in whole.ones().skip_while(|&i| i < start) {
                if i >= start + CHUNK_BITS {
                    break;
                }
                chunk.set(i - start);
            }
            self.set_full_bit(c, &chunk);
            let changed = chunk != self.layout.fresh_chunk(c);
            chunks.push((c, chunk, changed));
        }
        self.store.adopt(chunks);
    }

    fn set_full_bit(&mut self, c: u64, chunk: &Bitset) {
        if chunk.next_clear(0).is_none() {
            self.full.set(c);
        } else {
            self.full.clear(c);
        }
    }

    async fn chunk(&mut self, tx: &mut Tx<'_>, c: u64) -> Result<&mut Bitset> {
        let layout = &self.layout;
        self.store
            .get(tx, c, layout.chunk_len(c), || layout.fresh_chunk(c))
            .await
    }

    /// Whether host `i` is used (out of range reads as used).
    pub async fn test(&mut self, tx: &mut Tx<'_>, i: u64) -> Result<bool> {
        if i >= self.layout.size {
            return Ok(true);
        }
        Ok(self.chunk(tx, i / CHUNK_BITS).await?.test(i % CHUNK_BITS))
    }

    /// Mark host `i` used (`true`) or free.
    pub async fn put(&mut self, tx: &mut Tx<'_>, i: u64, used: bool) -> Result<()> {
        if i >= self.layout.size {
            return Ok(());
        }
        let c = i / CHUNK_BITS;
        let chunk = self.chunk(tx, c).await?;
        if chunk.test(i % CHUNK_BITS) == used {
            return Ok(());
        }
        if used {
            chunk.set(i % CHUNK_BITS);
        } else {
            chunk.clear(i % CHUNK_BITS);
        }
        let chunk = chunk.clone();
        self.set_full_bit(c, &chunk);
        self.store.touch(c);
        Ok(())
    }

    /// The first free host, reading only chunks that have one.
    pub async fn first_free(&mut self, tx: &mut Tx<'_>) -> Result<Option<u64>> {
        let mut from = 0;
        while let Some(c) = self.full.next_clear(from) {
            let chunk = self.chunk(tx, c).await?;
            if let Some(j) = chunk.next_clear(0) {
                return Ok(Some(c * CHUNK_BITS + j));
            }
            // The summary was behind (it is rewritten with the chunk): fix it on save.
            self.full.set(c);
            from = c + 1;
        }
        Ok(None)
    }

    /// The first used host in `a..=b`.
    pub async fn first_used_in(&mut self, tx: &mut Tx<'_>, a: u64, b: u64) -> Result<Option<u64>> {
        let mut i = a;
        while i <= b && i < self.layout.size {
            let c = i / CHUNK_BITS;
            let start = c * CHUNK_BITS;
            let chunk = self.chunk(tx, c).await?;
            if let Some(j) = chunk.next_set(i - start)
                && start + j <= b
            {
                return Ok(Some(start + j));
            }
            i = start + CHUNK_BITS;
        }
        Ok(None)
    }

    /// Every used host (reads every stored chunk; for inspection).
    pub async fn used(&mut self, tx: &mut Tx<'_>) -> Result<Bitset> {
        let mut whole = Bitset::new(self.layout.size);
        for c in 0..self.layout.chunk_count() {
            let start = c * CHUNK_BITS;
            for j in self.chunk(tx, c).await?.ones() {
                whole.set(start + j);
            }
        }
        Ok(whole)
    }

    /// Take `preferred` (must be free) or the first free host; Contiv's messages.
    pub async fn allocate(
        &mut self,
        tx: &mut Tx<'_>,
        subnet: &SubnetSpec,
        preferred: Option<Ipv4Addr>,
    ) -> Result<Ipv4Addr> {
        let index = match preferred {
            Some(ip) => {
                let i = subnet.index_of(ip).ok_or_else(|| {
                    Error::invalid(
                        "ipAddress",
                        format!("{ip} is outside {}/{}", subnet.network, subnet.len),
                    )
                })?;
                if self.test(tx, i).await? {
                    return Err(Error::conflict(format!(
                        "requested address {ip} is already allocated or reserved"
                    )));
                }
                i
            }
            None => self.first_free(tx).await?.ok_or_else(|| {
                Error::conflict(format!(
                    "auto allocation failed - address exhaustion in subnet {}/{}",
                    subnet.network, subnet.len
                ))
            })?,
        };
        self.put(tx, index, true).await?;
        Ok(subnet.ip_at(index))
    }

    /// Free `ip`. Network and broadcast addresses are never freed.
    pub async fn release(
        &mut self,
        tx: &mut Tx<'_>,
        subnet: &SubnetSpec,
        ip: Ipv4Addr,
    ) -> Result<()> {
        let i = subnet.index_of(ip).ok_or_else(|| {
            Error::invalid(
                "ipAddress",
                format!("{ip} is outside {}/{}", subnet.network, subnet.len),
            )
        })?;
        if i != 0 && i != subnet.size() - 1 {
            self.put(tx, i, false).await?;
        }
        Ok(())
    }

    /// Buffer the changed chunks (a chunk back to its fresh content is deleted). The caller saves
    /// the owner record, into which [`AddrMap::full`] goes. Converting the previous layout may write
    /// more chunks than one etcd transaction takes: those are written as derived records (before
    /// the owner record that empties the old field), and chunks left by an earlier, failed
    /// conversion are deleted.
    pub async fn save(&mut self, tx: &mut Tx<'_>) -> Result<()> {
        let layout = &self.layout;
        self.store.save(tx, |c| layout.fresh_chunk(c)).await
    }

    /// The "no free address" bit per chunk, for the owner record.
    pub fn full(&self) -> &Bitset {
        &self.full
    }

    /// Buffer the deletes of every stored chunk (the owner is being deleted).
    pub async fn delete_all(&mut self, tx: &mut Tx<'_>) -> Result<()> {
        self.store.delete_all(tx).await
    }
}

/// Load a network's map, do `f`, save map and network state (the network state is written only
/// by the caller's `save_state`; this sets its summary).
pub async fn save_network(
    tx: &mut Tx<'_>,
    map: &mut AddrMap,
    state: &mut CfgNetworkState,
) -> Result<()> {
    map.save(tx).await?;
    state.ip_alloc_full = map.full().clone();
    Ok(())
}

/// Save a group pool's map and set its summary in the group state.
pub async fn save_group(
    tx: &mut Tx<'_>,
    map: &mut AddrMap,
    state: &mut EndpointGroupState,
) -> Result<()> {
    map.save(tx).await?;
    state.epg_ip_alloc_full = map.full().clone();
    Ok(())
}

/// Convert every network and group state still holding a whole map (the previous layout; the
/// IPv4 map, the reservations and the IPv6 map, `addr_map6`), one transaction each. Returns how many were converted.
pub async fn convert_all(db: &crate::store::txn::Db) -> Result<usize> {
    let mut converted = 0;
    let nets: Vec<String> = db
        .read(async |tx| {
            Ok::<_, Error>(
                tx.list::<CfgNetworkState>(
                    &keys::state_prefix(keys::category::NETS),
                    CfgNetworkState::KIND,
                )
                .await?
                .into_iter()
                .filter(|n| {
                    !n.ip_alloc_map.is_empty()
                        || !n.ip_reservations.is_empty()
                        || !n.ipv6_alloc_map.is_empty()
                })
                .map(|n| n.id)
                .collect(),
            )
        })
        .await?;
    for id in nets {
        db.write(async |tx| {
            let key = CfgNetworkState::key_for(&id);
            let Some(mut state) = tx
                .get::<CfgNetworkState>(&key, CfgNetworkState::KIND)
                .await?
            else {
                return Ok::<_, Error>(());
            };
            let mut map = AddrMap::network(&mut state)?;
            crate::state::reservations::convert(tx, &mut state)?;
            save_network(tx, &mut map, &mut state).await?;
            if let Some(mut map6) = crate::state::addr_map6::Ipv6Map::network(&mut state)? {
                map6.save(tx).await?;
            }
            tx.put(&key, CfgNetworkState::KIND, &state)?;
            Ok(())
        })
        .await?;
        converted += 1;
    }
    let groups: Vec<(String, String, String)> = db
        .read(async |tx| {
            Ok::<_, Error>(
                tx.list::<EndpointGroupState>(
                    &keys::state_prefix(keys::category::EPGS),
                    EndpointGroupState::KIND,
                )
                .await?
                .into_iter()
                .filter(|g| !g.epg_ip_alloc_map.is_empty())
                .map(|g| (g.id, g.tenant_name, g.network_name))
                .collect(),
            )
        })
        .await?;
    for (id, tenant, network) in groups {
        db.write(async |tx| {
            let key = EndpointGroupState::key_for(&id);
            let Some(mut state) = tx
                .get::<EndpointGroupState>(&key, EndpointGroupState::KIND)
                .await?
            else {
                return Ok::<_, Error>(());
            };
            let net = crate::model::network::load_state(tx, &tenant, &network).await?;
            let subnet = net.subnet()?;
            if let Some(mut map) = AddrMap::group(&mut state, &subnet)? {
                save_group(tx, &mut map, &mut state).await?;
            }
            tx.put(&key, EndpointGroupState::KIND, &state)?;
            Ok(())
        })
        .await?;
        converted += 1;
    }
    Ok(converted)
}

/// Every used host of a network's map (inspection and tests).
pub async fn network_used(tx: &mut Tx<'_>, state: &CfgNetworkState) -> Result<Bitset> {
    let mut s = state.clone();
    AddrMap::network(&mut s)?.used(tx).await
}

/// Every used host of a group pool's map (empty without a pool).
pub async fn group_used(
    tx: &mut Tx<'_>,
    state: &EndpointGroupState,
    subnet: &SubnetSpec,
) -> Result<Bitset> {
    let mut s = state.clone();
    match AddrMap::group(&mut s, subnet)? {
        Some(mut m) => m.used(tx).await,
        None => Ok(Bitset::new(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fresh chunk bit by bit, as the definition says.
    fn reference(l: &Layout, c: u64) -> Bitset {
        let start = c * CHUNK_BITS;
        let len = l.chunk_len(c);
        let mut b = Bitset::new(len);
        for j in 0..len {
            let i = start + j;
            if i < l.lo || i > l.hi || l.reserved.contains(&i) {
                b.set(j);
            }
        }
        b
    }

    #[test]
    fn fresh_chunks_and_full_chunks_match_the_definition() {
        let layouts = [
            (256, 1, 254, vec![]),
            (256, 1, 254, vec![254]),
            (65_536, 1, 65_534, vec![1]),
            (65_536, 4_000, 4_200, vec![]),
            (65_536, 4_095, 4_096, vec![4_095, 4_096]),
            (65_536, 8_192, 12_287, vec![8_192]),
            (10_000, 0, 9_999, vec![]),
            (4_097, 4_096, 4_096, vec![4_096]),
            (8, 3, 2, vec![]),
        ];
        for (size, lo, hi, reserved) in layouts {
            let l = Layout {
                size,
                lo,
                hi,
                reserved,
            };
            for c in 0..l.chunk_count() {
                let want = reference(&l, c);
                assert_eq!(l.fresh_chunk(c), want, "{l:?} chunk {c}");
                assert_eq!(
                    l.fresh_chunk_full(c),
                    want.next_clear(0).is_none(),
                    "{l:?} chunk {c}"
                );
            }
        }
    }
}
