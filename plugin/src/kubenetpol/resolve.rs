//! One Kubernetes NetworkPolicy (`networking.k8s.io/v1`) resolved, for this host, to the
//! datapath's policies ([`ofnet::netpol`]): selectors to addresses, named ports to numbers.
//!
//! Contract of [`resolve`]:
//! - The policy applies to the pods of its namespace its `podSelector` selects (empty: all
//!   of them); only this host's pods ([`LocalPod`]) are given to the datapath, per bridge and
//!   per VRF (tenant). One datapath policy per (bridge, VRF) with such pods, id
//!   `namespace/name` (`namespace/name@vrf` when its pods are in several VRFs).
//! - `policyTypes`: as written; absent, `Ingress` always and `Egress` when the policy has
//!   egress rules. A direction in `policyTypes` without rules denies everything.
//! - Peers: `podSelector` alone selects in the policy's namespace, `namespaceSelector` alone
//!   all pods of the selected namespaces, both together the selected pods of the selected
//!   namespaces; `ipBlock` (with `except`) is an address block. No peers: every address. A
//!   selector that matches no pod is a peer that matches nothing.
//! - Ports: protocol TCP (default), UDP or SCTP; a number, a range (`endPort`), a name, or
//!   none (every port of the protocol). No ports: everything. A named port is resolved
//!   against the container ports of the pods on the receiving side: for ingress the policy's
//!   own pods (the rule is split by number, each part naming its pods), for egress the peers
//!   (split by number, each part with the peers that have it; an `ipBlock` has no named
//!   ports). A pod without the name is not allowed by that port.
//! - A pod's addresses: `status.podIPs` (or `podIP`), and for this host's pods also the
//!   addresses of their endpoints (known at CNI ADD, before kubelet reports them).
//!   Host-network pods are not selected (their address is the node's).
//! - What the API server would have refused (an unknown operator, protocol or policy type, a
//!   peer with an `ipBlock` and a selector, an `endPort` on a named port, a bad CIDR) refuses
//!   the whole policy with the reason; nothing of it is applied.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::networking::v1::{
    NetworkPolicy as KubePolicy, NetworkPolicyPeer, NetworkPolicyPort,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use ofnet::BridgeKind;
use ofnet::netpol::{NetworkPolicy, Peer, Port, Protocol, Rule};

use super::selector::{Labels, Selector};
use crate::kubeobj::Pod;
use crate::kubesvc::ObjectKey;

/// A pod as policies see it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodInfo {
    pub labels: Labels,
    /// `status.podIPs`.
    pub ips: Vec<IpAddr>,
    /// Named container ports.
    pub ports: NamedPorts,
}

/// A pod's named container ports, (name, protocol) → number, sorted; a boxed slice like
/// [`Labels`] (most pods name none or one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamedPorts(Box<[NamedPort]>);

/// One named container port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NamedPort {
    name: Box<str>,
    protocol: Protocol,
    number: u16,
}

impl NamedPorts {
    /// The number the pod gives port `name` of `protocol`.
    pub fn get(&self, name: &str, protocol: Protocol) -> Option<u16> {
        self.0
            .binary_search_by(|p| (&*p.name, p.protocol).cmp(&(name, protocol)))
            .ok()
            .map(|i| self.0[i].number)
    }
}

/// Ports in any order; of a (name, protocol) given twice the last number counts.
impl FromIterator<((String, Protocol), u16)> for NamedPorts {
    fn from_iter<I: IntoIterator<Item = ((String, Protocol), u16)>>(ports: I) -> NamedPorts {
        let map: BTreeMap<(String, Protocol), u16> = ports.into_iter().collect();
        NamedPorts(
            map.into_iter()
                .map(|((name, protocol), number)| NamedPort {
                    name: name.into_boxed_str(),
                    protocol,
                    number,
                })
                .collect(),
        )
    }
}

impl PodInfo {
    /// What policies use of `pod`; `None` for a host-network pod (never selected).
    pub fn of(pod: &Pod) -> Option<PodInfo> {
        let spec = pod.spec.as_ref();
        if spec.and_then(|s| s.host_network) == Some(true) {
            return None;
        }
        let status = pod.status.as_ref();
        let mut ips: Vec<IpAddr> = status
            .and_then(|s| s.pod_ips.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|p| p.ip.parse().ok())
            .collect();
        if ips.is_empty()
            && let Some(ip) = status
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.parse().ok())
        {
            ips.push(ip);
        }
        // A pod that has ended gives its address back; it must not keep an allowance.
        if matches!(
            status.and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        ) {
            ips.clear();
        }
        let ports = spec
            .into_iter()
            .flat_map(|s| {
                s.containers
                    .iter()
                    .chain(s.init_containers.iter().flatten())
            })
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                let name = p.name.clone().filter(|n| !n.is_empty())?;
                let protocol = protocol(p.protocol.as_deref()).ok()?;
                let number = u16::try_from(p.container_port).ok().filter(|n| *n != 0)?;
                Some(((name, protocol), number))
            })
            .collect();
        Some(PodInfo {
            labels: pod.metadata.labels.clone().unwrap_or_default().into(),
            ips,
            ports,
        })
    }
}

/// A pod of this host: its endpoint's addresses, VRF and bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPod {
    pub ips: Vec<IpAddr>,
    pub vrf: String,
    pub bridge: BridgeKind,
}

/// What the policies are resolved against.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// Namespace name → its labels.
    pub namespaces: &'a BTreeMap<String, Labels>,
    pub pods: &'a BTreeMap<ObjectKey, PodInfo>,
    pub local: &'a BTreeMap<ObjectKey, LocalPod>,
}

/// A policy that cannot be applied: why.
pub type Refusal = String;

fn protocol(text: Option<&str>) -> Result<Protocol, Refusal> {
    match text.unwrap_or("TCP") {
        "TCP" => Ok(Protocol::Tcp),
        "UDP" => Ok(Protocol::Udp),
        "SCTP" => Ok(Protocol::Sctp),
        other => Err(format!("protocol {other:?} is not TCP, UDP or SCTP")),
    }
}

/// A policy port, read.
enum PortSpec {
    Numeric(Port),
    Named(String, Protocol),
}

fn port_spec(p: &NetworkPolicyPort) -> Result<PortSpec, Refusal> {
    let proto = protocol(p.protocol.as_deref())?;
    let number = |n: i32| {
        u16::try_from(n)
            .ok()
            .filter(|n| *n != 0)
            .ok_or_else(|| format!("port {n} is not a port number"))
    };
    Ok(match &p.port {
        None => PortSpec::Numeric(Port {
            protocol: proto,
            port: None,
            end_port: p.end_port.map(number).transpose()?,
        }),
        Some(IntOrString::Int(n)) => PortSpec::Numeric(Port {
            protocol: proto,
            port: Some(number(*n)?),
            end_port: p.end_port.map(number).transpose()?,
        }),
        Some(IntOrString::String(name)) => {
            if p.end_port.is_some() {
                return Err(format!("endPort with the named port {name:?}"));
            }
            PortSpec::Named(name.clone(), proto)
        }
    })
}

impl<'a> View<'a> {
    /// The addresses of pod `key`: the API's and, for this host's pods, its endpoints'.
    fn ips(&self, key: &ObjectKey, info: &PodInfo) -> Vec<IpAddr> {
        let mut ips: BTreeSet<IpAddr> = info.ips.iter().copied().collect();
        if let Some(local) = self.local.get(key) {
            ips.extend(local.ips.iter().copied());
        }
        ips.into_iter().collect()
    }

    /// The pods a peer with selectors selects, for a policy in `namespace`.
    fn selected(
        &self,
        namespace: &str,
        peer: &NetworkPolicyPeer,
    ) -> Result<Vec<(&'a ObjectKey, &'a PodInfo)>, Refusal> {
        let pods = peer
            .pod_selector
            .as_ref()
            .map(Selector::new)
            .transpose()
            .map_err(|e| format!("podSelector: {e}"))?;
        let namespaces = peer
            .namespace_selector
            .as_ref()
            .map(Selector::new)
            .transpose()
            .map_err(|e| format!("namespaceSelector: {e}"))?;
        let no_labels = Labels::new();
        let view = *self;
        Ok(view
            .pods
            .iter()
            .filter(|(key, info)| {
                let in_namespace = match &namespaces {
                    None => key.namespace == namespace,
                    Some(sel) => {
                        sel.matches(view.namespaces.get(&key.namespace).unwrap_or(&no_labels))
                    }
                };
                in_namespace && pods.as_ref().is_none_or(|sel| sel.matches(&info.labels))
            })
            .collect())
    }
}

/// A pod the API server knows, with its key.
type KnownPod<'a> = (&'a ObjectKey, &'a PodInfo);

/// A rule's peers, resolved: for each peer, its address peer and (selectors) its pods.
struct Peers<'a> {
    /// `None`: no peers given, every address.
    list: Option<Vec<(Peer, Vec<KnownPod<'a>>)>>,
}

fn peers<'a>(
    view: &View<'a>,
    namespace: &str,
    given: Option<&[NetworkPolicyPeer]>,
) -> Result<Peers<'a>, Refusal> {
    let given = given.unwrap_or_default();
    if given.is_empty() {
        return Ok(Peers { list: None });
    }
    let mut list = Vec::new();
    for (i, peer) in given.iter().enumerate() {
        let at = |what: String| format!("peer {i}: {what}");
        let selectors = peer.pod_selector.is_some() || peer.namespace_selector.is_some();
        match (&peer.ip_block, selectors) {
            (Some(_), true) => {
                return Err(at(
                    "an ipBlock cannot be combined with a podSelector or namespaceSelector".into(),
                ));
            }
            (None, false) => return Err(at("no podSelector, namespaceSelector or ipBlock".into())),
            (Some(block), false) => {
                let cidr: IpNet = block
                    .cidr
                    .parse()
                    .map_err(|e| at(format!("ipBlock cidr {:?}: {e}", block.cidr)))?;
                let except = block
                    .except
                    .iter()
                    .flatten()
                    .map(|e| {
                        e.parse::<IpNet>()
                            .map_err(|err| at(format!("ipBlock except {e:?}: {err}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                list.push((Peer::IpBlock { cidr, except }, Vec::new()));
            }
            (None, true) => {
                let pods = view.selected(namespace, peer).map_err(at)?;
                let mut ips: BTreeSet<IpAddr> = BTreeSet::new();
                for (key, info) in &pods {
                    ips.extend(view.ips(key, info));
                }
                list.push((Peer::Pods(ips.into_iter().collect()), pods));
            }
        }
    }
    Ok(Peers { list: Some(list) })
}

/// The address peers of a rule's resolved peers (empty: every address).
fn peer_list(peers: &Peers<'_>) -> Vec<Peer> {
    peers
        .list
        .iter()
        .flatten()
        .map(|(p, _)| p.clone())
        .collect()
}

/// The rule for `peers` on the numeric `ports` (none: every port), if the rule has numeric
/// ports or no ports at all; named ports become rules of their own, per port number.
fn numeric_rule(peers: &[Peer], ports: &[PortSpec]) -> Vec<Rule> {
    let numeric: Vec<Port> = ports
        .iter()
        .filter_map(|p| match p {
            PortSpec::Numeric(port) => Some(*port),
            PortSpec::Named(..) => None,
        })
        .collect();
    if ports.is_empty() || !numeric.is_empty() {
        vec![Rule {
            peers: peers.to_vec(),
            ports: numeric,
            applied_to: None,
        }]
    } else {
        Vec::new()
    }
}

/// The datapath rules of one ingress rule for `targets` (the policy's pods in one group).
fn ingress_rules(
    view: &View<'_>,
    peers: &Peers<'_>,
    ports: &[PortSpec],
    targets: &[(&ObjectKey, &PodInfo, &LocalPod)],
) -> Vec<Rule> {
    let peer_list = peer_list(peers);
    let mut rules = numeric_rule(&peer_list, ports);
    for p in ports {
        let PortSpec::Named(name, proto) = p else {
            continue;
        };
        let mut by_number: BTreeMap<u16, BTreeSet<IpAddr>> = BTreeMap::new();
        for (key, info, local) in targets {
            if let Some(n) = info.ports.get(name, *proto) {
                by_number.entry(n).or_default().extend(
                    view.ips(key, info)
                        .into_iter()
                        .filter(|ip| local.ips.contains(ip)),
                );
            }
        }
        for (number, pods) in by_number {
            rules.push(Rule {
                peers: peer_list.clone(),
                ports: vec![Port::one(*proto, number)],
                applied_to: Some(pods.into_iter().collect()),
            });
        }
    }
    rules
}

/// The datapath rules of one egress rule.
fn egress_rules(view: &View<'_>, peers: &Peers<'_>, ports: &[PortSpec]) -> Vec<Rule> {
    let mut rules = numeric_rule(&peer_list(peers), ports);
    // Named ports are the destinations': the selected pods, or every pod when no peer is
    // given.
    let candidates: Vec<(&ObjectKey, &PodInfo)> = match &peers.list {
        None => view.pods.iter().collect(),
        Some(list) => list
            .iter()
            .flat_map(|(_, pods)| pods.iter().copied())
            .collect(),
    };
    for p in ports {
        let PortSpec::Named(name, proto) = p else {
            continue;
        };
        let mut by_number: BTreeMap<u16, BTreeSet<IpAddr>> = BTreeMap::new();
        for (key, info) in &candidates {
            if let Some(n) = info.ports.get(name, *proto) {
                by_number.entry(n).or_default().extend(view.ips(key, info));
            }
        }
        for (number, ips) in by_number {
            rules.push(Rule {
                peers: vec![Peer::Pods(ips.into_iter().collect())],
                ports: vec![Port::one(*proto, number)],
                applied_to: None,
            });
        }
    }
    rules
}

/// Which directions the policy isolates.
fn policy_types(policy: &KubePolicy) -> Result<(bool, bool), Refusal> {
    let spec = policy.spec.as_ref();
    match spec.and_then(|s| s.policy_types.as_ref()) {
        None => Ok((
            true,
            spec.and_then(|s| s.egress.as_ref())
                .is_some_and(|e| !e.is_empty()),
        )),
        Some(types) => {
            let (mut ingress, mut egress) = (false, false);
            for t in types {
                match t.as_str() {
                    "Ingress" => ingress = true,
                    "Egress" => egress = true,
                    other => {
                        return Err(format!("policyTypes {other:?} is not Ingress or Egress"));
                    }
                }
            }
            Ok((ingress, egress))
        }
    }
}

/// An order of bridge kinds (VLAN first), for grouping.
pub fn bridge_rank(kind: BridgeKind) -> u8 {
    match kind {
        BridgeKind::Vlan => 0,
        BridgeKind::Vxlan => 1,
        BridgeKind::Host => 2,
    }
}

/// The datapath policies of `policy` (`key` is its namespace/name) on this host, by bridge
/// (see the module contract); `Err` says why it cannot be applied.
pub fn resolve(
    key: &ObjectKey,
    policy: &KubePolicy,
    view: &View<'_>,
) -> Result<Vec<(BridgeKind, NetworkPolicy)>, Refusal> {
    let default_spec = Default::default();
    let spec = policy.spec.as_ref().unwrap_or(&default_spec);
    let (isolates_ingress, isolates_egress) = policy_types(policy)?;
    let selector = Selector::new(&spec.pod_selector.clone().unwrap_or_default())
        .map_err(|e| format!("podSelector: {e}"))?;

    // The rules' peers and ports, once (the same for every group of pods).
    let mut ingress = Vec::new();
    for (i, rule) in spec.ingress.iter().flatten().enumerate() {
        let peers = peers(view, &key.namespace, rule.from.as_deref())
            .map_err(|e| format!("ingress rule {i}: {e}"))?;
        let ports = rule
            .ports
            .iter()
            .flatten()
            .map(port_spec)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("ingress rule {i}: {e}"))?;
        ingress.push((peers, ports));
    }
    let mut egress = Vec::new();
    for (i, rule) in spec.egress.iter().flatten().enumerate() {
        let peers = peers(view, &key.namespace, rule.to.as_deref())
            .map_err(|e| format!("egress rule {i}: {e}"))?;
        let ports = rule
            .ports
            .iter()
            .flatten()
            .map(port_spec)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("egress rule {i}: {e}"))?;
        egress.push((peers, ports));
    }
    let egress_rules: Vec<Rule> = egress
        .iter()
        .flat_map(|(peers, ports)| egress_rules(view, peers, ports))
        .collect();

    // This host's pods the policy applies to, grouped by bridge and VRF.
    type Targets<'b> = Vec<(&'b ObjectKey, &'b PodInfo, &'b LocalPod)>;
    let mut groups: BTreeMap<(u8, &str), Targets<'_>> = BTreeMap::new();
    for (pod, local) in view.local {
        if pod.namespace != key.namespace {
            continue;
        }
        let Some(info) = view.pods.get(pod) else {
            continue;
        };
        if selector.matches(&info.labels) {
            groups
                .entry((bridge_rank(local.bridge), local.vrf.as_str()))
                .or_default()
                .push((pod, info, local));
        }
    }
    let vrfs: BTreeSet<&str> = groups.keys().map(|(_, vrf)| *vrf).collect();
    let mut out = Vec::new();
    for ((_, vrf), targets) in groups {
        let bridge = targets[0].2.bridge;
        let id = if vrfs.len() == 1 {
            key.to_string()
        } else {
            format!("{key}@{vrf}")
        };
        let applied_to: BTreeSet<IpAddr> = targets
            .iter()
            .flat_map(|(_, _, local)| local.ips.iter().copied())
            .collect();
        let mut p = NetworkPolicy::new(id, vrf, applied_to.into_iter().collect());
        if isolates_ingress {
            p.ingress = Some(
                ingress
                    .iter()
                    .flat_map(|(peers, ports)| ingress_rules(view, peers, ports, &targets))
                    .collect(),
            );
        }
        if isolates_egress {
            p.egress = Some(egress_rules.clone());
        }
        out.push((bridge, p));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const V: BridgeKind = BridgeKind::Vxlan;

    struct World {
        namespaces: BTreeMap<String, Labels>,
        pods: BTreeMap<ObjectKey, PodInfo>,
        local: BTreeMap<ObjectKey, LocalPod>,
    }

    fn key(ns: &str, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// Namespaces x (ns=x) and y (ns=y), pods x/a (10.0.0.1, local), x/b (10.0.0.2, local,
    /// port http=8080), y/a (10.0.1.1, remote, port http=9090); pod labels pod=<name>.
    fn world() -> World {
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let namespaces = BTreeMap::from([
            ("x".to_string(), labels(&[("ns", "x")])),
            ("y".to_string(), labels(&[("ns", "y")])),
        ]);
        let pod = |name: &str, addr: &str, ports: &[(&str, u16)]| PodInfo {
            labels: labels(&[("pod", name)]),
            ips: vec![ip(addr)],
            ports: ports
                .iter()
                .map(|(n, p)| ((n.to_string(), Protocol::Tcp), *p))
                .collect(),
        };
        let pods = BTreeMap::from([
            (key("x", "a"), pod("a", "10.0.0.1", &[])),
            (key("x", "b"), pod("b", "10.0.0.2", &[("http", 8080)])),
            (key("y", "a"), pod("a", "10.0.1.1", &[("http", 9090)])),
        ]);
        let local = |addr: &str| LocalPod {
            ips: vec![ip(addr)],
            vrf: "default".into(),
            bridge: V,
        };
        let local = BTreeMap::from([
            (key("x", "a"), local("10.0.0.1")),
            (key("x", "b"), local("10.0.0.2")),
        ]);
        World {
            namespaces,
            pods,
            local,
        }
    }

    fn run(w: &World, spec: Value) -> Result<Vec<(BridgeKind, NetworkPolicy)>, Refusal> {
        let policy: KubePolicy = serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "x"}, "spec": spec}),
        )
        .unwrap();
        let view = View {
            namespaces: &w.namespaces,
            pods: &w.pods,
            local: &w.local,
        };
        resolve(&key("x", "p"), &policy, &view)
    }

    fn one(w: &World, spec: Value) -> NetworkPolicy {
        let mut got = run(w, spec).unwrap();
        assert_eq!(got.len(), 1, "{got:#?}");
        got.remove(0).1
    }

    fn pods(list: &[&str]) -> Peer {
        Peer::Pods(list.iter().map(|a| ip(a)).collect())
    }

    #[test]
    fn empty_pod_selector_default_deny_and_policy_types_defaults() {
        let w = world();
        let p = one(&w, json!({"podSelector": {}}));
        assert_eq!(p.id, "x/p");
        assert_eq!(p.vrf, "default");
        assert_eq!(p.applied_to, vec![ip("10.0.0.1"), ip("10.0.0.2")]);
        assert_eq!(
            p.ingress,
            Some(vec![]),
            "Ingress by default, no rules: deny"
        );
        assert_eq!(p.egress, None);
        // Egress rules present: Egress too.
        let p = one(&w, json!({"podSelector": {}, "egress": [{}]}));
        assert_eq!(p.ingress, Some(vec![]));
        assert_eq!(p.egress, Some(vec![Rule::default()]));
        // Egress only, written.
        let p = one(&w, json!({"podSelector": {}, "policyTypes": ["Egress"]}));
        assert_eq!((p.ingress, p.egress), (None, Some(vec![])));
        // Selecting only remote pods: nothing on this host.
        assert!(
            run(&w, json!({"podSelector": {"matchLabels": {"pod": "c"}}}))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn peers_by_pod_namespace_both_and_ip_block() {
        let w = world();
        let p = one(
            &w,
            json!({"podSelector": {"matchLabels": {"pod": "b"}},
            "ingress": [{"from": [
                {"podSelector": {"matchLabels": {"pod": "a"}}},
                {"namespaceSelector": {"matchLabels": {"ns": "y"}}},
                {"namespaceSelector": {}, "podSelector": {"matchLabels": {"pod": "a"}}},
                {"podSelector": {"matchLabels": {"pod": "nobody"}}},
                {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24"]}},
            ]}]}),
        );
        assert_eq!(p.applied_to, vec![ip("10.0.0.2")]);
        let rules = p.ingress.unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].peers,
            vec![
                pods(&["10.0.0.1"]),
                pods(&["10.0.1.1"]),
                pods(&["10.0.0.1", "10.0.1.1"]),
                pods(&[]),
                Peer::IpBlock {
                    cidr: "10.0.0.0/16".parse().unwrap(),
                    except: vec!["10.0.1.0/24".parse().unwrap()]
                },
            ]
        );
        assert!(rules[0].ports.is_empty());
    }

    #[test]
    fn named_ports_split_by_number_ingress_by_target_egress_by_peer() {
        let w = world();
        let p = one(
            &w,
            json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                   "ingress": [{"ports": [{"port": "http"}, {"port": 81, "protocol": "UDP"}]}],
                   "egress": [{"ports": [{"port": "http"}]},
                              {"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"pod": "b"}}}],
                               "ports": [{"port": "http"}]}]}),
        );
        assert_eq!(
            p.ingress.unwrap(),
            vec![
                Rule {
                    peers: vec![],
                    ports: vec![Port::one(Protocol::Udp, 81)],
                    applied_to: None
                },
                Rule {
                    peers: vec![],
                    ports: vec![Port::one(Protocol::Tcp, 8080)],
                    applied_to: Some(vec![ip("10.0.0.2")])
                },
            ]
        );
        assert_eq!(
            p.egress.unwrap(),
            vec![
                Rule {
                    peers: vec![pods(&["10.0.0.2"])],
                    ports: vec![Port::one(Protocol::Tcp, 8080)],
                    applied_to: None
                },
                Rule {
                    peers: vec![pods(&["10.0.1.1"])],
                    ports: vec![Port::one(Protocol::Tcp, 9090)],
                    applied_to: None
                },
                Rule {
                    peers: vec![pods(&["10.0.0.2"])],
                    ports: vec![Port::one(Protocol::Tcp, 8080)],
                    applied_to: None
                },
            ]
        );
        // A name nobody has: no rule (allows nothing), the policy still isolates.
        let p = one(
            &w,
            json!({"podSelector": {}, "ingress": [{"ports": [{"port": "dns"}]}]}),
        );
        assert_eq!(p.ingress, Some(vec![]));
    }

    #[test]
    fn port_ranges_and_local_addresses_before_kubelet_reports_them() {
        let mut w = world();
        // A pod just added: no address in the API yet, its endpoint's is known here.
        w.pods.insert(
            key("x", "c"),
            PodInfo {
                labels: [("pod", "c")].into_iter().collect(),
                ..PodInfo::default()
            },
        );
        w.local.insert(
            key("x", "c"),
            LocalPod {
                ips: vec![ip("10.0.0.3"), ip("fd00::3")],
                vrf: "default".into(),
                bridge: BridgeKind::Vlan,
            },
        );
        let got = run(
            &w,
            json!({"podSelector": {},
                   "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "c"}}}],
                                "ports": [{"port": 8000, "endPort": 8080}]}]}),
        )
        .unwrap();
        assert_eq!(got.len(), 2, "one per bridge: {got:#?}");
        let (vlan, vxlan) = (&got[0], &got[1]);
        assert_eq!(vlan.0, BridgeKind::Vlan);
        assert_eq!(vlan.1.applied_to, vec![ip("10.0.0.3"), ip("fd00::3")]);
        assert_eq!(vxlan.1.applied_to, vec![ip("10.0.0.1"), ip("10.0.0.2")]);
        let rule = &vxlan.1.ingress.as_ref().unwrap()[0];
        assert_eq!(rule.peers, vec![pods(&["10.0.0.3", "fd00::3"])]);
        assert_eq!(rule.ports, vec![Port::range(Protocol::Tcp, 8000, 8080)]);
    }

    #[test]
    fn pods_in_two_vrfs_get_one_policy_each() {
        let mut w = world();
        if let Some(l) = w.local.get_mut(&key("x", "b")) {
            l.vrf = "blue".into();
        }
        let got = run(&w, json!({"podSelector": {}})).unwrap();
        let ids: Vec<(&str, &str)> = got
            .iter()
            .map(|(_, p)| (p.id.as_str(), p.vrf.as_str()))
            .collect();
        assert_eq!(ids, [("x/p@blue", "blue"), ("x/p@default", "default")]);
    }

    #[test]
    fn what_the_api_server_would_refuse_refuses_the_policy() {
        let w = world();
        for (spec, why) in [
            (
                json!({"podSelector": {}, "policyTypes": ["Sideways"]}),
                "Sideways",
            ),
            (
                json!({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}),
                "podSelector",
            ),
            (
                json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "protocol": "ICMP"}]}]}),
                "ICMP",
            ),
            (
                json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"},
                                                                  "podSelector": {}}]}]}),
                "ipBlock cannot be combined",
            ),
            (
                json!({"podSelector": {}, "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0/8"}}]}]}),
                "egress rule 0: peer 0: ipBlock cidr",
            ),
            (
                json!({"podSelector": {}, "ingress": [{"ports": [{"port": "http", "endPort": 90}]}]}),
                "endPort with the named port",
            ),
            (
                json!({"podSelector": {}, "ingress": [{"ports": [{"port": 70000}]}]}),
                "70000",
            ),
            (
                json!({"podSelector": {}, "ingress": [{"from": [{}]}]}),
                "no podSelector",
            ),
        ] {
            let err = run(&w, spec).unwrap_err();
            assert!(err.contains(why), "{why}: {err}");
        }
    }

    #[test]
    fn pod_info_reads_addresses_ports_and_skips_host_network() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "x", "labels": {"pod": "a"}},
            "spec": {"containers": [{"name": "c", "ports": [
                {"name": "http", "containerPort": 8080},
                {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                {"containerPort": 9000}]}]},
            "status": {"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}
        }))
        .unwrap();
        let info = PodInfo::of(&pod).unwrap();
        assert_eq!(info.ips, vec![ip("10.0.0.1"), ip("fd00::1")]);
        assert_eq!(info.ports.get("dns", Protocol::Udp), Some(53));
        assert_eq!(info.ports.get("http", Protocol::Tcp), Some(8080));
        // Only named ports, each under its own protocol.
        assert_eq!(info.ports.get("dns", Protocol::Tcp), None);
        assert_eq!(
            info.ports,
            [
                (("http".to_string(), Protocol::Tcp), 8080),
                (("dns".to_string(), Protocol::Udp), 53),
            ]
            .into_iter()
            .collect()
        );
        let mut host = pod.clone();
        if let Some(s) = host.spec.as_mut() {
            s.host_network = Some(true);
        }
        assert_eq!(PodInfo::of(&host), None);
        let mut done = pod;
        if let Some(s) = done.status.as_mut() {
            s.phase = Some("Succeeded".into());
        }
        assert!(PodInfo::of(&done).unwrap().ips.is_empty());
    }
}
