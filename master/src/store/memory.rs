//! In-memory [`StateStore`] with etcd's revision semantics, for unit tests only.
//!
//! One mutex guards the whole map: tests are small and this keeps every operation trivially atomic.
//! Like etcd (default `--max-txn-ops`), a transaction of more than [`MAX_TXN_OPS`] compares or writes
//! is refused with etcd's message, so unit tests catch transactions etcd would refuse.
//! Leases expire lazily (checked on every call) against a tokio clock, so `tokio::time::pause` works.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tokio::sync::broadcast;
use tokio::time::{Duration, Instant};

use super::{
    Guard, KeyValue, LeaseId, Listing, MAX_TXN_OPS, Op, StateStore, StoreError, StoreResult,
    TOO_MANY_OPS, TxnOutcome, WatchEvent,
};

#[derive(Debug, Clone)]
struct Entry {
    value: Vec<u8>,
    mod_revision: i64,
    lease: Option<LeaseId>,
}

#[derive(Debug)]
struct Lease {
    ttl: Duration,
    deadline: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    revision: i64,
    data: BTreeMap<String, Entry>,
    leases: HashMap<i64, Lease>,
    next_lease: i64,
    /// Every event ever applied, so a watch can start from an old revision (no compaction).
    history: Vec<(i64, WatchEvent)>,
}

/// The in-memory store. Cloning shares the same data.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
    events: broadcast::Sender<(i64, WatchEvent)>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    pub fn new() -> Self {
        let (events, _) = broadcast::channel(4096);
        MemoryStore {
            inner: Arc::new(Mutex::new(Inner::default())),
            events,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock only happens in a failing test; keep going with the data.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn expire_leases(&self, inner: &mut Inner) {
        let now = Instant::now();
        let expired: Vec<i64> = inner
            .leases
            .iter()
            .filter(|(_, l)| l.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            inner.leases.remove(&id);
            self.drop_lease_keys(inner, LeaseId(id));
        }
    }

    fn drop_lease_keys(&self, inner: &mut Inner, lease: LeaseId) {
        let keys: Vec<String> = inner
            .data
            .iter()
            .filter(|(_, e)| e.lease == Some(lease))
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            return;
        }
        inner.revision += 1;
        let rev = inner.revision;
        for key in keys {
            inner.data.remove(&key);
            self.emit(inner, rev, WatchEvent::Delete { key, revision: rev });
        }
    }

    fn emit(&self, inner: &mut Inner, rev: i64, event: WatchEvent) {
        inner.history.push((rev, event.clone()));
        // No receiver is fine: nobody is watching.
        let _ = self.events.send((rev, event));
    }

    fn guard_holds(inner: &Inner, guard: &Guard) -> bool {
        match guard {
            Guard::ModRevision { key, revision } => {
                inner.data.get(key).map_or(0, |e| e.mod_revision) == *revision
            }
            Guard::PrefixUnchangedSince { prefix, revision } => inner
                .data
                .range(prefix.clone()..)
                .take_while(|(k, _)| k.starts_with(prefix.as_str()))
                .all(|(_, e)| e.mod_revision <= *revision),
        }
    }

    fn apply(&self, inner: &mut Inner, guards: &[Guard], ops: Vec<Op>) -> StoreResult<TxnOutcome> {
        if guards.len() > MAX_TXN_OPS || ops.len() > MAX_TXN_OPS {
            return Err(StoreError::Other(TOO_MANY_OPS.to_string()));
        }
        self.expire_leases(inner);
        if !guards.iter().all(|g| Self::guard_holds(inner, g)) {
            return Ok(TxnOutcome {
                succeeded: false,
                revision: inner.revision,
            });
        }
        for op in &ops {
            if let Op::Put {
                lease: Some(lease), ..
            } = op
                && !inner.leases.contains_key(&lease.0)
            {
                return Err(StoreError::LeaseNotFound(lease.0));
            }
        }
        if ops.is_empty() {
            return Ok(TxnOutcome {
                succeeded: true,
                revision: inner.revision,
            });
        }
        inner.revision += 1;
        let rev = inner.revision;
        for op in ops {
            match op {
                Op::Put { key, value, lease } => {
                    inner.data.insert(
                        key.clone(),
                        Entry {
                            value: value.clone(),
                            mod_revision: rev,
                            lease,
                        },
                    );
                    self.emit(
                        inner,
                        rev,
                        WatchEvent::Put {
                            kv: KeyValue {
                                key,
                                value,
                                mod_revision: rev,
                            },
                        },
                    );
                }
                Op::Delete { key } => {
                    if inner.data.remove(&key).is_some() {
                        self.emit(inner, rev, WatchEvent::Delete { key, revision: rev });
                    }
                }
            }
        }
        Ok(TxnOutcome {
            succeeded: true,
            revision: rev,
        })
    }
}

impl StateStore for MemoryStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<KeyValue>>> {
        Box::pin(async move {
            let mut inner = self.lock();
            self.expire_leases(&mut inner);
            Ok(inner.data.get(key).map(|e| KeyValue {
                key: key.to_string(),
                value: e.value.clone(),
                mod_revision: e.mod_revision,
            }))
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Listing>> {
        Box::pin(async move {
            let mut inner = self.lock();
            self.expire_leases(&mut inner);
            let entries = inner
                .data
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, e)| KeyValue {
                    key: k.clone(),
                    value: e.value.clone(),
                    mod_revision: e.mod_revision,
                })
                .collect();
            Ok(Listing {
                entries,
                revision: inner.revision,
            })
        })
    }

    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>) -> BoxFuture<'a, StoreResult<i64>> {
        Box::pin(async move {
            let mut inner = self.lock();
            let out = self.apply(
                &mut inner,
                &[],
                vec![Op::Put {
                    key: key.to_string(),
                    value,
                    lease: None,
                }],
            )?;
            Ok(out.revision)
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let mut inner = self.lock();
            let existed = inner.data.contains_key(key);
            self.apply(
                &mut inner,
                &[],
                vec![Op::Delete {
                    key: key.to_string(),
                }],
            )?;
            Ok(existed)
        })
    }

    fn txn(&self, guards: Vec<Guard>, ops: Vec<Op>) -> BoxFuture<'_, StoreResult<TxnOutcome>> {
        Box::pin(async move {
            let mut inner = self.lock();
            self.apply(&mut inner, &guards, ops)
        })
    }

    fn watch(
        &self,
        prefix: String,
        from_revision: i64,
    ) -> BoxFuture<'_, StoreResult<BoxStream<'static, StoreResult<WatchEvent>>>> {
        Box::pin(async move {
            // Subscribe before copying history so nothing falls between the two.
            let inner = self.lock();
            let rx = self.events.subscribe();
            let past: Vec<(i64, WatchEvent)> = inner
                .history
                .iter()
                .filter(|(rev, _)| *rev >= from_revision)
                .cloned()
                .collect();
            let last_past = past.last().map_or(from_revision - 1, |(rev, _)| *rev);
            drop(inner);
            let matches = move |event: &WatchEvent, prefix: &str| match event {
                WatchEvent::Put { kv } => kv.key.starts_with(prefix),
                WatchEvent::Delete { key, .. } => key.starts_with(prefix),
            };
            let p1 = prefix.clone();
            let past = futures::stream::iter(
                past.into_iter()
                    .filter(move |(_, e)| matches(e, &p1))
                    .map(|(_, e)| Ok(e)),
            );
            let live = futures::stream::unfold(rx, |mut rx| async move {
                match rx.recv().await {
                    Ok(item) => Some((Ok(item), rx)),
                    Err(broadcast::error::RecvError::Lagged(n)) => Some((
                        Err(StoreError::Watch {
                            revision: 0,
                            reason: format!("lagged {n} events"),
                        }),
                        rx,
                    )),
                    Err(broadcast::error::RecvError::Closed) => None,
                }
            })
            .filter_map(move |item| {
                let prefix = prefix.clone();
                async move {
                    match item {
                        Ok((rev, event)) if rev > last_past && matches(&event, &prefix) => {
                            Some(Ok(event))
                        }
                        Ok(_) => None,
                        Err(e) => Some(Err(e)),
                    }
                }
            });
            Ok(past.chain(live).boxed())
        })
    }

    fn grant_lease(&self, ttl_secs: i64) -> BoxFuture<'_, StoreResult<LeaseId>> {
        Box::pin(async move {
            let mut inner = self.lock();
            inner.next_lease += 1;
            let id = inner.next_lease;
            let ttl = Duration::from_secs(u64::try_from(ttl_secs.max(1)).unwrap_or(1));
            inner.leases.insert(
                id,
                Lease {
                    ttl,
                    deadline: Instant::now() + ttl,
                },
            );
            Ok(LeaseId(id))
        })
    }

    fn keep_alive(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let mut inner = self.lock();
            self.expire_leases(&mut inner);
            match inner.leases.get_mut(&lease.0) {
                Some(l) => {
                    l.deadline = Instant::now() + l.ttl;
                    Ok(())
                }
                None => Err(StoreError::LeaseNotFound(lease.0)),
            }
        })
    }

    fn revoke_lease(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let mut inner = self.lock();
            inner.leases.remove(&lease.0);
            self.drop_lease_keys(&mut inner, lease);
            Ok(())
        })
    }
}
