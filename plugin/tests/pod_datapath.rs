//! The two foundations together, as netplugin will use them for a pod: netlink plumbs the
//! veth pair into the pod namespace, the OVSDB client adds the host end to a userspace
//! (netdev) bridge as a VLAN access port and waits for its OpenFlow port; then packets move.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use plugin::netlink::{PodInterfaceSpec, in_netns};
use plugin::ovsdb::{BridgeSpec, OvsdbClient, PortSpec};
use testbed::{Datapath, Netns, Ovs, OvsOptions};

const BR: &str = "contivVlanBridge";

fn pod_spec(pod: &Netns, n: u32) -> PodInterfaceSpec {
    PodInterfaceSpec {
        netns: pod.path(),
        host_name: format!("vvport{n}"),
        ifname: "eth0".into(),
        mtu: 1450,
        mac: Some(format!("02:02:0a:01:01:{n:02x}").parse().unwrap()),
        addresses: vec![format!("10.1.1.{n}/24").parse().unwrap()],
        gateways: vec!["10.1.1.254".parse().unwrap()],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_plumbed_pods_ping_through_ovs_and_are_removed_cleanly() {
    testbed::require!(Root, Ovs, Ip, Ping);
    let host = Netns::new("host").unwrap();
    let ovs = Ovs::start(OvsOptions {
        netns: Some(&host),
        datapath: Datapath::Netdev,
    })
    .unwrap();
    let client = OvsdbClient::connect(ovs.db_socket()).await.unwrap();
    client
        .ensure_bridge(&BridgeSpec::new(BR).datapath_type("netdev"))
        .await
        .unwrap();
    // fail_mode=secure: nothing forwards until a flow says so.
    client.sync_vswitchd(Duration::from_secs(20)).await.unwrap();
    ovs.ofctl(&["add-flow", BR, "priority=1,actions=normal"])
        .unwrap();

    let pods = [Netns::new("pa").unwrap(), Netns::new("pb").unwrap()];
    let host_path: PathBuf = host.path();
    for (i, pod) in pods.iter().enumerate() {
        let n = u32::try_from(i).unwrap() + 1;
        let spec = pod_spec(pod, n);
        let started = Instant::now();
        let plumbed = in_netns(
            &host_path,
            move |nl| async move { nl.plumb_pod(&spec).await },
        )
        .await
        .unwrap();
        let plumb_time = started.elapsed();
        client
            .ensure_port(
                BR,
                &PortSpec::access(format!("vvport{n}"), 10).endpoint_id(format!("ep{n}")),
            )
            .await
            .unwrap();
        let port_time = started.elapsed();
        let ofport = client
            .wait_ofport(&format!("vvport{n}"), Duration::from_secs(20))
            .await
            .unwrap();
        eprintln!(
            "pod {n}: netlink plumbing {plumb_time:?}, + OVSDB port {port_time:?}, \
             + ofport {ofport} assigned {:?}",
            started.elapsed()
        );
        assert_eq!(plumbed.pod.mtu, 1450);
    }
    let ping = pods[0]
        .exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.1.1.2"])
        .unwrap();
    assert!(ping.contains("3 received"), "{ping}");

    // Teardown as DEL does it: OVS port, then the veth; nothing is left on the host.
    for (i, pod) in pods.iter().enumerate() {
        let n = i + 1;
        assert!(client.delete_port(&format!("vvport{n}")).await.unwrap());
        let pod_path = pod.path();
        let removed = in_netns(&host_path, move |nl| async move {
            nl.unplumb_pod(Some(&pod_path), "eth0", &format!("vvport{n}"))
                .await
        })
        .await
        .unwrap();
        assert!(removed);
    }
    let left = host.exec(&["ip", "-o", "link", "show"]).unwrap();
    assert!(
        !left.contains("vvport") && !left.contains("vport"),
        "{left}"
    );
    assert!(!ovs.vsctl(&["list-ports", BR]).unwrap().contains("vvport"));
}
