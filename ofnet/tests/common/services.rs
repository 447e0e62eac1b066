//! Service load-balancing helpers: provider servers (python3, answering with their name),
//! one-shot and long-lived clients of the VIP, pods attached as local endpoints, and the
//! service flows on the bridge and in the agent.

use super::{blocking, dumped_flows, ofport};
use ofnet::{
    AgentHandle, BridgeKind, LocalEndpoint, MacAddr, ServicePort, ServiceProtocol, ServiceSpec,
};
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;
use testbed::{Ovs, Pod, PodOptions};

pub const VIP: &str = "10.254.0.10";
pub const VLAN: u16 = 10;

/// Answers every UDP datagram on `udp` with `name` (IPv4 and IPv6); every TCP connection on `tcp` gets `name`
/// at once and again for every segment it sends, until it closes (each in its own thread, so
/// a long-lived connection does not hold up the others).
const SERVER: &str = r#"
import socket, sys, threading
name, tcp, udp = sys.argv[1].encode(), int(sys.argv[2]), int(sys.argv[3])
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
u.bind(("::", udp))
def answer_udp():
    while True:
        _, peer = u.recvfrom(2048)
        u.sendto(name, peer)
threading.Thread(target=answer_udp, daemon=True).start()
def serve(c):
    try:
        c.sendall(name)
        while c.recv(2048):
            c.sendall(name)
    except OSError:
        pass
    c.close()
t = socket.socket(socket.AF_INET6)
t.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("::", tcp))
t.listen(16)
while True:
    c, _ = t.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// One request to `VIP:port` over `proto`; prints the answer (empty on timeout or refusal),
/// then on a second line the milliseconds from the first packet sent to the answer.
const CLIENT: &str = r#"
import socket, sys, time
proto, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = time.perf_counter()
try:
    if proto == "tcp":
        s = socket.create_connection((host, port), timeout=3)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.connect((host, port))
        s.send(b"hello")
    print(s.recv(100).decode())
except OSError:
    print()
print("%.2f" % ((time.perf_counter() - start) * 1000))
"#;

/// One TCP connection to `host:port` kept open: prints the greeting, then for every line on
/// stdin sends it and prints the answer (`error: ...` when the connection failed, empty when
/// the peer closed it).
const CONNECTION: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
print(s.recv(100).decode(), flush=True)
for line in sys.stdin:
    try:
        s.sendall(line.encode())
        print(s.recv(100).decode(), flush=True)
    except OSError as e:
        print("error: %s" % e, flush=True)
"#;

/// `count` new connections (TCP) or requests (UDP, each from a new socket) to
/// `host:port`, `interval` seconds apart, each waiting at most `timeout` seconds; prints one
/// line per attempt: its start (Unix time, seconds) and the answer, or `refused` (a TCP reset
/// or an ICMP port unreachable), `timeout`, `closed`, `error`.
const PROBE: &str = r#"
import socket, sys, time
proto, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
count, interval, timeout = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
family = socket.AF_INET6 if ":" in host else socket.AF_INET
for _ in range(count):
    start = time.time()
    try:
        if proto == "tcp":
            s = socket.create_connection((host, port), timeout=timeout)
        else:
            s = socket.socket(family, socket.SOCK_DGRAM)
            s.settimeout(timeout)
            s.connect((host, port))
            s.send(b"hello")
        answer = s.recv(100).decode() or "closed"
        s.close()
    except ConnectionRefusedError:
        answer = "refused"
    except socket.timeout:
        answer = "timeout"
    except OSError:
        answer = "error"
    print("%.3f %s" % (start, answer), flush=True)
    if interval > 0:
        time.sleep(interval)
"#;

/// A [`PROBE`] run in the background.
pub struct Probe(Option<Child>);

impl Probe {
    /// Start `count` attempts from namespace `ns` to `VIP:port`, `interval` seconds apart.
    pub fn start(ns: &str, proto: &str, port: u16, count: u32, interval: f64) -> Probe {
        Probe::start_to(ns, proto, VIP, port, count, interval)
    }

    /// [`Probe::start`] to `host` (an IPv4 or IPv6 address).
    pub fn start_to(
        ns: &str,
        proto: &str,
        host: &str,
        port: u16,
        count: u32,
        interval: f64,
    ) -> Probe {
        Probe::start_with_timeout(ns, proto, host, port, count, interval, 1.0)
    }

    /// [`Probe::start_to`] waiting up to `timeout` seconds for each answer.
    pub fn start_with_timeout(
        ns: &str,
        proto: &str,
        host: &str,
        port: u16,
        count: u32,
        interval: f64,
        timeout: f64,
    ) -> Probe {
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "python3", "-c", PROBE, proto, host])
            .arg(port.to_string())
            .arg(count.to_string())
            .arg(interval.to_string())
            .arg(timeout.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Probe(Some(child))
    }

    /// Wait for the end; every attempt's (start, answer).
    pub async fn finish(mut self) -> Vec<(f64, String)> {
        let child = self.0.take().unwrap();
        blocking(move || {
            let out = child.wait_with_output().unwrap();
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| {
                    let (t, a) = l.split_once(' ')?;
                    Some((t.parse().ok()?, a.to_string()))
                })
                .collect()
        })
        .await
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `count` attempts back to back from `ns` to `VIP:port`: how many each answer got.
pub async fn tally(
    ns: &str,
    proto: &str,
    port: u16,
    count: u32,
) -> std::collections::BTreeMap<String, u32> {
    tally_to(ns, proto, VIP, port, count).await
}

/// [`tally`] to `host` (an IPv4 or IPv6 address).
pub async fn tally_to(
    ns: &str,
    proto: &str,
    host: &str,
    port: u16,
    count: u32,
) -> std::collections::BTreeMap<String, u32> {
    tally_within(ns, proto, host, port, count, 1.0).await
}

/// [`tally_to`] waiting up to `timeout` seconds for each answer. A reject comes from the
/// agent (a packet-in answered with a packet-out), so on a loaded machine it can take longer
/// than a provider's answer; checks that expect `refused` give it more time.
pub async fn tally_within(
    ns: &str,
    proto: &str,
    host: &str,
    port: u16,
    count: u32,
    timeout: f64,
) -> std::collections::BTreeMap<String, u32> {
    let mut out = std::collections::BTreeMap::new();
    for (_, answer) in Probe::start_with_timeout(ns, proto, host, port, count, 0.0, timeout)
        .finish()
        .await
    {
        *out.entry(answer).or_default() += 1;
    }
    out
}

/// Now, as Unix time in seconds (what [`PROBE`] prints).
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The bridge's service groups (`type=select`) as `ovs-ofctl dump-groups` shows them.
pub fn groups_on_bridge(ovs: &Ovs) -> Vec<String> {
    ovs.dump_groups("br0")
        .unwrap()
        .into_iter()
        .filter(|g| g.contains("type=select"))
        .collect()
}

/// A provider's server (TCP 8080, UDP 5353), killed on drop.
pub struct Server(Child);

impl Server {
    pub fn start(ns: &str, name: &str) -> Server {
        let child = Command::new("ip")
            .args([
                "netns", "exec", ns, "python3", "-c", SERVER, name, "8080", "5353",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(400));
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a request from namespace `ns` to the VIP gets back ("" for nothing).
pub async fn ask(ns: &str, proto: &str, port: u16) -> String {
    ask_timed(ns, proto, port).await.0
}

/// [`ask`], and how long the request took in milliseconds.
pub async fn ask_timed(ns: &str, proto: &str, port: u16) -> (String, f64) {
    let (ns, proto) = (ns.to_string(), proto.to_string());
    blocking(move || {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns, "python3", "-c", CLIENT, &proto, VIP])
            .arg(port.to_string())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let answer = lines.next().unwrap_or_default().to_string();
        let ms = lines
            .next()
            .and_then(|l| l.parse().ok())
            .unwrap_or(f64::NAN);
        (answer, ms)
    })
    .await
}

/// A TCP connection from a namespace to `VIP:port`, open until dropped.
pub struct Connection {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Connection {
    /// Connect; returns the connection and the greeting ("" when the connection failed).
    pub async fn open(ns: &str, port: u16) -> (Connection, String) {
        let ns = ns.to_string();
        blocking(move || {
            let mut child = Command::new("ip")
                .args(["netns", "exec", &ns, "python3", "-c", CONNECTION, VIP])
                .arg(port.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take().unwrap();
            let stdout = BufReader::new(child.stdout.take().unwrap());
            let mut c = Connection {
                child,
                stdin,
                stdout,
            };
            let greeting = c.read_line();
            (c, greeting)
        })
        .await
    }

    /// Send a line on the open connection; the answer.
    pub async fn say(mut self, line: &str) -> (Connection, String) {
        let line = format!("{line}\n");
        blocking(move || {
            let answer = match self.stdin.write_all(line.as_bytes()) {
                Ok(()) => self.read_line(),
                Err(e) => format!("error: client gone: {e}"),
            };
            (self, answer)
        })
        .await
    }

    fn read_line(&mut self) -> String {
        let mut line = String::new();
        let _ = self.stdout.read_line(&mut line);
        line.trim_end().to_string()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 1, 1, last)
}

/// The local endpoint a pod `10.1.1.<last>` on `port_no` is.
pub fn endpoint(last: u8, port_no: u32) -> LocalEndpoint {
    LocalEndpoint {
        port_no,
        mac: MacAddr([2, 2, 10, 1, 1, last]),
        vlan: VLAN,
        ipv4: Some(ip(last)),
        ipv6: None,
        epg: 0,
        epg_vlan: 0,
        dscp: 0,
        bandwidth: None,
    }
}

/// A pod `10.1.1.<last>/24` on `br0` (VLAN 10 on a VLAN bridge) that reaches the VIP
/// on-link, added to the agent as a local endpoint.
pub async fn attach(
    ovs: &Ovs,
    agent: &AgentHandle,
    kind: BridgeKind,
    last: u8,
) -> (Pod, LocalEndpoint) {
    let pod = Pod::attach(
        ovs,
        "br0",
        &PodOptions {
            ip: format!("{}/24", ip(last)),
            mac: Some(MacAddr([2, 2, 10, 1, 1, last]).to_string()),
            gateway: None,
            vlan: (kind == BridgeKind::Vlan).then_some(VLAN),
        },
    )
    .unwrap();
    super::disable_tx_offload(&pod);
    // The VIP is off the pods' subnet: reach it on-link, so the client ARPs for it.
    pod.exec(&["ip", "route", "add", "10.254.0.0/16", "dev", "eth0"])
        .unwrap();
    hairpin_neighbour(&pod, false);
    let ep = endpoint(last, ofport(ovs, pod.port_name()).await);
    agent.add_local_endpoint(ep.clone()).await.unwrap();
    (pod, ep)
}

/// The service flows (tables 3 and 6 without their misses) on the bridge.
pub async fn service_flows_on_bridge(ovs: &Ovs) -> Vec<String> {
    dumped_flows(ovs, "br0")
        .await
        .into_iter()
        .filter(|l| {
            (l.starts_with("table=3,") || l.starts_with("table=6,")) && !l.contains("priority=0 ")
        })
        .collect()
}

pub async fn service_flows_of_agent(agent: &AgentHandle) -> Vec<String> {
    let (flows, _) = agent.installed_flows().await.unwrap();
    flows
        .into_iter()
        .filter(|l| l.starts_with("table=3,") || l.starts_with("table=6,"))
        .collect()
}

/// `80/tcp → 8080`, `53/udp → 5353` on the VIP.
pub fn spec() -> ServiceSpec {
    ServiceSpec {
        affinity_timeout: None,
        vip6: None,
        vip: VIP.parse().unwrap(),
        ports: vec![
            ServicePort {
                protocol: ServiceProtocol::Tcp,
                svc_port: 80,
                prov_port: 8080,
            },
            ServicePort {
                protocol: ServiceProtocol::Udp,
                svc_port: 53,
                prov_port: 5353,
            },
        ],
    }
}

/// True when a tool the service tests need is missing (skip, or fail under `CI=true`).
pub fn tools_missing(test: &str) -> bool {
    super::missing_tool(test, "ethtool", "ethtool")
        || super::missing_tool(test, "python3", "python3")
}

/// What netplugin gives every pod for hairpin connections (a pod reaching a service balanced
/// to itself): the hairpin source as a static neighbour of `eth0` (IPv4, and IPv6 with
/// `ipv6`), so the pod's replies to it leave whatever its routes.
pub fn hairpin_neighbour(pod: &Pod, ipv6: bool) {
    use ofnet::service::flows::{HAIRPIN_SOURCE, HAIRPIN_SOURCE6, hairpin_mac};
    let mac = ofnet::model::MacAddr(hairpin_mac()).to_string();
    let mut sources = vec![("-4", HAIRPIN_SOURCE.to_string())];
    if ipv6 {
        sources.push(("-6", HAIRPIN_SOURCE6.to_string()));
    }
    for (family, source) in sources {
        pod.exec(&["ip", family, "route", "add", &source, "dev", "eth0"])
            .unwrap();
        pod.exec(&[
            "ip",
            family,
            "neigh",
            "replace",
            &source,
            "lladdr",
            &mac,
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])
        .unwrap();
    }
}
