//! Kubernetes NetworkPolicy in the datapath (`ofnet::netpol`) on real OVS: two emulated VXLAN
//! hosts with dual-stack pods (network namespaces), probes over TCP and UDP, policies applied
//! through the agent API.
//!
//! Host A has pods a1, a2, a3; host B has pod b1. Every pod serves TCP and UDP on 80, 81 and
//! 1000..=1010, answering with its name.
#![allow(clippy::unwrap_used)]

mod common;

use common::netpol::{Server, Session, dual_stack_pod, reach};
use common::vxlan_hosts::{VxlanHost, exchange, two_hosts};
use common::{dumped_flows, init_tracing, settle};
use ipnet::IpNet;
use ofnet::netpol::{Peer, Port, Protocol, Rule};
use ofnet::{AgentError, Network, NetworkPolicy};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use testbed::Pod;

const VLAN: u16 = 2;
const VRF: &str = "t1";

fn v4(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, 4, last)
}

fn v6(last: u8) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x99, 4, 0, 0, 0, 0, u16::from(last))
}

/// Both addresses of pod `last`.
fn addrs(last: u8) -> Vec<IpAddr> {
    vec![IpAddr::V4(v4(last)), IpAddr::V6(v6(last))]
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// Pod numbers: a1..a3 on host A, b1 on host B.
const A1: u8 = 1;
const A2: u8 = 2;
const A3: u8 = 3;
const B1: u8 = 11;

/// The ports every probe tries, in this order.
const ALL: &[&str] = &["tcp:80", "tcp:81", "udp:80", "udp:81"];

struct Lab {
    a: VxlanHost,
    b: VxlanHost,
    pods: Vec<(u8, Pod)>,
    _servers: Vec<Server>,
}

impl Lab {
    async fn start() -> Lab {
        let (a, b) = two_hosts().await;
        for h in [&a, &b] {
            h.agent
                .add_network(Network {
                    vlan: VLAN,
                    vni: 5002,
                    gateway: None,
                    vrf: VRF.into(),
                })
                .await
                .unwrap();
        }
        let mut pods = Vec::new();
        for last in [A1, A2, A3] {
            pods.push((last, dual_stack_pod(&a, v4(last), v6(last), VLAN).await));
        }
        pods.push((B1, dual_stack_pod(&b, v4(B1), v6(B1), VLAN).await));
        exchange(&a, &b).await;
        let mut ports: Vec<u16> = vec![80, 81];
        ports.extend(1000..=1010);
        let servers = pods
            .iter()
            .map(|(last, p)| Server::start(p.netns().name(), &format!("p{last}"), &ports))
            .collect();
        Lab {
            a,
            b,
            pods,
            _servers: servers,
        }
    }

    fn ns(&self, last: u8) -> String {
        self.pods
            .iter()
            .find(|(l, _)| *l == last)
            .map(|(_, p)| p.netns().name().to_string())
            .unwrap()
    }

    /// Which of `targets` pod `from` reaches on pod `to` over IPv4.
    async fn reach(&self, from: u8, to: u8, targets: &[&str]) -> Vec<bool> {
        reach(&self.ns(from), &v4(to).to_string(), targets).await
    }

    /// Over IPv6.
    async fn reach6(&self, from: u8, to: u8, targets: &[&str]) -> Vec<bool> {
        reach(&self.ns(from), &v6(to).to_string(), targets).await
    }

    /// Apply on both hosts (each enforces its own pods) and let the datapaths settle.
    async fn apply(&self, upsert: Vec<NetworkPolicy>, delete: &[&str]) {
        for h in [&self.a, &self.b] {
            let refused = h
                .agent
                .set_network_policies(
                    upsert.clone(),
                    delete.iter().map(|s| s.to_string()).collect(),
                )
                .await
                .unwrap();
            assert!(refused.is_empty(), "{refused:?}");
        }
        settle(&self.a.ovs);
        settle(&self.b.ovs);
    }
}

fn ingress(id: &str, to: u8, rules: Vec<Rule>) -> NetworkPolicy {
    let mut p = NetworkPolicy::new(id, VRF, addrs(to));
    p.ingress = Some(rules);
    p
}

fn egress(id: &str, from: u8, rules: Vec<Rule>) -> NetworkPolicy {
    let mut p = NetworkPolicy::new(id, VRF, addrs(from));
    p.egress = Some(rules);
    p
}

fn from_pods(pods: &[u8], ports: Vec<Port>) -> Rule {
    Rule {
        peers: vec![Peer::Pods(pods.iter().flat_map(|p| addrs(*p)).collect())],
        ports,
        applied_to: None,
    }
}

const T: bool = true;
const F: bool = false;

#[actix_rt::test]
async fn policies_allow_exactly_the_union_of_their_rules_on_one_and_two_hosts() {
    testbed::require!(Root, Ovs);
    if common::netpol::tools_missing(module_path!()) {
        return;
    }
    init_tracing();
    let lab = Lab::start().await;

    // No policy: everything open, on one host and across hosts.
    for (from, to) in [(A1, A2), (A2, A1), (B1, A1), (A1, B1)] {
        assert_eq!(
            lab.reach(from, to, ALL).await,
            [T, T, T, T],
            "{from}→{to} open"
        );
    }

    // Default deny ingress of a2: nobody reaches it, a2 still reaches others (egress not
    // isolated) and gets their replies.
    lab.apply(vec![ingress("ns/deny-a2", A2, vec![])], &[])
        .await;
    for from in [A1, A3, B1] {
        assert_eq!(
            lab.reach(from, A2, ALL).await,
            [F, F, F, F],
            "{from}→a2 denied"
        );
    }
    assert_eq!(
        lab.reach(A2, A1, ALL).await,
        [T, T, T, T],
        "a2→a1: replies pass"
    );
    assert_eq!(
        lab.reach(A2, B1, ALL).await,
        [T, T, T, T],
        "a2→b1 across hosts"
    );

    // Allow a1 and b1 on TCP 80 only (an address set of pods on two hosts).
    lab.apply(
        vec![ingress(
            "ns/allow-a2",
            A2,
            vec![from_pods(&[A1, B1], vec![Port::one(Protocol::Tcp, 80)])],
        )],
        &[],
    )
    .await;
    assert_eq!(
        lab.reach(A1, A2, ALL).await,
        [T, F, F, F],
        "a1: tcp 80 only"
    );
    assert_eq!(
        lab.reach(B1, A2, ALL).await,
        [T, F, F, F],
        "b1: tcp 80 only"
    );
    assert_eq!(lab.reach(A3, A2, ALL).await, [F, F, F, F], "a3: not a peer");

    // A second policy adds up: a3 on UDP 81.
    lab.apply(
        vec![ingress(
            "ns/allow-a3-udp",
            A2,
            vec![from_pods(&[A3], vec![Port::one(Protocol::Udp, 81)])],
        )],
        &[],
    )
    .await;
    assert_eq!(lab.reach(A3, A2, ALL).await, [F, F, F, T], "a3: udp 81");
    assert_eq!(lab.reach(A1, A2, ALL).await, [T, F, F, F], "a1 unchanged");

    // Update the first: a1 on every port, b1 no more.
    lab.apply(
        vec![ingress("ns/allow-a2", A2, vec![from_pods(&[A1], vec![])])],
        &[],
    )
    .await;
    assert_eq!(lab.reach(A1, A2, ALL).await, [T, T, T, T], "a1: all ports");
    assert_eq!(lab.reach(B1, A2, ALL).await, [F, F, F, F], "b1 removed");

    // Port range (endPort), from anywhere.
    let range = ["tcp:999", "tcp:1000", "tcp:1007", "tcp:1008", "udp:1003"];
    lab.apply(
        vec![ingress(
            "ns/range",
            A2,
            vec![Rule {
                peers: vec![],
                ports: vec![Port::range(Protocol::Tcp, 1000, 1007)],
                applied_to: None,
            }],
        )],
        &[],
    )
    .await;
    assert_eq!(
        lab.reach(B1, A2, &range).await,
        [F, T, T, F, F],
        "tcp 1000..=1007"
    );

    // ipBlock with except: the pods' /16 but a3.
    lab.apply(
        vec![ingress(
            "ns/block",
            A2,
            vec![Rule {
                peers: vec![Peer::IpBlock {
                    cidr: net("10.99.0.0/16"),
                    except: vec![net("10.99.4.3/32")],
                }],
                ports: vec![Port::one(Protocol::Tcp, 81)],
                applied_to: None,
            }],
        )],
        &[],
    )
    .await;
    assert_eq!(
        lab.reach(B1, A2, ALL).await,
        [F, T, F, F],
        "b1 in the block"
    );
    assert_eq!(
        lab.reach(A3, A2, ALL).await,
        [F, F, F, T],
        "a3 excepted (udp 81 is another policy)"
    );

    // Delete all ingress policies of a2: open again.
    lab.apply(
        vec![],
        &[
            "ns/deny-a2",
            "ns/allow-a2",
            "ns/allow-a3-udp",
            "ns/range",
            "ns/block",
        ],
    )
    .await;
    assert_eq!(lab.reach(A3, A2, ALL).await, [T, T, T, T], "deleted: open");

    // Default deny egress of a1; others still reach a1 and get its replies.
    lab.apply(vec![egress("ns/deny-out-a1", A1, vec![])], &[])
        .await;
    for to in [A2, B1] {
        assert_eq!(lab.reach(A1, to, ALL).await, [F, F, F, F], "a1→{to} denied");
    }
    assert_eq!(
        lab.reach(A2, A1, ALL).await,
        [T, T, T, T],
        "a2→a1: a1's replies pass"
    );
    assert_eq!(
        lab.reach(B1, A1, ALL).await,
        [T, T, T, T],
        "b1→a1 across hosts"
    );

    // Egress to b1 on TCP 81 and to a3 on UDP.
    lab.apply(
        vec![egress(
            "ns/out-a1",
            A1,
            vec![
                from_pods(&[B1], vec![Port::one(Protocol::Tcp, 81)]),
                from_pods(
                    &[A3],
                    vec![Port {
                        protocol: Protocol::Udp,
                        port: None,
                        end_port: None,
                    }],
                ),
            ],
        )],
        &[],
    )
    .await;
    assert_eq!(lab.reach(A1, B1, ALL).await, [F, T, F, F], "a1→b1 tcp 81");
    assert_eq!(lab.reach(A1, A3, ALL).await, [F, F, T, T], "a1→a3 udp");
    assert_eq!(
        lab.reach(A1, A2, ALL).await,
        [F, F, F, F],
        "a1→a2 still denied"
    );

    // Ingress isolation of b1 (on host B) and egress of a1 (on host A) both apply.
    lab.apply(
        vec![ingress(
            "ns/b1",
            B1,
            vec![from_pods(
                &[A1, A2],
                vec![Port::one(Protocol::Tcp, 80), Port::one(Protocol::Tcp, 81)],
            )],
        )],
        &[],
    )
    .await;
    assert_eq!(
        lab.reach(A1, B1, ALL).await,
        [F, T, F, F],
        "both allow tcp 81 only"
    );
    assert_eq!(
        lab.reach(A2, B1, ALL).await,
        [T, T, F, F],
        "a2→b1: b1's ingress"
    );
    assert_eq!(
        lab.reach(A3, B1, ALL).await,
        [F, F, F, F],
        "a3 not a peer of b1"
    );
}

#[actix_rt::test]
async fn established_connections_end_when_their_allowance_goes_and_others_stay() {
    testbed::require!(Root, Ovs);
    if common::netpol::tools_missing(module_path!()) {
        return;
    }
    init_tracing();
    let lab = Lab::start().await;
    let both = vec![Port::one(Protocol::Tcp, 80), Port::one(Protocol::Udp, 80)];
    lab.apply(
        vec![ingress(
            "ns/a2",
            A2,
            vec![from_pods(&[A1, A3, B1], both.clone())],
        )],
        &[],
    )
    .await;
    let target = v4(A2).to_string();
    let mut sessions = Vec::new();
    for from in [A1, A3, B1] {
        for proto in ["tcp", "udp"] {
            let s = Session::open(&lab.ns(from), proto, &target, 80).await;
            let (s, ok) = s.answered().await;
            assert!(ok, "{proto} session from {from} works while allowed");
            sessions.push((from, proto, s));
        }
    }
    // Long-lived sessions from a2 outward (its replies come back through its isolation).
    let out = Session::open(&lab.ns(A2), "tcp", &v4(B1).to_string(), 81).await;
    let (out, ok) = out.answered().await;
    assert!(ok, "a2's own connection to b1");

    // Only a3 stays allowed (same policy, fewer peers).
    lab.apply(
        vec![ingress("ns/a2", A2, vec![from_pods(&[A3], both.clone())])],
        &[],
    )
    .await;
    let mut kept = Vec::new();
    for (from, proto, s) in sessions {
        let (s, ok) = s.answered().await;
        assert_eq!(
            ok,
            from == A3,
            "{proto} session from {from} after the change"
        );
        kept.push((from, proto, s));
    }
    let (out, ok) = out.answered().await;
    assert!(
        ok,
        "a2's outgoing connection is not disturbed by its ingress policy"
    );
    // Twice: the cut connection stays cut (its replies too), the kept one keeps working.
    for (from, proto, s) in kept {
        let (_s, ok) = s.answered().await;
        assert_eq!(ok, from == A3, "{proto} session from {from}, again");
    }
    // New connections follow the new policy.
    assert_eq!(lab.reach(A1, A2, ALL).await, [F, F, F, F]);
    assert_eq!(lab.reach(A3, A2, ALL).await, [T, F, T, F]);

    // Allowed again: a fresh connection works (the old ones may have given up).
    lab.apply(
        vec![ingress("ns/a2", A2, vec![from_pods(&[A1, A3], both)])],
        &[],
    )
    .await;
    assert_eq!(lab.reach(A1, A2, ALL).await, [T, F, T, F]);

    // Egress: a connection out of a1 ends when an egress policy isolates a1.
    let s = Session::open(&lab.ns(A1), "tcp", &v4(B1).to_string(), 80).await;
    let (s, ok) = s.answered().await;
    assert!(ok);
    lab.apply(vec![egress("ns/a1-out", A1, vec![])], &[]).await;
    let (_s, ok) = s.answered().await;
    assert!(!ok, "a1's connection to b1 ends with a1's egress isolation");
    drop(out);
}

#[actix_rt::test]
async fn ipv6_addresses_and_blocks_are_enforced_like_ipv4() {
    testbed::require!(Root, Ovs);
    if common::netpol::tools_missing(module_path!()) {
        return;
    }
    init_tracing();
    let lab = Lab::start().await;
    assert_eq!(
        lab.reach6(B1, A2, ALL).await,
        [T, T, T, T],
        "open over IPv6"
    );
    lab.apply(
        vec![ingress(
            "ns/v6",
            A2,
            vec![
                from_pods(&[A1], vec![Port::one(Protocol::Tcp, 80)]),
                Rule {
                    peers: vec![Peer::IpBlock {
                        cidr: net("fd00:99:4::/64"),
                        except: vec![net("fd00:99:4::3/128")],
                    }],
                    ports: vec![Port::one(Protocol::Udp, 81)],
                    applied_to: None,
                },
            ],
        )],
        &[],
    )
    .await;
    assert_eq!(
        lab.reach6(A1, A2, ALL).await,
        [T, F, F, T],
        "a1: its address and the block"
    );
    assert_eq!(
        lab.reach(A1, A2, ALL).await,
        [T, F, F, F],
        "a1 over IPv4: its address only"
    );
    assert_eq!(
        lab.reach6(B1, A2, ALL).await,
        [F, F, F, T],
        "b1: in the block"
    );
    assert_eq!(lab.reach6(A3, A2, ALL).await, [F, F, F, F], "a3: excepted");
    // Neighbour discovery keeps working for an isolated pod: a2 reaches out over IPv6.
    assert_eq!(
        lab.reach6(A2, A3, ALL).await,
        [T, T, T, T],
        "a2's replies pass over IPv6"
    );
    // Egress over IPv6.
    lab.apply(
        vec![egress(
            "ns/v6-out",
            A3,
            vec![from_pods(&[B1], vec![Port::one(Protocol::Tcp, 81)])],
        )],
        &[],
    )
    .await;
    assert_eq!(lab.reach6(A3, B1, ALL).await, [F, T, F, F]);
    assert_eq!(lab.reach(A3, B1, ALL).await, [F, T, F, F]);
}

#[actix_rt::test]
async fn refused_policies_are_named_with_the_reason_and_others_still_apply() {
    testbed::require!(Root, Ovs);
    init_tracing();
    let h = common::Host::start(ofnet::AgentConfig::new(ofnet::BridgeKind::Vxlan, "br0")).await;
    h.agent
        .add_network(Network {
            vlan: VLAN,
            vni: 5002,
            gateway: None,
            vrf: VRF.into(),
        })
        .await
        .unwrap();
    let sctp = ingress(
        "ns/sctp",
        A1,
        vec![from_pods(&[A2], vec![Port::one(Protocol::Sctp, 9)])],
    );
    let err = h
        .agent
        .upsert_network_policy(sctp.clone())
        .await
        .unwrap_err();
    let AgentError::PolicyRefused(r) = &err else {
        panic!("{err}");
    };
    assert_eq!(r.policy, "ns/sctp");
    assert!(err.to_string().contains("SCTP"), "{err}");
    let bad_range = ingress(
        "ns/range",
        A1,
        vec![from_pods(&[A2], vec![Port::range(Protocol::Tcp, 90, 80)])],
    );
    let good = ingress(
        "ns/good",
        A1,
        vec![from_pods(&[A2], vec![Port::one(Protocol::Tcp, 80)])],
    );
    let refused = h
        .agent
        .set_network_policies(vec![sctp, bad_range, good], vec![])
        .await
        .unwrap();
    let names: Vec<&str> = refused.iter().map(|r| r.policy.as_str()).collect();
    assert_eq!(names, ["ns/sctp", "ns/range"]);
    assert!(
        refused[1].reason.contains("endPort 80 is below port 90"),
        "{refused:?}"
    );
    let flows = dumped_flows(&h.ovs, "br0").await;
    let of_table = |t: u8| {
        flows
            .iter()
            .filter(|f| f.starts_with(&format!("table={t},")))
            .count()
    };
    assert!(
        flows.iter().any(|f| f.contains("conj_id=")),
        "the good policy is installed: {flows:#?}"
    );
    assert!(
        !flows.iter().any(|f| f.contains("sctp")),
        "nothing of the SCTP policy"
    );
    assert!(of_table(8) > 3, "{flows:#?}");
    // An update of a good policy into a refused one leaves the installed version.
    let before = dumped_flows(&h.ovs, "br0").await;
    let worse = ingress(
        "ns/good",
        A1,
        vec![from_pods(&[A2], vec![Port::one(Protocol::Sctp, 80)])],
    );
    assert!(h.agent.upsert_network_policy(worse).await.is_err());
    assert_eq!(dumped_flows(&h.ovs, "br0").await, before);
}

#[actix_rt::test]
async fn one_policy_with_1000_peers_and_10_ports_costs_about_1010_flows() {
    testbed::require!(Root, Ovs);
    init_tracing();
    let h = common::Host::start(ofnet::AgentConfig::new(ofnet::BridgeKind::Vxlan, "br0")).await;
    h.agent
        .add_network(Network {
            vlan: VLAN,
            vni: 5002,
            gateway: None,
            vrf: VRF.into(),
        })
        .await
        .unwrap();
    let empty = dumped_flows(&h.ovs, "br0").await.len();
    let peers: Vec<IpAddr> = (0..1000u32)
        .map(|i| IpAddr::V4(Ipv4Addr::from(0x0a_63_10_00 + i)))
        .collect();
    let ports: Vec<Port> = (0..10)
        .map(|i| Port::one(Protocol::Tcp, 8000 + i))
        .collect();
    let mut p = NetworkPolicy::new("ns/big", VRF, vec![IpAddr::V4(v4(A1))]);
    p.ingress = Some(vec![Rule {
        peers: vec![Peer::Pods(peers.clone())],
        ports: ports.clone(),
        applied_to: None,
    }]);
    h.agent.upsert_network_policy(p.clone()).await.unwrap();
    let flows = dumped_flows(&h.ovs, "br0").await;
    let ingress_flows: Vec<&String> = flows.iter().filter(|f| f.starts_with("table=8,")).collect();
    let conj = ingress_flows
        .iter()
        .filter(|f| f.contains("conjunction("))
        .count();
    // 1000 peers + 10 ports + 1 pod clause, one conj_id flow, the pod's two isolation flows.
    assert_eq!(conj, 1011, "conjunction clause flows");
    assert_eq!(
        ingress_flows
            .iter()
            .filter(|f| f.contains("conj_id="))
            .count(),
        1
    );
    let all_policy = flows.len() - empty;
    assert!(
        (1011..1040).contains(&all_policy),
        "{all_policy} new flows in all for 1000 peers × 10 ports (not 10,000)"
    );
    // A second rule naming the same 1000 pods shares their flows.
    p.ingress = Some(vec![
        Rule {
            peers: vec![Peer::Pods(peers.clone())],
            ports,
            applied_to: None,
        },
        Rule {
            peers: vec![Peer::Pods(peers)],
            ports: vec![Port::one(Protocol::Udp, 53)],
            applied_to: None,
        },
    ]);
    h.agent.upsert_network_policy(p).await.unwrap();
    let flows = dumped_flows(&h.ovs, "br0").await;
    assert!(
        flows.len() - empty < all_policy + 5,
        "the second rule added {} flows",
        flows.len() - empty - all_policy
    );
    assert!(
        flows
            .iter()
            .any(|f| f.contains("nw_src=10.99.16.5 ") && f.matches("conjunction(").count() == 2),
        "a shared peer flow carries both rules' clauses"
    );
}
