//! A pod as the data plane sees it: a network namespace whose `eth0` is one end of a veth
//! pair, the other end being a port of an OVS bridge (in the OVS instance's namespace).

use crate::command::{command, show};
use crate::names::unique_name;
use crate::netns::Netns;
use crate::ovs::Ovs;
use crate::{Error, Result, run};

/// How to wire a pod.
#[derive(Debug, Clone, Default)]
pub struct PodOptions {
    /// Address with prefix length, e.g. `10.1.1.2/24`.
    pub ip: String,
    /// MAC address of the pod's `eth0`; the kernel picks one when `None`.
    pub mac: Option<String>,
    /// Default gateway inside the pod.
    pub gateway: Option<String>,
    /// VLAN tag of the OVS access port.
    pub vlan: Option<u16>,
}

/// A pod namespace attached to a bridge. Dropping it deletes the namespace (and with it the
/// veth pair) and the OVS port record.
pub struct Pod {
    ip: String,
    host_if: String,
    bridge: String,
    db_target: String,
    /// Set by [`Pod::detach`]: leave everything in place on drop.
    keep: bool,
    // Dropped after the port is removed.
    ns: Netns,
}

/// The outcome of a `ping` run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingStats {
    pub sent: u32,
    pub received: u32,
}

impl PingStats {
    pub fn all_answered(&self) -> bool {
        self.sent > 0 && self.sent == self.received
    }
}

impl Pod {
    /// Create the namespace and veth pair, configure `eth0`, and add the host end to `bridge`.
    pub fn attach(ovs: &Ovs, bridge: &str, options: &PodOptions) -> Result<Pod> {
        let ns = Netns::new("p")?;
        let host_if = unique_name("h");
        let host_ip = |args: &[&str]| -> Result<String> {
            let mut argv: Vec<&str> = vec!["ip"];
            if let Some(h) = ovs.netns() {
                argv.extend(["-n", h]);
            }
            argv.extend(args);
            run(&argv)
        };
        let peer = unique_name("c");
        host_ip(&[
            "link",
            "add",
            &host_if,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
            "netns",
            ns.name(),
        ])?;
        let pod = Pod {
            ip: options.ip.clone(),
            host_if: host_if.clone(),
            bridge: bridge.to_string(),
            db_target: ovs.db_target(),
            keep: false,
            ns,
        };
        pod.ns.exec(&["ip", "link", "set", &peer, "name", "eth0"])?;
        if let Some(mac) = &options.mac {
            pod.ns
                .exec(&["ip", "link", "set", "eth0", "address", mac])?;
        }
        pod.ns
            .exec(&["ip", "addr", "add", &options.ip, "dev", "eth0"])?;
        pod.ns.exec(&["ip", "link", "set", "eth0", "up"])?;
        if let Some(gw) = &options.gateway {
            pod.ns.exec(&["ip", "route", "add", "default", "via", gw])?;
        }
        host_ip(&["link", "set", &host_if, "up"])?;
        let mut add = vec!["add-port".to_string(), bridge.to_string(), host_if.clone()];
        if let Some(tag) = options.vlan {
            add.push(format!("tag={tag}"));
        }
        ovs.vsctl(&add)?;
        Ok(pod)
    }

    /// The pod's namespace.
    pub fn netns(&self) -> &Netns {
        &self.ns
    }

    /// The pod's address without prefix length.
    pub fn ip(&self) -> &str {
        self.ip.split('/').next().unwrap_or(&self.ip)
    }

    /// The host end of the veth pair (the OVS port name).
    pub fn port_name(&self) -> &str {
        &self.host_if
    }

    /// The MAC address of the pod's `eth0`.
    pub fn mac(&self) -> Result<String> {
        Ok(self
            .ns
            .exec(&["cat", "/sys/class/net/eth0/address"])?
            .trim()
            .to_string())
    }

    /// Leave the pod (namespace, veth, OVS port) in place after this value is gone; returns
    /// the namespace name.
    pub fn detach(mut self) -> String {
        self.keep = true;
        self.ns.keep();
        self.ns.name().to_string()
    }

    /// Run a command in the pod.
    pub fn exec<S: AsRef<str>>(&self, argv: &[S]) -> Result<String> {
        self.ns.exec(argv)
    }

    /// Send `count` echo requests, 0.2 s apart, each waiting at most 1 s for its answer.
    pub fn ping(&self, dst: &str, count: u32) -> Result<PingStats> {
        let count = count.to_string();
        let argv = self.ns.argv(&[
            "ping", "-n", "-q", "-c", &count, "-i", "0.2", "-W", "1", dst,
        ]);
        let out = command(&argv)?.output().map_err(|source| Error::Spawn {
            program: show(&argv),
            source,
        })?;
        parse_ping(&String::from_utf8_lossy(&out.stdout)).ok_or_else(|| Error::Command {
            command: show(&argv),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    /// True if every one of `count` pings to `dst` is answered.
    pub fn can_reach(&self, dst: &str, count: u32) -> Result<bool> {
        Ok(self.ping(dst, count)?.all_answered())
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        let _ = run(&[
            "ovs-vsctl",
            &format!("--db={}", self.db_target),
            "--timeout=5",
            "--if-exists",
            "del-port",
            &self.bridge,
            &self.host_if,
        ]);
    }
}

/// Read `N packets transmitted, M received` from ping's summary.
fn parse_ping(out: &str) -> Option<PingStats> {
    let line = out.lines().find(|l| l.contains("packets transmitted"))?;
    let mut nums = line
        .split(',')
        .filter_map(|part| part.split_whitespace().next()?.parse::<u32>().ok());
    Some(PingStats {
        sent: nums.next()?,
        received: nums.next()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_summary_is_parsed() {
        let out = "--- 10.0.0.2 ping statistics ---\n\
                   3 packets transmitted, 2 received, 33.3333% packet loss, time 404ms\n";
        assert_eq!(
            parse_ping(out),
            Some(PingStats {
                sent: 3,
                received: 2
            })
        );
        assert!(!parse_ping(out).unwrap().all_answered());
        assert_eq!(parse_ping("garbage"), None);
    }
}
