//! Test-only [`StateStore`] over a [`MemoryStore`] whose unguarded transactions (the follow-ups
//! that carry derived writes past the guarded commit) fail as an unreachable etcd would, while
//! [`FailFollowUps::fail`] is set. Everything else passes through.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use futures::stream::BoxStream;

use super::{
    Guard, KeyValue, LeaseId, Listing, MemoryStore, Op, StateStore, StoreError, StoreResult,
    TxnOutcome, WatchEvent,
};

/// See the module docs. Cloning shares the data and the switch.
#[derive(Clone)]
pub struct FailFollowUps {
    pub inner: MemoryStore,
    pub fail: Arc<AtomicBool>,
}

impl FailFollowUps {
    pub fn new() -> Self {
        FailFollowUps {
            inner: MemoryStore::new(),
            fail: Arc::new(AtomicBool::new(true)),
        }
    }
}

impl StateStore for FailFollowUps {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<KeyValue>>> {
        self.inner.get(key)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Listing>> {
        self.inner.list(prefix)
    }
    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>) -> BoxFuture<'a, StoreResult<i64>> {
        self.inner.put(key, value)
    }
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        self.inner.delete(key)
    }
    fn txn(&self, guards: Vec<Guard>, ops: Vec<Op>) -> BoxFuture<'_, StoreResult<TxnOutcome>> {
        if guards.is_empty() && self.fail.load(Ordering::SeqCst) {
            return Box::pin(async { Err(StoreError::Unavailable("etcd went away".into())) });
        }
        self.inner.txn(guards, ops)
    }
    fn watch(
        &self,
        prefix: String,
        from_revision: i64,
    ) -> BoxFuture<'_, StoreResult<BoxStream<'static, StoreResult<WatchEvent>>>> {
        self.inner.watch(prefix, from_revision)
    }
    fn grant_lease(&self, ttl_secs: i64) -> BoxFuture<'_, StoreResult<LeaseId>> {
        self.inner.grant_lease(ttl_secs)
    }
    fn keep_alive(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        self.inner.keep_alive(lease)
    }
    fn revoke_lease(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        self.inner.revoke_lease(lease)
    }
}
