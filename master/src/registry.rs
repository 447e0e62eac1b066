//! The service registry (reference §1.3): each instance puts a JSON record at
//! `/contiv.io/service/<name>/<host>:<port>` on a lease of `TTL` seconds and keeps it alive every
//! `TTL/3`; a crashed instance disappears when its lease expires. If the lease is lost (e.g. etcd was
//! down longer than the TTL) the record is written again on a new lease.

#![allow(non_snake_case)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::store::txn::decode;
use crate::store::{Guard, Op, StateStore, StoreError, StoreResult, WatchEvent, keys};

pub const NETMASTER: &str = "netmaster";
pub const NETMASTER_RPC: &str = "netmaster.rpc";
pub const NETPLUGIN: &str = "netplugin";
pub const NETPLUGIN_VTEP: &str = "netplugin.vtep";
/// A netplugin's debug listener (`/inspect/*`), so tools find every host through netmaster
/// (`GET /debug/netplugins`, `netctl trace`). Not in Contiv's registry.
pub const NETPLUGIN_DEBUG: &str = "netplugin.debug";

/// One registered instance (Go field names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ServiceInfo {
    pub ServiceName: String,
    pub Role: String,
    pub Version: String,
    pub TTL: i64,
    pub HostAddr: String,
    pub Port: u16,
    pub Hostname: String,
}

impl ServiceInfo {
    pub fn key(&self) -> String {
        keys::service(&self.ServiceName, &self.HostAddr, self.Port)
    }
}

/// A live registration; `set_role` rewrites the record, dropping the handle does not unregister
/// (cancel the token given to [`register`]).
pub struct Registration {
    info: watch::Sender<ServiceInfo>,
    pub task: tokio::task::JoinHandle<()>,
}

impl Registration {
    pub fn set_role(&self, role: &str) {
        self.info.send_if_modified(|i| {
            let changed = i.Role != role;
            i.Role = role.to_string();
            changed
        });
    }
}

/// Register `info` until `cancel` fires (then the record is removed).
pub fn register(
    store: Arc<dyn StateStore>,
    info: ServiceInfo,
    cancel: CancellationToken,
) -> Registration {
    let (tx, rx) = watch::channel(info);
    let task = tokio::spawn(keep_registered(store, rx, cancel));
    Registration { info: tx, task }
}

async fn put_record(
    store: &dyn StateStore,
    info: &ServiceInfo,
    lease: crate::store::LeaseId,
) -> StoreResult<()> {
    let value = serde_json::to_vec(info).map_err(|e| StoreError::Encode {
        key: info.key(),
        kind: "ServiceInfo",
        reason: e.to_string(),
    })?;
    store
        .txn(
            Vec::<Guard>::new(),
            vec![Op::Put {
                key: info.key(),
                value,
                lease: Some(lease),
            }],
        )
        .await?;
    Ok(())
}

async fn keep_registered(
    store: Arc<dyn StateStore>,
    mut rx: watch::Receiver<ServiceInfo>,
    cancel: CancellationToken,
) {
    let ttl = rx.borrow().TTL.max(1);
    let interval = Duration::from_millis(u64::try_from(ttl * 1000 / 3).unwrap_or(1000));
    let mut lease = None;
    // The `Registration` may be dropped (its record then never changes): from then on only
    // keep-alives and `cancel` matter (a closed channel would otherwise wake the loop forever
    // and starve the keep-alive).
    let mut updates = true;
    loop {
        if lease.is_none() {
            let info = rx.borrow().clone();
            match store.grant_lease(ttl).await {
                Ok(l) => match put_record(store.as_ref(), &info, l).await {
                    Ok(()) => lease = Some(l),
                    Err(e) => {
                        tracing::warn!(key = %info.key(), error = %e, "service registration failed")
                    }
                },
                Err(e) => {
                    tracing::warn!(key = %info.key(), error = %e, "service registration lease failed")
                }
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => {
                if let Some(l) = lease {
                    let _ = store.revoke_lease(l).await;
                }
                return;
            }
            changed = rx.changed(), if updates => {
                if changed.is_err() {
                    updates = false;
                    continue;
                }
                if let Some(l) = lease {
                    let info = rx.borrow().clone();
                    if let Err(e) = put_record(store.as_ref(), &info, l).await {
                        tracing::warn!(error = %e, "service record update failed");
                    }
                }
                continue;
            }
            _ = tokio::time::sleep(interval) => {}
        }
        if let Some(l) = lease {
            match store.keep_alive(l).await {
                Ok(()) => {}
                Err(StoreError::LeaseNotFound(_)) => lease = None,
                Err(e) => tracing::debug!(error = %e, "service lease keep-alive failed; retrying"),
            }
        }
    }
}

/// Current instances of `name`.
pub async fn list(store: &dyn StateStore, name: &str) -> StoreResult<Vec<ServiceInfo>> {
    let listing = store.list(&format!("{}{name}/", keys::SERVICE)).await?;
    listing
        .entries
        .iter()
        .map(|kv| decode(&kv.key, "ServiceInfo", &kv.value))
        .collect()
}

/// A change in the instances of a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceEvent {
    Added(ServiceInfo),
    /// The record's key was deleted or expired.
    Removed {
        key: String,
    },
}

/// The current instances as `Added` events, then changes as they happen (no gap between the two).
pub async fn watch(
    store: Arc<dyn StateStore>,
    name: &str,
) -> StoreResult<BoxStream<'static, StoreResult<ServiceEvent>>> {
    let prefix = format!("{}{name}/", keys::SERVICE);
    let listing = store.list(&prefix).await?;
    let mut seen: std::collections::BTreeSet<String> =
        listing.entries.iter().map(|kv| kv.key.clone()).collect();
    let initial: Vec<StoreResult<ServiceEvent>> = listing
        .entries
        .iter()
        .map(|kv| decode(&kv.key, "ServiceInfo", &kv.value).map(ServiceEvent::Added))
        .collect();
    let changes = store.watch(prefix, listing.revision + 1).await?;
    let changes = changes.filter_map(move |ev| {
        let out = match ev {
            Ok(WatchEvent::Put { kv }) => {
                if seen.insert(kv.key.clone()) {
                    Some(decode(&kv.key, "ServiceInfo", &kv.value).map(ServiceEvent::Added))
                } else {
                    None
                }
            }
            Ok(WatchEvent::Delete { key, .. }) => {
                seen.remove(&key);
                Some(Ok(ServiceEvent::Removed { key }))
            }
            Err(e) => Some(Err(e)),
        };
        futures::future::ready(out)
    });
    Ok(futures::stream::iter(initial).chain(changes).boxed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[tokio::test]
    async fn register_list_watch_and_unregister() {
        let store: Arc<dyn StateStore> = Arc::new(MemoryStore::new());
        let cancel = CancellationToken::new();
        let info = ServiceInfo {
            ServiceName: NETMASTER.into(),
            Role: "follower".into(),
            TTL: 10,
            HostAddr: "10.0.0.1".into(),
            Port: 9999,
            ..Default::default()
        };
        let mut events = watch(store.clone(), NETMASTER).await.unwrap();
        let reg = register(store.clone(), info.clone(), cancel.clone());
        let first = tokio::time::timeout(Duration::from_secs(2), events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(first, ServiceEvent::Added(info.clone()));
        reg.set_role("leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let listed = list(store.as_ref(), NETMASTER).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].Role, "leader");
        cancel.cancel();
        reg.task.await.unwrap();
        let gone = tokio::time::timeout(Duration::from_secs(2), events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(gone, ServiceEvent::Removed { key: info.key() });
    }
}
