//! A 3-member etcd cluster under faults (issue 21): one member killed, frozen (SIGSTOP) or two
//! members lost. netmaster and the store are given every member; requests, watches and the leader
//! lease must move to a live member within 2 s, and a lost quorum must answer 503 and recover
//! within 5 s of its return. Each test prints one JSON line with the stalls it measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use master::model::Tenant;
use master::store::follow::{StateEvent, follow};
use master::store::{EtcdConfig, EtcdStore, StateStore, keys};
use testbed::{Etcd, EtcdOptions};
use tokio::sync::Mutex;

use crate::common::*;

/// The longest a request may wait while one member is down (the bound).
const MAX_STALL: Duration = Duration::from_secs(2);
/// Outage length per fault: longer than the bound, so a request waiting for the member to return
/// would be caught.
const OUTAGE: Duration = Duration::from_secs(4);

fn cluster(tls: bool) -> Etcd {
    Etcd::start_cluster(EtcdOptions { members: 3, tls }).unwrap()
}

/// Writes done by the load: what was acknowledged, the longest wait, and failures.
#[derive(Default)]
struct Load {
    acked: Vec<String>,
    errors: Vec<String>,
    /// Longest request latency seen since the last `take_max`.
    max: Duration,
}

impl Load {
    fn take_max(&mut self) -> Duration {
        std::mem::take(&mut self.max)
    }
}

/// Four REST writers creating tenants until `stop` is set.
fn spawn_writers(
    url: &str,
    load: Arc<Mutex<Load>>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..4)
        .map(|w| {
            let client = master::client::Client::new(url).unwrap();
            let (load, stop) = (load.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let name = format!("w{w}-{n}");
                    n += 1;
                    let started = Instant::now();
                    let result = client.post(&Tenant::named(&name)).await;
                    let took = started.elapsed();
                    let mut l = load.lock().await;
                    l.max = l.max.max(took);
                    match result {
                        Ok(_) => l.acked.push(name),
                        Err(e) => l.errors.push(format!("{name} after {took:?}: {e}")),
                    }
                }
            })
        })
        .collect()
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn rest_writes_and_leadership_survive_each_member_killed_in_turn() {
    testbed::require!(Etcd);
    let mut etcd = cluster(false);
    let port = testbed::free_port().unwrap();
    let mut cfg = config(&etcd.client_url(), port, 6);
    cfg.etcd_endpoints = etcd.client_urls();
    let nm = InProcess::start_with(cfg).await;
    let observer = EtcdStore::connect(&etcd.client_urls()).await.unwrap();
    let lock_before = observer.get(keys::LEADER_LOCK).await.unwrap().unwrap();

    // Kill the raft leader first, then the others: member 0 (the one the clients start on) is
    // among them either way.
    let leader = blocking(|| etcd.leader()).expect("a raft leader");
    let order: Vec<usize> = std::iter::once(leader)
        .chain((0..3).filter(|&i| i != leader))
        .collect();

    let load = Arc::new(Mutex::new(Load::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers = spawn_writers(&nm.url, load.clone(), stop.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let steady = load.lock().await.take_max();

    let mut stalls = Vec::new();
    for &member in &order {
        // The raft leader now (after the first kill a new one was elected among the others).
        let leads = blocking(|| etcd.leader()) == Some(member);
        blocking(|| etcd.kill_member(member));
        tokio::time::sleep(OUTAGE).await;
        let during = load.lock().await.take_max();
        blocking(|| etcd.start_member(member)).unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = load.lock().await.take_max();
        stalls.push((member, leads, during, after));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }

    let load = load.lock().await;
    println!(
        "{}",
        serde_json::json!({
            "test": "member_killed_in_turn",
            "acked_writes": load.acked.len(),
            "steady_max_ms": steady.as_millis(),
            "faults": stalls.iter().map(|(m, l, d, a)| serde_json::json!({
                "member": m, "raft_leader": l,
                "max_stall_ms": d.as_millis(), "after_restart_max_ms": a.as_millis()})).collect::<Vec<_>>(),
        })
    );
    assert!(load.errors.is_empty(), "failed writes: {:?}", load.errors);
    assert!(
        load.acked.len() > 20,
        "too few writes: {}",
        load.acked.len()
    );
    for (member, _, during, after) in &stalls {
        assert!(
            *during <= MAX_STALL && *after <= MAX_STALL,
            "member {member}: a write waited {during:?} (outage) / {after:?} (restart)"
        );
    }
    // Nothing acknowledged is lost: every tenant is there.
    let stored: std::collections::HashSet<String> = observer
        .list(&keys::model_prefix("tenant"))
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| kv.key)
        .collect();
    let lost: Vec<&String> = load
        .acked
        .iter()
        .filter(|name| !stored.contains(&keys::model("tenant", name)))
        .collect();
    assert!(lost.is_empty(), "acknowledged tenants lost: {lost:?}");
    let client = nm.client();
    // Leadership held throughout: the lock key was never written again (no new election).
    let lock_after = observer.get(keys::LEADER_LOCK).await.unwrap().unwrap();
    assert_eq!(lock_after.value, lock_before.value);
    assert_eq!(
        lock_after.mod_revision, lock_before.mod_revision,
        "the leader lock was taken again"
    );
    assert_eq!(client.info().await.unwrap()["current-state"], "leader");
}

/// The raft leader dies while a second member is frozen: the one member left running has no leader
/// (it answers "no leader" at once) until the frozen one resumes and the two elect a leader. A write
/// sent in that moment must wait out the election within the failover budget, not answer
/// "unavailable" after one quick round (the defect a CI run showed: three REST writes failed after
/// 2.4 s while a leader was being elected).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_during_an_election_waits_for_the_new_leader() {
    testbed::require!(Etcd);
    let mut etcd = cluster(false);
    let store = EtcdStore::connect(&etcd.client_urls()).await.unwrap();
    store.put("/t/before", b"0".to_vec()).await.unwrap();
    let leader = blocking(|| etcd.leader()).expect("a raft leader");
    let frozen = (0..3).find(|&i| i != leader).unwrap();
    blocking(|| {
        etcd.pause_member(frozen);
        etcd.kill_member(leader);
    });
    let started = Instant::now();
    let write = tokio::spawn(async move {
        let result = store.put("/t/during", b"1".to_vec()).await;
        (result, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    blocking(|| etcd.resume_member(frozen));
    let (result, took) = write.await.unwrap();
    println!(
        "{}",
        serde_json::json!({"test": "write_during_election", "ok": result.is_ok(), "took_ms": took.as_millis()})
    );
    result.unwrap_or_else(|e| panic!("the write failed after {took:?}: {e}"));
    assert!(
        took <= master::store::members::FAILOVER_BUDGET,
        "the write took {took:?}"
    );
    blocking(|| etcd.start_member(leader)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_member_in_use_fails_over_for_requests_and_watches() {
    testbed::require!(Etcd);
    let mut etcd = cluster(false);
    let store: Arc<dyn StateStore> =
        Arc::new(EtcdStore::connect(&etcd.client_urls()).await.unwrap());
    let direct = EtcdStore::connect(&etcd.client_urls()).await.unwrap();
    assert_eq!(
        direct.current_endpoint(),
        Some(etcd.client_urls()[0].clone())
    );
    store.put("/t/before", b"0".to_vec()).await.unwrap();
    let mut events = follow(store.clone(), "/t/".into());
    assert!(matches!(
        events.next().await,
        Some(StateEvent::Snapshot { .. })
    ));

    // Freeze the member every client starts on: it keeps its sockets, nothing answers.
    blocking(|| etcd.pause_member(0));
    let started = Instant::now();
    let mut max = Duration::ZERO;
    let mut written = Vec::new();
    while started.elapsed() < OUTAGE {
        let key = format!("/t/k{}", written.len());
        let t = Instant::now();
        store.put(&key, b"1".to_vec()).await.unwrap();
        max = max.max(t.elapsed());
        written.push(key);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The watch resumed on another member: every key in order, no revision twice. A write whose
    // attempt timed out on a slow member after it was applied may be applied again by the retry:
    // that is a second write (a new revision), not a watch repeating an event.
    let mut seen: Vec<String> = Vec::new();
    let mut last_revision = 0;
    let watch_started = Instant::now();
    while seen.len() < written.len() {
        match tokio::time::timeout(Duration::from_secs(5), events.next()).await {
            Ok(Some(StateEvent::Put(kv))) => {
                assert!(
                    kv.mod_revision > last_revision,
                    "revision {} of {} delivered after {last_revision}: a watch repeated an event",
                    kv.mod_revision,
                    kv.key
                );
                last_revision = kv.mod_revision;
                if seen.last() != Some(&kv.key) {
                    seen.push(kv.key);
                }
            }
            Ok(other) => panic!("unexpected {other:?}"),
            Err(_) => panic!(
                "watch stalled after {:?}; saw {seen:?}",
                watch_started.elapsed()
            ),
        }
    }
    blocking(|| etcd.resume_member(0));
    println!(
        "{}",
        serde_json::json!({"test": "sigstop_member_in_use", "writes": written.len(), "max_stall_ms": max.as_millis()})
    );
    assert_eq!(seen, written, "watch lost or reordered events");
    assert!(
        max <= MAX_STALL,
        "a write waited {max:?} on the frozen member"
    );
    // Nothing more may come but a written key again at a newer revision: a retried write of the
    // last key, or a put the frozen member still held in its socket buffer and forwarded to the
    // raft leader once it was resumed (the client had given up on it and gone elsewhere; etcd
    // applies it late, as a new revision with the same value).
    while let Ok(next) = tokio::time::timeout(Duration::from_millis(300), events.next()).await {
        match next {
            Some(StateEvent::Put(kv)) if written.contains(&kv.key) => assert!(
                kv.mod_revision > last_revision,
                "an event was delivered twice (revision {})",
                kv.mod_revision
            ),
            other => panic!("unexpected event after the last write: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_loss_answers_503_and_recovers_within_5s() {
    testbed::require!(Etcd);
    let mut etcd = cluster(false);
    let port = testbed::free_port().unwrap();
    let mut cfg = config(&etcd.client_url(), port, 30);
    cfg.etcd_endpoints = etcd.client_urls();
    let nm = InProcess::start_with(cfg).await;
    let c = nm.client();
    c.post(&network("default", "n1", "10.9.1.0/24"))
        .await
        .unwrap();

    blocking(|| {
        etcd.kill_member(1);
        etcd.kill_member(2);
    });
    let started = Instant::now();
    let err = c.post(&Tenant::named("during")).await.unwrap_err();
    let answered = started.elapsed();
    assert_eq!(err.status(), Some(503), "{err}");
    assert!(answered < Duration::from_secs(6), "503 took {answered:?}");

    blocking(|| etcd.start_member(1)).unwrap();
    let back = Instant::now();
    eventually(
        "writes accepted after quorum returned",
        Duration::from_secs(30),
        || async { c.post(&Tenant::named("after")).await.ok() },
    )
    .await;
    let recovered = back.elapsed();
    println!(
        "{}",
        serde_json::json!({"test": "quorum_loss", "first_503_ms": answered.as_millis(), "recovered_ms": recovered.as_millis()})
    );
    assert!(
        recovered <= Duration::from_secs(5),
        "recovery took {recovered:?}"
    );
    assert_eq!(
        c.get::<master::model::Network>("default:n1")
            .await
            .unwrap()
            .subnet,
        "10.9.1.0/24"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netmaster_works_against_a_tls_only_cluster_with_client_certs() {
    testbed::require!(Etcd);
    let etcd = Etcd::start_cluster(EtcdOptions {
        members: 1,
        tls: true,
    })
    .unwrap();
    let tls = etcd.tls().unwrap().clone();
    let port = testbed::free_port().unwrap();
    let mut cfg = config(&etcd.client_url(), port, 30);
    cfg.etcd_ca = Some(tls.ca.clone());
    cfg.etcd_cert = Some(tls.cert.clone());
    cfg.etcd_key = Some(tls.key.clone());
    let nm = InProcess::start_with(cfg).await;
    let c = nm.client();
    c.post(&network("default", "tls-net", "10.9.2.0/24"))
        .await
        .unwrap();
    let store = EtcdStore::connect_with(&EtcdConfig {
        endpoints: etcd.client_urls(),
        ca: Some(tls.ca),
        cert: Some(tls.cert),
        key: Some(tls.key),
    })
    .await
    .unwrap();
    let nets = store.list("/contiv.io/state/nets/").await.unwrap();
    assert!(
        nets.entries.iter().any(|kv| kv.key.contains("tls-net")),
        "{:?}",
        nets.entries.iter().map(|kv| &kv.key).collect::<Vec<_>>()
    );
}

/// netmaster (the binary) with TLS files that cannot work: it exits at start with code 22 and a
/// message naming the file and the reason.
fn netmaster_start_error(etcd: &Etcd, args: &[&str]) -> (i32, String) {
    let port = testbed::free_port().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_netmaster"))
        .args(["--mode", "test", "--netmode", "vlan", "--fwdmode", "bridge"])
        .args([
            "--etcd",
            &etcd.client_url(),
            "--listen-url",
            &format!("127.0.0.1:{port}"),
        ])
        .args(args)
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A start-up error comes within seconds; a netmaster still running is a failure, not a hang.
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("netmaster {args:?} still running after 20 s instead of refusing to start");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    (status.code().unwrap_or(-1), stderr)
}

#[test]
fn wrong_ca_or_missing_client_cert_is_refused_at_start() {
    testbed::require!(Etcd);
    let etcd = Etcd::start_cluster(EtcdOptions {
        members: 1,
        tls: true,
    })
    .unwrap();
    let tls = etcd.tls().unwrap();
    let (ca, wrong_ca) = (tls.ca.to_string_lossy(), tls.wrong_ca.to_string_lossy());
    let (cert, key) = (tls.cert.to_string_lossy(), tls.key.to_string_lossy());

    let (code, err) = netmaster_start_error(
        &etcd,
        &[
            "--etcd-cacert",
            &wrong_ca,
            "--etcd-cert",
            &cert,
            "--etcd-key",
            &key,
        ],
    );
    assert_eq!(code, 22, "{err}");
    assert!(
        err.contains(wrong_ca.as_ref()) && err.contains("not signed by the CA"),
        "{err}"
    );

    let (code, err) = netmaster_start_error(&etcd, &["--etcd-cacert", &ca]);
    assert_eq!(code, 22, "{err}");
    assert!(err.contains("client certificate"), "{err}");

    let (wrong_cert, wrong_key) = (
        tls.wrong_cert.to_string_lossy(),
        tls.wrong_key.to_string_lossy(),
    );
    let (code, err) = netmaster_start_error(
        &etcd,
        &[
            "--etcd-cacert",
            &ca,
            "--etcd-cert",
            &wrong_cert,
            "--etcd-key",
            &wrong_key,
        ],
    );
    assert_eq!(code, 22, "{err}");
    assert!(err.contains(wrong_cert.as_ref()), "{err}");

    let (code, err) = netmaster_start_error(&etcd, &["--etcd-cacert", "/nonexistent/ca.pem"]);
    assert_eq!(code, 22, "{err}");
    assert!(
        err.contains("/nonexistent/ca.pem") && err.contains("--etcd-cacert"),
        "{err}"
    );
}

/// Given only member 0, the store learns the others from `MemberList` and fails over to them when
/// member 0 dies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_discovered_from_the_cluster() {
    testbed::require!(Etcd);
    let mut etcd = cluster(false);
    let urls = etcd.client_urls();
    let store = EtcdStore::connect(&urls[..1]).await.unwrap();
    store.put("/d/a", b"1".to_vec()).await.unwrap();
    let deadline = Instant::now() + master::store::members::REFRESH_EVERY * 3;
    loop {
        let known: Vec<String> = store
            .member_endpoints()
            .into_iter()
            .map(|(e, _)| e)
            .collect();
        if urls.iter().all(|u| known.contains(u)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "members not discovered: {known:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    blocking(|| etcd.kill_member(0));
    let t = Instant::now();
    store.put("/d/b", b"2".to_vec()).await.unwrap();
    assert!(t.elapsed() <= MAX_STALL, "write waited {:?}", t.elapsed());
    assert_ne!(store.current_endpoint(), Some(urls[0].clone()));
}

/// A store whose first watch breaks at once and whose second waits for `gate`: the window in
/// which the test compacts the revision the follower must resume from.
struct GatedWatch {
    inner: EtcdStore,
    calls: std::sync::atomic::AtomicUsize,
    gate: Arc<tokio::sync::Notify>,
}

impl StateStore for GatedWatch {
    fn get<'a>(
        &'a self,
        key: &'a str,
    ) -> futures::future::BoxFuture<'a, master::store::StoreResult<Option<master::store::KeyValue>>>
    {
        self.inner.get(key)
    }
    fn list<'a>(
        &'a self,
        prefix: &'a str,
    ) -> futures::future::BoxFuture<'a, master::store::StoreResult<master::store::Listing>> {
        self.inner.list(prefix)
    }
    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
    ) -> futures::future::BoxFuture<'a, master::store::StoreResult<i64>> {
        self.inner.put(key, value)
    }
    fn delete<'a>(
        &'a self,
        key: &'a str,
    ) -> futures::future::BoxFuture<'a, master::store::StoreResult<bool>> {
        self.inner.delete(key)
    }
    fn txn(
        &self,
        guards: Vec<master::store::Guard>,
        ops: Vec<master::store::Op>,
    ) -> futures::future::BoxFuture<'_, master::store::StoreResult<master::store::TxnOutcome>> {
        self.inner.txn(guards, ops)
    }
    fn watch(
        &self,
        prefix: String,
        from_revision: i64,
    ) -> futures::future::BoxFuture<
        '_,
        master::store::StoreResult<
            futures::stream::BoxStream<
                'static,
                master::store::StoreResult<master::store::WatchEvent>,
            >,
        >,
    > {
        Box::pin(async move {
            match self.calls.fetch_add(1, Ordering::SeqCst) {
                0 => Ok(
                    futures::stream::iter(vec![Err(master::store::StoreError::Unavailable(
                        "member went away".into(),
                    ))])
                    .boxed(),
                ),
                _ => {
                    self.gate.notified().await;
                    self.inner.watch(prefix, from_revision).await
                }
            }
        })
    }
    fn grant_lease(
        &self,
        ttl: i64,
    ) -> futures::future::BoxFuture<'_, master::store::StoreResult<master::store::LeaseId>> {
        self.inner.grant_lease(ttl)
    }
    fn keep_alive(
        &self,
        lease: master::store::LeaseId,
    ) -> futures::future::BoxFuture<'_, master::store::StoreResult<()>> {
        self.inner.keep_alive(lease)
    }
    fn revoke_lease(
        &self,
        lease: master::store::LeaseId,
    ) -> futures::future::BoxFuture<'_, master::store::StoreResult<()>> {
        self.inner.revoke_lease(lease)
    }
}

/// A watch resumed at a revision etcd has compacted away is answered by a fresh listing.
#[tokio::test]
async fn resume_after_compaction_relists() {
    testbed::require!(Etcd);
    let etcd = Etcd::start().unwrap();
    let inner = EtcdStore::connect(&etcd.client_urls()).await.unwrap();
    inner.put("/c/a", b"1".to_vec()).await.unwrap();
    let gate = Arc::new(tokio::sync::Notify::new());
    let store: Arc<dyn StateStore> = Arc::new(GatedWatch {
        inner: inner.clone(),
        calls: std::sync::atomic::AtomicUsize::new(0),
        gate: gate.clone(),
    });
    let mut events = follow(store, "/c/".into());
    let Some(StateEvent::Snapshot { revision, .. }) = events.next().await else {
        panic!("no snapshot");
    };
    // While the follower waits to resume at revision + 1, history moves on and is compacted.
    let next = tokio::spawn(async move { events.next().await });
    inner.put("/c/b", b"2".to_vec()).await.unwrap();
    inner.delete("/c/a").await.unwrap();
    let last = inner.put("/c/c", b"3".to_vec()).await.unwrap();
    assert!(last > revision + 1);
    let mut client = etcd_client::Client::connect([etcd.client_url()], None)
        .await
        .unwrap();
    client
        .compact(
            last,
            Some(etcd_client::CompactionOptions::new().with_physical()),
        )
        .await
        .unwrap();
    gate.notify_one();
    match tokio::time::timeout(Duration::from_secs(10), next).await {
        Ok(Ok(Some(StateEvent::Snapshot {
            entries,
            revision: at,
        }))) => {
            let keys: Vec<&str> = entries.iter().map(|kv| kv.key.as_str()).collect();
            assert_eq!(keys, ["/c/b", "/c/c"]);
            assert!(at >= last);
        }
        other => panic!("expected a fresh snapshot after compaction, got {other:?}"),
    }
}
