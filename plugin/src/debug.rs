//! The debug REST of reference §4.3 (default `:9090`): `GET /inspect/driver` (both agents'
//! state), `GET /inspect/endpoints` (this host's endpoints with their OVS ports), `GET
//! /svcstats` (service load-balancer counters by service VIP and provider, both bridges merged) and
//! `DELETE /debug/reclaimEndpoint/{id}`, and `GET /metrics` (Prometheus, see [`crate::metrics`]).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::driver::Driver;
use crate::http::{Handler, Request, Response};

pub const RECLAIM_PREFIX: &str = "/debug/reclaimEndpoint/";

pub fn handler(driver: Arc<Driver>) -> Handler {
    Rc::new(move |req: Request| {
        let driver = driver.clone();
        Box::pin(async move { handle(&driver, req).await })
    })
}

async fn handle(driver: &Driver, req: Request) -> Response {
    let path = req.path.split('?').next().unwrap_or_default();
    match (req.method.as_str(), path) {
        ("GET", "/inspect/driver") => match driver.inspect().await {
            Ok(v) => Response::json(200, &v),
            Err(e) => Response::json(500, &json!({ "error": e.to_string() })),
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
