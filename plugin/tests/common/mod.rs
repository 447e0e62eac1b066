//! Shared helpers of the end-to-end tests: a [`Cluster`] of real processes (etcd, netmaster,
//! OVS in a host namespace, netplugin) and views of the host (links, OVS ports, flows,
//! netplugin's endpoints).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use testbed::demo::{Binaries, Cluster, http};

/// The directory cargo put this test binary's sibling executables in (`target/debug`).
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/e2e-<hash> → target/debug
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// netmaster, netctl, contivk8s and cnirun from the build, this crate's netplugin.
pub fn binaries() -> Binaries {
    let mut bins = match Binaries::in_dir(&bin_dir()) {
        Ok(b) => b,
        // `cargo test -p plugin` alone does not build the other crates' binaries.
        Err(_) => Binaries::build(false).expect("building netmaster, netctl and contivk8s"),
    };
    bins.netplugin = PathBuf::from(env!("CARGO_BIN_EXE_netplugin"));
    bins
}

pub fn cluster() -> Cluster {
    let _ = std::env::var("RUST_LOG");
    Cluster::start(binaries()).expect("starting the cluster")
}

/// Names of the links in the host namespace.
pub fn host_links(c: &Cluster) -> Vec<String> {
    c.host
        .exec(&["ip", "-o", "link", "show"])
        .unwrap()
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// Endpoint veths (`vvport*`) in the host namespace.
pub fn endpoint_veths(c: &Cluster) -> Vec<String> {
    host_links(c)
        .into_iter()
        .filter(|n| n.starts_with("vvport"))
        .collect()
}

/// Ports of a bridge.
pub fn ovs_ports(c: &Cluster, bridge: &str) -> Vec<String> {
    c.ovs
        .vsctl(&["list-ports", bridge])
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

pub const VXLAN_BRIDGE: &str = "contivVxlanBridge";
pub const VLAN_BRIDGE: &str = "contivVlanBridge";

/// Endpoint ports on both bridges.
pub fn endpoint_ports(c: &Cluster) -> Vec<String> {
    [VXLAN_BRIDGE, VLAN_BRIDGE]
        .iter()
        .flat_map(|b| ovs_ports(c, b))
        .filter(|p| p.starts_with("vvport"))
        .collect()
}

/// The flows of a bridge as text.
pub fn flows(c: &Cluster, bridge: &str) -> String {
    c.ovs.ofctl(&["dump-flows", bridge]).unwrap()
}

/// netplugin's local endpoints (`/inspect/endpoints`).
pub fn local_endpoints(c: &Cluster) -> serde_json::Map<String, Value> {
    let (status, body) = http("GET", &c.debug_addr, "/inspect/endpoints").unwrap();
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body)
        .unwrap()
        .as_object()
        .cloned()
        .unwrap()
}

/// `_uuid` of a Port and its Interface.
pub fn port_uuids(c: &Cluster, port: &str) -> (String, String) {
    let get = |table: &str| {
        c.ovs
            .vsctl(&["get", table, port, "_uuid"])
            .unwrap()
            .trim()
            .to_string()
    };
    (get("Port"), get("Interface"))
}

/// The OVS port of a pod's endpoint, from netplugin's endpoints.
pub fn pod_port(c: &Cluster, container: &str) -> String {
    local_endpoints(c)
        .values()
        .find(|e| e["oper"]["containerId"] == container)
        .map(|e| format!("v{}", e["oper"]["portName"].as_str().unwrap()))
        .unwrap_or_else(|| panic!("no endpoint for {container}"))
}

pub fn create_network(c: &Cluster, name: &str, encap: &str, subnet: &str, gateway: &str) {
    c.netctl(&[
        "net", "create", "-e", encap, "-s", subnet, "-g", gateway, name,
    ])
    .unwrap();
}

/// True if `from` gets an echo reply from `ip` within three one-packet attempts (the first
/// packet may wait for ARP through the controller on a loaded machine).
pub fn reaches(from: &testbed::demo::CniPod, ip: &str) -> bool {
    (0..3).any(|_| from.can_ping(ip, 1))
}

/// A TCP listener (`nc -lk`) in a pod, killed on drop.
pub struct Listener(std::process::Child);

impl Listener {
    pub fn start(pod: &testbed::demo::CniPod, port: u16) -> Listener {
        Listener::in_netns(&pod.netns, port)
    }

    /// A listener in any namespace (an emulated host's).
    pub fn in_netns(netns: &testbed::Netns, port: u16) -> Listener {
        let child = std::process::Command::new("ip")
            .args(["netns", "exec", netns.name(), "nc", "-lk"])
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Give nc a moment to bind before the first connection.
        std::thread::sleep(std::time::Duration::from_millis(200));
        Listener(child)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `from` opens a TCP connection to `ip:port` within 2 s (`nc -z`).
pub fn tcp_connects(from: &testbed::demo::CniPod, ip: &str, port: u16) -> bool {
    from.netns
        .exec(&["nc", "-z", "-w", "2", ip, &port.to_string()])
        .is_ok()
}

/// Ping `target` from namespace `netns` at 100 pps (`count` packets) while netplugin is
/// SIGKILLed `lead` after the first packet and started again 500 ms later; the ping's summary
/// line (`N packets transmitted, M received, …`). The ping runs in its own process from the
/// start, so the restart happens under it.
pub fn ping_across_netplugin_restart(
    c: &mut Cluster,
    netns: &str,
    target: &str,
    count: u32,
    lead: std::time::Duration,
) -> String {
    let pinger = std::process::Command::new("ip")
        .args([
            "netns", "exec", netns, "ping", "-n", "-q", "-i", "0.01", "-W", "1",
        ])
        .args(["-c", &count.to_string(), target])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(lead);
    c.kill_netplugin();
    std::thread::sleep(std::time::Duration::from_millis(500));
    c.start_netplugin().unwrap();
    let out = pinger.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_default()
        .to_string()
}
