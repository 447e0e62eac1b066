//! A private Open vSwitch: `ovsdb-server` and `ovs-vswitchd` with their own run directory,
//! database and unix sockets, optionally inside a network namespace.
//!
//! Open vSwitch runs in userspace here (no kernel module). Two `netdev` datapaths in one
//! namespace collide (both want the same tap devices), so a sandbox that moves packets runs in
//! a namespace of its own; one that only holds flows can use the `dummy` datapath anywhere.

use crate::command::{command, output};
use crate::names::{SandboxDir, temp_dir};
use crate::netns::Netns;
use crate::process::Daemon;
use crate::{Error, Result, run};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// `ovs-vsctl` waits for ovs-vswitchd to apply each change; never forever.
const VSCTL_TIMEOUT: &str = "--timeout=30";

/// Which datapath the bridges of a sandbox use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datapath {
    /// The userspace datapath: packets really move (veths, taps, tunnels).
    Netdev,
    /// A datapath that moves nothing; flows and ports are still real OpenFlow state.
    Dummy,
}

impl Datapath {
    fn as_ovs(self) -> &'static str {
        match self {
            Datapath::Netdev => "netdev",
            Datapath::Dummy => "dummy",
        }
    }
}

/// How to start an [`Ovs`].
#[derive(Debug, Clone, Copy)]
pub struct OvsOptions<'a> {
    /// Run both daemons inside this namespace (required for more than one `Netdev` instance).
    pub netns: Option<&'a Netns>,
    pub datapath: Datapath,
}

impl OvsOptions<'static> {
    /// A dummy-datapath instance in the current namespace.
    pub fn dummy() -> Self {
        OvsOptions {
            netns: None,
            datapath: Datapath::Dummy,
        }
    }
}

/// A running private Open vSwitch instance.
pub struct Ovs {
    db: Option<Daemon>,
    vswitchd: Option<Daemon>,
    netns: Option<String>,
    datapath: Datapath,
    // Declared last so the daemons are stopped before the directory goes away.
    dir: SandboxDir,
}

impl Ovs {
    /// Create a fresh database and start both daemons; returns once ovs-vswitchd answers.
    pub fn start(options: OvsOptions<'_>) -> Result<Ovs> {
        let dir = temp_dir("ovs")?;
        let db = dir.path().join("conf.db");
        run(&["ovsdb-tool", "create", &db.display().to_string(), SCHEMA])?;
        let mut ovs = Ovs {
            db: None,
            vswitchd: None,
            netns: options.netns.map(|n| n.name().to_string()),
            datapath: options.datapath,
            dir,
        };
        ovs.start_db()?;
        ovs.vsctl_no_wait(&["init"])?;
        ovs.start_vswitchd()?;
        Ok(ovs)
    }

    /// The OVSDB unix socket (RFC 7047 JSON-RPC).
    pub fn db_socket(&self) -> PathBuf {
        self.dir.path().join("db.sock")
    }

    /// The OVSDB target in OVS syntax, `unix:<path>`.
    pub fn db_target(&self) -> String {
        format!("unix:{}", self.db_socket().display())
    }

    /// The run directory (sockets, logs, pid files).
    pub fn run_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The namespace the daemons run in, if any.
    pub fn netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    /// The datapath type new bridges get.
    pub fn datapath(&self) -> Datapath {
        self.datapath
    }

    /// The OpenFlow management socket of a bridge, `unix:<rundir>/<bridge>.mgmt`.
    pub fn bridge_mgmt(&self, bridge: &str) -> String {
        format!(
            "unix:{}",
            self.dir.path().join(format!("{bridge}.mgmt")).display()
        )
    }

    /// Pids of the running daemons (ovsdb-server, ovs-vswitchd).
    pub fn pids(&self) -> Vec<u32> {
        [&self.db, &self.vswitchd]
            .into_iter()
            .filter_map(|d| d.as_ref().and_then(Daemon::pid))
            .collect()
    }

    /// Run `ovs-vsctl` against this instance (waits for ovs-vswitchd to apply the change).
    pub fn vsctl<S: AsRef<str>>(&self, args: &[S]) -> Result<String> {
        let mut argv = vec![
            "ovs-vsctl".to_string(),
            format!("--db={}", self.db_target()),
            VSCTL_TIMEOUT.to_string(),
        ];
        argv.extend(args.iter().map(|a| a.as_ref().to_string()));
        run(&argv)
    }

    fn vsctl_no_wait(&self, args: &[&str]) -> Result<String> {
        let mut argv = vec![
            "ovs-vsctl".to_string(),
            format!("--db={}", self.db_target()),
            "--no-wait".to_string(),
        ];
        argv.extend(args.iter().map(|a| a.to_string()));
        run(&argv)
    }

    /// Run `ovs-ofctl -O OpenFlow13` against this instance; a bare bridge name as target
    /// resolves to that bridge's management socket.
    pub fn ofctl<S: AsRef<str>>(&self, args: &[S]) -> Result<String> {
        let mut argv = vec!["ovs-ofctl".to_string(), "-O".into(), "OpenFlow13".into()];
        argv.extend(args.iter().map(|a| a.as_ref().to_string()));
        let mut cmd = command(&argv)?;
        cmd.env("OVS_RUNDIR", self.dir.path());
        output(&mut cmd, &argv)
    }

    /// Run `ovs-appctl` against ovs-vswitchd.
    pub fn appctl<S: AsRef<str>>(&self, args: &[S]) -> Result<String> {
        let ctl = self.dir.path().join("ovs-vswitchd.ctl");
        let mut argv = vec![
            "ovs-appctl".to_string(),
            "-t".into(),
            ctl.display().to_string(),
        ];
        argv.extend(args.iter().map(|a| a.as_ref().to_string()));
        run(&argv)
    }

    /// Add a bridge with this sandbox's datapath type.
    pub fn add_bridge(&self, bridge: &str) -> Result<()> {
        self.vsctl(&[
            "add-br",
            bridge,
            "--",
            "set",
            "bridge",
            bridge,
            &format!("datapath_type={}", self.datapath.as_ovs()),
        ])?;
        Ok(())
    }

    /// Every flow of a bridge as `ovs-ofctl -O OpenFlow13 dump-flows` prints it, parsed.
    pub fn dump_flows(&self, bridge: &str) -> Result<Vec<DumpedFlow>> {
        self.ofctl(&["dump-flows", bridge])?
            .lines()
            .filter(|l| l.starts_with(' '))
            .map(DumpedFlow::parse)
            .collect()
    }

    /// Every group of a bridge, one `ovs-ofctl dump-groups` line each (header dropped).
    pub fn dump_groups(&self, bridge: &str) -> Result<Vec<String>> {
        Ok(self
            .ofctl(&["dump-groups", bridge])?
            .lines()
            .filter(|l| l.starts_with(' '))
            .map(|l| l.trim().to_string())
            .collect())
    }

    /// The OpenFlow port number OVS assigned to an interface.
    pub fn ofport(&self, interface: &str) -> Result<u32> {
        let out = self.vsctl(&["get", "Interface", interface, "ofport"])?;
        out.trim().parse().map_err(|_| Error::Parse {
            what: "ofport",
            line: out.trim().to_string(),
        })
    }

    /// Kill both daemons with SIGKILL, as a crash would. The database file is kept.
    pub fn kill(&mut self) {
        for d in [self.vswitchd.take(), self.db.take()].into_iter().flatten() {
            let mut d = d;
            d.kill();
        }
    }

    /// Kill only ovs-vswitchd (the database keeps running).
    pub fn kill_vswitchd(&mut self) {
        if let Some(mut d) = self.vswitchd.take() {
            d.kill();
        }
    }

    /// Kill only ovsdb-server (ovs-vswitchd keeps forwarding and reconnects to it).
    pub fn kill_db(&mut self) {
        if let Some(mut d) = self.db.take() {
            d.kill();
        }
    }

    /// Start whatever is not running again, on the same database and sockets.
    pub fn restart(&mut self) -> Result<()> {
        if self.db.is_none() {
            self.start_db()?;
        }
        if self.vswitchd.is_none() {
            self.start_vswitchd()?;
            self.wait_bridges()?;
        }
        Ok(())
    }

    /// Wait until ovs-vswitchd has opened every bridge's management socket (it answers its
    /// control socket before it has read the database and created the bridges).
    fn wait_bridges(&self) -> Result<()> {
        let bridges = self.vsctl(&["list-br"])?;
        let deadline = std::time::Instant::now() + READY_TIMEOUT;
        for br in bridges.lines().map(str::trim).filter(|b| !b.is_empty()) {
            let sock = self.dir.path().join(format!("{br}.mgmt"));
            while UnixStream::connect(&sock).is_err() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// Stop both daemons gracefully.
    pub fn stop(&mut self) {
        for d in [self.vswitchd.take(), self.db.take()].into_iter().flatten() {
            let mut d = d;
            d.stop();
        }
    }

    /// Leave the daemons running after this value is gone (for `testbed up`); returns the pids
    /// and the run directory.
    pub fn detach(mut self) -> (Vec<u32>, PathBuf) {
        let pids = [self.vswitchd.take(), self.db.take()]
            .into_iter()
            .flatten()
            .filter_map(Daemon::detach)
            .collect();
        let dir = std::mem::replace(&mut self.dir, SandboxDir::empty());
        (pids, dir.keep())
    }

    fn wrap(&self, argv: Vec<String>) -> Vec<String> {
        match &self.netns {
            Some(ns) => ["ip", "netns", "exec", ns.as_str()]
                .into_iter()
                .map(String::from)
                .chain(argv)
                .collect(),
            None => argv,
        }
    }

    fn env(&self) -> [(&'static str, &Path); 3] {
        let d = self.dir.path();
        [("OVS_RUNDIR", d), ("OVS_LOGDIR", d), ("OVS_DBDIR", d)]
    }

    fn start_db(&mut self) -> Result<()> {
        let d = self.dir.path();
        let argv = self.wrap(vec![
            "ovsdb-server".into(),
            d.join("conf.db").display().to_string(),
            format!("--remote=punix:{}", self.db_socket().display()),
            format!("--pidfile={}", d.join("ovsdb-server.pid").display()),
            format!("--unixctl={}", d.join("ovsdb-server.ctl").display()),
            format!("--log-file={}", d.join("ovsdb-server.log").display()),
        ]);
        let mut daemon = Daemon::spawn(
            "ovsdb-server",
            &argv,
            &self.env(),
            &d.join("ovsdb-server.out"),
        )?;
        let sock = self.db_socket();
        daemon.wait_ready(READY_TIMEOUT, || UnixStream::connect(&sock).is_ok())?;
        self.db = Some(daemon);
        Ok(())
    }

    fn start_vswitchd(&mut self) -> Result<()> {
        let d = self.dir.path();
        let ctl = d.join("ovs-vswitchd.ctl");
        let mut args = vec![
            "ovs-vswitchd".to_string(),
            self.db_target(),
            format!("--pidfile={}", d.join("ovs-vswitchd.pid").display()),
            format!("--unixctl={}", ctl.display()),
            format!("--log-file={}", d.join("ovs-vswitchd.log").display()),
        ];
        if self.datapath == Datapath::Dummy {
            args.push("--enable-dummy".into());
        }
        let argv = self.wrap(args);
        let mut daemon = Daemon::spawn(
            "ovs-vswitchd",
            &argv,
            &self.env(),
            &d.join("ovs-vswitchd.out"),
        )?;
        daemon.wait_ready(READY_TIMEOUT, || UnixStream::connect(&ctl).is_ok())?;
        self.vswitchd = Some(daemon);
        Ok(())
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One line of `ovs-ofctl dump-flows`, split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedFlow {
    pub cookie: u64,
    pub table: u8,
    pub priority: u16,
    /// The match as printed (`ip,nw_dst=10.0.0.1`), empty for a match-all flow.
    pub matches: String,
    /// The actions as printed, without the `actions=` prefix.
    pub actions: String,
    pub n_packets: u64,
    pub n_bytes: u64,
    /// Other printed attributes that describe the flow, not its counters
    /// (`idle_timeout=30`, `send_flow_rem`, ...), in printed order.
    pub attributes: Vec<String>,
}

/// OpenFlow's default priority; `ovs-ofctl` does not print it.
const DEFAULT_PRIORITY: u16 = 32768;

impl DumpedFlow {
    /// Parse one `dump-flows` line.
    pub fn parse(line: &str) -> Result<DumpedFlow> {
        let bad = || Error::Parse {
            what: "dump-flows line",
            line: line.to_string(),
        };
        let (head, actions) = line.trim().split_once(" actions=").ok_or_else(bad)?;
        let mut flow = DumpedFlow {
            cookie: 0,
            table: 0,
            priority: DEFAULT_PRIORITY,
            matches: String::new(),
            actions: actions.to_string(),
            n_packets: 0,
            n_bytes: 0,
            attributes: Vec::new(),
        };
        // Attributes are separated by ", "; flags are separated from the priority that follows
        // them by a space ("send_flow_rem priority=7,ip"); the priority and match come last,
        // joined by ",". Match text itself never contains a space.
        for part in head
            .split(", ")
            .flat_map(|p| p.split(' '))
            .filter(|p| !p.is_empty())
        {
            let (key, value) = part.split_once('=').unwrap_or((part, ""));
            match key {
                "cookie" => {
                    flow.cookie = u64::from_str_radix(value.trim_start_matches("0x"), 16)
                        .map_err(|_| bad())?
                }
                "table" => flow.table = value.parse().map_err(|_| bad())?,
                "n_packets" => flow.n_packets = value.parse().map_err(|_| bad())?,
                "n_bytes" => flow.n_bytes = value.parse().map_err(|_| bad())?,
                "duration" | "idle_age" | "hard_age" => {}
                "priority" => {
                    let (prio, rest) = value.split_once(',').unwrap_or((value, ""));
                    flow.priority = prio.parse().map_err(|_| bad())?;
                    flow.matches = rest.to_string();
                }
                _ if part.contains(',') || is_match_field(key) => flow.matches = part.to_string(),
                _ => flow.attributes.push(part.to_string()),
            }
        }
        Ok(flow)
    }

    /// The flow without cookie and counters, in `ovs-ofctl` syntax:
    /// `table=0, priority=100,ip,nw_dst=10.0.0.1 actions=drop`. Two bridges holding the same
    /// flows give the same normalized lines whatever their traffic or cookies.
    pub fn normalized(&self) -> String {
        let mut s = format!("table={}, ", self.table);
        for a in &self.attributes {
            s.push_str(a);
            s.push_str(", ");
        }
        s.push_str(&format!("priority={}", self.priority));
        if !self.matches.is_empty() {
            s.push(',');
            s.push_str(&self.matches);
        }
        s.push_str(" actions=");
        s.push_str(&self.actions);
        s
    }
}

/// A match printed alone (no priority before it) is a single field or a protocol shorthand.
fn is_match_field(key: &str) -> bool {
    !matches!(
        key,
        "idle_timeout"
            | "hard_timeout"
            | "importance"
            | "send_flow_rem"
            | "check_overlap"
            | "reset_counts"
            | "no_packet_counts"
            | "no_byte_counts"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_dump_line() {
        let f = DumpedFlow::parse(
            " cookie=0x2a, duration=0.013s, table=3, n_packets=7, n_bytes=686, idle_age=1, \
             priority=100,ip,nw_dst=10.0.0.1 actions=drop",
        )
        .unwrap();
        assert_eq!(f.cookie, 0x2a);
        assert_eq!(f.table, 3);
        assert_eq!((f.n_packets, f.n_bytes), (7, 686));
        assert_eq!(f.priority, 100);
        assert_eq!(f.matches, "ip,nw_dst=10.0.0.1");
        assert_eq!(f.actions, "drop");
        assert_eq!(
            f.normalized(),
            "table=3, priority=100,ip,nw_dst=10.0.0.1 actions=drop"
        );
    }

    #[test]
    fn default_priority_and_attributes() {
        let f = DumpedFlow::parse(
            " cookie=0x5, duration=0.003s, table=1, n_packets=0, n_bytes=0, idle_timeout=30, \
             send_flow_rem actions=output:2",
        )
        .unwrap();
        assert_eq!(f.priority, 32768);
        assert_eq!(f.attributes, vec!["idle_timeout=30", "send_flow_rem"]);
        assert_eq!(f.matches, "");
        assert_eq!(
            f.normalized(),
            "table=1, idle_timeout=30, send_flow_rem, priority=32768 actions=output:2"
        );
    }

    #[test]
    fn flags_before_the_priority_are_attributes() {
        let f = DumpedFlow::parse(
            " cookie=0x1, duration=2.5s, table=0, n_packets=0, n_bytes=0, send_flow_rem \
             priority=1406,ip,nw_dst=10.0.0.1 actions=drop",
        )
        .unwrap();
        assert_eq!(f.priority, 1406);
        assert_eq!(f.matches, "ip,nw_dst=10.0.0.1");
        assert_eq!(f.attributes, vec!["send_flow_rem"]);
    }

    #[test]
    fn priority_without_match() {
        let f = DumpedFlow::parse(
            " cookie=0x0, duration=1s, table=0, n_packets=0, n_bytes=0, priority=0 actions=NORMAL",
        )
        .unwrap();
        assert_eq!((f.priority, f.matches.as_str()), (0, ""));
    }

    #[test]
    fn a_line_without_actions_is_an_error() {
        assert!(DumpedFlow::parse("OFPST_FLOW reply (OF1.3) (xid=0x2):").is_err());
    }
}
