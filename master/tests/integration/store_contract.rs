//! The `StateStore` contract, checked against both implementations: the in-memory store the unit
//! tests rely on must behave like etcd where it matters (revisions, guards, watches, leases).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use master::store::{EtcdStore, Guard, MemoryStore, Op, StateStore, StoreError, WatchEvent};

async fn next_event(
    events: &mut futures::stream::BoxStream<'static, Result<WatchEvent, StoreError>>,
) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("watch event in time")
        .unwrap()
        .unwrap()
}

fn put(key: &str, value: &str) -> Op {
    Op::Put {
        key: key.into(),
        value: value.as_bytes().to_vec(),
        lease: None,
    }
}

async fn contract(store: Arc<dyn StateStore>) {
    // Revisions.
    assert!(store.get("/t/a").await.unwrap().is_none());
    let r1 = store.put("/t/a", b"1".to_vec()).await.unwrap();
    let a = store.get("/t/a").await.unwrap().unwrap();
    assert_eq!((a.value.as_slice(), a.mod_revision), (b"1".as_slice(), r1));
    store.put("/t/b", b"2".to_vec()).await.unwrap();
    store.put("/u/c", b"3".to_vec()).await.unwrap();
    let listing = store.list("/t/").await.unwrap();
    let keys: Vec<&str> = listing.entries.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/t/a", "/t/b"]);
    let listed_at = listing.revision;

    // Key guards: current revision passes, a stale one fails and writes nothing.
    let ok = store
        .txn(
            vec![Guard::ModRevision {
                key: "/t/a".into(),
                revision: r1,
            }],
            vec![put("/t/a", "10")],
        )
        .await
        .unwrap();
    assert!(ok.succeeded);
    let stale = store
        .txn(
            vec![Guard::ModRevision {
                key: "/t/a".into(),
                revision: r1,
            }],
            vec![put("/t/a", "11"), put("/t/z", "z")],
        )
        .await
        .unwrap();
    assert!(!stale.succeeded);
    assert_eq!(store.get("/t/a").await.unwrap().unwrap().value, b"10");
    assert!(store.get("/t/z").await.unwrap().is_none());
    // Revision 0 means "absent": create-if-absent works once.
    let absent = Guard::ModRevision {
        key: "/t/new".into(),
        revision: 0,
    };
    assert!(
        store
            .txn(vec![absent.clone()], vec![put("/t/new", "n")])
            .await
            .unwrap()
            .succeeded
    );
    assert!(
        !store
            .txn(vec![absent], vec![put("/t/new", "m")])
            .await
            .unwrap()
            .succeeded
    );

    // Prefix guard: anything written under the prefix after the listing fails it; an untouched or
    // empty prefix passes.
    let since = Guard::PrefixUnchangedSince {
        prefix: "/t/".into(),
        revision: listed_at,
    };
    assert!(
        !store
            .txn(vec![since], vec![put("/x/1", "1")])
            .await
            .unwrap()
            .succeeded
    );
    let now = store.list("/u/").await.unwrap().revision;
    assert!(
        store
            .txn(
                vec![Guard::PrefixUnchangedSince {
                    prefix: "/u/".into(),
                    revision: now
                }],
                vec![put("/x/1", "1")]
            )
            .await
            .unwrap()
            .succeeded
    );
    assert!(
        store
            .txn(
                vec![Guard::PrefixUnchangedSince {
                    prefix: "/empty/".into(),
                    revision: 1
                }],
                vec![put("/x/2", "2")]
            )
            .await
            .unwrap()
            .succeeded
    );

    // Watch from a revision: history first, then live changes, only under the prefix.
    let start = store.list("/w/").await.unwrap().revision + 1;
    store.put("/w/1", b"a".to_vec()).await.unwrap();
    let mut events = store.watch("/w/".into(), start).await.unwrap();
    assert!(
        matches!(next_event(&mut events).await, WatchEvent::Put { kv } if kv.key == "/w/1" && kv.value == b"a")
    );
    store.put("/other", b"x".to_vec()).await.unwrap();
    assert!(store.delete("/w/1").await.unwrap());
    assert!(!store.delete("/w/1").await.unwrap());
    assert!(
        matches!(next_event(&mut events).await, WatchEvent::Delete { key, .. } if key == "/w/1")
    );

    // Leases: keys go with the lease; a revoked lease cannot be kept alive.
    let lease = store.grant_lease(5).await.unwrap();
    let with_lease = Op::Put {
        key: "/l/k".into(),
        value: b"v".to_vec(),
        lease: Some(lease),
    };
    assert!(store.txn(vec![], vec![with_lease]).await.unwrap().succeeded);
    store.keep_alive(lease).await.unwrap();
    store.revoke_lease(lease).await.unwrap();
    assert!(store.get("/l/k").await.unwrap().is_none());
    assert!(matches!(
        store.keep_alive(lease).await,
        Err(StoreError::LeaseNotFound(_))
    ));
}

#[tokio::test]
async fn memory_store_meets_the_contract() {
    contract(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn etcd_store_meets_the_contract() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    contract(Arc::new(
        EtcdStore::connect(&[etcd.client_url()]).await.unwrap(),
    ))
    .await;
}

#[tokio::test]
async fn leases_expire_without_keep_alive() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();
    let lease = store.grant_lease(2).await.unwrap();
    store
        .txn(
            vec![],
            vec![Op::Put {
                key: "/l/x".into(),
                value: b"v".to_vec(),
                lease: Some(lease),
            }],
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(store.get("/l/x").await.unwrap().is_none());
    assert!(matches!(
        store.keep_alive(lease).await,
        Err(StoreError::LeaseNotFound(_))
    ));
    // An unreachable etcd is `Unavailable` (what the REST layer turns into 503).
    drop(etcd);
    assert!(matches!(
        store.get("/l/x").await,
        Err(StoreError::Unavailable(_))
    ));
}

#[tokio::test]
async fn watch_outlives_the_request_timeout() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();
    let from = store.list("/idle/").await.unwrap().revision + 1;
    let mut events = store.watch("/idle/".into(), from).await.unwrap();
    // Longer than the per-request deadline: a watch is a stream, not a request.
    tokio::time::sleep(Duration::from_secs(7)).await;
    store.put("/idle/k", b"v".to_vec()).await.unwrap();
    assert!(matches!(next_event(&mut events).await, WatchEvent::Put { kv } if kv.key == "/idle/k"));
}

#[tokio::test]
async fn follow_resumes_after_etcd_restart() {
    use master::store::follow::{StateEvent, follow};
    testbed::require!(Etcd);
    let mut etcd = testbed::Etcd::start().unwrap();
    let store: Arc<dyn StateStore> =
        Arc::new(EtcdStore::connect(&[etcd.client_url()]).await.unwrap());
    store.put("/f/a", b"1".to_vec()).await.unwrap();
    let mut events = follow(store.clone(), "/f/".into());
    let first = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(first, StateEvent::Snapshot { ref entries, .. } if entries.len() == 1),
        "{first:?}"
    );
    etcd.stop();
    etcd.start_again().unwrap();
    // Written after the restart: the follower picks the watch up again from where it was.
    let mut wrote = false;
    for _ in 0..50 {
        if store.put("/f/b", b"2".to_vec()).await.is_ok() {
            wrote = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(wrote, "etcd back");
    let next = tokio::time::timeout(Duration::from_secs(15), events.next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(next, StateEvent::Put(ref kv) if kv.key == "/f/b"),
        "{next:?}"
    );
}
