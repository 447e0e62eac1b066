//! IPv6 in the datapath on real OVS with dual-stack pods: the policy matrix over both address
//! families on two emulated VXLAN hosts (same host and cross-host), neighbour discovery for a
//! remote pod answered by the agent without crossing the tunnel, and the spoof guard (source
//! MAC, IPv4 and IPv6 source, ARP and ND claims) checked with tcpdump at the receiver.
#![allow(clippy::unwrap_used)]

mod common;

use common::vxlan_hosts::{VxlanHost, exchange, mac, two_hosts};
use common::{blocking, capture, init_tracing, ofport, ping, settle};
use ofnet::{AgentHandle, LocalEndpoint, Network, PolicyRule, RuleAction};
use ofproto::packet::ethernet::{EtherType, EthernetAddress};
use ofproto::packet::{ArpOperation, ArpRepr, EthernetRepr, Icmpv6Repr, frame};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use testbed::{Ovs, Pod, PodOptions};

fn v4(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, 3, last)
}

fn v6(last: u8) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x99, 3, 0, 0, 0, 0, u16::from(last))
}

/// A pod with `10.99.3.<last>/24` and `fd00:99:3::<last>/64` on `bridge`, known to `agent` as a
/// dual-stack endpoint of the network on `vlan` in group `epg`.
async fn dual_stack_pod(
    ovs: &Ovs,
    agent: &AgentHandle,
    last: u8,
    vlan: u16,
    access_vlan: Option<u16>,
    epg: u16,
) -> Pod {
    let ip = v4(last);
    let pod = Pod::attach(
        ovs,
        "br0",
        &PodOptions {
            ip: format!("{ip}/24"),
            mac: Some(mac(ip).to_string()),
            gateway: None,
            vlan: access_vlan,
        },
    )
    .unwrap();
    pod.exec(&[
        "ip",
        "-6",
        "addr",
        "add",
        &format!("{}/64", v6(last)),
        "dev",
        "eth0",
        "nodad",
    ])
    .unwrap();
    common::disable_tx_offload(&pod);
    agent
        .add_local_endpoint(LocalEndpoint {
            port_no: ofport(ovs, pod.port_name()).await,
            mac: mac(ip),
            vlan,
            ipv4: Some(ip),
            ipv6: Some(v6(last)),
            epg,
            epg_vlan: 0,
            dscp: 0,
            bandwidth: None,
        })
        .await
        .unwrap();
    pod
}

/// TCP listeners (`nc -lk`) for one port, IPv4 and IPv6, killed on drop.
struct Listeners(Vec<Child>);

impl Listeners {
    fn start(ns: &str, port: u16) -> Listeners {
        let children = ["-4", "-6"]
            .into_iter()
            .map(|family| {
                Command::new("ip")
                    .args(["netns", "exec", ns, "nc", family, "-lk"])
                    .arg(port.to_string())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        Listeners(children)
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// True if a TCP connection from `ns` to `dst:port` opens within 1 s (a denied SYN is
/// dropped, so a refusal costs the whole second).
async fn tcp_connects(ns: &str, dst: &str, port: u16) -> bool {
    let (ns, dst) = (ns.to_string(), dst.to_string());
    blocking(move || {
        Command::new("ip")
            .args(["netns", "exec", &ns, "nc", "-z", "-w", "1", &dst])
            .arg(port.to_string())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    })
    .await
}

const SERVER: u8 = 10;
const SERVER_EPG: u16 = 5;

fn rule(id: &str, priority: u16, action: RuleAction) -> PolicyRule {
    let mut r = PolicyRule::new(id, priority, action);
    r.ip_protocol = 6;
    r
}

/// One row of the matrix: rules, then what each client sees on each port, the same over IPv4
/// and IPv6 unless `v6` says otherwise.
struct Case {
    name: &'static str,
    rules: Vec<PolicyRule>,
    /// (client index, port, IPv4 verdict, IPv6 verdict)
    expect: Vec<(usize, u16, bool, bool)>,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    // in, port only: the issue's `in tcp 8001 deny` on the server group.
    let mut r = rule("in-port", 1, RuleAction::Deny);
    r.dst_endpoint_group = SERVER_EPG;
    r.dst_port = 8001;
    out.push(Case {
        name: "in, port only",
        rules: vec![r],
        expect: vec![
            (0, 8001, false, false),
            (1, 8001, false, false),
            (0, 8002, true, true),
            (1, 8002, true, true),
        ],
    });
    // in, protocol only.
    let mut r = rule("in-proto", 1, RuleAction::Deny);
    r.dst_endpoint_group = SERVER_EPG;
    out.push(Case {
        name: "in, protocol only",
        rules: vec![r],
        expect: vec![(0, 8002, false, false), (1, 8002, false, false)],
    });
    // out, from a group (client 1's, 8), port only.
    let mut r = rule("out-group", 1, RuleAction::Deny);
    r.src_endpoint_group = 8;
    r.dst_port = 8001;
    out.push(Case {
        name: "out, source group",
        rules: vec![r],
        expect: vec![(0, 8001, true, true), (1, 8001, false, false)],
    });
    // group to group, with a higher-priority allow for one port.
    let mut deny = rule("g2g-deny", 1, RuleAction::Deny);
    deny.src_endpoint_group = 7;
    deny.dst_endpoint_group = SERVER_EPG;
    let mut allow = rule("g2g-allow", 10, RuleAction::Allow);
    allow.src_endpoint_group = 7;
    allow.dst_endpoint_group = SERVER_EPG;
    allow.dst_port = 8002;
    out.push(Case {
        name: "group to group, allow above deny",
        rules: vec![deny, allow],
        expect: vec![
            (0, 8001, false, false),
            (0, 8002, true, true),
            (1, 8001, true, true),
        ],
    });
    // address: client 0 by its address, one rule per family.
    let mut a4 = rule("addr-v4", 1, RuleAction::Deny);
    a4.src_ip_addr = v4(11).to_string();
    a4.dst_port = 8002;
    let mut a6 = a4.clone();
    a6.rule_id = "addr-v6".into();
    a6.src_ip_addr = v6(11).to_string();
    out.push(Case {
        name: "source address",
        rules: vec![a4, a6],
        expect: vec![(0, 8002, false, false), (1, 8002, true, true)],
    });
    // prefix: the server's /29 and /125, one rule per family.
    let mut p4 = rule("prefix-v4", 1, RuleAction::Deny);
    p4.dst_ip_addr = "10.99.3.8/29".into();
    p4.dst_port = 8001;
    let mut p6 = p4.clone();
    p6.rule_id = "prefix-v6".into();
    p6.dst_ip_addr = "fd00:99:3::8/125".into();
    out.push(Case {
        name: "destination prefix",
        rules: vec![p4, p6],
        expect: vec![
            (0, 8001, false, false),
            (1, 8001, false, false),
            (1, 8002, true, true),
        ],
    });
    // An IPv6 prefix alone applies to IPv6 only.
    let mut only6 = rule("only-v6", 1, RuleAction::Deny);
    only6.src_ip_addr = "fd00:99:3::/64".into();
    only6.dst_port = 8002;
    out.push(Case {
        name: "IPv6 prefix only",
        rules: vec![only6],
        expect: vec![(0, 8002, true, false), (1, 8002, true, false)],
    });
    out
}

#[actix_rt::test]
async fn policy_matrix_gives_ipv4_and_ipv6_the_same_verdicts_on_one_and_two_hosts() {
    testbed::require!(Root, Ovs, Netcat, Ping);
    if common::missing_tool(module_path!(), "ethtool", "ethtool") {
        return;
    }
    init_tracing();
    let (a, b) = two_hosts().await;
    for (h, vlan) in [(&a, 2), (&b, 3)] {
        h.agent
            .add_network(Network {
                vlan,
                vni: 5000,
                gateway: None,
                vrf: "t1".into(),
            })
            .await
            .unwrap();
    }
    let server = dual_stack_pod(&a.ovs, &a.agent, SERVER, 2, None, SERVER_EPG).await;
    let c0 = dual_stack_pod(&a.ovs, &a.agent, 11, 2, None, 7).await;
    let c1 = dual_stack_pod(&b.ovs, &b.agent, 12, 3, None, 8).await;
    exchange(&a, &b).await;
    let _l1 = Listeners::start(server.netns().name(), 8001);
    let _l2 = Listeners::start(server.netns().name(), 8002);
    let clients = [c0.netns().name(), c1.netns().name()];
    let hosts: [&VxlanHost; 2] = [&a, &b];

    // Remote endpoints are classified by both addresses on the other host.
    let flows_b = common::dumped_flows(&b.ovs, "br0").await;
    for want in [
        format!("nw_dst={} ", v4(SERVER)),
        format!("ipv6_dst={} ", v6(SERVER)),
    ] {
        assert!(
            flows_b
                .iter()
                .any(|f| f.starts_with("table=4,") && f.contains(&want)),
            "no table-4 flow with {want} on host B: {flows_b:#?}"
        );
    }

    let (s4, s6) = (v4(SERVER).to_string(), v6(SERVER).to_string());
    for (i, client) in clients.iter().enumerate() {
        for dst in [&s4, &s6] {
            for port in [8001, 8002] {
                // The first packets across hosts may still meet a cold path (the pod's neighbour
                // entry, the underlay's ARP, the listener starting): the baseline retries for a
                // few seconds; every verdict below is a single probe on the warm path.
                let mut reached = false;
                for _ in 0..10 {
                    if tcp_connects(client, dst, port).await {
                        reached = true;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                assert!(reached, "no rules: client {i} reaches {dst} port {port}");
            }
        }
    }

    for case in cases() {
        for h in hosts {
            for r in &case.rules {
                h.agent.add_rule(r.clone()).await.unwrap();
            }
            settle(&h.ovs);
        }
        for &(client, port, want4, want6) in &case.expect {
            let got4 = tcp_connects(clients[client], &s4, port).await;
            let got6 = tcp_connects(clients[client], &s6, port).await;
            assert_eq!(
                (got4, got6),
                (want4, want6),
                "{}: client {client} ({}) to port {port}, (IPv4, IPv6)",
                case.name,
                if client == 0 {
                    "same host"
                } else {
                    "other host"
                }
            );
        }
        for h in hosts {
            for r in &case.rules {
                h.agent.remove_rule(&r.rule_id).await.unwrap();
            }
            settle(&h.ovs);
        }
    }

    // ICMP means ICMPv6 on the IPv6 flow: a deny on ICMP stops ping and ping6 alike, from
    // both hosts (neighbour discovery is answered by the agent and keeps working).
    let mut icmp = PolicyRule::new("icmp", 1, RuleAction::Deny);
    icmp.ip_protocol = 1;
    icmp.dst_endpoint_group = SERVER_EPG;
    for h in hosts {
        h.agent.add_rule(icmp.clone()).await.unwrap();
        settle(&h.ovs);
    }
    for client in clients {
        assert_eq!(ping(client, &s4, 1).await, 0, "ping denied");
        assert_eq!(ping(client, &s6, 1).await, 0, "ping6 denied");
    }
    for h in hosts {
        h.agent.remove_rule("icmp").await.unwrap();
        settle(&h.ovs);
    }
    for client in clients {
        assert_eq!(ping(client, &s6, 2).await, 2, "ping6 back");
    }
}

/// The VXLAN underlay interface of host A (the veth towards B).
fn underlay_if(h: &VxlanHost) -> String {
    let out = h.ovs.vsctl(&["list-ports", "br-phy"]).unwrap();
    out.lines().next().unwrap().trim().to_string()
}

#[actix_rt::test]
async fn neighbour_discovery_for_a_remote_pod_is_answered_without_crossing_the_tunnel() {
    testbed::require!(Root, Ovs, Ping);
    if common::missing_tool(module_path!(), "tcpdump", "tcpdump") {
        return;
    }
    init_tracing();
    let (a, b) = two_hosts().await;
    for (h, vlan) in [(&a, 2), (&b, 3)] {
        h.agent
            .add_network(Network {
                vlan,
                vni: 5000,
                gateway: None,
                vrf: "t1".into(),
            })
            .await
            .unwrap();
    }
    let pa = dual_stack_pod(&a.ovs, &a.agent, 21, 2, None, 0).await;
    let _pb = dual_stack_pod(&b.ovs, &b.agent, 22, 3, None, 0).await;
    exchange(&a, &b).await;
    // Let the pods' own start-up chatter (link-local DAD, MLD) pass.
    actix_rt::time::sleep(Duration::from_secs(1)).await;

    let uplink = underlay_if(&a);
    let tunnel = capture(a.ns.name(), &uplink, "udp port 4789", 50, 5).await;
    let target = v6(22).to_string();
    assert_eq!(ping(pa.netns().name(), &target, 3).await, 3, "ping6 across");
    let seen = tunnel.await.unwrap();
    assert!(
        seen.contains("echo request"),
        "the pings crossed the tunnel: {seen}"
    );
    assert!(
        !seen.contains("neighbor solicitation"),
        "no solicitation crossed the tunnel: {seen}"
    );
    // The pod learnt B's MAC from the agent's advertisement.
    let neigh = pa.exec(&["ip", "-6", "neigh", "show", &target]).unwrap();
    assert!(
        neigh.contains(&mac(v4(22)).to_string()),
        "neighbour entry: {neigh}"
    );
    let stats = a.agent.inspect().await.unwrap().stats;
    let replied = stats.get("NdSolicitRespSent").copied().unwrap_or(0);
    assert!(replied >= 1, "agent answered: {stats:?}");
}

/// Send whole Ethernet frames out `eth0` of namespace `ns` (a raw packet socket, through
/// python3).
async fn send_frames(ns: &str, frames: Vec<Vec<u8>>) {
    let ns = ns.to_string();
    blocking(move || {
        let script = "import socket,sys\n\
             s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
             s.bind(('eth0',0))\n\
             [s.send(bytes.fromhex(h)) for h in sys.argv[1:]]\n";
        let hex: Vec<String> = frames
            .iter()
            .map(|f| f.iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        let out = Command::new("ip")
            .args(["netns", "exec", &ns, "python3", "-c", script])
            .args(&hex)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    })
    .await;
}

fn echo4(src_mac: [u8; 6], src: Ipv4Addr, dst_mac: [u8; 6], dst: Ipv4Addr, id: u16) -> Vec<u8> {
    frame::IcmpEchoRequest {
        src_mac: EthernetAddress(src_mac),
        dst_mac: EthernetAddress(dst_mac),
        vlan: None,
        src_ip: src,
        dst_ip: dst,
        ttl: 64,
        ident: id,
        seq_no: 1,
        data: b"spoof",
    }
    .build()
}

fn echo6(src_mac: [u8; 6], src: Ipv6Addr, dst_mac: [u8; 6], dst: Ipv6Addr, id: u16) -> Vec<u8> {
    ofnet::nd::icmpv6_frame(
        EthernetRepr {
            src_addr: EthernetAddress(src_mac),
            dst_addr: EthernetAddress(dst_mac),
            vlan: None,
            ethertype: EtherType::Ipv6,
        },
        src,
        dst,
        &Icmpv6Repr::EchoRequest {
            ident: id,
            seq_no: 1,
            data: b"spoof",
        },
    )
}

/// An ARP reply "`claimed` is at `mac`" sent to `to`.
fn arp_claim(mac: [u8; 6], claimed: Ipv4Addr, to_mac: [u8; 6], to: Ipv4Addr) -> Vec<u8> {
    let request = ArpRepr {
        operation: ArpOperation::Request,
        source_hardware_addr: EthernetAddress(to_mac),
        source_protocol_addr: to,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: claimed,
    };
    frame::arp_reply(&request, EthernetAddress(mac), None)
}

/// A neighbour advertisement "`claimed` is at `mac`" sent to `to`.
fn nd_claim(mac: [u8; 6], claimed: Ipv6Addr, to_mac: [u8; 6], to: Ipv6Addr) -> Vec<u8> {
    ofnet::nd::neighbor_advert(
        &ofnet::nd::Solicit {
            eth_src: to_mac,
            vlan: None,
            ip_src: to,
            target: claimed,
            source_lladdr: None,
        },
        mac,
    )
}

#[actix_rt::test]
async fn spoofed_sources_and_claims_are_dropped_and_the_pods_own_traffic_flows() {
    testbed::require!(Root, Ovs, Ping);
    if common::missing_tool(module_path!(), "ethtool", "ethtool")
        || common::missing_tool(module_path!(), "tcpdump", "tcpdump")
        || common::missing_tool(module_path!(), "python3", "python3")
    {
        return;
    }
    init_tracing();
    let h = common::Host::vlan().await;
    h.agent
        .add_network(Network {
            vlan: 10,
            vni: 0,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    let (x, v, r) = (30, 31, 32);
    let attacker = dual_stack_pod(&h.ovs, &h.agent, x, 10, Some(10), 0).await;
    let _victim = dual_stack_pod(&h.ovs, &h.agent, v, 10, Some(10), 0).await;
    let receiver = dual_stack_pod(&h.ovs, &h.agent, r, 10, Some(10), 0).await;
    let m = |last| mac(v4(last)).octets();

    let at_receiver = capture(
        receiver.netns().name(),
        "eth0",
        "icmp or icmp6 or arp",
        200,
        5,
    )
    .await;
    send_frames(
        attacker.netns().name(),
        vec![
            // Own addresses: delivered.
            echo4(m(x), v4(x), m(r), v4(r), 4001),
            echo6(m(x), v6(x), m(r), v6(r), 6001),
            arp_claim(m(x), v4(x), m(r), v4(r)),
            nd_claim(m(x), v6(x), m(r), v6(r)),
            // The victim's IPv4 or IPv6 source, the victim's MAC, claims of its addresses.
            echo4(m(x), v4(v), m(r), v4(r), 4002),
            echo6(m(x), v6(v), m(r), v6(r), 6002),
            echo4(m(v), v4(x), m(r), v4(r), 4003),
            echo6(m(v), v6(x), m(r), v6(r), 6003),
            arp_claim(m(x), v4(v), m(r), v4(r)),
            nd_claim(m(x), v6(v), m(r), v6(r)),
            // A stranger's address, too.
            echo4(m(x), Ipv4Addr::new(10, 99, 3, 200), m(r), v4(r), 4004),
        ],
    )
    .await;
    let seen = at_receiver.await.unwrap();
    for own in [
        "id 4001".to_string(),
        "id 6001".to_string(),
        format!("Reply {} is-at {}", v4(x), mac(v4(x))),
        format!("tgt is {}", v6(x)),
    ] {
        assert!(
            seen.contains(&own),
            "the attacker's own {own} reached the receiver: {seen}"
        );
    }
    for spoofed in [
        "id 4002".to_string(),
        "id 6002".to_string(),
        "id 4003".to_string(),
        "id 6003".to_string(),
        "id 4004".to_string(),
        format!("Reply {} is-at", v4(v)),
        format!("tgt is {}", v6(v)),
    ] {
        assert!(
            !seen.contains(&spoofed),
            "spoofed {spoofed} reached the receiver: {seen}"
        );
    }
    // Ordinary traffic of the attacker still flows, over both families.
    let ns = attacker.netns().name();
    assert_eq!(ping(ns, &v4(r).to_string(), 2).await, 2);
    assert_eq!(ping(ns, &v6(r).to_string(), 2).await, 2);
}
