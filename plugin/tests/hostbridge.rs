//! The host bridge (bridge mode) end to end: pods on a network without a gateway get a second
//! interface, `host1`, on `contivHostBridge` with a private address (pvtSubnet); the host
//! reaches them there, they reach host services at the host's private address and the
//! outside through it (another host's underlay address, masqueraded), never each other, and a forged source gets nowhere. A netplugin
//! SIGKILL and restart keeps host access flowing; a pod's DEL takes its port and flows away.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::time::Duration;
use testbed::demo::CniPod;

const HOST_BRIDGE: &str = "contivHostBridge";
const HOST_PRIVATE: &str = "172.19.255.254";

/// The pod's private address on `host1`, without the prefix length.
fn host1_address(pod: &CniPod) -> String {
    let out = pod
        .netns
        .exec(&["ip", "-4", "-o", "addr", "show", "dev", "host1"])
        .unwrap_or_else(|e| panic!("pod {} has no host1: {e}", pod.ip));
    let cidr = out
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .unwrap_or_else(|| panic!("no IPv4 address on host1: {out}"));
    assert!(cidr.ends_with("/16"), "{cidr}");
    cidr.trim_end_matches("/16").to_string()
}

#[test]
fn pods_without_a_gateway_reach_their_host_through_the_host_bridge_and_never_each_other() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let mut c = cluster();
    // A second host on an underlay: "the outside" beyond the first host.
    let (ip_a, ip_b) = ("192.168.87.1", "192.168.87.2");
    let host_b = c.add_wired_host(ip_a, ip_b).unwrap();
    c.netctl(&["net", "create", "-e", "vxlan", "-s", "10.48.1.0/24", "nogw"])
        .unwrap();
    create_network(&c, "withgw", "vxlan", "10.48.2.0/24", "10.48.2.1");
    let a = c.add_pod(&c.conflist("hb-a", "nogw", "").unwrap()).unwrap();
    let b = c.add_pod(&c.conflist("hb-b", "nogw", "").unwrap()).unwrap();
    let g = c
        .add_pod(&c.conflist("hb-g", "withgw", "").unwrap())
        .unwrap();

    // Only the pods of the gateway-less network get host access.
    let (pa, pb) = (host1_address(&a), host1_address(&b));
    assert!(
        pa.starts_with("172.19.") && pb.starts_with("172.19."),
        "{pa} {pb}"
    );
    assert_ne!(pa, pb);
    assert!(
        g.netns.exec(&["ip", "link", "show", "host1"]).is_err(),
        "a pod whose network has a gateway got host1"
    );
    let routes = a.netns.exec(&["ip", "-4", "route", "show"]).unwrap();
    assert!(
        routes.contains(&format!("default via {HOST_PRIVATE} dev host1")),
        "{routes}"
    );
    let host_addrs = c
        .host
        .exec(&["ip", "-4", "addr", "show", "contivh0"])
        .unwrap();
    assert!(host_addrs.contains("172.19.255.254/16"), "{host_addrs}");
    let ports = ovs_ports(&c, HOST_BRIDGE);
    assert_eq!(
        ports.iter().filter(|p| p.starts_with("hport")).count(),
        2,
        "{ports:?}"
    );

    // The main network still bridges the two pods.
    assert!(reaches(&a, &b.ip), "A -> B on the pod network");

    // The host reaches each pod at its private address (ping and TCP)...
    c.host
        .exec(&["ping", "-c", "2", "-W", "2", &pa])
        .unwrap_or_else(|e| panic!("host -> {pa} (pod A): {e}"));
    let _in_a = Listener::start(&a, 7070);
    c.host
        .exec(&["nc", "-z", "-w", "2", &pa, "7070"])
        .unwrap_or_else(|e| panic!("host -> {pa}:7070 (pod A): {e}"));
    // ...and the pods reach a host service at the host's private address.
    let _on_host = Listener::in_netns(&c.host, 9099);
    assert!(
        tcp_connects(&a, HOST_PRIVATE, 9099),
        "pod A -> host service"
    );
    assert!(
        tcp_connects(&b, HOST_PRIVATE, 9099),
        "pod B -> host service"
    );
    // Beyond the host: host B's underlay address, forwarded and masqueraded by host A (host B
    // has no route back to the private subnet).
    let _on_b = Listener::in_netns(&host_b.netns, 9098);
    assert!(
        tcp_connects(&a, ip_b, 9098),
        "pod A -> host B {ip_b}:9098 through its host"
    );

    // Never each other through the host bridge: not at layer 2 (B's private address is on
    // the same /16) and not routed back by the host (which forwards: routes via contivh0).
    assert!(!a.can_ping(&pb, 1), "A reached B's private address");
    let _in_b = Listener::start(&b, 7071);
    assert!(
        !tcp_connects(&a, &pb, 7071),
        "A opened TCP to B's private address"
    );
    // Both pods route the other's private address through the host, so only the host
    // bridge's own drop stands between them.
    a.netns
        .exec(&[
            "ip",
            "route",
            "add",
            &format!("{pb}/32"),
            "via",
            HOST_PRIVATE,
            "dev",
            "host1",
        ])
        .unwrap();
    b.netns
        .exec(&[
            "ip",
            "route",
            "add",
            &format!("{pa}/32"),
            "via",
            HOST_PRIVATE,
            "dev",
            "host1",
        ])
        .unwrap();
    assert!(
        !a.can_ping(&pb, 1),
        "A reached B's private address routed by the host"
    );
    assert!(
        !tcp_connects(&a, &pb, 7071),
        "A opened TCP to B routed by the host"
    );
    a.netns
        .exec(&["ip", "route", "del", &format!("{pb}/32")])
        .unwrap();
    b.netns
        .exec(&["ip", "route", "del", &format!("{pa}/32")])
        .unwrap();

    // A forged source on host1 gets nowhere: A claims another private address.
    a.netns
        .exec(&["ip", "addr", "add", "172.19.77.77/16", "dev", "host1"])
        .unwrap();
    assert!(
        a.netns
            .exec(&[
                "ping",
                "-c",
                "1",
                "-W",
                "1",
                "-I",
                "172.19.77.77",
                HOST_PRIVATE
            ])
            .is_err(),
        "a forged source reached the host"
    );
    a.netns
        .exec(&["ip", "addr", "del", "172.19.77.77/16", "dev", "host1"])
        .unwrap();

    // The flows: a spoof guard per pod port, nothing from one pod port to another.
    let table = flows(&c, HOST_BRIDGE);
    assert!(
        table.contains(&format!("nw_src={pa} actions=goto_table:9")),
        "{table}"
    );
    assert!(
        table.contains("nw_src=172.19.0.0/16 actions=drop"),
        "{table}"
    );

    // netplugin SIGKILLed and restarted while the host pings A's private address at 100 pps:
    // nothing lost (the port, pair and flows are re-adopted, not re-created).
    let netns = c.host.name().to_string();
    let summary = ping_across_netplugin_restart(&mut c, &netns, &pa, 600, Duration::from_secs(1));
    println!(
        "{{\"measure\":\"host bridge: netplugin SIGKILL+restart at 100 pps\",\"ping\":\"{summary}\"}}"
    );
    assert!(summary.contains("600 received"), "{summary}");
    assert!(
        tcp_connects(&a, HOST_PRIVATE, 9099),
        "pod A -> host after restart"
    );
    assert!(!a.can_ping(&pb, 1), "A reached B after restart");

    // A DEL takes the pod's host-access port and flows with it.
    c.del_pod(&a).unwrap();
    let ports = ovs_ports(&c, HOST_BRIDGE);
    assert_eq!(
        ports.iter().filter(|p| p.starts_with("hport")).count(),
        1,
        "{ports:?}"
    );
    let table = flows(&c, HOST_BRIDGE);
    assert!(!table.contains(&format!("nw_src={pa} ")), "{table}");
    assert!(
        !host_links(&c)
            .iter()
            .any(|l| l.starts_with("hport") && !ports.contains(l)),
        "a host-access pair outlived its pod: {:?}",
        host_links(&c)
    );
    c.host
        .exec(&["ping", "-c", "2", "-W", "2", &pb])
        .unwrap_or_else(|e| panic!("host -> {pb} (pod B) after A left: {e}"));
    drop(host_b);
}
