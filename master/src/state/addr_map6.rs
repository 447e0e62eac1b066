//! A network's IPv6 allocation map kept in fixed-size chunks, one etcd key each:
//! `/contiv.io/state/ipAlloc/net6/<network id>/<chunk>` holds host ids `chunk * 4096 ..` of the
//! network's IPv6 subnet as a bitset (Contiv's bitset JSON, at most ~700 bytes). Not in Contiv,
//! which listed every allocated host id in the network's state record (`ipv6AllocMap`, ~25 bytes
//! per IPv6 endpoint, so the record passed 64 KiB near 2,600 endpoints and every allocation
//! rewrote it).
//!
//! A chunk equal to its fresh content (free, but for the IPv6 gateway) is not stored: a new
//! network writes no chunk and a chunk whose addresses all came back is deleted. Allocation keeps
//! Contiv's order: the next free host id after the cursor `ipv6LastHost` (still in the network
//! record, a few bytes), wrapping within the subnet and never handing out host 0; so an
//! allocation reads and writes the network record and one chunk (the cursor's), both guarded by
//! the transaction. At most 2^20 host ids are probed, as before.
//!
//! The previous layout (`ipv6AllocMap`) is converted the first time a transaction loads the map
//! ([`Ipv6Map::save`] writes the chunks, before the network record that empties the old field)
//! and at leader start (`addr_map::convert_all`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;

use crate::error::{Error, Result};
use crate::resources::Bitset;
use crate::resources::ipv6::Ipv6Subnet;
use crate::state::CfgNetworkState;
use crate::state::addr_map::CATEGORY;
use crate::state::chunks::ChunkStore;
use crate::store::{Tx, keys};

/// Host ids per chunk.
pub const CHUNK_BITS: u128 = crate::state::chunks::CHUNK_BITS as u128;

/// Most host ids one allocation looks at before calling the subnet exhausted.
const PROBE_LIMIT: u128 = 1 << 20;

/// Key prefix of a network's IPv6 map.
pub fn network_prefix(net_id: &str) -> String {
    keys::state(CATEGORY, &format!("net6/{net_id}/"))
}

/// What a fresh IPv6 map holds: free but for the gateway.
#[derive(Debug, Clone)]
struct Layout {
    hosts: u128,
    gateway: Option<u128>,
}

impl Layout {
    fn chunk_len(&self, c: u128) -> u64 {
        let len = (self.hosts - c * CHUNK_BITS).min(CHUNK_BITS);
        u64::try_from(len).unwrap_or(4096)
    }

    /// A chunk as a fresh map has it: free but for the gateway.
    fn fresh_chunk(&self, c: u128) -> Bitset {
        let mut b = Bitset::new(self.chunk_len(c));
        if let Some(g) = self.gateway
            && g / CHUNK_BITS == c
        {
            b.set(offset(g));
        }
        b
    }
}

/// One network's IPv6 map being read and changed inside a transaction.
#[derive(Debug, Clone)]
pub struct Ipv6Map {
    subnet: Ipv6Subnet,
    layout: Layout,
    store: ChunkStore<u128>,
}

impl Ipv6Map {
    /// The IPv6 map of a network (`None` without an IPv6 subnet). Takes the previous layout's
    /// `ipv6AllocMap` out of `state` if it has one.
    pub fn network(state: &mut CfgNetworkState) -> Result<Option<Ipv6Map>> {
        if state.ipv6_subnet_ip.is_empty() {
            return Ok(None);
        }
        let subnet = Ipv6Subnet::parse(
            "ipv6Subnet",
            &format!("{}/{}", state.ipv6_subnet_ip, state.ipv6_subnet_len),
        )?;
        let gateway = state
            .ipv6_gateway
            .split('/')
            .next()
            .and_then(|g| g.parse::<Ipv6Addr>().ok())
            .filter(|g| subnet.contains(*g))
            .map(|g| u128::from(g) - u128::from(subnet.network));
        let mut map = Ipv6Map {
            subnet,
            layout: Layout {
                hosts: subnet.host_count(),
                gateway,
            },
            store: ChunkStore::new(network_prefix(&state.id), "IPv6 address map chunk"),
        };
        let legacy = std::mem::take(&mut state.ipv6_alloc_map);
        if !legacy.is_empty() {
            map.adopt(&legacy);
        }
        Ok(Some(map))
    }

    /// Take every host id of the previous layout's map.
    fn adopt(&mut self, whole: &BTreeMap<String, bool>) {
        let mut chunks: BTreeMap<u128, Bitset> = BTreeMap::new();
        for host in whole
            .iter()
            .filter(|(_, used)| **used)
            .filter_map(|(h, _)| h.parse::<u128>().ok())
            .filter(|h| *h < self.layout.hosts)
        {
            let c = host / CHUNK_BITS;
            chunks
                .entry(c)
                .or_insert_with(|| self.layout.fresh_chunk(c))
                .set(offset(host));
        }
        self.store
            .adopt(chunks.into_iter().map(|(c, chunk)| (c, chunk, true)));
    }

    async fn chunk(&mut self, tx: &mut Tx<'_>, c: u128) -> Result<&mut Bitset> {
        let layout = &self.layout;
        self.store
            .get(tx, c, layout.chunk_len(c), || layout.fresh_chunk(c))
            .await
    }

    async fn put(&mut self, tx: &mut Tx<'_>, host: u128, used: bool) -> Result<()> {
        let c = host / CHUNK_BITS;
        let chunk = self.chunk(tx, c).await?;
        if chunk.test(offset(host)) != used {
            if used {
                chunk.set(offset(host));
            } else {
                chunk.clear(offset(host));
            }
            self.store.touch(c);
        }
        Ok(())
    }

    /// Take `preferred` (must be free) or the next free host id after `last_host` (Contiv's
    /// order); `last_host` moves to the host taken.
    pub async fn allocate(
        &mut self,
        tx: &mut Tx<'_>,
        last_host: &mut String,
        preferred: Option<Ipv6Addr>,
    ) -> Result<Ipv6Addr> {
        let subnet = self.subnet;
        let host = match preferred {
            Some(ip) => {
                if !subnet.contains(ip) {
                    return Err(Error::invalid(
                        "ipv6Address",
                        format!("{ip} is outside {}/{}", subnet.network, subnet.len),
                    ));
                }
                let h = u128::from(ip) - u128::from(subnet.network);
                if self.chunk(tx, h / CHUNK_BITS).await?.test(offset(h)) {
                    return Err(Error::conflict(format!(
                        "requested IPv6 address {ip} is already allocated"
                    )));
                }
                h
            }
            None => self
                .next_free(tx, last_host.parse().unwrap_or(0))
                .await?
                .ok_or_else(|| {
                    Error::conflict(format!(
                        "IPv6 address exhaustion in subnet {}/{}",
                        subnet.network, subnet.len
                    ))
                })?,
        };
        self.put(tx, host, true).await?;
        *last_host = host.to_string();
        Ok(Ipv6Addr::from(u128::from(subnet.network) + host))
    }

    /// The first free host id after `start`, wrapping to 1, looking at most at
    /// [`PROBE_LIMIT`] ids (reading one chunk per 4,096).
    async fn next_free(&mut self, tx: &mut Tx<'_>, start: u128) -> Result<Option<u128>> {
        let hosts = self.layout.hosts;
        let mut budget = hosts.min(PROBE_LIMIT);
        let mut candidate = if start + 1 >= hosts { 1 } else { start + 1 };
        while budget > 0 {
            let c = candidate / CHUNK_BITS;
            let from = offset(candidate);
            let len = self.layout.chunk_len(c);
            let chunk = self.chunk(tx, c).await?;
            if let Some(j) = chunk.next_clear(from) {
                let skipped = u128::from(j - from);
                if skipped >= budget {
                    return Ok(None);
                }
                return Ok(Some(c * CHUNK_BITS + u128::from(j)));
            }
            budget = budget.saturating_sub(u128::from(len - from));
            let next = c * CHUNK_BITS + u128::from(len);
            candidate = if next >= hosts { 1 } else { next };
        }
        Ok(None)
    }

    /// Free `ip` (an address outside the subnet is ignored, as before).
    pub async fn release(&mut self, tx: &mut Tx<'_>, ip: Ipv6Addr) -> Result<()> {
        if !self.subnet.contains(ip) {
            return Ok(());
        }
        let host = u128::from(ip) - u128::from(self.subnet.network);
        if Some(host) == self.layout.gateway {
            return Ok(());
        }
        self.put(tx, host, false).await
    }

    /// Buffer the changed chunks (a chunk back to its fresh content is deleted). The caller saves
    /// the network record. Converting the previous layout writes the chunks as derived records
    /// (before the network record that empties the old field, however many there are) and
    /// deletes chunks left by an earlier, failed conversion.
    pub async fn save(&mut self, tx: &mut Tx<'_>) -> Result<()> {
        let layout = &self.layout;
        self.store.save(tx, |c| layout.fresh_chunk(c)).await
    }

    /// Every used host id (reads every stored chunk; for inspection and tests).
    pub async fn used(&self, tx: &mut Tx<'_>) -> Result<BTreeSet<u128>> {
        let mut out = BTreeSet::new();
        if let Some(g) = self.layout.gateway {
            out.insert(g);
        }
        for (c, chunk) in self.store.stored(tx).await? {
            out.extend(chunk.ones().map(|j| c * CHUNK_BITS + u128::from(j)));
        }
        for (c, chunk) in self.store.loaded() {
            out.retain(|h| h / CHUNK_BITS != c);
            out.extend(chunk.ones().map(|j| c * CHUNK_BITS + u128::from(j)));
        }
        Ok(out)
    }

    /// Buffer the deletes of every stored chunk (the network is being deleted).
    pub async fn delete_all(&mut self, tx: &mut Tx<'_>) -> Result<()> {
        self.store.delete_all(tx).await
    }
}

/// A host id's bit in its chunk.
fn offset(host: u128) -> u64 {
    u64::try_from(host % CHUNK_BITS).unwrap_or(0)
}
