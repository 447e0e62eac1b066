//! Shared helpers of the integration tests: connecting an agent to a sandboxed OVS bridge,
//! waiting for it to converge, and running blocking commands (ping, nc) off the actix thread
//! so the controller keeps answering ARP meanwhile.
#![allow(dead_code, clippy::unwrap_used)]

pub mod netpol;
pub mod services;
pub mod vxlan_hosts;

use ofctrl::Listener;
use ofnet::{AgentConfig, AgentHandle, BridgeKind};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use testbed::{Datapath, Netns, Ovs, OvsOptions};

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// Create `bridge` (secure fail mode, OpenFlow 1.3 only) and point it at the agent through a
/// unix socket in the OVS run directory (OVS in a namespace cannot reach our loopback).
/// An emulated host: a namespace running its own OVS (userspace datapath) with bridge `br0`,
/// driven by an agent that is connected and in sync. Fields drop in declaration order:
/// the controller first, the namespace last.
pub struct Host {
    pub listener: Listener,
    pub agent: AgentHandle,
    pub ovs: Ovs,
    pub netns: Netns,
}

impl Host {
    /// A VLAN agent with the default configuration.
    pub async fn vlan() -> Host {
        Host::start(AgentConfig::new(BridgeKind::Vlan, "br0")).await
    }

    /// An agent with `config` (whose bridge must be `br0`).
    pub async fn start(config: AgentConfig) -> Host {
        let netns = Netns::new("h").unwrap();
        let ovs = Ovs::start(OvsOptions {
            netns: Some(&netns),
            datapath: Datapath::Netdev,
        })
        .unwrap();
        ovs.add_bridge("br0").unwrap();
        let agent = AgentHandle::start(config);
        let listener = connect(&ovs, "br0", &agent).await;
        Host {
            listener,
            agent,
            ovs,
            netns,
        }
    }
}

pub async fn connect(ovs: &Ovs, bridge: &str, agent: &AgentHandle) -> Listener {
    let path: PathBuf = ovs.run_dir().join(format!("{bridge}.ctl.sock"));
    let listener = agent.listen_unix(&path).await.unwrap();
    let target = format!("unix:{}", path.display());
    let (ovs_br, br) = (ovs.db_target(), bridge.to_string());
    blocking(move || {
        testbed::run(&[
            "ovs-vsctl",
            &format!("--db={ovs_br}"),
            "--timeout=30",
            "set",
            "bridge",
            &br,
            "fail_mode=secure",
            "protocols=OpenFlow13",
            "--",
            "set-controller",
            &br,
            &target,
        ])
        .unwrap();
    })
    .await;
    wait_synced(agent).await;
    listener
}

/// Wait until the switch holds exactly the agent's desired state.
pub async fn wait_synced(agent: &AgentHandle) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if agent
            .bridge()
            .status()
            .await
            .is_some_and(|s| s.synced && s.dpid.is_some())
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "switch never connected and synced"
        );
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Run a blocking closure on the blocking pool.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    actix_rt::task::spawn_blocking(f).await.unwrap()
}

/// `ping` from namespace `ns`: how many of `count` echo requests were answered.
pub async fn ping(ns: &str, dst: &str, count: u32) -> u32 {
    let (ns, dst) = (ns.to_string(), dst.to_string());
    blocking(move || {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns, "ping", "-n", "-q", "-c"])
            .arg(count.to_string())
            .args(["-i", "0.2", "-W", "1", &dst])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find(|l| l.contains("packets transmitted"))
            .and_then(|l| l.split(',').nth(1))
            .and_then(|p| p.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    })
    .await
}

/// True if a TCP connection from `ns` to `dst:port` opens within 2 s.
pub async fn tcp_connects(ns: &str, dst: &str, port: u16) -> bool {
    let (ns, dst) = (ns.to_string(), dst.to_string());
    blocking(move || {
        Command::new("ip")
            .args(["netns", "exec", &ns, "nc", "-z", "-w", "2", &dst])
            .arg(port.to_string())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    })
    .await
}

/// A TCP listener (`nc -lk`) in a namespace, killed on drop.
pub struct TcpServer(std::process::Child);

impl TcpServer {
    pub fn start(ns: &str, port: u16) -> TcpServer {
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "nc", "-lk"])
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        TcpServer(child)
    }
}

impl Drop for TcpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The bridge's flows as `ovs-ofctl dump-flows` shows them, normalized and sorted.
pub async fn dumped_flows(ovs: &Ovs, bridge: &str) -> Vec<String> {
    ofnet::text::sorted(
        ovs.dump_flows(bridge)
            .unwrap()
            .iter()
            .map(|f| f.normalized())
            .collect(),
    )
}

/// The OpenFlow port of an interface, waiting for OVS to assign it.
pub async fn ofport(ovs: &Ovs, interface: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(p) = ovs.ofport(interface)
            && p > 0
        {
            return p;
        }
        assert!(Instant::now() < deadline, "no ofport for {interface}");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Capture up to `count` packets matching `filter` on `iface` in namespace `ns` (tcpdump -e
/// -v, at most `secs` seconds). Start it, then cause the traffic, then await the returned
/// handle for what tcpdump printed.
pub async fn capture(
    ns: &str,
    iface: &str,
    filter: &str,
    count: u32,
    secs: u32,
) -> actix_rt::task::JoinHandle<String> {
    let (ns, iface, filter) = (ns.to_string(), iface.to_string(), filter.to_string());
    let handle = actix_rt::task::spawn_blocking(move || {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns, "timeout"])
            .arg(secs.to_string())
            .args(["tcpdump", "-l", "-n", "-e", "-v", "-i", &iface, "-c"])
            .arg(count.to_string())
            .arg(&filter)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    // Give tcpdump time to open the capture.
    actix_rt::time::sleep(Duration::from_millis(700)).await;
    handle
}

/// Capture `count` ICMP echo requests arriving at a pod's `eth0` (see [`capture`]).
pub async fn capture_echo_requests(ns: &str, count: u32) -> actix_rt::task::JoinHandle<String> {
    capture(ns, "eth0", "icmp and icmp[0] = 8", count, 10).await
}

/// True when `tool` is missing and the test should return: skips with a printed reason, or
/// fails under `CI=true` (the `testbed::require!` convention, for tools it does not list).
pub fn missing_tool(test: &str, tool: &str, package: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .any(|d| d.join(tool).is_file());
    !found
        && testbed::require::skip_or_fail(
            test,
            &format!("needs {tool} (apt-get install {package})"),
        )
}

/// Let the pod's kernel compute its own TCP/UDP checksums: the userspace datapath forwards a
/// veth's partially checksummed segments unchanged, and the receiver would drop them.
pub fn disable_tx_offload(pod: &testbed::Pod) {
    pod.exec(&["ethtool", "-K", "eth0", "tx", "off"]).unwrap();
}

/// Wait until the datapath's flow cache reflects the flow table: OVS applies a table change at
/// once, but flows already cached in the datapath are revalidated in the background.
pub fn settle(ovs: &Ovs) {
    ovs.appctl(&["revalidator/wait"]).unwrap();
}

/// Runs `probe` with the switch's revalidators paused (resumed after, also on failure).
pub async fn revalidators_paused<T>(ovs: &Ovs, probe: impl std::future::Future<Output = T>) -> T {
    struct Resume<'a>(&'a Ovs);
    impl Drop for Resume<'_> {
        fn drop(&mut self) {
            let _ = self.0.appctl(&["revalidator/resume"]);
        }
    }
    ovs.appctl(&["revalidator/pause"]).unwrap();
    let _resume = Resume(ovs);
    probe.await
}
