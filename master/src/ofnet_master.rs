//! netmaster's ofnet master (reference §5.1): the RPC hub agents register with, run only while
//! this netmaster leads.
//!
//! Contract:
//! - On becoming leader: bind the RPC port (the host of the control address, port 9001 unless
//!   configured), start the master's actors (`ofnet::master`) on a thread of their own (an
//!   actix system; netmaster's REST runs on tokio worker threads), load the compiled policy
//!   rules from the store and follow them, then register `netmaster.rpc` so agents find it.
//!   Agents register and re-announce their endpoints; nothing is relayed that they already
//!   have, so a failover changes no flow.
//! - On losing leadership (or shutdown): unregister, close every agent connection, stop.
//! - Hosts that leave: a `netplugin.vtep` registration that expired and did not come back
//!   within the grace period has its endpoints withdrawn from every other agent.
//!
//! [`OfnetMaster`] is the handle the REST side uses (`/debug/ofnet`): commands go to the
//! master's thread over a channel, answers come back on one-shot channels.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::registry::{self, ServiceEvent, ServiceInfo};
use crate::state::CfgPolicyRule;
use crate::store::{StateStore, WatchEvent, keys};

pub use ofnet::master::MasterExport;

/// Contiv's grace before a departed host's endpoints are withdrawn (24 hours).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(24 * 3600);

/// What can fail when starting the master.
#[derive(Debug, thiserror::Error)]
pub enum OfnetError {
    #[error("cannot listen for ofnet RPC on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the ofnet master has stopped")]
    Stopped,
    #[error("the ofnet master thread cannot start: {0}")]
    Thread(std::io::Error),
}

enum Command {
    AddRule(ofnet::PolicyRule),
    DelRule(String),
    ClearNode(IpAddr, oneshot::Sender<usize>),
    Inspect(oneshot::Sender<Result<MasterExport, String>>),
}

/// A running ofnet master; dropping it stops the master and closes its connections.
#[derive(Clone)]
pub struct OfnetMaster {
    commands: mpsc::UnboundedSender<Command>,
    addr: SocketAddr,
}

impl OfnetMaster {
    /// Bind `bind` and start the master, advertising `advertise` to agents.
    pub fn start(bind: SocketAddr, advertise: SocketAddr) -> Result<OfnetMaster, OfnetError> {
        OfnetMaster::start_observed(bind, advertise, None)
    }

    /// [`OfnetMaster::start`], reporting its counts and RPC calls to `metrics`.
    pub fn start_observed(
        bind: SocketAddr,
        advertise: SocketAddr,
        metrics: Option<crate::metrics::OfnetMetrics>,
    ) -> Result<OfnetMaster, OfnetError> {
        let listener = std::net::TcpListener::bind(bind)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| OfnetError::Listen { addr: bind, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| OfnetError::Listen { addr: bind, source })?;
        let advertise = if advertise.port() == 0 {
            SocketAddr::new(advertise.ip(), addr.port())
        } else {
            advertise
        };
        let (commands, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("ofnet-master".into())
            .spawn(move || {
                let system = actix_rt::System::new();
                system.block_on(serve(listener, advertise, rx, metrics));
            })
            .map_err(OfnetError::Thread)?;
        Ok(OfnetMaster { commands, addr })
    }

    /// The address the RPC server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn add_rule(&self, rule: ofnet::PolicyRule) {
        let _ = self.commands.send(Command::AddRule(rule));
    }

    pub fn del_rule(&self, id: String) {
        let _ = self.commands.send(Command::DelRule(id));
    }

    /// Withdraw the endpoints `host` originated; how many.
    pub async fn clear_node(&self, host: IpAddr) -> Result<usize, OfnetError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::ClearNode(host, tx))
            .map_err(|_| OfnetError::Stopped)?;
        rx.await.map_err(|_| OfnetError::Stopped)
    }

    /// The master's state (`/debug/ofnet`).
    pub async fn inspect(&self) -> Result<MasterExport, OfnetError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Inspect(tx))
            .map_err(|_| OfnetError::Stopped)?;
        rx.await
            .map_err(|_| OfnetError::Stopped)?
            .map_err(|_| OfnetError::Stopped)
    }
}

/// The master's thread: start the actors, run commands until every handle is gone.
async fn serve(
    listener: std::net::TcpListener,
    advertise: SocketAddr,
    mut commands: mpsc::UnboundedReceiver<Command>,
    metrics: Option<crate::metrics::OfnetMetrics>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "ofnet master: cannot use its listener");
            return;
        }
    };
    let master = match ofnet::MasterHandle::start_observed(
        listener,
        Some(advertise),
        Vec::new(),
        Vec::new(),
        metrics
            .clone()
            .map(|m| Arc::new(m) as Arc<dyn ofnet::master::MasterObserver>),
    ) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(error = %e, "ofnet master: cannot start");
            return;
        }
    };
    tracing::info!(addr = %master.local_addr(), %advertise, "ofnet master running");
    while let Some(command) = commands.recv().await {
        match command {
            Command::AddRule(rule) => {
                let _ = master.add_rule(rule).await;
            }
            Command::DelRule(id) => {
                let _ = master.del_rule(id).await;
            }
            Command::ClearNode(host, reply) => {
                let _ = reply.send(master.clear_node(host).await.unwrap_or(0));
            }
            Command::Inspect(reply) => {
                let _ = reply.send(master.inspect().await);
            }
        }
    }
    tracing::info!("ofnet master stopped");
    drop(master);
    if let Some(m) = &metrics {
        m.stopped();
    }
    // Let the registry close the agents' connections before the system goes.
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// netmaster's compiled rule as the agents' rule (same Go field names on the wire).
pub fn agent_rule(rule: &crate::state::OfnetPolicyRule) -> Result<ofnet::PolicyRule, String> {
    serde_json::to_value(rule)
        .and_then(serde_json::from_value)
        .map_err(|e| format!("policy rule {}: {e}", rule.RuleId))
}

/// Where the master is reachable, for the REST side: `None` while this netmaster follows.
#[derive(Clone, Default)]
pub struct Slot(Arc<Mutex<Option<OfnetMaster>>>);

impl Slot {
    pub fn get(&self) -> Option<OfnetMaster> {
        self.0.lock().ok().and_then(|s| s.clone())
    }

    fn set(&self, master: Option<OfnetMaster>) {
        if let Ok(mut s) = self.0.lock() {
            *s = master;
        }
    }
}

/// How the master is run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Bind address of the RPC server (`<control host>:9001`).
    pub bind: SocketAddr,
    /// Registration TTL of `netmaster.rpc`, seconds.
    pub service_ttl: i64,
    /// How long a host may be gone before its endpoints are withdrawn.
    pub grace: Duration,
    /// Where the master reports its peers, calls and counts (`/metrics`).
    pub metrics: Option<crate::metrics::OfnetMetrics>,
}

/// One leadership term: the master, its rule feed, the departures watch and the
/// `netmaster.rpc` registration; all stop when `term` is cancelled.
pub async fn run_term(
    store: Arc<dyn StateStore>,
    settings: Settings,
    slot: Slot,
    term: CancellationToken,
) {
    let master = loop {
        match OfnetMaster::start_observed(settings.bind, settings.bind, settings.metrics.clone()) {
            Ok(m) => break m,
            Err(e) => {
                tracing::warn!(error = %e, "ofnet master: cannot start; retrying");
                tokio::select! {
                    _ = term.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    };
    // Rules first: agents registering get them in their first sync.
    let revision = load_rules(store.as_ref(), &master, &term).await;
    slot.set(Some(master.clone()));
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let mut info = ServiceInfo {
        ServiceName: registry::NETMASTER_RPC.into(),
        Role: "leader".into(),
        Version: env!("CARGO_PKG_VERSION").into(),
        TTL: settings.service_ttl,
        HostAddr: settings.bind.ip().to_string(),
        Port: master.local_addr().port(),
        Hostname: hostname,
    };
    if settings.bind.ip().is_unspecified() {
        info.HostAddr = crate::daemon::default_host_ip();
    }
    let registration = registry::register(store.clone(), info, term.child_token());
    let rules = follow_rules(store.clone(), master.clone(), revision, term.clone());
    let departures = follow_departures(store.clone(), master.clone(), settings.grace, term.clone());
    tokio::join!(rules, departures);
    slot.set(None);
    let _ = registration.task.await;
    tracing::info!("ofnet master term over");
}

/// Load every compiled rule; the revision read at (0 when the store failed; the watch then
/// lists again).
async fn load_rules(store: &dyn StateStore, master: &OfnetMaster, term: &CancellationToken) -> i64 {
    let prefix = keys::state_prefix(keys::category::POLICY_RULE);
    loop {
        match store.list(&prefix).await {
            Ok(listing) => {
                for kv in &listing.entries {
                    apply_rule(master, &kv.key, &kv.value);
                }
                return listing.revision;
            }
            Err(e) => {
                tracing::warn!(error = %e, "ofnet master: cannot list policy rules; retrying")
            }
        }
        tokio::select! {
            _ = term.cancelled() => return 0,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

fn apply_rule(master: &OfnetMaster, key: &str, value: &[u8]) {
    match serde_json::from_slice::<CfgPolicyRule>(value)
        .map_err(|e| e.to_string())
        .and_then(|r| agent_rule(&r.rule))
    {
        Ok(rule) => master.add_rule(rule),
        Err(e) => tracing::warn!(%key, error = %e, "compiled policy rule not relayed"),
    }
}

/// Relay every change of the compiled rules until `term` ends; a broken watch lists again.
async fn follow_rules(
    store: Arc<dyn StateStore>,
    master: OfnetMaster,
    mut revision: i64,
    term: CancellationToken,
) {
    let prefix = keys::state_prefix(keys::category::POLICY_RULE);
    loop {
        if revision == 0 {
            revision = load_rules(store.as_ref(), &master, &term).await;
        }
        let watch = tokio::select! {
            _ = term.cancelled() => return,
            w = store.watch(prefix.clone(), revision + 1) => w,
        };
        match watch {
            Ok(mut events) => loop {
                let event = tokio::select! {
                    _ = term.cancelled() => return,
                    e = events.next() => e,
                };
                match event {
                    Some(Ok(WatchEvent::Put { kv })) => apply_rule(&master, &kv.key, &kv.value),
                    Some(Ok(WatchEvent::Delete { key, .. })) => {
                        if let Some(id) = key.rsplit('/').next() {
                            master.del_rule(id.to_string());
                        }
                    }
                    Some(Err(_)) | None => break,
                }
            },
            Err(e) => tracing::warn!(error = %e, "ofnet master: policy rule watch failed"),
        }
        revision = 0;
        tokio::select! {
            _ = term.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Withdraw the endpoints of hosts whose `netplugin.vtep` registration expired and stayed
/// away for `grace`.
async fn follow_departures(
    store: Arc<dyn StateStore>,
    master: OfnetMaster,
    grace: Duration,
    term: CancellationToken,
) {
    // Pending withdrawals by registry key; a host that registers again cancels its own.
    let mut pending: BTreeMap<String, CancellationToken> = BTreeMap::new();
    loop {
        let events = tokio::select! {
            _ = term.cancelled() => return,
            e = registry::watch(store.clone(), registry::NETPLUGIN_VTEP) => e,
        };
        match events {
            Ok(mut events) => loop {
                let event = tokio::select! {
                    _ = term.cancelled() => return,
                    e = events.next() => e,
                };
                match event {
                    Some(Ok(ServiceEvent::Added(info))) => {
                        if let Some(cancel) = pending.remove(&info.key()) {
                            cancel.cancel();
                        }
                    }
                    Some(Ok(ServiceEvent::Removed { key })) => {
                        let Some(host) = host_of(&key) else {
                            continue;
                        };
                        let cancel = term.child_token();
                        if let Some(old) = pending.insert(key.clone(), cancel.clone()) {
                            old.cancel();
                        }
                        tracing::info!(%host, ?grace, "netplugin gone; withdrawing its endpoints after the grace period");
                        let master = master.clone();
                        tokio::spawn(async move {
                            tokio::select! {
                                _ = cancel.cancelled() => {}
                                _ = tokio::time::sleep(grace) => {
                                    if let Ok(n) = master.clear_node(host).await {
                                        tracing::info!(%host, endpoints = n, "departed host's endpoints withdrawn");
                                    }
                                }
                            }
                        });
                    }
                    Some(Err(_)) | None => break,
                }
            },
            Err(e) => tracing::warn!(error = %e, "ofnet master: netplugin registry watch failed"),
        }
        tokio::select! {
            _ = term.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// The host address in a registry key `/contiv.io/service/<name>/<host>:<port>`.
fn host_of(key: &str) -> Option<IpAddr> {
    let last = key.rsplit('/').next()?;
    let (host, _port) = last.rsplit_once(':')?;
    host.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_keys_name_their_host() {
        assert_eq!(
            host_of("/contiv.io/service/netplugin.vtep/10.0.0.2:4789"),
            Some("10.0.0.2".parse().unwrap())
        );
        assert_eq!(host_of("/contiv.io/service/netplugin.vtep/junk"), None);
    }
}
