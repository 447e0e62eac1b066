//! VXLAN bridge across two emulated hosts on real OVS: each host is a namespace with its own
//! OVS (userspace datapath), joined by a veth underlay; `br-phy` carries the host's underlay
//! address and OVS tunnels natively. The test plays the master: it relays each agent's local
//! endpoints to the other and tells each about the other's VTEP.
#![allow(clippy::unwrap_used)]

mod common;

use common::vxlan_hosts::{exchange, mac, two_hosts};
use common::{dumped_flows, init_tracing, ofport, ping};
use ofnet::Network;
use std::net::Ipv4Addr;

#[actix_rt::test]
async fn pods_on_two_hosts_reach_each_other_per_vni_until_removed() {
    testbed::require!(Root, Ovs, Ping);
    init_tracing();
    let (a, b) = two_hosts().await;

    // VNI 5000 uses local VLAN 2 on A and 3 on B: local VLANs are each host's own business.
    // VNI 6000 exists on both hosts, same tenant.
    for (h, vlans) in [(&a, [2, 4]), (&b, [3, 5])] {
        for (vlan, vni) in vlans.into_iter().zip([5000, 6000]) {
            h.agent
                .add_network(Network {
                    vlan,
                    vni,
                    gateway: None,
                    vrf: "t1".into(),
                })
                .await
                .unwrap();
        }
    }
    let (a1_ip, b1_ip, b2_ip) = (
        Ipv4Addr::new(10, 1, 1, 2),
        Ipv4Addr::new(10, 1, 1, 3),
        Ipv4Addr::new(10, 1, 1, 4),
    );
    let a1 = a.pod(a1_ip, 2).await;
    let _b1 = b.pod(b1_ip, 3).await;
    let _b2 = b.pod(b2_ip, 5).await; // VNI 6000

    // The master's part: endpoints and VTEPs of each host to the other.
    exchange(&a, &b).await;

    assert_eq!(
        ping(a1.netns().name(), &b1_ip.to_string(), 3).await,
        3,
        "A1 reaches B1 over VXLAN"
    );
    assert_eq!(
        ping(a1.netns().name(), &b2_ip.to_string(), 2).await,
        0,
        "VNI 6000 is isolated from 5000"
    );

    // Flood mode: no controller in the ARP path, requests follow the flood groups across the
    // tunnel and B1 answers itself.
    for h in [&a, &b] {
        h.agent.set_arp_mode(ofnet::ArpMode::Flood).await.unwrap();
    }
    assert!(
        !dumped_flows(&a.ovs, "br0")
            .await
            .iter()
            .any(|l| l.contains("arp_op=1")),
        "no ARP punt in flood mode"
    );
    common::settle(&a.ovs);
    common::settle(&b.ovs);
    let answered_before = a
        .agent
        .inspect()
        .await
        .unwrap()
        .stats
        .get("ArpReqRespSent")
        .copied();
    a1.exec(&["ip", "neigh", "flush", "dev", "eth0"]).unwrap();
    assert_eq!(
        ping(a1.netns().name(), &b1_ip.to_string(), 3).await,
        3,
        "A1 reaches B1 with flooded ARP"
    );
    assert_eq!(
        a.agent
            .inspect()
            .await
            .unwrap()
            .stats
            .get("ArpReqRespSent")
            .copied(),
        answered_before,
        "the controller answered nothing in flood mode"
    );

    // B1 goes away: B removes its local endpoint, the master relays the removal to A.
    let b1_id = format!("{b1_ip}:t1");
    b.agent
        .remove_local_endpoint(ofport(&b.ovs, _b1.port_name()).await)
        .await
        .unwrap();
    a.agent.remove_remote_endpoint(b1_id.clone()).await.unwrap();
    common::settle(&a.ovs);
    common::settle(&b.ovs);
    let flows = dumped_flows(&a.ovs, "br0").await;
    assert!(
        !flows
            .iter()
            .any(|l| l.contains(&b1_ip.to_string()) || l.contains(&mac(b1_ip).to_string())),
        "A still has flows for B1: {flows:#?}"
    );
    assert!(
        !a.agent
            .inspect()
            .await
            .unwrap()
            .endpoint_db
            .contains_key(&b1_id)
    );
    assert_eq!(
        ping(a1.netns().name(), &b1_ip.to_string(), 2).await,
        0,
        "B1 unreachable once removed"
    );
}
