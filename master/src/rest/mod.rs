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

pub mod docker;
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
    /// Docker cluster mode: the engines Docker networks are made on.
    pub docker: Option<crate::docker::DockerNetworks>,
    /// Current leader/follower role and the leader's address.
    pub role: RoleView,
    /// This netmaster's control address (`ip:port`), what it registers and puts in the lock.
    pub control_addr: String,
    /// Client used by the follower proxy and for calls to netplugins.
    pub http: reqwest::Client,
    /// Group commit of object writes and endpoint creates and deletes.
    pub writes: crate::batch::Writes,
    /// `--mode` (docker, kubernetes, swarm-mode, test): global inspect's `clusterMode`.
    pub cluster_mode: String,
    /// Error messages as reason phrases (for Contiv's Go client, which prints the status line).
    pub reasons: reason::ReasonPhrases,
    /// The ofnet master while this netmaster leads (`/debug/ofnet`).
    pub ofnet: crate::ofnet_master::Slot,
    /// `--token-file`'s tokens; `None`: no authentication.
    pub tokens: Option<Arc<crate::auth::Tokens>>,
    /// `https` when the netmasters speak TLS (followers proxy to the leader with it).
    pub leader_scheme: &'static str,
    /// The follower proxy's client (checks the leader's certificate against `--tls-cacert`).
    pub leader_http: crate::https::HttpClient,
    /// Refused and malformed requests, logged once a minute per peer address.
    pub bad_requests: crate::rest::PeerLog,
    /// This daemon's metrics (`/metrics`); REST requests are counted by [`app`].
    pub metrics: crate::metrics::MasterMetrics,
}

/// Log lines about a peer's bad requests, at most one a minute per peer address (a flood of
/// garbage from one address writes one line). Holds at most [`PeerLog::MAX_PEERS`] addresses.
#[derive(Debug, Default)]
pub struct PeerLog {
    last: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, std::time::Instant>>,
}

impl PeerLog {
    pub const MAX_PEERS: usize = 4096;
    pub const INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

    /// Whether a line about `peer` may be written now (and remember that it was).
    pub fn should_log(&self, peer: std::net::IpAddr) -> bool {
        let now = std::time::Instant::now();
        let Ok(mut last) = self.last.lock() else {
            return true;
        };
        if last.len() >= Self::MAX_PEERS {
            last.retain(|_, t| now.duration_since(*t) < Self::INTERVAL);
            if last.len() >= Self::MAX_PEERS {
                last.clear();
            }
        }
        match last.get(&peer) {
            Some(t) if now.duration_since(*t) < Self::INTERVAL => false,
            _ => {
                last.insert(peer, now);
                true
            }
        }
    }
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

/// The answer to a request no route takes.
async fn no_such_route() -> HttpResponse {
    HttpResponse::NotFound().body("no such route")
}

/// Register every route on `cfg`. The router tries routes in this order, matching a dynamic
/// pattern with a regex: the static `/plugin/...` paths (every pod's ADD and DEL) come first, so
/// they do not pay for the ~50 object patterns.
pub fn configure(cfg: &mut web::ServiceConfig) {
    use crate::model::*;
    plugin::routes(cfg);
    // Before the generic Global routes, which it shadows for inspect.
    for path in [
        "/api/v1/inspect/globals/{key}/",
        "/api/v1/inspect/globals/{key}",
    ] {
        cfg.route(path, web::get().to(objects::inspect_global));
    }
    // Likewise for Bgp: its oper comes from the host's netplugin.
    for path in ["/api/v1/inspect/Bgps/{key}/", "/api/v1/inspect/Bgps/{key}"] {
        cfg.route(path, web::get().to(objects::inspect_bgp));
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
    misc::routes(cfg);
}

/// Middleware body: with `--token-file`, refuse a request without a token allowed to make it
/// (401/403, the body saying what to do); log refused and malformed (400) requests with the
/// peer's address, rate-limited per peer.
fn authenticate<S>(
    state: &Arc<AppState>,
    req: actix_web::dev::ServiceRequest,
    srv: &S,
) -> futures::future::LocalBoxFuture<
    'static,
    Result<actix_web::dev::ServiceResponse<BoxBody>, actix_web::Error>,
>
where
    S: Service<
            actix_web::dev::ServiceRequest,
            Response = actix_web::dev::ServiceResponse<BoxBody>,
            Error = actix_web::Error,
        >,
    S::Future: 'static,
{
    let peer = req.peer_addr();
    let method = req.method().to_string();
    let path = req.path().to_string();
    if let Some(tokens) = &state.tokens {
        let header = req
            .headers()
            .get(actix_web::http::header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or("<not text>"));
        if let Err(refusal) = crate::auth::authorize(tokens, &method, &path, header) {
            if let Some(peer) = peer
                && state.bad_requests.should_log(peer.ip())
            {
                tracing::warn!(%peer, %method, %path, status = refusal.status, reason = %refusal.message, "request refused (further refusals from this address are not logged for a minute)");
            }
            let mut resp = HttpResponse::build(
                StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::UNAUTHORIZED),
            );
            if refusal.status == 401 {
                resp.insert_header((actix_web::http::header::WWW_AUTHENTICATE, "Bearer"));
            }
            let mut resp = resp
                .content_type("text/plain; charset=utf-8")
                .body(refusal.message.clone());
            state.reasons.apply(&mut resp, &refusal.message);
            let (http_req, _) = req.into_parts();
            return Box::pin(
                async move { Ok(actix_web::dev::ServiceResponse::new(http_req, resp)) },
            );
        }
    }
    let call = srv.call(req);
    let state = state.clone();
    Box::pin(async move {
        let res = call.await?;
        if res.status() == StatusCode::BAD_REQUEST
            && let Some(peer) = peer
            && state.bad_requests.should_log(peer.ip())
        {
            let reason = res
                .response()
                .error()
                .map(|e| e.to_string())
                .unwrap_or_default();
            tracing::warn!(%peer, %method, %path, %reason, "malformed request (further ones from this address are not logged for a minute)");
        }
        Ok(res)
    })
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
    let auth_state = state.clone();
    let rest_metrics = state.metrics.rest.clone();
    actix_web::App::new()
        .app_data(data)
        .app_data(web::PayloadConfig::new(16 * 1024 * 1024))
        .configure(configure)
        .default_service(web::to(no_such_route))
        .wrap_fn(move |req, srv| proxy::leader_or_proxy(state.clone(), req, srv))
        .wrap_fn(move |req, srv| authenticate(&auth_state, req, srv))
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
