//! The BGP speaker of this host: a GoBGP daemon (`gobgpd`) in the host's network namespace,
//! driven through its gRPC API with GoBGP's own client (`gobgp -j`, JSON out).
//!
//! Contract:
//! - [`Speaker::ensure`] leaves exactly one `gobgpd` running with the configuration asked for:
//!   a daemon already running with that configuration (netplugin restarted) is adopted, so
//!   the BGP session and the router's routes survive a netplugin restart; otherwise the old
//!   one is stopped and a new one started (graceful restart on, so the router keeps the routes
//!   through a speaker restart too).
//! - The daemon outlives netplugin (like the flows); [`Speaker::stop`] ends it (the Bgp
//!   object was deleted).
//! - Announcements are idempotent; [`Speaker::rib`] tells this host's paths from learned ones.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ipnet::Ipv4Net;
use serde_json::Value;

/// The gRPC port of the speaker (the reference's), on the loopback of the host namespace.
pub const API_PORT: u16 = 50051;
/// The BGP port.
pub const BGP_PORT: u16 = 179;
/// Seconds the router keeps this host's routes while the speaker restarts.
pub const RESTART_TIME: u32 = 120;

/// What the speaker runs with (from the host's Bgp object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeakerConfig {
    /// The router address and its prefix (`routerip`).
    pub router: Ipv4Net,
    pub local_as: u32,
    pub neighbor_as: u32,
    pub neighbor: Option<Ipv4Addr>,
}

impl SpeakerConfig {
    /// `gobgpd`'s TOML configuration.
    pub fn toml(&self) -> String {
        let ip = self.router.addr();
        let mut out = format!(
            "# Written by netplugin from this host's Bgp object.\n\
             [global.config]\n  as = {}\n  router-id = \"{ip}\"\n  port = {BGP_PORT}\n  local-address-list = [\"{ip}\"]\n",
            self.local_as
        );
        if let Some(n) = self.neighbor {
            out.push_str(&format!(
                "\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = \"{n}\"\n    peer-as = {}\n\
                 \x20 [neighbors.transport.config]\n    local-address = \"{ip}\"\n\
                 \x20 [neighbors.timers.config]\n    connect-retry = 5\n    hold-time = 9\n    keepalive-interval = 3\n\
                 \x20 [neighbors.graceful-restart.config]\n    enabled = true\n    restart-time = {RESTART_TIME}\n\
                 \x20 [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = \"ipv4-unicast\"\n\
                 \x20   [neighbors.afi-safis.mp-graceful-restart.config]\n      enabled = true\n",
                self.neighbor_as
            ));
        }
        out
    }
}

/// Why the speaker could not do something.
#[derive(Debug, thiserror::Error)]
pub enum SpeakerError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot run {program}: {source} (install the gobgpd package)")]
    Spawn {
        program: &'static str,
        source: std::io::Error,
    },
    #[error("gobgp {args}: {message}")]
    Api { args: String, message: String },
    #[error("gobgpd did not answer on its API within {0:?} (log: {1})")]
    NotReady(Duration, PathBuf),
}

/// A path of the speaker's RIB: best paths only.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rib {
    /// This host's announcements.
    pub local: BTreeSet<Ipv4Net>,
    /// Learned from a neighbor: prefix → next hop.
    pub learned: BTreeMap<Ipv4Net, Ipv4Addr>,
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Speaker {
    dir: PathBuf,
    netns: Option<PathBuf>,
}

impl Speaker {
    /// A speaker keeping its files in `dir`, running in namespace `netns` (`None`: ours).
    pub fn new(dir: PathBuf, netns: Option<PathBuf>) -> Speaker {
        Speaker { dir, netns }
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("gobgpd.toml")
    }

    fn pid_path(&self) -> PathBuf {
        self.dir.join("gobgpd.pid")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("gobgpd.log")
    }

    /// A command running `program` in the host namespace.
    fn command(&self, program: &str) -> tokio::process::Command {
        match &self.netns {
            Some(ns) => {
                let mut c = tokio::process::Command::new("nsenter");
                c.arg(format!("--net={}", ns.display())).arg(program);
                c
            }
            None => tokio::process::Command::new(program),
        }
    }

    /// The running daemon's pid, if the pid file names a live `gobgpd`.
    fn running_pid(&self) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(self.pid_path())
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        String::from_utf8_lossy(&cmdline)
            .contains("gobgpd")
            .then_some(pid)
    }

    /// Make `gobgpd` run with `config` (see the module documentation). Returns true if it was
    /// (re)started, false if a running one was adopted.
    pub async fn ensure(&self, config: &SpeakerConfig) -> Result<bool, SpeakerError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SpeakerError::Io { path, source }
        };
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let wanted = config.toml();
        let have = std::fs::read_to_string(self.config_path()).unwrap_or_default();
        if have == wanted && self.running_pid().is_some() && self.ready().await {
            return Ok(false);
        }
        self.stop().await;
        std::fs::write(self.config_path(), &wanted).map_err(io(&self.config_path()))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(io(&self.log_path()))?;
        let log2 = log.try_clone().map_err(io(&self.log_path()))?;
        let mut cmd = self.command("gobgpd");
        cmd.arg("-f")
            .arg(self.config_path())
            .args(["-p", "--pprof-disable", "--api-hosts"])
            .arg(format!("127.0.0.1:{API_PORT}"))
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(log2)
            // Its own process group: a signal to netplugin's group does not reach it.
            .process_group(0)
            .kill_on_drop(false);
        let child = cmd.spawn().map_err(|source| SpeakerError::Spawn {
            program: "gobgpd",
            source,
        })?;
        // With nsenter, the pid is nsenter's, which execs gobgpd: the same process.
        if let Some(pid) = child.id() {
            std::fs::write(self.pid_path(), pid.to_string()).map_err(io(&self.pid_path()))?;
        }
        let limit = Duration::from_secs(10);
        let start = Instant::now();
        while !self.ready().await {
            if start.elapsed() > limit {
                return Err(SpeakerError::NotReady(limit, self.log_path()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(true)
    }

    /// True when the daemon answers on its API.
    pub async fn ready(&self) -> bool {
        self.gobgp(&["global"]).await.is_ok()
    }

    /// Stop the daemon, if one runs.
    pub async fn stop(&self) {
        let Some(pid) = self.running_pid() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(pid);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        for _ in 0..50 {
            if nix::sys::signal::kill(pid, None).is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = std::fs::remove_file(self.pid_path());
    }

    /// Run `gobgp -j <args>` against the daemon; its standard output.
    async fn gobgp(&self, args: &[&str]) -> Result<String, SpeakerError> {
        let out = self
            .command("gobgp")
            .args(["-p", &API_PORT.to_string(), "-j"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|source| SpeakerError::Spawn {
                program: "gobgp",
                source,
            })?;
        if !out.status.success() {
            let mut message = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if message.is_empty() {
                message = String::from_utf8_lossy(&out.stdout).trim().to_string();
            }
            return Err(SpeakerError::Api {
                args: args.join(" "),
                message,
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Announce `prefix` with this host's router address as next hop.
    pub async fn announce(&self, prefix: Ipv4Net, next_hop: Ipv4Addr) -> Result<(), SpeakerError> {
        let (p, nh) = (prefix.to_string(), next_hop.to_string());
        self.gobgp(&["global", "rib", "add", &p, "nexthop", &nh, "-a", "ipv4"])
            .await
            .map(|_| ())
    }

    /// Withdraw this host's announcement of `prefix`.
    pub async fn withdraw(&self, prefix: Ipv4Net) -> Result<(), SpeakerError> {
        let p = prefix.to_string();
        self.gobgp(&["global", "rib", "del", &p, "-a", "ipv4"])
            .await
            .map(|_| ())
    }

    /// The best paths of the IPv4 RIB.
    pub async fn rib(&self) -> Result<Rib, SpeakerError> {
        let text = self.gobgp(&["global", "rib", "-a", "ipv4"]).await?;
        Ok(parse_rib(&text))
    }

    /// The neighbors as GoBGP describes them.
    pub async fn neighbors(&self) -> Result<Value, SpeakerError> {
        let text = self.gobgp(&["neighbor"]).await?;
        serde_json::from_str(&text).map_err(|e| SpeakerError::Api {
            args: "neighbor".into(),
            message: format!("unexpected output: {e}"),
        })
    }
}

/// Best paths from `gobgp -j global rib` (`{"prefix": [path, ...]}`): a path with a
/// `neighbor-ip` was learned (its next hop is the `type 3` attribute), one without is ours.
pub fn parse_rib(text: &str) -> Rib {
    let mut rib = Rib::default();
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return rib;
    };
    for (prefix, paths) in map {
        let Ok(prefix) = prefix.parse::<Ipv4Net>() else {
            continue;
        };
        let Some(best) = paths
            .as_array()
            .and_then(|p| p.iter().find(|p| p["best"] == Value::Bool(true)))
        else {
            continue;
        };
        let neighbor = best["neighbor-ip"].as_str().unwrap_or_default();
        if neighbor.is_empty() {
            rib.local.insert(prefix);
            continue;
        }
        let next_hop = best["attrs"].as_array().and_then(|attrs| {
            attrs
                .iter()
                .find(|a| a["type"] == 3)
                .and_then(|a| a["nexthop"].as_str())
                .and_then(|n| n.parse::<Ipv4Addr>().ok())
        });
        if let Some(nh) = next_hop {
            rib.learned.insert(prefix, nh);
        }
    }
    rib
}

/// GoBGP's session state number as a name (`ESTABLISHED`, `ACTIVE`, ...).
pub fn session_state_name(state: &Value) -> String {
    match state {
        Value::Number(n) => match n.as_u64() {
            Some(1) => "IDLE",
            Some(2) => "CONNECT",
            Some(3) => "ACTIVE",
            Some(4) => "OPENSENT",
            Some(5) => "OPENCONFIRM",
            Some(6) => "ESTABLISHED",
            _ => "UNKNOWN",
        }
        .to_string(),
        Value::String(s) => s.trim_start_matches("SESSION_STATE_").to_ascii_uppercase(),
        _ => "UNKNOWN".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_and_learned_best_paths_are_told_apart() {
        let text = r#"{"10.1.1.2/32":[{"nlri":{"prefix":"10.1.1.2/32"},"best":true,"attrs":[{"type":1,"value":2},{"type":3,"nexthop":"50.1.1.2"}],"stale":false}],
          "192.0.2.0/24":[{"nlri":{"prefix":"192.0.2.0/24"},"best":true,"attrs":[{"type":1,"value":0},{"type":3,"nexthop":"50.1.1.200"}],"neighbor-ip":"50.1.1.200"}],
          "198.51.100.0/24":[{"best":false,"attrs":[{"type":3,"nexthop":"50.1.1.9"}],"neighbor-ip":"50.1.1.9"}]}"#;
        let rib = parse_rib(text);
        assert_eq!(
            rib.local,
            ["10.1.1.2/32".parse().unwrap()].into_iter().collect()
        );
        assert_eq!(
            rib.learned,
            [(
                "192.0.2.0/24".parse().unwrap(),
                Ipv4Addr::new(50, 1, 1, 200)
            )]
            .into_iter()
            .collect()
        );
        assert_eq!(parse_rib("garbage"), Rib::default());
        assert_eq!(parse_rib("{}"), Rib::default());
    }

    #[test]
    fn the_configuration_names_the_router_address_as_and_neighbor() {
        let c = SpeakerConfig {
            router: "50.1.1.2/24".parse().unwrap(),
            local_as: 65001,
            neighbor_as: 65000,
            neighbor: Some(Ipv4Addr::new(50, 1, 1, 200)),
        };
        let t = c.toml();
        for want in [
            "as = 65001",
            "router-id = \"50.1.1.2\"",
            "neighbor-address = \"50.1.1.200\"",
            "peer-as = 65000",
            "restart-time = 120",
        ] {
            assert!(t.contains(want), "{want} in\n{t}");
        }
        assert_eq!(session_state_name(&Value::from(6)), "ESTABLISHED");
        assert_eq!(session_state_name(&Value::from(3)), "ACTIVE");
    }
}
