//! `/plugin/*` routes for netplugin (reference §2.4). Bodies must be `application/json`.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::de::DeserializeOwned;

use super::AppState;
use crate::endpoint;
use crate::error::Error;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/plugin/allocAddress", web::post().to(alloc_address));
    cfg.route("/plugin/releaseAddress", web::post().to(release_address));
    cfg.route("/plugin/createEndpoint", web::post().to(create_endpoint));
    cfg.route("/plugin/deleteEndpoint", web::post().to(delete_endpoint));
    cfg.route("/plugin/updateEndpoint", web::post().to(update_endpoint));
}

fn parse<T: DeserializeOwned>(req: &HttpRequest, body: &[u8]) -> Result<T, Error> {
    let ct = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct.starts_with("application/json") {
        return Err(Error::invalid(
            "Content-Type",
            format!("{ct:?} must be application/json"),
        ));
    }
    serde_json::from_slice(body).map_err(|e| Error::invalid("body", e.to_string()))
}

async fn alloc_address(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, Error> {
    let r = parse(&req, &body)?;
    Ok(HttpResponse::Ok().json(endpoint::alloc_address(&state.db, &r).await?))
}

async fn release_address(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, Error> {
    let r = parse(&req, &body)?;
    endpoint::release_address(&state.db, &r).await?;
    Ok(HttpResponse::Ok().json("success"))
}

async fn create_endpoint(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, Error> {
    let r = parse(&req, &body)?;
    Ok(HttpResponse::Ok().json(endpoint::batch::create(&state.writes, &r).await?))
}

async fn delete_endpoint(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, Error> {
    let r = parse(&req, &body)?;
    Ok(HttpResponse::Ok().json(endpoint::batch::delete(&state.writes, &r).await?))
}

async fn update_endpoint(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, Error> {
    let r = parse(&req, &body)?;
    Ok(HttpResponse::Ok().json(endpoint::update_endpoint(&state.db, &r).await?))
}
