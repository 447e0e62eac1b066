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
//! - The endpoint DB is rebuilt from etcd when the term starts and follows it while it lasts:
//!   every endpoint record (its config, `state/eps`, written by `/plugin/createEndpoint`, and
//!   its oper state, `oper/eps`, written by the netplugin that plumbed it) on a VXLAN network
//!   is an endpoint of its host's VTEP (the record's `vtepIP`, else the `netplugin.vtep`
//!   registration of its `homingHost`), so endpoints created through REST reach every agent
//!   and a new leader knows every endpoint before any agent re-registers. The same endpoint
//!   from its records and from its agent's announcement is one endpoint (nothing relayed
//!   twice, nothing changes on a failover); it is withdrawn when its last record goes (or its
//!   agent withdraws it).
//! - Hosts that leave: a host whose `netplugin.vtep` registration expired (or that had none
//!   when the term started but has endpoints in etcd) and did not come back within the grace
//!   period has its endpoints withdrawn from every other agent; its records are then ignored
//!   until it registers again.
//! - Only hosts registered as `netplugin` or `netplugin.vtep` may connect to the RPC port;
//!   other connections are closed unread and logged (once a minute per address).
//!
//! [`OfnetMaster`] is the handle the REST side uses (`/debug/ofnet`): commands go to the
//! master's thread over a channel, answers come back on one-shot channels.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::registry::{self, ServiceEvent, ServiceInfo};
use crate::state::{CfgNetworkState, CfgPolicyRule};
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
    AddEndpoint(ofnet::Endpoint),
    DelEndpoint(ofnet::Endpoint),
    AllowHost(IpAddr, bool),
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

    /// An endpoint of the durable record (relayed unless the master has it already).
    pub fn add_endpoint(&self, ep: ofnet::Endpoint) {
        let _ = self.commands.send(Command::AddEndpoint(ep));
    }

    /// An endpoint gone from the durable record.
    pub fn del_endpoint(&self, ep: ofnet::Endpoint) {
        let _ = self.commands.send(Command::DelEndpoint(ep));
    }

    /// Allow (or no longer) connections from a registered netplugin host.
    pub fn allow_host(&self, host: IpAddr, allow: bool) {
        let _ = self.commands.send(Command::AllowHost(host, allow));
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
    let master = match ofnet::MasterHandle::start_restricted(
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
            Command::AddEndpoint(ep) => {
                let _ = master.add_endpoint(ep).await;
            }
            Command::DelEndpoint(ep) => {
                let _ = master.del_endpoint(ep).await;
            }
            Command::AllowHost(host, allow) => {
                let _ = master.allow_host(host, allow).await;
            }
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
    let endpoints = Feed::new(store.clone(), master.clone(), settings.grace).run(term.clone());
    tokio::join!(rules, endpoints);
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

/// The two records an endpoint has in etcd: its config (netmaster's REST) and its oper state
/// (the netplugin that plumbed it). Both carry these fields under Contiv's names.
fn endpoint_prefixes() -> [String; 2] {
    [
        keys::state_prefix(keys::category::EPS),
        format!("{}{}/", keys::OPER, keys::category::EPS),
    ]
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct EndpointRecord {
    #[serde(rename = "netID")]
    net_id: String,
    #[serde(rename = "ipAddress")]
    ip_address: String,
    #[serde(rename = "ipv6Address")]
    ipv6_address: String,
    #[serde(rename = "macAddress")]
    mac_address: String,
    #[serde(rename = "homingHost")]
    homing_host: String,
    #[serde(rename = "vtepIP")]
    vtep_ip: String,
    #[serde(rename = "endpointGroupId")]
    endpoint_group_id: u32,
}

/// What an endpoint needs of its network: VXLAN networks only (VLAN endpoints are reached
/// through the uplinks, not relayed).
#[derive(Debug, Clone)]
struct NetInfo {
    vlan: u16,
    vni: u32,
    tenant: String,
}

/// The endpoint and departure feed of one term: one task owning every map it uses.
struct Feed {
    store: Arc<dyn StateStore>,
    master: OfnetMaster,
    grace: Duration,
    /// VXLAN networks by id (`None`: known not to be VXLAN).
    networks: BTreeMap<String, Option<NetInfo>>,
    /// `netplugin.vtep` registrations: registry key → (VTEP, hostname).
    vteps: BTreeMap<String, (Ipv4Addr, String)>,
    /// Registry keys (`netplugin`, `netplugin.vtep`) whose host is allowed to connect.
    allowed: BTreeMap<String, IpAddr>,
    /// Endpoint record key → the endpoint it gave.
    records: BTreeMap<String, ofnet::Endpoint>,
    /// How many records give each endpoint id.
    ids: BTreeMap<String, usize>,
    /// Departed hosts waiting for the grace period to end.
    pending: BTreeMap<Ipv4Addr, CancellationToken>,
    /// Departed hosts whose endpoints were withdrawn (their records are ignored).
    withdrawn: BTreeSet<Ipv4Addr>,
    expired_tx: mpsc::UnboundedSender<Ipv4Addr>,
    expired_rx: mpsc::UnboundedReceiver<Ipv4Addr>,
}

/// A stream of one of the feed's inputs.
type Events<T> = futures::stream::BoxStream<'static, crate::store::StoreResult<T>>;

impl Feed {
    fn new(store: Arc<dyn StateStore>, master: OfnetMaster, grace: Duration) -> Feed {
        let (expired_tx, expired_rx) = mpsc::unbounded_channel();
        Feed {
            store,
            master,
            grace,
            networks: BTreeMap::new(),
            vteps: BTreeMap::new(),
            allowed: BTreeMap::new(),
            records: BTreeMap::new(),
            ids: BTreeMap::new(),
            pending: BTreeMap::new(),
            withdrawn: BTreeSet::new(),
            expired_tx,
            expired_rx,
        }
    }

    /// Follow the registry and the endpoint records until `term` ends; a broken watch starts
    /// over from fresh listings (records gone meanwhile are withdrawn).
    async fn run(mut self, term: CancellationToken) {
        loop {
            if let Err(e) = self.follow(&term).await {
                tracing::warn!(error = %e, "ofnet master: endpoint feed broke; listing again");
            }
            if term.is_cancelled() {
                break;
            }
            tokio::select! {
                _ = term.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
        for (_, cancel) in std::mem::take(&mut self.pending) {
            cancel.cancel();
        }
    }

    async fn follow(&mut self, term: &CancellationToken) -> Result<(), String> {
        let err = |e: crate::store::StoreError| e.to_string();
        // Registrations first, so hosts that are here are not taken for departed ones.
        let vtep_listing = registry::list(self.store.as_ref(), registry::NETPLUGIN_VTEP)
            .await
            .map_err(err)?;
        let agent_listing = registry::list(self.store.as_ref(), registry::NETPLUGIN)
            .await
            .map_err(err)?;
        let mut present = BTreeSet::new();
        for info in vtep_listing.iter().chain(agent_listing.iter()) {
            present.insert(info.key());
            self.registered(info);
        }
        let stale: Vec<String> = self
            .allowed
            .keys()
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        for key in stale {
            self.unregistered(&key);
        }
        let mut vtep_events = registry::watch(self.store.clone(), registry::NETPLUGIN_VTEP)
            .await
            .map_err(err)?;
        let mut agent_events = registry::watch(self.store.clone(), registry::NETPLUGIN)
            .await
            .map_err(err)?;
        let [config, oper] = endpoint_prefixes();
        let mut config_events = self.list_and_watch(&config).await?;
        let mut oper_events = self.list_and_watch(&oper).await?;
        loop {
            tokio::select! {
                _ = term.cancelled() => return Ok(()),
                Some(host) = self.expired_rx.recv() => self.expired(host).await,
                e = vtep_events.next() => self.registry_event(e)?,
                e = agent_events.next() => self.registry_event(e)?,
                e = config_events.next() => self.record_event(e).await?,
                e = oper_events.next() => self.record_event(e).await?,
            }
        }
    }

    /// List the records under `prefix` (the store's state replaces what the feed had there),
    /// then watch from the listing.
    async fn list_and_watch(&mut self, prefix: &str) -> Result<Events<WatchEvent>, String> {
        let listing = crate::store::list_all(self.store.as_ref(), prefix)
            .await
            .map_err(|e| e.to_string())?;
        let present: BTreeSet<&str> = listing.entries.iter().map(|kv| kv.key.as_str()).collect();
        let gone: Vec<String> = self
            .records
            .keys()
            .filter(|k| k.starts_with(prefix) && !present.contains(k.as_str()))
            .cloned()
            .collect();
        for key in gone {
            self.record_deleted(&key);
        }
        for kv in &listing.entries {
            self.record_put(&kv.key, &kv.value).await;
        }
        self.store
            .watch(prefix.to_string(), listing.revision + 1)
            .await
            .map_err(|e| e.to_string())
    }

    fn registry_event(
        &mut self,
        event: Option<crate::store::StoreResult<ServiceEvent>>,
    ) -> Result<(), String> {
        match event {
            Some(Ok(ServiceEvent::Added(info))) => self.registered(&info),
            Some(Ok(ServiceEvent::Removed { key })) => self.unregistered(&key),
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("registry watch ended".into()),
        }
        Ok(())
    }

    fn registered(&mut self, info: &ServiceInfo) {
        let key = info.key();
        let Ok(ip) = info.HostAddr.parse::<IpAddr>() else {
            tracing::warn!(%key, addr = %info.HostAddr, "registration without an IP address");
            return;
        };
        if self.allowed.insert(key.clone(), ip).is_none() {
            self.master.allow_host(ip, true);
        }
        if info.ServiceName == registry::NETPLUGIN_VTEP
            && let IpAddr::V4(vtep) = ip
        {
            self.vteps.insert(key, (vtep, info.Hostname.clone()));
            if let Some(cancel) = self.pending.remove(&vtep) {
                tracing::info!(host = %vtep, "netplugin back within the grace period");
                cancel.cancel();
            }
            if self.withdrawn.remove(&vtep) {
                // Back after its endpoints were withdrawn: its records count again.
                tracing::info!(host = %vtep, "departed netplugin back; its endpoints relayed again");
                for ep in self.records.values() {
                    if ep.originator_ip == Some(vtep) {
                        self.master.add_endpoint(ep.clone());
                    }
                }
            }
        }
    }

    fn unregistered(&mut self, key: &str) {
        if let Some(ip) = self.allowed.remove(key) {
            self.master.allow_host(ip, false);
        }
        if let Some((vtep, _)) = self.vteps.remove(key)
            && !self.vtep_registered(vtep)
        {
            self.depart(vtep);
        }
    }

    fn vtep_registered(&self, vtep: Ipv4Addr) -> bool {
        self.vteps.values().any(|(v, _)| *v == vtep)
    }

    /// Start the grace period of a host that is gone (unless it already runs).
    fn depart(&mut self, host: Ipv4Addr) {
        if self.pending.contains_key(&host) || self.withdrawn.contains(&host) {
            return;
        }
        tracing::info!(%host, grace = ?self.grace, "netplugin gone; withdrawing its endpoints after the grace period");
        let cancel = CancellationToken::new();
        self.pending.insert(host, cancel.clone());
        let (grace, expired) = (self.grace, self.expired_tx.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep(grace) => {
                    let _ = expired.send(host);
                }
            }
        });
    }

    async fn expired(&mut self, host: Ipv4Addr) {
        let Some(cancel) = self.pending.remove(&host) else {
            return;
        };
        if cancel.is_cancelled() || self.vtep_registered(host) {
            return;
        }
        self.withdrawn.insert(host);
        match self.master.clear_node(IpAddr::V4(host)).await {
            Ok(n) => tracing::info!(%host, endpoints = n, "departed host's endpoints withdrawn"),
            Err(e) => {
                tracing::warn!(%host, error = %e, "cannot withdraw a departed host's endpoints")
            }
        }
    }

    async fn record_event(
        &mut self,
        event: Option<crate::store::StoreResult<WatchEvent>>,
    ) -> Result<(), String> {
        match event {
            Some(Ok(WatchEvent::Put { kv })) => self.record_put(&kv.key, &kv.value).await,
            Some(Ok(WatchEvent::Delete { key, .. })) => self.record_deleted(&key),
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("endpoint watch ended".into()),
        }
        Ok(())
    }

    async fn record_put(&mut self, key: &str, value: &[u8]) {
        let endpoint = match serde_json::from_slice::<EndpointRecord>(value) {
            Ok(record) => self.endpoint_of(&record).await,
            Err(e) => {
                tracing::warn!(%key, error = %e, "endpoint record does not parse; not relayed");
                None
            }
        };
        let Some(ep) = endpoint else {
            // Not (or no longer) a relayed endpoint.
            self.record_deleted(key);
            return;
        };
        let Some(host) = ep.originator_ip else {
            return;
        };
        if self.withdrawn.contains(&host) {
            return;
        }
        if let Some(old) = self.records.get(key)
            && old.endpoint_id != ep.endpoint_id
        {
            self.record_deleted(key);
        }
        if !self.records.contains_key(key) {
            *self.ids.entry(ep.endpoint_id.clone()).or_default() += 1;
        }
        self.records.insert(key.to_string(), ep.clone());
        self.master.add_endpoint(ep);
        if !self.vtep_registered(host) {
            // Its host is gone (it left while no master ran): the grace period starts now.
            self.depart(host);
        }
    }

    fn record_deleted(&mut self, key: &str) {
        let Some(ep) = self.records.remove(key) else {
            return;
        };
        let last = match self.ids.get_mut(&ep.endpoint_id) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                self.ids.remove(&ep.endpoint_id);
                true
            }
        };
        if last {
            self.master.del_endpoint(ep);
        }
    }

    /// The endpoint a record describes, when it is on a VXLAN network and its host is known.
    async fn endpoint_of(&mut self, record: &EndpointRecord) -> Option<ofnet::Endpoint> {
        let ip: Ipv4Addr = record.ip_address.split('/').next()?.parse().ok()?;
        let net = self.network(&record.net_id).await?;
        let vtep: Ipv4Addr = match record.vtep_ip.parse() {
            Ok(v) => v,
            Err(_) => self
                .vteps
                .values()
                .find(|(_, name)| !name.is_empty() && *name == record.homing_host)
                .map(|(v, _)| *v)?,
        };
        let mac = if record.mac_address.is_empty() {
            crate::resources::ipv4::mac_from_ipv4(ip)
        } else {
            record.mac_address.clone()
        };
        let ipv6: Option<Ipv6Addr> = record
            .ipv6_address
            .split('/')
            .next()
            .filter(|a| !a.is_empty())
            .and_then(|a| a.parse().ok());
        Some(ofnet::Endpoint {
            endpoint_id: ofnet::Endpoint::id_for(IpAddr::V4(ip), &net.tenant),
            endpoint_type: ofnet::model::ENDPOINT_INTERNAL,
            endpoint_group: u16::try_from(record.endpoint_group_id).unwrap_or(0),
            ip_addr: Some(ip),
            ip_mask: Some(Ipv4Addr::BROADCAST),
            ipv6_addr: ipv6,
            ipv6_mask: ipv6.map(|_| Ipv6Addr::from(u128::MAX)),
            vrf: net.tenant.clone(),
            mac: mac.parse().ok()?,
            vlan: net.vlan,
            vni: net.vni,
            endpoint_group_vlan: 0,
            originator_ip: Some(vtep),
            originator_mac: String::new(),
            timestamp: String::new(),
            port_no: 0,
            dscp: 0,
            bandwidth: None,
        })
    }

    /// The network's VXLAN facts, read once (a network's tags never change while it exists).
    async fn network(&mut self, id: &str) -> Option<NetInfo> {
        if let Some(known) = self.networks.get(id) {
            return known.clone();
        }
        let kv = self
            .store
            .get(&CfgNetworkState::key_for(id))
            .await
            .ok()
            .flatten()?;
        let net: CfgNetworkState = serde_json::from_slice(&kv.value).ok()?;
        let info = (net.pkt_tag_type == "vxlan").then(|| NetInfo {
            vlan: u16::try_from(net.pkt_tag).unwrap_or(0),
            vni: net.ext_pkt_tag,
            tenant: net.tenant.clone(),
        });
        self.networks.insert(id.to_string(), info.clone());
        info
    }
}
