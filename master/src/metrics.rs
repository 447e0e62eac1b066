//! Prometheus metrics (`GET /metrics`, the OpenMetrics text format of `prometheus-client`).
//!
//! Each daemon builds one [`Registry`] at start, registers its metrics there and hands the
//! metric handles to the components that update them; nothing is global. This module holds
//! what both daemons share and netmaster's own metrics:
//!
//! * [`StoreMetrics`] and [`MeteredStore`]: every etcd request by operation and outcome, with
//!   its latency (`contiv_etcd_*`). netplugin wraps its store the same way.
//! * [`MasterMetrics`]: netmaster's REST requests by route template (the route as declared,
//!   `/api/v1/networks/{key}/`, never the raw path: the label set stays bounded), method and
//!   status; the leader state and elections; the ofnet master's RPC peers and calls; the
//!   endpoint, policy-rule and service counts.
//!
//! The full list with meanings is in docs/operating.md ("Metrics").

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::store::{
    Guard, KeyValue, LeaseId, Listing, Op, StateStore, StoreError, StoreResult, TxnOutcome,
    WatchEvent,
};

/// The `Content-Type` of [`render`]'s output (what `prometheus-client` writes, and what
/// Prometheus asks for first).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One label, by name.
pub type Labels1 = [(&'static str, String); 1];
/// Two labels.
pub type Labels2 = [(&'static str, String); 2];
/// Three labels.
pub type Labels3 = [(&'static str, String); 3];

/// Latency buckets for requests that normally take a millisecond to a second (REST, etcd, CNI,
/// bundles): 0.5 ms … 16 s, doubling.
pub fn latency_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.0005, 2.0, 16)
}

/// A latency histogram family with [`latency_buckets`].
pub type LatencyFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// A new latency histogram family.
pub fn latency_family<L>() -> LatencyFamily<L>
where
    L: Clone + std::hash::Hash + Eq,
{
    Family::new_with_constructor(|| Histogram::new(latency_buckets()))
}

/// The registry as text (OpenMetrics, ending in `# EOF`).
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    if let Err(e) = encode(&mut out, registry) {
        // Writing to a String cannot fail; keep what was written and say so.
        out.push_str(&format!("# encoding stopped: {e}\n"));
    }
    out
}

/// etcd requests of one daemon (both daemons run the same store code).
#[derive(Clone, Debug)]
pub struct StoreMetrics {
    /// `contiv_etcd_requests_total{op, outcome}`.
    pub requests: Family<Labels2, Counter>,
    /// `contiv_etcd_request_duration_seconds{op}`.
    pub duration: LatencyFamily<Labels1>,
}

impl StoreMetrics {
    /// Register the etcd metrics in `registry`.
    pub fn register(registry: &mut Registry) -> StoreMetrics {
        let m = StoreMetrics {
            requests: Family::default(),
            duration: latency_family(),
        };
        registry.register(
            "contiv_etcd_requests",
            "etcd requests by operation (get, list, put, delete, txn, watch, lease_grant, \
             lease_keepalive, lease_revoke) and outcome (ok, conflict for a transaction whose \
             guards failed, unavailable, error)",
            m.requests.clone(),
        );
        registry.register(
            "contiv_etcd_request_duration_seconds",
            "etcd request latency by operation, failover to other members included",
            m.duration.clone(),
        );
        m
    }

    fn observe(&self, op: &'static str, outcome: &'static str, elapsed: Duration) {
        self.requests
            .get_or_create(&[("op", op.to_string()), ("outcome", outcome.to_string())])
            .inc();
        self.duration
            .get_or_create(&[("op", op.to_string())])
            .observe(elapsed.as_secs_f64());
    }
}

fn outcome_of<T>(result: &StoreResult<T>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(StoreError::Unavailable(_)) => "unavailable",
        Err(_) => "error",
    }
}

/// A [`StateStore`] that counts and times every request of the store it wraps.
pub struct MeteredStore {
    inner: Arc<dyn StateStore>,
    metrics: StoreMetrics,
}

impl MeteredStore {
    pub fn new(inner: Arc<dyn StateStore>, metrics: StoreMetrics) -> MeteredStore {
        MeteredStore { inner, metrics }
    }

    async fn timed<T>(
        &self,
        op: &'static str,
        fut: impl Future<Output = StoreResult<T>>,
        outcome: impl Fn(&StoreResult<T>) -> &'static str,
    ) -> StoreResult<T> {
        let start = Instant::now();
        let result = fut.await;
        self.metrics.observe(op, outcome(&result), start.elapsed());
        result
    }
}

impl StateStore for MeteredStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<KeyValue>>> {
        Box::pin(self.timed("get", self.inner.get(key), outcome_of))
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Listing>> {
        Box::pin(self.timed("list", self.inner.list(prefix), outcome_of))
    }

    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>) -> BoxFuture<'a, StoreResult<i64>> {
        Box::pin(self.timed("put", self.inner.put(key, value), outcome_of))
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(self.timed("delete", self.inner.delete(key), outcome_of))
    }

    fn txn(&self, guards: Vec<Guard>, ops: Vec<Op>) -> BoxFuture<'_, StoreResult<TxnOutcome>> {
        Box::pin(self.timed("txn", self.inner.txn(guards, ops), |r| match r {
            Ok(o) if !o.succeeded => "conflict",
            other => outcome_of(other),
        }))
    }

    fn watch(
        &self,
        prefix: String,
        from_revision: i64,
    ) -> BoxFuture<'_, StoreResult<BoxStream<'static, StoreResult<WatchEvent>>>> {
        // Counts opening the watch; the stream's life is not a request.
        Box::pin(self.timed("watch", self.inner.watch(prefix, from_revision), outcome_of))
    }

    fn grant_lease(&self, ttl_secs: i64) -> BoxFuture<'_, StoreResult<LeaseId>> {
        Box::pin(self.timed("lease_grant", self.inner.grant_lease(ttl_secs), outcome_of))
    }

    fn keep_alive(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(self.timed("lease_keepalive", self.inner.keep_alive(lease), outcome_of))
    }

    fn revoke_lease(&self, lease: LeaseId) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(self.timed("lease_revoke", self.inner.revoke_lease(lease), outcome_of))
    }
}

/// netmaster's REST requests.
#[derive(Clone, Debug)]
pub struct RestMetrics {
    /// `netmaster_http_requests_total{route, method, status}`.
    pub requests: Family<Labels3, Counter>,
    /// `netmaster_http_request_duration_seconds{route, method}`.
    pub duration: LatencyFamily<Labels2>,
}

impl RestMetrics {
    /// Count one answered request. `route` is the matched route template (bounded).
    pub fn observe(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        self.requests
            .get_or_create(&[
                ("route", route.to_string()),
                ("method", method.to_string()),
                ("status", status.to_string()),
            ])
            .inc();
        self.duration
            .get_or_create(&[("route", route.to_string()), ("method", method.to_string())])
            .observe(elapsed.as_secs_f64());
    }
}

/// Methods REST metrics label as themselves; any other is `other` (the set stays bounded).
pub fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "PATCH" => "PATCH",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

/// The ofnet master's RPC side, fed by [`ofnet::master::MasterObserver`].
#[derive(Clone, Debug)]
pub struct OfnetMetrics {
    /// `netmaster_ofnet_rpc_peers`: agents registered with this netmaster's ofnet master.
    pub peers: Gauge,
    /// `netmaster_ofnet_rpc_calls_total{method, outcome}`.
    pub calls: Family<Labels2, Counter>,
    /// `netmaster_endpoints`.
    pub endpoints: Gauge,
    /// `netmaster_policy_rules`.
    pub rules: Gauge,
}

impl OfnetMetrics {
    /// The counts go to 0 when the ofnet master stops (this netmaster stopped leading).
    pub fn stopped(&self) {
        self.peers.set(0);
        self.endpoints.set(0);
        self.rules.set(0);
    }
}

impl ofnet::master::MasterObserver for OfnetMetrics {
    fn call(&self, method: &str, ok: bool) {
        // Unknown methods are answered with an error; label them together.
        let method = match method {
            "OfnetMaster.RegisterNode"
            | "OfnetMaster.UnRegisterNode"
            | "OfnetMaster.EndpointAdd"
            | "OfnetMaster.EndpointDel" => method,
            _ => "other",
        };
        let outcome = if ok { "ok" } else { "error" };
        self.calls
            .get_or_create(&[("method", method.to_string()), ("outcome", outcome.into())])
            .inc();
    }

    fn agents(&self, count: usize) {
        self.peers.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    fn endpoints(&self, count: usize) {
        self.endpoints.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    fn rules(&self, count: usize) {
        self.rules.set(i64::try_from(count).unwrap_or(i64::MAX));
    }
}

/// Every metric netmaster exports, and the registry they are in.
#[derive(Clone)]
pub struct MasterMetrics {
    pub registry: Arc<Registry>,
    pub store: StoreMetrics,
    pub rest: RestMetrics,
    /// `netmaster_leader`: 1 while this netmaster holds the leader lock.
    pub leader: Gauge,
    /// `netmaster_leader_elections_total`: times this netmaster won the lock.
    pub elections: Counter,
    pub ofnet: OfnetMetrics,
    /// `netmaster_services`: service objects (serviceLB) in the store, as followed by a watch.
    pub services: Gauge,
}

impl std::fmt::Debug for MasterMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterMetrics").finish_non_exhaustive()
    }
}

impl MasterMetrics {
    /// Build the registry with every netmaster metric.
    pub fn new() -> MasterMetrics {
        let mut registry = Registry::default();
        let store = StoreMetrics::register(&mut registry);
        let rest = RestMetrics {
            requests: Family::default(),
            duration: latency_family(),
        };
        registry.register(
            "netmaster_http_requests",
            "REST requests answered, by route template, method and HTTP status",
            rest.requests.clone(),
        );
        registry.register(
            "netmaster_http_request_duration_seconds",
            "REST request latency by route template and method (a follower's includes the proxy \
             to the leader)",
            rest.duration.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "netmaster_leader",
            "1 while this netmaster holds the leader lock, 0 while it follows",
            leader.clone(),
        );
        let elections = Counter::default();
        registry.register(
            "netmaster_leader_elections",
            "times this netmaster acquired the leader lock",
            elections.clone(),
        );
        let ofnet = OfnetMetrics {
            peers: Gauge::default(),
            calls: Family::default(),
            endpoints: Gauge::default(),
            rules: Gauge::default(),
        };
        registry.register(
            "netmaster_ofnet_rpc_peers",
            "netplugin agents registered with this netmaster's ofnet master (0 on a follower)",
            ofnet.peers.clone(),
        );
        registry.register(
            "netmaster_ofnet_rpc_calls",
            "ofnet RPC calls served by the ofnet master, by method and outcome",
            ofnet.calls.clone(),
        );
        registry.register(
            "netmaster_endpoints",
            "endpoints known to the ofnet master (every host's; 0 on a follower)",
            ofnet.endpoints.clone(),
        );
        registry.register(
            "netmaster_policy_rules",
            "compiled policy rules held by the ofnet master (0 on a follower)",
            ofnet.rules.clone(),
        );
        let services = Gauge::default();
        registry.register(
            "netmaster_services",
            "service load balancers (serviceLB objects) in the store",
            services.clone(),
        );
        MasterMetrics {
            registry: Arc::new(registry),
            store,
            rest,
            leader,
            elections,
            ofnet,
            services,
        }
    }

    /// The text served at `/metrics`.
    pub fn render(&self) -> String {
        render(&self.registry)
    }
}

impl Default for MasterMetrics {
    fn default() -> Self {
        MasterMetrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[tokio::test]
    async fn metered_store_counts_requests_by_op_and_outcome() {
        let metrics = MasterMetrics::new();
        let store = MeteredStore::new(Arc::new(MemoryStore::new()), metrics.store.clone());
        store.put("/a", b"1".to_vec()).await.unwrap();
        store.get("/a").await.unwrap();
        store.get("/b").await.unwrap();
        let failed = store
            .txn(
                vec![Guard::ModRevision {
                    key: "/a".into(),
                    revision: 0,
                }],
                vec![Op::Delete { key: "/a".into() }],
            )
            .await
            .unwrap();
        assert!(!failed.succeeded);
        let text = metrics.render();
        for line in [
            "# TYPE contiv_etcd_requests counter",
            "contiv_etcd_requests_total{op=\"get\",outcome=\"ok\"} 2",
            "contiv_etcd_requests_total{op=\"put\",outcome=\"ok\"} 1",
            "contiv_etcd_requests_total{op=\"txn\",outcome=\"conflict\"} 1",
            "# TYPE contiv_etcd_request_duration_seconds histogram",
            "contiv_etcd_request_duration_seconds_count{op=\"get\"} 2",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn unknown_methods_share_one_label() {
        assert_eq!(method_label("BREW"), "other");
        assert_eq!(method_label("GET"), "GET");
    }
}
