//! Follow the API server's Services and EndpointSlices ([`crate::kubewatch`]) and keep a
//! [`ServiceSink`] (in production the [`Driver`]) equal to what they describe.
//!
//! Contract:
//! - One reconciler owns the cache of both resources (EndpointSlices indexed by the Service
//!   their `kubernetes.io/service-name` label names); after each change it computes the
//!   affected services' [`AgentService`] ([`objects::desired`], for this node) and calls the
//!   sink only when that differs from what the sink last accepted: `apply` (spec and
//!   providers as a whole) or `remove`. A list replaces the cached objects of its resource,
//!   so a delete missed while no watch was open is applied then. A refused `apply` is logged
//!   and retried at the next change of the service or the next list.
//! - [`Watcher::prime`] applies the first lists before [`Watcher::run`] follows them, so the
//!   daemon can install Kubernetes services before the switches connect.
//! - Agent names are `k8s:<namespace>/<name>`. Nothing here panics on API input.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use ofnet::ServiceSpec;

use super::objects::{self, AgentService, ObjectKey};
use crate::driver::Driver;
use crate::error::Result;
use crate::kubeapi::KubeClient;
use crate::kubeobj::{EndpointSlice, Service};
use crate::kubewatch::{self, Change, WatchOptions};

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

/// A change of either resource.
#[derive(Debug)]
enum Update {
    Services(Box<Change<Service>>),
    Slices(Box<Change<EndpointSlice>>),
}

/// The reconciler's view: both resources, and what the sink has.
struct Cache {
    /// This node's name (`internalTrafficPolicy: Local`).
    node: String,
    services: BTreeMap<ObjectKey, Service>,
    slices: BTreeMap<ObjectKey, EndpointSlice>,
    /// Service → its slices.
    by_service: BTreeMap<ObjectKey, BTreeSet<ObjectKey>>,
    applied: BTreeMap<ObjectKey, AgentService>,
}

impl Cache {
    fn new(node: String) -> Cache {
        Cache {
            node,
            services: BTreeMap::new(),
            slices: BTreeMap::new(),
            by_service: BTreeMap::new(),
            applied: BTreeMap::new(),
        }
    }

    /// Drop slice `key` from the cache; returns its service.
    fn forget_slice(&mut self, key: &ObjectKey) -> Option<ObjectKey> {
        let old = self.slices.remove(key)?;
        let service = ObjectKey::service_of(&old)?;
        if let Some(set) = self.by_service.get_mut(&service) {
            set.remove(key);
            if set.is_empty() {
                self.by_service.remove(&service);
            }
        }
        Some(service)
    }

    /// Put slice `slice` into the cache; returns its service (if it names one).
    fn put_slice(&mut self, slice: EndpointSlice) -> BTreeSet<ObjectKey> {
        let key = ObjectKey::of(&slice.metadata);
        let mut touched: BTreeSet<ObjectKey> = self.forget_slice(&key).into_iter().collect();
        if let Some(service) = ObjectKey::service_of(&slice) {
            self.by_service
                .entry(service.clone())
                .or_default()
                .insert(key.clone());
            touched.insert(service);
        }
        self.slices.insert(key, slice);
        touched
    }

    /// Apply one update; returns the services to recompute and whether a Service object
    /// changed (then notes are worth a log line at info).
    fn update(&mut self, update: Update) -> (BTreeSet<ObjectKey>, bool) {
        match update {
            Update::Services(change) => self.update_services(*change),
            Update::Slices(change) => (self.update_slices(*change), false),
        }
    }

    fn update_services(&mut self, change: Change<Service>) -> (BTreeSet<ObjectKey>, bool) {
        match change {
            Change::Listed(list) => {
                let mut keys: BTreeSet<_> = self.services.keys().cloned().collect();
                self.services = list
                    .into_iter()
                    .map(|s| (ObjectKey::of(&s.metadata), s))
                    .collect();
                keys.extend(self.services.keys().cloned());
                (keys, false)
            }
            Change::Applied(s) => {
                let key = ObjectKey::of(&s.metadata);
                self.services.insert(key.clone(), s);
                (BTreeSet::from([key]), true)
            }
            Change::Deleted(s) => {
                let key = ObjectKey::of(&s.metadata);
                self.services.remove(&key);
                (BTreeSet::from([key]), false)
            }
        }
    }

    fn update_slices(&mut self, change: Change<EndpointSlice>) -> BTreeSet<ObjectKey> {
        match change {
            Change::Listed(list) => {
                let mut keys: BTreeSet<_> = self.by_service.keys().cloned().collect();
                self.slices.clear();
                self.by_service.clear();
                for slice in list {
                    keys.extend(self.put_slice(slice));
                }
                keys
            }
            Change::Applied(slice) => self.put_slice(slice),
            Change::Deleted(slice) => self
                .forget_slice(&ObjectKey::of(&slice.metadata))
                .into_iter()
                .collect(),
        }
    }

    /// What the agents should have for service `key`, and the notes on it.
    fn desired(&self, key: &ObjectKey) -> (Option<AgentService>, Vec<String>) {
        let mut notes = Vec::new();
        let slices: Vec<&EndpointSlice> = self
            .by_service
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|k| self.slices.get(k))
            .collect();
        let want = self
            .services
            .get(key)
            .and_then(|s| objects::desired(s, &slices, &self.node, &mut notes));
        (want, notes)
    }
}

/// Bring the sink's view of `key` to what the cache says.
async fn reconcile<S: ServiceSink>(sink: &S, cache: &mut Cache, key: &ObjectKey, changed: bool) {
    let (want, notes) = cache.desired(key);
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
    sink: Arc<S>,
    cache: Cache,
    updates: BoxStream<'static, Update>,
}

impl<S: ServiceSink> Watcher<S> {
    /// A watcher for node `node` (netplugin's host name, the node name of its pods).
    pub fn new(client: &KubeClient, sink: Arc<S>, node: &str, opts: WatchOptions) -> Watcher<S> {
        let services =
            kubewatch::follow::<Service>(client, opts).map(|c| Update::Services(Box::new(c)));
        let slices =
            kubewatch::follow::<EndpointSlice>(client, opts).map(|c| Update::Slices(Box::new(c)));
        Watcher {
            sink,
            cache: Cache::new(node.to_string()),
            updates: futures::stream::select(services, slices).boxed(),
        }
    }

    /// Take in changes until both resources were listed once or `limit` passed, then apply
    /// what they describe. The daemon does this before the switches connect, so their first
    /// reconcile already has the services' flows (a restart does not drop them). Returns the
    /// number of lists applied (2 = both); [`Watcher::run`] goes on from there.
    pub async fn prime(&mut self, limit: Duration) -> usize {
        let mut keys = BTreeSet::new();
        let mut listed = [false, false];
        let updates = &mut self.updates;
        let cache = &mut self.cache;
        let take = async {
            while listed != [true, true] {
                let Some(update) = updates.next().await else {
                    return;
                };
                match &update {
                    Update::Services(c) if matches!(**c, Change::Listed(_)) => listed[0] = true,
                    Update::Slices(c) if matches!(**c, Change::Listed(_)) => listed[1] = true,
                    _ => {}
                }
                keys.extend(cache.update(update).0);
            }
        };
        if tokio::time::timeout(limit, take).await.is_err() {
            tracing::info!(
                ?limit,
                ?listed,
                "not every Kubernetes list yet; following them in the background"
            );
        }
        // Both lists into the cache first: each service is then applied once, with its
        // providers.
        for key in &keys {
            reconcile(self.sink.as_ref(), &mut self.cache, key, true).await;
        }
        listed.iter().filter(|l| **l).count()
    }

    /// Follow both resources into the sink forever (run it as a task; see the module
    /// contract).
    pub async fn run(self) {
        let Watcher {
            sink,
            mut cache,
            mut updates,
        } = self;
        while let Some(update) = updates.next().await {
            let (keys, changed) = cache.update(update);
            for key in &keys {
                reconcile(sink.as_ref(), &mut cache, key, changed).await;
            }
        }
    }
}

/// Follow the Kubernetes API's services and endpoint slices into `sink` forever, without
/// priming (run it as a task; see the module contract).
pub async fn run<S: ServiceSink>(
    client: KubeClient,
    sink: Arc<S>,
    node: String,
    opts: WatchOptions,
) {
    Watcher::new(&client, sink, &node, opts).run().await;
}
