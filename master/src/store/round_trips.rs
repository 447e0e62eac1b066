//! Test-only [`StateStore`] over a [`MemoryStore`] that counts sequential round trips: every read
//! and transaction takes a little while, and a call that starts while no other is in flight
//! begins a new round. Calls made together (a read-ahead) share one round; calls made one after
//! another (a read that waits on the previous answer) take one each.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;

use super::{
    Guard, KeyValue, LeaseId, Listing, MemoryStore, Op, StateStore, StoreResult, TxnOutcome,
    WatchEvent,
};

/// How long each call takes: long enough that calls started together overlap.
const LATENCY: Duration = Duration::from_millis(3);

/// See the module docs. Cloning shares the data and the counters.
#[derive(Clone, Default)]
pub struct RoundTrips {
    pub inner: MemoryStore,
    in_flight: Arc<AtomicUsize>,
    rounds: Arc<AtomicUsize>,
}

impl RoundTrips {
    /// Rounds so far.
    pub fn rounds(&self) -> usize {
        self.rounds.load(Ordering::SeqCst)
    }

    async fn timed<T>(&self, call: impl Future<Output = T>) -> T {
        if self.in_flight.fetch_add(1, Ordering::SeqCst) == 0 {
            self.rounds.fetch_add(1, Ordering::SeqCst);
        }
        tokio::time::sleep(LATENCY).await;
        let out = call.await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

impl StateStore for RoundTrips {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<KeyValue>>> {
        Box::pin(self.timed(self.inner.get(key)))
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Listing>> {
        Box::pin(self.timed(self.inner.list(prefix)))
    }
    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>) -> BoxFuture<'a, StoreResult<i64>> {
        Box::pin(self.timed(self.inner.put(key, value)))
    }
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(self.timed(self.inner.delete(key)))
    }
    fn txn(&self, guards: Vec<Guard>, ops: Vec<Op>) -> BoxFuture<'_, StoreResult<TxnOutcome>> {
        Box::pin(self.timed(self.inner.txn(guards, ops)))
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
