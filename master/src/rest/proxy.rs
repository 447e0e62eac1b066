//! The follower proxy: on a follower every request except `/version`, `/info` and `/metrics` is forwarded to the
//! leader's control address (the lock holder). With no known leader, or when the lock names this very
//! netmaster (stale view), the answer is 503 rather than a proxy loop.

use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::{HttpResponse, web};
use futures::future::LocalBoxFuture;

use super::AppState;
use crate::error::Error;

/// Middleware body: run the route on the leader, proxy on a follower.
pub fn leader_or_proxy<S>(
    state: Arc<AppState>,
    req: ServiceRequest,
    srv: &S,
) -> LocalBoxFuture<'static, Result<ServiceResponse<BoxBody>, actix_web::Error>>
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>,
    S::Future: 'static,
{
    let path = req.path();
    let local = path == "/version" || path == "/info" || path == "/metrics";
    let view = state.role.current();
    if view.is_leader || local {
        return Box::pin(srv.call(req));
    }
    Box::pin(async move {
        let (http_req, mut payload) = req.into_parts();
        let body = match read_payload(&mut payload).await {
            Ok(b) => b,
            Err(e) => {
                return Ok(ServiceResponse::new(
                    http_req,
                    HttpResponse::BadRequest().body(e.to_string()),
                ));
            }
        };
        let resp = match forward(&state, view.leader.as_deref(), &http_req, body).await {
            Ok(r) => r,
            Err(e) => {
                let mut resp = actix_web::ResponseError::error_response(&e);
                state.reasons.apply(&mut resp, &e.to_string());
                resp
            }
        };
        Ok(ServiceResponse::new(http_req, resp))
    })
}

async fn read_payload(
    payload: &mut actix_web::dev::Payload,
) -> Result<web::Bytes, actix_web::Error> {
    use futures::StreamExt;
    let mut buf = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        buf.extend_from_slice(&chunk?);
    }
    Ok(buf.freeze())
}

async fn forward(
    state: &AppState,
    leader: Option<&str>,
    req: &actix_web::HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, Error> {
    let leader = leader.ok_or_else(|| Error::NoLeader("Leader not found".into()))?;
    if leader == state.control_addr {
        return Err(Error::NoLeader(
            "this netmaster is named leader but does not hold the lock yet".into(),
        ));
    }
    let scheme = state.leader_scheme;
    let url = match req.uri().query() {
        Some(q) => format!("{scheme}://{leader}{}?{q}", req.path()),
        None => format!("{scheme}://{leader}{}", req.path()),
    };
    // The caller's credentials go along: the leader decides with its own token file.
    let mut headers = Vec::with_capacity(2);
    for name in ["content-type", "authorization"] {
        if let Some(v) = req.headers().get(name).and_then(|v| v.to_str().ok()) {
            headers.push((name, v));
        }
    }
    let resp = state
        .leader_http
        .send(req.method().as_str(), &url, &headers, body)
        .await
        .map_err(|e| Error::NoLeader(format!("leader {leader} unreachable: {e}")))?;
    let status = actix_web::http::StatusCode::from_u16(resp.status)
        .unwrap_or(actix_web::http::StatusCode::BAD_GATEWAY);
    let content_type = resp
        .content_type
        .unwrap_or_else(|| "application/octet-stream".to_string());
    let bytes = resp.body;
    let mut reply = HttpResponse::build(status)
        .content_type(content_type)
        .body(bytes.to_vec());
    if status.is_client_error() || status.is_server_error() {
        // The leader's message as the reason phrase, as the leader itself answers.
        state
            .reasons
            .apply(&mut reply, &String::from_utf8_lossy(&bytes));
    }
    if status == actix_web::http::StatusCode::UNAUTHORIZED {
        reply.headers_mut().insert(
            actix_web::http::header::WWW_AUTHENTICATE,
            actix_web::http::header::HeaderValue::from_static("Bearer"),
        );
    }
    Ok(reply)
}
