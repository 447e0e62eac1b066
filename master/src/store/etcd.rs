//! [`StateStore`] over etcd v3 (`etcd-client`).
//!
//! Transport and availability failures (connection refused, deadline exceeded, no leader) become
//! [`StoreError::Unavailable`]; the client reconnects by itself, so the next call after etcd comes back
//! succeeds without any restart. Every call has a deadline so an outage surfaces as an error quickly
//! instead of hanging a REST request.

use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions, PutOptions,
    Txn, TxnOp, WatchOptions,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;

use super::{
    Guard, KeyValue, LeaseId, Listing, Op, StateStore, StoreError, StoreResult, TxnOutcome,
    WatchEvent,
};

/// Per-request deadline. Long enough for a loaded CI machine's fsync, short enough that an outage
/// answers 503 before a client gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection to etcd. Cloning is cheap and shares the underlying channel.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
}

impl EtcdStore {
    /// Connect to the first reachable endpoint of `endpoints` (`http://host:port`).
    ///
    /// Connecting is lazy in the transport; an unreachable etcd is reported by the first request.
    pub async fn connect(endpoints: &[String]) -> StoreResult<Self> {
        let endpoints: Vec<String> = endpoints
            .iter()
            .map(|e| {
                e.strip_prefix("etcd://")
                    .map_or_else(|| e.clone(), |rest| format!("http://{rest}"))
            })
            .collect();
        let options = ConnectOptions::new()
            .with_timeout(REQUEST_TIMEOUT)
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_keep_alive(Duration::from_secs(5), Duration::from_secs(3));
        let client = Client::connect(&endpoints, Some(options))
            .await
            .map_err(map_err)?;
        Ok(EtcdStore { client })
    }
}

/// Classify an etcd-client error: anything that a retry after recovery can fix is `Unavailable`.
fn map_err(err: etcd_client::Error) -> StoreError {
    use etcd_client::Error as E;
    match err {
        E::TransportError(e) => StoreError::Unavailable(e.to_string()),
        E::IoError(e) => StoreError::Unavailable(e.to_string()),
        E::GRpcStatus(status) => match status.code() as i32 {
            tonic_code::UNAVAILABLE
            | tonic_code::DEADLINE_EXCEEDED
            | tonic_code::CANCELLED
            | tonic_code::UNKNOWN => StoreError::Unavailable(status.message().to_string()),
            _ => StoreError::Other(status.message().to_string()),
        },
        E::LeaseKeepAliveError(msg) if msg.contains("not found") => StoreError::LeaseNotFound(0),
        other => StoreError::Other(other.to_string()),
    }
}

/// gRPC status codes compared by number (tonic is not a direct dependency).
mod tonic_code {
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const UNAVAILABLE: i32 = 14;
}

fn kv_from(kv: &etcd_client::KeyValue) -> KeyValue {
    KeyValue {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        value: kv.value().to_vec(),
        mod_revision: kv.mod_revision(),
    }
}

fn revision_of(header: Option<&etcd_client::ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision())
}

impl StateStore for EtcdStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<KeyValue>>> {
        Box::pin(async move {
            let mut kv = self.client.kv_client();
            let resp = kv.get(key, None).await.map_err(map_err)?;
            Ok(resp.kvs().first().map(kv_from))
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Listing>> {
        Box::pin(async move {
            let mut kv = self.client.kv_client();
            let resp = kv
                .get(prefix, Some(GetOptions::new().with_prefix()))
                .await
                .map_err(map_err)?;
            Ok(Listing {
                entries: resp.kvs().iter().map(kv_from).collect(),
                revision: revision_of(resp.header()),
            })
        })
    }

    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>) -> BoxFuture<'a, StoreResult<i64>> {
        Box::pin(async move {
            let mut kv = self.client.kv_client();
            let resp = kv.put(key, value, None).await.map_err(map_err)?;
            Ok(revision_of(resp.header()))
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let mut kv = self.client.kv_client();
            let resp = kv
                .delete(key, None::<DeleteOptions>)
                .await
                .map_err(map_err)?;
            Ok(resp.deleted() > 0)
        })
    }

    fn txn(&self, guards: Vec<Guard>, ops: Vec<Op>) -> BoxFuture<'_, StoreResult<TxnOutcome>> {
        Box::pin(async move {
            let compares: Vec<Compare> = guards
                .into_iter()
                .map(|g| match g {
                    Guard::ModRevision { key, revision } => {
                        Compare::mod_revision(key, CompareOp::Equal, revision)
                    }
                    // "every key under the prefix has mod_revision < revision+1"; a key created after the
                    // listing has a larger mod_revision and fails the compare.
                    Guard::PrefixUnchangedSince { prefix, revision } => {
                        Compare::mod_revision(prefix, CompareOp::Less, revision + 1).with_prefix()
                    }
                })
                .collect();
            let txn_ops: Vec<TxnOp> = ops
                .into_iter()
                .map(|op| match op {
                    Op::Put { key, value, lease } => {
                        TxnOp::put(key, value, lease.map(|l| PutOptions::new().with_lease(l.0)))
                    }
                    Op::Delete { key } => TxnOp::delete(key, None),
                })
                .collect();
            let mut kv = self.client.kv_client();
            let resp = kv
                .txn(Txn::new().when(compares).and_then(txn_ops))
                .await
                .map_err(map_err)?;
            Ok(TxnOutcome {
                succeeded: resp.succeeded(),
                revision: revision_of(resp.header()),
            })
        })
    }

    fn watch(
        &self,
        prefix: String,
        from_revision: i64,
    ) -> BoxFuture<'_, StoreResult<BoxStream<'static, StoreResult<WatchEvent>>>> {
        Box::pin(async move {
            let mut wc = self.client.watch_client();
            let options = WatchOptions::new()
                .with_prefix()
                .with_start_revision(from_revision);
            let stream = wc.watch(prefix, Some(options)).await.map_err(map_err)?;
            // The WatchStream owns the request sender; keeping it in the state keeps the watch alive.
            let events = futures::stream::unfold(Some(stream), move |state| async move {
                let mut stream = state?;
                match stream.message().await {
                    Ok(Some(resp)) => {
                        if resp.canceled() {
                            let err = StoreError::Watch {
                                revision: resp.compact_revision(),
                                reason: format!("watch canceled: {}", resp.cancel_reason()),
                            };
                            return Some((vec![Err(err)], None));
                        }
                        let items = resp
                            .events()
                            .iter()
                            .filter_map(|ev| {
                                let kv = ev.kv()?;
                                Some(Ok(match ev.event_type() {
                                    EventType::Put => WatchEvent::Put { kv: kv_from(kv) },
                                    EventType::Delete => WatchEvent::Delete {
                                        key: String::from_utf8_lossy(kv.key()).into_owned(),
                                        revision: kv.mod_revision(),
                                    },
                                }))
                            })
                            .collect::<Vec<_>>();
                        Some((items, Some(stream)))
                    }
                    Ok(None) => None,
                    Err(e) => Some((vec![Err(map_err(e))], None)),
                }
            })
            .flat_map(futures::stream::iter);
            Ok(events.boxed())
        })
    }

    fn grant_lease(&self, ttl_secs: i64) -> BoxFuture<'_, StoreResult<LeaseId>> {
        Box::pin(async move {
            let mut lc = self.client.lease_client();
            let resp = lc.grant(ttl_secs, None).await.map_err(map_err)?;
            Ok(LeaseId(resp.id()))
        })
    }

    fn keep_alive(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let mut lc = self.client.lease_client();
            match lc.keep_alive(lease.0).await {
                Ok(_) => Ok(()),
                Err(e) => match map_err(e) {
                    StoreError::LeaseNotFound(_) => Err(StoreError::LeaseNotFound(lease.0)),
                    other => Err(other),
                },
            }
        })
    }

    fn revoke_lease(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let mut lc = self.client.lease_client();
            lc.revoke(lease.0).await.map_err(map_err)?;
            Ok(())
        })
    }
}
