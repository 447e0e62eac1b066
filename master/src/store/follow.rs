//! A watch that survives outages: the current state first, then every change, resumed from the last
//! seen revision after an error (etcd restarted, connection lost). If etcd has compacted that revision
//! away, the prefix is listed again and a fresh snapshot is delivered so the consumer can reconcile.
//!
//! This is what netplugin-style consumers want instead of a bare [`StateStore::watch`]: no gap between
//! list and watch, and no silent end when etcd goes away.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;

use super::{KeyValue, StateStore, StoreError, WatchEvent};

/// Pause between attempts while the store is unreachable (the store already tried every member).
const RETRY: Duration = Duration::from_millis(500);
/// Pause before resuming a watch that broke: the store moves to another member at once, so the
/// watch is reopened almost immediately (the pause only keeps a flapping member from spinning).
const RESUME: Duration = Duration::from_millis(50);

/// What a follower of a prefix sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateEvent {
    /// Everything under the prefix at `revision` (first event, and after a compaction gap).
    Snapshot {
        entries: Vec<KeyValue>,
        revision: i64,
    },
    /// A key was created or changed.
    Put(KeyValue),
    /// A key was deleted (or its lease expired).
    Delete { key: String, revision: i64 },
}

enum Phase {
    /// Need a listing (start, or the watch position was compacted away).
    List,
    /// Need a watch from this revision.
    Watch(i64),
    /// Streaming; the revision to resume from if the stream breaks.
    Streaming(BoxStream<'static, Result<WatchEvent, StoreError>>, i64),
}

/// Follow `prefix` forever (until the stream is dropped).
pub fn follow(store: Arc<dyn StateStore>, prefix: String) -> BoxStream<'static, StateEvent> {
    futures::stream::unfold((store, prefix, Phase::List), |(store, prefix, mut phase)| async move {
        loop {
            phase = match phase {
                Phase::List => match super::list_all(store.as_ref(), &prefix).await {
                    Ok(listing) => {
                        let next = Phase::Watch(listing.revision + 1);
                        let event = StateEvent::Snapshot { entries: listing.entries, revision: listing.revision };
                        return Some((event, (store, prefix, next)));
                    }
                    Err(e) => {
                        tracing::debug!(%prefix, error = %e, "follow: listing failed; retrying");
                        tokio::time::sleep(RETRY).await;
                        Phase::List
                    }
                },
                Phase::Watch(from) => match store.watch(prefix.clone(), from).await {
                    Ok(stream) => Phase::Streaming(stream, from),
                    Err(e) => {
                        tracing::debug!(%prefix, error = %e, "follow: watch failed; retrying");
                        tokio::time::sleep(RETRY).await;
                        Phase::Watch(from)
                    }
                },
                Phase::Streaming(mut stream, from) => match stream.next().await {
                    Some(Ok(WatchEvent::Put { kv })) => {
                        let next = kv.mod_revision + 1;
                        return Some((StateEvent::Put(kv), (store, prefix, Phase::Streaming(stream, next))));
                    }
                    Some(Ok(WatchEvent::Delete { key, revision })) => {
                        let next = revision + 1;
                        return Some((StateEvent::Delete { key, revision }, (store, prefix, Phase::Streaming(stream, next))));
                    }
                    // etcd compacted the history we need: start over from a listing.
                    Some(Err(StoreError::Watch { revision, .. })) if revision > 0 => Phase::List,
                    Some(Err(e)) => {
                        tracing::debug!(%prefix, error = %e, from, "follow: watch broke; resuming");
                        tokio::time::sleep(RESUME).await;
                        Phase::Watch(from)
                    }
                    None => {
                        tokio::time::sleep(RESUME).await;
                        Phase::Watch(from)
                    }
                },
            };
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[tokio::test]
    async fn snapshot_then_changes() {
        let store = Arc::new(MemoryStore::new());
        store.put("/p/a", b"1".to_vec()).await.unwrap();
        let mut events = follow(store.clone(), "/p/".into());
        match events.next().await.unwrap() {
            StateEvent::Snapshot { entries, .. } => assert_eq!(entries.len(), 1),
            other => panic!("{other:?}"),
        }
        store.put("/p/b", b"2".to_vec()).await.unwrap();
        store.delete("/p/a").await.unwrap();
        assert!(matches!(events.next().await.unwrap(), StateEvent::Put(kv) if kv.key == "/p/b"));
        assert!(
            matches!(events.next().await.unwrap(), StateEvent::Delete { key, .. } if key == "/p/a")
        );
    }
}
