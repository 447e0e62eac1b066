//! The ofnet master: the hub agents register with, relaying endpoints between hosts and
//! fanning policy rules out to every agent (reference §5.1).
//!
//! Actors, no shared maps:
//! - [`Registry`]: the registered agents, each with its [`Peer`] (one connection task and a
//!   bounded queue per agent) and when it was last heard from. It is the only actor that
//!   sends to agents: the other two hand it a [`Relay`].
//! - [`EndpointDb`]: every endpoint announced (newest `Timestamp` wins), by id, with its
//!   originator.
//! - [`PolicyDb`]: every policy rule, by id.
//!
//! One message type per RPC method: [`RegisterNode`], [`UnRegisterNode`] (registry),
//! [`EndpointAdd`], [`EndpointDel`] (endpoint DB); the RPC server's sessions (one task per
//! connection, see [`crate::rpc`]) decode each request into its message. The host daemon adds
//! rules, withdraws departed hosts ([`ClearNode`]) and reads the state through
//! [`MasterHandle`].
//!
//! Ordering: a relay's arguments are serialized once and queued on every agent's peer, which
//! sends them in order. A new agent's peer greets every new connection with a snapshot
//! (every endpoint of other hosts, every rule) taken when that connection opens, before the
//! relays queued since registration: replaying those on top of the snapshot ends at the
//! current state. An agent whose queue is full (it stopped reading, or cannot keep up) is
//! dropped: its connection and backlog are discarded and a new peer re-syncs it from a fresh
//! snapshot.

use crate::model::{Endpoint, Node, PolicyRule};
use crate::rpc::{self, Params, Peer, RpcError, RpcServer};
use crate::timestamp;
use actix::prelude::*;
use futures::future::LocalBoxFuture;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// `OfnetMaster.RegisterNode`: store the agent, then push it the state.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), String>")]
pub struct RegisterNode(pub Node);

/// `OfnetMaster.UnRegisterNode`: forget the agent.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct UnRegisterNode(pub Node);

/// `OfnetMaster.EndpointAdd`: store (unless older than what is known), relay to the others.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct EndpointAdd(pub Endpoint);

/// `OfnetMaster.EndpointDel`: forget (unless older than what is known), relay to the others.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct EndpointDel(pub Endpoint);

/// Add a rule and send it to every agent (a rule with the same id is replaced).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct AddRule(pub PolicyRule);

/// Remove a rule everywhere; true if it existed.
#[derive(Debug, Message)]
#[rtype(result = "bool")]
pub struct DelRule(pub String);

/// A host is gone (the reference's `ClearNode`): withdraw the endpoints it originated from
/// every other agent. Answers how many endpoints were withdrawn.
#[derive(Debug, Message)]
#[rtype(result = "usize")]
pub struct ClearNode(pub IpAddr);

/// May a connection from this address be served? Always, unless the master was started
/// restricted ([`MasterHandle::start_restricted`]): then only from an allowed host.
#[derive(Debug, Message)]
#[rtype(result = "bool")]
pub struct Admit(pub SocketAddr);

/// Allow (`true`) or stop allowing connections from a host (a restricted master's list).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct AllowHost(pub IpAddr, pub bool);

/// Ask an agent to register (the reference's `AddNode`: calls `OfnetAgent.AddMaster` on it).
#[derive(Debug, Message)]
#[rtype(result = "Result<(), String>")]
pub struct AddNode(pub Node);

/// Queue `method(params)` on every agent but those on host `except`.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Relay {
    pub method: &'static str,
    pub params: Params,
    pub except: Option<String>,
}

impl Relay {
    /// Encode `value` as `method`'s params and hand it to the registry (the only actor that
    /// sends to agents); a value that cannot be encoded is logged, never half-sent.
    fn send(
        registry: &Addr<Registry>,
        method: &'static str,
        value: &impl serde::Serialize,
        except: Option<String>,
    ) {
        match rpc::encode_params(method, value) {
            Ok(params) => registry.do_send(Relay {
                method,
                params,
                except,
            }),
            Err(e) => tracing::warn!(error = %e, method, "cannot relay"),
        }
    }
}

/// Endpoints not originated by `host` (all when `None`), for a greeting or inspection.
#[derive(Debug, Message)]
#[rtype(result = "Vec<Endpoint>")]
pub struct Endpoints(pub Option<String>);

/// Every rule.
#[derive(Debug, Message)]
#[rtype(result = "Vec<PolicyRule>")]
pub struct Rules;

/// The registry's part of the export.
#[derive(Debug, Message)]
#[rtype(result = "(Node, BTreeMap<String, Node>, BTreeMap<String, AgentStats>)")]
struct InspectAgents;

/// The address agents are told to call back (known once the RPC server is bound).
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct SetAddress(Node);

/// What the master knows about one agent besides its address.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct AgentStats {
    /// When it registered (RFC 3339).
    pub registered: String,
    /// When it last registered or announced an endpoint (RFC 3339).
    pub last_heard: String,
    /// Calls queued to it and not yet answered.
    pub backlog: usize,
    /// How often it was dropped for falling behind and re-synced.
    pub resyncs: u64,
}

/// The master's state as JSON: the reference's `/debug/ofnet` shape, `AgentStats` filled.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct MasterExport {
    pub my_addr: String,
    pub my_port: u16,
    pub agent_db: BTreeMap<String, Node>,
    pub endpoint_db: BTreeMap<String, Endpoint>,
    pub policy_db: BTreeMap<String, PolicyRule>,
    pub agent_stats: BTreeMap<String, AgentStats>,
}

struct Agent {
    node: Node,
    peer: Peer,
    registered: String,
    last_heard: String,
    resyncs: u64,
}

/// Who hears the master's counts and RPC calls (netmaster turns them into Prometheus metrics;
/// this crate knows no metrics library). Called on the master's own thread, after each change.
pub trait MasterObserver: Send + Sync + 'static {
    /// An RPC call was served (`ok`: answered without an error).
    fn call(&self, method: &str, ok: bool);
    /// Agents registered now.
    fn agents(&self, count: usize);
    /// Endpoints known now.
    fn endpoints(&self, count: usize);
    /// Policy rules held now.
    fn rules(&self, count: usize);
}

/// An observer, if any.
type Observer = Option<Arc<dyn MasterObserver>>;

/// The agents (see the module documentation).
pub struct Registry {
    me: Node,
    agents: BTreeMap<String, Agent>,
    endpoints: Addr<EndpointDb>,
    rules: Addr<PolicyDb>,
    /// Hosts allowed to connect, with how many reasons each (`None`: anyone may).
    allowed: Option<BTreeMap<IpAddr, usize>>,
    /// When a refused address was last logged (one line per address a minute).
    refusals: BTreeMap<IpAddr, std::time::Instant>,
    observer: Observer,
}

/// A refused address is logged again after this long.
const REFUSAL_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

impl Actor for Registry {
    type Context = Context<Self>;
}

impl Registry {
    fn report(&self) {
        if let Some(o) = &self.observer {
            o.agents(self.agents.len());
        }
    }

    /// A peer to `node` whose every new connection first receives the complete state.
    fn peer(&self, node: &Node, addr: SocketAddr) -> Peer {
        let endpoints = self.endpoints.clone();
        let rules = self.rules.clone();
        let host = node.host_addr.clone();
        let greeting: rpc::Greeting = std::rc::Rc::new(move || -> LocalBoxFuture<'static, _> {
            let (endpoints, rules, host) = (endpoints.clone(), rules.clone(), host.clone());
            Box::pin(async move {
                let mut calls = Vec::new();
                for ep in endpoints
                    .send(Endpoints(Some(host)))
                    .await
                    .unwrap_or_default()
                {
                    if let Ok(v) = serde_json::to_value(ep) {
                        calls.push(("OfnetAgent.EndpointAdd".to_string(), v));
                    }
                }
                for rule in rules.send(Rules).await.unwrap_or_default() {
                    if let Ok(v) = serde_json::to_value(rule) {
                        calls.push(("PolicyAgent.AddRule".to_string(), v));
                    }
                }
                calls
            })
        });
        let peer = Peer::with_greeting(addr, greeting);
        // Connect (and so send the snapshot) now rather than at the next relay.
        let first = peer.clone();
        actix_rt::spawn(async move {
            if let Err(e) = first.connect().await {
                tracing::warn!(error = %e, "cannot reach a registered agent yet");
            }
        });
        peer
    }
}

impl Handler<RegisterNode> for Registry {
    type Result = Result<(), String>;

    fn handle(&mut self, RegisterNode(node): RegisterNode, _: &mut Context<Self>) -> Self::Result {
        let addr = node
            .socket_addr()
            .ok_or_else(|| format!("agent address {} is not ip:port", node.key()))?;
        let now = timestamp::now();
        if let Some(old) = self.agents.remove(&node.key()) {
            // Registering again (a new connection, a new master term): start a fresh sync.
            old.peer.close();
        }
        let peer = self.peer(&node, addr);
        tracing::info!(agent = %node.key(), "agent registered");
        self.agents.insert(
            node.key(),
            Agent {
                node,
                peer,
                registered: now.clone(),
                last_heard: now,
                resyncs: 0,
            },
        );
        self.report();
        Ok(())
    }
}

impl Handler<UnRegisterNode> for Registry {
    type Result = ();

    fn handle(&mut self, UnRegisterNode(node): UnRegisterNode, _: &mut Context<Self>) {
        if let Some(agent) = self.agents.remove(&node.key()) {
            agent.peer.close();
            tracing::info!(agent = %node.key(), "agent unregistered");
        }
        self.report();
    }
}

impl Handler<Relay> for Registry {
    type Result = ();

    fn handle(&mut self, relay: Relay, _: &mut Context<Self>) {
        let method: Arc<str> = relay.method.into();
        let mut behind = Vec::new();
        let mut heard = None;
        for (key, agent) in &mut self.agents {
            if Some(&agent.node.host_addr) == relay.except.as_ref() {
                heard.get_or_insert_with(timestamp::now);
                agent.last_heard = heard.clone().unwrap_or_default();
                continue;
            }
            match agent
                .peer
                .notify_encoded(method.clone(), relay.params.clone())
            {
                Ok(()) => {}
                Err(RpcError::Full { .. } | RpcError::Closed(_)) => behind.push(key.clone()),
                Err(e) => tracing::warn!(agent = %key, error = %e, "relay failed"),
            }
        }
        for key in behind {
            let Some(agent) = self.agents.get(&key) else {
                continue;
            };
            tracing::warn!(agent = %key, "agent too far behind: dropped, re-syncing");
            agent.peer.close();
            let Some(addr) = agent.node.socket_addr() else {
                continue;
            };
            let peer = self.peer(&agent.node, addr);
            if let Some(agent) = self.agents.get_mut(&key) {
                agent.peer = peer;
                agent.resyncs += 1;
            }
        }
    }
}

impl Handler<Admit> for Registry {
    type Result = bool;

    fn handle(&mut self, Admit(peer): Admit, _: &mut Context<Self>) -> bool {
        let Some(allowed) = &self.allowed else {
            return true;
        };
        let ip = match peer.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        if allowed.contains_key(&ip) {
            return true;
        }
        let now = std::time::Instant::now();
        if self.refusals.len() > 1024 {
            self.refusals
                .retain(|_, at| now.duration_since(*at) < REFUSAL_LOG_EVERY);
        }
        let log = self
            .refusals
            .get(&ip)
            .is_none_or(|at| now.duration_since(*at) >= REFUSAL_LOG_EVERY);
        if log {
            self.refusals.insert(ip, now);
            tracing::warn!(%peer, "ofnet RPC connection refused: not a registered netplugin host");
        }
        false
    }
}

impl Handler<AllowHost> for Registry {
    type Result = ();

    fn handle(&mut self, AllowHost(host, allow): AllowHost, _: &mut Context<Self>) {
        let Some(allowed) = &mut self.allowed else {
            return;
        };
        if allow {
            *allowed.entry(host).or_default() += 1;
        } else if let Some(n) = allowed.get_mut(&host) {
            *n -= 1;
            if *n == 0 {
                allowed.remove(&host);
            }
        }
    }
}

impl Handler<AddNode> for Registry {
    type Result = ResponseFuture<Result<(), String>>;

    fn handle(&mut self, AddNode(node): AddNode, _: &mut Context<Self>) -> Self::Result {
        let me = self.me.clone();
        Box::pin(async move {
            let addr = node
                .socket_addr()
                .ok_or_else(|| format!("agent address {} is not ip:port", node.key()))?;
            let peer = Peer::new(addr);
            let done = peer
                .call::<_, Value>("OfnetAgent.AddMaster", &me)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string());
            peer.close();
            done
        })
    }
}

impl Handler<SetAddress> for Registry {
    type Result = ();

    fn handle(&mut self, SetAddress(me): SetAddress, _: &mut Context<Self>) {
        self.me = me;
    }
}

impl Handler<InspectAgents> for Registry {
    type Result = MessageResult<InspectAgents>;

    fn handle(&mut self, _: InspectAgents, _: &mut Context<Self>) -> Self::Result {
        let nodes = self
            .agents
            .iter()
            .map(|(k, a)| (k.clone(), a.node.clone()))
            .collect();
        let stats = self
            .agents
            .iter()
            .map(|(k, a)| {
                (
                    k.clone(),
                    AgentStats {
                        registered: a.registered.clone(),
                        last_heard: a.last_heard.clone(),
                        backlog: a.peer.backlog(),
                        resyncs: a.resyncs,
                    },
                )
            })
            .collect();
        MessageResult((self.me.clone(), nodes, stats))
    }
}

/// True when `new` is older than `have` (both stamped); unstamped announcements always apply.
fn older(new: &Endpoint, have: &Endpoint) -> bool {
    match (
        timestamp::parse(&new.timestamp),
        timestamp::parse(&have.timestamp),
    ) {
        (Some(n), Some(h)) => n < h,
        _ => false,
    }
}

/// The same endpoint as far as any switch is concerned (stamps and host-local fields aside).
fn same_endpoint(a: &Endpoint, b: &Endpoint) -> bool {
    a.endpoint_id == b.endpoint_id
        && a.ip_addr == b.ip_addr
        && a.ipv6_addr == b.ipv6_addr
        && a.mac == b.mac
        && a.vrf == b.vrf
        && a.vlan == b.vlan
        && a.vni == b.vni
        && a.endpoint_group == b.endpoint_group
        && a.originator_ip == b.originator_ip
}

fn origin(ep: &Endpoint) -> Option<String> {
    ep.originator_ip.map(|a| a.to_string())
}

/// Every endpoint announced (see the module documentation).
pub struct EndpointDb {
    endpoints: BTreeMap<String, Endpoint>,
    registry: Option<Addr<Registry>>,
    observer: Observer,
}

impl Actor for EndpointDb {
    type Context = Context<Self>;
}

impl EndpointDb {
    fn report(&self) {
        if let Some(o) = &self.observer {
            o.endpoints(self.endpoints.len());
        }
    }

    fn relay(&self, method: &'static str, ep: &Endpoint) {
        let Some(registry) = &self.registry else {
            return;
        };
        Relay::send(registry, method, ep, origin(ep));
    }
}

#[derive(Debug, Message)]
#[rtype(result = "()")]
struct SetRegistry(Addr<Registry>);

impl Handler<SetRegistry> for EndpointDb {
    type Result = ();

    fn handle(&mut self, SetRegistry(r): SetRegistry, _: &mut Context<Self>) {
        self.registry = Some(r);
    }
}

impl Handler<EndpointAdd> for EndpointDb {
    type Result = ();

    fn handle(&mut self, EndpointAdd(ep): EndpointAdd, _: &mut Context<Self>) {
        if let Some(have) = self.endpoints.get_mut(&ep.endpoint_id) {
            if older(&ep, have) {
                return;
            }
            if same_endpoint(have, &ep) {
                // The same endpoint from another source (its agent, the store): one endpoint,
                // nothing relayed; keep the announcement's stamp.
                if have.timestamp.is_empty() {
                    have.timestamp = ep.timestamp;
                }
                return;
            }
        }
        self.relay("OfnetAgent.EndpointAdd", &ep);
        self.endpoints.insert(ep.endpoint_id.clone(), ep);
        self.report();
    }
}

impl Handler<EndpointDel> for EndpointDb {
    type Result = ();

    fn handle(&mut self, EndpointDel(ep): EndpointDel, _: &mut Context<Self>) {
        match self.endpoints.get(&ep.endpoint_id) {
            None => return,
            Some(have) if older(&ep, have) => return,
            Some(_) => {}
        }
        if let Some(have) = self.endpoints.remove(&ep.endpoint_id) {
            self.relay("OfnetAgent.EndpointDel", &have);
        }
        self.report();
    }
}

impl Handler<ClearNode> for EndpointDb {
    type Result = usize;

    fn handle(&mut self, ClearNode(host): ClearNode, _: &mut Context<Self>) -> usize {
        let gone: Vec<String> = self
            .endpoints
            .values()
            .filter(|ep| ep.originator_ip.map(IpAddr::V4) == Some(host))
            .map(|ep| ep.endpoint_id.clone())
            .collect();
        for id in &gone {
            if let Some(ep) = self.endpoints.remove(id) {
                tracing::info!(endpoint = %id, %host, "withdrawing the endpoint of a departed host");
                self.relay("OfnetAgent.EndpointDel", &ep);
            }
        }
        self.report();
        gone.len()
    }
}

impl Handler<Endpoints> for EndpointDb {
    type Result = MessageResult<Endpoints>;

    fn handle(&mut self, Endpoints(except): Endpoints, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.endpoints
                .values()
                .filter(|ep| except.is_none() || origin(ep) != except)
                .cloned()
                .collect(),
        )
    }
}

/// Every policy rule (see the module documentation).
pub struct PolicyDb {
    rules: BTreeMap<String, PolicyRule>,
    registry: Option<Addr<Registry>>,
    observer: Observer,
}

impl Actor for PolicyDb {
    type Context = Context<Self>;
}

impl PolicyDb {
    fn report(&self) {
        if let Some(o) = &self.observer {
            o.rules(self.rules.len());
        }
    }

    fn relay(&self, method: &'static str, rule: &PolicyRule) {
        let Some(registry) = &self.registry else {
            return;
        };
        Relay::send(registry, method, rule, None);
    }
}

impl Handler<SetRegistry> for PolicyDb {
    type Result = ();

    fn handle(&mut self, SetRegistry(r): SetRegistry, _: &mut Context<Self>) {
        self.registry = Some(r);
    }
}

impl Handler<AddRule> for PolicyDb {
    type Result = ();

    fn handle(&mut self, AddRule(rule): AddRule, _: &mut Context<Self>) {
        match self.rules.get(&rule.rule_id) {
            Some(old) if *old == rule => return,
            // Agents refuse a different rule under an existing id: replace it.
            Some(old) => self.relay("PolicyAgent.DelRule", old),
            None => {}
        }
        self.relay("PolicyAgent.AddRule", &rule);
        self.rules.insert(rule.rule_id.clone(), rule);
        self.report();
    }
}

impl Handler<DelRule> for PolicyDb {
    type Result = bool;

    fn handle(&mut self, DelRule(id): DelRule, _: &mut Context<Self>) -> bool {
        match self.rules.remove(&id) {
            Some(rule) => {
                self.relay("PolicyAgent.DelRule", &rule);
                self.report();
                true
            }
            None => false,
        }
    }
}

impl Handler<Rules> for PolicyDb {
    type Result = MessageResult<Rules>;

    fn handle(&mut self, _: Rules, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.rules.values().cloned().collect())
    }
}

/// The master's RPC methods: each request becomes its message to the actor that owns it.
#[derive(Clone)]
struct MasterService {
    registry: Addr<Registry>,
    endpoints: Addr<EndpointDb>,
    observer: Observer,
}

impl rpc::Service for MasterService {
    fn call(
        &self,
        method: String,
        params: Value,
    ) -> LocalBoxFuture<'static, Result<Value, String>> {
        let this = self.clone();
        Box::pin(async move {
            let observer = this.observer.clone();
            let result = this.dispatch(&method, params).await;
            if let Some(o) = observer {
                o.call(&method, result.is_ok());
            }
            result
        })
    }
}

impl MasterService {
    async fn dispatch(self, method: &str, params: Value) -> Result<Value, String> {
        let this = self;
        {
            let m = method;
            let gone = |_| "the master is not running".to_string();
            match m {
                "OfnetMaster.RegisterNode" => this
                    .registry
                    .send(RegisterNode(rpc::params(m, params)?))
                    .await
                    .map_err(gone)??,
                "OfnetMaster.UnRegisterNode" => this
                    .registry
                    .send(UnRegisterNode(rpc::params(m, params)?))
                    .await
                    .map_err(gone)?,
                "OfnetMaster.EndpointAdd" => this
                    .endpoints
                    .send(EndpointAdd(rpc::params(m, params)?))
                    .await
                    .map_err(gone)?,
                "OfnetMaster.EndpointDel" => this
                    .endpoints
                    .send(EndpointDel(rpc::params(m, params)?))
                    .await
                    .map_err(gone)?,
                other => return Err(format!("unknown method {other}")),
            }
            Ok(Value::Bool(true))
        }
    }
}

/// A running master and its RPC server; dropping it stops both.
pub struct MasterHandle {
    registry: Addr<Registry>,
    endpoints: Addr<EndpointDb>,
    rules: Addr<PolicyDb>,
    server: RpcServer,
}

impl MasterHandle {
    /// Start the master and serve its RPC methods on `bind` (the reference uses port 9001).
    /// `advertise` is the address agents are told to call back (`bind` when `None`).
    pub async fn start(bind: SocketAddr, advertise: Option<SocketAddr>) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(bind).await?;
        Self::start_with(listener, advertise, Vec::new(), Vec::new())
    }

    /// Start on a bound listener with the state a new leader rebuilt from the store (no agent
    /// is registered yet, so nothing is relayed).
    pub fn start_with(
        listener: tokio::net::TcpListener,
        advertise: Option<SocketAddr>,
        endpoints: Vec<Endpoint>,
        rules: Vec<PolicyRule>,
    ) -> std::io::Result<Self> {
        Self::start_inner(listener, advertise, endpoints, rules, None, None)
    }

    /// [`MasterHandle::start_with`], serving connections only from the hosts allowed with
    /// [`MasterHandle::allow_host`] (none at first); others are closed unread and logged
    /// (once a minute per address). Counts and calls are reported to `observer`.
    pub fn start_restricted(
        listener: tokio::net::TcpListener,
        advertise: Option<SocketAddr>,
        endpoints: Vec<Endpoint>,
        rules: Vec<PolicyRule>,
        observer: Observer,
    ) -> std::io::Result<Self> {
        let allowed = Some(BTreeMap::new());
        Self::start_inner(listener, advertise, endpoints, rules, allowed, observer)
    }

    /// [`MasterHandle::start_with`], reporting counts and calls to `observer`.
    pub fn start_observed(
        listener: tokio::net::TcpListener,
        advertise: Option<SocketAddr>,
        endpoints: Vec<Endpoint>,
        rules: Vec<PolicyRule>,
        observer: Observer,
    ) -> std::io::Result<Self> {
        Self::start_inner(listener, advertise, endpoints, rules, None, observer)
    }

    fn start_inner(
        listener: tokio::net::TcpListener,
        advertise: Option<SocketAddr>,
        endpoints: Vec<Endpoint>,
        rules: Vec<PolicyRule>,
        allowed: Option<BTreeMap<IpAddr, usize>>,
        observer: Observer,
    ) -> std::io::Result<Self> {
        let restricted = allowed.is_some();
        if let Some(o) = &observer {
            o.agents(0);
            o.endpoints(endpoints.len());
            o.rules(rules.len());
        }
        let endpoints = EndpointDb {
            endpoints: endpoints
                .into_iter()
                .map(|e| (e.endpoint_id.clone(), e))
                .collect(),
            registry: None,
            observer: observer.clone(),
        }
        .start();
        let rules = PolicyDb {
            rules: rules.into_iter().map(|r| (r.rule_id.clone(), r)).collect(),
            registry: None,
            observer: observer.clone(),
        }
        .start();
        let local = advertise.unwrap_or(listener.local_addr()?);
        let registry = Registry {
            me: Node {
                host_addr: local.ip().to_string(),
                host_port: local.port(),
            },
            agents: BTreeMap::new(),
            endpoints: endpoints.clone(),
            rules: rules.clone(),
            allowed,
            refusals: BTreeMap::new(),
            observer: observer.clone(),
        }
        .start();
        endpoints.do_send(SetRegistry(registry.clone()));
        rules.do_send(SetRegistry(registry.clone()));
        let gate: Option<rpc::Gate> = restricted.then(|| {
            let registry = registry.clone();
            std::rc::Rc::new(move |peer| -> LocalBoxFuture<'static, bool> {
                let registry = registry.clone();
                Box::pin(async move { registry.send(Admit(peer)).await.unwrap_or(false) })
            }) as rpc::Gate
        });
        let server = rpc::serve_gated(
            listener,
            MasterService {
                registry: registry.clone(),
                endpoints: endpoints.clone(),
                observer,
            },
            gate,
        )?;
        Ok(MasterHandle {
            registry,
            endpoints,
            rules,
            server,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub async fn add_rule(&self, rule: PolicyRule) -> Result<(), String> {
        self.rules
            .send(AddRule(rule))
            .await
            .map_err(|e| e.to_string())
    }

    /// True if the rule existed.
    pub async fn del_rule(&self, id: impl Into<String>) -> Result<bool, String> {
        self.rules
            .send(DelRule(id.into()))
            .await
            .map_err(|e| e.to_string())
    }

    /// An endpoint from the durable record (as if its agent announced it).
    pub async fn add_endpoint(&self, ep: Endpoint) -> Result<(), String> {
        self.endpoints
            .send(EndpointAdd(ep))
            .await
            .map_err(|e| e.to_string())
    }

    /// An endpoint gone from the durable record (as if its agent withdrew it).
    pub async fn del_endpoint(&self, ep: Endpoint) -> Result<(), String> {
        self.endpoints
            .send(EndpointDel(ep))
            .await
            .map_err(|e| e.to_string())
    }

    /// Allow connections from `host` (a restricted master); calls count: the host stays
    /// allowed until as many `allow_host(host, false)` (no effect on an open master).
    pub async fn allow_host(&self, host: IpAddr, allow: bool) -> Result<(), String> {
        self.registry
            .send(AllowHost(host, allow))
            .await
            .map_err(|e| e.to_string())
    }

    /// Withdraw every endpoint `host` (a VTEP address) originated; the count withdrawn. Agents
    /// are not dropped: an agent's RPC address need not be its VTEP address (several hosts'
    /// agents may share one), so a departed host's agent stays until it registers again or
    /// unregisters.
    pub async fn clear_node(&self, host: IpAddr) -> Result<usize, String> {
        self.endpoints
            .send(ClearNode(host))
            .await
            .map_err(|e| e.to_string())
    }

    /// Ask the agent serving RPC at `agent` to register with this master.
    pub async fn add_node(&self, agent: Node) -> Result<(), String> {
        self.registry
            .send(AddNode(agent))
            .await
            .map_err(|e| e.to_string())?
    }

    pub async fn inspect(&self) -> Result<MasterExport, String> {
        let err = |e: MailboxError| e.to_string();
        let (me, agent_db, agent_stats) = self.registry.send(InspectAgents).await.map_err(err)?;
        let endpoint_db = self
            .endpoints
            .send(Endpoints(None))
            .await
            .map_err(err)?
            .into_iter()
            .map(|e| (e.endpoint_id.clone(), e))
            .collect();
        let policy_db = self
            .rules
            .send(Rules)
            .await
            .map_err(err)?
            .into_iter()
            .map(|r| (r.rule_id.clone(), r))
            .collect();
        Ok(MasterExport {
            my_addr: me.host_addr,
            my_port: me.host_port,
            agent_db,
            endpoint_db,
            policy_db,
            agent_stats,
        })
    }
}

impl Drop for MasterHandle {
    fn drop(&mut self) {
        // The actors stop with their last address; the agents' connections with the registry.
        self.registry.do_send(Shutdown);
    }
}

/// Close every agent connection and stop.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct Shutdown;

impl Handler<Shutdown> for Registry {
    type Result = ();

    fn handle(&mut self, _: Shutdown, ctx: &mut Context<Self>) {
        for agent in self.agents.values() {
            agent.peer.close();
        }
        self.agents.clear();
        ctx.stop();
    }
}
