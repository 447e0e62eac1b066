//! The debug REST of reference §4.3 (default `:9090`): `GET /inspect/driver` (both agents'
//! state), `GET /inspect/endpoints` (this host's endpoints with their OVS ports), `GET
//! /svcstats` (service load-balancer counters by service VIP and provider, both bridges merged),
//! `GET /inspect/bgp` (routing mode: the BGP neighbors with their session state, learned and
//! announced prefixes; 404 in bridge mode, `"Neighbors"` says why a speaker is down),
//! `GET /inspect/flows/{vxlan|vlan}` (the agent's desired tables as data for `netctl trace`, the
//! switch's actual ones, and what differs: see `ofnet::trace`) and
//! `DELETE /debug/reclaimEndpoint/{id}`, and `GET /metrics` (Prometheus, see [`crate::metrics`]).
//!
//! Reads are open to whoever reaches the listener (it binds the control address by default);
//! every other method needs an `admin` bearer token from `--debug-token-file`, and without that
//! flag it is refused: nobody who merely reaches the port can delete endpoints.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::driver::Driver;
use crate::error::PluginError;
use crate::http::{Handler, Request, Response};

pub const RECLAIM_PREFIX: &str = "/debug/reclaimEndpoint/";
pub const FLOWS_PREFIX: &str = "/inspect/flows/";

/// `GET /inspect/flows/{bridge}`: `{"desired": .., "actual": .. | null, "differences": [..]}`.
async fn flows(driver: &Driver, bridge: &str) -> Response {
    let kind = match bridge {
        "vxlan" => ofnet::BridgeKind::Vxlan,
        "vlan" => ofnet::BridgeKind::Vlan,
        "host" if driver.cfg.fwd_mode() == ofnet::FwdMode::Bridge => ofnet::BridgeKind::Host,
        other => {
            return Response::json(
                404,
                &json!({ "error": format!("no bridge {other:?}: use vxlan, vlan or (bridge mode) host") }),
            );
        }
    };
    let agent = driver.agent(kind);
    let desired = match agent.trace_tables().await {
        Ok(t) => t,
        Err(e) => return Response::json(500, &json!({ "error": e.to_string() })),
    };
    let actual = match agent.actual_tables().await {
        Ok(t) => t,
        Err(e) => return Response::json(500, &json!({ "error": e.to_string() })),
    };
    let differences = actual
        .as_ref()
        .map(|a| ofnet::trace::diff(&desired, a))
        .unwrap_or_default();
    Response::json(
        200,
        &json!({
            "desired": desired.to_json(),
            "actual": actual.map(|a| a.to_json()),
            "differences": differences,
        }),
    )
}

pub fn handler(driver: Arc<Driver>, tokens: Option<Arc<master::auth::Tokens>>) -> Handler {
    Rc::new(move |req: Request| {
        let driver = driver.clone();
        let tokens = tokens.clone();
        Box::pin(async move {
            if let Err(refused) = authorize(tokens.as_deref(), &req) {
                return refused;
            }
            handle(&driver, req).await
        })
    })
}

/// Reads pass; anything else needs an admin token of `--debug-token-file`.
pub fn authorize(tokens: Option<&master::auth::Tokens>, req: &Request) -> Result<(), Response> {
    if matches!(req.method.as_str(), "GET" | "HEAD") {
        return Ok(());
    }
    let Some(tokens) = tokens else {
        return Err(Response::json(
            403,
            &json!({ "error": format!(
                "{} {} is a destructive debug route and is off: start netplugin with \
                 --debug-token-file and send \"Authorization: Bearer <admin token>\"",
                req.method, req.path
            ) }),
        ));
    };
    match master::auth::authorize(tokens, &req.method, &req.path, req.authorization.as_deref()) {
        Ok(master::auth::Role::Admin) => Ok(()),
        Ok(role) => Err(Response::json(
            403,
            &json!({ "error": format!(
                "forbidden: the token's role is {}; {} {} needs an admin token of --debug-token-file",
                role.name(), req.method, req.path
            ) }),
        )),
        Err(refusal) => Err(Response::json(
            refusal.status,
            &json!({ "error": format!(
                "unauthorized: {} {} needs \"Authorization: Bearer <token>\" with an admin token \
                 of netplugin's --debug-token-file ({})",
                req.method,
                req.path,
                if req.authorization.is_some() { "the one sent is not one of them" } else { "none was sent" }
            ) }),
        )),
    }
}

async fn handle(driver: &Driver, req: Request) -> Response {
    let path = req.path.split('?').next().unwrap_or_default();
    match (req.method.as_str(), path) {
        ("GET", "/inspect/driver") => match driver.inspect().await {
            Ok(v) => Response::json(200, &v),
            Err(e) => Response::json(500, &json!({ "error": e.to_string() })),
        },
        ("GET", "/inspect/bgp") => match driver.inspect_bgp().await {
            Ok(v) => Response::json(200, &v),
            Err(e @ PluginError::Invalid { .. }) => {
                Response::json(404, &json!({ "error": e.to_string() }))
            }
            Err(e) => Response::json(503, &json!({ "error": e.to_string() })),
        },
        ("GET", "/inspect/endpoints") => {
            let eps: BTreeMap<String, Value> = driver
                .local_endpoints()
                .into_iter()
                .map(|l| {
                    (
                        l.oper.id.clone(),
                        json!({ "oper": l.oper, "ofport": l.ofport, "bridge": l.kind.name() }),
                    )
                })
                .collect();
            Response::json(200, &eps)
        }
        ("GET", "/metrics") => Response {
            status: 200,
            body: driver.metrics.render(driver).await.into_bytes(),
            content_type: master::metrics::CONTENT_TYPE,
        },
        ("GET", "/svcstats") => match driver.service_stats().await {
            Ok(stats) => Response::json(200, &stats),
            Err(e) => Response::json(500, &json!({ "error": e.to_string() })),
        },
        ("GET", p) if p.starts_with(FLOWS_PREFIX) => flows(driver, &p[FLOWS_PREFIX.len()..]).await,
        ("DELETE", p) if p.starts_with(RECLAIM_PREFIX) => {
            let id = &p[RECLAIM_PREFIX.len()..];
            if id.is_empty() {
                return Response::json(400, &json!({ "error": "endpoint id missing" }));
            }
            match driver.reclaim(id).await {
                Ok(true) => Response::json(200, &json!({ "reclaimed": id })),
                Ok(false) => {
                    Response::json(404, &json!({ "error": format!("no local endpoint {id}") }))
                }
                Err(e) => Response::json(500, &json!({ "error": e.to_string() })),
            }
        }
        (_, p) => Response::json(
            404,
            &json!({ "error": format!("no route {} {p}", req.method) }),
        ),
    }
}
