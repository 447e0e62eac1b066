//! Docker mode end to end: a private dockerd in the emulated host's namespace uses netplugin
//! (`--mode docker`) as its remote network and IPAM driver; etcd, netmaster, OVS (userspace
//! datapath) and netplugin are the real processes; containers run a locally imported busybox
//! image. Each test's plugin has a unique name in `/run/docker/plugins/` (shared by every
//! dockerd on the machine).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use testbed::demo::{Cluster, ClusterOptions};
use testbed::docker::{Dockerd, plugin_socket};

/// A cluster whose netplugin runs in docker mode, and a dockerd on its host.
struct DockerCluster {
    // Field order: dockerd stops before netplugin and the host namespace go.
    d: Dockerd,
    c: Cluster,
    /// The plugin's (unique) driver name.
    driver: String,
    socket: PathBuf,
    image: &'static str,
    _dir: testbed::SandboxDir,
}

impl Drop for DockerCluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}

fn docker_cluster() -> DockerCluster {
    docker_cluster_with(false, &[])
}

/// With `cluster_mode`, netmaster runs in Docker cluster mode against the dockerd; `extra`:
/// more netplugin flags.
fn docker_cluster_with(cluster_mode: bool, extra: &[String]) -> DockerCluster {
    let (driver, socket) = plugin_socket();
    let dir = testbed::temp_dir("dkh").unwrap();
    let api = dir.path().join("docker.sock");
    let docker_host = format!("unix://{}", api.display());
    let netmaster_args = if cluster_mode {
        vec![
            "--mode".into(),
            "docker".into(),
            "--docker-host".into(),
            docker_host.clone(),
            "--name".into(),
            driver.clone(),
        ]
    } else {
        Vec::new()
    };
    let c = Cluster::start_with(
        binaries(),
        ClusterOptions {
            netplugin_mode: Some("docker".into()),
            netplugin_args: [
                "--docker-plugin-socket".into(),
                socket.to_string_lossy().into_owned(),
                "--docker-host".into(),
                docker_host,
            ]
            .into_iter()
            .chain(extra.iter().cloned())
            .collect(),
            netmaster_args,
            ..ClusterOptions::default()
        },
    )
    .expect("starting the cluster");
    let d = Dockerd::start_with(Some(&c.host), Some(api)).expect("starting dockerd");
    let image = d.busybox().expect("importing the busybox image");
    DockerCluster {
        d,
        c,
        driver,
        socket,
        image,
        _dir: dir,
    }
}

impl DockerCluster {
    /// `docker network create -d <plugin> --ipam-driver <plugin>` with `opts` given as both
    /// driver and IPAM options.
    fn network(&self, name: &str, opts: &[(&str, &str)]) -> Result<String, testbed::Error> {
        let mut args = vec![
            "network".to_string(),
            "create".into(),
            "-d".into(),
            self.driver.clone(),
            "--ipam-driver".into(),
            self.driver.clone(),
        ];
        for (k, v) in opts {
            // `--subnet` lets `docker run --ip` pick an address.
            if *k == "subnet" {
                args.extend(["--subnet".into(), v.to_string()]);
                continue;
            }
            args.extend(["-o".into(), format!("{k}={v}")]);
            args.extend(["--ipam-opt".into(), format!("{k}={v}")]);
        }
        args.push(name.into());
        self.d.docker(&args)
    }

    /// `docker run -d --name <name> --net <net> [extra] busybox sleep`.
    fn run(&self, name: &str, net: &str, extra: &[&str]) -> Result<String, testbed::Error> {
        // --init: the container stops at once on SIGTERM (sleep as pid 1 ignores it).
        let mut args = vec!["run", "-d", "--init", "--name", name, "--net", net];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[self.image, "sleep", "3600"]);
        self.d.docker(&args)
    }

    /// A container's (first network's) field, e.g. `IPAddress` or `EndpointID`.
    fn net_field(&self, name: &str, field: &str) -> String {
        self.d
            .docker(&[
                "inspect",
                "-f",
                &format!("{{{{range .NetworkSettings.Networks}}}}{{{{.{field}}}}}{{{{end}}}}"),
                name,
            ])
            .unwrap()
            .trim()
            .to_string()
    }

    fn ip(&self, name: &str) -> String {
        self.net_field(name, "IPAddress")
    }

    /// One echo request from a container; true if answered.
    fn ping_once(&self, from: &str, ip: &str) -> bool {
        self.d
            .docker(&["exec", from, "ping", "-c", "1", "-W", "1", ip])
            .is_ok()
    }

    /// True if `from` reaches `ip` within three attempts.
    fn reaches(&self, from: &str, ip: &str) -> bool {
        (0..3).any(|_| self.ping_once(from, ip))
    }

    /// Wait up to `secs` for `cond`.
    fn eventually(&self, secs: u64, mut cond: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if cond() {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `network inspect` Oper of netmaster.
    fn allocated(&self, network: &str) -> String {
        let out = self.c.netctl(&["net", "inspect", network]).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        v["Oper"]["allocatedIPAddresses"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// A raw call on the plugin socket, as dockerd makes it.
    fn plugin_call(&self, method: &str, body: &Value) -> (u16, Value) {
        plugin_call(&self.socket, method, body)
    }
}

fn plugin_call(socket: &Path, method: &str, body: &Value) -> (u16, Value) {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    let body = body.to_string();
    write!(
        s,
        "POST /{method} HTTP/1.1\r\nHost: plugin\r\nContent-Type: application/vnd.docker.plugins.v1.2+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let json = out
        .split("\r\n\r\n")
        .nth(1)
        .and_then(|b| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, json)
}

/// Contiv's network and group as Docker networks: two containers of a group ping each other,
/// a container of another network cannot reach them, a policy attached to the group is
/// enforced and lifted; `docker rm -f` takes the port, the veth and the flows, and frees the
/// address (a new container gets it).
#[test]
fn docker_containers_of_a_group_reach_each_other_and_policy_holds() {
    testbed::require!(Root, Ovs, Etcd, Ip, Docker);
    let dc = docker_cluster();
    let c = &dc.c;
    create_network(c, "dn", "vlan", "10.61.0.0/24", "10.61.0.1");
    create_network(c, "other", "vlan", "10.62.0.0/24", "10.62.0.1");
    c.netctl(&["group", "create", "dn", "web"]).unwrap();
    dc.network("web", &[("group", "web")]).unwrap();
    dc.network("other", &[("network", "other")]).unwrap();
    dc.run("ca", "web", &[]).unwrap();
    dc.run("cb", "web", &[]).unwrap();
    dc.run("cx", "other", &[]).unwrap();
    let (a, b, x) = (dc.ip("ca"), dc.ip("cb"), dc.ip("cx"));
    assert!(
        a.starts_with("10.61.0.") && b.starts_with("10.61.0."),
        "{a} {b}"
    );
    assert!(x.starts_with("10.62.0."), "{x}");
    // The endpoints are netplugin's, in the group, with the MAC netmaster derived.
    let eps = local_endpoints(c);
    assert_eq!(eps.len(), 3, "{eps:?}");
    let ep_a = eps
        .values()
        .find(|e| e["oper"]["ipAddress"] == a.as_str())
        .unwrap();
    assert_eq!(ep_a["oper"]["serviceName"], "web");
    let mac = dc.net_field("ca", "MacAddress");
    assert_eq!(ep_a["oper"]["macAddress"], mac.as_str());
    // eth0 in the container has the address and the default route via the gateway.
    let addr = dc.d.docker(&["exec", "ca", "ip", "-o", "addr"]).unwrap();
    assert!(addr.contains(&format!("{a}/24")), "{addr}");
    let route = dc.d.docker(&["exec", "ca", "ip", "route"]).unwrap();
    assert!(route.contains("default via 10.61.0.1"), "{route}");

    assert!(dc.reaches("ca", &b), "a cannot reach b in its group");
    assert!(dc.reaches("cb", &a), "b cannot reach a in its group");
    assert!(
        !dc.reaches("cx", &a),
        "a container of another network reached a"
    );

    // A policy attached to the group: ICMP in denied.
    c.netctl(&["policy", "create", "noping"]).unwrap();
    c.netctl(&[
        "policy", "rule-add", "noping", "1", "-d", "in", "-l", "icmp", "-j", "deny",
    ])
    .unwrap();
    c.netctl(&["group", "create", "-p", "noping", "dn", "web"])
        .unwrap();
    assert!(
        dc.eventually(10, || !dc.ping_once("ca", &b)),
        "the group's deny rule is not enforced"
    );
    c.netctl(&["policy", "rule-rm", "noping", "1"]).unwrap();
    assert!(
        dc.eventually(10, || dc.ping_once("ca", &b)),
        "ping stayed denied after the rule was removed"
    );

    // docker rm -f: port, veth, flows and address go.
    let port_a = format!("v{}", ep_a["oper"]["portName"].as_str().unwrap());
    assert!(endpoint_ports(c).contains(&port_a));
    assert!(flows(c, VLAN_BRIDGE).contains(&a));
    dc.d.docker(&["rm", "-f", "ca"]).unwrap();
    assert!(!endpoint_ports(c).contains(&port_a), "OVS port left");
    assert!(!endpoint_veths(c).contains(&port_a), "veth left");
    assert!(
        !flows(c, VLAN_BRIDGE).contains(&format!("{a},")),
        "flows of {a} left:\n{}",
        flows(c, VLAN_BRIDGE)
    );
    assert!(!dc.allocated("dn").contains(&a), "{a} still allocated");
    // netmaster hands out the lowest free address: the freed one.
    dc.run("ca2", "web", &[]).unwrap();
    assert_eq!(dc.ip("ca2"), a, "the freed address is handed out again");
    assert!(dc.reaches("ca2", &b));
}

/// Bad input gets `{"Err": ...}` naming the problem and leaves nothing behind: an unknown
/// network or group, an address outside the group's pool, a duplicate endpoint, a MAC asked for.
#[test]
fn docker_bad_requests_are_refused_and_leave_nothing() {
    testbed::require!(Root, Ovs, Etcd, Ip, Docker);
    let dc = docker_cluster();
    let c = &dc.c;
    create_network(c, "dn", "vlan", "10.63.0.0/24", "10.63.0.1");
    c.netctl(&[
        "group",
        "create",
        "-r",
        "10.63.0.100-10.63.0.110",
        "dn",
        "pooled",
    ])
    .unwrap();

    let err = dc.network("ghost", &[("network", "nope")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("network nope does not exist in tenant default"),
        "{err}"
    );
    let err = dc.network("ghost", &[("group", "nogroup")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("endpoint group nogroup does not exist in tenant default"),
        "{err}"
    );
    let err = dc
        .network("ghost", &[("network", "dn"), ("tenant", "t9")])
        .unwrap_err();
    assert!(err.to_string().contains("tenant t9"), "{err}");
    let nets =
        dc.d.docker(&["network", "ls", "--format", "{{.Name}}"])
            .unwrap();
    assert!(!nets.contains("ghost"), "{nets}");

    dc.network("pooled", &[("group", "pooled"), ("subnet", "10.63.0.0/24")])
        .unwrap();
    dc.run("ok", "pooled", &[]).unwrap();
    let ok = dc.ip("ok");
    assert!(ok.starts_with("10.63.0.1"), "{ok} outside the group pool");
    let before = (
        dc.allocated("dn"),
        endpoint_ports(c),
        local_endpoints(c).len(),
    );

    // An address of the subnet but outside the group's pool.
    let err = dc
        .run("outside", "pooled", &["--ip", "10.63.0.50"])
        .unwrap_err();
    assert!(err.to_string().contains("10.63.0.50"), "{err}");
    // A MAC address: netplugin derives MACs from addresses.
    let err = dc
        .run("withmac", "pooled", &["--mac-address", "02:00:00:00:00:01"])
        .unwrap_err();
    assert!(err.to_string().contains("--mac-address"), "{err}");
    // A second CreateEndpoint for an endpoint that exists.
    let ep = dc.net_field("ok", "EndpointID");
    let net = dc.net_field("ok", "NetworkID");
    let (status, reply) = dc.plugin_call(
        "NetworkDriver.CreateEndpoint",
        &json!({"NetworkID": net, "EndpointID": ep, "Interface": {}}),
    );
    assert_eq!(status, 500);
    assert!(
        reply["Err"]
            .as_str()
            .unwrap_or_default()
            .contains("already exists"),
        "{reply}"
    );
    // An endpoint on a network the plugin never saw.
    let (_, reply) = dc.plugin_call(
        "NetworkDriver.CreateEndpoint",
        &json!({"NetworkID": "feedface", "EndpointID": "e1", "Interface": {"Address": "10.63.0.101/24"}}),
    );
    assert!(
        reply["Err"]
            .as_str()
            .unwrap_or_default()
            .contains("feedface"),
        "{reply}"
    );
    // A body that is not JSON.
    let (status, reply) = dc.plugin_call("IpamDriver.RequestAddress", &json!("nope"));
    assert_eq!(status, 400, "{reply}");
    let (status, _) = dc.plugin_call("NetworkDriver.NoSuchCall", &json!({}));
    assert_eq!(status, 404);

    for name in ["outside", "withmac"] {
        let _ = dc.d.docker(&["rm", "-f", name]);
    }
    let after = (
        dc.allocated("dn"),
        endpoint_ports(c),
        local_endpoints(c).len(),
    );
    assert_eq!(before, after, "a refused request left something behind");
    assert!(dc.reaches("ok", "10.63.0.1") || dc.ip("ok") == ok);
}

/// A pinger inside a container (`docker exec ... ping`), for loss counts.
fn pinger(dc: &DockerCluster, from: &str, to: &str, count: u32) -> Child {
    Command::new("docker")
        .args(["-H", &dc.d.host(), "exec", from, "ping", "-q"])
        .args(["-i", "0.05", "-c", &count.to_string(), "-W", "1", to])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// netplugin SIGKILLed and restarted while two containers ping: nothing lost, the OVS ports
/// stay, Docker's view and netplugin's agree. Then dockerd restarts with netplugin running:
/// the plugin is used again at once (new containers, cleanup of the old ones' endpoints).
#[test]
fn docker_survives_netplugin_and_dockerd_restarts() {
    testbed::require!(Root, Ovs, Etcd, Ip, Docker);
    let mut dc = docker_cluster();
    create_network(&dc.c, "steady", "vlan", "10.64.0.0/24", "10.64.0.1");
    dc.network("steady", &[("network", "steady")]).unwrap();
    dc.run("ca", "steady", &[]).unwrap();
    dc.run("cb", "steady", &[]).unwrap();
    let (a, b) = (dc.ip("ca"), dc.ip("cb"));
    assert!(dc.reaches("ca", &b));
    let ports = endpoint_ports(&dc.c);
    assert_eq!(ports.len(), 2);
    let uuids: Vec<_> = ports.iter().map(|p| port_uuids(&dc.c, p)).collect();

    let pingers = [pinger(&dc, "ca", &b, 200), pinger(&dc, "cb", &a, 200)];
    std::thread::sleep(Duration::from_millis(800));
    dc.c.kill_netplugin();
    std::thread::sleep(Duration::from_millis(300));
    dc.c.start_netplugin().expect("netplugin restarts");
    for p in pingers {
        let out = p.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("200 packets transmitted, 200 packets received"),
            "packets lost across the netplugin restart:\n{text}\n{}",
            dc.c.netplugin_log()
        );
    }
    let after: Vec<_> = ports.iter().map(|p| port_uuids(&dc.c, p)).collect();
    assert_eq!(uuids, after, "OVS ports were re-created");
    assert_eq!(local_endpoints(&dc.c).len(), 2, "endpoints re-adopted");
    // The restarted plugin serves Docker: a new container, and rm of an adopted one.
    dc.run("cc", "steady", &[]).unwrap();
    assert!(dc.reaches("cc", &a));
    let port_b = local_endpoints(&dc.c)
        .values()
        .find(|e| e["oper"]["ipAddress"] == b.as_str())
        .map(|e| format!("v{}", e["oper"]["portName"].as_str().unwrap()))
        .unwrap();
    dc.d.docker(&["rm", "-f", "cb"]).unwrap();
    assert!(
        !endpoint_ports(&dc.c).contains(&port_b),
        "the adopted endpoint's port outlived docker rm"
    );
    assert_eq!(local_endpoints(&dc.c).len(), 2);

    // dockerd restarts (its containers stop): it cleans their endpoints up through the
    // plugin, and the plugin works for new containers right away.
    dc.d.restart().expect("dockerd restarts");
    assert!(
        dc.eventually(20, || local_endpoints(&dc.c).is_empty()),
        "endpoints of the stopped containers stayed: {:?}",
        local_endpoints(&dc.c)
    );
    dc.run("d1", "steady", &[]).unwrap();
    dc.run("d2", "steady", &[]).unwrap();
    let d2 = dc.ip("d2");
    assert!(
        dc.reaches("d1", &d2),
        "the plugin is not usable after a dockerd restart"
    );
    dc.d.docker(&["start", "ca"]).unwrap();
    assert!(
        dc.reaches("ca", &d2),
        "a restarted container did not get its network back"
    );
}

/// Docker cluster mode: netmaster makes the Docker network of every network and group created
/// through netctl (`<name>` in the default tenant, `<name>/<tenant>` otherwise) with netplugin
/// as driver and IPAM and the Contiv subnet, and removes it with them; `docker run --net
/// <group>` lands in the group. A group with containers cannot be deleted, and its Docker
/// network stays.
#[test]
fn netmaster_in_docker_cluster_mode_makes_the_docker_networks() {
    testbed::require!(Root, Ovs, Etcd, Ip, Docker);
    let dc = docker_cluster_with(true, &[]);
    let c = &dc.c;
    let names = || {
        dc.d.docker(&["network", "ls", "--format", "{{.Name}} {{.Driver}}"])
            .unwrap()
    };
    create_network(c, "cm", "vlan", "10.65.0.0/24", "10.65.0.1");
    c.netctl(&["group", "create", "cm", "web"]).unwrap();
    c.netctl(&["tenant", "create", "t1"]).unwrap();
    c.netctl(&[
        "net",
        "create",
        "-t",
        "t1",
        "-e",
        "vlan",
        "-s",
        "10.66.0.0/24",
        "-g",
        "10.66.0.1",
        "tn",
    ])
    .unwrap();
    c.netctl(&["group", "create", "-t", "t1", "tn", "db"])
        .unwrap();
    let listed = names();
    for name in ["cm", "web", "tn/t1", "db/t1"] {
        assert!(
            listed.contains(&format!("{name} {}", dc.driver)),
            "no Docker network {name}:\n{listed}"
        );
    }
    let ipam =
        dc.d.docker(&["network", "inspect", "-f", "{{json .IPAM}}", "web"])
            .unwrap();
    let ipam: Value = serde_json::from_str(ipam.trim()).unwrap();
    assert_eq!(ipam["Driver"], dc.driver.as_str());
    assert_eq!(ipam["Config"][0]["Subnet"], "10.65.0.0/24");
    assert_eq!(ipam["Options"]["group"], "web");

    // docker run --net <group> (with --ip, which needs the subnet) lands in the group.
    dc.run("w1", "web", &["--ip", "10.65.0.50"]).unwrap();
    dc.run("d1", "db/t1", &[]).unwrap();
    assert_eq!(dc.ip("w1"), "10.65.0.50");
    assert!(dc.ip("d1").starts_with("10.66.0."));
    let eps = local_endpoints(c);
    let group_of = |ip: &str| {
        eps.values()
            .find(|e| e["oper"]["ipAddress"] == ip)
            .map(|e| {
                (
                    e["oper"]["serviceName"].clone(),
                    e["oper"]["tenant"].clone(),
                )
            })
    };
    assert_eq!(
        group_of("10.65.0.50"),
        Some((json!("web"), json!("default")))
    );
    assert_eq!(group_of(&dc.ip("d1")), Some((json!("db"), json!("t1"))));

    // A group with a container stays, and so does its Docker network.
    let err = c.netctl(&["group", "rm", "web"]).unwrap_err();
    assert!(err.to_string().contains("active endpoints"), "{err}");
    assert!(names().contains("web "));
    dc.d.docker(&["rm", "-f", "w1"]).unwrap();
    c.netctl(&["group", "rm", "web"]).unwrap();
    c.netctl(&["net", "rm", "cm"]).unwrap();
    let listed = names();
    assert!(
        !listed.contains("web ") && !listed.contains("cm "),
        "{listed}"
    );
    assert!(listed.contains("db/t1"), "{listed}");
}

/// A tiny real resolver on loopback (UDP): `outside.example` is 192.0.2.77, anything else
/// NXDOMAIN. Runs until the test ends.
fn outside_resolver() -> std::net::SocketAddr {
    use hickory_proto::op::{Message, OpCode, ResponseCode};
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{RData, Record, RecordType};
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let Ok(q) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let mut r = Message::response(q.metadata.id, OpCode::Query);
            r.metadata.recursion_desired = q.metadata.recursion_desired;
            r.metadata.recursion_available = true;
            let Some(question) = q.queries.first().cloned() else {
                continue;
            };
            let known = question.name().to_ascii().trim_end_matches('.') == "outside.example";
            if known && question.query_type() == RecordType::A {
                r.add_answer(Record::from_rdata(
                    question.name().clone(),
                    60,
                    RData::A(A("192.0.2.77".parse().unwrap())),
                ));
            } else if !known {
                r.metadata.response_code = ResponseCode::NXDomain;
            }
            r.add_query(question);
            let _ = socket.send_to(&r.to_vec().unwrap(), from);
        }
    });
    addr
}

/// The inline DNS (`--dns-enable`): a container's DNS queries, whatever server they go to, are
/// answered by netplugin from its tenant's names: another container's name (A, and AAAA on a
/// dual-stack network), its group's name, a netctl service's name; an outside name goes to the
/// real resolver (a tiny one on loopback here) and its answer comes back. Through Docker's
/// own resolver (`--dns`) as well as asking a server directly.
#[test]
fn docker_inline_dns_answers_tenant_names_and_forwards_the_rest() {
    testbed::require!(Root, Ovs, Etcd, Ip, Docker);
    let upstream = outside_resolver();
    let dc = docker_cluster_with(
        false,
        &[
            "--dns-enable".into(),
            "--dns-upstream".into(),
            upstream.to_string(),
        ],
    );
    let c = &dc.c;
    c.netctl(&[
        "net",
        "create",
        "-e",
        "vlan",
        "-s",
        "10.67.0.0/24",
        "-g",
        "10.67.0.1",
        "--subnetv6",
        "fd00:67::/64",
        "--gatewayv6",
        "fd00:67::1",
        "dn",
    ])
    .unwrap();
    c.netctl(&["group", "create", "dn", "web"]).unwrap();
    c.netctl(&["group", "create", "dn", "db"]).unwrap();
    c.netctl(&[
        "service",
        "create",
        "-s",
        "dn",
        "-l",
        "app=db",
        "-p",
        "5432:5432:TCP",
        "--ip",
        "10.67.0.200",
        "dbsvc",
    ])
    .unwrap();
    dc.network("web", &[("group", "web")]).unwrap();
    dc.network("db", &[("group", "db")]).unwrap();
    // Any address the container can reach serves as "its DNS server": the query is punted
    // before it gets there. Here: another container's.
    dc.run("anchor", "web", &[]).unwrap();
    let server = dc.ip("anchor");
    dc.run("d1", "db", &["--label", "app=db"]).unwrap();
    dc.run("w1", "web", &["--dns", &server]).unwrap();
    let d1 = dc.ip("d1");
    let d1_v6 = local_endpoints(c)
        .values()
        .find(|e| e["oper"]["ipAddress"] == d1.as_str())
        .and_then(|e| e["oper"]["ipv6Address"].as_str().map(str::to_string))
        .unwrap();
    assert!(d1_v6.starts_with("fd00:67::"), "{d1_v6}");
    let lookup = |args: &[&str]| -> String {
        let mut argv = vec!["exec", "w1", "nslookup"];
        argv.extend_from_slice(args);
        match dc.d.docker(&argv) {
            Ok(out) => out,
            Err(e) => e.to_string(),
        }
    };
    // The container's name arrives through Docker's events and netmaster.
    assert!(
        dc.eventually(15, || lookup(&["d1", &server]).contains(&d1)),
        "d1 not resolved: {}\n{}",
        lookup(&["d1", &server]),
        dc.c.netplugin_log()
    );
    let aaaa = lookup(&["-type=AAAA", "d1", &server]);
    assert!(aaaa.contains(d1_v6.split('/').next().unwrap()), "{aaaa}");
    let group = lookup(&["db", &server]);
    assert!(group.contains(&d1), "group name: {group}");
    let svc = lookup(&["dbsvc", &server]);
    assert!(svc.contains("10.67.0.200"), "service name: {svc}");
    let outside = lookup(&["outside.example", &server]);
    assert!(outside.contains("192.0.2.77"), "forwarded: {outside}");
    let nx = lookup(&["nowhere.example", &server]);
    assert!(!nx.contains("Address: 1"), "{nx}");
    // Through the container's own resolver configuration (Docker's resolver, --dns).
    let default = lookup(&["d1"]);
    assert!(default.contains(&d1), "default resolver: {default}");
    let default = lookup(&["outside.example"]);
    assert!(
        default.contains("192.0.2.77"),
        "default resolver: {default}"
    );
}

/// Two emulated hosts on a VXLAN network, a dockerd in each host's namespace with its own
/// netplugin (each its own driver name): containers on the two hosts reach each other.
#[test]
fn docker_containers_on_two_hosts_reach_each_other_over_vxlan() {
    testbed::require!(Root, Ovs, Etcd, Ip, Docker);
    let mut dc = docker_cluster();
    let (driver_b, socket_b) = plugin_socket();
    let dir_b = testbed::temp_dir("dkb").unwrap();
    let api_b = dir_b.path().join("docker.sock");
    let host_b =
        dc.c.add_wired_host_with(
            "192.168.89.1",
            "192.168.89.2",
            &[
                "--docker-plugin-socket".into(),
                socket_b.to_string_lossy().into_owned(),
                "--docker-host".into(),
                format!("unix://{}", api_b.display()),
            ],
        )
        .unwrap();
    let _socket_b = SocketFile(socket_b);
    let d_b = Dockerd::start_with(Some(&host_b.netns), Some(api_b)).unwrap();
    let image = d_b.busybox().unwrap();
    create_network(&dc.c, "wide", "vxlan", "10.68.0.0/24", "10.68.0.1");
    dc.network("wide", &[("network", "wide")]).unwrap();
    d_b.docker(&[
        "network",
        "create",
        "-d",
        &driver_b,
        "--ipam-driver",
        &driver_b,
        "-o",
        "network=wide",
        "--ipam-opt",
        "network=wide",
        "wide",
    ])
    .unwrap();
    dc.run("ca", "wide", &[]).unwrap();
    d_b.docker(&[
        "run", "-d", "--init", "--name", "cb", "--net", "wide", image, "sleep", "3600",
    ])
    .unwrap();
    let a = dc.ip("ca");
    let b = d_b
        .docker(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            "cb",
        ])
        .unwrap()
        .trim()
        .to_string();
    assert_ne!(a, b, "one address handed out on both hosts");
    assert!(
        dc.eventually(15, || dc.ping_once("ca", &b)),
        "{a} on host A never reached {b} on host B"
    );
    assert!(
        d_b.docker(&["exec", "cb", "ping", "-c", "2", "-W", "1", &a])
            .is_ok(),
        "B -> A"
    );
    drop(d_b);
    drop(host_b);
}

/// Removes a plugin socket file when dropped (a killed netplugin leaves it).
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
