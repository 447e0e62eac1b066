//! netplugin's side of the ofnet control plane (reference §5.1): the VXLAN agent serves
//! `OfnetAgent.*` and `PolicyAgent.*` on `--ofnet-rpc-listen` and registers with the ofnet
//! master of the leading netmaster, found through the `netmaster.rpc` service registry.
//!
//! Contract:
//! - Every `netmaster.rpc` instance that appears gets this agent's registration
//!   (`OfnetMaster.RegisterNode`, then every local endpoint), retried every second until it
//!   answers; one that disappears (its netmaster stopped leading, or died) is forgotten. So a
//!   leader change re-registers with the new master; endpoints it relays that this host
//!   already has change nothing.
//! - Only hosts registered as `netmaster.rpc` may connect to the agent's port; others are
//!   closed unread and logged (rate-limited).
//! - `OfnetAgent.EndpointAdd`/`EndpointDel` go through the driver (the VTEP port towards the
//!   endpoint's host is created with its first endpoint and removed with its last,
//!   [`crate::driver::remote`]); `PolicyAgent.AddRule`/`DelRule` are acknowledged but not
//!   installed: rules come from the store's watch, gated on their attachment (see
//!   `PluginRpc::add_rule`); the other methods are the agent's own.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::LocalBoxFuture;
use master::registry::{self, ServiceEvent};
use ofnet::agent::AgentService;
use ofnet::rpc::{self, RpcServer, Service};
use ofnet::{BridgeKind, Endpoint, Node, PolicyRule};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::driver::Driver;
use crate::error::{PluginError, Result};

/// The address masters call this host's agent back on (where it listens: never unspecified).
pub fn advertised_ip(cfg: &Config) -> IpAddr {
    cfg.ofnet_rpc_listen.ip()
}

/// The VXLAN agent's RPC methods, remote endpoints and rules routed through the driver.
#[derive(Clone)]
struct PluginRpc(Arc<Driver>);

impl PluginRpc {
    /// `PolicyAgent.AddRule` from the master: acknowledged, not installed. This netplugin takes
    /// compiled rules from its own watch of the store, where a rule is installed only while its
    /// attachment exists (netmaster writes an attachment's rules before it and deletes them
    /// after it), so a switch never holds half a policy; the master relays rules without that
    /// gate (as Contiv's did, for Contiv's agents), and installing both would undo it.
    async fn add_rule(&self, rule: PolicyRule) -> std::result::Result<(), String> {
        tracing::trace!(rule = %rule.rule_id, "rule relayed by the ofnet master; the store's gated copy is used");
        Ok(())
    }

    /// `PolicyAgent.DelRule` from the master: acknowledged (see [`PluginRpc::add_rule`]).
    async fn del_rule(&self, rule: PolicyRule) -> std::result::Result<(), String> {
        tracing::trace!(rule = %rule.rule_id, "rule withdrawal relayed by the ofnet master; the store's gated copy is used");
        Ok(())
    }
}

impl Service for PluginRpc {
    fn call(
        &self,
        method: String,
        params: Value,
    ) -> LocalBoxFuture<'static, std::result::Result<Value, String>> {
        let this = self.clone();
        Box::pin(async move {
            let m = method.as_str();
            match m {
                "OfnetAgent.EndpointAdd" => {
                    let ep: Endpoint = rpc::params(m, params)?;
                    this.0
                        .add_remote_endpoint(ep)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                "OfnetAgent.EndpointDel" => {
                    let ep: Endpoint = rpc::params(m, params)?;
                    this.0
                        .remove_remote(&ep.endpoint_id)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                "PolicyAgent.AddRule" => this.add_rule(rpc::params(m, params)?).await?,
                "PolicyAgent.DelRule" => this.del_rule(rpc::params(m, params)?).await?,
                _ => {
                    let agent = AgentService(this.0.agent(BridgeKind::Vxlan).clone());
                    return agent.call(method, params).await;
                }
            }
            Ok(Value::Bool(true))
        })
    }
}

/// How often a refused address is logged again.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(60);

/// Only ofnet masters (hosts registered as `netmaster.rpc`) may call this agent: a connection
/// from any other address is closed unread and logged, once a minute per address. The
/// registry is read when a connection opens (masters connect once per term), and the masters
/// seen are remembered, so a master known from before still gets in while etcd is away.
fn masters_only(driver: Arc<Driver>) -> rpc::Gate {
    let seen: Rc<RefCell<BTreeSet<IpAddr>>> = Rc::default();
    let refused: Rc<RefCell<BTreeMap<IpAddr, Instant>>> = Rc::default();
    Rc::new(move |peer: SocketAddr| {
        let (driver, seen, refused) = (driver.clone(), seen.clone(), refused.clone());
        Box::pin(async move {
            let ip = match peer.ip() {
                IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
                v4 => v4,
            };
            match registry::list(&*driver.store, registry::NETMASTER_RPC).await {
                Ok(masters) => {
                    let mut seen = seen.borrow_mut();
                    seen.extend(
                        masters
                            .iter()
                            .filter_map(|m| m.HostAddr.parse::<IpAddr>().ok()),
                    );
                }
                Err(e) => {
                    tracing::debug!(error = %e, "cannot list ofnet masters; using those seen before")
                }
            }
            if seen.borrow().contains(&ip) {
                return true;
            }
            let now = Instant::now();
            let mut refused = refused.borrow_mut();
            if refused.len() > 1024 {
                refused.retain(|_, at| now.duration_since(*at) < REFUSAL_LOG_EVERY);
            }
            if refused
                .get(&ip)
                .is_none_or(|at| now.duration_since(*at) >= REFUSAL_LOG_EVERY)
            {
                refused.insert(ip, now);
                tracing::warn!(%peer, "ofnet agent RPC connection refused: not a registered ofnet master (netmaster.rpc)");
            }
            false
        }) as LocalBoxFuture<'static, bool>
    })
}

/// Serve the VXLAN agent's RPC on `--ofnet-rpc-listen`, to the ofnet masters only.
pub async fn serve(driver: &Arc<Driver>) -> Result<RpcServer> {
    let at = driver.cfg.ofnet_rpc_listen;
    let invalid = |e: std::io::Error| PluginError::Invalid {
        field: "ofnet-rpc-listen",
        problem: format!("{at}: {e}"),
    };
    let listener = tokio::net::TcpListener::bind(at).await.map_err(invalid)?;
    let server = rpc::serve_gated(
        listener,
        PluginRpc(driver.clone()),
        Some(masters_only(driver.clone())),
    )
    .map_err(invalid)?;
    driver
        .agent(BridgeKind::Vxlan)
        .set_rpc_port(server.local_addr().port());
    Ok(server)
}

/// Register with every `netmaster.rpc` instance while it is registered (run as a task).
pub async fn follow_masters(driver: Arc<Driver>) {
    let mut known: BTreeMap<String, CancellationToken> = BTreeMap::new();
    loop {
        match registry::watch(driver.store.clone(), registry::NETMASTER_RPC).await {
            Ok(mut events) => {
                while let Some(event) = events.next().await {
                    match event {
                        Ok(ServiceEvent::Added(info)) => {
                            let node = Node {
                                host_addr: info.HostAddr.clone(),
                                host_port: info.Port,
                            };
                            let stop = CancellationToken::new();
                            if let Some(old) = known.insert(info.key(), stop.clone()) {
                                old.cancel();
                            }
                            actix_rt::spawn(register(driver.clone(), node, stop));
                        }
                        Ok(ServiceEvent::Removed { key }) => {
                            if let Some(stop) = known.remove(&key) {
                                stop.cancel();
                            }
                            if let Some(addr) = key.rsplit('/').next() {
                                tracing::info!(master = %addr, "ofnet master gone");
                                let _ = driver
                                    .agent(BridgeKind::Vxlan)
                                    .remove_master(addr.to_string())
                                    .await;
                            }
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "netmaster.rpc watch broke");
                            break;
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot watch netmaster.rpc"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Register with `master`, retrying every second until it works or `stop`.
async fn register(driver: Arc<Driver>, master: Node, stop: CancellationToken) {
    loop {
        let attempt = driver.agent(BridgeKind::Vxlan).add_master(master.clone());
        tokio::select! {
            _ = stop.cancelled() => return,
            outcome = attempt => match outcome {
                Ok(()) => {
                    tracing::info!(master = %master.key(), "registered with the ofnet master");
                    return;
                }
                Err(e) => tracing::warn!(master = %master.key(), error = %e, "cannot register with the ofnet master; retrying"),
            },
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
