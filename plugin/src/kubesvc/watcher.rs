//! List and watch `/api/v1/services` and `/api/v1/endpoints`, and keep a [`ServiceSink`]
//! (in production the [`Driver`]) equal to what they describe.
//!
//! Contract:
//! - Each resource is listed, then watched from the list's `resourceVersion`
//!   (`?watch=1&resourceVersion=<v>`, newline-delimited JSON events over a chunked response).
//!   Whenever a watch ends (the server closed it, an `ERROR` event such as 410 Gone, a broken
//!   connection) the resource is listed again and the new list replaces the old one, so an
//!   event missed in between, a delete included, is still applied. Errors back off
//!   (doubling from [`WatchOptions::min_backoff`] to [`WatchOptions::max_backoff`]); each
//!   kind of failure is logged once until the watch works again.
//! - One reconciler owns the cache of both resources; after each change it computes the
//!   service's [`AgentService`] ([`objects::desired`]) and calls the sink only when that
//!   differs from what the sink last accepted: `apply` (spec and providers as a whole) or
//!   `remove`. A refused `apply` is logged and retried at the next change of the service or
//!   the next list.
//! - [`Watcher::prime`] applies the first lists before [`Watcher::run`] follows them, so the
//!   daemon can install Kubernetes services before the switches connect.
//! - Agent names are `k8s:<namespace>/<name>`. A malformed object or event line is logged
//!   with the object named and skipped; nothing here panics on API input.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use ofnet::ServiceSpec;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;

use super::objects::{self, AgentService, Endpoints, ObjectKey, Service, WatchEvent, parse_event};
use crate::driver::Driver;
use crate::error::Result;
use crate::kubeapi::KubeClient;

/// Where the agents' services go.
pub trait ServiceSink {
    /// Install or replace service `name` with its providers.
    fn apply(
        &self,
        name: &str,
        spec: &ServiceSpec,
        providers: &[Ipv4Addr],
    ) -> impl Future<Output = Result<()>>;
    /// Remove service `name` (unknown: success).
    fn remove(&self, name: &str) -> impl Future<Output = Result<()>>;
}

impl ServiceSink for Driver {
    async fn apply(&self, name: &str, spec: &ServiceSpec, providers: &[Ipv4Addr]) -> Result<()> {
        self.install_service(name, spec, providers).await
    }

    async fn remove(&self, name: &str) -> Result<()> {
        self.remove_service(name).await
    }
}

/// Timing of re-lists after errors.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Pause before listing again after a watch ended (also after a clean end, so a server
    /// that closes every watch at once is not hammered).
    pub min_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// The two resources followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Services,
    Endpoints,
}

impl Resource {
    pub fn path(self) -> &'static str {
        match self {
            Resource::Services => "/api/v1/services",
            Resource::Endpoints => "/api/v1/endpoints",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Resource::Services => "services",
            Resource::Endpoints => "endpoints",
        }
    }
}

/// A watch line longer than this is not an object we can use (and would grow without end).
const MAX_LINE: usize = 16 << 20;

/// What a watcher tells the reconciler.
#[derive(Debug)]
enum Update {
    ListedServices(Vec<Service>),
    ListedEndpoints(Vec<Endpoints>),
    Service(Service),
    Endpoints(Endpoints),
    Deleted(Resource, ObjectKey),
}

/// Logs a failure once per kind until the next success.
#[derive(Default)]
struct Failures {
    last: Option<&'static str>,
}

impl Failures {
    fn failed(&mut self, resource: Resource, kind: &'static str, detail: &str) {
        if self.last == Some(kind) {
            tracing::debug!(resource = resource.name(), failure = kind, detail, "again");
        } else {
            tracing::warn!(
                resource = resource.name(),
                failure = kind,
                detail,
                "Kubernetes watch failed; listing again with back-off"
            );
            self.last = Some(kind);
        }
    }

    fn succeeded(&mut self, resource: Resource) {
        if self.last.take().is_some() {
            tracing::info!(resource = resource.name(), "Kubernetes watch works again");
        }
    }
}

/// How a watch ended.
enum End {
    /// The server closed the stream.
    Closed,
    /// 410 Gone: the list's version is too old.
    Gone,
    /// Anything else: a kind (for [`Failures`]) and the detail.
    Failed(&'static str, String),
}

#[derive(Deserialize)]
struct List {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    items: Option<Vec<Value>>,
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: String,
}

/// Read an object of a list or event; a malformed one is logged, named, and skipped.
fn object<T: DeserializeOwned>(resource: Resource, value: Value) -> Option<T> {
    let name = ObjectKey::describe(&value);
    match serde_json::from_value(value) {
        Ok(obj) => Some(obj),
        Err(e) => {
            tracing::warn!(
                resource = resource.name(),
                object = %name,
                error = %e,
                "malformed Kubernetes object skipped"
            );
            None
        }
    }
}

fn put(resource: Resource, value: Value) -> Option<Update> {
    match resource {
        Resource::Services => object(resource, value).map(Update::Service),
        Resource::Endpoints => object(resource, value).map(Update::Endpoints),
    }
}

/// List `resource`: the update and the version to watch from.
async fn list(
    client: &KubeClient,
    resource: Resource,
) -> std::result::Result<(Update, String), (&'static str, String)> {
    let (status, body) = client
        .get(resource.path())
        .await
        .map_err(|e| ("list unreachable", e.to_string()))?;
    if status != 200 {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        return Err(("list status", format!("{status}: {text}")));
    }
    let list: List = serde_json::from_slice(&body)
        .map_err(|e| ("list malformed", format!("not a list: {e}")))?;
    let items = list.items.unwrap_or_default();
    let update = match resource {
        Resource::Services => Update::ListedServices(
            items
                .into_iter()
                .filter_map(|v| object(resource, v))
                .collect(),
        ),
        Resource::Endpoints => Update::ListedEndpoints(
            items
                .into_iter()
                .filter_map(|v| object(resource, v))
                .collect(),
        ),
    };
    Ok((update, list.metadata.resource_version))
}

/// Follow a watch stream until it ends, sending each change to the reconciler.
async fn watch(
    client: &KubeClient,
    resource: Resource,
    version: &str,
    tx: &mpsc::Sender<Update>,
) -> End {
    let path = format!("{}?watch=1&resourceVersion={version}", resource.path());
    let mut body = match client.stream(&path).await {
        Ok((200, body)) => body,
        Ok((410, _)) => return End::Gone,
        Ok((status, _)) => return End::Failed("watch status", format!("{path}: {status}")),
        Err(e) => return End::Failed("watch unreachable", e.to_string()),
    };
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let chunk = match body.frame().await {
            None => return End::Closed,
            Some(Err(e)) => return End::Failed("watch broke", e.to_string()),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue, // trailers
            },
        };
        buf.extend_from_slice(&chunk);
        while let Some(at) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=at).collect();
            let line = line.trim_ascii();
            if line.is_empty() {
                continue;
            }
            let update = match parse_event(line) {
                Ok(WatchEvent::Put(value)) => put(resource, value),
                Ok(WatchEvent::Deleted(key)) => Some(Update::Deleted(resource, key)),
                Ok(WatchEvent::Bookmark) => None,
                Ok(WatchEvent::Error { code: 410, .. }) => return End::Gone,
                Ok(WatchEvent::Error { code, message }) => {
                    return End::Failed("watch error event", format!("{code}: {message}"));
                }
                Err(e) => {
                    tracing::warn!(resource = resource.name(), error = %e, "watch line skipped");
                    None
                }
            };
            if let Some(update) = update
                && tx.send(update).await.is_err()
            {
                return End::Closed;
            }
        }
        if buf.len() > MAX_LINE {
            return End::Failed(
                "watch line too long",
                format!("more than {MAX_LINE} bytes without a newline"),
            );
        }
    }
}

/// List, watch, list again, forever (returns when the reconciler is gone).
/// `listed`: the version of a list already applied ([`Watcher::prime`]), watched first.
async fn follow(
    client: &KubeClient,
    resource: Resource,
    opts: WatchOptions,
    tx: mpsc::Sender<Update>,
    mut listed: Option<String>,
) {
    let mut failures = Failures::default();
    let mut backoff = opts.min_backoff;
    loop {
        let end = if let Some(version) = listed.take() {
            watch(client, resource, &version, &tx).await
        } else {
            match list(client, resource).await {
                Ok((update, version)) => {
                    if tx.send(update).await.is_err() {
                        return;
                    }
                    watch(client, resource, &version, &tx).await
                }
                Err((kind, detail)) => End::Failed(kind, detail),
            }
        };
        if tx.is_closed() {
            return;
        }
        match end {
            End::Closed => {
                tracing::debug!(resource = resource.name(), "watch closed; listing again");
                failures.succeeded(resource);
                backoff = opts.min_backoff;
            }
            End::Gone => {
                tracing::info!(
                    resource = resource.name(),
                    "watch version too old (410 Gone); listing again"
                );
                failures.succeeded(resource);
                backoff = opts.min_backoff;
            }
            End::Failed(kind, detail) => {
                failures.failed(resource, kind, &detail);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(opts.max_backoff);
                continue;
            }
        }
        tokio::time::sleep(opts.min_backoff).await;
    }
}

/// The reconciler's view: both resources, and what the sink has.
#[derive(Default)]
struct Cache {
    services: BTreeMap<ObjectKey, Service>,
    endpoints: BTreeMap<ObjectKey, Endpoints>,
    applied: BTreeMap<ObjectKey, AgentService>,
}

impl Cache {
    /// Apply one update; returns the services to recompute and whether their Service object
    /// changed (then notes are worth a log line at info).
    fn update(&mut self, update: Update) -> (BTreeSet<ObjectKey>, bool) {
        match update {
            Update::ListedServices(list) => {
                let mut keys: BTreeSet<_> = self.services.keys().cloned().collect();
                self.services = list.into_iter().map(|s| (s.metadata.key(), s)).collect();
                keys.extend(self.services.keys().cloned());
                (keys, false)
            }
            Update::ListedEndpoints(list) => {
                let mut keys: BTreeSet<_> = self.endpoints.keys().cloned().collect();
                self.endpoints = list.into_iter().map(|e| (e.metadata.key(), e)).collect();
                keys.extend(self.endpoints.keys().cloned());
                (keys, false)
            }
            Update::Service(s) => {
                let key = s.metadata.key();
                self.services.insert(key.clone(), s);
                (BTreeSet::from([key]), true)
            }
            Update::Endpoints(e) => {
                let key = e.metadata.key();
                self.endpoints.insert(key.clone(), e);
                (BTreeSet::from([key]), false)
            }
            Update::Deleted(Resource::Services, key) => {
                self.services.remove(&key);
                (BTreeSet::from([key]), false)
            }
            Update::Deleted(Resource::Endpoints, key) => {
                self.endpoints.remove(&key);
                (BTreeSet::from([key]), false)
            }
        }
    }
}

/// Bring the sink's view of `key` to what the cache says.
async fn reconcile<S: ServiceSink>(sink: &S, cache: &mut Cache, key: &ObjectKey, changed: bool) {
    let mut notes = Vec::new();
    let want = cache
        .services
        .get(key)
        .and_then(|s| objects::desired(s, cache.endpoints.get(key), &mut notes));
    let have = cache.applied.get(key);
    if want.as_ref() == have {
        return;
    }
    for note in &notes {
        if changed {
            tracing::info!(service = %key, "{note}");
        } else {
            tracing::debug!(service = %key, "{note}");
        }
    }
    let name = key.agent_name();
    match want {
        Some(want) => match sink.apply(&name, &want.spec, &want.providers).await {
            Ok(()) => {
                tracing::info!(
                    service = %name,
                    vip = %want.spec.vip,
                    ports = want.spec.ports.len(),
                    providers = want.providers.len(),
                    "Kubernetes service applied"
                );
                cache.applied.insert(key.clone(), want);
            }
            Err(e) => {
                tracing::warn!(service = %name, error = %e, "Kubernetes service refused");
                // Whatever the agents kept, the next change of this service re-applies it.
                cache.applied.remove(key);
            }
        },
        None => match sink.remove(&name).await {
            Ok(()) => {
                tracing::info!(service = %name, "Kubernetes service removed");
                cache.applied.remove(key);
            }
            Err(e) => tracing::warn!(service = %name, error = %e, "removing a Kubernetes service"),
        },
    }
}

/// The watcher of one API server: [`Watcher::prime`] (optional) applies the first lists,
/// [`Watcher::run`] follows from there.
pub struct Watcher<S> {
    client: KubeClient,
    sink: Arc<S>,
    opts: WatchOptions,
    cache: Cache,
    /// The versions of the lists `prime` applied: services, endpoints.
    listed: [Option<String>; 2],
}

impl<S: ServiceSink> Watcher<S> {
    pub fn new(client: KubeClient, sink: Arc<S>, opts: WatchOptions) -> Watcher<S> {
        Watcher {
            client,
            sink,
            opts,
            cache: Cache::default(),
            listed: [None, None],
        }
    }

    /// List both resources once, within `limit`, and apply what they describe. The daemon
    /// does this before the switches connect, so their first reconcile already has the
    /// services' flows (a restart does not drop them). Returns the number of lists applied
    /// (2 = all); what failed is listed again by [`Watcher::run`].
    pub async fn prime(&mut self, limit: Duration) -> usize {
        let lists = futures::future::join(
            list(&self.client, Resource::Services),
            list(&self.client, Resource::Endpoints),
        );
        let Ok((services, endpoints)) = tokio::time::timeout(limit, lists).await else {
            tracing::info!(
                ?limit,
                "no Kubernetes lists yet; following them in the background"
            );
            return 0;
        };
        // Both lists into the cache first: each service is then applied once, with its
        // providers.
        let mut keys = BTreeSet::new();
        for (slot, result) in [(0, services), (1, endpoints)] {
            match result {
                Ok((update, version)) => {
                    keys.extend(self.cache.update(update).0);
                    self.listed[slot] = Some(version);
                }
                Err((kind, detail)) => tracing::info!(
                    failure = kind,
                    detail,
                    "first Kubernetes list failed; retried in the background"
                ),
            }
        }
        for key in &keys {
            reconcile(self.sink.as_ref(), &mut self.cache, key, true).await;
        }
        self.listed.iter().filter(|v| v.is_some()).count()
    }

    /// Follow both resources into the sink forever (run it as a task; see the module
    /// contract).
    pub async fn run(self) {
        let Watcher {
            client,
            sink,
            opts,
            mut cache,
            listed: [services_listed, endpoints_listed],
        } = self;
        let (tx, mut rx) = mpsc::channel(64);
        let services = follow(
            &client,
            Resource::Services,
            opts,
            tx.clone(),
            services_listed,
        );
        let endpoints = follow(&client, Resource::Endpoints, opts, tx, endpoints_listed);
        let reconciler = async {
            while let Some(update) = rx.recv().await {
                let (keys, changed) = cache.update(update);
                for key in &keys {
                    reconcile(sink.as_ref(), &mut cache, key, changed).await;
                }
            }
        };
        futures::join!(services, endpoints, reconciler);
    }
}

/// Follow the Kubernetes API's services and endpoints into `sink` forever, without priming
/// (run it as a task; see the module contract).
pub async fn run<S: ServiceSink>(client: KubeClient, sink: Arc<S>, opts: WatchOptions) {
    Watcher::new(client, sink, opts).run().await;
}
