//! `testbed bench services`: service load balancing in the switch, measured on a real Open
//! vSwitch (userspace datapath) driven by an `ofnet` agent, as one JSON line.
//!
//! 1. **Connection set-up latency**: a client pod opens TCP connections one after another,
//!    alternately to the VIP (balanced over 3 provider pods) and straight to a provider (the
//!    reference in the same run); each `connect()` is timed inside the pod. p50/p99 of both and
//!    their ratio (goal ≤ 1.1), and the connections per second through the VIP (back to back,
//!    one client).
//! 2. **Scale**: on a second bridge, 1,000 services × 10 providers (one port each): the flow and
//!    group count on the switch, the time until OVS confirmed them, and the resident memory of
//!    ovs-vswitchd and of this process (the agent); then 10,000 client endpoints are added
//!    (remote endpoints, as other hosts' pods) and the service flow count is taken again: it
//!    does not depend on the number of clients.

use crate::{Datapath, Netns, Ovs, OvsOptions, Pod, PodOptions, run};
use anyhow::{Context, Result, bail, ensure};
use ofnet::{
    AgentConfig, AgentHandle, BridgeKind, Endpoint, LocalEndpoint, MacAddr, Network, ServicePort,
    ServiceProtocol, ServiceSpec,
};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The numbers of one run; printed as one JSON line.
#[derive(Debug, serde::Serialize)]
pub struct ServicesReport {
    pub connections: usize,
    pub vip_connect_p50_ms: f64,
    pub vip_connect_p99_ms: f64,
    pub direct_connect_p50_ms: f64,
    pub direct_connect_p99_ms: f64,
    /// `vip_connect_p50_ms / direct_connect_p50_ms` (goal ≤ 1.1).
    pub ratio_p50: f64,
    pub ratio_p99: f64,
    /// New connections per second through the VIP, one client, back to back.
    pub vip_connections_per_s: f64,
    /// Connections per provider among the timed VIP connections.
    pub spread: Vec<usize>,
    pub services: usize,
    pub providers_per_service: usize,
    /// Service flows (cookie category 8) and select groups on the switch.
    pub service_flows: usize,
    pub service_groups: usize,
    /// From the first service call until OVS confirmed the last one.
    pub install_s: f64,
    pub vswitchd_rss_mib: f64,
    pub agent_rss_mib: f64,
    pub clients: usize,
    /// Service flows after the clients were added (equal to `service_flows`).
    pub service_flows_with_clients: usize,
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

const VIP: Ipv4Addr = Ipv4Addr::new(10, 254, 0, 10);

/// Accepts connections on 8080 and answers each with the server's name, then waits for the
/// client to close first (so the 4-tuple's TIME_WAIT is on the client, which picks source
/// ports knowing it: a server-side TIME_WAIT could meet a VIP connection that the client gave
/// the same source port, as its kernel does not know the NAT).
const SERVER: &str = r#"
import socket, sys
t = socket.socket()
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("0.0.0.0", 8080))
t.listen(128)
while True:
    c, _ = t.accept()
    try:
        c.sendall(sys.argv[1].encode())
        c.recv(1)
    except OSError:
        pass
    c.close()
"#;

/// `count` rounds of: a connection to the VIP (port 80), a connection to the provider (8080);
/// prints per connection `vip|direct <ms> <answer>`, the time of `connect()` alone; then
/// `burst <s>`: the seconds for `count` back-to-back VIP connections (connect, read, close).
const CLIENT: &str = r#"
import socket, sys, time
vip, direct, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
def one(host, port):
    s = socket.socket()
    s.settimeout(3)
    t = time.perf_counter()
    s.connect((host, port))
    ms = (time.perf_counter() - t) * 1000
    answer = s.recv(100).decode()
    s.close()
    return ms, answer
for _ in range(count):
    for kind, host, port in (("vip", vip, 80), ("direct", direct, 8080)):
        try:
            ms, answer = one(host, port)
            print("%s %.4f %s" % (kind, ms, answer), flush=True)
        except OSError as e:
            print("failed %s %s" % (kind, type(e).__name__), flush=True)
t = time.perf_counter()
failed = 0
for _ in range(count):
    try:
        one(vip, 80)
    except OSError:
        failed += 1
print("burst %.4f %d" % (time.perf_counter() - t, failed), flush=True)
"#;

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 1, 1, last)
}

fn mac(a: Ipv4Addr) -> MacAddr {
    let [x, y, z, w] = a.octets();
    MacAddr([2, 2, x, y, z, w])
}

/// Resident memory of a process, MiB.
pub(crate) fn rss_mib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS")?;
    Ok(kib / 1024.0)
}

/// An agent on bridge `br0` of `ovs`, connected and synced.
pub(crate) async fn agent_on(ovs: &Ovs) -> Result<(AgentHandle, ofctrl::Listener)> {
    let agent = AgentHandle::start(AgentConfig::new(BridgeKind::Vxlan, "br0"));
    let path: PathBuf = ovs.run_dir().join("br0.ctl.sock");
    let listener = agent
        .listen_unix(&path)
        .await
        .context("listening for the switch")?;
    ovs.vsctl(&[
        "set",
        "bridge",
        "br0",
        "fail_mode=secure",
        "protocols=OpenFlow13",
        "--",
        "set-controller",
        "br0",
        &format!("unix:{}", path.display()),
    ])?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !agent
        .bridge()
        .status()
        .await
        .is_some_and(|s| s.synced && s.dpid.is_some())
    {
        if Instant::now() > deadline {
            bail!("the switch never connected");
        }
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((agent, listener))
}

pub(crate) async fn network(agent: &AgentHandle) -> Result<()> {
    agent
        .add_network(Network {
            vlan: 10,
            vni: 5000,
            gateway: None,
            vrf: "t1".into(),
        })
        .await?;
    Ok(())
}

fn web(vip: Ipv4Addr) -> ServiceSpec {
    ServiceSpec {
        affinity_timeout: None,
        vip6: None,
        vip,
        ports: vec![ServicePort {
            protocol: ServiceProtocol::Tcp,
            svc_port: 80,
            prov_port: 8080,
        }],
    }
}

/// Part 1: latency and rate (see the module documentation).
async fn latency(connections: usize) -> Result<(Vec<f64>, Vec<f64>, f64, Vec<usize>)> {
    let netns = Netns::new("h")?;
    let ovs = Ovs::start(OvsOptions {
        netns: Some(&netns),
        datapath: Datapath::Netdev,
    })?;
    ovs.add_bridge("br0")?;
    let (agent, _listener) = agent_on(&ovs).await?;
    network(&agent).await?;
    let mut pods = Vec::new();
    let mut servers = Vec::new();
    for last in [2u8, 11, 12, 13] {
        let a = ip(last);
        let pod = Pod::attach(
            &ovs,
            "br0",
            &PodOptions {
                ip: format!("{a}/24"),
                mac: Some(mac(a).to_string()),
                gateway: None,
                vlan: None,
            },
        )?;
        // The userspace datapath forwards partially checksummed segments unchanged.
        pod.exec(&["ethtool", "-K", "eth0", "tx", "off"])?;
        let port_no = ofport(&ovs, pod.port_name()).await?;
        agent
            .add_local_endpoint(LocalEndpoint {
                port_no,
                mac: mac(a),
                vlan: 10,
                ipv4: Some(a),
                ipv6: None,
                epg: 0,
                epg_vlan: 0,
                dscp: 0,
                bandwidth: None,
            })
            .await?;
        if last != 2 {
            servers.push(KillOnDrop(
                Command::new("ip")
                    .args(["netns", "exec", pod.netns().name(), "python3", "-c"])
                    .args([SERVER, &format!("p{last}")])
                    .spawn()
                    .context("starting a provider's server")?,
            ));
        }
        pods.push(pod);
    }
    pods[0].exec(&["ip", "route", "add", "10.254.0.0/16", "dev", "eth0"])?;
    agent.add_service("web", web(VIP)).await?;
    agent
        .set_service_providers("web", vec![ip(11), ip(12), ip(13)])
        .await?;
    ovs.appctl(&["revalidator/wait"])?;
    std::thread::sleep(Duration::from_millis(500));
    // On the blocking pool: the agent must keep answering ARP on this thread meanwhile.
    let client_ns = pods[0].netns().name().to_string();
    let out = actix_rt::task::spawn_blocking(move || {
        run(&[
            "ip",
            "netns",
            "exec",
            &client_ns,
            "python3",
            "-c",
            CLIENT,
            &VIP.to_string(),
            &ip(11).to_string(),
            &connections.to_string(),
        ])
    })
    .await
    .context("the client thread")??;
    let (mut vip, mut direct, mut burst) = (Vec::new(), Vec::new(), 0.0);
    let mut spread = vec![0usize; 3];
    for line in out.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.as_slice() {
            ["vip", ms, answer] => {
                vip.push(ms.parse::<f64>()?);
                if let Some(n) = ["p11", "p12", "p13"].iter().position(|p| p == answer) {
                    spread[n] += 1;
                }
            }
            ["direct", ms, _] => direct.push(ms.parse::<f64>()?),
            ["burst", s, failed] => {
                burst = s.parse()?;
                ensure!(
                    *failed == "0",
                    "{failed} back-to-back connections failed\n{out}"
                );
            }
            ["failed", kind, why] => bail!("a {kind} connection failed: {why}\n{out}"),
            _ => bail!("unexpected client output: {line}"),
        }
    }
    ensure!(
        vip.len() == connections && direct.len() == connections && burst > 0.0,
        "the client did not finish: {out}"
    );
    vip.sort_by(f64::total_cmp);
    direct.sort_by(f64::total_cmp);
    drop(servers);
    Ok((vip, direct, connections as f64 / burst, spread))
}

/// The OpenFlow port of an interface, waiting for OVS to assign it.
async fn ofport(ovs: &Ovs, interface: &str) -> Result<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(p) = ovs.ofport(interface)
            && p > 0
        {
            return Ok(p);
        }
        if Instant::now() > deadline {
            bail!("no ofport for {interface}");
        }
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn service_flow_count(ovs: &Ovs) -> Result<usize> {
    let out = ovs.ofctl(&[
        "dump-flows",
        "br0",
        "cookie=0x0000080000000000/0x0000ff0000000000",
    ])?;
    Ok(out.lines().filter(|l| l.starts_with(' ')).count())
}

/// Part 2: scale (see the module documentation).
async fn scale(services: usize, providers: usize, clients: usize) -> Result<ScaleNumbers> {
    let ovs = Ovs::start(OvsOptions::dummy())?;
    ovs.add_bridge("br0")?;
    let (agent, _listener) = agent_on(&ovs).await?;
    network(&agent).await?;
    let started = Instant::now();
    for s in 0..services {
        let name = format!("svc{s}");
        let vip = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 254, 0, 0)) + s as u32);
        agent.add_service(&name, web(vip)).await?;
        let base = u32::from(Ipv4Addr::new(10, 100, 0, 0)) + (s * providers) as u32;
        agent
            .set_service_providers(
                &name,
                (0..providers as u32)
                    .map(|p| Ipv4Addr::from(base + p))
                    .collect(),
            )
            .await?;
    }
    let install_s = started.elapsed().as_secs_f64();
    let flows = service_flow_count(&ovs)?;
    let groups = ovs
        .dump_groups("br0")?
        .iter()
        .filter(|g| g.contains("type=select"))
        .count();
    let vswitchd = ovs
        .pids()
        .into_iter()
        .filter_map(|p| {
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).ok()?;
            (comm.trim() == "ovs-vswitchd").then_some(p)
        })
        .next()
        .context("no ovs-vswitchd pid")?;
    let vswitchd_rss = rss_mib(vswitchd)?;
    let agent_rss = rss_mib(std::process::id())?;
    for c in 0..clients {
        let a = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 1, 0, 0)) + c as u32);
        agent
            .add_remote_endpoint(Endpoint {
                endpoint_id: format!("{a}:t1"),
                endpoint_type: 2,
                endpoint_group: 0,
                ip_addr: Some(a),
                ip_mask: None,
                ipv6_addr: None,
                ipv6_mask: None,
                vrf: "t1".into(),
                mac: mac(a),
                vlan: 10,
                vni: 5000,
                endpoint_group_vlan: 0,
                originator_ip: Some(Ipv4Addr::new(192, 168, 0, 2)),
                originator_mac: String::new(),
                timestamp: String::new(),
                port_no: 0,
                dscp: 0,
                bandwidth: None,
            })
            .await?;
    }
    let with_clients = service_flow_count(&ovs)?;
    Ok(ScaleNumbers {
        flows,
        groups,
        install_s,
        vswitchd_rss,
        agent_rss,
        with_clients,
    })
}

struct ScaleNumbers {
    flows: usize,
    groups: usize,
    install_s: f64,
    vswitchd_rss: f64,
    agent_rss: f64,
    with_clients: usize,
}

/// Run both parts (root, Open vSwitch, python3, ethtool).
pub fn run_bench(
    connections: usize,
    services: usize,
    providers: usize,
    clients: usize,
) -> Result<ServicesReport> {
    if let Err(why) = crate::require::check(&[crate::Need::Root, crate::Need::Ovs]) {
        bail!("cannot run the services benchmark: {why}");
    }
    run(&["which", "python3", "ethtool"]).context("python3 and ethtool are needed")?;
    let system = actix_rt::System::new();
    system.block_on(async move {
        let (vip, direct, rate, spread) = latency(connections).await?;
        let s = scale(services, providers, clients).await?;
        let (v50, v99) = (percentile(&vip, 0.5), percentile(&vip, 0.99));
        let (d50, d99) = (percentile(&direct, 0.5), percentile(&direct, 0.99));
        Ok(ServicesReport {
            connections,
            vip_connect_p50_ms: v50,
            vip_connect_p99_ms: v99,
            direct_connect_p50_ms: d50,
            direct_connect_p99_ms: d99,
            ratio_p50: v50 / d50,
            ratio_p99: v99 / d99,
            vip_connections_per_s: rate,
            spread,
            services,
            providers_per_service: providers,
            service_flows: s.flows,
            service_groups: s.groups,
            install_s: s.install_s,
            vswitchd_rss_mib: s.vswitchd_rss,
            agent_rss_mib: s.agent_rss,
            clients,
            service_flows_with_clients: s.with_clients,
        })
    })
}
