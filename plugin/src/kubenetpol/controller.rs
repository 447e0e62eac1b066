//! The NetworkPolicy controller of this host: an actor that owns what policies are computed
//! from, namely the API's Namespaces, Pods and NetworkPolicies (followed with
//! [`crate::kubewatch`]) and this host's pods (a snapshot of the driver's local endpoints,
//! sent at start and after each CNI ADD and DEL), and what each bridge's agent was given.
//!
//! Contract:
//! - After any change it resolves every policy ([`resolve`]) and sends each agent the
//!   difference from what that agent has as ONE call, one switch transaction
//!   ([`PolicySink::set`]). Changes that arrive while a transaction is under way are taken
//!   together into the next one, so a burst of events costs a few transactions, not one each.
//! - [`PolicyHandle::local_pods`] answers once a transaction that includes the new snapshot
//!   has completed: the CNI ADD that sent it returns with the pod's policies in place.
//! - A policy that cannot be applied (what the API server would refuse, or what the switch
//!   cannot enforce exactly, e.g. SCTP) is logged once with the policy named and why, is not
//!   half-applied, keeps its previously applied version if any, and does not hold up the
//!   others.
//! - A failed transaction (an agent error) is logged, fails the waiting ADDs, and is retried.
//! - Before the three resources were listed once, policies are resolved from what is known;
//!   [`PolicyHandle::wait_synced`] says when the lists are in and applied.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use k8s_openapi::api::networking::v1::NetworkPolicy as KubePolicy;
use ofnet::BridgeKind;
use ofnet::netpol::{NetworkPolicy, PolicyRefused};
use tokio::sync::oneshot;

use super::resolve::{self, LocalPod, PodInfo, View, bridge_rank};
use super::selector::Labels;
use crate::driver::Driver;
use crate::error::PluginError;
use crate::kubeapi::KubeClient;
use crate::kubeobj::{Namespace, Pod};
use crate::kubesvc::ObjectKey;
use crate::kubewatch::{self, Change, WatchOptions};

/// Where the agents' policies go.
pub trait PolicySink: 'static {
    /// On the agent of `bridge`, in one transaction: remove `delete`, add or replace
    /// `upsert`. Returns the policies it refused (left as they were).
    fn set(
        &self,
        bridge: BridgeKind,
        upsert: Vec<NetworkPolicy>,
        delete: Vec<String>,
    ) -> impl Future<Output = Result<Vec<PolicyRefused>, PluginError>>;
}

impl PolicySink for Driver {
    async fn set(
        &self,
        bridge: BridgeKind,
        upsert: Vec<NetworkPolicy>,
        delete: Vec<String>,
    ) -> Result<Vec<PolicyRefused>, PluginError> {
        self.agent(bridge)
            .set_network_policies(upsert, delete)
            .await
            .map_err(|e| PluginError::agent(bridge, e))
    }
}

/// Why policies could not be put in place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetpolError {
    #[error("network policies not applied on the {bridge} bridge (try again): {problem}")]
    Apply { bridge: String, problem: String },
    #[error("the network policy controller has stopped")]
    Stopped,
}

/// This host's pods changed (CNI ADD or DEL, or start): the whole set. `added` is the pod an
/// ADD read from the API (its labels and ports), for when the watch has not shown it yet.
/// Answered when policies including this state are in the agents.
#[derive(Message)]
#[rtype(result = "Result<(), NetpolError>")]
pub struct LocalPods {
    pub pods: BTreeMap<ObjectKey, LocalPod>,
    pub added: Option<Box<Pod>>,
}

/// Answered `true` once the three resources were listed and the result applied.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct WaitSynced;

/// The resources followed, by their index in `listed`.
const NAMESPACES: usize = 0;
const PODS: usize = 1;
const POLICIES: usize = 2;

/// The controller (see the module contract).
pub struct PolicyController<S: PolicySink> {
    sink: Arc<S>,
    namespaces: BTreeMap<String, Labels>,
    pods: BTreeMap<ObjectKey, PodInfo>,
    policies: BTreeMap<ObjectKey, KubePolicy>,
    local: BTreeMap<ObjectKey, LocalPod>,
    listed: [bool; 3],
    /// What each agent has, by bridge rank.
    applied: [BTreeMap<String, NetworkPolicy>; 2],
    /// Versions an agent refused (not sent again until they change).
    agent_refused: [BTreeMap<String, NetworkPolicy>; 2],
    /// The last refusal logged per Kubernetes policy.
    refused: BTreeMap<ObjectKey, String>,
    /// Every change counts one; `done` is the last one a completed transaction included.
    generation: u64,
    done: u64,
    in_flight: bool,
    waiters: Vec<(u64, oneshot::Sender<Result<(), NetpolError>>)>,
    /// The generation that completed the lists, once they are.
    synced_at: Option<u64>,
    synced_waiters: Vec<oneshot::Sender<bool>>,
}

const BRIDGES: [BridgeKind; 2] = [BridgeKind::Vlan, BridgeKind::Vxlan];

impl<S: PolicySink> Actor for PolicyController<S> {
    type Context = Context<Self>;
}

impl<S: PolicySink> PolicyController<S> {
    fn new(sink: Arc<S>) -> Self {
        PolicyController {
            sink,
            namespaces: BTreeMap::new(),
            pods: BTreeMap::new(),
            policies: BTreeMap::new(),
            local: BTreeMap::new(),
            listed: [false; 3],
            applied: Default::default(),
            agent_refused: Default::default(),
            refused: BTreeMap::new(),
            generation: 0,
            done: 0,
            in_flight: false,
            waiters: Vec::new(),
            synced_at: None,
            synced_waiters: Vec::new(),
        }
    }

    /// Something changed: count it, and start a transaction unless one is under way.
    fn changed(&mut self, ctx: &mut Context<Self>) {
        self.generation += 1;
        self.kick(ctx);
    }

    fn listed(&mut self, which: usize) {
        self.listed[which] = true;
        if self.synced_at.is_none() && self.listed.iter().all(|l| *l) {
            self.synced_at = Some(self.generation + 1);
        }
    }

    /// Every policy resolved, by bridge rank; refused ones keep what their agents have.
    fn desired(&mut self) -> [BTreeMap<String, NetworkPolicy>; 2] {
        let view = View {
            namespaces: &self.namespaces,
            pods: &self.pods,
            local: &self.local,
        };
        let mut out: [BTreeMap<String, NetworkPolicy>; 2] = Default::default();
        let mut refusals = BTreeMap::new();
        for (key, policy) in &self.policies {
            match resolve::resolve(key, policy, &view) {
                Ok(list) => {
                    for (bridge, p) in list {
                        out[usize::from(bridge_rank(bridge))].insert(p.id.clone(), p);
                    }
                }
                Err(reason) => {
                    refusals.insert(key.clone(), reason);
                    // Not half-applied: what the agents have of it stays.
                    let own =
                        |id: &String| *id == key.to_string() || id.starts_with(&format!("{key}@"));
                    for (rank, applied) in self.applied.iter().enumerate() {
                        for (id, p) in applied.iter().filter(|(id, _)| own(id)) {
                            out[rank].insert(id.clone(), p.clone());
                        }
                    }
                }
            }
        }
        for (key, reason) in &refusals {
            if self.refused.get(key) != Some(reason) {
                tracing::warn!(policy = %key, %reason, "network policy refused; not applied");
            }
        }
        self.refused = refusals;
        out
    }

    /// Start a transaction for everything up to the current generation.
    fn kick(&mut self, ctx: &mut Context<Self>) {
        if self.in_flight || self.done == self.generation {
            return;
        }
        let generation = self.generation;
        let desired = self.desired();
        let mut work = Vec::new();
        for bridge in BRIDGES {
            let rank = usize::from(bridge_rank(bridge));
            let (applied, refused) = (&self.applied[rank], &self.agent_refused[rank]);
            let upsert: Vec<NetworkPolicy> = desired[rank]
                .values()
                .filter(|p| applied.get(&p.id) != Some(*p) && refused.get(&p.id) != Some(*p))
                .cloned()
                .collect();
            let delete: Vec<String> = applied
                .keys()
                .filter(|id| !desired[rank].contains_key(*id))
                .cloned()
                .collect();
            if !upsert.is_empty() || !delete.is_empty() {
                work.push((bridge, upsert, delete));
            }
        }
        if work.is_empty() {
            self.finished(generation, Vec::new(), ctx);
            return;
        }
        self.in_flight = true;
        let sink = self.sink.clone();
        let transactions = async move {
            let mut results = Vec::new();
            for (bridge, upsert, delete) in work {
                let result = sink.set(bridge, upsert.clone(), delete.clone()).await;
                results.push((bridge, upsert, delete, result));
            }
            results
        };
        ctx.spawn(
            transactions
                .into_actor(self)
                .map(move |results, act, ctx| act.finished(generation, results, ctx)),
        );
    }

    /// Transactions up to `generation` ended: book what the agents have, answer who waited.
    #[allow(clippy::type_complexity)]
    fn finished(
        &mut self,
        generation: u64,
        results: Vec<(
            BridgeKind,
            Vec<NetworkPolicy>,
            Vec<String>,
            Result<Vec<PolicyRefused>, PluginError>,
        )>,
        ctx: &mut Context<Self>,
    ) {
        self.in_flight = false;
        let mut failure = None;
        for (bridge, upsert, delete, result) in results {
            let rank = usize::from(bridge_rank(bridge));
            match result {
                Ok(refused) => {
                    for id in &delete {
                        self.applied[rank].remove(id);
                        self.agent_refused[rank].remove(id);
                    }
                    for p in upsert {
                        if refused.iter().any(|r| r.policy == p.id) {
                            self.agent_refused[rank].insert(p.id.clone(), p);
                        } else {
                            self.agent_refused[rank].remove(&p.id);
                            self.applied[rank].insert(p.id.clone(), p);
                        }
                    }
                    tracing::debug!(
                        bridge = ?bridge,
                        policies = self.applied[rank].len(),
                        "network policies applied"
                    );
                }
                Err(e) => {
                    tracing::warn!(bridge = ?bridge, error = %e, "network policies not applied; retrying");
                    failure = Some(NetpolError::Apply {
                        bridge: bridge.name().to_string(),
                        problem: e.to_string(),
                    });
                }
            }
        }
        match &failure {
            None => self.done = self.done.max(generation),
            Some(_) => {
                ctx.run_later(Duration::from_secs(1), |act, ctx| act.changed(ctx));
            }
        }
        let (answered, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiters)
            .into_iter()
            .partition(|(g, _)| *g <= generation);
        self.waiters = waiting;
        for (_, tx) in answered {
            let _ = tx.send(failure.clone().map_or(Ok(()), Err));
        }
        if self.synced_at.is_some_and(|g| self.done >= g) {
            for tx in self.synced_waiters.drain(..) {
                let _ = tx.send(true);
            }
        }
        if failure.is_none() {
            self.kick(ctx);
        }
    }
}

impl<S: PolicySink> Handler<LocalPods> for PolicyController<S> {
    type Result = ResponseFuture<Result<(), NetpolError>>;

    fn handle(&mut self, msg: LocalPods, ctx: &mut Context<Self>) -> Self::Result {
        self.local = msg.pods;
        if let Some(pod) = msg.added {
            let key = ObjectKey::of(&pod.metadata);
            if let Some(info) = PodInfo::of(&pod) {
                self.pods.entry(key).or_insert(info);
            }
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.push((self.generation + 1, tx));
        self.changed(ctx);
        Box::pin(async move { rx.await.unwrap_or(Err(NetpolError::Stopped)) })
    }
}

impl<S: PolicySink> Handler<WaitSynced> for PolicyController<S> {
    type Result = ResponseFuture<bool>;

    fn handle(&mut self, _: WaitSynced, _: &mut Context<Self>) -> Self::Result {
        if self.synced_at.is_some_and(|g| self.done >= g) {
            return Box::pin(async { true });
        }
        let (tx, rx) = oneshot::channel();
        self.synced_waiters.push(tx);
        Box::pin(async move { rx.await.unwrap_or(false) })
    }
}

impl<S: PolicySink> StreamHandler<Change<Namespace>> for PolicyController<S> {
    fn handle(&mut self, change: Change<Namespace>, ctx: &mut Context<Self>) {
        let labels = |ns: &Namespace| Labels::from(ns.metadata.labels.clone().unwrap_or_default());
        let name = |ns: &Namespace| ns.metadata.name.clone().unwrap_or_default();
        match change {
            Change::Listed(list) => {
                self.namespaces = list.iter().map(|ns| (name(ns), labels(ns))).collect();
                self.listed(NAMESPACES);
            }
            Change::Applied(ns) => {
                if self.namespaces.get(&name(&ns)) == Some(&labels(&ns)) {
                    return;
                }
                self.namespaces.insert(name(&ns), labels(&ns));
            }
            Change::Deleted(ns) => {
                self.namespaces.remove(&name(&ns));
            }
        }
        self.changed(ctx);
    }

    fn finished(&mut self, _: &mut Context<Self>) {}
}

impl<S: PolicySink> StreamHandler<Change<Pod>> for PolicyController<S> {
    fn handle(&mut self, change: Change<Pod>, ctx: &mut Context<Self>) {
        match change {
            Change::Listed(list) => {
                self.pods = list
                    .iter()
                    .filter_map(|p| Some((ObjectKey::of(&p.metadata), PodInfo::of(p)?)))
                    .collect();
                self.listed(PODS);
            }
            Change::Applied(pod) => {
                let key = ObjectKey::of(&pod.metadata);
                let info = PodInfo::of(&pod);
                // Most pod updates are status the policies do not read.
                if self.pods.get(&key) == info.as_ref() {
                    return;
                }
                match info {
                    Some(info) => self.pods.insert(key, info),
                    None => self.pods.remove(&key),
                };
            }
            Change::Deleted(pod) => {
                self.pods.remove(&ObjectKey::of(&pod.metadata));
            }
        }
        self.changed(ctx);
    }

    fn finished(&mut self, _: &mut Context<Self>) {}
}

impl<S: PolicySink> StreamHandler<Change<KubePolicy>> for PolicyController<S> {
    fn handle(&mut self, change: Change<KubePolicy>, ctx: &mut Context<Self>) {
        match change {
            Change::Listed(list) => {
                self.policies = list
                    .into_iter()
                    .map(|p| (ObjectKey::of(&p.metadata), p))
                    .collect();
                self.listed(POLICIES);
            }
            Change::Applied(p) => {
                self.policies.insert(ObjectKey::of(&p.metadata), p);
            }
            Change::Deleted(p) => {
                self.policies.remove(&ObjectKey::of(&p.metadata));
            }
        }
        self.changed(ctx);
    }

    fn finished(&mut self, _: &mut Context<Self>) {}
}

/// How the rest of netplugin talks to the controller.
#[derive(Clone)]
pub struct PolicyHandle {
    local: Recipient<LocalPods>,
    synced: Recipient<WaitSynced>,
}

impl std::fmt::Debug for PolicyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyHandle").finish_non_exhaustive()
    }
}

impl PolicyHandle {
    /// This host's pods are now `pods` (after an ADD, with the pod it read); returns when the
    /// policies that follow are in the agents.
    pub async fn local_pods(
        &self,
        pods: BTreeMap<ObjectKey, LocalPod>,
        added: Option<Pod>,
    ) -> Result<(), NetpolError> {
        self.local
            .send(LocalPods {
                pods,
                added: added.map(Box::new),
            })
            .await
            .unwrap_or(Err(NetpolError::Stopped))
    }

    /// Wait (at most `limit`) until the first lists are in and applied; whether they are.
    pub async fn wait_synced(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.synced.send(WaitSynced))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(false)
    }
}

/// Start the controller (in the current actix system) following the API server of `client`.
pub fn start<S: PolicySink>(client: &KubeClient, sink: Arc<S>, opts: WatchOptions) -> PolicyHandle {
    let namespaces = kubewatch::follow::<Namespace>(client, opts);
    let pods = kubewatch::follow::<Pod>(client, opts);
    let policies = kubewatch::follow::<KubePolicy>(client, opts);
    let addr = PolicyController::create(move |ctx| {
        ctx.add_stream(namespaces);
        ctx.add_stream(pods);
        ctx.add_stream(policies);
        PolicyController::new(sink)
    });
    PolicyHandle {
        local: addr.clone().recipient(),
        synced: addr.recipient(),
    }
}

/// This host's pods as the driver has them: each local endpoint that names a Kubernetes pod,
/// with its addresses, tenant (VRF) and bridge.
pub fn local_pods(driver: &Driver) -> BTreeMap<ObjectKey, LocalPod> {
    let mut out: BTreeMap<ObjectKey, LocalPod> = BTreeMap::new();
    for ep in driver.local_endpoints() {
        let oper = &ep.oper;
        if oper.pod_namespace.is_empty() || oper.ep_common_name.is_empty() {
            continue;
        }
        let key = ObjectKey {
            namespace: oper.pod_namespace.clone(),
            name: oper.ep_common_name.clone(),
        };
        let ips = [&oper.ip_address, &oper.ipv6_address]
            .into_iter()
            .filter_map(|a| a.split('/').next()?.parse::<std::net::IpAddr>().ok());
        let pod = out.entry(key).or_insert_with(|| LocalPod {
            ips: Vec::new(),
            vrf: oper.tenant.clone(),
            bridge: ep.kind,
        });
        pod.ips.extend(ips);
    }
    out
}
