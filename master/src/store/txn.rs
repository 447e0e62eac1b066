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
//! [`Db`] adds a local writer lock: inside one process writers queue instead of conflicting (500
//! concurrent endpoint creates on one network would otherwise retry quadratically); the revision
//! guards still protect against other processes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Guard, Op, StateStore, StoreError, StoreResult};

/// How many times a conflicting transaction is retried before giving up with `Contention`.
const MAX_ATTEMPTS: u32 = 64;

/// Retries of a transaction that failed because the store was unreachable (Contiv retried its etcd
/// calls too); short, so an outage still answers 503 within a few seconds.
const UNAVAILABLE_RETRIES: u32 = 2;
const UNAVAILABLE_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

/// Errors that can say whether the store was unreachable (worth a retry).
pub trait StoreFailure {
    fn is_unavailable(&self) -> bool;
}

impl StoreFailure for StoreError {
    fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// A transaction in progress. See the module docs.
pub struct Tx<'s> {
    store: &'s dyn StateStore,
    /// key → mod_revision observed (0 = absent), plus the value read.
    reads: BTreeMap<String, (i64, Option<Vec<u8>>)>,
    prefixes: Vec<(String, i64)>,
    /// Buffered writes; `None` deletes.
    writes: BTreeMap<String, Option<Vec<u8>>>,
}

impl<'s> Tx<'s> {
    fn new(store: &'s dyn StateStore) -> Self {
        Tx {
            store,
            reads: BTreeMap::new(),
            prefixes: Vec::new(),
            writes: BTreeMap::new(),
        }
    }

    /// Read one key, seeing this transaction's own writes.
    pub async fn get_raw(&mut self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        if let Some(w) = self.writes.get(key) {
            return Ok(w.clone());
        }
        if let Some((_, v)) = self.reads.get(key) {
            return Ok(v.clone());
        }
        let kv = self.store.get(key).await?;
        let (rev, value) = kv.map_or((0, None), |kv| (kv.mod_revision, Some(kv.value)));
        self.reads.insert(key.to_string(), (rev, value.clone()));
        Ok(value)
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
    pub async fn list_raw(&mut self, prefix: &str) -> StoreResult<Vec<(String, Vec<u8>)>> {
        let listing = self.store.list(prefix).await?;
        self.prefixes.push((prefix.to_string(), listing.revision));
        let mut merged: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for kv in listing.entries {
            // Keep reads coherent: a key read earlier in this transaction keeps the value we acted on.
            let value = match self.reads.get(&kv.key) {
                Some((_, Some(v))) => v.clone(),
                Some((_, None)) => continue,
                None => kv.value,
            };
            merged.insert(kv.key, value);
        }
        for (key, write) in self
            .writes
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
        {
            match write {
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
        let bytes = serde_json::to_vec(value).map_err(|e| StoreError::Encode {
            key: key.to_string(),
            kind,
            reason: e.to_string(),
        })?;
        self.writes.insert(key.to_string(), Some(bytes));
        Ok(())
    }

    /// Buffer a delete.
    pub fn delete(&mut self, key: &str) {
        self.writes.insert(key.to_string(), None);
    }

    /// Remember the buffered writes, to undo a failed step of a batch with [`Tx::rollback`].
    pub fn savepoint(&self) -> Savepoint {
        Savepoint(self.writes.clone())
    }

    /// Drop every write buffered since `savepoint`. Reads stay recorded (their guards only make the
    /// commit more careful).
    pub fn rollback(&mut self, savepoint: Savepoint) {
        self.writes = savepoint.0;
    }

    /// Number of buffered writes (tests and diagnostics).
    pub fn pending_writes(&self) -> usize {
        self.writes.len()
    }

    fn into_parts(self) -> (Vec<Guard>, Vec<Op>) {
        let mut guards: Vec<Guard> = self
            .reads
            .into_iter()
            .map(|(key, (revision, _))| Guard::ModRevision { key, revision })
            .collect();
        guards.extend(
            self.prefixes
                .into_iter()
                .map(|(prefix, revision)| Guard::PrefixUnchangedSince { prefix, revision }),
        );
        let ops = self
            .writes
            .into_iter()
            .map(|(key, w)| match w {
                Some(value) => Op::Put {
                    key,
                    value,
                    lease: None,
                },
                None => Op::Delete { key },
            })
            .collect();
        (guards, ops)
    }
}

/// Buffered writes at some point of a transaction.
pub struct Savepoint(BTreeMap<String, Option<Vec<u8>>>);

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
pub async fn run<T, E, F>(store: &dyn StateStore, mut body: F) -> Result<T, E>
where
    F: AsyncFnMut(&mut Tx<'_>) -> Result<T, E>,
    E: From<StoreError> + StoreFailure,
{
    let mut outages = 0;
    loop {
        match attempt(store, &mut body).await {
            Err(e) if e.is_unavailable() && outages < UNAVAILABLE_RETRIES => {
                outages += 1;
                tracing::debug!(outages, "state store unavailable; retrying the transaction");
                tokio::time::sleep(UNAVAILABLE_PAUSE).await;
            }
            other => return other,
        }
    }
}

async fn attempt<T, E, F>(store: &dyn StateStore, body: &mut F) -> Result<T, E>
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
        let (guards, ops) = tx.into_parts();
        if store.txn(guards, ops).await?.succeeded {
            return Ok(out);
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

/// The store plus a process-local writer lock. Cheap to clone.
#[derive(Clone)]
pub struct Db {
    store: Arc<dyn StateStore>,
    writer: Arc<tokio::sync::Mutex<()>>,
}

impl Db {
    pub fn new(store: Arc<dyn StateStore>) -> Self {
        Db {
            store,
            writer: Arc::new(tokio::sync::Mutex::new(())),
        }
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
        run(self.store.as_ref(), body).await
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
}
