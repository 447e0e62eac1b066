//! What a test needs from the machine, and what happens when it is missing.
//!
//! Locally a test whose needs are not met is skipped with a printed reason (so `cargo test` as
//! an ordinary user still runs the unit tests). Under `CI=true` the same situation is a
//! failure: CI installs everything, so a missing piece there is a broken set-up, not a reason
//! to pass silently.

use std::path::Path;

/// One thing a test can need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Effective uid 0 (namespaces, veth pairs, OVS in a namespace).
    Root,
    /// `ovsdb-server`, `ovs-vswitchd`, `ovs-vsctl`, `ovs-ofctl`, `ovsdb-tool` and the schema.
    Ovs,
    /// Debian's `etcd` server.
    Etcd,
    /// `ip` from iproute2.
    Ip,
    /// `ping` from iputils.
    Ping,
    /// `nc` (netcat-openbsd).
    Netcat,
    /// `etcdctl` (etcd-client), to write records another host would have written.
    Etcdctl,
    /// `iperf3`, to measure a rate limit with traffic.
    Iperf3,
    /// `prometheus` (Debian's package), the real scraper of the metrics test.
    Prometheus,
    /// `ethtool`, to read interface features.
    Ethtool,
    /// `dockerd` and `docker` (Debian's docker.io) and the static busybox for local images.
    Docker,
    /// `iptables`, to silence a port for a while.
    Iptables,
    /// `fincore` (util-linux-extra), to see what of a file the page cache holds.
    Fincore,
}

const OVS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

impl Need {
    /// `None` when satisfied, otherwise why not and how to fix it.
    pub fn missing(self) -> Option<String> {
        let tools: &[&str] = match self {
            Need::Root => {
                return (!nix::unistd::geteuid().is_root())
                    .then(|| "needs root (network namespaces, veth pairs)".to_string());
            }
            Need::Ovs => &[
                "ovsdb-server",
                "ovs-vswitchd",
                "ovs-vsctl",
                "ovs-ofctl",
                "ovsdb-tool",
            ],
            Need::Etcd => &["etcd"],
            Need::Ip => &["ip"],
            Need::Ping => &["ping"],
            Need::Netcat => &["nc"],
            Need::Etcdctl => &["etcdctl"],
            Need::Iperf3 => &["iperf3"],
            Need::Prometheus => &["prometheus"],
            Need::Ethtool => &["ethtool"],
            Need::Docker => &["dockerd", "docker", "busybox"],
            Need::Iptables => &["iptables"],
            Need::Fincore => &["fincore"],
        };
        let package = match self {
            Need::Root => "",
            Need::Ovs => "openvswitch-switch",
            Need::Etcd => "etcd-server",
            Need::Ip => "iproute2",
            Need::Ping => "iputils-ping",
            Need::Netcat => "netcat-openbsd",
            Need::Etcdctl => "etcd-client",
            Need::Iperf3 => "iperf3",
            Need::Prometheus => "prometheus",
            Need::Ethtool => "ethtool",
            Need::Docker => "docker.io busybox-static",
            Need::Iptables => "iptables",
            Need::Fincore => "util-linux-extra",
        };
        let absent: Vec<&str> = tools.iter().copied().filter(|t| !on_path(t)).collect();
        if !absent.is_empty() {
            return Some(format!(
                "needs {} (apt-get install {package})",
                absent.join(", ")
            ));
        }
        if self == Need::Ovs && !Path::new(OVS_SCHEMA).exists() {
            return Some(format!("needs {OVS_SCHEMA} (apt-get install {package})"));
        }
        None
    }
}

/// Check every need; `Err` lists all that are missing.
pub fn check(needs: &[Need]) -> Result<(), String> {
    let missing: Vec<String> = needs.iter().filter_map(|n| n.missing()).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

/// True when running under CI (`CI=true`, as CI systems set it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Handle unmet needs: panic under CI, otherwise print why the test is skipped.
///
/// Returns `true` when the caller should return early (skip).
pub fn skip_or_fail(test: &str, why: &str) -> bool {
    if under_ci() {
        panic!("{test}: requirement missing under CI=true: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
    true
}

/// Skip (locally) or fail (under `CI=true`) the current test unless every need is met.
///
/// ```ignore
/// #[test]
/// fn bridge_forwards() {
///     testbed::require!(Root, Ovs, Ping);
///     // ...
/// }
/// ```
#[macro_export]
macro_rules! require {
    ($($need:ident),+ $(,)?) => {
        if let Err(why) = $crate::require::check(&[$($crate::Need::$need),+]) {
            if $crate::require::skip_or_fail(module_path!(), &why) {
                return;
            }
        }
    };
}

fn on_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .any(|dir| dir.join(tool).is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_that_does_not_exist_is_missing() {
        assert!(!on_path("surely-not-a-real-tool-4711"));
        assert!(on_path("sh"));
    }

    #[test]
    fn check_lists_what_is_missing() {
        // `sh` is always there; Root depends on the user running the tests.
        let root = nix::unistd::geteuid().is_root();
        assert_eq!(check(&[Need::Root]).is_ok(), root);
    }
}
