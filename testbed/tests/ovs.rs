//! The Open vSwitch sandbox: bridges, flows seen by `ovs-ofctl dump-flows`, restart, and two
//! pods pinging each other through a userspace (netdev) bridge.

use testbed::{Datapath, Netns, Ovs, OvsOptions, Pod, PodOptions, pid_alive};

#[test]
fn bridge_and_flow_show_in_dump_flows() {
    testbed::require!(Ovs);
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    ovs.add_bridge("br0").unwrap();
    assert_eq!(ovs.vsctl(&["list-br"]).unwrap().trim(), "br0");

    ovs.ofctl(&[
        "add-flow",
        "br0",
        "cookie=0x2a,table=3,priority=100,ip,nw_dst=10.1.1.1,actions=output:7",
    ])
    .unwrap();
    let flows = ovs.dump_flows("br0").unwrap();
    let ours = flows
        .iter()
        .find(|f| f.table == 3)
        .expect("the added flow is in dump-flows");
    assert_eq!(ours.cookie, 0x2a);
    assert_eq!(
        ours.normalized(),
        "table=3, priority=100,ip,nw_dst=10.1.1.1 actions=output:7"
    );

    // Flags print before the priority, separated by a space.
    ovs.ofctl(&[
        "add-flow",
        "br0",
        "table=4,priority=9,send_flow_rem,ip,nw_src=10.1.1.2,actions=drop",
    ])
    .unwrap();
    let flagged = ovs
        .dump_flows("br0")
        .unwrap()
        .into_iter()
        .find(|f| f.table == 4)
        .expect("the flagged flow is in dump-flows");
    assert_eq!(
        (
            flagged.priority,
            flagged.matches.as_str(),
            flagged.attributes.as_slice()
        ),
        (
            9,
            "ip,nw_src=10.1.1.2",
            ["send_flow_rem".to_string()].as_slice()
        )
    );

    ovs.ofctl(&["add-group", "br0", "group_id=5,type=all,bucket=output:1"])
        .unwrap();
    assert_eq!(
        ovs.dump_groups("br0").unwrap(),
        ["group_id=5,type=all,bucket=actions=output:1"]
    );
}

#[test]
fn kill_and_restart_keeps_the_database_but_not_the_flows() {
    testbed::require!(Ovs);
    let mut ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    ovs.add_bridge("br0").unwrap();
    ovs.ofctl(&["add-flow", "br0", "table=1,priority=5,actions=drop"])
        .unwrap();
    let old = ovs.pids();
    ovs.kill();
    for pid in &old {
        assert!(!pid_alive(*pid), "pid {pid} survived kill");
    }
    assert!(
        ovs.vsctl(&["list-br"]).is_err(),
        "ovsdb still answers after kill"
    );

    ovs.restart().unwrap();
    assert_eq!(ovs.vsctl(&["list-br"]).unwrap().trim(), "br0");
    // Flows live in ovs-vswitchd only: a restart loses them (the controller must put them back).
    let flows = ovs.dump_flows("br0").unwrap();
    assert!(flows.iter().all(|f| f.table != 1), "{flows:?}");
}

#[test]
fn two_pods_ping_through_a_netdev_bridge_and_cleanup_leaves_nothing() {
    testbed::require!(Root, Ovs, Ip, Ping);
    let host = Netns::new("h").unwrap();
    let ovs = Ovs::start(OvsOptions {
        netns: Some(&host),
        datapath: Datapath::Netdev,
    })
    .unwrap();
    ovs.add_bridge("br0").unwrap();
    let a = Pod::attach(
        &ovs,
        "br0",
        &PodOptions {
            ip: "10.9.0.1/24".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let b = Pod::attach(
        &ovs,
        "br0",
        &PodOptions {
            ip: "10.9.0.2/24".into(),
            ..Default::default()
        },
    )
    .unwrap();

    let ping = a.ping(b.ip(), 3).unwrap();
    assert!(ping.all_answered(), "a -> b: {ping:?}");
    assert!(b.can_reach(a.ip(), 2).unwrap(), "b -> a");

    // The NORMAL flow forwarded the packets: its counter moved.
    let normal = ovs
        .dump_flows("br0")
        .unwrap()
        .into_iter()
        .find(|f| f.actions == "NORMAL")
        .expect("standalone bridge has the NORMAL flow");
    assert!(normal.n_packets >= 10, "{normal:?}");

    // A pod cut off from the bridge is unreachable: delete its port.
    ovs.vsctl(&["del-port", "br0", b.port_name()]).unwrap();
    assert!(!a.can_reach(b.ip(), 2).unwrap(), "reachable without a port");

    // Everything goes away on drop: processes, namespaces, ports.
    let pids = ovs.pids();
    let names = [
        host.name().to_string(),
        a.netns().name().to_string(),
        b.netns().name().to_string(),
    ];
    let host_ports = [a.port_name().to_string(), b.port_name().to_string()];
    let run_dir = ovs.run_dir().to_path_buf();
    drop((a, b));
    drop(ovs);
    drop(host);
    for pid in pids {
        assert!(!pid_alive(pid), "OVS pid {pid} survived");
    }
    for n in &names {
        assert!(!Netns::exists(n), "namespace {n} survived");
    }
    let links = testbed::run(&["ip", "-o", "link"]).unwrap();
    for p in &host_ports {
        assert!(!links.contains(p.as_str()), "link {p} survived");
    }
    assert!(!run_dir.exists(), "run dir survived");
}
