//! The host side of the kernel: the namespace where OVS's datapath sees interfaces (veth host
//! ends, uplinks, internal ports). By default netplugin's own; with `--host-netns` another one
//! (an emulated host whose OVS runs in a namespace while netplugin reaches etcd from outside).
//!
//! Contract: [`HostNet::run`] runs a netlink job in that namespace. Tokio threads never change
//! namespace: jobs for another namespace run on one long-lived worker thread that entered it
//! once (jobs there run concurrently on its own runtime); jobs for our own namespace share one
//! rtnetlink connection. Both save a thread and a socket per pod.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};

use crate::netlink::{Netlink, NetlinkError, in_netns};

/// A job for the worker: given the worker's connection, a future to run there.
type Job = Box<dyn FnOnce(Netlink) -> Pin<Box<dyn Future<Output = ()>>> + Send>;

#[derive(Clone, Default)]
pub struct HostNet {
    netns: Option<PathBuf>,
    worker: Option<mpsc::UnboundedSender<Job>>,
    own: Arc<Mutex<Option<Netlink>>>,
}

impl std::fmt::Debug for HostNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostNet")
            .field("netns", &self.netns)
            .finish()
    }
}

/// Body of the worker: run every job received, concurrently, until the sender is dropped.
async fn serve(nl: Netlink, mut jobs: mpsc::UnboundedReceiver<Job>) -> Result<(), NetlinkError> {
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            job = jobs.recv() => match job {
                Some(job) => running.push(job(nl.clone())),
                None => break,
            },
            Some(()) = running.next(), if !running.is_empty() => {}
        }
    }
    while running.next().await.is_some() {}
    Ok(())
}

impl HostNet {
    /// Must be called on a runtime (the worker's driver task is spawned on it).
    pub fn new(netns: Option<PathBuf>) -> HostNet {
        let worker = netns.clone().map(|path| {
            let (tx, rx) = mpsc::unbounded_channel::<Job>();
            tokio::spawn(async move {
                if let Err(e) = in_netns(&path, move |nl| serve(nl, rx)).await {
                    tracing::error!(netns = %path.display(), error = %e, "host namespace worker ended");
                }
            });
            tx
        });
        HostNet {
            netns,
            worker,
            own: Arc::default(),
        }
    }

    /// Run `job` with a netlink connection in the host namespace.
    pub async fn run<T, F, Fut>(&self, job: F) -> Result<T, NetlinkError>
    where
        F: FnOnce(Netlink) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, NetlinkError>> + 'static,
        T: Send + 'static,
    {
        match (&self.netns, &self.worker) {
            (Some(path), Some(worker)) => {
                let (tx, rx) = oneshot::channel();
                let boxed: Job = Box::new(move |nl| {
                    Box::pin(async move {
                        let _ = tx.send(job(nl).await);
                    })
                });
                if worker.send(boxed).is_err() {
                    return Err(NetlinkError::Worker(format!(
                        "the worker in {} is gone",
                        path.display()
                    )));
                }
                rx.await.map_err(|_| {
                    NetlinkError::Worker(format!(
                        "a job in {} ended without a result",
                        path.display()
                    ))
                })?
            }
            (Some(path), None) => in_netns(path, job).await,
            (None, _) => job(self.own_connection()?).await,
        }
    }

    fn own_connection(&self) -> Result<Netlink, NetlinkError> {
        let mut own = match self.own.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(nl) = own.as_ref() {
            return Ok(nl.clone());
        }
        let nl = Netlink::connect()?;
        *own = Some(nl.clone());
        Ok(nl)
    }
}
