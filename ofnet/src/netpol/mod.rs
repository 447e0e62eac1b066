//! Kubernetes NetworkPolicy in the switch: the datapath API and its compilation to flows.
//!
//! The caller (netplugin's Kubernetes watcher) resolves every selector; this module gets one
//! [`NetworkPolicy`] per Kubernetes object with addresses only: the pods it applies to, and per
//! rule the peers (pod addresses, `ipBlock`s) and ports (named ports already resolved to
//! numbers). Semantics are `networking.k8s.io/v1`'s:
//!
//! - a pod (address) that some policy with `ingress: Some(..)` applies to is isolated for
//!   ingress, likewise for egress; a pod no policy selects for a direction is not isolated;
//! - an isolated pod admits what the union of the rules of every policy selecting it allows;
//!   a policy with `Some(vec![])` allows nothing (default deny);
//! - a rule with no peers allows every address, with no ports every protocol and port;
//! - replies of an allowed connection always pass (conntrack), and a connection a change no
//!   longer allows stops (see `docs/networkpolicy.md`).
//!
//! [`NetworkPolicy::check`] refuses what cannot be enforced exactly (today: SCTP, whose ports
//! the userspace datapath's conntrack does not track); the agent then leaves that policy as it
//! was and applies the others. [`compile`] turns the set of policies into table 7 and 8 flows
//! with OVS `conjunction`, so a rule with M peers and N ports costs about M + N flows.

pub mod compile;
pub mod flows;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// One Kubernetes NetworkPolicy, selectors resolved to addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkPolicy {
    /// `namespace/name`: the policy's identity (upsert replaces, delete removes by it).
    pub id: String,
    /// The VRF (tenant) of the pods it applies to: the `vrf` of their endpoints. Flows appear
    /// once a network of that VRF exists on the bridge.
    pub vrf: String,
    /// The addresses (IPv4 and/or IPv6) of the pods its `podSelector` selects. Give the pods
    /// this switch serves: ingress is enforced where the destination pod is, egress where the
    /// source pod is (an address of another host's pod is harmless, just unused).
    pub applied_to: Vec<IpAddr>,
    /// `Some(rules)` when `policyTypes` has `Ingress` (empty: deny all ingress); `None`
    /// when the policy does not isolate ingress.
    pub ingress: Option<Vec<Rule>>,
    /// `Some(rules)` when `policyTypes` has `Egress` (empty: deny all egress).
    pub egress: Option<Vec<Rule>>,
}

/// One `ingress` (`from` + `ports`) or `egress` (`to` + `ports`) rule.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Rule {
    /// Who may connect (ingress) or be connected to (egress). Empty: every address. A peer
    /// that resolved to no pod is `Peer::Pods(vec![])` and matches nothing.
    pub peers: Vec<Peer>,
    /// Which destination ports. Empty: every protocol and port.
    pub ports: Vec<Port>,
    /// The pods of the policy this rule is for, when not all of `applied_to` (a named port
    /// resolves to different numbers on different pods: the caller splits the rule by number
    /// and gives each part its pods). `None`: every pod of `applied_to`.
    #[serde(default)]
    pub applied_to: Option<Vec<IpAddr>>,
}

/// A rule's peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Peer {
    /// Pod addresses (a `podSelector` and/or `namespaceSelector` resolved); IPv4 and IPv6.
    Pods(Vec<IpAddr>),
    /// An `ipBlock`: `cidr` but the `except` prefixes (each inside `cidr`).
    IpBlock { cidr: IpNet, except: Vec<IpNet> },
}

/// The transport protocol of a [`Port`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    pub fn ip_proto(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Sctp => 132,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }
}

/// A rule's port: a protocol, and a port, or a range `port..=end_port`, or (`port: None`)
/// every port of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    pub protocol: Protocol,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub end_port: Option<u16>,
}

impl Port {
    /// One port of `protocol`.
    pub fn one(protocol: Protocol, port: u16) -> Port {
        Port {
            protocol,
            port: Some(port),
            end_port: None,
        }
    }

    /// The range `port..=end_port` of `protocol`.
    pub fn range(protocol: Protocol, port: u16, end_port: u16) -> Port {
        Port {
            protocol,
            port: Some(port),
            end_port: Some(end_port),
        }
    }
}

/// A direction of a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }
}

/// A policy the switch cannot enforce exactly, named with the reason. The agent leaves the
/// policy as it was (installed or absent) and applies the others.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("network policy {policy}: {reason}")]
pub struct PolicyRefused {
    pub policy: String,
    pub reason: String,
}

impl NetworkPolicy {
    /// A policy of `id` in `vrf` applying to `applied_to`, isolating nothing yet.
    pub fn new(id: impl Into<String>, vrf: impl Into<String>, applied_to: Vec<IpAddr>) -> Self {
        NetworkPolicy {
            id: id.into(),
            vrf: vrf.into(),
            applied_to,
            ingress: None,
            egress: None,
        }
    }

    /// The rules of `dir`, if the policy isolates that direction.
    pub fn rules(&self, dir: Direction) -> Option<&[Rule]> {
        match dir {
            Direction::Ingress => self.ingress.as_deref(),
            Direction::Egress => self.egress.as_deref(),
        }
    }

    /// Whether the switch can enforce this policy exactly; the error names the policy, the
    /// rule and why.
    pub fn check(&self) -> Result<(), PolicyRefused> {
        let refuse = |reason: String| PolicyRefused {
            policy: self.id.clone(),
            reason,
        };
        if self.id.is_empty() {
            return Err(refuse("the policy id (namespace/name) is empty".into()));
        }
        if self.vrf.is_empty() {
            return Err(refuse("no VRF (tenant) given".into()));
        }
        for dir in [Direction::Ingress, Direction::Egress] {
            for (i, rule) in self.rules(dir).unwrap_or_default().iter().enumerate() {
                let at = |what: String| refuse(format!("{} rule {i}: {what}", dir.name()));
                for p in &rule.ports {
                    if p.protocol == Protocol::Sctp {
                        return Err(at(
                            "SCTP cannot be enforced: the userspace datapath's connection tracker does not track SCTP ports, so replies and established associations could not be told apart from new ones".into(),
                        ));
                    }
                    match (p.port, p.end_port) {
                        (None, Some(end)) => {
                            return Err(at(format!("endPort {end} without a port")));
                        }
                        (Some(0), _) => return Err(at("port 0".into())),
                        (Some(start), Some(end)) if end < start => {
                            return Err(at(format!("endPort {end} is below port {start}")));
                        }
                        _ => {}
                    }
                }
                for peer in &rule.peers {
                    if let Peer::IpBlock { cidr, except } = peer {
                        for e in except {
                            let inside = match (cidr, e) {
                                (IpNet::V4(c), IpNet::V4(x)) => c.trunc().contains(x),
                                (IpNet::V6(c), IpNet::V6(x)) => c.trunc().contains(x),
                                _ => false,
                            };
                            if !inside {
                                return Err(at(format!(
                                    "ipBlock except {e} is not inside its cidr {cidr}"
                                )));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The policies an agent enforces, by id, with the conjunction id of each rule (kept while
/// the rule exists, so an update of one policy rewrites only its own flows).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policies {
    policies: BTreeMap<String, NetworkPolicy>,
    /// Conjunction id of (policy, direction, rule index).
    conj: BTreeMap<(String, Direction, usize), u32>,
    next_conj: u32,
    free_conj: Vec<u32>,
    /// Every policy's flows, merged by flow.
    index: compile::Index,
}

impl Policies {
    pub fn get(&self, id: &str) -> Option<&NetworkPolicy> {
        self.policies.get(id)
    }

    pub fn ids(&self) -> impl Iterator<Item = &String> {
        self.policies.keys()
    }

    pub fn iter(&self) -> impl Iterator<Item = &NetworkPolicy> {
        self.policies.values()
    }

    pub fn len(&self) -> usize {
        self.policies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The conjunction id of rule `index` of `dir` of `policy`.
    pub fn conj_id(&self, policy: &str, dir: Direction, index: usize) -> Option<u32> {
        self.conj.get(&(policy.to_string(), dir, index)).copied()
    }

    /// Every policy's contribution, merged by flow.
    pub fn index(&self) -> &compile::Index {
        &self.index
    }

    /// What policy `id` puts in the tables (empty if there is no such policy).
    pub fn contribution(&self, id: &str) -> compile::Contribution {
        self.get(id)
            .map(|p| compile::contribution(p, self))
            .unwrap_or_default()
    }

    /// Add or replace `p` (checked by the caller).
    pub fn upsert(&mut self, p: NetworkPolicy) {
        let id = p.id.clone();
        let old = self.contribution(&id);
        self.index.remove(&old);
        let want: Vec<(Direction, usize)> = [Direction::Ingress, Direction::Egress]
            .into_iter()
            .flat_map(|d| (0..p.rules(d).map_or(0, <[Rule]>::len)).map(move |i| (d, i)))
            .collect();
        self.release(&id, |d, i| !want.contains(&(d, i)));
        for (d, i) in want {
            let key = (id.clone(), d, i);
            if !self.conj.contains_key(&key) {
                let c = self.free_conj.pop().unwrap_or_else(|| {
                    self.next_conj += 1;
                    self.next_conj
                });
                self.conj.insert(key, c);
            }
        }
        let new = compile::contribution(&p, self);
        self.index.add(&new);
        self.policies.insert(id, p);
    }

    /// Forget policy `id`; the removed policy, if it was there.
    pub fn remove(&mut self, id: &str) -> Option<NetworkPolicy> {
        let old = self.contribution(id);
        self.index.remove(&old);
        self.release(id, |_, _| true);
        self.policies.remove(id)
    }

    fn release(&mut self, id: &str, drop: impl Fn(Direction, usize) -> bool) {
        let gone: Vec<(String, Direction, usize)> = self
            .conj
            .range((id.to_string(), Direction::Ingress, 0)..)
            .take_while(|((p, _, _), _)| p == id)
            .filter(|((_, d, i), _)| drop(*d, *i))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            if let Some(c) = self.conj.remove(&k) {
                self.free_conj.push(c);
            }
        }
    }
}
