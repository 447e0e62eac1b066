//! Running netlink requests inside another network namespace.
//!
//! A netlink socket belongs to the namespace of the thread that created it, and `setns(2)`
//! changes the namespace of the calling thread only. So a job for namespace X runs on a fresh
//! OS thread that enters X, opens its own rtnetlink connection on a current-thread tokio
//! runtime, runs the job and exits: the namespace switch dies with the thread, and no tokio
//! worker thread ever changes namespace. A thread per job costs tens of microseconds, small
//! next to the netlink round trips of plumbing a pod.

use std::fs::File;
use std::future::Future;
use std::path::Path;

use nix::sched::{CloneFlags, setns};
use tokio::sync::oneshot;

use super::error::NetlinkError;
use super::link::Netlink;

/// Run `job` with a [`Netlink`] connected inside the namespace at `netns` (a bind mount such as
/// `/var/run/netns/<name>` or a `/proc/<pid>/ns/net` path) and return its result.
pub async fn in_netns<T, F, Fut>(netns: &Path, job: F) -> Result<T, NetlinkError>
where
    F: FnOnce(Netlink) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, NetlinkError>>,
    T: Send + 'static,
{
    let path = netns.to_path_buf();
    let (tx, rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("netns-job".into())
        .spawn(move || {
            let _ = tx.send(run_in(&path, job));
        })
        .map_err(|e| NetlinkError::Worker(format!("cannot spawn: {e}")))?;
    rx.await
        .map_err(|_| NetlinkError::Worker("ended without a result (panicked?)".into()))?
}

/// Body of the worker thread.
fn run_in<T, F, Fut>(path: &Path, job: F) -> Result<T, NetlinkError>
where
    F: FnOnce(Netlink) -> Fut,
    Fut: Future<Output = Result<T, NetlinkError>>,
{
    enter(path)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| NetlinkError::Worker(format!("cannot build a runtime: {e}")))?;
    runtime.block_on(async {
        let netlink = Netlink::connect_labelled(path.display().to_string())?;
        job(netlink).await
    })
}

/// Move the calling thread into the namespace at `path`.
fn enter(path: &Path) -> Result<(), NetlinkError> {
    let file = open(path)?;
    setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| NetlinkError::Namespace {
        path: path.to_path_buf(),
        problem: format!("setns: {e}"),
    })
}

/// Open a namespace file (for `setns` or to move a link there by file descriptor).
pub(crate) fn open(path: &Path) -> Result<File, NetlinkError> {
    File::open(path).map_err(|e| NetlinkError::Namespace {
        path: path.to_path_buf(),
        problem: e.to_string(),
    })
}
