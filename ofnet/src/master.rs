//! The ofnet master: the hub agents register with, relaying endpoints between hosts and
//! fanning policy rules out to every agent.
//!
//! The [`Master`] actor owns the registered agents (each a [`Peer`]), every endpoint announced
//! (newest `Timestamp` wins) and every rule. Its RPC methods are the reference's:
//! `OfnetMaster.RegisterNode` (store the agent, then push it every endpoint of other hosts and
//! every rule), `OfnetMaster.UnRegisterNode`, `OfnetMaster.EndpointAdd` and
//! `OfnetMaster.EndpointDel` (store, then relay to every agent but the originator). The host
//! daemon adds rules and agents through [`MasterHandle`]. Relayed calls are queued per agent, in
//! order, without holding up the caller.

use crate::model::{Endpoint, Node, PolicyRule};
use crate::rpc::{self, Peer, RpcServer};
use crate::timestamp;
use actix::prelude::*;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// A call from an agent.
#[derive(Debug, Message)]
#[rtype(result = "Result<Value, String>")]
struct Call {
    method: String,
    params: Value,
}

/// Add a rule and send it to every agent (a rule with the same id is replaced).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct AddRule(pub PolicyRule);

/// Remove a rule everywhere.
#[derive(Debug, Message)]
#[rtype(result = "bool")]
pub struct DelRule(pub String);

/// Ask an agent to register (the reference's `AddNode`: calls `OfnetAgent.AddMaster` on it).
#[derive(Debug, Message)]
#[rtype(result = "Result<(), String>")]
pub struct AddNode(pub Node);

/// The address agents call the master back on (known once the RPC server is bound).
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct SetAddress(Node);

/// The master's state, for `/debug/ofnet`.
#[derive(Debug, Message)]
#[rtype(result = "MasterExport")]
pub struct Inspect;

/// The master's state as JSON.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct MasterExport {
    pub my_addr: String,
    pub my_port: u16,
    pub agent_db: BTreeMap<String, Node>,
    pub endpoint_db: BTreeMap<String, Endpoint>,
    pub policy_db: BTreeMap<String, PolicyRule>,
}

/// See the module documentation.
pub struct Master {
    me: Node,
    agents: BTreeMap<String, (Node, Peer)>,
    endpoints: BTreeMap<String, Endpoint>,
    rules: BTreeMap<String, PolicyRule>,
}

impl Actor for Master {
    type Context = Context<Self>;
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

impl Master {
    /// Queue `method(params)` to every agent but the one at `except`.
    fn relay<P: Serialize>(&self, method: &'static str, params: &P, except: Option<&str>) {
        for (node, peer) in self.agents.values() {
            if Some(node.host_addr.as_str()) != except {
                peer.notify(method, params);
            }
        }
    }

    fn register(&mut self, node: Node) -> Result<Value, String> {
        let addr = node
            .socket_addr()
            .ok_or_else(|| format!("agent address {} is not ip:port", node.key()))?;
        let peer = Peer::new(addr);
        for ep in self.endpoints.values() {
            if ep.originator_ip.map(|a| a.to_string()).as_deref() != Some(&node.host_addr) {
                peer.notify("OfnetAgent.EndpointAdd", ep);
            }
        }
        for rule in self.rules.values() {
            peer.notify("PolicyAgent.AddRule", rule);
        }
        tracing::info!(agent = %node.key(), "agent registered");
        self.agents.insert(node.key(), (node, peer));
        Ok(Value::Bool(true))
    }

    fn endpoint_add(&mut self, ep: Endpoint) -> Result<Value, String> {
        if let Some(have) = self.endpoints.get(&ep.endpoint_id)
            && older(&ep, have)
        {
            return Ok(Value::Bool(true));
        }
        let origin = ep.originator_ip.map(|a| a.to_string());
        self.relay("OfnetAgent.EndpointAdd", &ep, origin.as_deref());
        self.endpoints.insert(ep.endpoint_id.clone(), ep);
        Ok(Value::Bool(true))
    }

    fn endpoint_del(&mut self, ep: Endpoint) -> Result<Value, String> {
        match self.endpoints.get(&ep.endpoint_id) {
            None => return Ok(Value::Bool(true)),
            Some(have) if older(&ep, have) => return Ok(Value::Bool(true)),
            Some(_) => {}
        }
        self.endpoints.remove(&ep.endpoint_id);
        let origin = ep.originator_ip.map(|a| a.to_string());
        self.relay("OfnetAgent.EndpointDel", &ep, origin.as_deref());
        Ok(Value::Bool(true))
    }
}

impl Handler<Call> for Master {
    type Result = Result<Value, String>;

    fn handle(&mut self, Call { method, params }: Call, _: &mut Context<Self>) -> Self::Result {
        let m = method.as_str();
        match m {
            "OfnetMaster.RegisterNode" => self.register(rpc::params(m, params)?),
            "OfnetMaster.UnRegisterNode" => {
                let node: Node = rpc::params(m, params)?;
                self.agents.remove(&node.key());
                Ok(Value::Bool(true))
            }
            "OfnetMaster.EndpointAdd" => self.endpoint_add(rpc::params(m, params)?),
            "OfnetMaster.EndpointDel" => self.endpoint_del(rpc::params(m, params)?),
            other => Err(format!("unknown method {other}")),
        }
    }
}

impl Handler<AddRule> for Master {
    type Result = ();

    fn handle(&mut self, AddRule(rule): AddRule, _: &mut Context<Self>) {
        if let Some(old) = self.rules.get(&rule.rule_id)
            && *old != rule
        {
            // Agents refuse a different rule under an existing id: replace it.
            self.relay("PolicyAgent.DelRule", old, None);
        }
        self.relay("PolicyAgent.AddRule", &rule, None);
        self.rules.insert(rule.rule_id.clone(), rule);
    }
}

impl Handler<DelRule> for Master {
    type Result = bool;

    fn handle(&mut self, DelRule(id): DelRule, _: &mut Context<Self>) -> bool {
        match self.rules.remove(&id) {
            Some(rule) => {
                self.relay("PolicyAgent.DelRule", &rule, None);
                true
            }
            None => false,
        }
    }
}

impl Handler<AddNode> for Master {
    type Result = ResponseFuture<Result<(), String>>;

    fn handle(&mut self, AddNode(node): AddNode, _: &mut Context<Self>) -> Self::Result {
        let me = self.me.clone();
        Box::pin(async move {
            let addr = node
                .socket_addr()
                .ok_or_else(|| format!("agent address {} is not ip:port", node.key()))?;
            Peer::new(addr)
                .call::<_, Value>("OfnetAgent.AddMaster", &me)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

impl Handler<SetAddress> for Master {
    type Result = ();

    fn handle(&mut self, SetAddress(me): SetAddress, _: &mut Context<Self>) {
        self.me = me;
    }
}

impl Handler<Inspect> for Master {
    type Result = MessageResult<Inspect>;

    fn handle(&mut self, _: Inspect, _: &mut Context<Self>) -> Self::Result {
        MessageResult(MasterExport {
            my_addr: self.me.host_addr.clone(),
            my_port: self.me.host_port,
            agent_db: self
                .agents
                .iter()
                .map(|(k, (n, _))| (k.clone(), n.clone()))
                .collect(),
            endpoint_db: self.endpoints.clone(),
            policy_db: self.rules.clone(),
        })
    }
}

#[derive(Clone)]
struct MasterService(Addr<Master>);

impl rpc::Service for MasterService {
    fn call(
        &self,
        method: String,
        params: Value,
    ) -> futures::future::LocalBoxFuture<'static, Result<Value, String>> {
        let addr = self.0.clone();
        Box::pin(async move {
            addr.send(Call { method, params })
                .await
                .map_err(|_| "the master is not running".to_string())?
        })
    }
}

/// A running master and its RPC server.
pub struct MasterHandle {
    addr: Addr<Master>,
    server: RpcServer,
}

impl MasterHandle {
    /// Start the master and serve its RPC methods on `bind` (the reference uses port 9001).
    /// `advertise` is the address agents are told to call back (`bind` when `None`).
    pub async fn start(bind: SocketAddr, advertise: Option<SocketAddr>) -> std::io::Result<Self> {
        let addr = Master {
            me: Node {
                host_addr: String::new(),
                host_port: 0,
            },
            agents: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            rules: BTreeMap::new(),
        }
        .start();
        let server = rpc::serve(bind, MasterService(addr.clone())).await?;
        let local = advertise.unwrap_or(server.local_addr());
        // Handled before anything sent after this returns.
        addr.do_send(SetAddress(Node {
            host_addr: local.ip().to_string(),
            host_port: local.port(),
        }));
        Ok(MasterHandle { addr, server })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub async fn add_rule(&self, rule: PolicyRule) -> Result<(), String> {
        self.addr
            .send(AddRule(rule))
            .await
            .map_err(|e| e.to_string())
    }

    /// True if the rule existed.
    pub async fn del_rule(&self, id: impl Into<String>) -> Result<bool, String> {
        self.addr
            .send(DelRule(id.into()))
            .await
            .map_err(|e| e.to_string())
    }

    /// Ask the agent serving RPC at `agent` to register with this master.
    pub async fn add_node(&self, agent: Node) -> Result<(), String> {
        self.addr
            .send(AddNode(agent))
            .await
            .map_err(|e| e.to_string())?
    }

    pub async fn inspect(&self) -> Result<MasterExport, String> {
        self.addr.send(Inspect).await.map_err(|e| e.to_string())
    }
}
