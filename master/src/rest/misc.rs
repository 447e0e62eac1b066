//! `/version`, `/info`, `/services`, `/service/{id}` and `/debug/epcleanup/...` (reference §2.4),
//! and `/metrics` (Prometheus).

use std::time::Duration;

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::AppState;
use crate::endpoint;
use crate::error::Error;
use crate::registry;
use crate::state::CfgServiceLbState;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/version", web::get().to(version));
    cfg.route("/info", web::get().to(info));
    cfg.route("/services", web::get().to(services));
    cfg.route("/service/{id}", web::get().to(service));
    cfg.route(
        "/debug/epcleanup/tenant/{tenant}/{category}/{id}",
        web::delete().to(epcleanup),
    );
    cfg.route("/debug/ofnet", web::get().to(debug_ofnet));
    cfg.route("/debug/netplugins", web::get().to(debug_netplugins));
    cfg.route("/metrics", web::get().to(metrics));
}

/// Prometheus metrics of this netmaster (leader or follower: never proxied).
async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    state
        .metrics
        .leader
        .set(i64::from(state.role.current().is_leader));
    HttpResponse::Ok()
        .content_type(crate::metrics::CONTENT_TYPE)
        .body(state.metrics.render())
}

/// The ofnet master's state: `{MyAddr, MyPort, AgentDb, EndpointDb, PolicyDb, AgentStats}`
/// (reference §2.4; `AgentStats` says when each agent was last heard and how far behind it is).
async fn debug_ofnet(state: web::Data<AppState>) -> HttpResponse {
    let Some(master) = state.ofnet.get() else {
        return HttpResponse::ServiceUnavailable().body("the ofnet master is starting");
    };
    match master.inspect().await {
        Ok(export) => HttpResponse::Ok().json(export),
        Err(e) => HttpResponse::ServiceUnavailable().body(e.to_string()),
    }
}

/// The netplugin hosts registered now: `[{"host", "debugUrl", "rpc", "vtep"}]`, one per host
/// name (from the `netplugin.debug`, `netplugin` and `netplugin.vtep` registrations), so tools
/// such as `netctl trace` find every host's debug listener through netmaster.
async fn debug_netplugins(state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    let mut hosts: std::collections::BTreeMap<String, serde_json::Value> = Default::default();
    for (name, field) in [
        (registry::NETPLUGIN_DEBUG, "debugUrl"),
        (registry::NETPLUGIN, "rpc"),
        (registry::NETPLUGIN_VTEP, "vtep"),
    ] {
        for info in registry::list(state.db.store(), name).await? {
            let value = match field {
                "debugUrl" => format!("http://{}", host_port(&info.HostAddr, info.Port)),
                "rpc" => host_port(&info.HostAddr, info.Port),
                _ => info.HostAddr.clone(),
            };
            let entry = hosts
                .entry(info.Hostname.clone())
                .or_insert_with(|| json!({ "host": info.Hostname }));
            entry[field] = json!(value);
        }
    }
    Ok(HttpResponse::Ok().json(hosts.into_values().collect::<Vec<_>>()))
}

/// `addr:port`, bracketing an IPv6 address.
fn host_port(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

/// Version information reported by `/version` and `netctl version`.
pub fn version_json() -> serde_json::Value {
    json!({
        "GitCommit": option_env!("GIT_COMMIT").unwrap_or("unknown"),
        "Version": env!("CARGO_PKG_VERSION"),
        "BuildTime": option_env!("BUILD_TIME").unwrap_or("unknown"),
    })
}

async fn version() -> HttpResponse {
    HttpResponse::Ok().json(version_json())
}

async fn info(state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    let view = state.role.current();
    let hosts = |list: Vec<registry::ServiceInfo>| -> Vec<String> {
        let mut v: Vec<String> = list.into_iter().map(|s| s.HostAddr).collect();
        v.sort();
        v.dedup();
        v
    };
    // /info must answer even while etcd is down (it is how an operator asks what is going on), so
    // an unreadable registry shows as empty node lists rather than an error.
    let plugins = registry::list(state.db.store(), registry::NETPLUGIN)
        .await
        .unwrap_or_default();
    let masters = registry::list(state.db.store(), registry::NETMASTER)
        .await
        .unwrap_or_default();
    Ok(HttpResponse::Ok().json(json!({
        "local-ip": state.control_addr,
        "leader-ip": view.leader.unwrap_or_default(),
        "current-state": if view.is_leader { "leader" } else { "follower" },
        "netplugin-nodes": hosts(plugins),
        "netmaster-nodes": hosts(masters),
    })))
}

async fn all_services(state: &AppState) -> Result<Vec<CfgServiceLbState>, Error> {
    let prefix = crate::model::service_lb::services_prefix();
    state
        .db
        .read(async |tx| {
            let mut all = tx
                .list::<CfgServiceLbState>(&prefix, CfgServiceLbState::KIND)
                .await?;
            crate::model::service_lb::load_providers(tx, &mut all).await?;
            Ok::<_, Error>(all)
        })
        .await
}

async fn services(state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    Ok(HttpResponse::Ok().json(all_services(&state).await?))
}

async fn service(state: web::Data<AppState>, id: web::Path<String>) -> Result<HttpResponse, Error> {
    let found: Vec<CfgServiceLbState> = all_services(&state)
        .await?
        .into_iter()
        .filter(|s| s.id == *id)
        .collect();
    if found.is_empty() {
        return Err(Error::not_found(format!("service {id} not found")));
    }
    Ok(HttpResponse::Ok().json(found))
}

async fn epcleanup(
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, Error> {
    let (tenant, category, id) = path.into_inner();
    let deleted = endpoint::cleanup(&state.db, &tenant, &category, &id).await?;
    // Ask each owning host to reclaim its side; best effort, the config state is already gone.
    for ep in &deleted {
        let host = if ep.vtep_ip.is_empty() {
            &ep.homing_host
        } else {
            &ep.vtep_ip
        };
        if host.is_empty() {
            continue;
        }
        let url = format!("http://{host}:9090/debug/reclaimEndpoint/{}", ep.id);
        if let Err(e) = state
            .http
            .delete(&url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
        {
            tracing::warn!(%url, error = %e, "netplugin did not confirm endpoint reclaim");
        }
    }
    Ok(HttpResponse::Ok().body(format!(
        "deleted {} endpoints of {category} {id} in tenant {tenant}\n",
        deleted.len()
    )))
}
