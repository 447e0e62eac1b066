//! A TCP port on loopback made silent for a while: iptables drops its packets both ways (the
//! connections stay open and resume when the rules go), to show that a path is the only one.

use crate::{Result, run};

/// Loopback TCP traffic to and from `port` is dropped until this is dropped.
pub struct SilencedPort {
    port: String,
}

/// The rule spec for one direction (`--dport` or `--sport`).
fn rule<'a>(direction: &'a str, port: &'a str) -> [&'a str; 9] {
    [
        "INPUT", "-i", "lo", "-p", "tcp", direction, port, "-j", "DROP",
    ]
}

impl SilencedPort {
    /// Drop loopback TCP packets to and from `port` (root; `iptables`).
    pub fn new(port: u16) -> Result<SilencedPort> {
        let silenced = SilencedPort {
            port: port.to_string(),
        };
        for direction in ["--dport", "--sport"] {
            let mut argv = vec!["iptables", "-I"];
            argv.extend(rule(direction, &silenced.port));
            run(&argv)?;
        }
        Ok(silenced)
    }
}

impl Drop for SilencedPort {
    fn drop(&mut self) {
        for direction in ["--dport", "--sport"] {
            let mut argv = vec!["iptables", "-D"];
            argv.extend(rule(direction, &self.port));
            let _ = run(&argv);
        }
    }
}
