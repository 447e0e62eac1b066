//! Route-level tests: status codes, bodies, trailing slashes, content types and the follower proxy,
//! against the in-memory store (and a store that is always unavailable).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::test;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use super::{AppState, app};
use crate::leader::{LeaderState, RoleView};
use crate::model::{Global, Tenant, ops};
use crate::store::txn::Db;
use crate::store::*;

fn state(store: Arc<dyn StateStore>, role: LeaderState) -> Arc<AppState> {
    let db = Db::new(store);
    Arc::new(AppState {
        docker: None,
        writes: crate::batch::Writes::spawn(db.clone()).unwrap(),
        db,
        role: RoleView::fixed(role),
        control_addr: "127.0.0.1:9999".into(),
        http: reqwest::Client::new(),
        cluster_mode: "test".into(),
        reasons: Default::default(),
        ofnet: Default::default(),
        tokens: None,
        leader_scheme: "http",
        leader_http: crate::https::HttpClient::new(None, std::time::Duration::from_secs(5))
            .unwrap(),
        bad_requests: Default::default(),
        metrics: Default::default(),
    })
}

fn leader() -> LeaderState {
    LeaderState {
        is_leader: true,
        leader: Some("127.0.0.1:9999".into()),
    }
}

async fn seeded() -> Arc<AppState> {
    let s = state(Arc::new(MemoryStore::new()), leader());
    ops::upsert(&s.db, "global", Global::defaults("bridge", "default"))
        .await
        .unwrap();
    ops::upsert(&s.db, "default", Tenant::named("default"))
        .await
        .unwrap();
    s
}

async fn body_text(resp: actix_web::dev::ServiceResponse) -> String {
    String::from_utf8(test::read_body(resp).await.to_vec()).unwrap()
}

#[actix_web::test]
async fn object_routes_status_and_bodies() {
    let svc = test::init_service(app(seeded().await)).await;
    let req = test::TestRequest::post()
        .uri("/api/v1/tenants/t1/")
        .set_json(json!({"tenantName": "t1"}))
        .to_request();
    let resp = test::call_service(&svc, req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body: Value = test::read_body_json(resp).await;
    assert_eq!(
        body,
        json!({"key": "t1", "tenantName": "t1", "link-sets": {}})
    );
    // Identical re-POST, without the trailing slash and with PUT, succeeds.
    let req = test::TestRequest::put()
        .uri("/api/v1/tenants/t1")
        .set_json(json!({"tenantName": "t1"}))
        .to_request();
    assert_eq!(test::call_service(&svc, req).await.status(), StatusCode::OK);
    // Validation: 400 naming the field; key mismatch: 400; bad JSON: 400.
    let req = test::TestRequest::post()
        .uri("/api/v1/tenants/a_b/")
        .set_json(json!({"tenantName": "a_b"}))
        .to_request();
    let resp = test::call_service(&svc, req).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert!(body_text(resp).await.starts_with("invalid tenantName:"));
    let req = test::TestRequest::post()
        .uri("/api/v1/tenants/t2/")
        .set_json(json!({"tenantName": "t1"}))
        .to_request();
    assert_eq!(
        test::call_service(&svc, req).await.status(),
        StatusCode::BAD_REQUEST
    );
    let req = test::TestRequest::post()
        .uri("/api/v1/tenants/t2/")
        .insert_header(("content-type", "application/json"))
        .set_payload("{")
        .to_request();
    assert_eq!(
        test::call_service(&svc, req).await.status(),
        StatusCode::BAD_REQUEST
    );
    // Change of an immutable object: 409 with the message as plain text.
    let req = test::TestRequest::post()
        .uri("/api/v1/tenants/t1/")
        .set_json(json!({"tenantName": "t1", "defaultNetwork": "x"}))
        .to_request();
    let resp = test::call_service(&svc, req).await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert!(
        resp.headers()
            .get("content-type")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    // List, get, inspect, 404.
    let req = test::TestRequest::get()
        .uri("/api/v1/tenants/")
        .to_request();
    let list: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(list.as_array().unwrap().len(), 2);
    let req = test::TestRequest::get()
        .uri("/api/v1/inspect/tenants/t1/")
        .to_request();
    let inspect: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(inspect["Config"]["tenantName"], "t1");
    assert_eq!(inspect["Oper"]["totalNetworks"], 0);
    let req = test::TestRequest::get()
        .uri("/api/v1/tenants/nope/")
        .to_request();
    let resp = test::call_service(&svc, req).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(body_text(resp).await, "tenant nope not found");
    // Delete answers the key as a JSON string.
    let req = test::TestRequest::delete()
        .uri("/api/v1/tenants/t1/")
        .to_request();
    let deleted: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(deleted, json!("t1"));
    let req = test::TestRequest::get()
        .uri("/api/v1/nothings/")
        .to_request();
    assert_eq!(
        test::call_service(&svc, req).await.status(),
        StatusCode::NOT_FOUND
    );
}

#[actix_web::test]
async fn plugin_routes() {
    let svc = test::init_service(app(seeded().await)).await;
    let req = test::TestRequest::post()
        .uri("/api/v1/networks/default:n1/")
        .set_json(json!({"tenantName": "default", "networkName": "n1", "encap": "vxlan", "subnet": "10.1.1.0/24"}))
        .to_request();
    assert_eq!(test::call_service(&svc, req).await.status(), StatusCode::OK);
    let create = json!({"TenantName": "default", "NetworkName": "n1", "EndpointID": "c1", "ConfigEP": {"Container": "c1", "Host": "h1"}});
    let req = test::TestRequest::post()
        .uri("/plugin/createEndpoint")
        .insert_header(("content-type", "text/plain"))
        .set_payload(create.to_string())
        .to_request();
    assert_eq!(
        test::call_service(&svc, req).await.status(),
        StatusCode::BAD_REQUEST
    );
    let req = test::TestRequest::post()
        .uri("/plugin/createEndpoint")
        .set_json(&create)
        .to_request();
    let ep: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(ep["EndpointConfig"]["ipAddress"], "10.1.1.1");
    assert_eq!(ep["EndpointConfig"]["macAddress"], "02:02:0a:01:01:01");
    assert_eq!(ep["EndpointConfig"]["id"], "n1.default-c1");
    let req = test::TestRequest::post()
        .uri("/plugin/allocAddress")
        .set_json(json!({"NetworkID": "n1.default"}))
        .to_request();
    let alloc: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(
        alloc,
        json!({"NetworkID": "n1.default", "IPv4Address": "10.1.1.2/24"})
    );
    let req = test::TestRequest::post()
        .uri("/plugin/releaseAddress")
        .set_json(json!({"NetworkID": "n1.default", "IPv4Address": "10.1.1.2/24"}))
        .to_request();
    let released: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(released, json!("success"));
    let req = test::TestRequest::get()
        .uri("/api/v1/inspect/endpoints/c1/")
        .to_request();
    let inspect: Value = test::call_and_read_body_json(&svc, req).await;
    // The IPv6 slot is there, empty, as Contiv answers.
    assert_eq!(inspect["Oper"]["ipAddress"], json!(["10.1.1.1", ""]));
    let req = test::TestRequest::post()
        .uri("/plugin/deleteEndpoint")
        .set_json(json!({"TenantName": "default", "NetworkName": "n1", "EndpointID": "c1"}))
        .to_request();
    let del: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(del["EndpointConfig"]["ipAddress"], "10.1.1.1");
    let req = test::TestRequest::delete()
        .uri("/debug/epcleanup/tenant/default/bogus/x")
        .to_request();
    assert_eq!(
        test::call_service(&svc, req).await.status(),
        StatusCode::BAD_REQUEST
    );
    let req = test::TestRequest::delete()
        .uri("/debug/epcleanup/tenant/default/net/n1")
        .to_request();
    assert!(
        body_text(test::call_service(&svc, req).await)
            .await
            .starts_with("deleted 0 endpoints")
    );
}

#[actix_web::test]
async fn misc_routes() {
    let svc = test::init_service(app(seeded().await)).await;
    let req = test::TestRequest::get().uri("/version").to_request();
    let v: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(v["Version"], env!("CARGO_PKG_VERSION"));
    let req = test::TestRequest::get().uri("/info").to_request();
    let info: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(info["current-state"], "leader");
    assert_eq!(info["leader-ip"], "127.0.0.1:9999");
    let req = test::TestRequest::get().uri("/services").to_request();
    let services: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(services, json!([]));
    let req = test::TestRequest::get()
        .uri("/service/s1:default")
        .to_request();
    assert_eq!(
        test::call_service(&svc, req).await.status(),
        StatusCode::NOT_FOUND
    );
}

#[actix_web::test]
async fn follower_without_leader_answers_503_but_serves_info() {
    let s = state(
        Arc::new(MemoryStore::new()),
        LeaderState {
            is_leader: false,
            leader: None,
        },
    );
    let svc = test::init_service(app(s)).await;
    let req = test::TestRequest::get()
        .uri("/api/v1/tenants/")
        .to_request();
    let resp = test::call_service(&svc, req).await;
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    // The follower's own refusal also carries its message in the status line.
    assert_eq!(resp.response().head().reason(), "Leader not found");
    assert_eq!(body_text(resp).await, "Leader not found");
    let req = test::TestRequest::get().uri("/info").to_request();
    let info: Value = test::call_and_read_body_json(&svc, req).await;
    assert_eq!(info["current-state"], "follower");
    // A lock naming ourselves while we are a follower must not proxy to ourselves.
    let s = state(
        Arc::new(MemoryStore::new()),
        LeaderState {
            is_leader: false,
            leader: Some("127.0.0.1:9999".into()),
        },
    );
    let svc = test::init_service(app(s)).await;
    let req = test::TestRequest::get()
        .uri("/api/v1/tenants/")
        .to_request();
    assert_eq!(
        test::call_service(&svc, req).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
}

/// A store whose every call fails as an unreachable etcd would.
struct Unreachable;

fn down<T>() -> StoreResult<T> {
    Err(StoreError::Unavailable("connection refused".into()))
}

impl StateStore for Unreachable {
    fn get<'a>(&'a self, _: &'a str) -> BoxFuture<'a, StoreResult<Option<KeyValue>>> {
        Box::pin(async { down() })
    }
    fn list<'a>(&'a self, _: &'a str) -> BoxFuture<'a, StoreResult<Listing>> {
        Box::pin(async { down() })
    }
    fn put<'a>(&'a self, _: &'a str, _: Vec<u8>) -> BoxFuture<'a, StoreResult<i64>> {
        Box::pin(async { down() })
    }
    fn delete<'a>(&'a self, _: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async { down() })
    }
    fn txn(&self, _: Vec<Guard>, _: Vec<Op>) -> BoxFuture<'_, StoreResult<TxnOutcome>> {
        Box::pin(async { down() })
    }
    fn watch(
        &self,
        _: String,
        _: i64,
    ) -> BoxFuture<'_, StoreResult<BoxStream<'static, StoreResult<WatchEvent>>>> {
        Box::pin(async { down() })
    }
    fn grant_lease(&self, _: i64) -> BoxFuture<'_, StoreResult<LeaseId>> {
        Box::pin(async { down() })
    }
    fn keep_alive(&self, _: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async { down() })
    }
    fn revoke_lease(&self, _: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async { down() })
    }
}

#[actix_web::test]
async fn store_outage_is_503() {
    let svc = test::init_service(app(state(Arc::new(Unreachable), leader()))).await;
    for req in [
        test::TestRequest::get()
            .uri("/api/v1/networks/")
            .to_request(),
        test::TestRequest::post()
            .uri("/api/v1/tenants/t1/")
            .set_json(json!({"tenantName": "t1"}))
            .to_request(),
        test::TestRequest::post()
            .uri("/plugin/allocAddress")
            .set_json(json!({"NetworkID": "n1.default"}))
            .to_request(),
    ] {
        let resp = test::call_service(&svc, req).await;
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(body_text(resp).await.contains("state store unavailable"));
    }
}

/// `/metrics` is answered by the instance itself (a follower with no leader too, where every other
/// route is 503), and REST requests are counted by route template and status, never by raw path.
#[actix_web::test]
async fn metrics_are_local_and_count_requests_by_route_template() {
    let follower = state(
        Arc::new(MemoryStore::new()),
        LeaderState {
            is_leader: false,
            leader: None,
        },
    );
    let svc = test::init_service(app(follower)).await;
    let req = test::TestRequest::get()
        .uri("/api/v1/networks/default:secret-net/")
        .to_request();
    assert_eq!(
        test::call_service(&svc, req).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    let req = test::TestRequest::get().uri("/metrics").to_request();
    let resp = test::call_service(&svc, req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = body_text(resp).await;
    assert!(text.contains("netmaster_leader 0\n"), "{text}");
    assert!(
        text.contains(
            "netmaster_http_requests_total{route=\"/api/v1/networks/{key}/\",method=\"GET\",status=\"503\"} 1\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("secret-net"),
        "a raw path became a label:\n{text}"
    );
}

/// A method an object path does not take, and a path no route takes, answer 404 "no such route"
/// (the object paths are one resource per path; the answer is what it was with a route per
/// method).
#[actix_web::test]
async fn unknown_methods_and_paths_answer_no_such_route() {
    let svc = test::init_service(app(seeded().await)).await;
    for req in [
        test::TestRequest::patch().uri("/api/v1/networks/default:n1/"),
        test::TestRequest::get().uri("/api/v1/nothings/x/"),
        test::TestRequest::get().uri("/plugin/createEndpoint"),
    ] {
        let resp = test::call_service(&svc, req.to_request()).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        let body = test::read_body(resp).await;
        assert_eq!(body, "no such route");
    }
}
