//! netplugin's start-up (reference §4.1) and run loop.
//!
//! Order, and why:
//! 1. etcd; wait for netmaster's global config (`/contiv.io/master/config/global`).
//! 2. OVSDB; both bridges (`fail_mode=secure`, controller target = our listener), both
//!    agents (not yet reachable by their switches), VLAN uplinks.
//! 3. Replay: networks, endpoint groups, global config, then this host's endpoints from
//!    their oper state (re-adopted, not re-created); in kubernetes mode with an API server,
//!    the first lists of Services and EndpointSlices, and the NetworkPolicies of this host's
//!    pods resolved from the first lists of NetworkPolicies, Pods and Namespaces (at most
//!    5 s).
//! 4. Only now the OpenFlow listeners: the switch's first reconcile then sees the complete
//!    flow set, so a restart replaces flows in place (ofctrl generations) and pods keep
//!    their traffic. With `fail_mode=secure` OVS keeps its flows while we are away.
//! 5. The CNI socket, the debug REST, the service registrations (`netplugin`,
//!    `netplugin.vtep`, `netplugin.debug`), the etcd watches, the VXLAN agent's ofnet RPC server and its
//!    registration with the leader's ofnet master, found and followed through `netmaster.rpc`
//!    ([`crate::ofnet_rpc`]), and in kubernetes mode with an API server the Kubernetes
//!    Service/EndpointSlice watches ([`crate::kubesvc`]) and the NetworkPolicy controller
//!    ([`crate::kubenetpol`]).
//!
//! [`run`] returns when `shutdown` resolves; ports, veths and flows stay (a restart adopts
//! them).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use master::registry::{self, ServiceInfo};
use master::state::GlobConfig;
use master::store::{EtcdStore, StateStore};
use ofctrl::Listener;
use ofnet::BridgeKind;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, OfListen};
use crate::driver::Driver;
use crate::error::{PluginError, Result};
use crate::kubeapi::{self, KubeClient, KubeConfig};
use crate::metrics::PluginMetrics;
use crate::ovsdb::OvsdbClient;
use crate::watch::{self, Topic};
use crate::{cniserver, debug, docker, http, kubenetpol, kubesvc, ofnet_rpc};

/// How often to look for the global config while netmaster has not written it.
const GLOBAL_POLL: Duration = Duration::from_millis(500);

/// Read the global config, waiting for netmaster to write it.
async fn wait_global(store: &dyn StateStore) -> Result<GlobConfig> {
    let key = GlobConfig::key();
    let mut logged = false;
    loop {
        match store.get(&key).await {
            Ok(Some(kv)) => {
                return serde_json::from_slice(&kv.value).map_err(|e| PluginError::Corrupt {
                    kind: GlobConfig::KIND,
                    key: key.clone(),
                    reason: e.to_string(),
                });
            }
            Ok(None) if !logged => {
                tracing::info!(%key, "waiting for netmaster to write the global config");
                logged = true;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "reading the global config"),
        }
        tokio::time::sleep(GLOBAL_POLL).await;
    }
}

async fn listen(driver: &Driver, kind: BridgeKind, at: &OfListen) -> Result<Listener> {
    let agent = driver.agent(kind);
    let result = match at {
        OfListen::Tcp(addr) => agent.listen_tcp(*addr).await,
        OfListen::Unix(path) => agent.listen_unix(path).await,
    };
    result.map_err(|e| PluginError::Invalid {
        field: "OpenFlow listen address",
        problem: format!("{at:?}: {e}"),
    })
}

/// How long start-up waits for the first Kubernetes lists before going on without them.
const KUBE_PRIME_LIMIT: Duration = Duration::from_secs(5);

/// The ofnet agent RPC port of the reference (the VXLAN bridge's agent), registered as this
/// netplugin's service port.
pub const AGENT_RPC_PORT: u16 = 9002;
/// Service registrations live on leases of this many seconds.
const SERVICE_TTL: i64 = 10;

/// Register `netplugin` (the agent's RPC address and port) and `netplugin.vtep` (VTEP address
/// and VXLAN port) in etcd (reference §1.3), and `netplugin.debug` (the debug listener, for
/// `netctl trace`), kept alive until `cancel`. The ofnet master serves RPC connections from
/// these hosts only.
fn register_services(
    driver: &Driver,
    rpc_port: u16,
    debug: std::net::SocketAddr,
    cancel: &CancellationToken,
) {
    let cfg = &driver.cfg;
    for (name, addr, port) in [
        (registry::NETPLUGIN, ofnet_rpc::advertised_ip(cfg), rpc_port),
        (
            registry::NETPLUGIN_VTEP,
            std::net::IpAddr::V4(cfg.vtep_ip),
            cfg.vxlan_port,
        ),
        (registry::NETPLUGIN_DEBUG, debug.ip(), debug.port()),
    ] {
        let info = ServiceInfo {
            ServiceName: name.into(),
            Role: String::new(),
            Version: env!("CARGO_PKG_VERSION").into(),
            TTL: SERVICE_TTL,
            HostAddr: addr.to_string(),
            Port: port,
            Hostname: cfg.host.clone(),
        };
        registry::register(driver.store.clone(), info, cancel.child_token());
    }
}

/// The Kubernetes API client in kubernetes mode when `--kube-config` names an API server.
fn kube_client(cfg: &Config) -> Result<Option<Arc<KubeClient>>> {
    if cfg.mode != "kubernetes" {
        return Ok(None);
    }
    let subnet = kubeapi::service_subnet(&cfg.kube_config)?;
    tracing::info!(%subnet, "pods get an on-link route to the service subnet");
    match KubeConfig::load(&cfg.kube_config)? {
        Some(kc) => {
            let client = KubeClient::new(&kc)?;
            tracing::info!(api_server = %client.server(), "pod labels from the Kubernetes API");
            Ok(Some(Arc::new(client)))
        }
        None => {
            tracing::info!(
                config = %cfg.kube_config.display(),
                "no Kubernetes API configured; pod labels from the CNI config"
            );
            Ok(None)
        }
    }
}

/// Start netplugin and serve until `shutdown` resolves. Must run on an actix system.
pub async fn run(cfg: Config, shutdown: impl Future<Output = ()>) -> Result<()> {
    // Runs as long as the daemon: the replay and every rebuild of flows free large bursts.
    actix_rt::spawn(crate::heap::keep_trimmed(crate::heap::PERIOD));
    // First: a broken Kubernetes config must stop us before anything is created.
    let kube = kube_client(&cfg)?;
    let etcd = master::store::EtcdConfig {
        endpoints: cfg.etcd_endpoints.clone(),
        ca: cfg.etcd_ca.clone(),
        cert: cfg.etcd_cert.clone(),
        key: cfg.etcd_key.clone(),
    };
    // One registry for the whole daemon; every etcd request is counted from here on.
    let metrics = PluginMetrics::new();
    let store = metrics.metered(Arc::new(EtcdStore::connect_with(&etcd).await?));
    let global = wait_global(store.as_ref()).await?;
    tracing::info!(fwd_mode = %global.fwd_mode, arp_mode = %global.arp_mode, "global config");
    // The datapaths follow --fwdmode; a cluster forwarding the other way would get pods that
    // cannot reach each other (the reference refuses to start too).
    if !global.fwd_mode.is_empty() && global.fwd_mode != cfg.fwdmode {
        return Err(PluginError::Invalid {
            field: "fwdmode",
            problem: format!(
                "netplugin runs --fwdmode {} but the cluster's forwarding mode (global fwd-mode) is {}; start netplugin with --fwdmode {}",
                cfg.fwdmode, global.fwd_mode, global.fwd_mode
            ),
        });
    }
    let ovsdb = OvsdbClient::connect(&cfg.ovsdb_socket).await?;
    let driver = Driver::start(cfg.clone(), ovsdb, store, &global, metrics).await?;

    let mut revisions = Vec::new();
    for topic in Topic::ALL {
        revisions.push((topic, watch::replay(&driver, topic).await?));
    }
    let (kept, removed) = driver.reconcile().await?;
    tracing::info!(kept, removed, "local endpoints re-adopted");
    let stale_vteps = driver.sweep_vteps().await?;
    if !stale_vteps.is_empty() {
        tracing::info!(ports = ?stale_vteps, "deleted VTEP ports no endpoint needs");
    }
    // Kubernetes services and network policies too, before the switches connect (their
    // flows survive a restart).
    let (kube_watcher, policies) = match &kube {
        Some(client) => {
            let mut watcher = kubesvc::Watcher::new(
                client,
                driver.clone(),
                &cfg.host,
                kubesvc::WatchOptions::default(),
            );
            let policies =
                kubenetpol::start(client, driver.clone(), kubesvc::WatchOptions::default());
            let prime_policies = async {
                if let Err(e) = policies
                    .local_pods(kubenetpol::local_pods(&driver), None)
                    .await
                {
                    tracing::warn!(error = %e, "network policies of the re-adopted pods");
                }
                if !policies.wait_synced(KUBE_PRIME_LIMIT).await {
                    tracing::info!(
                        "network policies not listed yet; following them in the background"
                    );
                }
            };
            futures::join!(watcher.prime(KUBE_PRIME_LIMIT), prime_policies);
            (Some(watcher), Some(policies))
        }
        None => (None, None),
    };

    let _vxlan = listen(&driver, BridgeKind::Vxlan, &cfg.vxlan_of_listen).await?;
    let _vlan = listen(&driver, BridgeKind::Vlan, &cfg.vlan_of_listen).await?;
    // The host bridge exists in bridge mode only (routing mode reaches the host through the
    // routers' host NAT port).
    let _host = match cfg.fwd_mode() {
        ofnet::FwdMode::Bridge => {
            Some(listen(&driver, BridgeKind::Host, &cfg.host_of_listen).await?)
        }
        ofnet::FwdMode::Routing => None,
    };

    let cni = http::bind_unix(&cfg.cni_socket).map_err(|e| PluginError::Invalid {
        field: "cni-socket",
        problem: format!("{}: {e}", cfg.cni_socket.display()),
    })?;
    let kube_services = kube_watcher.map(|w| actix_rt::spawn(w.run()));
    let cni_task = actix_rt::spawn(http::serve_unix(
        cni,
        cniserver::handler(
            driver.clone(),
            cniserver::Kube {
                client: kube,
                policies,
            },
        ),
    ));
    // Docker mode: the remote network and IPAM driver, on the same endpoint code as CNI.
    let docker_task = if cfg.mode == "docker" {
        let socket =
            http::bind_unix(&cfg.docker_plugin_socket).map_err(|e| PluginError::Invalid {
                field: "docker-plugin-socket",
                problem: format!("{}: {e}", cfg.docker_plugin_socket.display()),
            })?;
        Some([
            actix_rt::spawn(http::serve_unix(socket, docker::handler(driver.clone()))),
            actix_rt::spawn(docker::events::follow(
                driver.clone(),
                cfg.docker_host.clone(),
            )),
        ])
    } else {
        None
    };
    let dns_task = driver
        .take_dns_queries()
        .map(|punted| actix_rt::spawn(crate::dns::serve(driver.clone(), punted)));
    let debug = tokio::net::TcpListener::bind(cfg.debug_listen)
        .await
        .map_err(|e| PluginError::Invalid {
            field: "debug-listen",
            problem: format!("{}: {e}", cfg.debug_listen),
        })?;
    let debug_at = debug.local_addr().map_err(|e| PluginError::Invalid {
        field: "debug-listen",
        problem: format!("{}: {e}", cfg.debug_listen),
    })?;
    let debug_task = actix_rt::spawn(http::serve_tcp(
        debug,
        debug::handler(driver.clone(), cfg.debug_tokens.clone()),
    ));
    let _rpc = ofnet_rpc::serve(&driver).await?;
    let registered = CancellationToken::new();
    register_services(&driver, _rpc.local_addr().port(), debug_at, &registered);
    let mut watches: Vec<_> = revisions
        .into_iter()
        .filter(|(topic, _)| Topic::FOLLOWED.contains(topic))
        .map(|(topic, rev)| actix_rt::spawn(watch::follow(driver.clone(), topic, rev)))
        .collect();
    watches.push(actix_rt::spawn(ofnet_rpc::follow_masters(driver.clone())));
    tracing::info!(
        host = %cfg.host,
        cni = %cfg.cni_socket.display(),
        debug = %cfg.debug_listen,
        "netplugin ready"
    );

    shutdown.await;
    tracing::info!("shutting down; ports, veths and flows stay for the next start");
    // Unregister: others stop sending us tunnels and requests; masters stop relaying to us.
    registered.cancel();
    for w in &watches {
        w.abort();
    }
    driver.agent(BridgeKind::Vxlan).unregister().await;
    cni_task.abort();
    debug_task.abort();
    if let Some(task) = dns_task {
        task.abort();
    }
    if let Some(tasks) = docker_task {
        for task in tasks {
            task.abort();
        }
        let _ = std::fs::remove_file(&cfg.docker_plugin_socket);
    }
    for w in watches {
        w.abort();
    }
    if let Some(task) = kube_services {
        task.abort();
    }
    let _ = std::fs::remove_file(&cfg.cni_socket);
    Ok(())
}
