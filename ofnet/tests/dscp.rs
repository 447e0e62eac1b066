//! DSCP marking on a real VLAN bridge: an endpoint updated to DSCP 10 emits packets whose IP
//! header carries it (seen by tcpdump at the receiver), updated back to 0 it emits them
//! unmarked and the marking flows are gone.
#![allow(clippy::unwrap_used)]

mod common;

use common::{capture_echo_requests, dumped_flows, init_tracing, ofport, ping};
use ofnet::{LocalEndpoint, MacAddr, Network};
use std::net::Ipv4Addr;
use testbed::{Pod, PodOptions};

#[actix_rt::test]
async fn dscp_update_marks_and_unmarks_an_endpoints_packets() {
    testbed::require!(Root, Ovs, Ping);
    if common::missing_tool(module_path!(), "tcpdump", "tcpdump") {
        return;
    }
    init_tracing();
    let h = common::Host::vlan().await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    agent
        .add_network(Network {
            vlan: 10,
            vni: 0,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    let mut pods = Vec::new();
    for last in [2u8, 3] {
        let mac = MacAddr([2, 2, 10, 1, 1, last]);
        let pod = Pod::attach(
            ovs,
            "br0",
            &PodOptions {
                ip: format!("10.1.1.{last}/24"),
                mac: Some(mac.to_string()),
                gateway: None,
                vlan: Some(10),
            },
        )
        .unwrap();
        let port = ofport(ovs, pod.port_name()).await;
        agent
            .add_local_endpoint(LocalEndpoint {
                port_no: port,
                mac,
                vlan: 10,
                ipv4: Some(Ipv4Addr::new(10, 1, 1, last)),
                ipv6: None,
                epg: 0,
                epg_vlan: 0,
                dscp: 0,
                bandwidth: None,
            })
            .await
            .unwrap();
        pods.push((pod, port));
    }
    let (a, a_port) = (&pods[0].0, pods[0].1);
    let b = &pods[1].0;

    agent.update_local_endpoint(a_port, 10, None).await.unwrap();
    common::settle(ovs);
    let capture = capture_echo_requests(b.netns().name(), 2).await;
    assert_eq!(ping(a.netns().name(), "10.1.1.3", 2).await, 2);
    let seen = capture.await.unwrap();
    // tcpdump prints the whole TOS byte: DSCP 10 << 2 = 0x28.
    assert_eq!(
        seen.matches("tos 0x28").count(),
        2,
        "marked with DSCP 10: {seen}"
    );

    agent.update_local_endpoint(a_port, 0, None).await.unwrap();
    common::settle(ovs);
    let flows = dumped_flows(ovs, "br0").await;
    assert!(
        !flows.iter().any(|l| l.contains("ip_dscp")),
        "marking flows removed: {flows:#?}"
    );
    let capture = capture_echo_requests(b.netns().name(), 2).await;
    assert_eq!(ping(a.netns().name(), "10.1.1.3", 2).await, 2);
    let seen = capture.await.unwrap();
    assert_eq!(
        seen.matches("tos 0x0,").count(),
        2,
        "unmarked again: {seen}"
    );
}
