//! Routing mode end to end: netmaster and netplugins with `--fwdmode routing`, pods through
//! libcni. VXLAN networks run the `vrouter` datapath: pods on two hosts are routed through the
//! tunnel (ping, TCP, another network of the tenant, a service VIP with its provider on the other
//! host), ARP is answered with the router MAC. VLAN networks run `vlrouter` with BGP against a
//! BIRD router.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::Value;
use std::time::{Duration, Instant};
use testbed::demo::{Cluster, ClusterOptions, CniPod, http};

const ROUTER_MAC: &str = "00:00:11:11:11:11";

fn routing_cluster() -> Cluster {
    Cluster::start_with(
        binaries(),
        ClusterOptions {
            fwd_mode: Some("routing".into()),
            ..ClusterOptions::default()
        },
    )
    .expect("starting a routing-mode cluster")
}

/// Wait until `from` gets an echo reply from `ip` (the first packets may wait for the remote
/// endpoint to come through the ofnet master).
fn wait_reaches(from: &CniPod, ip: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !from.can_ping(ip, 1) {
        assert!(Instant::now() < deadline, "{} never reached {ip}", from.ip);
    }
}

/// The MAC `pod`'s neighbour table holds for `ip`.
fn neighbour(pod: &CniPod, ip: &str) -> Option<String> {
    let out = pod.netns.exec(&["ip", "neigh", "show", ip]).ok()?;
    let words: Vec<&str> = out.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "lladdr")?;
    words.get(i + 1).map(|s| s.to_string())
}

#[test]
fn vxlan_pods_on_two_hosts_are_routed_with_the_router_mac() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let mut c = routing_cluster();
    let (ip_a, ip_b) = ("192.168.86.1", "192.168.86.2");
    let host_b = c.add_wired_host(ip_a, ip_b).unwrap();
    create_network(&c, "red", "vxlan", "10.46.1.0/24", "10.46.1.1");
    create_network(&c, "blue", "vxlan", "10.46.2.0/24", "10.46.2.1");
    let a = c.add_pod(&c.conflist("rt-a", "red", "").unwrap()).unwrap();
    let b = c
        .add_pod(&host_b.conflist("rt-b", "red", "").unwrap())
        .unwrap();
    let b2 = c
        .add_pod(&host_b.conflist("rt-b2", "blue", "").unwrap())
        .unwrap();

    wait_reaches(&a, &b.ip);
    assert!(reaches(&b, &a.ip), "B -> A");
    wait_reaches(&a, &b2.ip);
    assert_eq!(
        neighbour(&a, &b.ip).as_deref(),
        Some(ROUTER_MAC),
        "a pod on the same subnet is resolved to the router"
    );
    assert_eq!(
        neighbour(&a, "10.46.1.1").as_deref(),
        Some(ROUTER_MAC),
        "the gateway is the router"
    );

    let _l = Listener::start(&b, 8080);
    assert!(tcp_connects(&a, &b.ip, 8080), "TCP across hosts");

    // Host access through contivh0 (pvtSubnet 172.19.0.0/16): A's private address is in the
    // flow that takes the host's packets back to A.
    let table = flows(&c, VXLAN_BRIDGE);
    let private = table
        .lines()
        .filter(|l| l.contains("table=9") && l.contains(&format!("set_field:{}->ip_dst", a.ip)))
        .find_map(|l| {
            Some(
                l.split("nw_dst=")
                    .nth(1)?
                    .split([' ', ','])
                    .next()?
                    .to_string(),
            )
        })
        .unwrap_or_else(|| panic!("no host DNAT flow for {}: {table}", a.ip));
    assert!(private.starts_with("172.19."), "{private}");
    let host_addrs = c
        .host
        .exec(&["ip", "-4", "addr", "show", "contivh0"])
        .unwrap();
    assert!(host_addrs.contains("172.19.255.254/16"), "{host_addrs}");
    // The host reaches the pod by its private address (ping and TCP)...
    c.host
        .exec(&["ping", "-c", "2", "-W", "2", &private])
        .unwrap_or_else(|e| panic!("host -> {private} (pod A): {e}"));
    let _in_a = Listener::in_netns(&a.netns, 7070);
    c.host
        .exec(&["nc", "-z", "-w", "2", &private, "7070"])
        .unwrap_or_else(|e| panic!("host -> {private}:7070 (pod A): {e}"));
    // ...and the pod reaches a listener of its host, through the host NAT port.
    let _on_host = Listener::in_netns(&c.host, 9099);
    assert!(
        tcp_connects(&a, ip_a, 9099),
        "pod A -> its host {ip_a}:9099"
    );
    assert!(a.can_ping(ip_a, 2), "pod A pings its host");
    // Beyond the host: host B's underlay address, forwarded and masqueraded by host A.
    let _on_b = Listener::in_netns(&host_b.netns, 9098);
    assert!(
        tcp_connects(&a, ip_b, 9098),
        "pod A -> host B {ip_b}:9098 through host A"
    );
    // Private addresses are the host's to use: a pod cannot reach another through one.
    assert!(
        !b.can_ping(&private, 1),
        "B reached A through A's private address"
    );

    // A service load balancer in the routed pipeline: a provider on host B behind a VIP.
    c.netctl(&[
        "service",
        "create",
        "rt-svc",
        "-s",
        "red",
        "-l",
        "app=rt",
        "-p",
        "80:8080:TCP",
        "--ip",
        "10.46.1.100",
    ])
    .unwrap();
    let provider = c
        .add_pod(
            &host_b
                .conflist_with_labels("rt-p", "red", "", &[("app", "rt")])
                .unwrap(),
        )
        .unwrap();
    let _p = Listener::start(&provider, 8080);
    wait_for(
        "the service through the VIP",
        Duration::from_secs(15),
        || tcp_connects(&a, "10.46.1.100", 80),
    );

    // Both netplugins run vrouter on the VXLAN bridge; the IP table routes B through the VTEP.
    let (status, body) = http("GET", &c.debug_addr, "/inspect/driver").unwrap();
    assert_eq!(status, 200, "{body}");
    let driver: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(driver["vxlan"]["DpName"], "vrouter", "{driver}");
    assert_eq!(driver["vxlan"]["FwdMode"], "routing");
    assert_eq!(driver["vxlan"]["MyRouterMac"], ROUTER_MAC);
    let table = flows(&c, VXLAN_BRIDGE);
    assert!(
        table.lines().any(|l| l.contains("table=7")
            && l.contains(&format!("nw_dst={}", b.ip))
            && l.contains("set_field:00:00:11:11:11:11->eth_dst")
            && l.contains("->tun_id")),
        "{table}"
    );

    // B leaves: its route goes.
    c.del_pod(&b).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while flows(&c, VXLAN_BRIDGE).contains(&format!("nw_dst={},", b.ip)) {
        assert!(Instant::now() < deadline, "B's route outlived B");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(host_b);
}

/// netplugin refuses to run a forwarding mode the cluster does not use.
#[test]
fn netplugin_refuses_a_fwdmode_other_than_the_clusters() {
    testbed::require!(Root, Ovs, Etcd, Ip);
    let mut c = routing_cluster();
    c.stop_netplugin();
    c.options.fwd_mode = Some("bridge".into());
    let err = c
        .start_netplugin()
        .expect_err("netplugin --fwdmode bridge in a routing cluster");
    let log = std::fs::read_to_string(c.dir.path().join("netplugin.log")).unwrap_or_default();
    assert!(
        log.contains("--fwdmode bridge") && log.contains("fwd-mode) is routing"),
        "{err}\n{log}"
    );
}

/// A BGP router in its own namespace: a Linux bridge joining the hosts' uplinks, BIRD 2 on it,
/// and a prefix it announces (an address on a dummy-like veth). Stopped on drop.
struct Router {
    /// Kept: BIRD and the bridge live in it.
    _ns: testbed::Netns,
    dir: testbed::SandboxDir,
}

const ROUTER_IP: &str = "50.1.1.200";
/// What the router announces (an address of it).
const EXTERNAL: &str = "192.0.2.1";

impl Router {
    /// Start BIRD peering with `(address, AS)` of each host, as AS 65000.
    fn start(uplinks: &[(&testbed::Netns, &str)], peers: &[(&str, u32)]) -> Router {
        let ns = testbed::Netns::new("rt").unwrap();
        let dir = testbed::temp_dir("rt").unwrap();
        for cmd in [
            vec!["ip", "link", "set", "lo", "up"],
            vec!["ip", "link", "add", "br0", "type", "bridge"],
            vec!["ip", "addr", "add", "50.1.1.200/24", "dev", "br0"],
            vec!["ip", "link", "set", "br0", "up"],
            // The kernel has no dummy driver here: a veth pair stands in.
            vec![
                "ip", "link", "add", "dum0", "type", "veth", "peer", "name", "dum0p",
            ],
            vec!["ip", "link", "set", "dum0p", "up"],
            vec!["ip", "addr", "add", "192.0.2.1/24", "dev", "dum0"],
            vec!["ip", "link", "set", "dum0", "up"],
            vec!["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"],
            // The hosts' userspace datapaths do not complete checksums left to hardware.
            vec!["ethtool", "-K", "br0", "tx", "off"],
        ] {
            ns.exec(&cmd).unwrap();
        }
        // Each host's uplink is a veth whose other end waits in the host namespace: move it
        // onto the router's bridge.
        for (host, uplink) in uplinks {
            let out = host.exec(&["ip", "-o", "link", "show", uplink]).unwrap();
            let peer = out
                .split(": ")
                .nth(1)
                .and_then(|n| n.split('@').nth(1))
                .unwrap()
                .to_string();
            host.exec(&["ip", "link", "set", &peer, "netns", ns.name()])
                .unwrap();
            ns.exec(&["ip", "link", "set", &peer, "master", "br0"])
                .unwrap();
            ns.exec(&["ip", "link", "set", &peer, "up"]).unwrap();
        }
        let mut conf = String::from(
            "router id 50.1.1.200;\n\
             protocol device { scan time 1; }\n\
             protocol direct { ipv4; interface \"dum0\"; }\n\
             protocol kernel { ipv4 { export all; import none; }; }\n\
             template bgp host { local 50.1.1.200 as 65000; graceful restart on; \
             ipv4 { import all; export all; next hop self; }; }\n",
        );
        for (i, (ip, asn)) in peers.iter().enumerate() {
            conf.push_str(&format!(
                "protocol bgp host{i} from host {{ neighbor {ip} as {asn}; }}\n"
            ));
        }
        std::fs::write(dir.path().join("bird.conf"), conf).unwrap();
        let path = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
        ns.exec(&[
            "bird",
            "-c",
            &path("bird.conf"),
            "-s",
            &path("bird.ctl"),
            "-P",
            &path("bird.pid"),
        ])
        .unwrap();
        Router { _ns: ns, dir }
    }

    fn birdc(&self, args: &[&str]) -> String {
        let ctl = self.dir.path().join("bird.ctl");
        let mut argv = vec!["birdc", "-s", ctl.to_str().unwrap()];
        argv.extend(args);
        testbed::run(&argv).unwrap_or_default()
    }

    /// The next hop of the router's route to `prefix`, if it has one.
    fn route(&self, prefix: &str) -> Option<String> {
        let out = self.birdc(&["show", "route", prefix]);
        let mut lines = out.lines().skip_while(|l| !l.starts_with(prefix));
        lines.next()?;
        lines
            .next()
            .and_then(|l| l.split_whitespace().skip_while(|w| *w != "via").nth(1))
            .map(str::to_string)
    }

    /// The router's routes as BIRD prints them.
    fn table(&self) -> String {
        self.birdc(&["show", "route"])
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("bird.pid")) {
            let _ = std::process::Command::new("kill").arg(pid.trim()).status();
        }
    }
}

/// `/inspect/bgp` of the netplugin at `debug`.
fn inspect_bgp(debug: &str) -> Value {
    let (status, body) = http("GET", debug, "/inspect/bgp").unwrap();
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn neighbor_state(debug: &str) -> String {
    inspect_bgp(debug)["Neighbors"][0]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "{what} not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

/// Routing mode with VLAN networks (`vlrouter`) and BGP: two hosts peer with a BIRD router on
/// their uplinks; pods are announced and withdrawn, the router's prefix is reachable from a
/// pod, pods on the two hosts reach each other through the router, and a netplugin SIGKILL and
/// restart under 100 pps loses nothing.
#[test]
fn vlan_pods_are_announced_to_a_bgp_router_and_routed_through_it() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    for tool in ["gobgpd", "gobgp", "bird", "birdc"] {
        let found = ["/usr/bin", "/usr/sbin", "/bin", "/sbin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(tool).exists());
        if !found
            && testbed::require::skip_or_fail(
                "vlan_pods_are_announced_to_a_bgp_router_and_routed_through_it",
                &format!("needs {tool} (apt-get install gobgpd bird2)"),
            )
        {
            return;
        }
    }
    let mut c = routing_cluster();
    let host_b = c.add_host("127.0.0.1", |_, _| Ok(())).unwrap();
    let router = Router::start(
        &[
            (&c.host, &c.uplink),
            (&host_b.netns, &host_b_uplink(&host_b)),
        ],
        &[("50.1.1.1", 65001), ("50.1.1.2", 65002)],
    );
    for (label, ip, asn) in [
        (c.host_label.clone(), "50.1.1.1/24", "65001"),
        (host_b.label.clone(), "50.1.1.2/24", "65002"),
    ] {
        c.netctl(&[
            "bgp",
            "create",
            &label,
            "-router-ip",
            ip,
            "-as",
            asn,
            "-neighbor-as",
            "65000",
            "-neighbor",
            ROUTER_IP,
        ])
        .unwrap();
    }
    for (debug, bgp_dir) in [
        (&c.debug_addr, c.bgp.dir().to_path_buf()),
        (&host_b.debug_addr, host_b.bgp.dir().to_path_buf()),
    ] {
        let start = Instant::now();
        while neighbor_state(debug) != "ESTABLISHED" {
            if start.elapsed() > Duration::from_secs(60) {
                panic!(
                    "BGP session not Established within 60 s\n{}\nspeaker log:\n{}\nrouter:\n{}\nflows:\n{}\nnetplugin:\n{}",
                    inspect_bgp(debug),
                    std::fs::read_to_string(bgp_dir.join("gobgpd.log")).unwrap_or_default(),
                    router.birdc(&["show", "protocols", "all"]),
                    flows(&c, VLAN_BRIDGE),
                    c.netplugin_log(),
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    create_network(&c, "vnet", "vlan", "10.47.1.0/24", "10.47.1.1");
    let a = c
        .add_pod(&c.conflist("bgp-a", "vnet", "").unwrap())
        .unwrap();
    let b = c
        .add_pod(&host_b.conflist("bgp-b", "vnet", "").unwrap())
        .unwrap();
    for (pod, next_hop) in [(&a, "50.1.1.1"), (&b, "50.1.1.2")] {
        let prefix = format!("{}/32", pod.ip);
        wait_for(
            "the pod's route on the router",
            Duration::from_secs(15),
            || router.route(&prefix).as_deref() == Some(next_hop),
        );
    }

    // Time from a pod ADD (the CNI call returning) to its /32 on the router.
    let added = Instant::now();
    let a2 = c
        .add_pod(&c.conflist("bgp-a2", "vnet", "").unwrap())
        .unwrap();
    let cni = added.elapsed();
    let prefix2 = format!("{}/32", a2.ip);
    wait_for("the new pod's route", Duration::from_secs(15), || {
        router.route(&prefix2).as_deref() == Some("50.1.1.1")
    });
    let announced = added.elapsed();
    println!(
        "{{\"measure\":\"pod ADD to route on the router\",\"cni_add_ms\":{},\"route_ms\":{}}}",
        cni.as_millis(),
        announced.as_millis()
    );

    // The router's prefix from a pod; pods on the two hosts through the router.
    assert!(
        reaches(&a, EXTERNAL),
        "pod A reaches {EXTERNAL}\n{}",
        router.table()
    );
    wait_reaches(&a, &b.ip);
    assert!(reaches(&b, &a.ip), "B -> A");
    assert_eq!(neighbour(&a, "10.47.1.1").as_deref(), Some(ROUTER_MAC));
    let bgp = inspect_bgp(&c.debug_addr);
    let dsts: Vec<&str> = bgp["Dsts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(dsts.contains(&"192.0.2.0/24"), "{bgp}");
    assert!(dsts.contains(&format!("{}/32", b.ip).as_str()), "{bgp}");
    let (status, body) = http("GET", &c.debug_addr, "/inspect/driver").unwrap();
    assert_eq!(status, 200);
    let driver: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(driver["vlan"]["DpName"], "vlrouter", "{driver}");
    // netmaster's Bgp inspect: the host's netplugin says.
    let oper = bgp_oper(&c, &c.host_label);
    assert_eq!(oper["neighborStatus"], "ESTABLISHED", "{oper}");
    assert!(oper["numRoutes"].as_u64().unwrap_or(0) >= 2, "{oper}");

    // A pod DEL withdraws its route.
    let deleted = Instant::now();
    c.del_pod(&a2).unwrap();
    let withdrawn = wait_for("the withdrawal", Duration::from_secs(10), || {
        router.route(&prefix2).is_none()
    });
    println!(
        "{{\"measure\":\"pod DEL to withdrawal on the router\",\"ms\":{}}}",
        withdrawn.max(deleted.elapsed()).as_millis()
    );

    // netplugin SIGKILLed and restarted while A pings B at 100 pps: nothing lost, the session
    // never drops (the speaker outlives netplugin and is adopted).
    let netns = a.netns.name().to_string();
    let summary = ping_across_netplugin_restart(&mut c, &netns, &b.ip, 800, Duration::from_secs(2));
    println!("{{\"measure\":\"netplugin SIGKILL+restart at 100 pps\",\"ping\":\"{summary}\"}}");
    assert!(summary.contains("800 received"), "{summary}");
    assert_eq!(neighbor_state(&c.debug_addr), "ESTABLISHED");
    assert_eq!(
        router.route(&format!("{}/32", a.ip)).as_deref(),
        Some("50.1.1.1")
    );
    drop(router);
    drop(host_b);
}

/// The `Oper` of netmaster's Bgp inspect of `host`.
fn bgp_oper(c: &Cluster, host: &str) -> Value {
    let netmaster = c.netmaster_url.trim_start_matches("http://");
    let (status, body) = http("GET", netmaster, &format!("/api/v1/inspect/Bgps/{host}/")).unwrap();
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["Oper"].clone()
}

/// Bad input: wrong fields are refused by netmaster naming the field (nothing reaches the
/// host); a neighbor nobody answers for shows as not established in both inspects, nothing
/// crashes; deleting the Bgp object stops the speaker and removes the router port.
#[test]
fn bad_bgp_input_is_refused_and_an_unreachable_neighbor_shows() {
    testbed::require!(Root, Ovs, Etcd, Ip);
    let mut c = routing_cluster();
    let label = c.host_label.clone();
    for (args, field) in [
        (
            [
                "-as",
                "0",
                "-neighbor-as",
                "65000",
                "-router-ip",
                "50.1.1.1/24",
            ],
            "as",
        ),
        (
            [
                "-as",
                "65001",
                "-neighbor-as",
                "x",
                "-router-ip",
                "50.1.1.1/24",
            ],
            "neighbor-as",
        ),
        (
            [
                "-as",
                "65001",
                "-neighbor-as",
                "65000",
                "-router-ip",
                "50.1.1.1",
            ],
            "routerip",
        ),
    ] {
        let mut argv = vec!["bgp", "create", &label];
        argv.extend(args);
        argv.extend(["-neighbor", "50.1.1.250"]);
        let err = c.netctl(&argv).unwrap_err().to_string();
        assert!(err.contains(field), "{field}: {err}");
    }
    let err = c
        .netctl(&[
            "bgp",
            "create",
            &label,
            "-router-ip",
            "50.1.1.1/24",
            "-as",
            "65001",
            "-neighbor-as",
            "65000",
            "-neighbor",
            "50.1.1.1",
        ])
        .unwrap_err()
        .to_string();
    assert!(err.contains("neighbor"), "{err}");
    let (status, _) = http("GET", &c.debug_addr, "/inspect/bgp").unwrap();
    assert_eq!(status, 503, "no Bgp object yet: nothing configured");

    c.netctl(&[
        "bgp",
        "create",
        &label,
        "-router-ip",
        "50.1.1.1/24",
        "-as",
        "65001",
        "-neighbor-as",
        "65000",
        "-neighbor",
        "50.1.1.250",
    ])
    .unwrap();
    wait_for("the speaker", Duration::from_secs(20), || {
        http("GET", &c.debug_addr, "/inspect/bgp").is_some_and(|(s, _)| s == 200)
    });
    std::thread::sleep(Duration::from_secs(3));
    let state = neighbor_state(&c.debug_addr);
    assert!(
        ["ACTIVE", "CONNECT", "IDLE"].contains(&state.as_str()),
        "unreachable neighbor: {state}"
    );
    let oper = bgp_oper(&c, &label);
    assert_eq!(oper["neighborStatus"], state.as_str(), "{oper}");
    assert!(
        c.host
            .exec(&["ip", "-o", "addr", "show", "dev", "inb01"])
            .unwrap()
            .contains("50.1.1.1/24")
    );
    let pid = c.bgp.pid().expect("gobgpd runs");

    c.netctl(&["bgp", "rm", &label]).unwrap();
    wait_for("the speaker to stop", Duration::from_secs(15), || {
        !testbed::pid_alive(pid as u32)
    });
    wait_for("inb01 to go", Duration::from_secs(10), || {
        !host_links(&c).iter().any(|l| l == "inb01")
    });
    assert!(c.netplugin_log().lines().all(|l| !l.contains("panicked")));
    c.stop_netplugin();
}

/// The uplink of an extra host (`--vlan-uplinks`).
fn host_b_uplink(h: &testbed::demo::ExtraHost) -> String {
    h.uplink().to_string()
}
