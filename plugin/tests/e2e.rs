//! End to end, every part real: etcd, the netmaster process, OVS (userspace datapath) in a
//! host namespace, the netplugin process, and pods created through libcni (`cnirun`) with a
//! conflist naming `contivk8s`, as a container runtime does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod fake_kube;

use common::*;
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testbed::demo::{Cluster, ClusterOptions, CniPod, http};

/// VLAN and VXLAN networks, two pods each: addresses from netmaster, reachability within a
/// network, isolation across; netctl shows the endpoints. Then DEL: everything of the pod
/// goes, a second DEL succeeds, CHECK fails, and the address is handed out again. Then the
/// error cases leave nothing behind.
#[test]
fn pods_reach_within_networks_isolated_across_and_del_cleans_up() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let mut c = cluster();
    create_network(&c, "red", "vlan", "10.41.0.0/24", "10.41.0.1");
    create_network(&c, "blue", "vxlan", "10.42.0.0/24", "10.42.0.1");
    let red_conf = c.conflist("red", "red", "").unwrap();
    let blue_conf = c.conflist("blue", "blue", "").unwrap();
    let red: Vec<CniPod> = (0..2).map(|_| c.add_pod(&red_conf).unwrap()).collect();
    let blue: Vec<CniPod> = (0..2).map(|_| c.add_pod(&blue_conf).unwrap()).collect();

    for (pods, prefix) in [(&red, "10.41.0."), (&blue, "10.42.0.")] {
        for pod in pods.iter() {
            assert!(pod.ip.starts_with(prefix), "{} not in {prefix}*", pod.ip);
            // The result is CNI 1.0: interfaces with the sandbox, the IP with its gateway.
            let r = &pod.result;
            assert_eq!(r["cniVersion"], "1.0.0");
            assert!(
                r["interfaces"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|i| i["sandbox"] == json!(pod.netns.path()))
            );
            assert_eq!(r["ips"][0]["gateway"], format!("{prefix}1"));
            // netctl shows the endpoint with the address netmaster assigned.
            let inspect = c
                .netctl(&["endpoint", "inspect", &pod.container_id])
                .unwrap();
            assert!(inspect.contains(&pod.ip), "{inspect}");
            // The address is really on the pod's eth0.
            let addr = pod
                .netns
                .exec(&["ip", "-o", "addr", "show", "eth0"])
                .unwrap();
            assert!(addr.contains(&format!("{}/24", pod.ip)), "{addr}");
        }
        assert_ne!(pods[0].ip, pods[1].ip);
        assert!(
            reaches(&pods[0], &pods[1].ip) && pods[0].can_ping(&pods[1].ip, 3),
            "{} cannot reach {} on its own network",
            pods[0].ip,
            pods[1].ip
        );
    }
    assert!(!red[0].can_ping(&blue[0].ip, 2), "red reached blue");
    assert!(!blue[1].can_ping(&red[1].ip, 2), "blue reached red");

    // netplugin registered its services.
    if let Ok(out) = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &c.etcd.client_url(), "get", "--prefix"])
        .arg("/contiv.io/service/netplugin")
        .output()
        && out.status.success()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("/contiv.io/service/netplugin/")
                && text.contains("/contiv.io/service/netplugin.vtep/127.0.0.1:4789")
                && text.contains(&c.host_label),
            "{text}"
        );
    }

    // An infra network gives the host an internal port with its address.
    c.netctl(&[
        "net",
        "create",
        "-n",
        "infra",
        "-e",
        "vlan",
        "-s",
        "10.47.0.0/24",
        "infra1",
    ])
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr = loop {
        let shown = c.host.exec(&["ip", "-o", "addr", "show", "dev", "infra1"]);
        if let Ok(text) = shown
            && text.contains("10.47.0.")
        {
            break text;
        }
        assert!(Instant::now() < deadline, "no infra1 port with an address");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(addr.contains("/24"), "{addr}");
    assert!(ovs_ports(&c, VLAN_BRIDGE).contains(&"infra1".to_string()));
    let infra_ep = c.netctl(&["endpoint", "inspect", &c.host_label]).unwrap();
    assert!(infra_ep.contains("10.47.0."), "{infra_ep}");

    // DEL: veth, OVS port, flows, endpoint state go; the address is free again.
    let gone = &blue[1];
    let port = pod_port(&c, &gone.container_id);
    let (mac, ip) = (
        gone.result["interfaces"][1]["mac"]
            .as_str()
            .unwrap()
            .to_string(),
        gone.ip.clone(),
    );
    assert!(flows(&c, VXLAN_BRIDGE).contains(&mac));
    c.cnirun(
        "check",
        &gone.conflist,
        &gone.container_id,
        &gone.netns.path(),
    )
    .expect("CHECK of a live pod");
    c.del_pod(gone).unwrap();
    assert!(!endpoint_veths(&c).contains(&port));
    assert!(!ovs_ports(&c, VXLAN_BRIDGE).contains(&port));
    let after = flows(&c, VXLAN_BRIDGE);
    assert!(!after.contains(&mac), "flows still mention {mac}:\n{after}");
    assert!(!after.contains(&format!("nw_dst={ip},")), "{after}");
    assert!(
        gone.netns.exec(&["ip", "link", "show", "eth0"]).is_err(),
        "eth0 left in the pod"
    );
    assert!(
        c.netctl(&["endpoint", "inspect", &gone.container_id])
            .is_err()
    );
    assert_eq!(local_endpoints(&c).len(), 3);
    c.del_pod(gone).expect("a second DEL succeeds");
    let check = c.cnirun(
        "check",
        &gone.conflist,
        &gone.container_id,
        &gone.netns.path(),
    );
    assert!(check.is_err(), "CHECK after DEL must fail");
    let again = c.add_pod(&blue_conf).unwrap();
    assert_eq!(again.ip, ip, "the freed address is handed out again");
    assert!(reaches(&blue[0], &again.ip));

    // Errors leave nothing half-created.
    let ports_before = endpoint_ports(&c);
    let unknown = c.conflist("nowhere", "no-such-net", "").unwrap();
    let err = c
        .add_pod(&unknown)
        .err()
        .expect("unknown network must fail");
    assert!(err.contains("no-such-net"), "{err}");
    let unknown_group = c.conflist("nogroup", "blue", "no-such-group").unwrap();
    let err = c.add_pod(&unknown_group).err().expect("unknown group");
    assert!(err.contains("no-such-group"), "{err}");
    assert_eq!(endpoint_ports(&c), ports_before);
    assert_eq!(endpoint_veths(&c).len(), ports_before.len());
    assert_eq!(local_endpoints(&c).len(), 4);
    let oper = c.netctl(&["net", "inspect", "blue"]).unwrap();
    // Two pods' addresses; the gateway is allocated but not counted (as Contiv counts).
    assert!(oper.contains("\"allocatedAddressesCount\": 2"), "{oper}");

    // Malformed network config: code 7 from contivk8s itself.
    let out = Command::new(c.bins.cni_dir.join("contivk8s"))
        .env("CNI_COMMAND", "ADD")
        .env("CNI_CONTAINERID", "bad")
        .env("CNI_NETNS", blue[0].netns.path())
        .env("CNI_IFNAME", "eth1")
        .env("CNI_PATH", &c.bins.cni_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(
                br#"{"cniVersion":"1.0.0","name":"x","type":"contivk8s","socketPath":5}"#,
            )?;
            child.wait_with_output()
        })
        .unwrap();
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["code"], 7, "{reply}");

    // netplugin down: the error names the socket it tried.
    c.stop_netplugin();
    let err = c
        .add_pod(&blue_conf)
        .err()
        .expect("ADD with netplugin down");
    assert!(err.contains(&c.cni_socket.display().to_string()), "{err}");
    assert_eq!(endpoint_ports(&c), ports_before);
}

/// 50 pods added in parallel get distinct addresses and reach each other; deleting them
/// leaves no port, veth or state.
#[test]
fn fifty_parallel_pods_then_nothing_left() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let c = cluster();
    create_network(&c, "many", "vxlan", "10.43.0.0/24", "10.43.0.1");
    let conf = c.conflist("many", "many", "").unwrap();
    let started = Instant::now();
    let pods: Vec<CniPod> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50).map(|_| s.spawn(|| c.add_pod(&conf))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    eprintln!("50 parallel ADDs: {:?}", started.elapsed());
    let mut ips: Vec<&str> = pods.iter().map(|p| p.ip.as_str()).collect();
    ips.sort_unstable();
    ips.dedup();
    assert_eq!(ips.len(), 50, "addresses are not distinct");
    assert_eq!(endpoint_ports(&c).len(), 50);
    // Each port has the OpenFlow number netplugin asked for (its flows went in before
    // ovs-vswitchd numbered it), distinct although the 50 were asked for at once.
    let mut numbers: Vec<u32> = pods
        .iter()
        .map(|p| asked_ofport(&c, &pod_port(&c, &p.container_id)))
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    assert_eq!(
        numbers.len(),
        50,
        "ports share OpenFlow numbers: {numbers:?}"
    );
    let dump = flows(&c, VXLAN_BRIDGE);
    for n in &numbers {
        assert!(
            dump.contains(&format!("in_port={n} ")) || dump.contains(&format!("in_port={n},")),
            "no flow for port {n}:\n{dump}"
        );
    }
    // Each ADD learnt its port's number from the switch's PORT_STATUS or from OVSDB,
    // whichever came first; the switch reports the port as it installs it, a few ms before
    // the number reaches OVSDB, so it is first in the ordinary case (OVSDB can still win a
    // race on a loaded machine, so only "some" is asserted, and every ADD is counted once).
    let (status, metrics) = http("GET", &c.debug_addr, "/metrics").unwrap();
    assert_eq!(status, 200);
    let learnt = |source: &str| -> u64 {
        let series = format!("netplugin_pod_port_numbers_total{{source=\"{source}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in /metrics"))
    };
    let (from_switch, from_ovsdb) = (learnt("switch"), learnt("ovsdb"));
    eprintln!("port numbers from the switch: {from_switch}, from OVSDB: {from_ovsdb}");
    assert_eq!(from_switch + from_ovsdb, 50);
    assert!(
        from_switch > 0,
        "no port number came from the switch's PORT_STATUS"
    );
    // Everyone reaches the first pod, and the first pod reaches everyone.
    std::thread::scope(|s| {
        for p in &pods[1..] {
            let first = &pods[0];
            s.spawn(move || {
                assert!(reaches(p, &first.ip), "{} -> {}", p.ip, first.ip);
                assert!(reaches(first, &p.ip), "{} -> {}", first.ip, p.ip);
            });
        }
    });
    std::thread::scope(|s| {
        for p in &pods {
            let c = &c;
            s.spawn(move || c.del_pod(p).unwrap());
        }
    });
    assert!(endpoint_ports(&c).is_empty(), "{:?}", endpoint_ports(&c));
    assert!(endpoint_veths(&c).is_empty(), "{:?}", endpoint_veths(&c));
    assert!(local_endpoints(&c).is_empty());
    let oper = c.netctl(&["net", "inspect", "many"]).unwrap();
    assert!(oper.contains("\"allocatedAddressesCount\": 0"), "{oper}");
    // A number freed a moment ago is not the next pod's (stale flows or counters of the old
    // port would otherwise apply to it).
    let next = c.add_pod(&conf).unwrap();
    let n = asked_ofport(&c, &pod_port(&c, &next.container_id));
    assert!(
        n > numbers[numbers.len() - 1],
        "port number {n} reused after {numbers:?}"
    );
    c.del_pod(&next).unwrap();
    drop(next);
    let namespaces: Vec<String> = pods.iter().map(|p| p.netns.name().to_string()).collect();
    drop(pods);
    let listed = testbed::run(&["ip", "netns", "list"]).unwrap();
    assert!(namespaces.iter().all(|n| !listed.contains(n.as_str())));
}

/// The OpenFlow number of interface `port`, asserting it is the one netplugin asked for.
fn asked_ofport(c: &Cluster, port: &str) -> u32 {
    let out = c
        .ovs
        .vsctl(&["get", "Interface", port, "ofport", "ofport_request"])
        .unwrap();
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(lines[0], lines[1], "{port}: ofport, ofport_request");
    lines[0].parse().unwrap()
}

/// netplugin SIGKILLed and restarted while a pod pings another at 100 packets/s: nothing is
/// lost and no OVS port is re-created.
#[test]
fn netplugin_restart_is_hitless() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let mut c = cluster();
    create_network(&c, "steady", "vxlan", "10.44.0.0/24", "10.44.0.1");
    create_network(&c, "steady-vlan", "vlan", "10.45.0.0/24", "10.45.0.1");
    let conf = c.conflist("steady", "steady", "").unwrap();
    let vconf = c.conflist("steady-vlan", "steady-vlan", "").unwrap();
    let (a, b) = (c.add_pod(&conf).unwrap(), c.add_pod(&conf).unwrap());
    let (va, vb) = (c.add_pod(&vconf).unwrap(), c.add_pod(&vconf).unwrap());
    assert!(reaches(&a, &b.ip) && reaches(&va, &vb.ip));
    let ports: Vec<String> = [&a, &b, &va, &vb]
        .iter()
        .map(|p| pod_port(&c, &p.container_id))
        .collect();
    let uuids: Vec<_> = ports.iter().map(|p| port_uuids(&c, p)).collect();
    let ping = |from: &CniPod, to: &str| {
        Command::new("ip")
            .args(["netns", "exec", from.netns.name(), "ping", "-n", "-q"])
            .args(["-i", "0.01", "-c", "500", "-W", "1", to])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let pingers = [ping(&a, &b.ip), ping(&va, &vb.ip)];
    std::thread::sleep(Duration::from_millis(800));
    let cookies = |c: &testbed::demo::Cluster| -> Vec<String> {
        flows(c, VXLAN_BRIDGE)
            .lines()
            .filter_map(|l| l.split("cookie=").nth(1))
            .map(|l| l.split(',').next().unwrap_or_default().to_string())
            .collect()
    };
    let generation = |c: &testbed::demo::Cluster| -> u32 {
        c.ovs
            .vsctl(&["br-get-external-id", VXLAN_BRIDGE, "contiv-flow-generation"])
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = cookies(&c);
    let generation_before = generation(&c);
    c.kill_netplugin();
    let down = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    c.start_netplugin().expect("netplugin restarts");
    eprintln!("netplugin back and connected after {:?}", down.elapsed());
    for pinger in pingers {
        let out = pinger.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("500 packets transmitted, 500 received"),
            "packets lost across the restart:\n{text}\n{}",
            c.netplugin_log()
        );
    }
    // The switch reconciled: every flow now carries the new generation.
    assert_ne!(before, cookies(&c), "no reconcile after the restart");
    // ... under a generation above the one recorded in OVSDB before.
    assert!(generation(&c) > generation_before);
    let after: Vec<_> = ports.iter().map(|p| port_uuids(&c, p)).collect();
    assert_eq!(uuids, after, "OVS ports were re-created");
    assert_eq!(local_endpoints(&c).len(), 4, "endpoints re-adopted");
    // The restarted netplugin serves new pods and deletes adopted ones.
    let d = c.add_pod(&conf).unwrap();
    assert!(reaches(&d, &a.ip));
    c.del_pod(&b).unwrap();
    assert!(!endpoint_ports(&c).contains(&ports[1]));
    let (status, body) = http("GET", &c.debug_addr, "/inspect/driver").unwrap();
    assert_eq!(status, 200);
    assert!(body.contains(&d.ip), "{body}");
}

/// Two hosts on a VXLAN network: each netplugin learns the other's endpoints from netmaster's
/// ofnet master, makes a VTEP port towards it, and pods on the two hosts reach each other; the
/// VTEP goes with the last endpoint behind it.
#[test]
fn vxlan_pods_on_two_hosts_reach_each_other() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let mut c = cluster();
    let (ip_a, ip_b) = ("192.168.88.1", "192.168.88.2");
    let host_b = c.add_wired_host(ip_a, ip_b).unwrap();
    create_network(&c, "wide", "vxlan", "10.48.0.0/24", "10.48.0.1");
    let a = c
        .add_pod(&c.conflist("wide-a", "wide", "").unwrap())
        .unwrap();
    let b = c
        .add_pod(&host_b.conflist("wide-b", "wide", "").unwrap())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.can_ping(&b.ip, 1) {
        assert!(
            Instant::now() < deadline,
            "{} on host A never reached {} on host B",
            a.ip,
            b.ip
        );
    }
    assert!(reaches(&b, &a.ip), "B -> A");
    // The endpoints travelled through netmaster's ofnet master (no host watches the others'
    // endpoints in etcd): both agents are registered and it holds both endpoints with their
    // originators.
    let netmaster = c.netmaster_url.trim_start_matches("http://");
    let (status, body) = http("GET", netmaster, "/debug/ofnet").unwrap();
    assert_eq!(status, 200, "{body}");
    let master: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(master["AgentDb"].as_object().unwrap().len(), 2, "{master}");
    let eps = master["EndpointDb"].as_object().unwrap();
    let origin = |ip: &str| {
        eps.values()
            .find(|e| e["IpAddr"] == ip)
            .map(|e| e["OriginatorIp"].clone())
    };
    assert_eq!(origin(&a.ip), Some(Value::from(ip_a)), "{master}");
    assert_eq!(origin(&b.ip), Some(Value::from(ip_b)), "{master}");
    let vtep_to_b = format!("vxif{}", ip_b.replace('.', ""));
    assert!(ovs_ports(&c, VXLAN_BRIDGE).contains(&vtep_to_b));
    c.del_pod(&b).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while ovs_ports(&c, VXLAN_BRIDGE).contains(&vtep_to_b) {
        assert!(
            Instant::now() < deadline,
            "the VTEP to B outlived B's last endpoint"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(host_b);
}

/// The ofnet master is the only way another host's endpoints reach a switch: while its
/// connection to host B's agent is silenced (iptables drops B's RPC port on loopback), a pod
/// created on host A does not appear in B's flow tables; once the port speaks again, it does,
/// and B's pod reaches it.
#[test]
fn a_new_endpoint_reaches_the_other_host_only_through_the_ofnet_master() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping, Iptables);
    let mut c = cluster();
    let host_b = c.add_wired_host("192.168.90.1", "192.168.90.2").unwrap();
    create_network(&c, "relay", "vxlan", "10.50.0.0/24", "10.50.0.1");
    let a = c
        .add_pod(&c.conflist("relay-a", "relay", "").unwrap())
        .unwrap();
    let b = c
        .add_pod(&host_b.conflist("relay-b", "relay", "").unwrap())
        .unwrap();
    assert!(
        b.reaches_within(&a.ip, Duration::from_secs(10)),
        "B never reached A"
    );
    let b_flows = || host_b.ovs.ofctl(&["dump-flows", VXLAN_BRIDGE]).unwrap();
    let knows = |ip: &str| b_flows().contains(&format!("nw_dst={ip} "));
    assert!(knows(&a.ip), "A's endpoint is not on B: {}", b_flows());

    let (status, body) = http("GET", &host_b.debug_addr, "/inspect/driver").unwrap();
    assert_eq!(status, 200, "{body}");
    let driver: Value = serde_json::from_str(&body).unwrap();
    let b_rpc = u16::try_from(driver["vxlan"]["MyPort"].as_u64().unwrap()).unwrap();
    assert_ne!(b_rpc, 0, "{driver}");
    let silenced = testbed::SilencedPort::new(b_rpc).unwrap();
    let late = c
        .add_pod(&c.conflist("relay-late", "relay", "").unwrap())
        .unwrap();
    // Long enough for the master to have relayed it several times over, were the path open.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !knows(&late.ip),
        "{} reached B with the master's connection to B silenced: another path exists",
        late.ip
    );
    assert!(knows(&a.ip), "B lost A's endpoint while silenced");
    drop(silenced);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !knows(&late.ip) {
        assert!(
            Instant::now() < deadline,
            "{} never reached B after the master's connection came back: {}",
            late.ip,
            b_flows()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        b.reaches_within(&late.ip, Duration::from_secs(10)),
        "B's pod never reached the late pod"
    );
}

/// One JSON-RPC 1.0 call written by hand (Go's `net/rpc` JSON codec: one JSON value per
/// request, answers back to back), not through `ofnet::rpc`.
fn call_by_hand(
    stream: &mut std::io::BufReader<std::net::TcpStream>,
    id: u64,
    method: &str,
    arg: Value,
) -> Value {
    use std::io::{BufRead, Write};
    let request = json!({"method": method, "params": [arg], "id": id});
    stream
        .get_mut()
        .write_all(format!("{request}\n").as_bytes())
        .unwrap();
    let mut line = String::new();
    stream.read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["error"], Value::Null, "{method}: {answer}");
    answer
}

/// Contiv's wire spoken by hand: an agent written here registers with netmaster's ofnet
/// master and announces an endpoint with `OfnetMaster.EndpointAdd`; the real netplugin's switch
/// gets a VTEP port toward the endpoint's originator and its flows, and `EndpointDel` takes
/// them away again.
#[test]
fn a_hand_written_agents_endpoint_reaches_a_real_switch() {
    testbed::require!(Root, Ovs, Etcd, Etcdctl, Ip);
    let c = cluster();
    c.netctl(&[
        "net",
        "create",
        "-e",
        "vxlan",
        "-p",
        "5051",
        "-s",
        "10.51.0.0/24",
        "-g",
        "10.51.0.1",
        "interop",
    ])
    .unwrap();
    // The master's address, as agents find it: `netmaster.rpc` in the service registry.
    let deadline = Instant::now() + Duration::from_secs(10);
    let master = loop {
        let out = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &c.etcd.client_url(), "get", "--prefix"])
            .args(["--keys-only", "/contiv.io/service/netmaster.rpc/"])
            .output()
            .unwrap();
        let keys = String::from_utf8_lossy(&out.stdout).to_string();
        if let Some(key) = keys.lines().find(|l| !l.trim().is_empty()) {
            break key.rsplit('/').next().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "netmaster.rpc never registered");
        std::thread::sleep(Duration::from_millis(100));
    };
    // The agent side: answers `true` to whatever the master sends it.
    let agent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let agent_port = agent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{BufRead, Write};
        for conn in agent.incoming().flatten() {
            std::thread::spawn(move || {
                let Ok(mut write) = conn.try_clone() else {
                    return;
                };
                for line in std::io::BufReader::new(conn).lines().map_while(Result::ok) {
                    let Ok(req) = serde_json::from_str::<Value>(&line) else {
                        return;
                    };
                    let answer = json!({"id": req["id"], "result": true, "error": null});
                    if write.write_all(format!("{answer}\n").as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut rpc = std::io::BufReader::new(std::net::TcpStream::connect(&master).unwrap());
    rpc.get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    call_by_hand(
        &mut rpc,
        1,
        "OfnetMaster.RegisterNode",
        json!({"HostAddr": "127.0.0.1", "HostPort": agent_port}),
    );
    let endpoint = json!({
        "EndpointID": "10.51.0.77:default", "EndpointType": 2, "EndpointGroup": 0,
        "IpAddr": "10.51.0.77", "IpMask": "255.255.255.255", "Ipv6Addr": null,
        "Ipv6Mask": null, "Vrf": "default", "MacAddrStr": "02:02:0a:33:00:4d", "Vlan": 2,
        "Vni": 5051, "EndpointGroupVlan": 0, "OriginatorIp": "192.168.91.9",
        "OriginatorMac": "", "Timestamp": "2026-01-01T00:00:00.000000001Z"
    });
    let result = call_by_hand(&mut rpc, 2, "OfnetMaster.EndpointAdd", endpoint.clone());
    assert_eq!(result["result"], true, "{result}");
    let present = |c: &Cluster| {
        flows(c, VXLAN_BRIDGE).contains("nw_dst=10.51.0.77")
            && ovs_ports(c, VXLAN_BRIDGE).contains(&"vxif192168919".to_string())
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !present(&c) {
        assert!(
            Instant::now() < deadline,
            "the hand-written agent's endpoint never reached the switch: {}\n{}",
            flows(&c, VXLAN_BRIDGE),
            c.netplugin_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    call_by_hand(&mut rpc, 3, "OfnetMaster.EndpointDel", endpoint);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let gone = !flows(&c, VXLAN_BRIDGE).contains("nw_dst=10.51.0.77")
            && !ovs_ports(&c, VXLAN_BRIDGE).contains(&"vxif192168919".to_string());
        if gone {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "EndpointDel left the endpoint on the switch: {}",
            flows(&c, VXLAN_BRIDGE)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `ovs-ofctl dump-flows` without the counters and ages: what the switch would forward with.
fn flow_table(c: &Cluster) -> Vec<String> {
    let mut flows: Vec<String> = flows(c, VXLAN_BRIDGE)
        .lines()
        .filter(|l| l.contains("priority"))
        .map(|l| {
            l.split(", ")
                .filter(|f| {
                    ![
                        "duration=",
                        "n_packets=",
                        "n_bytes=",
                        "idle_age=",
                        "hard_age=",
                    ]
                    .iter()
                    .any(|p| f.trim_start().starts_with(p))
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    flows.sort();
    flows
}

/// Two netmasters, two hosts pinging each other at 100 packets per second: the leader hands
/// over, both agents re-register with the new leader's ofnet master, no packet is lost and no
/// flow changes; a pod created afterwards reaches the old ones through the new master.
#[test]
fn ofnet_master_failover_loses_no_packet_and_changes_no_flow() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let mut c = cluster();
    let standby = c.add_netmaster().unwrap();
    let (ip_a, ip_b) = ("192.168.89.1", "192.168.89.2");
    let host_b = c.add_wired_host(ip_a, ip_b).unwrap();
    create_network(&c, "wide", "vxlan", "10.49.0.0/24", "10.49.0.1");
    let a = c.add_pod(&c.conflist("fo-a", "wide", "").unwrap()).unwrap();
    let b = c
        .add_pod(&host_b.conflist("fo-b", "wide", "").unwrap())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.can_ping(&b.ip, 1) {
        assert!(Instant::now() < deadline, "A never reached B");
    }
    let before = flow_table(&c);
    let ping = Command::new("ip")
        .args(["netns", "exec", a.netns.name(), "ping", "-q", "-i", "0.01"])
        .args(["-c", "600", "-W", "1", &b.ip])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let registered = |addr: &str| {
        http("GET", addr, "/debug/ofnet").is_some_and(|(s, body)| {
            s == 200
                && serde_json::from_str::<Value>(&body)
                    .is_ok_and(|v| v["AgentDb"].as_object().is_some_and(|a| a.len() == 2))
        })
    };
    c.restart_netmaster(|| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !registered(&standby.addr) {
            assert!(
                Instant::now() < deadline,
                "the agents never registered with the new leader"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .unwrap();
    let out = ping.wait_with_output().unwrap();
    let summary = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        summary.contains("600 packets transmitted, 600 received"),
        "packets lost across the failover: {summary}"
    );
    assert_eq!(flow_table(&c), before, "the failover changed flows");
    // The first netmaster now follows and proxies; a new pod reaches the old ones.
    let d = c
        .add_pod(&host_b.conflist("fo-d", "wide", "").unwrap())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.can_ping(&d.ip, 1) {
        assert!(
            Instant::now() < deadline,
            "A never reached the new pod on B"
        );
    }
    assert!(reaches(&d, &a.ip), "new pod -> A");
    drop(host_b);
}

/// A host whose netplugin is SIGKILLed (no `UnRegisterNode`): its `netplugin.vtep` lease
/// expires; if it comes back within `--ofnet-grace` nothing is withdrawn, and when it stays
/// away its endpoints leave the other host's flow table after the grace period.
#[test]
fn a_killed_netplugins_endpoints_leave_the_other_host_after_the_grace() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    const GRACE: u64 = 6;
    // netplugin's registrations live on 10 s leases.
    const LEASE: Duration = Duration::from_secs(12);
    let mut c = Cluster::start_with(
        binaries(),
        ClusterOptions {
            netmaster_args: vec!["--ofnet-grace".into(), GRACE.to_string()],
            ..ClusterOptions::default()
        },
    )
    .unwrap();
    let (ip_a, ip_b) = ("192.168.90.1", "192.168.90.2");
    let mut host_b = c.add_wired_host(ip_a, ip_b).unwrap();
    create_network(&c, "wide", "vxlan", "10.50.0.0/24", "10.50.0.1");
    let a = c.add_pod(&c.conflist("gr-a", "wide", "").unwrap()).unwrap();
    let b = c
        .add_pod(&host_b.conflist("gr-b", "wide", "").unwrap())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.can_ping(&b.ip, 1) {
        assert!(Instant::now() < deadline, "A never reached B");
    }
    let b_on_a = || {
        // Any flow naming B's address (its MAC entry, destination group, ARP answer...).
        flows(&c, VXLAN_BRIDGE)
            .split([',', ' ', '=', '\n'])
            .any(|token| token == b.ip)
    };
    assert!(b_on_a(), "B's endpoint is not in A's flow table");
    let before = flow_table(&c);

    // B crashes and is back before the grace period ends: nothing is withdrawn.
    c.kill_host_netplugin(&mut host_b);
    std::thread::sleep(LEASE);
    c.restart_host_netplugin(&mut host_b).unwrap();
    std::thread::sleep(Duration::from_secs(GRACE + 2));
    assert_eq!(
        flow_table(&c),
        before,
        "B came back within the grace, yet A's flows changed"
    );
    assert!(a.can_ping(&b.ip, 3), "A no longer reaches B");

    // B crashes for good: after its lease and the grace, its endpoint leaves A's table.
    c.kill_host_netplugin(&mut host_b);
    let killed = Instant::now();
    let deadline = killed + LEASE + Duration::from_secs(GRACE + 10);
    while b_on_a() {
        assert!(
            Instant::now() < deadline,
            "B's endpoint still on A {:?} after B's netplugin was killed: {:?}\nmaster: {:?}\nnetmaster: {}\nnetplugin A: {}",
            killed.elapsed(),
            http(
                "GET",
                c.netmaster_url.trim_start_matches("http://"),
                "/debug/ofnet"
            ),
            flows(&c, VXLAN_BRIDGE)
                .lines()
                .filter(|l| l.contains(&b.ip))
                .collect::<Vec<_>>(),
            std::fs::read_to_string(c.dir.path().join("netmaster.log"))
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("ofnet_master") || l.contains("withdraw"))
                .collect::<Vec<_>>()
                .join("\n"),
            c.netplugin_log()
                .lines()
                .filter(|l| l.contains(&b.ip)
                    || l.contains("remote")
                    || l.contains("WARN")
                    || l.contains("ERROR"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        killed.elapsed() >= Duration::from_secs(GRACE),
        "withdrawn before the grace period ended ({:?})",
        killed.elapsed()
    );
    assert!(!a.can_ping(&b.ip, 1), "A still reaches the departed B");
    drop(host_b);
}

/// A policy attached to a group (netctl) reaches the datapath through the policy-rule watch:
/// denied TCP port closed, others open; removing the rule opens it again.
#[test]
fn group_policy_rules_are_enforced() {
    testbed::require!(Root, Ovs, Etcd, Ip, Netcat);
    let c = cluster();
    create_network(&c, "pol", "vxlan", "10.49.0.0/24", "10.49.0.1");
    c.netctl(&["policy", "create", "p1"]).unwrap();
    c.netctl(&[
        "policy", "rule-add", "p1", "1", "-d", "in", "-l", "tcp", "-P", "8000", "-j", "deny",
    ])
    .unwrap();
    c.netctl(&["group", "create", "-p", "p1", "pol", "web"])
        .unwrap();
    let conf = c.conflist("pol", "pol", "web").unwrap();
    let (a, b) = (c.add_pod(&conf).unwrap(), c.add_pod(&conf).unwrap());
    let _open = Listener::start(&b, 8001);
    let _closed = Listener::start(&b, 8000);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !tcp_connects(&a, &b.ip, 8001) {
        assert!(
            Instant::now() < deadline,
            "port 8001 never opened; ping: {}\n{}",
            a.can_ping(&b.ip, 1),
            flows(&c, VXLAN_BRIDGE)
        );
    }
    assert!(
        !tcp_connects(&a, &b.ip, 8000),
        "the deny rule is not enforced"
    );
    c.netctl(&["policy", "rule-rm", "p1", "1"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !tcp_connects(&a, &b.ip, 8000) {
        assert!(
            Instant::now() < deadline,
            "port 8000 stayed closed after the rule was removed"
        );
    }
}

/// Whether `dump` has the service's balance flow for `vip` (to its select group) and the
/// forward flow of the connections committed to `provider` (its address is their `ct_mark`).
fn service_flows_present(dump: &str, vip: &str, provider: &str) -> bool {
    let mark = provider
        .parse::<std::net::Ipv4Addr>()
        .map(|a| format!("ct_mark={:#x}", u32::from(a)))
        .unwrap_or_default();
    let balance = dump.lines().any(|l| {
        l.contains("table=3")
            && l.contains("ct_state=+new+trk")
            && l.contains(&format!("nw_dst={vip}"))
            && l.contains("actions=group:")
    });
    let forward = dump.lines().any(|l| {
        l.contains("table=3") && l.contains(&mark) && l.contains(&format!("ct_nw_dst={vip}"))
    });
    balance && forward
}

/// A service load balancer made with netctl: its selector makes the labelled pods its
/// providers (netmaster), netplugin hands VIP, ports and providers to the datapath, and a client
/// pod reaches VIP:80 on a provider's port 8080 (the handshake only completes if the reply comes
/// back from the VIP). netplugin's `/svcstats` then counts the client's traffic. With its only
/// provider gone the VIP is closed, and deleting the service leaves no flow for the VIP.
#[test]
fn service_vip_reaches_labelled_providers() {
    testbed::require!(Root, Ovs, Etcd, Ip, Netcat);
    let c = cluster();
    create_network(&c, "svcapp", "vxlan", "10.53.0.0/24", "10.53.0.1");
    // In bridge mode nothing routes between subnets, so the VIP is an address of the clients'
    // network (reserved there by netmaster); clients find it by ARP, which the agent answers.
    let vip = "10.53.0.200";
    c.netctl(&[
        "service",
        "create",
        "web",
        "-s",
        "svcapp",
        "-l",
        "app=web",
        "-p",
        "80:8080:TCP",
        "--ip",
        vip,
    ])
    .unwrap();
    let provider_conf = c
        .conflist_with_labels("web", "svcapp", "", &[("app", "web")])
        .unwrap();
    let client_conf = c.conflist("client", "svcapp", "").unwrap();
    let provider = c.add_pod(&provider_conf).unwrap();
    let _listener = Listener::start(&provider, 8080);
    let client = c.add_pod(&client_conf).unwrap();

    let deadline = Instant::now() + Duration::from_secs(10);
    while !tcp_connects(&client, vip, 80) {
        assert!(
            Instant::now() < deadline,
            "{vip}:80 never reached the provider {}:8080\n{}\nservice: {:?}\nnetplugin: {}",
            provider.ip,
            flows(&c, VXLAN_BRIDGE),
            c.netctl(&["service", "inspect", "web"]),
            c.netplugin_log()
        );
    }
    let dump = flows(&c, VXLAN_BRIDGE);
    assert!(
        service_flows_present(&dump, vip, &provider.ip),
        "no balance or forward flow for the service:\n{dump}"
    );
    // Hairpin: the provider reaches the service that balances it to itself. Its connection
    // comes from the hairpin source, a static neighbour netplugin gives every pod.
    let neighbours = provider.netns.exec(&["ip", "-4", "neigh", "show"]).unwrap();
    assert!(
        neighbours.lines().any(
            |l| l.starts_with("169.254.42.1 dev eth0 lladdr 02:02:a9:fe:2a:01")
                && l.contains("PERMANENT")
        ),
        "no hairpin neighbour in the pod:\n{neighbours}"
    );
    assert!(
        tcp_connects(&provider, vip, 80),
        "the provider does not reach its own service\n{}",
        flows(&c, VXLAN_BRIDGE)
    );
    let (status, body) = http("GET", &c.debug_addr, "/svcstats").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(vip) && body.contains(&provider.ip),
        "/svcstats does not show the service's traffic to its provider: {body}"
    );

    c.del_pod(&provider).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tcp_connects(&client, vip, 80) {
        assert!(
            Instant::now() < deadline,
            "{vip}:80 still open after its only provider left"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    c.netctl(&["service", "rm", "web"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while flows(&c, VXLAN_BRIDGE).contains(vip) {
        assert!(
            Instant::now() < deadline,
            "flows for {vip} outlived the service:\n{}",
            flows(&c, VXLAN_BRIDGE)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Kubernetes mode against a handcrafted API server (a real one cannot run here): netplugin
/// reads the pods from it, lists and watches its Services and EndpointSlices, and gives pods
/// an on-link route to the service subnet. A client pod completes a TCP handshake with a
/// Service's cluster IP on port 80, answered by the provider pod (the slice's endpoint)
/// listening on 8080, also after a netplugin restart. After the Service's DELETED event the
/// cluster IP is closed and its flows are gone.
#[test]
fn kubernetes_cluster_ip_reaches_the_endpoints() {
    testbed::require!(Root, Ovs, Etcd, Ip, Netcat);
    let api = fake_kube::FakeKube::start();
    let dir = tempfile::tempdir().unwrap();
    let mut c = Cluster::start_with(binaries(), api.cluster_options(dir.path())).unwrap();
    api.wait_watching("services", Duration::from_secs(10));
    create_network(&c, "k8snet", "vxlan", "10.55.0.0/24", "10.55.0.1");
    let conf = c.conflist("k8s", "k8snet", "").unwrap();
    for name in ["web-1", "client"] {
        api.put(
            "pods",
            fake_kube::pod("default", name, &[("app", name)], &c.host_label, &[], ""),
        );
    }
    let provider = c.add_named_pod(&conf, "default", "web-1").unwrap();
    let client = c.add_named_pod(&conf, "default", "client").unwrap();
    let pod_get = "/api/v1/namespaces/default/pods/client".to_string();
    assert!(
        api.requests().contains(&pod_get),
        "netplugin did not read the pod from the API: {:?}",
        api.requests()
    );
    // SVC_SUBNET is not in the file: the default, on-link on the pod's interface.
    let routes = client.netns.exec(&["ip", "-4", "route", "show"]).unwrap();
    assert!(
        routes
            .lines()
            .any(|l| l.starts_with("10.254.0.0/16 dev eth0") && l.contains("scope link")),
        "no service subnet route in the pod:\n{routes}"
    );

    let _listener = Listener::start(&provider, 8080);
    let vip = "10.254.0.10";
    api.put(
        "services",
        fake_kube::service(
            "default",
            "web",
            vip,
            json!([{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}]),
        ),
    );
    api.put(
        "endpointslices",
        fake_kube::endpoint_slice(
            "default",
            "web",
            "web-abcde",
            json!([fake_kube::endpoint(&provider.ip, &c.host_label)]),
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tcp_connects(&client, vip, 80) {
        assert!(
            Instant::now() < deadline,
            "{vip}:80 never reached the provider {}:8080\n{}\nnetplugin: {}",
            provider.ip,
            flows(&c, VXLAN_BRIDGE),
            c.netplugin_log()
        );
    }
    let (status, body) = http("GET", &c.debug_addr, "/svcstats").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(vip) && body.contains(&provider.ip),
        "/svcstats does not show the traffic to the cluster IP's provider: {body}"
    );

    // After a restart (the agents start empty) the service comes back from the API server's
    // lists, applied before the switches reconnect.
    // The API server answers lists slowly, so the switch would reconnect before a list
    // started only after the OpenFlow listeners opened.
    api.set_list_delay(Duration::from_millis(2500));
    c.kill_netplugin();
    c.start_netplugin().unwrap();
    api.set_list_delay(Duration::ZERO);
    let (status, body) = http("GET", &c.debug_addr, "/inspect/driver").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("k8s:default/web"),
        "the service is not back in the agents after the restart: {body}"
    );
    // The service's flows are there before the client sends anything (open connections keep
    // their conntrack entry, and their forward flow is never deleted as stale). That needs the
    // service known when the switch reconnects.
    let dump = flows(&c, VXLAN_BRIDGE);
    assert!(
        service_flows_present(&dump, vip, &provider.ip),
        "the service's flows did not survive the restart:\n{dump}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tcp_connects(&client, vip, 80) {
        assert!(
            Instant::now() < deadline,
            "{vip}:80 closed after the restart\n{}",
            c.netplugin_log()
        );
    }

    api.delete("services", "default", "web");
    let deadline = Instant::now() + Duration::from_secs(10);
    while tcp_connects(&client, vip, 80) || flows(&c, VXLAN_BRIDGE).contains(vip) {
        assert!(
            Instant::now() < deadline,
            "{vip} still served after the Service was deleted:\n{}",
            flows(&c, VXLAN_BRIDGE)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Kubernetes Service semantics through libcni pods on real OVS: a Service with two ports, one
/// a named targetPort resolved through the EndpointSlice; a not-ready endpoint gets no
/// connection (it does not listen: 10 of 10 connections succeed only if it is left out); a
/// Service without endpoints refuses at once (TCP reset); `internalTrafficPolicy: Local` with
/// its only endpoint on another node refuses, and serves once the endpoint is on this node.
#[test]
fn kubernetes_service_semantics_ports_readiness_local_and_reject() {
    testbed::require!(Root, Ovs, Etcd, Ip, Netcat);
    let api = fake_kube::FakeKube::start();
    let dir = tempfile::tempdir().unwrap();
    let c = Cluster::start_with(binaries(), api.cluster_options(dir.path())).unwrap();
    create_network(&c, "k8ssvc", "vxlan", "10.57.0.0/24", "10.57.0.1");
    let conf = c.conflist("k8ssvc", "k8ssvc", "").unwrap();
    let node = c.host_label.clone();
    let mut pods = Vec::new();
    for name in ["web-1", "web-2", "client"] {
        api.put(
            "pods",
            fake_kube::pod("default", name, &[("app", name)], &node, &[], ""),
        );
        pods.push(c.add_named_pod(&conf, "default", name).unwrap());
    }
    let (ready, not_ready, client) = (&pods[0], &pods[1], &pods[2]);
    let _http = Listener::start(ready, 8080);
    let _alt = Listener::start(ready, 9090);
    let endpoint = |pod: &CniPod, ready: bool, node: &str| {
        let mut e = fake_kube::endpoint(&pod.ip, node);
        e["conditions"] = json!({"ready": ready, "serving": ready, "terminating": false});
        e
    };
    let vip = "10.254.0.20";
    api.put(
        "services",
        fake_kube::service(
            "default",
            "web",
            vip,
            json!([{"name": "http", "port": 80, "targetPort": "http"},
                   {"name": "alt", "port": 81, "targetPort": 9090}]),
        ),
    );
    api.put(
        "endpointslices",
        fake_kube::endpoint_slice(
            "default",
            "web",
            "web-x1",
            json!([
                endpoint(ready, true, &node),
                endpoint(not_ready, false, &node)
            ]),
            json!([{"name": "http", "port": 8080}, {"name": "alt", "port": 9090}]),
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tcp_connects(client, vip, 80) {
        assert!(
            Instant::now() < deadline,
            "{vip}:80 never reached web-1:8080 (the named port)\n{}",
            c.netplugin_log()
        );
    }
    let ok = (0..10).filter(|_| tcp_connects(client, vip, 80)).count();
    assert_eq!(ok, 10, "the not-ready endpoint got connections");
    assert!(
        tcp_connects(client, vip, 81),
        "{vip}:81 → 9090 (second port)"
    );

    // No endpoints: refused at once, not a time-out.
    let empty = "10.254.0.21";
    api.put(
        "services",
        fake_kube::service("default", "empty", empty, json!([{"port": 80}])),
    );
    let refused_fast = |vip: &str| {
        let started = Instant::now();
        !tcp_connects(client, vip, 80) && started.elapsed() < Duration::from_millis(1500)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !refused_fast(empty) {
        assert!(
            Instant::now() < deadline,
            "{empty}:80 (no endpoints) was not refused at once"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Local: the only endpoint on another node serves while the policy is Cluster, is refused
    // here once it is Local, and serves again once the endpoint is on this node.
    let local = "10.254.0.22";
    let svc = |policy: &str| {
        let mut svc = fake_kube::service(
            "default",
            "local",
            local,
            json!([{"port": 80, "targetPort": 8080}]),
        );
        svc["spec"]["internalTrafficPolicy"] = json!(policy);
        svc
    };
    let slice = |node: &str| {
        fake_kube::endpoint_slice(
            "default",
            "local",
            "local-x1",
            json!([endpoint(ready, true, node)]),
            json!([{"port": 8080}]),
        )
    };
    api.put("services", svc("Cluster"));
    api.put("endpointslices", slice("another-node"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tcp_connects(client, local, 80) {
        assert!(Instant::now() < deadline, "{local}:80 (Cluster) not served");
    }
    api.put("services", svc("Local"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !refused_fast(local) {
        assert!(
            Instant::now() < deadline,
            "{local}:80 (Local) served by an endpoint of another node"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    api.put("endpointslices", slice(&node));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tcp_connects(client, local, 80) {
        assert!(
            Instant::now() < deadline,
            "{local}:80 not served by this node's endpoint"
        );
    }
}

/// VTEP ports at start: one towards a host whose last endpoint went while netplugin was down is
/// deleted, one towards a host that still has an endpoint (its oper record, as that host's
/// netplugin writes it) is kept, and the endpoint is known to the VXLAN agent.
#[test]
fn stale_vtep_ports_are_swept_at_start() {
    testbed::require!(Root, Ovs, Etcd, Etcdctl, Ip);
    let mut c = cluster();
    create_network(&c, "sweep", "vxlan", "10.56.0.0/24", "10.56.0.1");
    c.kill_netplugin();
    // What a previous netplugin left: a VTEP towards a host that has gone ...
    let stale = "vxif109999";
    c.ovs
        .vsctl(&[
            "add-port",
            VXLAN_BRIDGE,
            stale,
            "--",
            "set",
            "interface",
            stale,
            "type=vxlan",
            "options:remote_ip=10.99.9.9",
        ])
        .unwrap();
    // ... and an endpoint another host still has, behind VTEP 10.88.8.8.
    let remote = json!({
        "id": "sweep.default-other1",
        "netID": "sweep.default",
        "endpointID": "other1",
        "ipAddress": "10.56.0.200",
        "ipv6Address": "fd00:56::c8/64",
        "macAddress": "02:02:0a:38:00:c8",
        "homingHost": "other-host",
        "vtepIP": "10.88.8.8",
        "containerId": "other1",
        "tenant": "default",
        "network": "sweep",
    });
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &c.etcd.client_url(), "put"])
        .arg("/contiv.io/oper/eps/sweep.default-other1")
        .arg(remote.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(ovs_ports(&c, VXLAN_BRIDGE).contains(&stale.to_string()));

    c.start_netplugin().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ports = ovs_ports(&c, VXLAN_BRIDGE);
        if !ports.contains(&stale.to_string()) && ports.contains(&"vxif108888".to_string()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the start: {ports:?}\n{}",
            c.netplugin_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, body) = http("GET", &c.debug_addr, "/inspect/driver").unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("10.56.0.200"), "{body}");

    // Its IPv6 address is classified too (table 4). Later changes of other hosts' endpoints
    // come from the ofnet master, not from this record (it is read once, at start).
    let v6_flow = |c: &Cluster| {
        c.ovs
            .dump_flows(VXLAN_BRIDGE)
            .unwrap()
            .iter()
            .any(|f| f.normalized().contains("ipv6_dst=fd00:56::c8"))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !v6_flow(&c) {
        assert!(
            Instant::now() < deadline,
            "IPv6 destination flow of the remote endpoint\n{}",
            c.netplugin_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A large policy reaches the switch whole (issue 20): 2,000 rules created through REST, then
/// the policy attached to a group with a local pod in one change; netplugin installs them as
/// one agent change, and every rule's four flows (`tp_dst=` in, `tp_src=` back, IPv4 and IPv6) are in
/// `ovs-ofctl dump-flows`. A rule deleted from the middle takes exactly its four flows; detaching
/// the policy takes them all. (10,000 rules are `testbed bench policy`.)
#[test]
fn a_policy_of_thousands_of_rules_reaches_the_switch_whole() {
    testbed::require!(Root, Ovs, Etcd, Ip);
    const RULES: usize = 2_000;
    use testbed::bench::scale::FLOWS_PER_RULE;
    const BASE: u32 = 30_000;
    let c = cluster();
    create_network(&c, "big", "vxlan", "10.57.0.0/24", "10.57.0.1");
    c.netctl(&["policy", "create", "large"]).unwrap();
    let addr = c
        .netmaster_url
        .trim_start_matches("http://")
        .trim_end_matches('/');
    testbed::bench::scale::post_many(addr, RULES, 8, &|i| {
        testbed::bench::scale::rule("large", i, BASE + u32::try_from(i).unwrap())
    })
    .unwrap();
    c.netctl(&["group", "create", "big", "web"]).unwrap();
    let conf = c.conflist("big", "big", "web").unwrap();
    let _pod = c.add_pod(&conf).unwrap();
    assert_eq!(testbed::bench::scale::port_flows(&c, BASE).unwrap(), 0);

    c.netctl(&["group", "create", "-p", "large", "big", "web"])
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while testbed::bench::scale::port_flows(&c, BASE).unwrap() < FLOWS_PER_RULE * RULES {
        assert!(
            Instant::now() < deadline,
            "not every rule's flows reached the switch"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let dump = flows(&c, VXLAN_BRIDGE);
    for i in [0, RULES / 2, RULES - 1] {
        let port = BASE + u32::try_from(i).unwrap();
        assert!(dump.contains(&format!("tp_dst={port}")), "rule {i}");
        assert!(dump.contains(&format!("tp_src={port}")), "rule {i}");
    }
    assert_eq!(
        testbed::bench::scale::port_flows(&c, BASE).unwrap(),
        FLOWS_PER_RULE * RULES
    );

    let middle = RULES / 2;
    c.netctl(&["policy", "rule-rm", "large", &middle.to_string()])
        .unwrap();
    let port = BASE + u32::try_from(middle).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while testbed::bench::scale::port_flows(&c, BASE).unwrap() != FLOWS_PER_RULE * (RULES - 1) {
        assert!(
            Instant::now() < deadline,
            "the deleted rule's flows did not leave the switch (alone)"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let dump = flows(&c, VXLAN_BRIDGE);
    assert!(
        !dump.contains(&format!("tp_dst={port},")) && !dump.contains(&format!("tp_dst={port} ")),
        "rule {middle} still on the switch"
    );
    assert_eq!(
        testbed::bench::scale::port_flows(&c, BASE).unwrap(),
        FLOWS_PER_RULE * (RULES - 1)
    );

    c.netctl(&["group", "create", "big", "web"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while testbed::bench::scale::port_flows(&c, BASE).unwrap() > 0 {
        assert!(
            Instant::now() < deadline,
            "detached rules stayed on the switch"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The pod's IPv6 address from its CNI result (`ips[].address` with a `:`), without the
/// prefix length.
fn ipv6_of(pod: &CniPod) -> String {
    pod.result["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["address"].as_str())
        .find(|a| a.contains(':'))
        .and_then(|a| a.split('/').next())
        .unwrap_or_else(|| panic!("no IPv6 address in {}", pod.result))
        .to_string()
}

/// TCP listeners of one family in a pod (`nc -4|-6 -lk`), killed on drop.
struct FamilyListener(std::process::Child);

impl FamilyListener {
    fn start(pod: &CniPod, family: &str, port: u16) -> FamilyListener {
        let child = Command::new("ip")
            .args(["netns", "exec", pod.netns.name(), "nc", family, "-lk"])
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        FamilyListener(child)
    }
}

impl Drop for FamilyListener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The host end of `pod`'s veth: the interface of its CNI result outside the sandbox.
fn host_end_of(pod: &CniPod) -> String {
    pod.result["interfaces"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i.get("sandbox").is_none()))
        .and_then(|i| i["name"].as_str())
        .unwrap_or_else(|| panic!("no host interface in {}", pod.result))
        .to_string()
}

/// Dual-stack pods through libcni on two emulated hosts (a VXLAN network with an IPv6 subnet):
/// ping6 crosses the hosts, and a group's deny rule (`in tcp 8000 deny`, netctl) holds over
/// IPv6 as over IPv4 while the other port answers in both families.
#[test]
fn dual_stack_pods_on_two_hosts_ping6_and_a_deny_rule_holds_in_both_families() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping, Netcat);
    let mut c = cluster();
    let (ip_a, ip_b) = ("192.168.89.1", "192.168.89.2");
    let host_b = c.add_wired_host(ip_a, ip_b).unwrap();
    c.netctl(&[
        "net",
        "create",
        "-e",
        "vxlan",
        "-s",
        "10.50.0.0/24",
        "-g",
        "10.50.0.1",
        "--subnetv6",
        "fd00:50::/64",
        "dual",
    ])
    .unwrap();
    c.netctl(&["policy", "create", "p6"]).unwrap();
    c.netctl(&[
        "policy", "rule-add", "p6", "1", "-d", "in", "-l", "tcp", "-P", "8000", "-j", "deny",
    ])
    .unwrap();
    c.netctl(&["group", "create", "-p", "p6", "dual", "web"])
        .unwrap();
    let a = c
        .add_pod(&c.conflist("dual-a", "dual", "web").unwrap())
        .unwrap();
    let b = c
        .add_pod(&host_b.conflist("dual-b", "dual", "web").unwrap())
        .unwrap();
    let (a6, b6) = (ipv6_of(&a), ipv6_of(&b));
    assert!(
        a6.starts_with("fd00:50::") && b6.starts_with("fd00:50::"),
        "{a6} {b6}"
    );
    let ping6 = |from: &CniPod, to: &str| {
        from.netns
            .exec(&["ping", "-6", "-c", "1", "-W", "1", to])
            .is_ok()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ping6(&a, &b6) {
        assert!(
            Instant::now() < deadline,
            "ping6 {a6} -> {b6} across hosts never answered"
        );
    }
    assert!(ping6(&b, &a6), "ping6 B -> A");
    // The pod's host end carries its IPv6 packets with the kernel's IPv6 off: no address of
    // its own, nothing solicited into the switch.
    let host_end = host_end_of(&a);
    let knob = format!("/proc/sys/net/ipv6/conf/{host_end}/disable_ipv6");
    assert_eq!(c.host.exec(&["cat", &knob]).unwrap().trim(), "1", "{knob}");
    let own = c
        .host
        .exec(&["ip", "-6", "-o", "addr", "show", "dev", &host_end])
        .unwrap();
    assert!(
        own.trim().is_empty(),
        "{host_end} has IPv6 addresses: {own}"
    );
    let _listeners: Vec<FamilyListener> = ["-4", "-6"]
        .into_iter()
        .flat_map(|f| {
            [
                FamilyListener::start(&b, f, 8000),
                FamilyListener::start(&b, f, 8001),
            ]
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(tcp_connects(&a, &b.ip, 8001) && tcp_connects(&a, &b6, 8001)) {
        assert!(
            Instant::now() < deadline,
            "port 8001 never answered in both families"
        );
    }
    assert!(
        !tcp_connects(&a, &b.ip, 8000),
        "the deny rule does not hold over IPv4"
    );
    assert!(
        !tcp_connects(&a, &b6, 8000),
        "the deny rule does not hold over IPv6"
    );
    drop(host_b);
}

/// `network inspect`'s Oper of `network`.
fn net_oper(c: &Cluster, network: &str) -> Value {
    let out = c.netctl(&["net", "inspect", network]).unwrap();
    serde_json::from_str::<Value>(&out).unwrap()["Oper"].clone()
}

/// Host address reserves with two hosts: a host's first pod gets the first free address and
/// the host a reserve of the next four; its next pod takes the lowest of its reserve (its
/// flows sent before netmaster answered, and it reaches pods on both hosts); the other host's
/// pods never get one of them; a deleted pod's address goes back to its host's reserve and is
/// the next one there. When a host's netplugin is gone for good (lease expired, two sweeps of
/// the leader), its reserve is freed and its pod's address stays.
#[test]
fn hosts_take_pod_addresses_from_their_own_reserves_and_a_gone_hosts_come_back() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let mut c = Cluster::start_with(
        binaries(),
        ClusterOptions {
            netmaster_args: vec!["--reserve-sweep".into(), "2".into()],
            ..ClusterOptions::default()
        },
    )
    .unwrap();
    let mut host_b = c.add_wired_host("192.168.91.1", "192.168.91.2").unwrap();
    create_network(&c, "resv", "vxlan", "10.51.0.0/24", "10.51.0.1");
    let a1 = c
        .add_pod(&c.conflist("rs-a1", "resv", "").unwrap())
        .unwrap();
    assert_eq!(a1.ip, "10.51.0.2");
    let oper = net_oper(&c, "resv");
    assert_eq!(oper["hostReservedIPAddresses"], "10.51.0.3-10.51.0.6");
    assert_eq!(oper["allocatedIPAddresses"], "10.51.0.1-10.51.0.2");
    let b1 = c
        .add_pod(&host_b.conflist("rs-b1", "resv", "").unwrap())
        .unwrap();
    assert_eq!(
        b1.ip, "10.51.0.7",
        "host B's first pod passes A's reserve by"
    );
    let a2 = c
        .add_pod(&c.conflist("rs-a2", "resv", "").unwrap())
        .unwrap();
    assert_eq!(
        a2.ip, "10.51.0.3",
        "host A's next pod takes the lowest of its reserve"
    );
    let b2 = c
        .add_pod(&host_b.conflist("rs-b2", "resv", "").unwrap())
        .unwrap();
    assert_eq!(b2.ip, "10.51.0.8");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(a2.can_ping(&a1.ip, 1) && a2.can_ping(&b1.ip, 1)) {
        assert!(
            Instant::now() < deadline,
            "a pod from the reserve reaches no one"
        );
    }
    // A reserve is topped up once down to half its size: not yet.
    assert_eq!(
        net_oper(&c, "resv")["hostReservedIPAddresses"],
        "10.51.0.4-10.51.0.6, 10.51.0.9-10.51.0.11"
    );
    // A deleted pod's address is its host's next one.
    c.del_pod(&a1).unwrap();
    let a3 = c
        .add_pod(&c.conflist("rs-a3", "resv", "").unwrap())
        .unwrap();
    assert_eq!(a3.ip, a1.ip, "the freed address is handed out again");
    while !a3.can_ping(&b1.ip, 1) {
        assert!(
            Instant::now() < deadline + Duration::from_secs(10),
            "the re-used address reaches no one"
        );
    }

    // The runtime retries the ADD of a pod netmaster recorded already (netplugin died after
    // netmaster's commit): the ADD takes a reserved address, netmaster answers the recorded
    // one, and the pod is re-addressed to it (flows moved, addresses and MAC replaced).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = master::client::Client::new(&c.netmaster_url).unwrap();
    let recorded = rt
        .block_on(
            client.create_endpoint(&master::endpoint::CreateEndpointRequest {
                TenantName: "default".into(),
                NetworkName: "resv".into(),
                EndpointID: "cretried".into(),
                ConfigEP: master::endpoint::ConfigEp {
                    Container: "cretried".into(),
                    Host: c.host_label.clone(),
                    ..Default::default()
                },
                ..Default::default()
            }),
        )
        .unwrap();
    assert_eq!(recorded.ip_address, "10.51.0.12");
    let retried = c
        .add_pod_with_id(&c.conflist("rs-a4", "resv", "").unwrap(), "cretried")
        .unwrap();
    assert_eq!(retried.ip, recorded.ip_address);
    let inside = retried
        .netns
        .exec(&["ip", "-4", "addr", "show", "eth0"])
        .unwrap();
    assert!(
        !inside.contains("10.51.0.4/"),
        "the reserved address stayed: {inside}"
    );
    let link = retried.netns.exec(&["ip", "link", "show", "eth0"]).unwrap();
    assert!(link.contains(&recorded.mac_address), "{link}");
    while !retried.can_ping(&b1.ip, 1) {
        assert!(
            Instant::now() < deadline + Duration::from_secs(20),
            "the re-addressed pod reaches no one"
        );
    }
    let flows_now = flows(&c, VXLAN_BRIDGE);
    assert!(!flows_now.contains("nw_src=10.51.0.4,"), "{flows_now}");
    // It was re-addressed (not given the recorded address from the start): one `readdress` step.
    let (status, metrics) = http("GET", &c.debug_addr, "/metrics").unwrap();
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics.lines().any(|l| l
            .starts_with("netplugin_cni_add_step_duration_seconds_count{step=\"readdress\"} 1")),
        "no readdress step counted:\n{metrics}"
    );

    // B's netplugin is gone for good: its reserve is freed, its pods' addresses stay.
    c.kill_host_netplugin(&mut host_b);
    let killed = Instant::now();
    loop {
        let oper = net_oper(&c, "resv");
        if oper["hostReservedIPAddresses"] == "10.51.0.4-10.51.0.6" {
            assert_eq!(
                oper["allocatedIPAddresses"],
                "10.51.0.1-10.51.0.3, 10.51.0.7-10.51.0.8, 10.51.0.12"
            );
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(40),
            "host B's reserve still held {:?} after its netplugin was killed: {oper}",
            killed.elapsed()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
