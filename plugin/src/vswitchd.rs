//! ovs-vswitchd's control socket, and the one thing netplugin asks of it: dropping the
//! userspace datapath's cached flows after a flow-table change, on the Open vSwitch releases
//! that can leave one of them stale.
//!
//! **Why.** The userspace datapath (`datapath_type=netdev`) of Open vSwitch 2.8 up to 2.17.7,
//! 3.0.0–3.0.4 and 3.1.0–3.1.2 (Debian 12 ships 3.1.0) has a bug in revalidation (fixed
//! upstream by "dpif-netdev: Fix dpif_netdev_flow_put", in 2.17.8, 3.0.5, 3.1.3 and 3.2.0):
//! when the revalidator changes the actions of a cached megaflow after an OpenFlow change, it
//! finds the megaflow to change by its packet key, not by its id. When two cached megaflows
//! overlap (one kept from before a change with its old, narrower mask, one added after it)
//! the new actions land on the wrong one, and the other keeps the actions of the old flow
//! table for as long as packets keep hitting it: the revalidator believes it updated it. For
//! a policy that means a connection allowed by the new rules can stay blocked, or one the new
//! rules forbid can stay open, although `ovs-ofctl dump-flows` shows exactly the right flows.
//! `revalidator/purge` drops every cached megaflow, so the next packet of each flow is
//! translated against the current tables.
//!
//! **What it costs.** One purge per confirmed flow transaction, at most one per
//! [`MIN_INTERVAL`] (changes arriving meanwhile share the next one); each cached flow is
//! rebuilt by the next packet that needs it (one upcall). Kernel datapaths and fixed releases
//! never purge (`--datapath-flush auto`, the default).
//!
//! The control socket speaks JSON-RPC 1.0 like OVSDB (`ovs-appctl` is its command-line
//! client): a request `{"method": "revalidator/purge", "params": [], "id": 0}` gets
//! `{"result": "...", "error": null, "id": 0}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::Notify;

use crate::ovsdb::OvsdbClient;
use crate::ovsdb::framing::MessageBuffer;

/// The least time between two purges.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// How long one control-socket request may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Talking to ovs-vswitchd's control socket failed.
#[derive(Debug, thiserror::Error)]
pub enum UnixctlError {
    #[error(
        "no ovs-vswitchd control socket in {dir}: neither ovs-vswitchd.ctl nor a pid in \
         ovs-vswitchd.pid (is ovs-vswitchd running? set --ovs-vswitchd-ctl)"
    )]
    NotFound { dir: PathBuf },
    #[error("ovs-vswitchd control socket {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("ovs-vswitchd control socket {path}: no answer to {method} within {after:?}")]
    Timeout {
        path: PathBuf,
        method: String,
        after: Duration,
    },
    #[error("ovs-vswitchd control socket {path}: {problem}")]
    Decode { path: PathBuf, problem: String },
    #[error("ovs-vswitchd refused {method}: {error}")]
    Refused { method: String, error: String },
}

/// Where ovs-vswitchd's control socket is: `explicit` when given, else next to ovsdb-server's
/// socket (the shared run directory): `ovs-vswitchd.ctl` when it was started with
/// `--unixctl` there, else `ovs-vswitchd.<pid>.ctl` with the pid from `ovs-vswitchd.pid`.
/// Resolved at each call, so a restarted ovs-vswitchd (a new pid) is found.
pub fn control_socket(
    explicit: Option<&Path>,
    ovsdb_socket: &Path,
) -> Result<PathBuf, UnixctlError> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    let dir = ovsdb_socket.parent().unwrap_or(Path::new("/"));
    let fixed = dir.join("ovs-vswitchd.ctl");
    if fixed.exists() {
        return Ok(fixed);
    }
    let pid = std::fs::read_to_string(dir.join("ovs-vswitchd.pid"))
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
        .ok_or_else(|| UnixctlError::NotFound {
            dir: dir.to_path_buf(),
        })?;
    Ok(dir.join(format!("ovs-vswitchd.{pid}.ctl")))
}

/// Run one control-socket command (what `ovs-appctl -t <path> <method> <args...>` does) and
/// return its text reply.
pub async fn call(path: &Path, method: &str, args: &[&str]) -> Result<String, UnixctlError> {
    tokio::time::timeout(CALL_TIMEOUT, call_now(path, method, args))
        .await
        .map_err(|_| UnixctlError::Timeout {
            path: path.to_path_buf(),
            method: method.to_string(),
            after: CALL_TIMEOUT,
        })?
}

async fn call_now(path: &Path, method: &str, args: &[&str]) -> Result<String, UnixctlError> {
    let io = |source| UnixctlError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut stream = UnixStream::connect(path).await.map_err(io)?;
    let request = json!({"method": method, "params": args, "id": 0});
    stream
        .write_all(request.to_string().as_bytes())
        .await
        .map_err(io)?;
    let mut buffer = MessageBuffer::default();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut chunk).await.map_err(io)?;
        if n == 0 {
            return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        buffer.extend(&chunk[..n]);
        let messages = buffer
            .drain_messages()
            .map_err(|problem| UnixctlError::Decode {
                path: path.to_path_buf(),
                problem,
            })?;
        if let Some(reply) = messages
            .into_iter()
            .find(|m| m.get("id") == Some(&json!(0)))
        {
            return match reply.get("error").filter(|e| !e.is_null()) {
                Some(error) => Err(UnixctlError::Refused {
                    method: method.to_string(),
                    error: error
                        .as_str()
                        .map_or_else(|| error.to_string(), str::to_string),
                }),
                None => Ok(reply
                    .get("result")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()),
            };
        }
    }
}

/// When netplugin drops the datapath's cached flows after a change (`--datapath-flush`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPolicy {
    /// When the bridges use the userspace datapath and ovs-vswitchd reports a release with
    /// the stale-megaflow bug (or none yet).
    Auto,
    Always,
    Never,
}

impl FlushPolicy {
    pub fn parse(text: &str) -> Option<FlushPolicy> {
        match text {
            "auto" => Some(FlushPolicy::Auto),
            "always" => Some(FlushPolicy::Always),
            "never" => Some(FlushPolicy::Never),
            _ => None,
        }
    }
}

/// Whether an Open vSwitch release (`ovs_version` of the `Open_vSwitch` table, e.g. "3.1.0")
/// has the userspace datapath's stale-megaflow bug (see the module documentation). A version
/// that cannot be read counts as affected: a purge too many costs an upcall per flow, one too
/// few a wrong verdict.
pub fn has_stale_megaflow_bug(version: &str) -> bool {
    let mut parts = version
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    let (Some(Some(major)), Some(Some(minor)), patch) = (parts.next(), parts.next(), parts.next())
    else {
        return true;
    };
    let patch = patch.flatten().unwrap_or(0);
    match (major, minor) {
        (0..=1, _) => false,
        (2, 0..=7) => false,
        (2, 8..=16) => true,
        (2, 17) => patch < 8,
        (3, 0) => patch < 5,
        (3, 1) => patch < 3,
        _ => false,
    }
}

/// Asks for a purge; cheap and non-blocking (a bridge actor calls it after each
/// transaction). Requests made while a purge is pending or running share the next one.
#[derive(Clone, Debug)]
pub struct FlushHandle {
    wanted: Arc<Notify>,
}

impl FlushHandle {
    pub fn request(&self) {
        self.wanted.notify_one();
    }
}

impl ofctrl::BridgeObserver for FlushHandle {
    fn applied(&self, _operations: usize, _elapsed: Duration, _reconcile: bool) {
        self.request();
    }

    /// A failed transaction changed nothing (bundles are all-or-nothing).
    fn failed(&self, _error: &ofctrl::TxError, _reconcile: bool) {}
}

/// What the flusher needs to decide and to reach ovs-vswitchd.
pub struct Flusher {
    pub policy: FlushPolicy,
    /// The bridges' datapath type (`--ovs-datapath`).
    pub datapath: String,
    pub ovsdb: OvsdbClient,
    /// `--ovs-vswitchd-ctl`, if given.
    pub control: Option<PathBuf>,
    /// Counts purges done (`netplugin_datapath_flushes_total`).
    pub done: prometheus_client::metrics::counter::Counter,
}

impl Flusher {
    /// Start the flusher's task (on the current tokio runtime); `None` when the policy says
    /// never.
    pub fn start(self) -> Option<FlushHandle> {
        let kernel = self.datapath == "system";
        if self.policy == FlushPolicy::Never || (self.policy == FlushPolicy::Auto && kernel) {
            return None;
        }
        let wanted = Arc::new(Notify::new());
        let handle = FlushHandle {
            wanted: wanted.clone(),
        };
        tokio::spawn(async move {
            let mut warned = false;
            let mut version = None;
            loop {
                wanted.notified().await;
                if self.needed(&mut version).await {
                    let started = Instant::now();
                    match self.purge().await {
                        Ok(()) => {
                            self.done.inc();
                            tracing::debug!(took = ?started.elapsed(), "purged the datapath's cached flows after a flow change");
                        }
                        Err(e) if !warned => {
                            warned = true;
                            tracing::warn!(
                                "cannot purge the datapath's cached flows after a flow change (a stale megaflow of this Open vSwitch release may keep an old verdict): {e}"
                            );
                        }
                        Err(e) => tracing::debug!("datapath purge: {e}"),
                    }
                }
                tokio::time::sleep(MIN_INTERVAL).await;
            }
        });
        Some(handle)
    }

    /// Whether to purge, by the policy and (auto) the release; `version` remembers the
    /// release once known.
    async fn needed(&self, version: &mut Option<String>) -> bool {
        match self.policy {
            FlushPolicy::Never => false,
            FlushPolicy::Always => true,
            FlushPolicy::Auto => {
                if version.is_none() {
                    *version = self.release().await;
                    if let Some(v) = version.as_deref() {
                        tracing::info!(
                            "Open vSwitch {v}: {} the datapath's cached flows after flow changes",
                            if has_stale_megaflow_bug(v) {
                                "purging"
                            } else {
                                "not purging"
                            }
                        );
                    }
                }
                version.as_deref().is_none_or(has_stale_megaflow_bug)
            }
        }
    }

    /// The running release: `ovs_version` in OVSDB (written by the start scripts), else what
    /// ovs-vswitchd answers to `version` ("ovs-vswitchd (Open vSwitch) 3.1.0").
    async fn release(&self) -> Option<String> {
        let recorded = self
            .ovsdb
            .read(|c| c.root().map(|r| r.ovs_version))
            .filter(|v| !v.is_empty());
        if recorded.is_some() {
            return recorded;
        }
        let path = control_socket(self.control.as_deref(), self.ovsdb.socket_path()).ok()?;
        let answer = call(&path, "version", &[]).await.ok()?;
        answer
            .lines()
            .next()?
            .split_whitespace()
            .last()
            .map(str::to_string)
    }

    async fn purge(&self) -> Result<(), UnixctlError> {
        let path = control_socket(self.control.as_deref(), self.ovsdb.socket_path())?;
        call(&path, "revalidator/purge", &[]).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_with_the_stale_megaflow_bug() {
        for v in [
            "3.1.0", "3.1.2", "3.0.4", "2.17.7", "2.8.0", "2.13.1", "", "garbage",
        ] {
            assert!(has_stale_megaflow_bug(v), "{v:?} has the bug");
        }
        for v in [
            "3.1.3", "3.2.0", "3.3.1", "3.0.5", "2.17.8", "2.7.2", "4.0.0", "3.5.0\n",
        ] {
            assert!(!has_stale_megaflow_bug(v), "{v:?} is fixed");
        }
    }

    #[test]
    fn the_control_socket_is_found_next_to_ovsdb() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db.sock");
        assert!(matches!(
            control_socket(None, &db),
            Err(UnixctlError::NotFound { .. })
        ));
        std::fs::write(dir.path().join("ovs-vswitchd.pid"), "4242\n").expect("pid");
        assert_eq!(
            control_socket(None, &db).expect("by pid"),
            dir.path().join("ovs-vswitchd.4242.ctl")
        );
        std::fs::write(dir.path().join("ovs-vswitchd.ctl"), "").expect("ctl");
        assert_eq!(
            control_socket(None, &db).expect("fixed"),
            dir.path().join("ovs-vswitchd.ctl")
        );
        let explicit = Path::new("/run/x.ctl");
        assert_eq!(
            control_socket(Some(explicit), &db).expect("explicit"),
            explicit
        );
    }

    #[test]
    fn flush_policy_words() {
        assert_eq!(FlushPolicy::parse("auto"), Some(FlushPolicy::Auto));
        assert_eq!(FlushPolicy::parse("always"), Some(FlushPolicy::Always));
        assert_eq!(FlushPolicy::parse("never"), Some(FlushPolicy::Never));
        assert_eq!(FlushPolicy::parse("yes"), None);
    }
}
