//! Group commit of REST writes: object creates, updates and deletes (`/api/v1/<objs>/...`) and
//! netplugin's `/plugin/createEndpoint` and `/plugin/deleteEndpoint`.
//!
//! Requests queue to one batching thread. It takes whatever is waiting (up to [`MAX_BATCH`]),
//! reads ahead what they will read (their keys and listings) in one concurrent round, applies them one after another inside a
//! single optimistic transaction ([`crate::store::txn`]) and commits them with one etcd round
//! trip. Each request sees the ones before it (two creates of one object in a batch: the second
//! finds the first). A request that fails on its own merits (a 4xx: invalid field, unknown
//! network, exhausted pool, object in use) is rolled back to its savepoint and answered alone
//! while the others still commit; it gets exactly the error it would get alone.
//!
//! A store failure ends the batch: an unreachable store (after the usual retries) answers every
//! request with it, as each would have been answered alone. Any other store error (a corrupt
//! record one request read, a transaction over etcd's limits) re-runs the batch's requests one by
//! one, so only the request that meets it gets it. A conflict with another process re-runs the
//! batch as a whole, like a single request. When the requests together would pass etcd's 128
//! compares or 128 writes per transaction, the request that crosses the line is undone and left
//! for the next batch (a request over the limits on its own is committed alone and gets the
//! error it always got).
//!
//! Derived records (compiled policy rules) of every request in a batch are split around the
//! guarded commit as for one request, so each request stays all-or-nothing whatever moment
//! netmaster is killed at: its ordinary records are in the one guarded transaction.
//!
//! Why a thread: the model transactions are not `Send`, and the HTTP workers are separate threads.

use std::collections::VecDeque;

use futures::future::LocalBoxFuture;
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::store::StoreError;
use crate::store::txn::{Db, ReadAhead, StoreFailure, Tx};

/// Most requests per transaction. Requests that together pass etcd's limits are split anyway.
pub const MAX_BATCH: usize = 64;

/// A write request that can share a transaction with others.
pub trait Request: Send + 'static {
    type Output: Send + 'static;
    /// Keys the request reads and prefixes it lists, read ahead with the other requests' (not
    /// guarded until the request reads them).
    fn prefetch(&self) -> ReadAhead;
    /// Apply the request inside the batch's transaction. Runs again on every attempt.
    fn apply<'a>(&'a self, tx: &'a mut Tx<'_>) -> LocalBoxFuture<'a, Result<Self::Output>>;
}

/// A queued request with its answer channel (type-erased for the queue).
trait Step: Send {
    fn prefetch(&self) -> ReadAhead;
    fn apply<'a>(&'a mut self, tx: &'a mut Tx<'_>) -> LocalBoxFuture<'a, Result<()>>;
    /// Answer with the kept output, or with `error`.
    fn answer(self: Box<Self>, error: Option<Error>);
}

struct Job<R: Request> {
    request: R,
    output: Option<R::Output>,
    reply: oneshot::Sender<Result<R::Output>>,
}

impl<R: Request> Step for Job<R> {
    fn prefetch(&self) -> ReadAhead {
        self.request.prefetch()
    }

    fn apply<'a>(&'a mut self, tx: &'a mut Tx<'_>) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.output = None;
            self.output = Some(self.request.apply(tx).await?);
            Ok(())
        })
    }

    fn answer(self: Box<Self>, error: Option<Error>) {
        let result = match (error, self.output) {
            (Some(e), _) => Err(e),
            (None, Some(out)) => Ok(out),
            (None, None) => Err(Error::NoLeader("the write was not applied".into())),
        };
        // The requester may have gone away (client disconnected); nothing to do then.
        let _ = self.reply.send(result);
    }
}

/// Handle to the batching thread. Cloning shares the queue; the thread ends when every handle is
/// gone.
#[derive(Clone)]
pub struct Writes {
    jobs: mpsc::Sender<Box<dyn Step>>,
}

impl Writes {
    /// Start the batching thread on `db`.
    pub fn spawn(db: Db) -> std::io::Result<Writes> {
        let (jobs, rx) = mpsc::channel(4096);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("write-batch".into())
            .spawn(move || runtime.block_on(serve(db, rx)))?;
        Ok(Writes { jobs })
    }

    /// Apply `request`, committed with whatever else is queued.
    pub async fn submit<R: Request>(&self, request: R) -> Result<R::Output> {
        let (reply, answer) = oneshot::channel();
        let stopped = || Error::NoLeader("write batcher stopped".into());
        let job: Box<dyn Step> = Box::new(Job {
            request,
            output: None,
            reply,
        });
        self.jobs.send(job).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn serve(db: Db, mut rx: mpsc::Receiver<Box<dyn Step>>) {
    let mut waiting: VecDeque<Box<dyn Step>> = VecDeque::new();
    loop {
        if waiting.is_empty() {
            match rx.recv().await {
                Some(job) => waiting.push_back(job),
                None => return,
            }
        }
        while waiting.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(_) => break,
            }
        }
        let n = waiting.len().min(MAX_BATCH);
        let jobs: Vec<Box<dyn Step>> = waiting.drain(..n).collect();
        let deferred = run_batch(&db, jobs).await;
        for job in deferred.into_iter().rev() {
            waiting.push_front(job);
        }
    }
}

/// Commit `jobs` together and answer them; returns the jobs left for the next batch.
async fn run_batch(db: &Db, mut jobs: Vec<Box<dyn Step>>) -> Vec<Box<dyn Step>> {
    // Per applied job, its own failure (rolled back); jobs past `outcomes.len()` were deferred.
    let mut outcomes: Vec<Option<Error>> = Vec::with_capacity(jobs.len());
    let result = db
        .write(async |tx| {
            outcomes.clear();
            let mut ahead = ReadAhead::default();
            for job in &jobs {
                ahead.extend(job.prefetch());
            }
            tx.prefetch(&ahead).await?;
            for (i, job) in jobs.iter_mut().enumerate() {
                let savepoint = tx.savepoint();
                match job.apply(tx).await {
                    // The store itself failed: the batch as a whole is retried or fails.
                    Err(e @ Error::Store(_)) => return Err(e),
                    Err(e) => {
                        tx.rollback(savepoint);
                        outcomes.push(Some(e));
                    }
                    Ok(()) if tx.over_limits() && i > 0 => {
                        // Too much for one transaction with the others: the next batch's.
                        tx.rollback_all(savepoint);
                        break;
                    }
                    Ok(()) => {
                        outcomes.push(None);
                        if tx.over_limits() {
                            // Over the limits alone: committed (and refused) alone.
                            break;
                        }
                    }
                }
            }
            Ok::<_, Error>(())
        })
        .await;
    let applied = outcomes.len();
    match result {
        Ok(()) => {
            let deferred = jobs.split_off(applied);
            for (job, outcome) in jobs.into_iter().zip(outcomes) {
                job.answer(outcome);
            }
            deferred
        }
        // Saved, but derived records are missing (the leader repairs them): every applied
        // request hears it, the failed ones their own error.
        Err(e) if e.is_derived_incomplete() => {
            let deferred = jobs.split_off(applied);
            for (job, outcome) in jobs.into_iter().zip(outcomes) {
                job.answer(Some(outcome.unwrap_or_else(|| e.clone())));
            }
            deferred
        }
        Err(e) if jobs.len() > 1 && !e.is_unavailable() && !is_contention(&e) => {
            // One request's store error (a corrupt record, a transaction over etcd's limits):
            // each alone, so only that request gets it.
            tracing::debug!(error = %e, requests = jobs.len(), "batch failed; applying its requests one by one");
            let mut left = Vec::new();
            for job in jobs {
                left.extend(Box::pin(run_batch(db, vec![job])).await);
            }
            left
        }
        Err(e) => {
            for job in jobs {
                job.answer(Some(e.clone()));
            }
            Vec::new()
        }
    }
}

fn is_contention(e: &Error) -> bool {
    matches!(e, Error::Store(StoreError::Contention { .. }))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::model::{EndpointGroup, Global, Network, Policy, Rule, Tenant, ops};
    use crate::store::{MemoryStore, StateStore, keys};

    /// Holds the batch thread until released, so the requests submitted meanwhile queue up and
    /// make one batch.
    struct Hold {
        started: Mutex<Option<oneshot::Sender<()>>>,
        release: Mutex<Option<oneshot::Receiver<()>>>,
    }

    impl Request for Hold {
        type Output = ();
        fn prefetch(&self) -> ReadAhead {
            ReadAhead::default()
        }
        fn apply<'a>(&'a self, _: &'a mut Tx<'_>) -> LocalBoxFuture<'a, Result<()>> {
            Box::pin(async move {
                if let Some(started) = self.started.lock().ok().and_then(|mut s| s.take()) {
                    let _ = started.send(());
                }
                let release = self.release.lock().ok().and_then(|mut r| r.take());
                if let Some(release) = release {
                    let _ = release.await;
                }
                Ok(())
            })
        }
    }

    /// Run `submit` (which queues requests) while the batch thread is held, then release it:
    /// everything `submit` queued in its first 100 ms goes as one queue.
    pub(crate) async fn while_held<F: std::future::Future>(
        writes: &Writes,
        submit: F,
    ) -> F::Output {
        let (started, is_held) = oneshot::channel();
        let (release, hold) = oneshot::channel();
        let held = writes.submit(Hold {
            started: Mutex::new(Some(started)),
            release: Mutex::new(Some(hold)),
        });
        let (was_held, other) = oneshot::channel::<()>();
        let work = async move {
            let _ = is_held.await;
            let _ = was_held.send(());
            submit.await
        };
        let release = async move {
            let _ = other.await;
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let _ = release.send(());
        };
        let (held, out, ()) = futures::future::join3(held, work, release).await;
        held.unwrap();
        out
    }

    /// Submit `requests` while the batch thread is held, then release it: they go as one
    /// queue. Returns the answers in order.
    async fn queued<T: crate::model::Object>(
        writes: &Writes,
        db: &Db,
        requests: Vec<(String, T)>,
    ) -> Vec<Result<T>> {
        let answers = futures::future::join_all(
            requests
                .into_iter()
                .map(|(key, obj)| async move { ops::upsert_batched(writes, db, &key, obj).await }),
        );
        while_held(writes, answers).await
    }

    async fn revision(store: &MemoryStore) -> i64 {
        store.list("/").await.unwrap().revision
    }

    async fn count(store: &MemoryStore, prefix: &str) -> usize {
        store.list(prefix).await.unwrap().entries.len()
    }

    fn rule(id: &str, policy: &str) -> (String, Rule) {
        (
            format!("default:{policy}:{id}"),
            Rule {
                rule_id: id.into(),
                tenant_name: "default".into(),
                policy_name: policy.into(),
                direction: "in".into(),
                protocol: "tcp".into(),
                port: 1000 + id.parse::<i64>().unwrap_or(0),
                action: "allow".into(),
                ..Default::default()
            },
        )
    }

    async fn setup() -> (Arc<MemoryStore>, Db, Writes) {
        let store = Arc::new(MemoryStore::new());
        let db = Db::new(store.clone());
        ops::upsert(&db, "global", Global::defaults("routing", "default"))
            .await
            .unwrap();
        ops::upsert(&db, "default", Tenant::named("default"))
            .await
            .unwrap();
        let net = crate::scenarios::net("default", "n1", "vxlan", "10.1.0.0/16", 0);
        ops::upsert(&db, "default:n1", net).await.unwrap();
        let policy = Policy {
            policy_name: "pol".into(),
            tenant_name: "default".into(),
            ..Default::default()
        };
        ops::upsert(&db, "default:pol", policy).await.unwrap();
        let group = EndpointGroup {
            group_name: "g1".into(),
            tenant_name: "default".into(),
            network_name: "n1".into(),
            policies: vec!["pol".into()],
            ..Default::default()
        };
        ops::upsert(&db, "default:g1", group).await.unwrap();
        let writes = Writes::spawn(db.clone()).unwrap();
        (store, db, writes)
    }

    /// A batch reads ahead what its requests will read, together: 16 network creates (each
    /// reading its name as a group, its subnet's index keys, the tenant's prefix lengths, the
    /// tag pool...) and then 16 group creates cost two sequential store round trips per batch
    /// (the read-ahead and the commit), not a few per request one after another.
    #[tokio::test]
    async fn a_batch_reads_ahead_for_all_its_requests_in_one_round() {
        use crate::store::round_trips::RoundTrips;
        let store = RoundTrips::default();
        let db = Db::new(Arc::new(store.clone()));
        crate::scenarios::setup(&db).await;
        // The tenant's first network writes its prefix-lengths record.
        let net = |i: usize| {
            crate::scenarios::net(
                "default",
                &format!("n{i}"),
                "vxlan",
                &format!("10.1.{i}.0/24"),
                0,
            )
        };
        ops::upsert(&db, "default:n99", net(99)).await.unwrap();
        let writes = Writes::spawn(db.clone()).unwrap();

        let before = store.rounds();
        let nets = (0..16).map(|i| (format!("default:n{i}"), net(i))).collect();
        for answer in queued(&writes, &db, nets).await {
            answer.unwrap();
        }
        let network_rounds = store.rounds() - before;

        let before = store.rounds();
        let groups = (0..16)
            .map(|i| {
                let g = EndpointGroup {
                    group_name: format!("g{i}"),
                    tenant_name: "default".into(),
                    network_name: format!("n{i}"),
                    ..Default::default()
                };
                (format!("default:g{i}"), g)
            })
            .collect();
        for answer in queued(&writes, &db, groups).await {
            answer.unwrap();
        }
        let group_rounds = store.rounds() - before;
        println!(
            "round trips: {network_rounds} for 16 network creates, {group_rounds} for 16 group creates"
        );
        // The read-ahead and the commit (a tenant with networks at several prefix lengths adds
        // one for the containing subnets). Reading ahead only each request's own record: 39 and
        // 53.
        assert!(
            network_rounds <= 3,
            "16 network creates took {network_rounds} sequential round trips"
        );
        assert!(
            group_rounds <= 3,
            "16 group creates took {group_rounds} sequential round trips"
        );
    }

    #[tokio::test]
    async fn one_bad_rule_in_a_batch_gets_its_error_and_the_others_commit_together() {
        let (store, db, writes) = setup().await;
        let mut requests: Vec<(String, Rule)> =
            (0..28).map(|i| rule(&i.to_string(), "pol")).collect();
        let mut bad = rule("28", "pol");
        bad.1.direction = "sideways".into();
        requests.insert(5, bad);
        requests.insert(17, rule("29", "nopolicy"));
        // The same rule twice: the second sees the first and is an identical re-POST.
        requests.push(rule("3", "pol"));
        let before = revision(&store).await;
        let answers = queued(&writes, &db, requests).await;
        let status: Vec<u16> = answers
            .iter()
            .map(|a| a.as_ref().map_or_else(Error::http_status, |_| 200))
            .collect();
        assert_eq!(
            status.iter().filter(|s| **s == 200).count(),
            29,
            "{status:?}"
        );
        assert_eq!(status[5], 400, "{:?}", answers[5]);
        assert_eq!(status[17], 404, "{:?}", answers[17]);
        assert!(
            answers[5]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("direction"),
            "{:?}",
            answers[5]
        );
        // 28 rules and their 56 compiled records in one store transaction.
        assert_eq!(revision(&store).await - before, 1);
        assert_eq!(count(&store, &keys::model_prefix("rule")).await, 28);
        assert_eq!(
            count(&store, &keys::state_prefix(keys::category::POLICY_RULE)).await,
            56
        );
    }

    #[tokio::test]
    async fn a_request_meeting_a_store_error_fails_alone() {
        let (store, db, writes) = setup().await;
        // A corrupt stored rule: reading it is a store error (500) for that request only.
        store
            .put(&keys::model("rule", "default:pol:7"), b"{not json".to_vec())
            .await
            .unwrap();
        let requests: Vec<(String, Rule)> = (0..10).map(|i| rule(&i.to_string(), "pol")).collect();
        let answers = queued(&writes, &db, requests).await;
        for (i, a) in answers.iter().enumerate() {
            match i {
                7 => assert_eq!(
                    a.as_ref().map(|_| 200).unwrap_or_else(Error::http_status),
                    500
                ),
                _ => assert!(a.is_ok(), "rule {i}: {a:?}"),
            }
        }
        assert_eq!(count(&store, &keys::model_prefix("rule")).await, 10);
        assert_eq!(
            count(&store, &keys::state_prefix(keys::category::POLICY_RULE)).await,
            18
        );
    }

    #[tokio::test]
    async fn requests_beyond_etcds_limits_go_in_the_next_batch() {
        let (store, db, writes) = setup().await;
        // 64 networks read ~10 keys each: more compares than one transaction takes.
        let requests: Vec<(String, Network)> = (0..64)
            .map(|i| {
                (
                    format!("default:m{i}"),
                    crate::scenarios::net(
                        "default",
                        &format!("m{i}"),
                        "vxlan",
                        &format!("10.{}.{}.0/24", 100 + i / 16, i % 16),
                        0,
                    ),
                )
            })
            .collect();
        let before = revision(&store).await;
        let answers = queued(&writes, &db, requests).await;
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        let commits = revision(&store).await - before;
        assert!((2..64).contains(&commits), "{commits} commits");
        let states = store
            .list(&keys::state_prefix(keys::category::NETS))
            .await
            .unwrap()
            .entries;
        let mut vnis: Vec<u32> = states
            .iter()
            .map(|kv| {
                serde_json::from_slice::<crate::state::CfgNetworkState>(&kv.value)
                    .unwrap()
                    .ext_pkt_tag
            })
            .collect();
        vnis.sort_unstable();
        vnis.dedup();
        assert_eq!(vnis.len(), 65, "distinct VNIs (n1 and the 64 new networks)");
    }
}
