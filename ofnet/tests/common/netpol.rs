//! NetworkPolicy test helpers: a server answering on several TCP and UDP ports (IPv4 and
//! IPv6), one-shot probes, and long-lived TCP/UDP sessions whose later packets show whether an
//! established connection still passes.

use super::blocking;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// Answers on every port in argv[2..] over TCP and UDP with argv[1] (its name), IPv4 and
/// IPv6; a TCP connection gets the name at once and again for every segment it sends.
const SERVER: &str = r#"
import socket, sys, threading
name = sys.argv[1].encode()
ports = [int(p) for p in sys.argv[2:]]
def udp(port):
    u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    u.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    u.bind(("::", port))
    while True:
        _, peer = u.recvfrom(2048)
        u.sendto(name, peer)
def serve(c):
    try:
        c.sendall(name)
        while c.recv(2048):
            c.sendall(name)
    except OSError:
        pass
    c.close()
def tcp(port):
    t = socket.socket(socket.AF_INET6)
    t.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("::", port))
    t.listen(64)
    while True:
        c, _ = t.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
for p in ports:
    threading.Thread(target=udp, args=(p,), daemon=True).start()
    threading.Thread(target=tcp, args=(p,), daemon=True).start()
threading.Event().wait()
"#;

/// One attempt per (proto, port) in argv[2..] (`tcp:80 udp:81 ...`) to host argv[1]; prints
/// per attempt the answer, or `-` (timeout, refusal, error). All attempts run in parallel.
const PROBE: &str = r#"
import socket, sys, threading
host = sys.argv[1]
family = socket.AF_INET6 if ":" in host else socket.AF_INET
targets = sys.argv[2:]
out = ["-"] * len(targets)
def one(i, t):
    proto, port = t.split(":")
    try:
        if proto == "tcp":
            s = socket.create_connection((host, int(port)), timeout=1.5)
        else:
            s = socket.socket(family, socket.SOCK_DGRAM)
            s.settimeout(1.5)
            s.connect((host, int(port)))
            s.send(b"hello")
        out[i] = s.recv(100).decode() or "-"
        s.close()
    except OSError:
        pass
ts = [threading.Thread(target=one, args=(i, t)) for i, t in enumerate(targets)]
for t in ts: t.start()
for t in ts: t.join()
print(" ".join(out))
"#;

/// A session to argv[2]:argv[3] over argv[1] (tcp or udp), kept open: for every line on
/// stdin sends it and prints the answer, or `-` when none came within 1.5 s.
const SESSION: &str = r#"
import socket, sys
proto, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
family = socket.AF_INET6 if ":" in host else socket.AF_INET
if proto == "tcp":
    s = socket.create_connection((host, port), timeout=1.5)
    try:
        s.recv(100)
    except OSError:
        pass
else:
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.settimeout(1.5)
    s.connect((host, port))
print("open", flush=True)
for line in sys.stdin:
    try:
        s.send(line.encode())
        print(s.recv(100).decode() or "-", flush=True)
    except OSError:
        print("-", flush=True)
"#;

/// A [`SERVER`] in a namespace, killed on drop.
pub struct Server(Child);

impl Server {
    pub fn start(ns: &str, name: &str, ports: &[u16]) -> Server {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, "python3", "-c", SERVER, name]);
        for p in ports {
            cmd.arg(p.to_string());
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Probe `host` from `ns` on each of `targets` (`"tcp:80"`, `"udp:81"`) at once: the answer
/// per target, `None` for nothing.
pub async fn probe(ns: &str, host: &str, targets: &[&str]) -> Vec<Option<String>> {
    let (ns, host) = (ns.to_string(), host.to_string());
    let targets: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
    blocking(move || {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns, "python3", "-c", PROBE, &host])
            .args(&targets)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let words: Vec<&str> = text.split_whitespace().collect();
        (0..targets.len())
            .map(|i| words.get(i).filter(|w| **w != "-").map(|w| w.to_string()))
            .collect()
    })
    .await
}

/// Which of `targets` answer from `host` (`true` = answered).
pub async fn reach(ns: &str, host: &str, targets: &[&str]) -> Vec<bool> {
    probe(ns, host, targets)
        .await
        .into_iter()
        .map(|a| a.is_some())
        .collect()
}

/// A long-lived TCP connection or UDP flow (one socket), open until dropped.
pub struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Session {
    /// Open it from `ns` to `host:port` over `proto` ("tcp" or "udp").
    pub async fn open(ns: &str, proto: &str, host: &str, port: u16) -> Session {
        let (ns, proto, host) = (ns.to_string(), proto.to_string(), host.to_string());
        blocking(move || {
            let mut child = Command::new("ip")
                .args([
                    "netns", "exec", &ns, "python3", "-c", SESSION, &proto, &host,
                ])
                .arg(port.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take().unwrap();
            let mut stdout = BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            let _ = stdout.read_line(&mut line);
            Session {
                child,
                stdin,
                stdout,
            }
        })
        .await
    }

    /// Send one message on the session: whether an answer came back.
    pub async fn answered(mut self) -> (Session, bool) {
        blocking(move || {
            let ok = self.stdin.write_all(b"ping\n").is_ok() && {
                let mut line = String::new();
                let _ = self.stdout.read_line(&mut line);
                let l = line.trim();
                !l.is_empty() && l != "-"
            };
            (self, ok)
        })
        .await
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A dual-stack pod on a VXLAN host: `<v4>/16` and `<v6>/64`, a local endpoint of the network
/// on local VLAN `vlan`.
pub async fn dual_stack_pod(
    host: &super::vxlan_hosts::VxlanHost,
    v4: std::net::Ipv4Addr,
    v6: std::net::Ipv6Addr,
    vlan: u16,
) -> testbed::Pod {
    let pod = testbed::Pod::attach(
        &host.ovs,
        "br0",
        &testbed::PodOptions {
            ip: format!("{v4}/16"),
            mac: Some(super::vxlan_hosts::mac(v4).to_string()),
            gateway: None,
            vlan: None,
        },
    )
    .unwrap();
    pod.exec(&[
        "ip",
        "-6",
        "addr",
        "add",
        &format!("{v6}/64"),
        "dev",
        "eth0",
        "nodad",
    ])
    .unwrap();
    super::disable_tx_offload(&pod);
    host.agent
        .add_local_endpoint(ofnet::LocalEndpoint {
            port_no: super::ofport(&host.ovs, pod.port_name()).await,
            mac: super::vxlan_hosts::mac(v4),
            vlan,
            ipv4: Some(v4),
            ipv6: Some(v6),
            epg: 0,
            epg_vlan: 0,
            dscp: 0,
            bandwidth: None,
        })
        .await
        .unwrap();
    pod
}

/// True when python3 or ethtool is missing and the test should return (see
/// [`super::missing_tool`]).
pub fn tools_missing(test: &str) -> bool {
    super::missing_tool(test, "python3", "python3")
        || super::missing_tool(test, "ethtool", "ethtool")
}
