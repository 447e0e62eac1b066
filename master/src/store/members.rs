//! The etcd member set: one client per member, a health check, the member in use, and failover.
//!
//! `etcd-client` balances requests over its endpoints but does not take a dead or hung member out of
//! rotation, so a request (or a watch, or a lease keep-alive) sent to it waits until the member comes
//! back. This module is the one place that handles it, for every etcd user in both daemons:
//!
//! * Every request goes to the member in use, with a short per-attempt deadline when there are
//!   other members; a transport error, "no leader" or a missed deadline marks that member down and
//!   the request is sent to the next member, round after round, until one answers or the failover
//!   budget is spent (then the caller gets [`StoreError::Unavailable`], i.e. HTTP 503), so a write
//!   waits out a leader election. A member that refuses the connection is not running and is not
//!   tried again in that request; when a majority refuse, no quorum can answer and the caller is
//!   told at once.
//! * A checker asks the member in use for its status every [`CHECK_EVERY`] (a member without a
//!   leader counts as down), so a dead or hung member is left before a request has to time out on
//!   it; the others every [`REFRESH_EVERY`], or every round while the member in use is down, so a
//!   member that came back is used again.
//! * Every [`REFRESH_EVERY`] the member list is read from the cluster (`MemberList`), so a member
//!   that replaced another (new address) is found; members no longer listed are retired.
//! * Watches opened on a member end (with `Unavailable`) as soon as that member is marked down, so
//!   [`super::follow`] resumes them on another member from the last revision it saw.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use tokio::sync::watch;
use tokio::time::Instant;

use super::StoreError;

/// Deadline for one attempt on one member when another member could answer instead.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(1200);
/// Deadline for one attempt when no member passed its last health check.
pub const QUICK_TIMEOUT: Duration = Duration::from_millis(500);
/// Deadline for a request when there is only one member (a loaded machine's fsync may be slow).
pub const SINGLE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request keeps trying other members before it answers `Unavailable`: long enough for
/// the members left to elect a leader after the raft leader died, on a loaded machine too (one
/// attempt deadline to notice, an election timeout or two, a round trip).
pub const FAILOVER_BUDGET: Duration = Duration::from_secs(4);
/// Health check period.
pub const CHECK_EVERY: Duration = Duration::from_millis(400);
/// Deadline of one health check.
const CHECK_TIMEOUT: Duration = Duration::from_millis(800);
/// Member list refresh period.
pub const REFRESH_EVERY: Duration = Duration::from_secs(5);
/// Pause between rounds when every member failed fast (e.g. during a leader election).
const ROUND_PAUSE: Duration = Duration::from_millis(150);

/// One etcd member as this client sees it.
pub struct Member {
    pub endpoint: String,
    client: Client,
    healthy: AtomicBool,
    retired: AtomicBool,
    /// Bumped every time the member is marked down; watches on it end when it changes.
    downs: watch::Sender<u64>,
}

impl Member {
    fn new(endpoint: String, client: Client) -> Arc<Member> {
        Arc::new(Member {
            endpoint,
            client,
            healthy: AtomicBool::new(true),
            retired: AtomicBool::new(false),
            downs: watch::channel(0).0,
        })
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    fn mark_down(&self) {
        self.healthy.store(false, Ordering::Relaxed);
        self.downs.send_modify(|n| *n += 1);
    }

    fn usable(&self) -> bool {
        !self.retired.load(Ordering::Relaxed)
    }

    /// Resolves when the member is next marked down (or retired).
    pub fn went_down(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.downs.subscribe();
        async move {
            let _ = rx.changed().await;
        }
    }
}

/// The shared state of the member set.
pub struct Members {
    list: RwLock<Vec<Arc<Member>>>,
    current: AtomicUsize,
    options: ConnectOptions,
    /// The endpoints given on the command line; never retired (they may be a DNS name or a proxy).
    configured: Vec<String>,
}

impl Members {
    /// Build a client per endpoint (connections are made lazily) and start the checker.
    pub async fn start(
        endpoints: Vec<String>,
        options: ConnectOptions,
    ) -> Result<Arc<Members>, StoreError> {
        let mut list = Vec::new();
        for e in &endpoints {
            let client = Client::connect([e.as_str()], Some(options.clone()))
                .await
                .map_err(|err| StoreError::Other(format!("etcd endpoint {e}: {err}")))?;
            list.push(Member::new(e.clone(), client));
        }
        let members = Arc::new(Members {
            list: RwLock::new(list),
            current: AtomicUsize::new(0),
            options,
            configured: endpoints,
        });
        tokio::spawn(check_loop(Arc::downgrade(&members)));
        Ok(members)
    }

    fn snapshot(&self) -> Vec<Arc<Member>> {
        self.list.read().map(|l| l.clone()).unwrap_or_default()
    }

    /// The endpoint requests go to now.
    pub fn current_endpoint(&self) -> Option<String> {
        let list = self.snapshot();
        list.get(self.current.load(Ordering::Relaxed) % list.len().max(1))
            .map(|m| m.endpoint.clone())
    }

    /// The member with this endpoint.
    pub fn member(&self, endpoint: &str) -> Option<Arc<Member>> {
        self.snapshot().into_iter().find(|m| m.endpoint == endpoint)
    }

    /// Every known endpoint with its health, in selection order.
    pub fn endpoints(&self) -> Vec<(String, bool)> {
        self.snapshot()
            .iter()
            .filter(|m| m.usable())
            .map(|m| (m.endpoint.clone(), m.healthy.load(Ordering::Relaxed)))
            .collect()
    }

    /// Attempt order: the member in use, then the other healthy ones, then the ones marked down
    /// (they may have come back since the last check).
    fn order(&self) -> Vec<(usize, Arc<Member>)> {
        let list = self.snapshot();
        let n = list.len();
        if n == 0 {
            return Vec::new();
        }
        let start = self.current.load(Ordering::Relaxed) % n;
        let rotated: Vec<(usize, Arc<Member>)> = (0..n)
            .map(|i| (start + i) % n)
            .map(|i| (i, list[i].clone()))
            .filter(|(_, m)| m.usable())
            .collect();
        let (up, down): (Vec<_>, Vec<_>) = rotated
            .into_iter()
            .partition(|(_, m)| m.healthy.load(Ordering::Relaxed));
        up.into_iter().chain(down).collect()
    }

    fn failed(&self, index: usize, member: &Member, error: &StoreError) {
        if member.healthy.load(Ordering::Relaxed) {
            tracing::warn!(endpoint = %member.endpoint, %error, "etcd member failed; using another member");
        }
        member.mark_down();
        self.move_off(index);
    }

    /// Switch away from `index` if it is the member in use.
    fn move_off(&self, index: usize) {
        let list = self.snapshot();
        let n = list.len();
        if n < 2 || self.current.load(Ordering::Relaxed) % n != index {
            return;
        }
        if let Some(next) = (1..n)
            .map(|i| (index + i) % n)
            .find(|&i| list[i].usable() && list[i].healthy.load(Ordering::Relaxed))
        {
            self.current.store(next, Ordering::Relaxed);
            tracing::info!(endpoint = %list[next].endpoint, "etcd: now using this member");
        }
    }

    /// Run `op` against the member in use, failing over to the others on transport errors, "no
    /// leader" and missed deadlines, in rounds until one answers or [`FAILOVER_BUDGET`] is spent.
    /// A member that refuses the connection is not running: it is not tried again in this call, and
    /// once a majority of the members refuse, no quorum can answer and the caller is told at once.
    /// Members that run but have no leader (an election after the raft leader died) are tried
    /// again every round until the budget is spent, so a write waits out the election instead of
    /// failing. Returns the answer and the member that gave it.
    pub async fn call<T, F, Fut>(&self, op: F) -> Result<(T, Arc<Member>), StoreError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let started = Instant::now();
        let mut last: Option<StoreError> = None;
        let mut refused: Vec<String> = Vec::new();
        loop {
            let all = self.order();
            let members = all.len();
            let order: Vec<_> = all
                .into_iter()
                .filter(|(_, m)| !refused.contains(&m.endpoint))
                .collect();
            if order.is_empty() || refused.len() * 2 > members {
                return Err(last.unwrap_or_else(no_member));
            }
            let single = members <= 1;
            // No member passed its last health check (an election, or quorum lost while the
            // members still accept connections): short attempts, so a member that gets its leader
            // back is found within the budget.
            let none_healthy = !order.iter().any(|(_, m)| m.healthy.load(Ordering::Relaxed));
            for (index, member) in order {
                let budget = if single {
                    SINGLE_TIMEOUT
                } else if none_healthy {
                    QUICK_TIMEOUT
                } else {
                    ATTEMPT_TIMEOUT
                };
                let error = match tokio::time::timeout(budget, op(member.client())).await {
                    Ok(Ok(value)) => {
                        if !member.healthy.swap(true, Ordering::Relaxed) {
                            tracing::info!(endpoint = %member.endpoint, "etcd member answers again");
                        }
                        return Ok((value, member));
                    }
                    Ok(Err(e)) => {
                        if connection_refused(&e) {
                            refused.push(member.endpoint.clone());
                        }
                        match map_err(e) {
                            e @ StoreError::Unavailable(_) => e,
                            other => return Err(other),
                        }
                    }
                    Err(_) => StoreError::Unavailable(format!(
                        "etcd member {} did not answer within {budget:?}",
                        member.endpoint
                    )),
                };
                self.failed(index, &member, &error);
                last = Some(error);
                if single || started.elapsed() >= FAILOVER_BUDGET {
                    return Err(last.unwrap_or_else(no_member));
                }
            }
            if refused.len() * 2 > members || started.elapsed() + ROUND_PAUSE >= FAILOVER_BUDGET {
                return Err(last.unwrap_or_else(no_member));
            }
            tokio::time::sleep(ROUND_PAUSE).await;
        }
    }

    /// Check members once: healthy if it answers a status request and knows a leader. Only the
    /// member in use is checked every round (it is the one whose hang would stall requests and
    /// watches); the others, which nothing waits on, only when `all` is set (every
    /// [`REFRESH_EVERY`], or while the member in use is down), so the status requests a daemon
    /// sends do not grow with the number of members.
    async fn check(&self, all: bool) {
        let list = self.snapshot();
        let n = list.len();
        let current = if n == 0 {
            0
        } else {
            self.current.load(Ordering::Relaxed) % n
        };
        let all = all
            || list
                .get(current)
                .is_some_and(|m| !m.healthy.load(Ordering::Relaxed));
        let checks = list
            .iter()
            .enumerate()
            .filter(|(i, _)| all || *i == current)
            .map(|(i, m)| async move {
                let mut client = m.client();
                let ok = match tokio::time::timeout(CHECK_TIMEOUT, client.status()).await {
                    Ok(Ok(status)) => status.leader() != 0,
                    _ => false,
                };
                (i, ok)
            });
        for (i, ok) in futures::future::join_all(checks).await {
            let m = &list[i];
            let was = m.healthy.load(Ordering::Relaxed);
            if ok && !was {
                tracing::info!(endpoint = %m.endpoint, "etcd member healthy again");
                m.healthy.store(true, Ordering::Relaxed);
            } else if !ok && was {
                tracing::warn!(endpoint = %m.endpoint, "etcd member failed its health check");
                m.mark_down();
                self.move_off(i);
            }
        }
    }

    /// Read the member list from a healthy member; add new client URLs, retire vanished ones.
    async fn refresh(&self) {
        let Ok((resp, _)) = self
            .call(|mut c| async move { c.member_list().await })
            .await
        else {
            return;
        };
        let mut listed: Vec<String> = Vec::new();
        for member in resp.members() {
            for url in member.client_urls() {
                let url = url.trim_end_matches('/').to_string();
                // A TLS client cannot use a plain URL and the other way round.
                let same_scheme = self
                    .configured
                    .first()
                    .is_some_and(|c| c.split("://").next() == url.split("://").next());
                if same_scheme && !listed.contains(&url) {
                    listed.push(url);
                }
            }
        }
        if listed.is_empty() {
            return;
        }
        let known = self.snapshot();
        for m in &known {
            let keep = listed.contains(&m.endpoint) || self.configured.contains(&m.endpoint);
            let was_retired = m.retired.swap(!keep, Ordering::Relaxed);
            if was_retired == keep {
                if keep {
                    tracing::info!(endpoint = %m.endpoint, "etcd member listed again");
                } else {
                    tracing::info!(endpoint = %m.endpoint, "etcd member left the cluster; retired");
                    m.mark_down();
                }
            }
        }
        for url in listed {
            if known.iter().any(|m| m.endpoint == url) {
                continue;
            }
            match Client::connect([url.as_str()], Some(self.options.clone())).await {
                Ok(client) => {
                    tracing::info!(endpoint = %url, "etcd member discovered");
                    if let Ok(mut list) = self.list.write() {
                        list.push(Member::new(url, client));
                    }
                }
                Err(e) => tracing::warn!(endpoint = %url, error = %e, "cannot add etcd member"),
            }
        }
    }
}

/// Whether the member's address refused the connection (nothing listens there: the member is not
/// running), as opposed to a member that runs but cannot answer yet.
fn connection_refused(err: &etcd_client::Error) -> bool {
    use etcd_client::Error as E;
    // etcd-client's error does not expose its cause as `source()`; start from the inner error.
    let mut source: Option<&(dyn std::error::Error + 'static)> = match err {
        E::TransportError(e) => Some(e),
        E::GRpcStatus(status) => Some(status),
        E::IoError(e) => Some(e),
        _ => None,
    };
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = e.source();
    }
    false
}

fn no_member() -> StoreError {
    StoreError::Unavailable("no etcd member configured".into())
}

/// The checker: runs while any handle to the member set exists.
async fn check_loop(members: Weak<Members>) {
    let mut next_refresh = Instant::now() + REFRESH_EVERY;
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        let Some(m) = members.upgrade() else { return };
        let due = Instant::now() >= next_refresh;
        m.check(due).await;
        if due {
            m.refresh().await;
            next_refresh = Instant::now() + REFRESH_EVERY;
        }
    }
}

/// Classify an etcd-client error: anything another member (or a retry after recovery) can fix is
/// `Unavailable`.
pub fn map_err(err: etcd_client::Error) -> StoreError {
    use etcd_client::Error as E;
    match err {
        E::TransportError(e) => StoreError::Unavailable(super::connect::chain(&e)),
        E::IoError(e) => StoreError::Unavailable(e.to_string()),
        E::GRpcStatus(status) => {
            let message = status.message().to_string();
            match status.code() as i32 {
                grpc_code::CANCELLED
                | grpc_code::UNKNOWN
                | grpc_code::DEADLINE_EXCEEDED
                | grpc_code::UNAVAILABLE => StoreError::Unavailable(with_source(message, &status)),
                // etcd answers "no leader" / "leader changed" with these on some versions.
                _ if message.contains("no leader") || message.contains("leader changed") => {
                    StoreError::Unavailable(message)
                }
                _ => StoreError::Other(message),
            }
        }
        E::LeaseKeepAliveError(msg) if msg.contains("not found") => StoreError::LeaseNotFound(0),
        E::WatchError(msg) | E::LeaseKeepAliveError(msg) => StoreError::Unavailable(msg),
        other => StoreError::Other(other.to_string()),
    }
}

fn with_source(message: String, status: &(dyn std::error::Error + 'static)) -> String {
    match status.source() {
        Some(s) => format!("{message}: {}", super::connect::chain(s)),
        None => message,
    }
}

/// gRPC status codes compared by number (tonic is not a direct dependency).
mod grpc_code {
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const UNAVAILABLE: i32 = 14;
}
