//! The VXLAN router (`vrouter`, routing mode) across two emulated hosts on real OVS (a
//! namespace with its own OVS each, joined by a veth underlay). The test plays the master: it
//! relays each agent's local endpoints to the other and tells each about the other's VTEP.
#![allow(clippy::unwrap_used)]

mod common;

use common::vxlan_hosts::{exchange, mac, two_hosts_in};
use common::{TcpServer, disable_tx_offload, dumped_flows, init_tracing, ping, tcp_connects};
use ofnet::{FwdMode, Network, PolicyRule, ROUTER_MAC, RuleAction};
use std::net::Ipv4Addr;

/// The MAC a pod's neighbour table holds for `ip` (after it talked to it).
fn neighbour_mac(pod: &testbed::Pod, ip: Ipv4Addr) -> Option<String> {
    let out = pod
        .exec(&["ip", "neigh", "show", &ip.to_string(), "dev", "eth0"])
        .ok()?;
    let words: Vec<&str> = out.split_whitespace().collect();
    words
        .iter()
        .position(|w| *w == "lladdr")
        .and_then(|i| words.get(i + 1))
        .map(|s| s.to_string())
}

#[actix_rt::test]
async fn pods_on_two_hosts_are_routed_through_the_tunnel_with_the_router_mac() {
    testbed::require!(Root, Ovs, Ping);
    init_tracing();
    let (a, b) = two_hosts_in(FwdMode::Routing).await;

    // Tenant t1: 10.1/16 (VNI 5000) and 10.2/16 (VNI 6000), both with a gateway; tenant t2:
    // 10.3/16 (VNI 7000). Local VLANs differ per host.
    let nets = [
        (5000, "t1", Ipv4Addr::new(10, 1, 0, 1)),
        (6000, "t1", Ipv4Addr::new(10, 2, 0, 1)),
        (7000, "t2", Ipv4Addr::new(10, 3, 0, 1)),
    ];
    for (h, first_vlan) in [(&a, 2u16), (&b, 12)] {
        for (i, (vni, vrf, gw)) in nets.iter().enumerate() {
            h.agent
                .add_network(Network {
                    vlan: first_vlan + i as u16,
                    vni: *vni,
                    gateway: Some(*gw),
                    vrf: (*vrf).into(),
                })
                .await
                .unwrap();
        }
    }
    let (a1_ip, b1_ip, b2_ip, b3_ip) = (
        Ipv4Addr::new(10, 1, 1, 2),
        Ipv4Addr::new(10, 1, 1, 3),
        Ipv4Addr::new(10, 2, 1, 4),
        Ipv4Addr::new(10, 3, 1, 5),
    );
    let a1 = a.pod_via(a1_ip, 2, Some(nets[0].2)).await;
    let a1b = a
        .pod_via(Ipv4Addr::new(10, 1, 1, 6), 2, Some(nets[0].2))
        .await;
    let b1 = b.pod_via(b1_ip, 12, Some(nets[0].2)).await;
    let _b2 = b.pod_via(b2_ip, 13, Some(nets[1].2)).await;
    let _b3 = b.pod_via(b3_ip, 14, Some(nets[2].2)).await;
    exchange(&a, &b).await;

    // Same network, other host; then another network of the tenant through the gateway.
    assert_eq!(ping(a1.netns().name(), &b1_ip.to_string(), 3).await, 3);
    assert_eq!(
        ping(a1.netns().name(), &b2_ip.to_string(), 3).await,
        3,
        "routed to another network of the tenant on the other host"
    );
    assert_eq!(ping(a1.netns().name(), a1b.ip(), 2).await, 2, "same host");
    assert_eq!(
        ping(a1.netns().name(), &b3_ip.to_string(), 2).await,
        0,
        "another tenant's VRF is not reachable"
    );
    // ARP was answered with the router MAC for the peer and the gateway alike.
    let router = ROUTER_MAC.to_string();
    assert_eq!(neighbour_mac(&a1, b1_ip).as_deref(), Some(router.as_str()));
    assert_eq!(
        neighbour_mac(&a1, nets[0].2).as_deref(),
        Some(router.as_str()),
        "the gateway is the router"
    );
    // Nobody's target is not answered.
    assert_eq!(
        ping(a1.netns().name(), "10.1.9.9", 1).await,
        0,
        "unknown target"
    );
    assert_eq!(neighbour_mac(&a1, Ipv4Addr::new(10, 1, 9, 9)), None);

    // What B1 receives comes from the router MAC: the packet was routed on both hosts.
    let flows = dumped_flows(&b.ovs, "br0").await;
    assert!(
        flows.iter().any(|l| l.starts_with("table=7")
            && l.contains(&format!("nw_dst={b1_ip}"))
            && l.contains(&format!(
                "set_field:00:00:11:11:11:11->eth_src,set_field:{}->eth_dst",
                mac(b1_ip)
            ))),
        "{flows:#?}"
    );
    assert!(
        !flows
            .iter()
            // Table 9 is host_dnat here (empty without a host NAT port), not a MAC table.
            .any(|l| (l.contains("table=9") && !l.contains("priority=0 ")) || l.contains("group:")),
        "no MAC table, no flooding"
    );

    // TCP, and policy at the source: a deny rule on A for port 8001 only.
    disable_tx_offload(&a1);
    disable_tx_offload(&b1);
    let _s1 = TcpServer::start(b1.netns().name(), 8000);
    let _s2 = TcpServer::start(b1.netns().name(), 8001);
    assert!(tcp_connects(a1.netns().name(), &b1_ip.to_string(), 8000).await);
    assert!(tcp_connects(a1.netns().name(), &b1_ip.to_string(), 8001).await);
    let mut deny = PolicyRule::new("deny-8001", 10, RuleAction::Deny);
    deny.ip_protocol = 6;
    deny.dst_port = 8001;
    a.agent.add_rule(deny).await.unwrap();
    common::settle(&a.ovs);
    assert!(tcp_connects(a1.netns().name(), &b1_ip.to_string(), 8000).await);
    assert!(
        !tcp_connects(a1.netns().name(), &b1_ip.to_string(), 8001).await,
        "the policy table of the routed pipeline applies"
    );

    // B1 leaves: its routes go on both hosts.
    b.agent
        .remove_local_endpoint(common::ofport(&b.ovs, b1.port_name()).await)
        .await
        .unwrap();
    a.agent
        .remove_remote_endpoint(format!("{b1_ip}:t1"))
        .await
        .unwrap();
    common::settle(&a.ovs);
    let flows = dumped_flows(&a.ovs, "br0").await;
    assert!(
        !flows.iter().any(|l| l.contains(&b1_ip.to_string())),
        "{flows:#?}"
    );
    assert_eq!(ping(a1.netns().name(), &b1_ip.to_string(), 2).await, 0);
    let inspect = a.agent.inspect().await.unwrap();
    assert_eq!(inspect.dp_name, "vrouter");
    assert_eq!(inspect.fwd_mode, "routing");
    assert_eq!(inspect.my_router_mac.as_deref(), Some(router.as_str()));
}
