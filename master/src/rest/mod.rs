//! The HTTP API (actix-web): contiv-compatible routes, error mapping, and the follower proxy.
//!
//! * [`objects`]: `/api/v1/<objs>/` list/get/create-or-update/delete and `/api/v1/inspect/...`.
//! * [`plugin`]: `/plugin/*` for netplugin.
//! * [`misc`]: `/version`, `/info`, `/services`, `/service/{id}`, `/debug/epcleanup/...`.
//! * [`proxy`]: a follower forwards every request except `/version` and `/info` to the leader.
//!
//! Errors are answered with the status of [`Error::http_status`], the message as a plain-text body,
//! and the message again as the status line's reason phrase ([`reason`]): Contiv's Go client
//! prints the body of a 500 only, and the status line otherwise.

pub mod misc;
pub mod objects;
pub mod plugin;
pub mod proxy;
pub mod reason;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::dev::Service;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError, web};

use crate::error::Error;
use crate::leader::RoleView;
use crate::store::txn::Db;

/// Shared state of every handler.
pub struct AppState {
    pub db: Db,
    /// Current leader/follower role and the leader's address.
    pub role: RoleView,
    /// This netmaster's control address (`ip:port`), what it registers and puts in the lock.
    pub control_addr: String,
    /// Client used by the follower proxy and for calls to netplugins.
    pub http: reqwest::Client,
    /// Group commit of endpoint creates and deletes.
    pub endpoints: crate::endpoint::batch::Batcher,
    /// `--mode` (docker, kubernetes, swarm-mode, test): global inspect's `clusterMode`.
    pub cluster_mode: String,
    /// Error messages as reason phrases (for Contiv's Go client, which prints the status line).
    pub reasons: reason::ReasonPhrases,
    /// The ofnet master while this netmaster leads (`/debug/ofnet`).
    pub ofnet: crate::ofnet_master::Slot,
    /// This daemon's metrics (`/metrics`); REST requests are counted by [`app`].
    pub metrics: crate::metrics::MasterMetrics,
}

impl ResponseError for Error {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse<BoxBody> {
        HttpResponse::build(self.status_code())
            .content_type("text/plain; charset=utf-8")
            .body(self.to_string())
    }
}

/// The state, for the reason-phrase middleware.
#[derive(Clone)]
struct ReasonsOf(Arc<AppState>);

impl ReasonsOf {
    fn state(&self) -> &AppState {
        &self.0
    }
}

/// Register every route on `cfg`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    use crate::model::*;
    // Before the generic Global routes, which it shadows for inspect.
    for path in [
        "/api/v1/inspect/globals/{key}/",
        "/api/v1/inspect/globals/{key}",
    ] {
        cfg.route(path, web::get().to(objects::inspect_global));
    }
    objects::routes::<Tenant>(cfg);
    objects::routes::<Network>(cfg);
    objects::routes::<EndpointGroup>(cfg);
    objects::routes::<Policy>(cfg);
    objects::routes::<Rule>(cfg);
    objects::routes::<Netprofile>(cfg);
    objects::routes::<ServiceLb>(cfg);
    objects::routes::<Global>(cfg);
    objects::routes::<Bgp>(cfg);
    objects::routes::<AppProfile>(cfg);
    objects::routes::<ExtContractsGroup>(cfg);
    objects::routes::<AciGw>(cfg);
    cfg.route(
        "/api/v1/inspect/endpoints/{key}/",
        web::get().to(objects::inspect_endpoint),
    );
    cfg.route(
        "/api/v1/inspect/endpoints/{key}",
        web::get().to(objects::inspect_endpoint),
    );
    plugin::routes(cfg);
    misc::routes(cfg);
}

/// Build the actix `App` for `state`, with the follower proxy in front of the routes.
pub fn app(
    state: Arc<AppState>,
) -> actix_web::App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<BoxBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let data = web::Data::from(state.clone());
    let reasons = ReasonsOf(state.clone());
    let rest_metrics = state.metrics.rest.clone();
    actix_web::App::new()
        .app_data(data)
        .app_data(web::PayloadConfig::new(16 * 1024 * 1024))
        .configure(configure)
        .default_service(web::to(|| async {
            HttpResponse::NotFound().body("no such route")
        }))
        .wrap_fn(move |req, srv| proxy::leader_or_proxy(state.clone(), req, srv))
        .wrap_fn(move |req, srv| {
            let reasons = reasons.clone();
            let call = srv.call(req);
            async move {
                let mut res = call.await?;
                let message = res
                    .response()
                    .error()
                    .and_then(|e| e.as_error::<Error>())
                    .map(Error::to_string);
                if let Some(message) = message {
                    reasons.state().reasons.apply(res.response_mut(), &message);
                }
                Ok(res)
            }
        })
        // Outermost: every request is counted, proxied ones and refused ones too, by the
        // route template it matched (`unmatched` for paths no route serves).
        .wrap_fn(move |req, srv| {
            let start = std::time::Instant::now();
            let metrics = rest_metrics.clone();
            let method = crate::metrics::method_label(req.method().as_str());
            let route = req
                .match_pattern()
                .unwrap_or_else(|| "unmatched".to_string());
            let call = srv.call(req);
            async move {
                let result = call.await;
                let status = match &result {
                    Ok(res) => res.status().as_u16(),
                    Err(e) => e.as_response_error().status_code().as_u16(),
                };
                metrics.observe(&route, method, status, start.elapsed());
                result
            }
        })
}
