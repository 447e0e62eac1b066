//! [`StateStore`] over an etcd v3 cluster (`etcd-client`).
//!
//! Every request goes through [`Members`](super::members::Members), which picks the member in use,
//! applies a per-attempt deadline and fails over to the next member; transport and availability
//! failures that no member could answer become [`StoreError::Unavailable`] (HTTP 503). Nothing here
//! retries by itself beyond that, and nothing needs a restart after an outage.

use std::sync::Arc;

use etcd_client::{
    Compare, CompareOp, DeleteOptions, EventType, GetOptions, PutOptions, Txn, TxnOp, WatchOptions,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;

use super::connect::{self, ConnectError, EtcdConfig};
use super::members::{Members, map_err};
use super::{
    Guard, KeyValue, LeaseId, Listing, Op, StateStore, StoreError, StoreResult, TxnOutcome,
    WatchEvent,
};

/// A connection to an etcd cluster. Cloning is cheap and shares the member set.
#[derive(Clone)]
pub struct EtcdStore {
    members: Arc<Members>,
}

impl EtcdStore {
    /// Connect to plain-HTTP `endpoints` (`http://host:port`, `etcd://host:port`).
    ///
    /// Connecting is lazy; an unreachable etcd is reported by the first request.
    pub async fn connect(endpoints: &[String]) -> StoreResult<Self> {
        Self::connect_with(&EtcdConfig::plain(endpoints))
            .await
            .map_err(|e| match e {
                ConnectError::Unavailable(e) => e,
                other => StoreError::Other(other.to_string()),
            })
    }

    /// Connect with the full configuration (TLS files included). With TLS, every reachable member
    /// is asked once so that a wrong CA or a missing client certificate is a start-up error naming
    /// the file; unreachable members are not an error (they are retried per request).
    pub async fn connect_with(config: &EtcdConfig) -> Result<Self, ConnectError> {
        let endpoints = connect::endpoints(config)?;
        let options = connect::options(config)?;
        let members = Members::start(endpoints, options).await?;
        let store = EtcdStore { members };
        if config.has_tls() {
            store.probe_tls(config).await?;
        }
        Ok(store)
    }

    async fn probe_tls(&self, config: &EtcdConfig) -> Result<(), ConnectError> {
        for (endpoint, _) in self.members.endpoints() {
            connect::check_handshake(config, &endpoint).await?;
        }
        Ok(())
    }

    /// The endpoint requests are sent to now (tests and diagnostics).
    pub fn current_endpoint(&self) -> Option<String> {
        self.members.current_endpoint()
    }

    /// Every known member endpoint with whether it is considered healthy.
    pub fn member_endpoints(&self) -> Vec<(String, bool)> {
        self.members.endpoints()
    }
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
            let (resp, _) = self
                .members
                .call(|c| async move { c.kv_client().get(key, None).await })
                .await?;
            Ok(resp.kvs().first().map(kv_from))
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Listing>> {
        Box::pin(async move {
            let (resp, _) = self
                .members
                .call(|c| async move {
                    c.kv_client()
                        .get(prefix, Some(GetOptions::new().with_prefix()))
                        .await
                })
                .await?;
            Ok(Listing {
                entries: resp.kvs().iter().map(kv_from).collect(),
                revision: revision_of(resp.header()),
            })
        })
    }

    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>) -> BoxFuture<'a, StoreResult<i64>> {
        Box::pin(async move {
            let value = &value;
            let (resp, _) = self
                .members
                .call(|c| async move { c.kv_client().put(key, value.clone(), None).await })
                .await?;
            Ok(revision_of(resp.header()))
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let (resp, _) = self
                .members
                .call(|c| async move { c.kv_client().delete(key, None::<DeleteOptions>).await })
                .await?;
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
            let txn = &Txn::new().when(compares).and_then(txn_ops);
            // A retry on another member after a missed deadline may find its own earlier attempt
            // applied: the guards then fail and `txn::run` re-reads, as for any other conflict.
            let (resp, _) = self
                .members
                .call(|c| async move { c.kv_client().txn(txn.clone()).await })
                .await?;
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
            let prefix_ref = &prefix;
            let (stream, member) = self
                .members
                .call(|c| async move {
                    let options = WatchOptions::new()
                        .with_prefix()
                        .with_start_revision(from_revision);
                    c.watch_client()
                        .watch(prefix_ref.clone(), Some(options))
                        .await
                })
                .await?;
            let endpoint = member.endpoint.clone();
            // Ends the stream when the member is marked down (hung or cut off), so the follower
            // resumes on another member instead of waiting on this one.
            let down: futures::future::BoxFuture<'static, ()> = Box::pin(member.went_down());
            // The WatchStream owns the request sender; keeping it in the state keeps the watch alive.
            let events = futures::stream::unfold(Some((stream, down)), move |state| {
                let endpoint = endpoint.clone();
                async move {
                    let (mut stream, mut down) = state?;
                    let message = tokio::select! {
                        m = stream.message() => m,
                        () = &mut down => {
                            let err = StoreError::Unavailable(format!(
                                "etcd member {endpoint} went down under a watch"
                            ));
                            return Some((vec![Err(err)], None));
                        }
                    };
                    match message {
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
                            Some((items, Some((stream, down))))
                        }
                        Ok(None) => Some((
                            vec![Err(StoreError::Unavailable(format!(
                                "etcd member {endpoint} closed a watch"
                            )))],
                            None,
                        )),
                        Err(e) => Some((vec![Err(map_err(e))], None)),
                    }
                }
            })
            .flat_map(futures::stream::iter);
            Ok(events.boxed())
        })
    }

    fn grant_lease(&self, ttl_secs: i64) -> BoxFuture<'_, StoreResult<LeaseId>> {
        Box::pin(async move {
            let (resp, _) = self
                .members
                .call(|c| async move { c.lease_client().grant(ttl_secs, None).await })
                .await?;
            Ok(LeaseId(resp.id()))
        })
    }

    fn keep_alive(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        // A lease belongs to the cluster, not to a member: the keep-alive goes wherever requests go.
        Box::pin(async move {
            match self
                .members
                .call(|c| async move { c.lease_client().keep_alive(lease.0).await })
                .await
            {
                Ok(_) => Ok(()),
                Err(StoreError::LeaseNotFound(_)) => Err(StoreError::LeaseNotFound(lease.0)),
                Err(other) => Err(other),
            }
        })
    }

    fn revoke_lease(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            self.members
                .call(|c| async move { c.lease_client().revoke(lease.0).await })
                .await?;
            Ok(())
        })
    }
}
