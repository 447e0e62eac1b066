//! The storage both address maps share ([`super::addr_map`] for IPv4 networks and group pools,
//! [`super::addr_map6`] for IPv6 networks): a bitset split into chunks of [`CHUNK_BITS`], one
//! etcd key each (`<prefix><chunk index>`), read on first use inside a transaction and written
//! back when changed. A chunk equal to its *fresh* content (what the owning map says a new map
//! holds there) is never stored: reading a missing key gives the fresh chunk, and saving a chunk
//! back to it deletes the key.
//!
//! Converting an owner from the previous single-value layout ([`ChunkStore::adopt`]) marks every
//! chunk that differs from fresh; the next save writes them as derived records (however many —
//! they precede the owner record that empties the old field) and deletes chunks an earlier,
//! failed conversion left behind.
//!
//! The index type is the map's: `u64` for IPv4 (at most 2^32 addresses), `u128` for IPv6 host ids.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::resources::Bitset;
use crate::store::Tx;

/// Addresses (host ids) per chunk.
pub const CHUNK_BITS: u64 = 4096;

/// A chunk index.
pub trait ChunkIndex: Copy + Ord + Display + FromStr {}
impl ChunkIndex for u64 {}
impl ChunkIndex for u128 {}

/// The chunks of one map read or changed in this transaction.
#[derive(Debug, Clone)]
pub struct ChunkStore<I: ChunkIndex> {
    prefix: String,
    /// For messages and record kinds: "address map chunk", "IPv6 address map chunk".
    what: &'static str,
    chunks: BTreeMap<I, Bitset>,
    dirty: BTreeSet<I>,
    /// Converting from the previous layout: every chunk that differs from fresh is in `chunks`.
    legacy: bool,
}

impl<I: ChunkIndex> ChunkStore<I> {
    pub fn new(prefix: String, what: &'static str) -> Self {
        ChunkStore {
            prefix,
            what,
            chunks: BTreeMap::new(),
            dirty: BTreeSet::new(),
            legacy: false,
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn key(&self, c: I) -> String {
        Self::key_of(&self.prefix, c)
    }

    /// The key of chunk `c` of the map under `prefix`.
    pub fn key_of(prefix: &str, c: I) -> String {
        format!("{prefix}{c}")
    }

    /// Chunk `c` (`len` bits), read from the transaction on first use; `fresh` when not stored.
    pub async fn get(
        &mut self,
        tx: &mut Tx<'_>,
        c: I,
        len: u64,
        fresh: impl FnOnce() -> Bitset,
    ) -> Result<&mut Bitset> {
        if !self.chunks.contains_key(&c) {
            let key = self.key(c);
            let chunk = match tx.get::<Bitset>(&key, self.what).await? {
                Some(b) if b.len() == len => b,
                Some(b) => {
                    return Err(Error::Conflict(format!(
                        "{} {key} holds {} bits, expected {len}",
                        self.what,
                        b.len(),
                    )));
                }
                None => fresh(),
            };
            self.chunks.insert(c, chunk);
        }
        self.chunks
            .get_mut(&c)
            .ok_or_else(|| Error::Conflict(format!("{} vanished", self.what)))
    }

    /// Chunk `c` changed: save it.
    pub fn touch(&mut self, c: I) {
        self.dirty.insert(c);
    }

    /// Start a conversion from the previous layout: each chunk taken from the whole map, and
    /// whether it differs from its fresh content (only those are written).
    pub fn adopt(&mut self, chunks: impl IntoIterator<Item = (I, Bitset, bool)>) {
        self.legacy = true;
        for (c, chunk, changed) in chunks {
            self.chunks.insert(c, chunk);
            if changed {
                self.dirty.insert(c);
            }
        }
    }

    /// The chunks held in memory (read or changed in this transaction).
    pub fn loaded(&self) -> impl Iterator<Item = (I, &Bitset)> {
        self.chunks.iter().map(|(c, b)| (*c, b))
    }

    /// Buffer the changed chunks: a chunk back to `fresh(c)` is deleted, others written (as
    /// derived records while converting, deleting what an earlier conversion left).
    pub async fn save(&mut self, tx: &mut Tx<'_>, fresh: impl Fn(I) -> Bitset) -> Result<()> {
        if self.legacy {
            let stale: Vec<String> = tx
                .list_derived(&self.prefix)
                .await?
                .into_iter()
                .map(|(k, _)| k)
                .filter(|k| {
                    k.strip_prefix(&self.prefix)
                        .and_then(|c| c.parse::<I>().ok())
                        .is_none_or(|c| !self.dirty.contains(&c))
                })
                .collect();
            for k in stale {
                tx.delete_derived(&k);
            }
        }
        for c in std::mem::take(&mut self.dirty) {
            let key = self.key(c);
            let Some(chunk) = self.chunks.get(&c) else {
                continue;
            };
            match (*chunk == fresh(c), self.legacy) {
                (true, false) => tx.delete(&key),
                (true, true) => {}
                (false, false) => tx.put(&key, self.what, chunk)?,
                (false, true) => tx.put_derived(&key, self.what, chunk)?,
            }
        }
        self.legacy = false;
        Ok(())
    }

    /// Every stored chunk, by index (for inspection; chunks changed in this transaction are
    /// not included: see [`ChunkStore::loaded`]).
    pub async fn stored(&self, tx: &mut Tx<'_>) -> Result<Vec<(I, Bitset)>> {
        let mut out = Vec::new();
        for (key, value) in tx.list_derived(&self.prefix).await? {
            let Some(c) = key
                .strip_prefix(&self.prefix)
                .and_then(|c| c.parse::<I>().ok())
            else {
                continue;
            };
            out.push((c, crate::store::txn::decode(&key, self.what, &value)?));
        }
        Ok(out)
    }

    /// Buffer the deletes of every stored chunk (the owner is being deleted).
    pub async fn delete_all(&mut self, tx: &mut Tx<'_>) -> Result<()> {
        for (k, _) in tx.list_derived(&self.prefix).await? {
            tx.delete_derived(&k);
        }
        self.dirty.clear();
        Ok(())
    }
}
