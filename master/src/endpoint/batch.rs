//! Group commit for `/plugin/createEndpoint` and `/plugin/deleteEndpoint`.
//!
//! Requests queue to one batching thread. It takes whatever is waiting (up to [`MAX_BATCH`]), applies
//! the requests one after another inside a single optimistic transaction, and commits them with one
//! etcd round trip. Each request sees the ones before it (two creates of one container in a batch
//! return the same endpoint); a request that fails on its own merits (unknown network, address
//! exhausted) is rolled back to its savepoint and answered alone, while the rest still commit. A
//! store failure or a conflict re-runs or fails the whole batch, exactly as for a single request.
//!
//! Why a thread: the model transactions are not `Send`, and the HTTP workers are separate threads.

use tokio::sync::{mpsc, oneshot};

use super::{
    CreateEndpointRequest, DeleteEndpointRequest, NewEndpoint, create_endpoint_in,
    delete_endpoint_in, endpoint_id_of,
};
use crate::error::{Error, Result};
use crate::state::CfgEndpointState;
use crate::store::txn::Db;

/// Most requests per transaction: each touches about two keys, and etcd takes at most 128 compares
/// and 128 writes per transaction.
pub const MAX_BATCH: usize = 32;

enum Op {
    Create(NewEndpoint),
    Delete(String),
}

struct Job {
    op: Op,
    reply: oneshot::Sender<Result<CfgEndpointState>>,
}

/// Handle to the batching thread. Cloning shares the queue; the thread ends when every handle is gone.
#[derive(Clone)]
pub struct Batcher {
    jobs: mpsc::Sender<Job>,
}

impl Batcher {
    /// Start the batching thread on `db`.
    pub fn spawn(db: Db) -> std::io::Result<Batcher> {
        let (jobs, rx) = mpsc::channel(4096);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("endpoint-batch".into())
            .spawn(move || runtime.block_on(serve(db, rx)))?;
        Ok(Batcher { jobs })
    }

    async fn submit(&self, op: Op) -> Result<CfgEndpointState> {
        let (reply, answer) = oneshot::channel();
        let stopped = || Error::NoLeader("endpoint batcher stopped".into());
        self.jobs
            .send(Job { op, reply })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Create an endpoint (idempotent), committed with whatever else is queued.
    pub async fn create(&self, req: &CreateEndpointRequest) -> Result<CfgEndpointState> {
        self.submit(Op::Create(NewEndpoint::parse(req)?)).await
    }

    /// Delete an endpoint, committed with whatever else is queued.
    pub async fn delete(&self, req: &DeleteEndpointRequest) -> Result<CfgEndpointState> {
        self.submit(Op::Delete(endpoint_id_of(req))).await
    }
}

async fn serve(db: Db, mut rx: mpsc::Receiver<Job>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        match apply(&db, &jobs).await {
            Ok(results) => {
                for (job, result) in jobs.into_iter().zip(results) {
                    // The requester may have gone away (client disconnected); nothing to do then.
                    let _ = job.reply.send(result);
                }
            }
            Err(e) => {
                for job in jobs {
                    let _ = job.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// One transaction for the whole batch; per-request results inside.
async fn apply(db: &Db, jobs: &[Job]) -> Result<Vec<Result<CfgEndpointState>>> {
    db.write(async |tx| {
        let mut results = Vec::with_capacity(jobs.len());
        for job in jobs {
            let savepoint = tx.savepoint();
            let result = match &job.op {
                Op::Create(ne) => create_endpoint_in(tx, ne).await,
                Op::Delete(id) => delete_endpoint_in(tx, id).await,
            };
            match result {
                // The store itself failed: the batch as a whole is retried or fails.
                Err(e @ Error::Store(_)) => return Err(e),
                Err(e) => {
                    tx.rollback(savepoint);
                    results.push(Err(e));
                }
                Ok(ep) => results.push(Ok(ep)),
            }
        }
        Ok(results)
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::endpoint::ConfigEp;
    use crate::model::{Global, Network, Tenant, ops};
    use crate::store::{MemoryStore, StateStore};

    fn req(container: &str, network: &str) -> CreateEndpointRequest {
        CreateEndpointRequest {
            TenantName: "default".into(),
            NetworkName: network.into(),
            ConfigEP: ConfigEp {
                Container: container.into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn batched_requests_commit_together_and_fail_alone() {
        let store = Arc::new(MemoryStore::new());
        let db = Db::new(store.clone());
        ops::upsert(&db, "global", Global::defaults("bridge", "default"))
            .await
            .unwrap();
        ops::upsert(&db, "default", Tenant::named("default"))
            .await
            .unwrap();
        let net = Network {
            network_name: "n1".into(),
            tenant_name: "default".into(),
            encap: "vxlan".into(),
            subnet: "10.1.1.0/29".into(),
            ..Default::default()
        };
        ops::upsert(&db, "default:n1", net).await.unwrap();
        let batcher = Batcher::spawn(db.clone()).unwrap();
        // 6 usable addresses, 8 containers (one named twice), one unknown network.
        let mut reqs: Vec<CreateEndpointRequest> =
            (0..8).map(|i| req(&format!("c{i}"), "n1")).collect();
        reqs.push(req("c0", "n1"));
        reqs.push(req("x", "nope"));
        let results = futures::future::join_all(reqs.iter().map(|r| batcher.create(r))).await;
        let ok: Vec<&CfgEndpointState> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        let mut ips: Vec<&str> = ok.iter().map(|e| e.ip_address.as_str()).collect();
        ips.sort_unstable();
        ips.dedup();
        assert_eq!(ips.len(), 6, "six distinct addresses: {results:?}");
        assert_eq!(
            results
                .iter()
                .filter(|r| matches!(r, Err(e) if e.http_status() == 409))
                .count(),
            2
        );
        assert_eq!(
            results
                .iter()
                .filter(|r| matches!(r, Err(e) if e.http_status() == 404))
                .count(),
            1
        );
        assert_eq!(
            results[0].as_ref().unwrap(),
            results[8].as_ref().unwrap(),
            "same container, same endpoint"
        );
        let eps = store
            .list("/contiv.io/state/eps/")
            .await
            .unwrap()
            .entries
            .len();
        assert_eq!(eps, 6);
        let del = DeleteEndpointRequest {
            TenantName: "default".into(),
            NetworkName: "n1".into(),
            EndpointID: "c0".into(),
            ..Default::default()
        };
        let (a, b) = futures::future::join(batcher.delete(&del), batcher.delete(&del)).await;
        assert!(a.is_ok() != b.is_ok(), "exactly one delete succeeds");
    }
}
