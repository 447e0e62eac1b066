//! Removing what an interrupted run left behind.
//!
//! Sandboxes clean up on drop, but a test process killed by a signal never drops anything.
//! Every sandbox object carries a recognisable name — directories contain
//! [`crate::names::DIR_MARKER`], namespaces start with [`crate::names::PREFIX`] — so this
//! module can find the leftovers without any state file.

use crate::names::{DIR_MARKER, PREFIX};
use crate::process::pid_alive;
use crate::run;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// What [`sweep`] found and removed.
#[derive(Debug, Default)]
pub struct Swept {
    pub processes: Vec<u32>,
    pub namespaces: Vec<String>,
    pub directories: Vec<String>,
}

/// Processes whose command line mentions a sandbox directory (etcd, ovsdb-server,
/// ovs-vswitchd started by this crate), except `skip`.
pub fn sandbox_processes(skip: &[u32]) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me && !skip.contains(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(DIR_MARKER))
                .unwrap_or(false)
        })
        .collect()
}

/// Namespaces named like this crate's.
pub fn sandbox_namespaces() -> Vec<String> {
    run(&["ip", "netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(PREFIX))
        .map(String::from)
        .collect()
}

/// Kill leftover sandbox processes, delete leftover namespaces and directories.
///
/// Only for when no test run is in progress: it cannot tell a leftover from a live sandbox.
pub fn sweep() -> Swept {
    let mut swept = Swept::default();
    for pid in sandbox_processes(&[]) {
        if let Ok(raw) = i32::try_from(pid) {
            let _ = kill(Pid::from_raw(raw), Signal::SIGKILL);
        }
        swept.processes.push(pid);
    }
    for _ in 0..50 {
        if swept.processes.iter().all(|p| !pid_alive(*p)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for ns in sandbox_namespaces() {
        if run(&["ip", "netns", "del", &ns]).is_ok() {
            swept.namespaces.push(ns);
        }
    }
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(DIR_MARKER) && std::fs::remove_dir_all(e.path()).is_ok() {
                swept.directories.push(name);
            }
        }
    }
    swept
}
