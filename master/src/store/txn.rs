//! Optimistic read-modify-write transactions over a [`StateStore`].
//!
//! A [`Tx`] records the `mod_revision` of every key it reads (0 when absent) and buffers every write.
//! [`run`] commits the buffer in one store transaction guarded by those revisions; if anything read
//! changed meanwhile the guards fail, the buffer is dropped and the closure runs again on fresh data.
//! This is what makes "allocate an address and write the endpoint that uses it" atomic, across
//! concurrent requests and across netmasters.
//!
//! Listings are guarded by [`Guard::PrefixUnchangedSince`], which catches keys created or modified under
//! the prefix after the listing; a key *deleted* under a listed prefix is not caught. Listings are only
//! used for "does anything still use X" checks, where a concurrent delete can only make the answer
//! safer.
//!
//! Derived writes ([`Tx::put_derived`], [`Tx::delete_derived`]) are records computed entirely from
//! ordinary records (compiled `CfgPolicyRule`s, from the rules of a policy attached by an
//! `EpgPolicy`), which readers only act on while their owner exists. etcd refuses a transaction of
//! more than [`MAX_TXN_OPS`] compares or writes, so at commit the guarded transaction carries every
//! compare, every ordinary write and as many derived writes as fit (deletes first); the derived
//! *puts* that do not fit are written *before* it (pre-writes) and the derived *deletes* that do not
//! fit *after* it (follow-ups), in plain (unguarded, idempotent) transactions of at most
//! [`MAX_TXN_OPS`] writes each, before [`run`] returns. So the small owner record flips last on the
//! way in and first on the way out: a reader that honours owners never sees half of a change.
//!
//! Pre-writes of an attempt whose guarded commit then fails stay behind as orphans (their owner
//! was never written); so do follow-ups cut short by an outage ([`StoreError::DerivedIncomplete`],
//! the change itself is saved). Either way [`Db::repair_wanted`] fires and `policy::repair` makes
//! the derived records match their owners again; the leader also runs it at every leader start.
//! A transaction must not read derived keys through guards (they would fail on its own
//! pre-writes): derived records are listed with [`Tx::list_derived`].
//!
//! Batches ([`crate::batch`]) apply several requests in one transaction: [`Tx::savepoint`] and
//! [`Tx::rollback`] undo one request's writes (an undo journal, so a step costs what it wrote,
//! not what the batch holds), [`Tx::rollback_all`] its reads and listings too (a request left
//! for the next batch), [`Tx::prefetch`] reads the batch's first keys in one concurrent round, and
//! a prefix listed twice is read from the store once (one guard).
//!
//! [`Db`] adds a local writer lock: inside one process writers queue instead of conflicting (500
//! concurrent endpoint creates on one network would otherwise retry quadratically); the revision
//! guards still protect against other processes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Guard, KeyValue, MAX_TXN_OPS, Op, StateStore, StoreError, StoreResult};

/// How many times a conflicting transaction is retried before giving up with `Contention`.
const MAX_ATTEMPTS: u32 = 64;

/// Retries of a transaction that failed because the store was unreachable (Contiv retried its etcd
/// calls too); short, so an outage still answers 503 within a few seconds.
const UNAVAILABLE_RETRIES: u32 = 2;
const UNAVAILABLE_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

/// Errors that can say whether the store was unreachable (worth a retry).
pub trait StoreFailure {
    fn is_unavailable(&self) -> bool;
    /// Whether derived records were left unwritten ([`StoreError::DerivedIncomplete`]).
    fn is_derived_incomplete(&self) -> bool {
        false
    }
}

impl StoreFailure for StoreError {
    fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
    fn is_derived_incomplete(&self) -> bool {
        matches!(self, StoreError::DerivedIncomplete { .. })
    }
}

/// Keys and prefixes a write will read, for [`Tx::prefetch`].
#[derive(Debug, Clone, Default)]
pub struct ReadAhead {
    pub keys: Vec<String>,
    pub prefixes: Vec<String>,
}

impl ReadAhead {
    /// Just these keys.
    pub fn keys(keys: Vec<String>) -> Self {
        ReadAhead {
            keys,
            prefixes: Vec::new(),
        }
    }

    /// Add what `other` reads.
    pub fn extend(&mut self, other: ReadAhead) {
        self.keys.extend(other.keys);
        self.prefixes.extend(other.prefixes);
    }
}

/// One buffered write.
#[derive(Debug, Clone)]
struct Write {
    /// `None` deletes.
    value: Option<Vec<u8>>,
    /// Derived from an ordinary write of the same transaction; may follow the guarded commit.
    derived: bool,
}

/// A listed prefix: the store revision it was listed at and what the store held then.
struct Listed {
    prefix: String,
    revision: i64,
    entries: Arc<Vec<KeyValue>>,
}

/// What a savepoint rollback undoes, newest last.
enum Undo {
    /// A buffered write, with what the key held in the buffer before it.
    Write {
        key: String,
        previous: Option<Write>,
    },
    /// A first read of a key (a guard).
    Read(String),
    /// A listing (a prefix guard), the last of `listed`.
    Listing,
}

/// A transaction in progress. See the module docs.
pub struct Tx<'s> {
    store: &'s dyn StateStore,
    /// key → mod_revision observed (0 = absent), plus the value read.
    reads: BTreeMap<String, (i64, Option<Vec<u8>>)>,
    listed: Vec<Listed>,
    writes: BTreeMap<String, Write>,
    /// Writes in `writes` that are not derived.
    ordinary_writes: usize,
    /// Values read ahead by [`Tx::prefetch`], not yet guarded: a key becomes a guarded read the
    /// first time the transaction reads it.
    prefetched: std::collections::HashMap<String, (i64, Option<Vec<u8>>)>,
    /// Listings read ahead by [`Tx::prefetch`] (revision, entries), not yet guarded: a prefix
    /// becomes a guarded listing the first time the transaction lists it.
    prefetched_listings: std::collections::HashMap<String, (i64, Arc<Vec<KeyValue>>)>,
    journal: Vec<Undo>,
}

/// A transaction split for the store: the derived puts written before it, the guarded part and
/// the derived deletes that follow it.
struct Commit {
    /// Derived puts that did not fit the guarded transaction.
    pre_writes: Vec<Op>,
    guards: Vec<Guard>,
    /// Ordinary writes plus the derived writes that fit.
    ops: Vec<Op>,
    /// Derived deletes that did not fit the guarded transaction.
    follow_ups: Vec<Op>,
}

impl<'s> Tx<'s> {
    fn new(store: &'s dyn StateStore) -> Self {
        Tx {
            store,
            reads: BTreeMap::new(),
            listed: Vec::new(),
            writes: BTreeMap::new(),
            ordinary_writes: 0,
            prefetched: std::collections::HashMap::new(),
            prefetched_listings: std::collections::HashMap::new(),
            journal: Vec::new(),
        }
    }

    /// Record the first read of `key` (its guard).
    fn record_read(&mut self, key: &str, revision: i64, value: Option<Vec<u8>>) {
        self.reads.insert(key.to_string(), (revision, value));
        self.journal.push(Undo::Read(key.to_string()));
    }

    /// Read one key, seeing this transaction's own writes.
    pub async fn get_raw(&mut self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        if let Some(w) = self.writes.get(key) {
            return Ok(w.value.clone());
        }
        if let Some((_, v)) = self.reads.get(key) {
            return Ok(v.clone());
        }
        let (rev, value) = match self.prefetched.remove(key) {
            Some(read) => read,
            None => {
                let kv = self.store.get(key).await?;
                kv.map_or((0, None), |kv| (kv.mod_revision, Some(kv.value)))
            }
        };
        self.record_read(key, rev, value.clone());
        Ok(value)
    }

    /// Fetch the keys this transaction has not read yet, concurrently.
    async fn fetch_missing(
        &self,
        keys: &[String],
    ) -> StoreResult<Vec<(String, (i64, Option<Vec<u8>>))>> {
        let missing: Vec<&String> = keys
            .iter()
            .filter(|k| {
                !self.writes.contains_key(*k)
                    && !self.reads.contains_key(*k)
                    && !self.prefetched.contains_key(*k)
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let store = self.store;
        let fetched =
            futures::future::join_all(missing.iter().map(|k| store.get(k.as_str()))).await;
        missing
            .into_iter()
            .zip(fetched)
            .map(|(key, kv)| {
                Ok((
                    key.clone(),
                    kv?.map_or((0, None), |kv| (kv.mod_revision, Some(kv.value))),
                ))
            })
            .collect()
    }

    /// Read several keys at once (concurrently from the store), seeing this transaction's own
    /// writes; each read is guarded like [`Tx::get_raw`].
    pub async fn get_many(&mut self, keys: &[String]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        for (key, (rev, value)) in self.fetch_missing(keys).await? {
            self.record_read(&key, rev, value);
        }
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            out.push(self.get_raw(k).await?);
        }
        Ok(out)
    }

    /// Read the keys and list the prefixes of `ahead`, all concurrently, without guarding them
    /// yet: each becomes a guarded read or listing (of what was fetched here) only when the
    /// transaction reads or lists it. A batch reads ahead what each of its requests will read, so
    /// they cost one round trip together instead of a few each, one after another.
    pub async fn prefetch(&mut self, ahead: &ReadAhead) -> StoreResult<()> {
        let (keys, prefixes) = (&ahead.keys, &ahead.prefixes);
        let missing: Vec<&String> = prefixes
            .iter()
            .filter(|p| {
                !self.listed.iter().any(|l| &l.prefix == *p)
                    && !self.prefetched_listings.contains_key(*p)
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let store = self.store;
        let (reads, listings) = futures::future::join(
            self.fetch_missing(keys),
            futures::future::join_all(missing.iter().map(|p| super::list_all(store, p.as_str()))),
        )
        .await;
        for (key, read) in reads? {
            self.prefetched.insert(key, read);
        }
        for (prefix, listing) in missing.into_iter().zip(listings) {
            let listing = listing?;
            self.prefetched_listings.insert(
                prefix.clone(),
                (listing.revision, Arc::new(listing.entries)),
            );
        }
        Ok(())
    }

    /// Read and decode one JSON value; `kind` names the type in errors.
    pub async fn get<T: DeserializeOwned>(
        &mut self,
        key: &str,
        kind: &'static str,
    ) -> StoreResult<Option<T>> {
        match self.get_raw(key).await? {
            None => Ok(None),
            Some(bytes) => decode(key, kind, &bytes).map(Some),
        }
    }

    /// Read every key under `prefix` (sorted), seeing this transaction's own writes.
    /// A prefix listed before in this transaction is not read from the store again (its guard,
    /// the first listing's revision, covers both).
    pub async fn list_raw(&mut self, prefix: &str) -> StoreResult<Vec<(String, Vec<u8>)>> {
        let entries = match self.listed.iter().find(|l| l.prefix == prefix) {
            Some(l) => l.entries.clone(),
            None => {
                let (revision, entries) = match self.prefetched_listings.remove(prefix) {
                    Some(ahead) => ahead,
                    None => {
                        let listing = super::list_all(self.store, prefix).await?;
                        (listing.revision, Arc::new(listing.entries))
                    }
                };
                self.listed.push(Listed {
                    prefix: prefix.to_string(),
                    revision,
                    entries: entries.clone(),
                });
                self.journal.push(Undo::Listing);
                entries
            }
        };
        let mut merged: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for kv in entries.iter() {
            // Keep reads coherent: a key read earlier in this transaction keeps the value we acted on.
            let value = match self.reads.get(&kv.key) {
                Some((_, Some(v))) => v.clone(),
                Some((_, None)) => continue,
                None => kv.value.clone(),
            };
            merged.insert(kv.key.clone(), value);
        }
        for (key, write) in self
            .writes
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
        {
            match &write.value {
                Some(v) => merged.insert(key.clone(), v.clone()),
                None => merged.remove(key),
            };
        }
        Ok(merged.into_iter().collect())
    }

    /// Read every derived record under `prefix` without a guard (derived records follow ordinary
    /// ones, which the transaction guards; a guard here would fail on the transaction's own
    /// pre-writes). Sees this transaction's own writes.
    pub async fn list_derived(&mut self, prefix: &str) -> StoreResult<Vec<(String, Vec<u8>)>> {
        let listing = super::list_all(self.store, prefix).await?;
        let mut merged: BTreeMap<String, Vec<u8>> = listing
            .entries
            .into_iter()
            .map(|kv| (kv.key, kv.value))
            .collect();
        for (key, write) in self
            .writes
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
        {
            match &write.value {
                Some(v) => merged.insert(key.clone(), v.clone()),
                None => merged.remove(key),
            };
        }
        Ok(merged.into_iter().collect())
    }

    /// Read and decode every value under `prefix`.
    pub async fn list<T: DeserializeOwned>(
        &mut self,
        prefix: &str,
        kind: &'static str,
    ) -> StoreResult<Vec<T>> {
        self.list_raw(prefix)
            .await?
            .into_iter()
            .map(|(k, v)| decode(&k, kind, &v))
            .collect()
    }

    /// Buffer a JSON write.
    pub fn put<T: Serialize>(
        &mut self,
        key: &str,
        kind: &'static str,
        value: &T,
    ) -> StoreResult<()> {
        self.put_with(key, kind, value, false)
    }

    /// Buffer a delete.
    pub fn delete(&mut self, key: &str) {
        self.write(key, None, false);
    }

    /// Buffer a JSON write of a derived record: one whose content an ordinary write of this
    /// transaction fully determines (a compiled policy rule listed by its `EpgPolicy`). It may be
    /// applied in a follow-up transaction right after the guarded commit; see the module docs.
    pub fn put_derived<T: Serialize>(
        &mut self,
        key: &str,
        kind: &'static str,
        value: &T,
    ) -> StoreResult<()> {
        self.put_with(key, kind, value, true)
    }

    /// Buffer the delete of a derived record (see [`Tx::put_derived`]).
    pub fn delete_derived(&mut self, key: &str) {
        self.write(key, None, true);
    }

    fn put_with<T: Serialize>(
        &mut self,
        key: &str,
        kind: &'static str,
        value: &T,
        derived: bool,
    ) -> StoreResult<()> {
        let bytes = serde_json::to_vec(value).map_err(|e| StoreError::Encode {
            key: key.to_string(),
            kind,
            reason: e.to_string(),
        })?;
        self.write(key, Some(bytes), derived);
        Ok(())
    }

    /// The last write to a key decides whether it is derived.
    fn write(&mut self, key: &str, value: Option<Vec<u8>>, derived: bool) {
        let previous = self
            .writes
            .insert(key.to_string(), Write { value, derived });
        self.count_write(previous.as_ref(), derived);
        self.journal.push(Undo::Write {
            key: key.to_string(),
            previous,
        });
    }

    fn count_write(&mut self, replaced: Option<&Write>, derived: bool) {
        if replaced.is_some_and(|w| !w.derived) {
            self.ordinary_writes -= 1;
        }
        if !derived {
            self.ordinary_writes += 1;
        }
    }

    /// Undo one buffered write from the journal.
    fn undo_write(&mut self, key: String, previous: Option<Write>) {
        let restored_ordinary = previous.as_ref().is_some_and(|w| !w.derived);
        let current = match previous {
            Some(w) => self.writes.insert(key, w),
            None => self.writes.remove(&key),
        };
        if current.is_some_and(|c| !c.derived) {
            self.ordinary_writes -= 1;
        }
        if restored_ordinary {
            self.ordinary_writes += 1;
        }
    }

    /// Mark the present point, to undo what follows with [`Tx::rollback`] or
    /// [`Tx::rollback_all`] (a failed or deferred step of a batch).
    pub fn savepoint(&self) -> Savepoint {
        Savepoint(self.journal.len())
    }

    /// Drop every write buffered since `savepoint`. Reads and listings stay recorded (their
    /// guards only make the commit more careful).
    pub fn rollback(&mut self, savepoint: Savepoint) {
        let mut kept = Vec::new();
        while self.journal.len() > savepoint.0 {
            match self.journal.pop() {
                Some(Undo::Write { key, previous }) => self.undo_write(key, previous),
                Some(other) => kept.push(other),
                None => break,
            }
        }
        self.journal.extend(kept.into_iter().rev());
    }

    /// Drop everything done since `savepoint`: writes, reads and listings (a step left for
    /// another transaction: its guards must not burden this one).
    pub fn rollback_all(&mut self, savepoint: Savepoint) {
        while self.journal.len() > savepoint.0 {
            match self.journal.pop() {
                Some(Undo::Write { key, previous }) => self.undo_write(key, previous),
                Some(Undo::Read(key)) => {
                    if let Some(read) = self.reads.remove(&key) {
                        // Still valid as a read-ahead for the step that comes back later.
                        self.prefetched.insert(key, read);
                    }
                }
                Some(Undo::Listing) => {
                    if let Some(l) = self.listed.pop() {
                        // Still valid as a read-ahead for the step that comes back later.
                        self.prefetched_listings
                            .insert(l.prefix, (l.revision, l.entries));
                    }
                }
                None => break,
            }
        }
    }

    /// Number of buffered writes (tests and diagnostics).
    pub fn pending_writes(&self) -> usize {
        self.writes.len()
    }

    /// Whether the commit would exceed etcd's limits: more than [`MAX_TXN_OPS`] compares or
    /// ordinary writes (derived writes may go around the guarded transaction).
    pub fn over_limits(&self) -> bool {
        self.reads.len() + self.listed.len() > MAX_TXN_OPS || self.ordinary_writes > MAX_TXN_OPS
    }

    /// Split into the guarded transaction and its follow-ups, checking etcd's limits. `key` names
    /// the transaction in errors.
    fn into_commit(self, key: &str) -> StoreResult<Commit> {
        let mut guards: Vec<Guard> = self
            .reads
            .into_iter()
            .map(|(key, (revision, _))| Guard::ModRevision { key, revision })
            .collect();
        guards.extend(
            self.listed
                .into_iter()
                .map(|l| Guard::PrefixUnchangedSince {
                    prefix: l.prefix,
                    revision: l.revision,
                }),
        );
        if guards.len() > MAX_TXN_OPS {
            return Err(StoreError::TooManyCompares {
                key: key.to_string(),
                count: guards.len(),
                limit: MAX_TXN_OPS,
            });
        }
        let op = |key: String, value: Option<Vec<u8>>| match value {
            Some(value) => Op::Put {
                key,
                value,
                lease: None,
            },
            None => Op::Delete { key },
        };
        let mut ops = Vec::new();
        let mut derived_deletes = Vec::new();
        let mut derived_puts = Vec::new();
        for (key, w) in self.writes {
            match (w.derived, w.value.is_some()) {
                (false, _) => ops.push(op(key, w.value)),
                (true, false) => derived_deletes.push(op(key, None)),
                (true, true) => derived_puts.push(op(key, w.value)),
            }
        }
        if ops.len() > MAX_TXN_OPS {
            return Err(StoreError::TooManyWrites {
                key: key.to_string(),
                count: ops.len(),
                limit: MAX_TXN_OPS,
            });
        }
        // Deletes take the room first (an owner that goes away takes as many as fit with it),
        // then puts (an owner that appears brings as many as fit).
        let room = MAX_TXN_OPS - ops.len();
        let follow_ups = derived_deletes.split_off(room.min(derived_deletes.len()));
        let room = room - derived_deletes.len();
        ops.append(&mut derived_deletes);
        let pre_writes = derived_puts.split_off(room.min(derived_puts.len()));
        ops.append(&mut derived_puts);
        Ok(Commit {
            pre_writes,
            guards,
            ops,
            follow_ups,
        })
    }
}

/// A point of a transaction's journal.
pub struct Savepoint(usize);

/// Decode a stored JSON value, naming key and type on failure.
pub fn decode<T: DeserializeOwned>(key: &str, kind: &'static str, bytes: &[u8]) -> StoreResult<T> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        key: key.to_string(),
        kind,
        reason: e.to_string(),
    })
}

/// Run `body` as an optimistic transaction, retrying on conflict (and, briefly, on an unreachable
/// store). Read-only bodies commit nothing.
pub async fn run<T, E, F>(store: &dyn StateStore, body: F) -> Result<T, E>
where
    F: AsyncFnMut(&mut Tx<'_>) -> Result<T, E>,
    E: From<StoreError> + StoreFailure,
{
    let mut orphans = false;
    run_tracked(store, body, &mut orphans).await
}

/// [`run`], setting `orphans` when pre-written derived records were left without the commit
/// that makes them count (the repair removes them).
async fn run_tracked<T, E, F>(
    store: &dyn StateStore,
    mut body: F,
    orphans: &mut bool,
) -> Result<T, E>
where
    F: AsyncFnMut(&mut Tx<'_>) -> Result<T, E>,
    E: From<StoreError> + StoreFailure,
{
    let mut outages = 0;
    loop {
        match attempt(store, &mut body, orphans).await {
            Err(e) if e.is_unavailable() && outages < UNAVAILABLE_RETRIES => {
                outages += 1;
                tracing::debug!(outages, "state store unavailable; retrying the transaction");
                tokio::time::sleep(UNAVAILABLE_PAUSE).await;
            }
            other => return other,
        }
    }
}

async fn attempt<T, E, F>(store: &dyn StateStore, body: &mut F, orphans: &mut bool) -> Result<T, E>
where
    F: AsyncFnMut(&mut Tx<'_>) -> Result<T, E>,
    E: From<StoreError>,
{
    let mut first_key = String::new();
    for attempt in 1..=MAX_ATTEMPTS {
        let mut tx = Tx::new(store);
        let out = body(&mut tx).await?;
        if tx.writes.is_empty() {
            return Ok(out);
        }
        if let Some(k) = tx.writes.keys().next() {
            first_key.clone_from(k);
        }
        let commit = tx.into_commit(&first_key)?;
        let pre_written = !commit.pre_writes.is_empty();
        if pre_written && let Err(e) = pre_write(store, commit.pre_writes).await {
            *orphans = true;
            return Err(e.into());
        }
        match store.txn(commit.guards, commit.ops).await {
            Ok(r) if r.succeeded => {
                follow_up(store, &first_key, commit.follow_ups).await?;
                return Ok(out);
            }
            // This attempt's pre-writes have no owner; the next attempt may not rewrite them all.
            Ok(_) => *orphans |= pre_written,
            Err(e) => {
                *orphans |= pre_written;
                return Err(e.into());
            }
        }
        tracing::debug!(attempt, key = %first_key, "state transaction conflicted; retrying");
        // Back off a little so two processes do not keep colliding in lock step.
        tokio::time::sleep(std::time::Duration::from_millis(u64::from(attempt.min(20)))).await;
    }
    Err(StoreError::Contention {
        key: first_key,
        attempts: MAX_ATTEMPTS,
    }
    .into())
}

/// Write the derived puts that did not fit the guarded transaction, before it, [`MAX_TXN_OPS`] at
/// a time. Nothing counts them until their owner is committed.
async fn pre_write(store: &dyn StateStore, ops: Vec<Op>) -> StoreResult<()> {
    let mut rest = ops;
    while !rest.is_empty() {
        let tail = rest.split_off(MAX_TXN_OPS.min(rest.len()));
        let chunk = std::mem::replace(&mut rest, tail);
        store.txn(Vec::new(), chunk).await?;
    }
    Ok(())
}

/// Apply the derived writes that did not fit the guarded transaction, [`MAX_TXN_OPS`] at a time, in
/// order. Each chunk is retried briefly on an unreachable store; the body never runs again (its
/// change is committed).
async fn follow_up(store: &dyn StateStore, key: &str, ops: Vec<Op>) -> StoreResult<()> {
    let total = ops.len();
    let mut rest = ops;
    while !rest.is_empty() {
        let tail = rest.split_off(MAX_TXN_OPS.min(rest.len()));
        let chunk = std::mem::replace(&mut rest, tail);
        let mut outages = 0;
        loop {
            match store.txn(Vec::new(), chunk.clone()).await {
                Ok(_) => break,
                Err(e) if e.is_unavailable() && outages < UNAVAILABLE_RETRIES => {
                    outages += 1;
                    tokio::time::sleep(UNAVAILABLE_PAUSE).await;
                }
                Err(e) => {
                    let first_pending = chunk.first().map_or_else(String::new, |op| match op {
                        Op::Put { key, .. } | Op::Delete { key } => key.clone(),
                    });
                    tracing::warn!(key, first_pending, error = %e, "derived records left unwritten");
                    return Err(StoreError::DerivedIncomplete {
                        key: key.to_string(),
                        first_pending,
                        pending: chunk.len() + rest.len(),
                        total,
                        unavailable: e.is_unavailable(),
                        reason: e.to_string(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// The store plus a process-local writer lock. Cheap to clone.
#[derive(Clone)]
pub struct Db {
    store: Arc<dyn StateStore>,
    writer: Arc<tokio::sync::Mutex<()>>,
    /// Signalled when a write left derived records unwritten; the leader then repairs them.
    repair: Arc<tokio::sync::Notify>,
}

impl Db {
    pub fn new(store: Arc<dyn StateStore>) -> Self {
        Db {
            store,
            writer: Arc::new(tokio::sync::Mutex::new(())),
            repair: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// Completes once a write through this `Db` (or a clone) has failed with
    /// [`StoreError::DerivedIncomplete`] since the last time it completed (one stored signal).
    pub async fn repair_wanted(&self) {
        self.repair.notified().await;
    }

    /// The underlying store.
    pub fn store(&self) -> &dyn StateStore {
        self.store.as_ref()
    }

    /// A shared handle to the underlying store.
    pub fn store_arc(&self) -> Arc<dyn StateStore> {
        self.store.clone()
    }

    /// Run a transaction that may write; writers in this process take turns.
    pub async fn write<T, E, F>(&self, body: F) -> Result<T, E>
    where
        F: AsyncFnMut(&mut Tx<'_>) -> Result<T, E>,
        E: From<StoreError> + StoreFailure,
    {
        let _turn = self.writer.lock().await;
        let mut orphans = false;
        let out = run_tracked(self.store.as_ref(), body, &mut orphans).await;
        if orphans || out.as_ref().is_err_and(|e| e.is_derived_incomplete()) {
            self.repair.notify_one();
        }
        out
    }

    /// Run a read-only transaction (no lock; writes made by `body` are committed like in `write`).
    pub async fn read<T, E, F>(&self, body: F) -> Result<T, E>
    where
        F: AsyncFnMut(&mut Tx<'_>) -> Result<T, E>,
        E: From<StoreError> + StoreFailure,
    {
        run(self.store.as_ref(), body).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[tokio::test]
    async fn conflicting_writer_is_retried_on_fresh_data() {
        let store = MemoryStore::new();
        store.put("/c", b"0".to_vec()).await.unwrap();
        let mut first = true;
        let out: Result<u32, StoreError> = run(&store, async |tx: &mut Tx<'_>| {
            let n: u32 = tx.get("/c", "counter").await?.unwrap_or(0);
            if first {
                // Another writer sneaks in between our read and our commit.
                first = false;
                store.put("/c", b"10".to_vec()).await?;
            }
            tx.put("/c", "counter", &(n + 1))?;
            Ok(n + 1)
        })
        .await;
        assert_eq!(out.unwrap(), 11);
        assert_eq!(
            store.get("/c").await.unwrap().unwrap().value,
            b"11".to_vec()
        );
    }

    #[tokio::test]
    async fn listing_guard_catches_new_keys() {
        let store = MemoryStore::new();
        let mut attempts = 0;
        let out: Result<usize, StoreError> = run(&store, async |tx: &mut Tx<'_>| {
            attempts += 1;
            let n = tx.list_raw("/p/").await?.len();
            if attempts == 1 {
                store.put("/p/new", b"1".to_vec()).await?;
            }
            tx.put("/count", "count", &n)?;
            Ok(n)
        })
        .await;
        assert_eq!(out.unwrap(), 1);
        assert_eq!(attempts, 2);
    }

    #[tokio::test]
    async fn own_writes_are_visible_in_reads_and_listings() {
        let store = MemoryStore::new();
        store.put("/p/a", b"1".to_vec()).await.unwrap();
        let out: Result<Vec<String>, StoreError> = run(&store, async |tx: &mut Tx<'_>| {
            tx.put("/p/b", "n", &2)?;
            tx.delete("/p/a");
            assert_eq!(tx.get::<u32>("/p/b", "n").await?, Some(2));
            Ok(tx
                .list_raw("/p/")
                .await?
                .into_iter()
                .map(|(k, _)| k)
                .collect())
        })
        .await;
        assert_eq!(out.unwrap(), vec!["/p/b".to_string()]);
        assert!(store.get("/p/a").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn memory_store_refuses_what_etcd_refuses() {
        let store = MemoryStore::new();
        let ops: Vec<Op> = (0..=MAX_TXN_OPS)
            .map(|i| Op::Delete {
                key: format!("/k/{i}"),
            })
            .collect();
        let err = store.txn(Vec::new(), ops).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("state store error: {}", super::super::TOO_MANY_OPS)
        );
        let guards: Vec<Guard> = (0..=MAX_TXN_OPS)
            .map(|i| Guard::ModRevision {
                key: format!("/k/{i}"),
                revision: 0,
            })
            .collect();
        assert!(store.txn(guards, Vec::new()).await.is_err());
    }

    #[tokio::test]
    async fn derived_puts_beyond_the_limit_precede_the_guarded_commit() {
        let store = MemoryStore::new();
        for i in 0..50 {
            store
                .put(&format!("/d/old{i:03}"), b"x".to_vec())
                .await
                .unwrap();
        }
        let before = store.list("/").await.unwrap().revision;
        let out: Result<(), StoreError> = run(&store, async |tx: &mut Tx<'_>| {
            tx.get_raw("/owner").await?;
            tx.put("/owner", "owner", &"v2")?;
            for i in 0..50 {
                tx.delete_derived(&format!("/d/old{i:03}"));
            }
            for i in 0..300 {
                tx.put_derived(&format!("/d/new{i:03}"), "n", &i)?;
            }
            Ok(())
        })
        .await;
        out.unwrap();
        let listing = store.list("/d/").await.unwrap();
        assert_eq!(listing.entries.len(), 300);
        assert!(
            listing
                .entries
                .iter()
                .all(|kv| kv.key.starts_with("/d/new"))
        );
        // 351 writes: 223 puts before (128 + 95), then the guarded one (owner + 50 deletes + 77
        // puts): the owner appears last, with the deletes.
        assert_eq!(listing.revision - before, 3);
        let rev = |k: &str| {
            let store = store.clone();
            let k = k.to_string();
            async move { store.get(&k).await.unwrap().unwrap().mod_revision }
        };
        assert_eq!(rev("/d/new077").await, before + 1);
        assert_eq!(rev("/d/new299").await, before + 2);
        assert_eq!(rev("/d/new076").await, before + 3);
        assert_eq!(rev("/owner").await, before + 3);
    }

    #[tokio::test]
    async fn derived_deletes_beyond_the_limit_follow_the_guarded_commit() {
        let store = MemoryStore::new();
        store.put("/owner", b"1".to_vec()).await.unwrap();
        for i in 0..300 {
            store
                .put(&format!("/d/{i:03}"), b"x".to_vec())
                .await
                .unwrap();
        }
        let before = store.list("/").await.unwrap().revision;
        let out: Result<(), StoreError> = run(&store, async |tx: &mut Tx<'_>| {
            tx.get_raw("/owner").await?;
            tx.delete("/owner");
            for (key, _) in tx.list_derived("/d/").await? {
                tx.delete_derived(&key);
            }
            Ok(())
        })
        .await;
        out.unwrap();
        // The owner goes first with 127 of its records, the rest follow in 128 + 45.
        assert_eq!(store.list("/").await.unwrap().revision - before, 3);
        assert!(store.list("/").await.unwrap().entries.is_empty());
    }

    #[tokio::test]
    async fn failed_pre_writes_leave_no_owner_and_ask_for_a_repair() {
        let store = crate::store::failing::FailFollowUps::new();
        let db = Db::new(Arc::new(store.clone()));
        let out: Result<(), StoreError> = db
            .write(async |tx: &mut Tx<'_>| {
                tx.get_raw("/owner").await?;
                tx.put("/owner", "owner", &1)?;
                for i in 0..200 {
                    tx.put_derived(&format!("/d/{i:03}"), "n", &i)?;
                }
                Ok(())
            })
            .await;
        assert!(out.unwrap_err().is_unavailable());
        assert!(store.inner.get("/owner").await.unwrap().is_none());
        tokio::time::timeout(std::time::Duration::from_secs(1), db.repair_wanted())
            .await
            .expect("a repair is asked for");
    }

    #[tokio::test]
    async fn too_many_compares_or_ordinary_writes_fail_clearly() {
        let store = MemoryStore::new();
        let out: Result<(), StoreError> = run(&store, async |tx: &mut Tx<'_>| {
            for i in 0..=MAX_TXN_OPS {
                tx.get_raw(&format!("/r/{i:03}")).await?;
            }
            tx.put("/w", "w", &1)?;
            Ok(())
        })
        .await;
        let err = out.unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::TooManyCompares {
                    count: 129,
                    limit: 128,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("129 compares"), "{err}");
        let out: Result<(), StoreError> = run(&store, async |tx: &mut Tx<'_>| {
            for i in 0..=MAX_TXN_OPS {
                tx.put(&format!("/w/{i:03}"), "w", &i)?;
            }
            Ok(())
        })
        .await;
        assert!(matches!(
            out.unwrap_err(),
            StoreError::TooManyWrites { count: 129, .. }
        ));
        assert!(store.list("/").await.unwrap().entries.is_empty());
    }

    #[tokio::test]
    async fn failed_follow_up_is_reported_and_the_body_not_rerun() {
        let store = crate::store::failing::FailFollowUps::new();
        store.inner.put("/owner", b"1".to_vec()).await.unwrap();
        for i in 0..200 {
            store
                .inner
                .put(&format!("/d/{i:03}"), b"x".to_vec())
                .await
                .unwrap();
        }
        let mut runs = 0;
        let out: Result<(), StoreError> = run(&store, async |tx: &mut Tx<'_>| {
            runs += 1;
            tx.get_raw("/owner").await?;
            tx.delete("/owner");
            for i in 0..200 {
                tx.delete_derived(&format!("/d/{i:03}"));
            }
            Ok(())
        })
        .await;
        let err = out.unwrap_err();
        assert_eq!(runs, 1);
        match &err {
            StoreError::DerivedIncomplete {
                pending,
                total,
                first_pending,
                unavailable,
                ..
            } => {
                assert_eq!((*pending, *total), (73, 73));
                assert_eq!(first_pending, "/d/127");
                assert!(*unavailable);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("repairs them"), "{err}");
        // The guarded part committed: the owner and the first 127 derived records are gone.
        assert!(store.inner.get("/owner").await.unwrap().is_none());
        assert_eq!(store.inner.list("/d/").await.unwrap().entries.len(), 73);
    }
}
