//! The demo cluster `testbed up` brings up, and the record `testbed down` tears down.
//!
//! Today: etcd, one emulated host (a network namespace running its own Open vSwitch with the
//! userspace datapath) with the bridge `contivVxlanBridge`, and two pods attached to it that
//! ping each other. The control plane joins as netmaster and netplugin land.

use crate::{Datapath, Etcd, Netns, Ovs, OvsOptions, Pod, PodOptions, Result, pid_alive, run};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::PathBuf;

/// The bridge name Contiv uses for VXLAN networks.
pub const BRIDGE: &str = "contivVxlanBridge";

/// The running demo, owning every part (dropping it tears everything down).
pub struct Demo {
    pods: Vec<Pod>,
    ovs: Ovs,
    host: Netns,
    etcd: Etcd,
}

/// What `up` started, as recorded for `down` and `status`.
#[derive(Debug, Serialize, Deserialize)]
pub struct DemoState {
    pub etcd_url: String,
    /// Every process started, to be stopped by pid.
    pub pids: Vec<u32>,
    /// Namespaces: the host first, then the pods.
    pub namespaces: Vec<String>,
    pub pods: Vec<PodState>,
    /// Sandbox directories to remove.
    pub directories: Vec<PathBuf>,
    pub ovsdb: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct PodState {
    pub netns: String,
    pub ip: String,
    pub port: String,
}

impl Demo {
    /// Start everything and check that the two pods reach each other.
    pub fn up() -> Result<Demo> {
        let etcd = Etcd::start()?;
        let host = Netns::new("hst")?;
        let ovs = Ovs::start(OvsOptions {
            netns: Some(&host),
            datapath: Datapath::Netdev,
        })?;
        ovs.add_bridge(BRIDGE)?;
        let mut pods = Vec::new();
        for ip in ["10.36.0.2/24", "10.36.0.3/24"] {
            pods.push(Pod::attach(
                &ovs,
                BRIDGE,
                &PodOptions {
                    ip: ip.into(),
                    ..Default::default()
                },
            )?);
        }
        Ok(Demo {
            pods,
            ovs,
            host,
            etcd,
        })
    }

    /// A human summary: where things are and how to reach them.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "etcd:      {}", self.etcd.client_url());
        let _ = writeln!(
            s,
            "host:      namespace {} running OVS (ovsdb {})",
            self.host.name(),
            self.ovs.db_target()
        );
        for pod in &self.pods {
            let _ = writeln!(
                s,
                "pod:       {} in namespace {} (port {})",
                pod.ip(),
                pod.netns().name(),
                pod.port_name()
            );
        }
        if let [a, b, ..] = self.pods.as_slice() {
            let reach = a.ping(b.ip(), 2).map(|p| p.all_answered()).unwrap_or(false);
            let _ = writeln!(
                s,
                "ping {} -> {}: {}",
                a.ip(),
                b.ip(),
                if reach { "ok" } else { "FAILED" }
            );
            let _ = writeln!(
                s,
                "try:       ip netns exec {} ping {}",
                a.netns().name(),
                b.ip()
            );
        }
        s
    }

    /// Leave everything running and return the record needed to tear it down later.
    pub fn detach(self) -> DemoState {
        let Demo {
            pods,
            ovs,
            host,
            etcd,
        } = self;
        let ovsdb = ovs.db_target();
        let pods: Vec<PodState> = pods
            .into_iter()
            .map(|p| {
                let state = PodState {
                    netns: p.netns().name().to_string(),
                    ip: p.ip().to_string(),
                    port: p.port_name().to_string(),
                };
                p.detach();
                state
            })
            .collect();
        let etcd_url = etcd.client_url();
        let (etcd_pid, etcd_dir) = etcd.detach();
        let (ovs_pids, ovs_dir) = ovs.detach();
        let mut namespaces = vec![host.detach()];
        namespaces.extend(pods.iter().map(|p| p.netns.clone()));
        DemoState {
            etcd_url,
            pids: etcd_pid.into_iter().chain(ovs_pids).collect(),
            namespaces,
            pods,
            directories: vec![etcd_dir, ovs_dir],
            ovsdb,
        }
    }
}

impl DemoState {
    /// Stop every recorded process and remove namespaces and directories. Best effort: a part
    /// already gone is not an error.
    pub fn tear_down(&self) {
        for pid in &self.pids {
            if let Ok(raw) = i32::try_from(*pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(raw),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        for _ in 0..250 {
            if self.pids.iter().all(|p| !pid_alive(*p)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for pid in self.pids.iter().filter(|p| pid_alive(**p)) {
            if let Ok(raw) = i32::try_from(*pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(raw),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        for ns in self.namespaces.iter().rev() {
            let _ = run(&["ip", "netns", "del", ns]);
        }
        for dir in &self.directories {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Which recorded parts are alive.
    pub fn status(&self) -> String {
        let mut s = format!("etcd: {}\novsdb: {}\n", self.etcd_url, self.ovsdb);
        for pid in &self.pids {
            let state = if pid_alive(*pid) { "running" } else { "gone" };
            let _ = writeln!(s, "pid {pid}: {state}");
        }
        for ns in &self.namespaces {
            let state = if Netns::exists(ns) { "present" } else { "gone" };
            let _ = writeln!(s, "namespace {ns}: {state}");
        }
        for pod in &self.pods {
            let _ = writeln!(s, "pod {} in {}", pod.ip, pod.netns);
        }
        s
    }
}
