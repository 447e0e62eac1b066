//! Generic handlers for the model objects (reference §2.2). The body of POST/PUT is parsed here so a
//! malformed body answers 400 with the JSON error, not actix's default text.

use actix_web::{HttpResponse, web};

use super::AppState;
use crate::endpoint;
use crate::error::Error;
use crate::model::{Object, ops};

/// `GET/POST/PUT/DELETE /api/v1/<objs>/{key}/` and `GET /api/v1/inspect/<objs>/{key}/` for `T`
/// (each with and without the trailing slash).
pub fn routes<T: Object>(cfg: &mut web::ServiceConfig) {
    let base = format!("/api/v1/{}", T::PLURAL);
    cfg.route(&format!("{base}/"), web::get().to(list::<T>));
    cfg.route(&base, web::get().to(list::<T>));
    // One resource per path with its methods: the router matches each path pattern once (a
    // regex per dynamic pattern), not once per method.
    for path in [format!("{base}/{{key}}/"), format!("{base}/{{key}}")] {
        cfg.service(
            web::resource(path)
                .route(web::get().to(get::<T>))
                .route(web::post().to(upsert::<T>))
                .route(web::put().to(upsert::<T>))
                .route(web::delete().to(delete::<T>))
                .default_service(web::to(super::no_such_route)),
        );
    }
    let inspect_base = format!("/api/v1/inspect/{}", T::PLURAL);
    cfg.route(
        &format!("{inspect_base}/{{key}}/"),
        web::get().to(inspect::<T>),
    );
    cfg.route(
        &format!("{inspect_base}/{{key}}"),
        web::get().to(inspect::<T>),
    );
}

async fn list<T: Object>(state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    Ok(HttpResponse::Ok().json(ops::list::<T>(&state.db).await?))
}

async fn get<T: Object>(
    state: web::Data<AppState>,
    key: web::Path<String>,
) -> Result<HttpResponse, Error> {
    Ok(HttpResponse::Ok().json(ops::get::<T>(&state.db, &key).await?))
}

async fn upsert<T: Object>(
    state: web::Data<AppState>,
    key: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, Error> {
    let obj: T = serde_json::from_slice(&body)
        .map_err(|e| Error::invalid("body", format!("not a valid {} object: {e}", T::TYPE)))?;
    let existed = match &state.docker {
        Some(_) => ops::get::<T>(&state.db, &key).await.is_ok(),
        None => true,
    };
    let stored = ops::upsert_batched::<T>(&state.writes, &state.db, &key, obj).await?;
    tracing::info!(kind = T::TYPE, key = %key, "object stored");
    if let Some(docker) = &state.docker
        && let Err(e) = super::docker::stored::<T>(&state.db, docker, &stored).await
    {
        // No half-made object: the Contiv one goes again (an update is left as stored).
        if !existed && let Err(undo) = ops::delete::<T>(&state.db, &key).await {
            tracing::warn!(kind = T::TYPE, key = %key, error = %undo, "undoing the object");
        }
        return Err(e);
    }
    Ok(HttpResponse::Ok().json(stored))
}

async fn delete<T: Object>(
    state: web::Data<AppState>,
    key: web::Path<String>,
) -> Result<HttpResponse, Error> {
    let before = match &state.docker {
        Some(_) => ops::get::<T>(&state.db, &key).await.ok(),
        None => None,
    };
    ops::delete_batched::<T>(&state.writes, &key).await?;
    tracing::info!(kind = T::TYPE, key = %key, "object deleted");
    if let (Some(docker), Some(obj)) = (&state.docker, before) {
        super::docker::deleted::<T>(docker, &obj).await?;
    }
    Ok(HttpResponse::Ok().json(key.into_inner()))
}

async fn inspect<T: Object>(
    state: web::Data<AppState>,
    key: web::Path<String>,
) -> Result<HttpResponse, Error> {
    Ok(HttpResponse::Ok().json(ops::inspect::<T>(&state.db, &key).await?))
}

/// Global inspect: the stored object's oper plus this netmaster's `clusterMode`, as Contiv
/// answers.
pub async fn inspect_global(
    state: web::Data<AppState>,
    key: web::Path<String>,
) -> Result<HttpResponse, Error> {
    let mut reply = ops::inspect::<crate::model::Global>(&state.db, &key).await?;
    if let Some(oper) = reply.get_mut("Oper").and_then(|o| o.as_object_mut()) {
        oper.insert("clusterMode".into(), state.cluster_mode.clone().into());
    }
    Ok(HttpResponse::Ok().json(reply))
}

pub async fn inspect_endpoint(
    state: web::Data<AppState>,
    key: web::Path<String>,
) -> Result<HttpResponse, Error> {
    Ok(HttpResponse::Ok().json(endpoint::inspect_endpoint(&state.db, &key).await?))
}

/// Bgp inspect: the stored object, and as `Oper` what that host's netplugin says of its BGP
/// speaker (`GET /inspect/bgp` on its debug listener, found through the `netplugin.debug`
/// registration): `neighborStatus` (the session state, e.g. `ESTABLISHED` or `ACTIVE` for an
/// unreachable neighbor), `adminStatus`, `numRoutes`, `routes`. A netplugin that cannot be
/// asked gives `neighborStatus` `unknown` and the reason in `error`.
pub async fn inspect_bgp(
    state: web::Data<AppState>,
    key: web::Path<String>,
) -> Result<HttpResponse, Error> {
    let mut reply = ops::inspect::<crate::model::Bgp>(&state.db, &key).await?;
    let oper = bgp_oper(&state, &key).await;
    reply["Oper"] = oper;
    Ok(HttpResponse::Ok().json(reply))
}

async fn bgp_oper(state: &AppState, host: &str) -> serde_json::Value {
    use serde_json::json;
    let unknown = |why: String| json!({ "neighborStatus": "unknown", "adminStatus": "unknown", "numRoutes": 0, "routes": [], "error": why });
    let debug =
        match crate::registry::list(state.db.store(), crate::registry::NETPLUGIN_DEBUG).await {
            Ok(list) => list.into_iter().find(|s| s.Hostname == host),
            Err(e) => return unknown(format!("reading the netplugin registry: {e}")),
        };
    let Some(debug) = debug else {
        return unknown(format!("no netplugin of host {host} is registered"));
    };
    let url = format!("http://{}:{}/inspect/bgp", debug.HostAddr, debug.Port);
    let answer = state
        .http
        .get(&url)
        .timeout(std::time::Duration::from_secs(3))
        .send()
        .await;
    let body: serde_json::Value = match answer {
        Ok(r) if r.status().is_success() => match r.json().await {
            Ok(v) => v,
            Err(e) => return unknown(format!("{url}: {e}")),
        },
        Ok(r) => return unknown(format!("{url}: {}", r.status())),
        Err(e) => return unknown(format!("{url}: {e}")),
    };
    let neighbor = &body["Neighbors"][0];
    let routes = body["Dsts"].as_array().cloned().unwrap_or_default();
    let status = neighbor["state"].as_str().unwrap_or("unknown");
    let mut oper = json!({
        "neighborStatus": status,
        "adminStatus": if neighbor.is_null() { "down" } else { "up" },
        "numRoutes": routes.len(),
        "routes": routes,
    });
    if let Some(e) = neighbor.get("error") {
        oper["error"] = e.clone();
    }
    oper
}
