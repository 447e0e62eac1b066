//! VLAN bridge on real OVS (userspace datapath, pods as namespaces): pods on one VLAN reach
//! each other with the controller answering their ARP requests, a pod on another VLAN does
//! not reach them.
#![allow(clippy::unwrap_used)]

mod common;

use common::{capture, init_tracing, ofport, ping};
use ofnet::{AgentConfig, BridgeKind, LocalEndpoint, MacAddr, Network};
use std::net::Ipv4Addr;
use testbed::{Netns, Ovs, Pod, PodOptions};

fn mac(last: u8) -> MacAddr {
    MacAddr([2, 2, 10, 1, 1, last])
}

fn attach(ovs: &Ovs, last: u8, vlan: u16) -> Pod {
    Pod::attach(
        ovs,
        "br0",
        &PodOptions {
            ip: format!("10.1.1.{last}/24"),
            mac: Some(mac(last).to_string()),
            gateway: None,
            vlan: Some(vlan),
        },
    )
    .unwrap()
}

#[actix_rt::test]
async fn same_vlan_pods_ping_with_proxy_arp_other_vlan_is_isolated() {
    testbed::require!(Root, Ovs, Ping);
    if common::missing_tool(module_path!(), "tcpdump", "tcpdump") {
        return;
    }
    init_tracing();
    let h = common::Host::vlan().await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    for vlan in [10, 20] {
        agent
            .add_network(Network {
                vlan,
                vni: 0,
                gateway: None,
                vrf: "t1".into(),
            })
            .await
            .unwrap();
    }
    let pods =
        [(2, 10), (3, 10), (4, 20)].map(|(last, vlan)| (attach(ovs, last, vlan), last, vlan));
    for (pod, last, vlan) in &pods {
        let port = ofport(ovs, pod.port_name()).await;
        agent
            .add_local_endpoint(LocalEndpoint {
                port_no: port,
                mac: mac(*last),
                vlan: *vlan,
                ipv4: Some(Ipv4Addr::new(10, 1, 1, *last)),
                ipv6: None,
                epg: 0,
                epg_vlan: 0,
                dscp: 0,
                bandwidth: None,
            })
            .await
            .unwrap();
    }
    let (a, b, c) = (&pods[0].0, &pods[1].0, &pods[2].0);

    // Nothing floods a's ARP requests to b: the controller answers them.
    let flooded = capture(
        b.netns().name(),
        "eth0",
        &format!("arp and arp[6:2] = 1 and ether src {}", mac(2)),
        1,
        4,
    )
    .await;
    assert_eq!(
        ping(a.netns().name(), "10.1.1.3", 3).await,
        3,
        "a reaches b on VLAN 10"
    );
    assert_eq!(
        ping(b.netns().name(), "10.1.1.2", 3).await,
        3,
        "b reaches a"
    );
    assert_eq!(
        ping(c.netns().name(), "10.1.1.2", 2).await,
        0,
        "VLAN 20 is isolated"
    );

    // Both directions' ARP requests were answered by the controller with the right MAC.
    let stats = agent.inspect().await.unwrap().stats;
    let replied = stats.get("ArpReqRespSent").copied().unwrap_or(0);
    assert!(
        replied >= 2,
        "controller answered {replied} ARP requests: {stats:?}"
    );
    let flooded = flooded.await.unwrap();
    assert!(
        !flooded.contains("Request"),
        "b saw a's ARP request: {flooded}"
    );
    let neigh = a.exec(&["ip", "neigh", "show", "10.1.1.3"]).unwrap();
    assert!(
        neigh.contains(&mac(3).to_string()),
        "a's ARP cache: {neigh}"
    );
}

/// The physical network side, as a second bridge `brup` of the same OVS (the kernel here has
/// no 802.1Q module, so OVS does the tagging): the uplink is a patch port pair (a trunk on both
/// ends), `rtr` is a router address on VLAN 10 that no agent knows (access port, address in the
/// host namespace), `mon` is a trunk port to watch tagged frames on. Returns the uplink's name
/// on `br0`.
fn upstream(ovs: &Ovs, host: &Netns) -> &'static str {
    ovs.add_bridge("brup").unwrap();
    let patch = |br: &str, name: &str, peer: &str| {
        ovs.vsctl(&[
            "add-port",
            br,
            name,
            "--",
            "set",
            "interface",
            name,
            "type=patch",
            &format!("options:peer={peer}"),
        ])
        .unwrap();
    };
    patch("br0", "upl", "upr");
    patch("brup", "upr", "upl");
    ovs.vsctl(&[
        "add-port",
        "brup",
        "rtr",
        "tag=10",
        "--",
        "set",
        "interface",
        "rtr",
        "type=internal",
    ])
    .unwrap();
    ovs.vsctl(&[
        "add-port",
        "brup",
        "mon",
        "--",
        "set",
        "interface",
        "mon",
        "type=internal",
    ])
    .unwrap();
    for cmd in [
        vec!["ip", "addr", "add", "10.1.1.1/24", "dev", "rtr"],
        vec!["ip", "link", "set", "rtr", "up"],
        vec!["ip", "link", "set", "mon", "up"],
    ] {
        host.exec(&cmd).unwrap();
    }
    "upl"
}

#[actix_rt::test]
async fn uplink_gets_garps_unknown_targets_and_answers_for_local_endpoints() {
    testbed::require!(Root, Ovs, Ping);
    if common::missing_tool(module_path!(), "tcpdump", "tcpdump") {
        return;
    }
    init_tracing();
    let mut config = AgentConfig::new(BridgeKind::Vlan, "br0");
    config.garp_repeats = 3;
    config.garp_interval = std::time::Duration::from_millis(300);
    let h = common::Host::start(config).await;
    let (ovs, agent, host) = (&h.ovs, &h.agent, &h.netns);
    agent
        .add_network(Network {
            vlan: 10,
            vni: 0,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    let uplink = upstream(ovs, host);
    agent.add_uplink(ofport(ovs, uplink).await).await.unwrap();
    let up = host.name();

    // A new endpoint is announced on the uplink, tagged with its VLAN: a GARP for its IPv4
    // address and an unsolicited neighbour advertisement for its IPv6 address.
    let pod = attach(ovs, 2, 10);
    let garp = capture(
        up,
        "mon",
        "vlan 10 and (arp or (icmp6 and ip6[40] == 136))",
        2,
        5,
    )
    .await;
    agent
        .add_local_endpoint(LocalEndpoint {
            port_no: ofport(ovs, pod.port_name()).await,
            mac: mac(2),
            vlan: 10,
            ipv4: Some(Ipv4Addr::new(10, 1, 1, 2)),
            ipv6: Some("fd00:1::2".parse().unwrap()),
            epg: 0,
            epg_vlan: 0,
            dscp: 0,
            bandwidth: None,
        })
        .await
        .unwrap();
    let garp = garp.await.unwrap();
    assert!(
        garp.contains("vlan 10") && garp.contains("Request who-has 10.1.1.2 tell 10.1.1.2"),
        "GARP on the uplink: {garp}"
    );
    assert!(
        garp.contains("neighbor advertisement") && garp.contains("tgt is fd00:1::2"),
        "unsolicited NA on the uplink: {garp}"
    );

    // An endpoint of a group with its own VLAN is announced again in the background:
    // once at once, then `garp_repeats` rounds.
    let grouped = attach(ovs, 5, 10);
    let garps = capture(up, "mon", "vlan 10 and arp src 10.1.1.5", 4, 5).await;
    agent
        .add_local_endpoint(LocalEndpoint {
            port_no: ofport(ovs, grouped.port_name()).await,
            mac: mac(5),
            vlan: 10,
            ipv4: Some(Ipv4Addr::new(10, 1, 1, 5)),
            ipv6: None,
            epg: 5,
            epg_vlan: 10,
            dscp: 0,
            bandwidth: None,
        })
        .await
        .unwrap();
    let garps = garps.await.unwrap();
    assert_eq!(
        garps
            .matches("Request who-has 10.1.1.5 tell 10.1.1.5")
            .count(),
        4,
        "1 + 3 background GARPs: {garps}"
    );

    // The router is unknown: the pod's request goes out the uplink and the router answers.
    assert_eq!(
        ping(pod.netns().name(), "10.1.1.1", 3).await,
        3,
        "pod reaches the router"
    );
    // The router asks for the pod: the controller answers from the uplink.
    host.exec(&["ip", "neigh", "flush", "dev", "rtr"]).unwrap();
    assert_eq!(ping(up, "10.1.1.2", 3).await, 3, "router reaches the pod");
    let stats = agent.inspect().await.unwrap().stats;
    assert!(
        stats.get("ArpReqReinject").is_some_and(|n| *n >= 1),
        "{stats:?}"
    );
    assert!(stats.get("GarpSent").is_some_and(|n| *n >= 1), "{stats:?}");
    let router_neigh = host.exec(&["ip", "neigh", "show", "10.1.1.2"]).unwrap();
    assert!(
        router_neigh.contains(&mac(2).to_string()),
        "router's ARP cache: {router_neigh}"
    );
}
