//! The trace evaluator agrees with Open vSwitch: a few hundred randomized packets over a
//! realistic state (two VXLAN hosts, three networks in two VRFs, endpoint groups, allow and
//! deny rules, NetworkPolicies with conjunctions, a load-balanced service), each evaluated offline from the agent's desired
//! tables and traced by `ovs-appctl ofproto/trace` on the real bridge. The output ports (local
//! ports, the VTEP, the controller; none = dropped) must be equal for every packet, and so
//! must the sequence of table lookups (table and priority) of the first pass.
#![allow(clippy::unwrap_used)]

mod common;

use common::init_tracing;
use common::vxlan_hosts::{VxlanHost, two_hosts};
use ofnet::netpol::{Peer, Port, Protocol, Rule};
use ofnet::trace::eval::Egress;
use ofnet::trace::ovs::{parse_dpif_show, parse_trace};
use ofnet::trace::{CtAssumptions, PacketSpec, Proto, TableSet, diff, evaluate, trace_hosts};
use ofnet::{
    LocalEndpoint, MacAddr, Network, PolicyRule, RuleAction, ServicePort, ServiceProtocol,
    ServiceSpec,
};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

/// A small deterministic generator (xorshift64*): the same packets every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[(self.next() % v.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[derive(Clone, Debug)]
struct Ep {
    host: usize,
    port: u32,
    ip: Ipv4Addr,
    mac: MacAddr,
}

fn mac_of(ip: Ipv4Addr) -> MacAddr {
    let o = ip.octets();
    MacAddr([2, 2, o[0], o[1], o[2], o[3]])
}

/// An endpoint on an OVS internal port (no namespace: only the tables are traced).
async fn endpoint(h: &VxlanHost, name: &str, ip: Ipv4Addr, vlan: u16, epg: u16) -> u32 {
    h.ovs
        .vsctl(&[
            "add-port",
            "br0",
            name,
            "--",
            "set",
            "interface",
            name,
            "type=internal",
        ])
        .unwrap();
    let port = common::ofport(&h.ovs, name).await;
    h.agent
        .add_local_endpoint(LocalEndpoint {
            port_no: port,
            mac: mac_of(ip),
            vlan,
            ipv4: Some(ip),
            ipv6: None,
            epg,
            epg_vlan: 0,
            dscp: 0,
            bandwidth: None,
        })
        .await
        .unwrap();
    port
}

fn egress_step(e: &Egress) -> usize {
    match e {
        Egress::Port { step, .. }
        | Egress::Controller { step, .. }
        | Egress::Normal { step, .. } => *step,
    }
}

/// The step where a path met its first select group.
fn first_choice_step(p: &ofnet::trace::Path) -> usize {
    p.steps
        .iter()
        .position(|s| s.effects.iter().any(|e| e.ends_with("(select)")))
        .unwrap_or(usize::MAX)
}

#[actix_rt::test]
async fn trace_agrees_with_ofproto_trace_on_randomized_packets() {
    testbed::require!(Root, Ovs);
    init_tracing();
    let (a, b) = two_hosts().await;
    let hosts = [&a, &b];

    // Networks: blue (VNI 5001) and red (VNI 5002) in VRF t1, green (VNI 5003) in VRF t2;
    // local VLANs differ per host.
    let nets = [
        ("t1", 5001u32, [2u16, 12]),
        ("t1", 5002, [3, 13]),
        ("t2", 5003, [4, 14]),
    ];
    for (i, h) in hosts.iter().enumerate() {
        for (vrf, vni, vlans) in nets {
            h.agent
                .add_network(Network {
                    vlan: vlans[i],
                    vni,
                    gateway: None,
                    vrf: vrf.into(),
                })
                .await
                .unwrap();
        }
    }
    // Endpoints: (host, last octet, network index, group).
    let layout: [(usize, u8, usize, u16); 8] = [
        (0, 2, 0, 5), // web
        (0, 3, 0, 7), // db
        (0, 4, 1, 0),
        (0, 5, 2, 0),
        (1, 12, 0, 5),
        (1, 13, 0, 7),
        (1, 14, 1, 0),
        (1, 15, 2, 0),
    ];
    let mut eps = Vec::new();
    for (hi, last, net, epg) in layout {
        let ip = Ipv4Addr::new(10, 1, net as u8, last);
        let vlan = nets[net].2[hi];
        let port = endpoint(hosts[hi], &format!("e{last}"), ip, vlan, epg).await;
        eps.push(Ep {
            host: hi,
            port,
            ip,
            mac: mac_of(ip),
        });
    }
    common::vxlan_hosts::exchange(&a, &b).await;

    // Policy at both hosts: deny TCP 8001 to db (7), allow TCP 5432 from web (5) to db,
    // deny new TCP to db otherwise, deny ICMP from the green network's addresses, allow
    // UDP 53 to 10.1.1.13.
    let mut rules = vec![
        PolicyRule {
            dst_endpoint_group: 7,
            ip_protocol: 6,
            dst_port: 8001,
            ..PolicyRule::new("default:db:1", 50, RuleAction::Deny)
        },
        PolicyRule {
            src_endpoint_group: 5,
            dst_endpoint_group: 7,
            ip_protocol: 6,
            dst_port: 5432,
            ..PolicyRule::new("default:db:2", 40, RuleAction::Allow)
        },
        PolicyRule {
            dst_endpoint_group: 7,
            ip_protocol: 6,
            tcp_flags: "syn,!ack".into(),
            ..PolicyRule::new("default:db:3", 1, RuleAction::Deny)
        },
        PolicyRule {
            src_ip_addr: "10.1.2.0/24".into(),
            ip_protocol: 1,
            ..PolicyRule::new("t2:noping:1", 5, RuleAction::Deny)
        },
    ];
    rules.push(PolicyRule {
        dst_ip_addr: "10.1.0.13".into(),
        ip_protocol: 17,
        dst_port: 53,
        ..PolicyRule::new("default:dns:1", 60, RuleAction::Allow)
    });
    for h in hosts {
        for r in &rules {
            h.agent.add_rule(r.clone()).await.unwrap();
        }
    }
    // NetworkPolicies (conjunctions in tables 7 and 8): db admits web on TCP 5432 and
    // 8000..8003 and the red network but 10.1.1.14 on UDP 53; the green pod on host A may
    // only talk to the green pod on host B.
    let mut db = ofnet::NetworkPolicy::new(
        "default/db",
        "t1",
        vec![IpAddr::V4(eps[1].ip), IpAddr::V4(eps[5].ip)],
    );
    db.ingress = Some(vec![
        Rule {
            peers: vec![Peer::Pods(vec![
                IpAddr::V4(eps[0].ip),
                IpAddr::V4(eps[4].ip),
            ])],
            ports: vec![
                Port::one(Protocol::Tcp, 5432),
                Port::range(Protocol::Tcp, 8000, 8003),
            ],
            applied_to: None,
        },
        Rule {
            peers: vec![Peer::IpBlock {
                cidr: "10.1.1.0/24".parse().unwrap(),
                except: vec!["10.1.1.14/32".parse().unwrap()],
            }],
            ports: vec![Port::one(Protocol::Udp, 53)],
            applied_to: None,
        },
    ]);
    let mut green = ofnet::NetworkPolicy::new("t2/lock", "t2", vec![IpAddr::V4(eps[3].ip)]);
    green.egress = Some(vec![Rule {
        peers: vec![Peer::Pods(vec![IpAddr::V4(eps[7].ip)])],
        ports: vec![],
        applied_to: None,
    }]);
    // Every t1 pod admits every t1 pod on TCP 80 and 443 and UDP 53.
    let t1: Vec<IpAddr> = [0, 1, 2, 4, 5, 6]
        .iter()
        .map(|i| IpAddr::V4(eps[*i].ip))
        .collect();
    let mut web_ports = ofnet::NetworkPolicy::new("default/web", "t1", t1.clone());
    web_ports.ingress = Some(vec![Rule {
        peers: vec![Peer::Pods(t1)],
        ports: vec![
            Port::one(Protocol::Tcp, 80),
            Port::one(Protocol::Tcp, 443),
            Port::one(Protocol::Udp, 53),
        ],
        applied_to: None,
    }]);
    for h in hosts {
        let refused = h
            .agent
            .set_network_policies(vec![db.clone(), green.clone(), web_ports.clone()], vec![])
            .await
            .unwrap();
        assert!(refused.is_empty());
    }
    // A service in t1 with providers on both hosts, and one without providers.
    let vip: Ipv4Addr = "10.254.0.10".parse().unwrap();
    let empty_vip: Ipv4Addr = "10.254.0.11".parse().unwrap();
    for h in hosts {
        h.agent
            .add_service(
                "web",
                ServiceSpec {
                    vip,
                    ports: vec![
                        ServicePort {
                            protocol: ServiceProtocol::Tcp,
                            svc_port: 80,
                            prov_port: 8080,
                        },
                        ServicePort {
                            protocol: ServiceProtocol::Udp,
                            svc_port: 53,
                            prov_port: 5353,
                        },
                    ],
                    affinity_timeout: None,
                    vip6: None,
                },
            )
            .await
            .unwrap();
        h.agent
            .set_service_providers("web", vec![eps[0].ip, eps[4].ip])
            .await
            .unwrap();
        h.agent
            .add_service(
                "empty",
                ServiceSpec {
                    vip: empty_vip,
                    ports: vec![ServicePort {
                        protocol: ServiceProtocol::Tcp,
                        svc_port: 80,
                        prov_port: 80,
                    }],
                    affinity_timeout: None,
                    vip6: None,
                },
            )
            .await
            .unwrap();
    }

    // Each host's tunnel neighbour entry for the other (OVS learns them by snooping ARP, and
    // a trace toward a VTEP whose neighbour is unknown shows no tunnel output).
    for (h, peer) in [(&a, &b), (&b, &a)] {
        let mac = peer
            .ns
            .exec(&["cat", "/sys/class/net/br-phy/address"])
            .unwrap();
        h.ovs
            .appctl(&["tnl/neigh/set", "br-phy", &peer.ip.to_string(), mac.trim()])
            .unwrap();
    }

    // The desired tables, and the switch holding exactly them.
    let mut tables: Vec<TableSet> = Vec::new();
    let mut dp_maps = Vec::new();
    let mut vteps = Vec::new();
    for h in hosts {
        common::wait_synced(&h.agent).await;
        let desired = h.agent.trace_tables().await.unwrap();
        let actual = h.agent.actual_tables().await.unwrap().unwrap();
        let d = diff(&desired, &actual);
        assert!(d.is_empty(), "desired and actual differ: {d:#?}");
        assert!(
            desired
                .groups
                .values()
                .any(|g| g.group_type == ofproto::group::GroupType::Select)
        );
        tables.push(desired);
        let show = h.ovs.appctl(&["dpif/show"]).unwrap();
        dp_maps.push(parse_dpif_show(&show, "br0"));
        vteps.push(common::ofport(&h.ovs, "vtep").await);
    }

    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let vip_mac = mac_of(vip);
    let unknown: Ipv4Addr = "10.1.0.99".parse().unwrap();
    let mut verdicts: BTreeMap<String, usize> = BTreeMap::new();
    let n = 300;
    let mut mismatches = Vec::new();
    let mut select_groups = 0;
    let mut conj_hits = 0;
    for i in 0..n {
        let src = rng.pick(&eps).clone();
        let h = src.host;
        let from_vtep = rng.chance(15);
        let (dst_ip, dst_mac) = match rng.next() % 10 {
            0 => (vip, vip_mac),
            1 => (empty_vip, mac_of(empty_vip)),
            2 => (unknown, mac_of(unknown)),
            _ => {
                let d = rng.pick(&eps);
                (d.ip, d.mac)
            }
        };
        let proto = *rng.pick(&[Proto::Tcp, Proto::Tcp, Proto::Udp, Proto::Icmp, Proto::Arp]);
        let mut spec = PacketSpec {
            in_port: src.port,
            dl_src: src.mac,
            dl_dst: dst_mac,
            vlan: None,
            tun_id: None,
            src: IpAddr::V4(src.ip),
            dst: IpAddr::V4(dst_ip),
            proto,
            tp_src: 40000 + (rng.next() % 1000) as u16,
            tp_dst: *rng.pick(&[80, 8001, 8002, 5432, 53, 443]),
            tcp_flags: *rng.pick(&[0x002, 0x010, 0x012]),
        };
        if rng.chance(8) {
            // A spoofed source.
            spec.src = IpAddr::V4(Ipv4Addr::new(10, 1, 0, 77));
        }
        if from_vtep {
            // From the other host's VTEP with a network's VNI, to a local endpoint here.
            spec.in_port = vteps[h];
            spec.tun_id = Some(u64::from(rng.pick(&nets).1));
            spec.dl_src = rng.pick(&eps).mac;
        }
        let ct_next = if rng.chance(30) {
            vec![*rng.pick(&[0x22u32, 0x2a, 0x30])] // trk|est, trk|est|rpl, trk|inv
        } else {
            Vec::new()
        };
        let ct = CtAssumptions {
            next: ct_next.clone(),
            original_tuple: false,
        };
        let eval = evaluate(&tables[h], &spec.fields(), &ct);
        if eval.paths.iter().any(|p| {
            p.steps
                .iter()
                .any(|s| s.flow.as_deref().is_some_and(|f| f.contains("conj_id=")))
        }) {
            conj_hits += 1;
        }

        let mut args = vec!["ofproto/trace".to_string(), "br0".into(), spec.ovs_flow()];
        for s in &ct_next {
            args.push("--ct-next".into());
            args.push(ofnet::trace::packet::ct::text(*s).replace('|', ","));
        }
        let text = hosts[h].ovs.appctl(&args).unwrap();
        let ovs = parse_trace(&text);
        // Plain outputs to br0's ports; the underlay output after a tunnel push is br-phy's.
        let mut ovs_ports: Vec<u32> = ovs
            .dp_ports
            .iter()
            .filter_map(|dp| dp_maps[h].get(dp).map(|(of, _)| *of))
            .collect();
        if !ovs.tunnels.is_empty() {
            ovs_ports.push(vteps[h]);
        }
        if ovs.controller {
            ovs_ports.push(u32::MAX);
        }
        ovs_ports.sort_unstable();
        ovs_ports.dedup();

        // A select group OVS balances by datapath hash ends its trace at the group (the
        // bucket is picked after a recirculation the trace does not follow): there, every
        // path of ours must have reached that group with nothing sent before it.
        let agrees = match ovs.dp_hash_group {
            Some(g) => {
                select_groups += 1;
                ovs_ports.is_empty()
                    && eval.paths.iter().all(|p| {
                        p.choices.first().map(|c| c.0) == Some(g)
                            && p.egress
                                .iter()
                                .all(|e| egress_step(e) > first_choice_step(p))
                    })
            }
            None => eval.paths.iter().any(|p| p.ports() == ovs_ports),
        };
        // Lookups of the first pass: the evaluator's main-pipeline steps until its first
        // recirculation, against OVS's lines up to its first recirculation.
        let first = &eval.paths[0];
        let ours: Vec<(u8, Option<u16>)> = first
            .steps
            .iter()
            .take_while(|s| {
                !s.via
                    .as_deref()
                    .is_some_and(|v| v.starts_with("recirculation"))
            })
            .filter(|s| !s.via.as_deref().is_some_and(|v| v.starts_with("group")))
            .map(|s| (s.table, s.priority))
            .collect();
        let first_pass = text.split("recirc(0x").next().unwrap_or_default();
        let theirs = parse_trace(first_pass).lookups;
        let same_lookups = eval.paths.len() > 1 || ours == theirs;
        if !agrees || !same_lookups {
            mismatches.push(format!(
                "packet {i} on host {h}: {}\n ct_next {ct_next:?}\n ours {:?} lookups {ours:?}\n ovs {ovs_ports:?} lookups {theirs:?}\n{text}\n{}",
                spec.ovs_flow(),
                eval.paths.iter().map(|p| p.ports()).collect::<Vec<_>>(),
                trace_hosts(&tables, h, &spec.fields(), &ct, &[])
                    .iter()
                    .map(|t| t.render())
                    .collect::<String>()
            ));
        }
        let kind = trace_hosts(&tables, h, &spec.fields(), &ct, &[])[0]
            .all_verdicts()
            .first()
            .map(|v| {
                serde_json::to_value(v).unwrap()["verdict"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .unwrap_or_default();
        *verdicts.entry(kind).or_default() += 1;
    }
    eprintln!(
        "verdicts over {n} packets: {verdicts:?}; {select_groups} ended in a dp_hash select group; {conj_hits} completed a conjunction"
    );
    assert!(
        mismatches.is_empty(),
        "{} of {n} packets disagree with ofproto/trace; first:\n{}",
        mismatches.len(),
        mismatches[0]
    );
    assert!(
        conj_hits >= 5,
        "only {conj_hits} packets completed a NetworkPolicy conjunction"
    );
    // The sample covers the interesting outcomes.
    for kind in ["delivered", "dropped", "controller"] {
        assert!(
            verdicts.get(kind).is_some_and(|c| *c >= 5),
            "few {kind}: {verdicts:?}"
        );
    }
}
