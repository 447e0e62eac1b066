//! netmaster's supervisor: connect the store, run the leader election and service registrations,
//! serve the REST API, and on becoming leader make sure the `default` tenant and the `global` object
//! exist and repair the compiled policy rules (`policy::repair`; again whenever a write left some
//! unwritten). [`run`] takes a shutdown future so tests can start and stop netmaster in-process.

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::leader::{self, ElectionConfig, RoleView};
use crate::metrics::{MasterMetrics, MeteredStore};
use crate::model::{Global, ServiceLb, Tenant, ops};
use crate::registry::{self, ServiceInfo};
use crate::rest::{self, AppState};
use crate::store::txn::Db;
use crate::store::{ConnectError, EtcdConfig, EtcdStore, StateStore};

/// The ofnet master RPC port registered as `netmaster.rpc` (Contiv's).
pub const OFNET_MASTER_PORT: u16 = 9001;

/// Everything netmaster is configured with (flags/env are parsed by the binary).
#[derive(Debug, Clone)]
pub struct Config {
    pub etcd_endpoints: Vec<String>,
    /// TLS to etcd: `--etcd-cacert`, `--etcd-cert`, `--etcd-key`.
    pub etcd_ca: Option<PathBuf>,
    pub etcd_cert: Option<PathBuf>,
    pub etcd_key: Option<PathBuf>,
    /// External listener, `host:port` (default `0.0.0.0:9999`).
    pub listen_url: String,
    /// Control address `ip:port`: put in the leader lock and the registry; followers proxy to it.
    pub control_url: String,
    /// Cluster mode: docker, kubernetes, swarm-mode, test.
    pub mode: String,
    /// Docker cluster mode: the Docker engines (`unix:///path`) netmaster creates the Docker
    /// networks of Contiv networks and groups on; empty: none.
    pub docker_hosts: Vec<String>,
    /// The Docker network and IPAM driver name of netplugin (`--name`).
    pub plugin_name: String,
    /// vlan or vxlan.
    pub netmode: String,
    /// bridge or routing; used for the global object created at first leader start.
    pub fwdmode: String,
    /// default, aci or aci-opflex.
    pub infra: String,
    /// Leader lock TTL (Contiv: 30 s).
    pub lock_ttl: Duration,
    /// Service registration TTL in seconds (Contiv: 10).
    pub service_ttl: i64,
    /// HTTP worker threads.
    pub workers: usize,
    /// Port of the ofnet master's RPC server on the control host (Contiv: 9001; 0 picks one).
    pub ofnet_port: u16,
    /// How long a departed host's endpoints stay before they are withdrawn (Contiv: 24 h).
    pub ofnet_grace: Duration,
    /// How often the leader looks for address reserves of hosts whose netplugin is gone
    /// (`crate::endpoint::reserve::sweep`).
    pub reserve_sweep: Duration,
    /// TLS and bearer tokens of the REST API (`--tls-cert`, `--tls-key`, `--tls-cacert`,
    /// `--token-file`); all unset: plain HTTP open to everyone (a warning is logged).
    pub security: crate::auth::SecurityFiles,
}

impl Config {
    /// Defaults of the reference (§3) for the optional settings.
    pub fn new(etcd: &str, mode: &str, netmode: &str, fwdmode: &str) -> Self {
        Config {
            etcd_endpoints: vec![etcd.to_string()],
            etcd_ca: None,
            etcd_cert: None,
            etcd_key: None,
            listen_url: "0.0.0.0:9999".into(),
            control_url: String::new(),
            mode: mode.into(),
            docker_hosts: Vec::new(),
            plugin_name: "netplugin".into(),
            netmode: netmode.into(),
            fwdmode: fwdmode.into(),
            infra: "default".into(),
            lock_ttl: Duration::from_secs(30),
            service_ttl: 10,
            workers: 2,
            ofnet_port: OFNET_MASTER_PORT,
            ofnet_grace: crate::ofnet_master::DEFAULT_GRACE,
            reserve_sweep: Duration::from_secs(30),
            security: Default::default(),
        }
    }

    /// The etcd part of the configuration.
    pub fn etcd(&self) -> EtcdConfig {
        EtcdConfig {
            endpoints: self.etcd_endpoints.clone(),
            ca: self.etcd_ca.clone(),
            cert: self.etcd_cert.clone(),
            key: self.etcd_key.clone(),
        }
    }
}

/// Why `--netmode vxlan --fwdmode bridge` is refused, in netmaster's and netplugin's words alike.
pub const VXLAN_BRIDGE_REFUSED: &str = "--netmode vxlan cannot run with --fwdmode bridge: \
     use --fwdmode routing for VXLAN, or --netmode vlan for bridging";

/// Why netmaster could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// `--netmode vxlan --fwdmode bridge`, refused as netplugin refuses it.
    #[error("{}", VXLAN_BRIDGE_REFUSED)]
    VxlanBridge,
    #[error("invalid option {option}: {reason}")]
    Option {
        option: &'static str,
        reason: String,
    },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Etcd(ConnectError),
    /// A TLS or token file cannot be used.
    #[error("{0}")]
    Security(#[from] crate::auth::AuthError),
    #[error("HTTP server failed: {0}")]
    Server(std::io::Error),
}

/// The host IP the default route leaves from (no packet is sent), or loopback.
pub fn default_host_ip() -> String {
    UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            s.connect("8.8.8.8:53")?;
            s.local_addr()
        })
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|_| "127.0.0.1".into())
}

fn check(config: &Config) -> Result<(), DaemonError> {
    let one_of = |option: &'static str, value: &str, allowed: &[&str]| {
        if allowed.contains(&value) {
            Ok(())
        } else {
            Err(DaemonError::Option {
                option,
                reason: format!("{value:?} must be one of {allowed:?}"),
            })
        }
    };
    one_of(
        "--mode",
        &config.mode,
        &["docker", "kubernetes", "swarm-mode", "test"],
    )?;
    if !config.docker_hosts.is_empty() && config.mode != "docker" {
        return Err(DaemonError::Option {
            option: "--docker-host",
            reason: format!(
                "Docker networks are made in --mode docker only, not {:?}",
                config.mode
            ),
        });
    }
    one_of("--netmode", &config.netmode, &["vlan", "vxlan"])?;
    one_of("--fwdmode", &config.fwdmode, &["bridge", "routing"])?;
    if config.netmode == "vxlan" && config.fwdmode == "bridge" {
        return Err(DaemonError::VxlanBridge);
    }
    one_of("--infra", &config.infra, &["default", "aci", "aci-opflex"])?;
    if config.etcd_endpoints.is_empty() {
        return Err(DaemonError::Option {
            option: "--etcd",
            reason: "no etcd endpoint".into(),
        });
    }
    Ok(())
}

fn resolve(addr: &str) -> Result<SocketAddr, DaemonError> {
    addr.to_socket_addrs()
        .map_err(|e| DaemonError::Listen {
            addr: addr.into(),
            source: e,
        })?
        .next()
        .ok_or_else(|| DaemonError::Listen {
            addr: addr.into(),
            source: std::io::Error::other("no address"),
        })
}

/// The control address: as configured, or `<default-route ip>:<listen port>`.
pub fn control_addr(config: &Config) -> Result<String, DaemonError> {
    if !config.control_url.is_empty() {
        return Ok(config.control_url.clone());
    }
    let port = resolve(&config.listen_url)?.port();
    Ok(format!("{}:{port}", default_host_ip()))
}

/// Connect to etcd; an unreachable cluster is retried, a configuration mistake (TLS files, bad
/// endpoint) ends start-up with an error naming it.
async fn connect(
    config: &Config,
    cancel: &CancellationToken,
) -> Result<Option<EtcdStore>, DaemonError> {
    let etcd = config.etcd();
    loop {
        match EtcdStore::connect_with(&etcd).await {
            Ok(s) => return Ok(Some(s)),
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, endpoints = ?config.etcd_endpoints, "cannot reach etcd; retrying")
            }
            Err(e) => return Err(DaemonError::Etcd(e)),
        }
        tokio::select! {
            _ = cancel.cancelled() => return Ok(None),
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// What a new leader makes sure exists: the `default` tenant and the `global` object.
pub async fn leader_defaults(db: &Db, config: &Config) -> Result<(), Error> {
    match ops::get::<Global>(db, "global").await {
        Ok(_) => {}
        Err(Error::NotFound(_)) => {
            ops::upsert(
                db,
                "global",
                Global::defaults(&config.fwdmode, &config.infra),
            )
            .await?;
        }
        Err(e) => return Err(e),
    }
    match ops::get::<Tenant>(db, "default").await {
        Ok(_) => Ok(()),
        Err(Error::NotFound(_)) => ops::upsert(db, "default", Tenant::named("default"))
            .await
            .map(|_| ()),
        Err(e) => Err(e),
    }
}

pub(crate) async fn leader_duties(
    db: Db,
    config: Config,
    mut role: RoleView,
    masters: Vec<registry::Registration>,
) {
    loop {
        let view = role.current();
        for reg in &masters {
            reg.set_role(if view.is_leader { "leader" } else { "follower" });
        }
        if view.is_leader {
            leader_start(&db, &config, &role).await;
        }
        // While leader, a write whose compiled policy rules were cut short asks for a repair,
        // and the reserves of hosts whose netplugin is gone are given back.
        let mut sweep = tokio::time::interval(config.reserve_sweep);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut absent = std::collections::BTreeSet::new();
        loop {
            tokio::select! {
                changed = role.changed() => {
                    if !changed {
                        return;
                    }
                    break;
                }
                () = db.repair_wanted(), if view.is_leader => repair_derived_records(&db, &role).await,
                _ = sweep.tick(), if view.is_leader => {
                    if let Err(e) = crate::endpoint::reserve::sweep(&db, &mut absent).await {
                        tracing::warn!(error = %e, "cannot release the address reserves of gone hosts yet");
                    }
                }
            }
        }
    }
}

/// Defaults, the subnet index of networks stored before it existed, and the repair of derived records (service providers, compiled policy rules); retried until it works or leadership moves on (a store
/// outage must not skip it).
async fn leader_start(db: &Db, config: &Config, role: &RoleView) {
    while role.current().is_leader {
        let start = async {
            leader_defaults(db, config).await?;
            crate::model::network::index_subnets(db).await?;
            crate::state::addr_map::convert_all(db).await?;
            crate::model::service_lb::convert_all(db).await?;
            crate::model::service_lb::repair_providers(db).await?;
            crate::policy::repair::reconcile(db).await
        };
        match start.await {
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, "leader start: cannot create default tenant/global or repair compiled policy rules; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Repair the derived records (compiled policy rules, service provider keys), retrying every
/// second while this instance leads.
async fn repair_derived_records(db: &Db, role: &RoleView) {
    while role.current().is_leader {
        let repair = async {
            crate::model::service_lb::repair_providers(db).await?;
            crate::policy::repair::reconcile(db).await
        };
        match repair.await {
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot repair compiled policy rules or service providers yet; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Run the ofnet master while this netmaster leads (one term per leadership; see
/// [`crate::ofnet`]), until `cancel`.
async fn ofnet_duties(
    store: Arc<dyn StateStore>,
    settings: crate::ofnet_master::Settings,
    mut role: RoleView,
    slot: crate::ofnet_master::Slot,
    cancel: CancellationToken,
) {
    loop {
        let term = (role.current().is_leader).then(|| {
            let term = cancel.child_token();
            let task = tokio::spawn(crate::ofnet_master::run_term(
                store.clone(),
                settings.clone(),
                slot.clone(),
                term.clone(),
            ));
            (term, task)
        });
        // Wait for a change of role (or the end).
        let more = loop {
            tokio::select! {
                _ = cancel.cancelled() => break false,
                changed = role.changed() => {
                    if !changed {
                        break false;
                    }
                    if role.current().is_leader != term.is_some() {
                        break true;
                    }
                }
            }
        };
        if let Some((term, task)) = term {
            term.cancel();
            let _ = task.await;
        }
        if !more {
            return;
        }
    }
}

/// Keep `gauge` at the number of service load balancers in the store (`netmaster_services`),
/// from a watch: no listing per scrape.
async fn count_services(store: Arc<dyn StateStore>, gauge: Gauge, cancel: CancellationToken) {
    use crate::store::follow::{StateEvent, follow};
    use futures::StreamExt;
    let prefix = crate::store::keys::model_prefix(<ServiceLb as crate::model::Object>::TYPE);
    let mut keys = std::collections::HashSet::new();
    let mut events = follow(store, prefix);
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => return,
            e = events.next() => e,
        };
        match event {
            None => return,
            Some(StateEvent::Snapshot { entries, .. }) => {
                keys = entries.into_iter().map(|kv| kv.key).collect();
            }
            Some(StateEvent::Put(kv)) => {
                keys.insert(kv.key);
            }
            Some(StateEvent::Delete { key, .. }) => {
                keys.remove(&key);
            }
        }
        gauge.set(i64::try_from(keys.len()).unwrap_or(i64::MAX));
    }
}

/// Run netmaster until `shutdown` completes.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), DaemonError> {
    check(&config)?;
    // Before etcd (which may be retried for long): a bad file ends start-up at once.
    crate::auth::Security::load(&config.security)?;
    let control = control_addr(&config)?;
    let cancel = CancellationToken::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let store = tokio::select! {
        s = connect(&config, &cancel) => s?,
        _ = &mut shutdown => None,
    };
    let Some(store) = store else { return Ok(()) };
    run_with_store(config, control, Arc::new(store), cancel, shutdown).await
}

/// The one warning of a netmaster without TLS or tokens.
fn warn_if_open(security: &crate::auth::Security, listen: &str) {
    match (security.server_tls.is_some(), security.tokens.is_some()) {
        (true, true) => {}
        (false, false) => tracing::warn!(
            %listen,
            "REST API is plain HTTP without authentication: anyone who reaches it can change the network; \
             give --tls-cert/--tls-key and --token-file (docs/operating.md, Security)"
        ),
        (false, true) => tracing::warn!(
            %listen,
            "REST API is plain HTTP: bearer tokens cross the network in clear; give --tls-cert/--tls-key"
        ),
        (true, false) => tracing::warn!(
            %listen,
            "REST API has no authentication: anyone who reaches it can change the network; give --token-file"
        ),
    }
}

/// Run netmaster on an already-built store (used by [`run`] and by tests with the memory store).
pub async fn run_with_store(
    config: Config,
    control: String,
    store: Arc<dyn StateStore>,
    cancel: CancellationToken,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    let security = crate::auth::Security::load(&config.security)?;
    warn_if_open(&security, &config.listen_url);
    // Bind first: a port in use must fail before anything is registered or the lock is taken.
    let listen = resolve(&config.listen_url)?;
    let bind = |addr: SocketAddr, text: &str| {
        std::net::TcpListener::bind(addr).map_err(|e| DaemonError::Listen {
            addr: text.to_string(),
            source: e,
        })
    };
    let mut listeners = vec![bind(listen, &config.listen_url)?];
    let control_sock = resolve(&control)?;
    let covered = control_sock.port() == listen.port()
        && (listen.ip().is_unspecified() || listen.ip() == control_sock.ip());
    if !covered {
        listeners.push(bind(control_sock, &control)?);
    }

    // One registry for the whole daemon; every etcd request is counted from here on.
    let metrics = MasterMetrics::new();
    let store: Arc<dyn StateStore> = Arc::new(MeteredStore::new(store, metrics.store.clone()));
    let db = Db::new(store.clone());
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| DaemonError::Server(std::io::Error::other(e)))?;
    let leader_http =
        crate::https::HttpClient::new(security.leader_tls.clone(), Duration::from_secs(30))
            .map_err(|e| DaemonError::Server(std::io::Error::other(e)))?;
    let writes = crate::batch::Writes::spawn(db.clone()).map_err(DaemonError::Server)?;
    let (role, election) = leader::spawn_counted(
        store.clone(),
        ElectionConfig {
            id: control.clone(),
            ttl: config.lock_ttl,
        },
        cancel.clone(),
        metrics.elections.clone(),
    );
    let counting = tokio::spawn(count_services(
        store.clone(),
        metrics.services.clone(),
        cancel.clone(),
    ));
    let (host, port) = control
        .rsplit_once(':')
        .map_or((control.as_str(), 9999), |(h, p)| {
            (h, p.parse().unwrap_or(9999))
        });
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let info = |name: &str, port: u16| ServiceInfo {
        ServiceName: name.into(),
        Role: "follower".into(),
        Version: env!("CARGO_PKG_VERSION").into(),
        TTL: config.service_ttl,
        HostAddr: host.to_string(),
        Port: port,
        Hostname: hostname.clone(),
    };
    let masters = vec![registry::register(
        store.clone(),
        info(registry::NETMASTER, port),
        cancel.clone(),
    )];
    let ofnet = crate::ofnet_master::Slot::default();
    let ofnet_duties = tokio::spawn(ofnet_duties(
        store.clone(),
        crate::ofnet_master::Settings {
            bind: SocketAddr::new(control_sock.ip(), config.ofnet_port),
            service_ttl: config.service_ttl,
            grace: config.ofnet_grace,
            metrics: Some(metrics.ofnet.clone()),
        },
        role.clone(),
        ofnet.clone(),
        cancel.clone(),
    ));
    // Not spawned: the model transactions are not `Send` (async closures), so this runs on the
    // caller's task next to the shutdown future.
    let duties = leader_duties(db.clone(), config.clone(), role.clone(), masters);

    let docker = if config.docker_hosts.is_empty() {
        None
    } else {
        Some(
            crate::docker::DockerNetworks::connect(&config.docker_hosts, &config.plugin_name)
                .map_err(|e| DaemonError::Option {
                    option: "--docker-host",
                    reason: e.to_string(),
                })?,
        )
    };
    let state = Arc::new(AppState {
        docker,
        db,
        role,
        control_addr: control.clone(),
        http,
        writes,
        cluster_mode: config.mode.clone(),
        reasons: Default::default(),
        ofnet,
        tokens: security.tokens.clone(),
        leader_scheme: security.scheme(),
        leader_http,
        bad_requests: Default::default(),
        metrics,
    });
    let app_state = state.clone();
    let mut server = actix_web::HttpServer::new(move || rest::app(app_state.clone()))
        .workers(config.workers.max(1))
        // Longer than any client keeps an idle connection (ours: 30 s, `https::HttpClient`; Go's
        // default, Contiv's netctl: 90 s idle but it retries): the client, not the server,
        // closes an idle connection, so no request is sent on one the server is closing
        // ("connection closed before message completed"; actix's default is 5 s).
        .keep_alive(std::time::Duration::from_secs(120))
        .disable_signals()
        .shutdown_timeout(5);
    for listener in listeners {
        server = match &security.server_tls {
            Some(tls) => server.listen_rustls_0_23(listener, (**tls).clone()),
            None => server.listen(listener),
        }
        .map_err(|e| DaemonError::Listen {
            addr: control.clone(),
            source: e,
        })?;
    }
    let server = server.run();
    let handle = server.handle();
    let serving = tokio::spawn(server);
    tracing::info!(listen = %config.listen_url, control = %control, "netmaster serving");

    let mut shutdown = std::pin::pin!(shutdown);
    let mut duties = std::pin::pin!(duties);
    tokio::select! {
        _ = &mut shutdown => {}
        _ = &mut duties => shutdown.await,
    }
    tracing::info!("netmaster shutting down");
    // Hand leadership over first (the lease is revoked, so a standby takes over at once), then
    // drain the REST server: its graceful stop waits up to 5 s for open connections, which
    // would otherwise hold the lock that long.
    cancel.cancel();
    let _ = election.await;
    handle.stop(true).await;
    let _ = ofnet_duties.await;
    let _ = counting.await;
    match serving.await {
        Ok(Ok(())) | Err(_) => Ok(()),
        Ok(Err(e)) => Err(DaemonError::Server(e)),
    }
}
