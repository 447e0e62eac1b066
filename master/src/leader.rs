//! Leader election on `/contiv.io/lock/netmaster/leader` (reference §1.3) with a lease and a
//! transaction, and the leader/follower state every handler consults.
//!
//! * Acquire: grant a lease of `ttl`, then put `<control ip:port>` on the lock key only if the key is
//!   absent (`mod_revision == 0`), attached to the lease.
//! * Hold: keep the lease alive every `ttl/3` and check the key still names us. A lost lease, a key
//!   naming someone else, or no successful keep-alive for a whole `ttl` (etcd unreachable) makes us a
//!   follower again: after `ttl` etcd may have expired the lease and elected someone else.
//! * Follow: read the key every `min(ttl/4, 1 s)`; the holder is the leader to proxy to; an absent key
//!   is a chance to acquire. So a killed leader is replaced within `ttl` plus one poll.
//! * Release on shutdown: revoke the lease, which deletes the key at once.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::{Guard, LeaseId, Op, StateStore, StoreError, keys};

/// Who leads, as seen by this netmaster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaderState {
    pub is_leader: bool,
    /// The lock holder's control address, if known.
    pub leader: Option<String>,
}

/// A cheap, cloneable view of the current [`LeaderState`].
#[derive(Clone)]
pub struct RoleView(watch::Receiver<LeaderState>);

impl RoleView {
    pub fn current(&self) -> LeaderState {
        self.0.borrow().clone()
    }

    /// Wait for the next change; `false` when the election has stopped.
    pub async fn changed(&mut self) -> bool {
        self.0.changed().await.is_ok()
    }

    /// A view that never changes (tests and single-node tools).
    pub fn fixed(state: LeaderState) -> Self {
        let (tx, rx) = watch::channel(state);
        // Keep the sender alive for the program's lifetime so `current` keeps answering.
        std::mem::forget(tx);
        RoleView(rx)
    }
}

/// The current lock holder's control address (`ip:port`), as netplugin uses it to find the leader.
pub async fn holder(store: &dyn StateStore) -> Result<Option<String>, StoreError> {
    Ok(store
        .get(keys::LEADER_LOCK)
        .await?
        .map(|kv| String::from_utf8_lossy(&kv.value).into_owned()))
}

/// Election parameters.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// This netmaster's id: its control address `ip:port`.
    pub id: String,
    /// Lock TTL (Contiv: 30 s).
    pub ttl: Duration,
}

/// Start the election task. The returned view follows the role; the task ends when `cancel` fires,
/// releasing the lock if held.
pub fn spawn(
    store: Arc<dyn StateStore>,
    config: ElectionConfig,
    cancel: CancellationToken,
) -> (RoleView, tokio::task::JoinHandle<()>) {
    spawn_counted(store, config, cancel, Counter::default())
}

/// [`spawn`], counting every acquisition of the lock in `won` (`netmaster_leader_elections_total`).
pub fn spawn_counted(
    store: Arc<dyn StateStore>,
    config: ElectionConfig,
    cancel: CancellationToken,
    won: Counter,
) -> (RoleView, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(LeaderState::default());
    let handle = tokio::spawn(run(store, config, tx, cancel, won));
    (RoleView(rx), handle)
}

fn ttl_secs(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_secs()).unwrap_or(30).max(1)
}

async fn run(
    store: Arc<dyn StateStore>,
    config: ElectionConfig,
    tx: watch::Sender<LeaderState>,
    cancel: CancellationToken,
    won: Counter,
) {
    let poll = (config.ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
    // The lease of our last term: after an etcd outage the lock may still be ours.
    let mut last_lease = None;
    loop {
        match follow_once(store.as_ref(), &config, &tx, last_lease).await {
            Ok(Some(lease)) => {
                last_lease = Some(lease);
                tracing::info!(id = %config.id, "acquired netmaster leader lock");
                won.inc();
                tx.send_replace(LeaderState {
                    is_leader: true,
                    leader: Some(config.id.clone()),
                });
                let released = hold(store.as_ref(), &config, lease, &cancel).await;
                tx.send_replace(LeaderState {
                    is_leader: false,
                    leader: None,
                });
                if released {
                    return;
                }
                tracing::warn!(id = %config.id, "lost netmaster leader lock; now a follower");
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "leader election: state store error"),
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(poll) => {}
        }
    }
}

/// One follower step: resume a lock that is still ours, publish the current holder, or try to take
/// the free lock.
async fn follow_once(
    store: &dyn StateStore,
    config: &ElectionConfig,
    tx: &watch::Sender<LeaderState>,
    last_lease: Option<LeaseId>,
) -> Result<Option<LeaseId>, StoreError> {
    if let Some(kv) = store.get(keys::LEADER_LOCK).await? {
        let holder = String::from_utf8_lossy(&kv.value).into_owned();
        if holder == config.id
            && let Some(lease) = last_lease
            && store.keep_alive(lease).await.is_ok()
        {
            // We stepped down while etcd was unreachable, but the lease outlived the outage.
            return Ok(Some(lease));
        }
        tx.send_if_modified(|s| {
            let next = LeaderState {
                is_leader: false,
                leader: Some(holder.clone()),
            };
            let changed = *s != next;
            *s = next;
            changed
        });
        return Ok(None);
    }
    let lease = store.grant_lease(ttl_secs(config.ttl)).await?;
    let put = Op::Put {
        key: keys::LEADER_LOCK.into(),
        value: config.id.clone().into_bytes(),
        lease: Some(lease),
    };
    let outcome = store
        .txn(
            vec![Guard::ModRevision {
                key: keys::LEADER_LOCK.into(),
                revision: 0,
            }],
            vec![put],
        )
        .await?;
    if outcome.succeeded {
        Ok(Some(lease))
    } else {
        let _ = store.revoke_lease(lease).await;
        Ok(None)
    }
}

/// Hold the lock until it is lost (returns `false`) or `cancel` fires (releases it, returns `true`).
async fn hold(
    store: &dyn StateStore,
    config: &ElectionConfig,
    lease: LeaseId,
    cancel: &CancellationToken,
) -> bool {
    let mut last_ok = Instant::now();
    let interval = (config.ttl / 3).max(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => {
                if let Err(e) = store.revoke_lease(lease).await {
                    tracing::warn!(error = %e, "could not release the leader lock; it expires with its lease");
                }
                return true;
            }
            _ = tokio::time::sleep(interval) => {}
        }
        match store.keep_alive(lease).await {
            Ok(()) => match store.get(keys::LEADER_LOCK).await {
                Ok(Some(kv)) if kv.value == config.id.as_bytes() => last_ok = Instant::now(),
                Ok(_) => return false,
                Err(e) => tracing::warn!(error = %e, "leader lock check failed"),
            },
            Err(StoreError::LeaseNotFound(_)) => return false,
            Err(e) => tracing::warn!(error = %e, "leader lock keep-alive failed"),
        }
        if last_ok.elapsed() >= config.ttl {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[tokio::test]
    async fn one_of_two_leads_and_the_other_takes_over_after_release() {
        let store: Arc<dyn StateStore> = Arc::new(MemoryStore::new());
        let ttl = Duration::from_secs(2);
        let c1 = CancellationToken::new();
        let c2 = CancellationToken::new();
        let (v1, h1) = spawn(
            store.clone(),
            ElectionConfig {
                id: "a:1".into(),
                ttl,
            },
            c1.clone(),
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (v2, _h2) = spawn(
            store.clone(),
            ElectionConfig {
                id: "b:2".into(),
                ttl,
            },
            c2.clone(),
        );
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert!(v1.current().is_leader);
        assert_eq!(
            holder(store.as_ref()).await.unwrap().as_deref(),
            Some("a:1")
        );
        assert_eq!(
            v2.current(),
            LeaderState {
                is_leader: false,
                leader: Some("a:1".into())
            }
        );
        c1.cancel();
        h1.await.unwrap();
        tokio::time::sleep(Duration::from_millis(1200)).await;
        assert!(v2.current().is_leader);
        c2.cancel();
    }
}
