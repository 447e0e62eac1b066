//! VLAN bridge on real OVS (userspace datapath, pods as namespaces): pods on one VLAN reach
//! each other with the controller answering their ARP requests, a pod on another VLAN does
//! not reach them.
#![allow(clippy::unwrap_used)]

mod common;

use common::{connect, init_tracing, ofport, ping};
use ofnet::{AgentConfig, AgentHandle, BridgeKind, LocalEndpoint, MacAddr, Network};
use std::net::Ipv4Addr;
use testbed::{Datapath, Netns, Ovs, OvsOptions, Pod, PodOptions};

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
    init_tracing();
    let host = Netns::new("h").unwrap();
    let ovs = Ovs::start(OvsOptions {
        netns: Some(&host),
        datapath: Datapath::Netdev,
    })
    .unwrap();
    ovs.add_bridge("br0").unwrap();
    let agent = AgentHandle::start(AgentConfig::new(BridgeKind::Vlan, "br0"));
    let _listener = connect(&ovs, "br0", &agent).await;
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
        [(2, 10), (3, 10), (4, 20)].map(|(last, vlan)| (attach(&ovs, last, vlan), last, vlan));
    for (pod, last, vlan) in &pods {
        let port = ofport(&ovs, pod.port_name()).await;
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
            })
            .await
            .unwrap();
    }
    let (a, b, c) = (&pods[0].0, &pods[1].0, &pods[2].0);

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
    let neigh = a.exec(&["ip", "neigh", "show", "10.1.1.3"]).unwrap();
    assert!(
        neigh.contains(&mac(3).to_string()),
        "a's ARP cache: {neigh}"
    );
}
