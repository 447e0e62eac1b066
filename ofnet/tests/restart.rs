//! Restarting the agent does not interrupt traffic: the new agent replays the state before it
//! listens, and its first connect replaces the old flows in place under a new generation.
#![allow(clippy::unwrap_used)]

mod common;

use common::{blocking, init_tracing, ofport, wait_synced};
use ofnet::{AgentConfig, AgentHandle, BridgeKind, LocalEndpoint, MacAddr, Network};
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;
use testbed::{Datapath, Netns, Ovs, OvsOptions, Pod, PodOptions};

fn mac(last: u8) -> MacAddr {
    MacAddr([2, 2, 10, 1, 1, last])
}

/// What netplugin would replay from its state: the network and both endpoints.
async fn replay(agent: &AgentHandle, ports: &[(u8, u32)]) {
    agent
        .add_network(Network {
            vlan: 10,
            vni: 0,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    for &(last, port) in ports {
        agent
            .add_local_endpoint(LocalEndpoint {
                port_no: port,
                mac: mac(last),
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
    }
}

#[actix_rt::test]
async fn agent_restart_keeps_pods_talking() {
    testbed::require!(Root, Ovs, Ping);
    init_tracing();
    let host = Netns::new("h").unwrap();
    let ovs = Ovs::start(OvsOptions {
        netns: Some(&host),
        datapath: Datapath::Netdev,
    })
    .unwrap();
    ovs.add_bridge("br0").unwrap();
    let socket = ovs.run_dir().join("br0.ctl.sock");
    let first = AgentHandle::start(AgentConfig::new(BridgeKind::Vlan, "br0"));
    let listener = common::connect(&ovs, "br0", &first).await;
    // Reconnect fast: the default backoff would make the test wait up to 8 s.
    ovs.vsctl(&[
        "set",
        "controller",
        "br0",
        "max_backoff=1000",
        "inactivity_probe=0",
    ])
    .unwrap();
    let mut ports = Vec::new();
    let mut pods = Vec::new();
    for last in [2u8, 3] {
        let pod = Pod::attach(
            &ovs,
            "br0",
            &PodOptions {
                ip: format!("10.1.1.{last}/24"),
                mac: Some(mac(last).to_string()),
                gateway: None,
                vlan: Some(10),
            },
        )
        .unwrap();
        ports.push((last, ofport(&ovs, pod.port_name()).await));
        pods.push(pod);
    }
    replay(&first, &ports).await;
    assert_eq!(common::ping(pods[0].netns().name(), "10.1.1.3", 3).await, 3);
    let generation = first.bridge().status().await.unwrap().generation;

    // 100 pings 50 ms apart, across the restart.
    let argv = pods[0].netns().argv(&[
        "ping", "-n", "-q", "-c", "100", "-i", "0.05", "-W", "1", "10.1.1.3",
    ]);
    let started = std::time::Instant::now();
    let pinger = blocking(move || {
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    actix_rt::time::sleep(Duration::from_millis(500)).await;

    // The old agent goes away (its connection closes; OVS keeps the flows in secure mode).
    drop(listener);
    first.bridge().switch().await.unwrap().close();
    drop(first);
    // The new one replays, then listens on the same socket.
    let second = AgentHandle::start(AgentConfig::new(BridgeKind::Vlan, "br0"));
    replay(&second, &ports).await;
    let _listener = second.listen_unix(&socket).await.unwrap();
    wait_synced(&second).await;
    assert!(
        started.elapsed() < Duration::from_millis(4500),
        "the new agent took over after the pings ended ({:?})",
        started.elapsed()
    );
    let status = second.bridge().status().await.unwrap();
    assert!(status.generation > generation, "{status:?}");

    let summary = pinger.await;
    assert!(
        summary.contains("100 packets transmitted, 100 received"),
        "pings lost across the restart: {summary}"
    );
}
