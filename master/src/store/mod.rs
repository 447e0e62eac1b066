//! The state store: a small key/value contract that both etcd v3 and the in-memory test store meet.
//!
//! Contract:
//! * Every key carries a `mod_revision` (the store-wide revision of its last write); an absent key has
//!   revision 0. Revisions only grow.
//! * [`StateStore::txn`] applies a batch of puts/deletes atomically, and only if every [`Guard`] still
//!   holds; this is the compare-and-swap that keeps two requests (or two netmasters) from handing out
//!   the same address. Higher-level read-modify-write code goes through [`txn::run`].
//! * [`StateStore::watch`] streams changes under a prefix starting at a revision, so a reader that listed
//!   at revision R and watches from R+1 misses nothing.
//! * Leases expire keys that are not kept alive (service registry, leader lock).
//! * An unreachable store is [`StoreError::Unavailable`]; the REST layer turns it into HTTP 503.

pub mod connect;
pub mod etcd;
#[cfg(test)]
pub(crate) mod failing;
pub mod follow;
pub mod keys;
pub mod members;
pub mod memory;
#[cfg(test)]
pub(crate) mod round_trips;
pub mod txn;

use futures::future::BoxFuture;
use futures::stream::BoxStream;

pub use connect::{ConnectError, EtcdConfig};
pub use etcd::EtcdStore;
pub use memory::MemoryStore;
pub use txn::{Tx, run as run_txn};

/// A stored key with its value and revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Vec<u8>,
    /// Revision of the last write to this key.
    pub mod_revision: i64,
}

/// The result of a prefix listing: the entries and the store revision they were read at.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub entries: Vec<KeyValue>,
    pub revision: i64,
}

/// A condition a transaction checks before it applies its writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// The key's `mod_revision` equals this value (0 = the key must be absent).
    ModRevision { key: String, revision: i64 },
    /// No key under `prefix` was written after `revision` (catches keys created since a listing).
    PrefixUnchangedSince { prefix: String, revision: i64 },
}

/// A write inside a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put {
        key: String,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    },
    Delete {
        key: String,
    },
}

/// Outcome of [`StateStore::txn`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnOutcome {
    /// Whether every guard held (and therefore the writes were applied).
    pub succeeded: bool,
    /// Store revision after the transaction.
    pub revision: i64,
}

/// A lease id (etcd lease).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId(pub i64);

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    Put { kv: KeyValue },
    Delete { key: String, revision: i64 },
}

/// Store failures. `Unavailable` is transient (retry / 503); the others are not.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("state store unavailable: {0}")]
    Unavailable(String),
    #[error("lease {0} not found or expired")]
    LeaseNotFound(i64),
    #[error("state store watch at revision {revision} failed: {reason}")]
    Watch { revision: i64, reason: String },
    #[error("stored value at {key} is not valid JSON for {kind}: {reason}")]
    Corrupt {
        key: String,
        kind: &'static str,
        reason: String,
    },
    #[error("cannot encode {kind} for {key}: {reason}")]
    Encode {
        key: String,
        kind: &'static str,
        reason: String,
    },
    #[error("transaction on {key} kept conflicting after {attempts} attempts")]
    Contention { key: String, attempts: u32 },
    #[error(
        "transaction on {key} needs {count} compares; etcd accepts at most {limit} per transaction \
         (the change reads too many records at once)"
    )]
    TooManyCompares {
        key: String,
        count: usize,
        limit: usize,
    },
    #[error(
        "transaction on {key} needs {count} writes besides derived records; etcd accepts at most \
         {limit} per transaction"
    )]
    TooManyWrites {
        key: String,
        count: usize,
        limit: usize,
    },
    /// The guarded transaction committed, but some of the derived records that follow it (compiled
    /// policy rules) could not be written; the leader repairs them (`policy::repair`), right away and
    /// at every leader start.
    #[error(
        "the change to {key} was saved, but {pending} of {total} derived records (first {first_pending}) \
         could not be written: {reason}; the leader netmaster repairs them from the saved records as \
         soon as the store answers"
    )]
    DerivedIncomplete {
        key: String,
        first_pending: String,
        pending: usize,
        total: usize,
        reason: String,
        /// Whether the store was unreachable (HTTP 503) rather than refusing (500).
        unavailable: bool,
    },
    #[error("state store error: {0}")]
    Other(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// etcd's default `--max-txn-ops`: a transaction may carry at most this many compares and at most this
/// many writes. [`MemoryStore`] refuses bigger transactions the same way, so unit tests catch them.
pub const MAX_TXN_OPS: usize = 128;

/// The message etcd answers a transaction over [`MAX_TXN_OPS`] with (the memory store uses it too).
pub const TOO_MANY_OPS: &str = "etcdserver: too many operations in txn request";

/// The key/value operations netmaster needs. Implemented by [`EtcdStore`] and [`MemoryStore`].
///
/// Methods return boxed futures so the trait can be used as `Arc<dyn StateStore>`.
pub trait StateStore: Send + Sync + 'static {
    /// Read one key.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<KeyValue>>>;
    /// Read every key starting with `prefix`, sorted by key.
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Listing>>;
    /// Unconditional write; returns the new revision.
    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>) -> BoxFuture<'a, StoreResult<i64>>;
    /// Unconditional delete; returns whether the key existed.
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>>;
    /// Apply `ops` atomically if every guard holds.
    fn txn(&self, guards: Vec<Guard>, ops: Vec<Op>) -> BoxFuture<'_, StoreResult<TxnOutcome>>;
    /// Stream changes under `prefix` from `from_revision` (inclusive).
    fn watch(
        &self,
        prefix: String,
        from_revision: i64,
    ) -> BoxFuture<'_, StoreResult<BoxStream<'static, StoreResult<WatchEvent>>>>;
    /// Create a lease that expires after `ttl_secs` without keep-alive.
    fn grant_lease(&self, ttl_secs: i64) -> BoxFuture<'_, StoreResult<LeaseId>>;
    /// Refresh a lease once. `LeaseNotFound` once it has expired.
    fn keep_alive(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>>;
    /// Revoke a lease, deleting its keys.
    fn revoke_lease(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>>;
}

/// What etcd's client answers when a listing is larger than the gRPC message limit (4 MiB).
const TOO_LARGE: &str = "message length too large";

/// List `prefix` even when its values together pass the store client's message limit (20,000
/// compiled policy rules are ~7 MB): a listing refused as too large is split by the next key
/// character (printable ASCII; keys are built from names), recursively, and merged. The revision
/// is the oldest of the partial listings, so a watch from it + 1 misses nothing and a prefix
/// guard on it stays conservative.
pub fn list_all<'a>(
    store: &'a dyn StateStore,
    prefix: &'a str,
) -> BoxFuture<'a, StoreResult<Listing>> {
    Box::pin(async move {
        match store.list(prefix).await {
            Err(e) if e.to_string().contains(TOO_LARGE) => {
                let mut out = Listing {
                    entries: Vec::new(),
                    revision: i64::MAX,
                };
                if let Some(kv) = store.get(prefix).await? {
                    out.entries.push(kv);
                }
                for c in ' '..='~' {
                    let part = list_all(store, &format!("{prefix}{c}")).await?;
                    out.entries.extend(part.entries);
                    out.revision = out.revision.min(part.revision);
                }
                Ok(out)
            }
            other => other,
        }
    })
}
