//! The demo cluster `testbed up` brings up, the record `testbed down` tears down, and the
//! [`Cluster`] the end-to-end tests and the pod-setup benchmark use.
//!
//! A [`Cluster`] is every part real, as processes: etcd, netmaster, and one emulated host
//! (a network namespace running its own Open vSwitch with the userspace datapath and a VLAN
//! uplink) driven by a netplugin process that runs in the root namespace (so it reaches etcd
//! and netmaster on loopback) with `--host-netns` pointing at the host namespace. OVS reaches
//! netplugin's OpenFlow listeners through unix sockets. Pods are created through libcni
//! (`cnirun`) with a conflist naming `contivk8s`, exactly as a container runtime would.

use crate::names::{SandboxDir, free_port, temp_dir, unique_name};
use crate::process::Daemon;
use crate::{Datapath, Error, Etcd, EtcdOptions, Netns, Ovs, OvsOptions, Result, pid_alive, run};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The bridge name Contiv uses for VXLAN networks.
pub const BRIDGE: &str = "contivVxlanBridge";
/// How long netmaster and netplugin get to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the programs of a cluster are.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub netmaster: PathBuf,
    pub netctl: PathBuf,
    pub netplugin: PathBuf,
    /// The directory holding `contivk8s` (the runtime's `CNI_PATH`).
    pub cni_dir: PathBuf,
    /// The libcni runtime driver (`shared/tools/cnirun`).
    pub cnirun: PathBuf,
}

impl Binaries {
    /// The binaries in cargo's output directory `dir` (e.g. `target/debug`), and `cnirun`
    /// from `$CNIRUN`, else `dir/cnirun/cnirun`, built with `shared/tools/cnirun/build.sh` if
    /// missing.
    pub fn in_dir(dir: &Path) -> Result<Binaries> {
        let cnirun = match std::env::var_os("CNIRUN") {
            Some(p) => PathBuf::from(p),
            None => {
                let out = dir.join("cnirun");
                let exe = out.join("cnirun");
                if !exe.exists() {
                    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("../../shared/tools/cnirun/build.sh");
                    run(&["bash", &script.to_string_lossy(), &out.to_string_lossy()])?;
                }
                exe
            }
        };
        let bins = Binaries {
            netmaster: dir.join("netmaster"),
            netctl: dir.join("netctl"),
            netplugin: dir.join("netplugin"),
            cni_dir: dir.to_path_buf(),
            cnirun,
        };
        for exe in [
            &bins.netmaster,
            &bins.netctl,
            &bins.netplugin,
            &dir.join("contivk8s"),
            &bins.cnirun,
        ] {
            if !exe.exists() {
                return Err(Error::Io {
                    op: "find (build it with `cargo build -p master -p plugin -p cni`)",
                    path: exe.clone(),
                    source: std::io::ErrorKind::NotFound.into(),
                });
            }
        }
        Ok(bins)
    }

    /// Build the daemons with cargo (`release` or not) and locate them. With
    /// `TESTBED_BINARIES=<dir>` set, nothing is built: the binaries of `dir` are used (a
    /// benchmark of another build of the daemons, e.g. before and after a change, with the
    /// same benchmark code).
    pub fn build(release: bool) -> Result<Binaries> {
        if let Some(dir) = std::env::var_os("TESTBED_BINARIES") {
            return Binaries::in_dir(Path::new(&dir));
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut argv = vec![cargo.as_str(), "build", "-q"];
        if release {
            argv.push("--release");
        }
        argv.extend(["-p", "master", "-p", "plugin", "-p", "cni", "--bins"]);
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..])
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
        crate::command::output(&mut cmd, &argv)?;
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
        Binaries::in_dir(&target.join(if release { "release" } else { "debug" }))
    }
}

/// A GET (or DELETE) over HTTP/1.0 on loopback: `(status, body)`, `None` if unreachable.
pub fn http(method: &str, addr: &str, path: &str) -> Option<(u16, String)> {
    http_auth(method, addr, path, None)
}

/// [`http`] with `Authorization: Bearer <token>` when a token is given.
pub fn http_auth(
    method: &str,
    addr: &str,
    path: &str,
    token: Option<&str>,
) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

pub(crate) fn pick_port() -> Result<u16> {
    free_port().map_err(|source| Error::Io {
        op: "pick a port",
        path: PathBuf::new(),
        source,
    })
}

/// A veth pair in the host namespace whose first end serves as the VLAN uplink.
fn add_uplink(host: &Netns) -> Result<String> {
    let uplink = unique_name("u");
    let peer = unique_name("u");
    host.exec(&[
        "ip", "link", "add", &uplink, "type", "veth", "peer", "name", &peer,
    ])?;
    host.exec(&["ip", "link", "set", &peer, "up"])?;
    Ok(uplink)
}

/// Put `port` on the OVS bridge `br-phy` of `ns` (created if missing) and, with `ip`, give the
/// bridge that underlay address (a /24).
fn underlay(ns: &Netns, ovs: &Ovs, port: &str, ip: Option<&str>) -> Result<()> {
    if ovs.vsctl(&["br-exists", "br-phy"]).is_err() {
        ovs.add_bridge("br-phy")?;
    }
    ovs.vsctl(&["add-port", "br-phy", port])?;
    ns.exec(&["ip", "link", "set", port, "up"])?;
    if let Some(ip) = ip {
        ns.exec(&["ip", "addr", "add", &format!("{ip}/24"), "dev", "br-phy"])?;
    }
    ns.exec(&["ip", "link", "set", "br-phy", "up"])?;
    Ok(())
}

/// How a [`Cluster`]'s netplugins run (the default: `--mode test`, no Kubernetes API).
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// `--mode`; `None` is `test`.
    pub netplugin_mode: Option<String>,
    /// `--kube-config`: the §7.4 config file (Kubernetes API server, `SVC_SUBNET`).
    pub kube_config: Option<PathBuf>,
    /// The etcd cluster: members and TLS (default: one plain member).
    pub etcd: EtcdOptions,
    /// More netmaster flags (e.g. `--ofnet-grace 3`), for every netmaster of the cluster.
    pub netmaster_args: Vec<String>,
    /// `--fwdmode` of every netmaster and netplugin (`None`: `bridge`); `routing` runs the
    /// VXLAN bridges as `vrouter`.
    pub fwd_mode: Option<String>,
    /// More flags for the first host's netplugin (e.g. `--docker-plugin-socket`).
    pub netplugin_args: Vec<String>,
    /// Bearer tokens on: netmaster with `--token-file` ([`AUTH_ADMIN_TOKEN`],
    /// [`AUTH_PLUGIN_TOKEN`]), netplugin calling it with the plugin token and accepting debug
    /// writes with the admin token only; netctl and readiness checks use the admin token.
    pub auth: bool,
}

/// The admin token of a cluster started with [`ClusterOptions::auth`].
pub const AUTH_ADMIN_TOKEN: &str = "testbed-admin-3c1f9a7e55d2";
/// netplugin's token of a cluster started with [`ClusterOptions::auth`].
pub const AUTH_PLUGIN_TOKEN: &str = "testbed-plugin-8b04d6e2f1a9";

/// Write the token files of [`ClusterOptions::auth`] into `dir`: (netmaster's, netplugin's own,
/// the debug listener's).
fn write_token_files(dir: &Path) -> Result<(PathBuf, PathBuf, PathBuf)> {
    let files = (
        dir.join("netmaster-tokens"),
        dir.join("netplugin-token"),
        dir.join("debug-tokens"),
    );
    for (path, text) in [
        (
            &files.0,
            format!("{AUTH_ADMIN_TOKEN} admin\n{AUTH_PLUGIN_TOKEN} plugin\n"),
        ),
        (&files.1, format!("{AUTH_PLUGIN_TOKEN}\n")),
        (&files.2, format!("{AUTH_ADMIN_TOKEN} admin\n")),
    ] {
        std::fs::write(path, text).map_err(|source| Error::Io {
            op: "write",
            path: path.clone(),
            source,
        })?;
    }
    Ok(files)
}

/// `--fwdmode` for the netmasters of a cluster with [`ClusterOptions::fwd_mode`].
fn fwd_mode_flags(options: &ClusterOptions) -> Vec<String> {
    options
        .fwd_mode
        .iter()
        .flat_map(|m| ["--fwdmode".to_string(), m.clone()])
        .collect()
}

/// The etcd flags both daemons take: every member, and the TLS files of a TLS cluster.
pub fn etcd_args(etcd: &Etcd) -> Vec<String> {
    let mut argv = vec!["--etcd".to_string(), etcd.endpoints_arg()];
    if let Some(tls) = etcd.tls() {
        for (flag, path) in [
            ("--etcd-cacert", &tls.ca),
            ("--etcd-cert", &tls.cert),
            ("--etcd-key", &tls.key),
        ] {
            argv.push(flag.into());
            argv.push(path.to_string_lossy().into_owned());
        }
    }
    argv
}

/// What one host's netplugin is started with.
struct HostParts<'a> {
    ovs: &'a Ovs,
    netns: &'a Netns,
    uplink: &'a str,
    label: &'a str,
    vtep_ip: &'a str,
    cni_socket: &'a Path,
    debug_addr: &'a str,
    log: PathBuf,
    /// `--bgp-dir`: the host's BGP speaker files (routing mode).
    bgp_dir: PathBuf,
    /// More flags for this host's netplugin.
    extra: &'a [String],
}

/// Stops the BGP speaker (`gobgpd`) a host's netplugin left running (it outlives netplugin on
/// purpose, like the flows) when the host goes.
#[derive(Debug)]
pub struct SpeakerGuard(PathBuf);

impl SpeakerGuard {
    /// The speaker's pid, if one runs.
    pub fn pid(&self) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(self.0.join("gobgpd.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        String::from_utf8_lossy(&cmdline)
            .contains("gobgpd")
            .then_some(pid)
    }

    /// The speaker's directory (`--bgp-dir`).
    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// Leave the speaker running; its pid (for `down`).
    pub fn detach(self) -> Option<u32> {
        let pid = self.pid().and_then(|p| u32::try_from(p).ok());
        std::mem::forget(self);
        pid
    }
}

impl Drop for SpeakerGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Start a host's netplugin and wait until both switches are connected and the CNI socket
/// serves.
fn start_netplugin(c: &Cluster, h: &HostParts<'_>) -> Result<Daemon> {
    // ovs-vswitchd only connects to unix controllers inside its run directory.
    let d = h.ovs.run_dir();
    let mode = c.options.netplugin_mode.as_deref().unwrap_or("test");
    let mut argv: Vec<String> = [
        c.bins.netplugin.to_string_lossy().as_ref(),
        "--mode",
        mode,
        "--netmode",
        "vlan",
        "--fwdmode",
        c.options.fwd_mode.as_deref().unwrap_or("bridge"),
        "--vlan-uplinks",
        h.uplink,
        "--netmaster",
        &c.netmaster_url,
        "--host",
        h.label,
        "--vtep-ip",
        h.vtep_ip,
        "--ovsdb-socket",
        &h.ovs.db_socket().to_string_lossy(),
        "--cni-socket",
        &h.cni_socket.to_string_lossy(),
        "--vxlan-of-listen",
        &format!("unix:{}", d.join("vxlan.of").display()),
        "--vlan-of-listen",
        &format!("unix:{}", d.join("vlan.of").display()),
        "--host-of-listen",
        &format!("unix:{}", d.join("host.of").display()),
        "--debug-listen",
        h.debug_addr,
        // Every emulated host's agent on a port of its own, called back on loopback.
        "--ofnet-rpc-listen",
        "127.0.0.1:0",
        "--host-netns",
        &h.netns.path().to_string_lossy(),
        "--ovs-datapath",
        "netdev",
        "--bgp-dir",
        &h.bgp_dir.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.extend(etcd_args(&c.etcd));
    if c.options.auth {
        for (flag, file) in [
            ("--netmaster-token-file", "netplugin-token"),
            ("--debug-token-file", "debug-tokens"),
        ] {
            argv.push(flag.into());
            argv.push(c.dir.path().join(file).to_string_lossy().into_owned());
        }
    }
    if let Some(path) = &c.options.kube_config {
        argv.push("--kube-config".into());
        argv.push(path.to_string_lossy().into_owned());
    }
    argv.extend(h.extra.iter().cloned());
    let mut daemon = Daemon::spawn("netplugin", &argv, &[], &h.log)?;
    let debug = h.debug_addr.to_string();
    let socket = h.cni_socket.to_path_buf();
    daemon.wait_ready(READY_TIMEOUT, || {
        socket.exists()
            && http("GET", &debug, "/inspect/driver").is_some_and(|(s, body)| {
                s == 200
                    && serde_json::from_str::<Value>(&body).is_ok_and(|v| {
                        v["vlan"]["IsConnected"] == json!(true)
                            && v["vxlan"]["IsConnected"] == json!(true)
                    })
            })
    })?;
    Ok(daemon)
}

/// A second (third, ...) host of a [`Cluster`], stopped and removed on drop.
pub struct ExtraHost {
    netplugin: Option<Daemon>,
    /// The host's BGP speaker, stopped after netplugin.
    pub bgp: SpeakerGuard,
    netplugin_args: Vec<String>,
    uplink: String,
    pub vtep_ip: String,
    pub cni_socket: PathBuf,
    pub debug_addr: String,
    pub label: String,
    pub ovs: Ovs,
    pub netns: Netns,
    // Last: removed after the daemons stopped.
    dir: SandboxDir,
}

impl ExtraHost {
    /// A conflist for pods on this host.
    pub fn conflist(&self, name: &str, network: &str, group: &str) -> Result<PathBuf> {
        write_conflist(self.dir.path(), &self.cni_socket, name, network, group, &[])
    }

    /// The host's VLAN uplink (a veth whose other end waits in the host namespace).
    pub fn uplink(&self) -> &str {
        &self.uplink
    }

    /// [`ExtraHost::conflist`] with more pod labels.
    pub fn conflist_with_labels(
        &self,
        name: &str,
        network: &str,
        group: &str,
        labels: &[(&str, &str)],
    ) -> Result<PathBuf> {
        write_conflist(
            self.dir.path(),
            &self.cni_socket,
            name,
            network,
            group,
            labels,
        )
    }

    pub fn netplugin_running(&mut self) -> bool {
        self.netplugin.as_mut().is_some_and(Daemon::is_running)
    }

    /// Give up ownership of the host's processes, namespace and directories (for `down`).
    fn detach(self) -> (Vec<u32>, String, Vec<PathBuf>) {
        let ExtraHost {
            netplugin,
            ovs,
            netns,
            dir,
            ..
        } = self;
        let mut pids: Vec<u32> = netplugin.and_then(Daemon::detach).into_iter().collect();
        let (ovs_pids, ovs_dir) = ovs.detach();
        pids.extend(ovs_pids);
        (pids, netns.detach(), vec![ovs_dir, dir.keep()])
    }
}

fn write_conflist(
    dir: &Path,
    socket: &Path,
    name: &str,
    network: &str,
    group: &str,
    extra: &[(&str, &str)],
) -> Result<PathBuf> {
    let mut labels = json!({ "io.contiv.network": network });
    if !group.is_empty() {
        labels["io.contiv.net-group"] = json!(group);
    }
    for (key, value) in extra {
        labels[*key] = json!(value);
    }
    let list = json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [{
            "type": "contivk8s",
            "socketPath": socket,
            "args": { "cni": { "labels": labels } }
        }]
    });
    let path = dir.join(format!("{name}.conflist"));
    std::fs::write(&path, list.to_string()).map_err(|source| Error::Io {
        op: "write",
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// A pod created through libcni.
pub struct CniPod {
    pub container_id: String,
    /// `K8S_POD_NAMESPACE` and `K8S_POD_NAME` of its requests.
    pub pod_namespace: String,
    pub pod_name: String,
    /// The address netmaster assigned (without prefix length).
    pub ip: String,
    /// The runtime's result JSON.
    pub result: Value,
    pub conflist: PathBuf,
    pub netns: Netns,
}

impl CniPod {
    /// `ping` `count` packets to `ip` with a short interval; true if all were answered.
    pub fn can_ping(&self, ip: &str, count: u32) -> bool {
        self.netns
            .exec(&[
                "ping",
                "-n",
                "-q",
                "-c",
                &count.to_string(),
                "-i",
                "0.2",
                "-W",
                "1",
                ip,
            ])
            .is_ok()
    }

    /// Ping `ip` once at a time until it answers or `timeout` passes (a path across hosts
    /// needs its VTEP port and remote flows first).
    pub fn reaches_within(&self, ip: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.can_ping(ip, 1) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
        }
    }
}

/// See the module documentation.
pub struct Cluster {
    pub bins: Binaries,
    pub options: ClusterOptions,
    netplugin: Option<Daemon>,
    /// The host's BGP speaker, stopped after netplugin.
    pub bgp: SpeakerGuard,
    netmaster: Daemon,
    pub netmaster_url: String,
    pub debug_addr: String,
    pub cni_socket: PathBuf,
    pub host_label: String,
    pub uplink: String,
    /// The VTEP address netplugin is started with (`127.0.0.1` unless a test sets an
    /// underlay up and restarts netplugin).
    pub vtep_ip: String,
    pub ovs: Ovs,
    pub host: Netns,
    pub etcd: Etcd,
    // Last: removed after the daemons stopped.
    pub dir: SandboxDir,
}

impl Cluster {
    /// Start etcd, netmaster, the host (OVS + uplink) and netplugin.
    pub fn start(bins: Binaries) -> Result<Cluster> {
        Cluster::start_with(bins, ClusterOptions::default())
    }

    /// [`Cluster::start`] with netplugin started as `options` say (e.g. in kubernetes mode
    /// against an API server).
    pub fn start_with(bins: Binaries, options: ClusterOptions) -> Result<Cluster> {
        let dir = temp_dir("cl")?;
        let etcd = Etcd::start_cluster(options.etcd)?;
        let host = Netns::new("hst")?;
        let ovs = Ovs::start(OvsOptions {
            netns: Some(&host),
            datapath: Datapath::Netdev,
        })?;
        let uplink = unique_name("u");
        let peer = unique_name("u");
        host.exec(&[
            "ip", "link", "add", &uplink, "type", "veth", "peer", "name", &peer,
        ])?;
        host.exec(&["ip", "link", "set", &peer, "up"])?;
        let port = free_port().map_err(|source| Error::Io {
            op: "pick a port",
            path: PathBuf::new(),
            source,
        })?;
        let listen = format!("127.0.0.1:{port}");
        let netmaster_log = dir.path().join("netmaster.log");
        let mut netmaster_args = [
            etcd_args(&etcd),
            options.netmaster_args.clone(),
            fwd_mode_flags(&options),
        ]
        .concat();
        if options.auth {
            let (tokens, _, _) = write_token_files(dir.path())?;
            netmaster_args.push("--token-file".into());
            netmaster_args.push(tokens.to_string_lossy().into_owned());
        }
        let token = options.auth.then_some(AUTH_ADMIN_TOKEN);
        let netmaster =
            spawn_netmaster_with(&bins, &netmaster_args, &listen, &netmaster_log, token)?;
        let debug_port = pick_port()?;
        let mut cluster = Cluster {
            netplugin: None,
            bgp: SpeakerGuard(dir.path().join("bgp")),
            netmaster,
            netmaster_url: format!("http://{listen}"),
            debug_addr: format!("127.0.0.1:{debug_port}"),
            cni_socket: dir.path().join("cni.sock"),
            host_label: format!("{}-host", host.name()),
            uplink,
            vtep_ip: "127.0.0.1".into(),
            bins,
            options,
            ovs,
            host,
            etcd,
            dir,
        };
        cluster.start_netplugin()?;
        Ok(cluster)
    }

    fn host_parts(&self) -> HostParts<'_> {
        HostParts {
            ovs: &self.ovs,
            netns: &self.host,
            uplink: &self.uplink,
            label: &self.host_label,
            vtep_ip: &self.vtep_ip,
            cni_socket: &self.cni_socket,
            debug_addr: &self.debug_addr,
            log: self.dir.path().join("netplugin.log"),
            bgp_dir: self.bgp.dir().to_path_buf(),
            extra: &self.options.netplugin_args,
        }
    }

    /// Start netplugin and wait until both switches are connected and the CNI socket serves.
    pub fn start_netplugin(&mut self) -> Result<()> {
        let daemon = start_netplugin(self, &self.host_parts())?;
        self.netplugin = Some(daemon);
        Ok(())
    }

    /// Another emulated host (its own namespace, OVS, uplink and netplugin) in this cluster.
    /// `prepare` runs before its netplugin starts (e.g. to give it an underlay address).
    pub fn add_host(
        &self,
        vtep_ip: &str,
        prepare: impl FnOnce(&Netns, &Ovs) -> Result<()>,
    ) -> Result<ExtraHost> {
        self.add_host_with(vtep_ip, &[], prepare)
    }

    /// [`Cluster::add_host`] with more flags for its netplugin.
    pub fn add_host_with(
        &self,
        vtep_ip: &str,
        netplugin_args: &[String],
        prepare: impl FnOnce(&Netns, &Ovs) -> Result<()>,
    ) -> Result<ExtraHost> {
        let dir = temp_dir("hx")?;
        let netns = Netns::new("hx")?;
        let ovs = Ovs::start(OvsOptions {
            netns: Some(&netns),
            datapath: Datapath::Netdev,
        })?;
        let uplink = add_uplink(&netns)?;
        prepare(&netns, &ovs)?;
        let debug_addr = format!("127.0.0.1:{}", pick_port()?);
        let cni_socket = dir.path().join("cni.sock");
        let label = format!("{}-host", netns.name());
        let parts = HostParts {
            ovs: &ovs,
            netns: &netns,
            uplink: &uplink,
            label: &label,
            vtep_ip,
            cni_socket: &cni_socket,
            debug_addr: &debug_addr,
            log: dir.path().join("netplugin.log"),
            bgp_dir: dir.path().join("bgp"),
            extra: netplugin_args,
        };
        let netplugin = Some(start_netplugin(self, &parts)?);
        Ok(ExtraHost {
            netplugin,
            bgp: SpeakerGuard(dir.path().join("bgp")),
            netplugin_args: netplugin_args.to_vec(),
            uplink,
            vtep_ip: vtep_ip.to_string(),
            cni_socket,
            debug_addr,
            label,
            ovs,
            netns,
            dir,
        })
    }

    /// Another host wired to this cluster's first host by an underlay, for VXLAN between them:
    /// the first host's underlay address is `first_ip` (set up, and its netplugin restarted
    /// with it as VTEP, on the first call; later calls must give the same address), the new
    /// host's is `ip` (all in one /24). Each host holds its underlay address on an OVS bridge
    /// `br-phy` (the userspace datapath tunnels through it); the new host's end of a veth is on
    /// its `br-phy`, the other end on the first host's, which switches between the hosts.
    pub fn add_wired_host(&mut self, first_ip: &str, ip: &str) -> Result<ExtraHost> {
        self.add_wired_host_with(first_ip, ip, &[])
    }

    /// [`Cluster::add_wired_host`] with more flags for the new host's netplugin.
    pub fn add_wired_host_with(
        &mut self,
        first_ip: &str,
        ip: &str,
        netplugin_args: &[String],
    ) -> Result<ExtraHost> {
        let (if_first, if_new) = (unique_name("v"), unique_name("v"));
        let host = self.add_host_with(ip, netplugin_args, |ns, ovs| {
            self.host.exec(&[
                "ip",
                "link",
                "add",
                &if_first,
                "type",
                "veth",
                "peer",
                "name",
                &if_new,
                "netns",
                ns.name(),
            ])?;
            underlay(ns, ovs, &if_new, Some(ip))
        })?;
        if self.vtep_ip == first_ip {
            underlay(&self.host, &self.ovs, &if_first, None)?;
        } else {
            underlay(&self.host, &self.ovs, &if_first, Some(first_ip))?;
            self.stop_netplugin();
            self.vtep_ip = first_ip.to_string();
            self.start_netplugin()?;
        }
        // OVS learns underlay neighbours by snooping ARP on br-phy.
        self.host.exec(&["ping", "-c", "1", "-W", "2", ip])?;
        host.netns.exec(&["ping", "-c", "1", "-W", "2", first_ip])?;
        Ok(host)
    }

    /// SIGKILL netplugin, as a crash would.
    pub fn kill_netplugin(&mut self) {
        if let Some(mut d) = self.netplugin.take() {
            d.kill();
        }
    }

    /// Stop netplugin gracefully.
    pub fn stop_netplugin(&mut self) {
        if let Some(mut d) = self.netplugin.take() {
            d.stop();
        }
    }

    /// Process ids of netmaster and netplugin (for RSS readings).
    pub fn pids(&self) -> (Option<u32>, Option<u32>) {
        (
            self.netmaster.pid(),
            self.netplugin.as_ref().and_then(|d| d.pid()),
        )
    }

    pub fn netplugin_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("netplugin.log")).unwrap_or_default()
    }

    /// Run `netctl --netmaster <url> args...`.
    pub fn netctl(&self, args: &[&str]) -> Result<String> {
        let mut argv = vec![
            self.bins.netctl.to_string_lossy().into_owned(),
            "--netmaster".into(),
            self.netmaster_url.clone(),
        ];
        if self.options.auth {
            argv.push("--token".into());
            argv.push(AUTH_ADMIN_TOKEN.into());
        }
        argv.extend(args.iter().map(|s| s.to_string()));
        run(&argv)
    }

    /// Write a conflist for `network` (and `group`, if not empty) of tenant `default`.
    pub fn conflist(&self, name: &str, network: &str, group: &str) -> Result<PathBuf> {
        write_conflist(self.dir.path(), &self.cni_socket, name, network, group, &[])
    }

    /// [`Cluster::conflist`] whose pods also carry these labels (e.g. `app=web`, which service
    /// selectors match).
    pub fn conflist_with_labels(
        &self,
        name: &str,
        network: &str,
        group: &str,
        labels: &[(&str, &str)],
    ) -> Result<PathBuf> {
        write_conflist(
            self.dir.path(),
            &self.cni_socket,
            name,
            network,
            group,
            labels,
        )
    }

    /// Run `cnirun <command> conflist container netns` as a runtime would, for pod
    /// `default/<container>`.
    pub fn cnirun(
        &self,
        command: &str,
        conflist: &Path,
        container_id: &str,
        netns: &Path,
    ) -> std::result::Result<String, String> {
        self.cnirun_as(
            command,
            conflist,
            container_id,
            netns,
            "default",
            container_id,
        )
    }

    /// [`Cluster::cnirun`] for pod `namespace/name` (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`).
    pub fn cnirun_as(
        &self,
        command: &str,
        conflist: &Path,
        container_id: &str,
        netns: &Path,
        namespace: &str,
        name: &str,
    ) -> std::result::Result<String, String> {
        let out = Command::new(&self.bins.cnirun)
            .args([command, &conflist.to_string_lossy(), container_id])
            .arg(netns)
            .env("CNI_PATH", &self.bins.cni_dir)
            .env("POD_NS", namespace)
            .env("POD_NAME", name)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Create a pod namespace and ADD it through libcni (pod `default/<container id>`).
    pub fn add_pod(&self, conflist: &Path) -> std::result::Result<CniPod, String> {
        let container_id = format!("c{}", unique_name(""));
        self.add_pod_as(conflist, "default", &container_id.clone(), container_id)
    }

    /// [`Cluster::add_pod`] with the container id given (e.g. a runtime's retried ADD).
    pub fn add_pod_with_id(
        &self,
        conflist: &Path,
        container_id: &str,
    ) -> std::result::Result<CniPod, String> {
        self.add_pod_as(conflist, "default", container_id, container_id.to_string())
    }

    /// Create a pod namespace and ADD it through libcni as Kubernetes pod `namespace/name`
    /// (the pod is expected to exist in the API server, as kubelet's pods do).
    pub fn add_named_pod(
        &self,
        conflist: &Path,
        namespace: &str,
        name: &str,
    ) -> std::result::Result<CniPod, String> {
        self.add_pod_as(conflist, namespace, name, format!("c{}", unique_name("")))
    }

    fn add_pod_as(
        &self,
        conflist: &Path,
        namespace: &str,
        name: &str,
        container_id: String,
    ) -> std::result::Result<CniPod, String> {
        let netns = Netns::new("p").map_err(|e| e.to_string())?;
        let out = self.cnirun_as(
            "add",
            conflist,
            &container_id,
            &netns.path(),
            namespace,
            name,
        )?;
        let result: Value = serde_json::from_str(out.trim()).map_err(|e| format!("{e}: {out}"))?;
        let ip = result["ips"][0]["address"]
            .as_str()
            .and_then(|a| a.split('/').next())
            .ok_or_else(|| format!("no address in {result}"))?
            .to_string();
        Ok(CniPod {
            container_id,
            pod_namespace: namespace.to_string(),
            pod_name: name.to_string(),
            ip,
            result,
            conflist: conflist.to_path_buf(),
            netns,
        })
    }

    /// DEL a pod through libcni.
    pub fn del_pod(&self, pod: &CniPod) -> std::result::Result<(), String> {
        self.cnirun_as(
            "del",
            &pod.conflist,
            &pod.container_id,
            &pod.netns.path(),
            &pod.pod_namespace,
            &pod.pod_name,
        )
        .map(|_| ())
    }

    /// Give up ownership of everything; returns what `down` needs.
    pub fn detach(mut self, pods: Vec<CniPod>) -> DemoState {
        let mut pids = Vec::new();
        pids.extend(self.netplugin.take().and_then(Daemon::detach));
        let Cluster {
            netmaster,
            bgp,
            ovs,
            host,
            etcd,
            dir,
            netmaster_url,
            ..
        } = self;
        pids.extend(netmaster.detach());
        pids.extend(bgp.detach());
        let ovsdb = ovs.db_target();
        let etcd_url = etcd.endpoints_arg();
        let (etcd_pids, etcd_dir) = etcd.detach();
        let (ovs_pids, ovs_dir) = ovs.detach();
        pids.extend(etcd_pids);
        pids.extend(ovs_pids);
        let mut namespaces = vec![host.detach()];
        let pods: Vec<PodState> = pods
            .into_iter()
            .map(|p| {
                let state = PodState {
                    netns: p.netns.detach(),
                    ip: p.ip,
                    port: p.container_id,
                };
                namespaces.push(state.netns.clone());
                state
            })
            .collect();
        DemoState {
            etcd_url,
            netmaster_url,
            pids,
            namespaces,
            pods,
            directories: vec![etcd_dir, ovs_dir, dir.keep()],
            ovsdb,
            docker_hosts: Vec::new(),
        }
    }
}

/// The running demo: a [`Cluster`] with a VXLAN network, an endpoint group, two pods labelled
/// `app=web` that serve TCP port 8080, a service load balancer `web-svc` (VIP
/// [`DEMO_VIP`]`:80` → the `app=web` pods' port 8080) and a client pod.
pub struct Demo {
    /// The first host's pods: the providers, then the client.
    pods: Vec<CniPod>,
    /// Hosts 2..N, wired to the first by an underlay, each with one provider pod.
    remote: Vec<(ExtraHost, CniPod)>,
    /// `nc -lk 8080` in each provider, left running by `up`, stopped by `down`.
    listeners: Listeners,
    cluster: Cluster,
}

/// Processes the demo started in pods: killed when dropped, unless handed over by
/// [`Demo::detach`].
struct Listeners(Vec<std::process::Child>);

impl Drop for Listeners {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The demo service's address (inside `demo-net`, so clients reach it by ARP).
pub const DEMO_VIP: &str = "10.36.0.100";

/// The underlay /24 of a multi-host demo: host `n` (from 1) is `192.168.88.n`.
const DEMO_UNDERLAY: &str = "192.168.88";

/// The most hosts `testbed up --hosts` brings up (the underlay is one /24).
pub const DEMO_MAX_HOSTS: usize = 200;

/// What [`Demo::up`] brings up.
#[derive(Debug, Clone, Default)]
pub struct DemoOptions {
    pub etcd: EtcdOptions,
    /// Emulated hosts (0 is taken as 1): the first runs two providers and the client, each
    /// other one provider; all share the netmaster and reach each other over VXLAN.
    pub hosts: usize,
    /// `--fwdmode` of netmaster and the netplugins (`None`: `bridge`); `routing` runs the
    /// VXLAN network on the `vrouter` datapath.
    pub fwd_mode: Option<String>,
}

/// What `up` started, as recorded for `down` and `status`.
#[derive(Debug, Serialize, Deserialize)]
pub struct DemoState {
    pub etcd_url: String,
    #[serde(default)]
    pub netmaster_url: String,
    /// Every process started, to be stopped by pid.
    pub pids: Vec<u32>,
    /// Namespaces: the host first, then the pods.
    pub namespaces: Vec<String>,
    pub pods: Vec<PodState>,
    /// Sandbox directories to remove.
    pub directories: Vec<PathBuf>,
    pub ovsdb: String,
    /// Docker engines (`unix://...`) whose containers go first (Docker demo).
    #[serde(default)]
    pub docker_hosts: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct PodState {
    pub netns: String,
    pub ip: String,
    /// The pod's container id.
    pub port: String,
}

impl Demo {
    /// Start everything and create the pods through the CNI plugin.
    pub fn up(bins: Binaries, options: DemoOptions) -> Result<Demo> {
        if options.hosts > DEMO_MAX_HOSTS {
            return Err(Error::Command {
                command: "testbed up".into(),
                status: "refused".into(),
                stderr: format!(
                    "{} hosts: the demo's underlay holds at most {DEMO_MAX_HOSTS}",
                    options.hosts
                ),
            });
        }
        let mut cluster = Cluster::start_with(
            bins,
            ClusterOptions {
                etcd: options.etcd,
                fwd_mode: options.fwd_mode,
                ..ClusterOptions::default()
            },
        )?;
        let mut hosts = Vec::new();
        for n in 2..=options.hosts {
            hosts.push(cluster.add_wired_host(
                &format!("{DEMO_UNDERLAY}.1"),
                &format!("{DEMO_UNDERLAY}.{n}"),
            )?);
        }
        cluster.netctl(&[
            "net",
            "create",
            "-e",
            "vxlan",
            "-s",
            "10.36.0.0/24",
            "-g",
            "10.36.0.1",
            "demo-net",
        ])?;
        cluster.netctl(&["group", "create", "demo-net", "web"])?;
        cluster.netctl(&[
            "service",
            "create",
            "web-svc",
            "-s",
            "demo-net",
            "-l",
            "app=web",
            "-p",
            "80:8080:TCP",
            "--ip",
            DEMO_VIP,
        ])?;
        let providers =
            cluster.conflist_with_labels("demo", "demo-net", "web", &[("app", "web")])?;
        let clients = cluster.conflist("demo-client", "demo-net", "web")?;
        let add = |conflist: &Path| {
            cluster.add_pod(conflist).map_err(|e| Error::Command {
                command: "cnirun add".into(),
                status: "failed".into(),
                stderr: e,
            })
        };
        let mut pods = Vec::new();
        for conflist in [&providers, &providers, &clients] {
            pods.push(add(conflist)?);
        }
        let mut remote = Vec::new();
        for host in hosts {
            let conflist =
                host.conflist_with_labels("demo", "demo-net", "web", &[("app", "web")])?;
            let pod = add(&conflist)?;
            remote.push((host, pod));
        }
        let mut listeners = Listeners(Vec::new());
        let providers = pods[..2].iter().chain(remote.iter().map(|(_, pod)| pod));
        for provider in providers {
            let child = std::process::Command::new("ip")
                .args(["netns", "exec", provider.netns.name(), "nc", "-lk", "8080"])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|source| Error::Io {
                    op: "spawn nc",
                    path: PathBuf::from("nc"),
                    source,
                })?;
            listeners.0.push(child);
        }
        Ok(Demo {
            pods,
            remote,
            listeners,
            cluster,
        })
    }

    /// A human summary: where things are and how to reach them.
    pub fn describe(&self) -> String {
        let c = &self.cluster;
        let mut s = String::new();
        let _ = writeln!(s, "etcd:      {}", c.etcd.endpoints_arg());
        if let Some(tls) = c.etcd.tls() {
            let _ = writeln!(
                s,
                "etcd TLS:  --etcd-cacert {} --etcd-cert {} --etcd-key {}",
                tls.ca.display(),
                tls.cert.display(),
                tls.key.display()
            );
        }
        let _ = writeln!(
            s,
            "netmaster: {} (netctl --netmaster {0} net ls)",
            c.netmaster_url
        );
        let _ = writeln!(
            s,
            "host:      namespace {} running OVS (ovsdb {}), netplugin debug http://{}/inspect/driver",
            c.host.name(),
            c.ovs.db_target(),
            c.debug_addr
        );
        let mode = c.options.fwd_mode.as_deref().unwrap_or("bridge");
        let datapath = if mode == "routing" {
            "vrouter"
        } else {
            "vxlan"
        };
        let _ = writeln!(
            s,
            "network:   demo-net (vxlan 10.36.0.0/24), group web; --fwdmode {mode}: datapath {datapath}"
        );
        let _ = writeln!(
            s,
            "service:   web-svc {DEMO_VIP}:80 -> port 8080 of the pods labelled app=web (netctl service inspect web-svc)"
        );
        for (n, pod) in self.pods.iter().enumerate() {
            let role = if n < 2 {
                "provider, app=web, nc -lk 8080"
            } else {
                "client"
            };
            let _ = writeln!(
                s,
                "pod:       {} in namespace {} (container {}; {role})",
                pod.ip,
                pod.netns.name(),
                pod.container_id
            );
        }
        for (host, pod) in &self.remote {
            let _ = writeln!(
                s,
                "host:      namespace {} (underlay {}) running OVS (ovsdb {}), netplugin debug http://{}/inspect/driver",
                host.netns.name(),
                host.vtep_ip,
                host.ovs.db_target(),
                host.debug_addr
            );
            let _ = writeln!(
                s,
                "pod:       {} in namespace {} (container {}; provider, app=web, nc -lk 8080)",
                pod.ip,
                pod.netns.name(),
                pod.container_id
            );
        }
        if let [a, b, client] = self.pods.as_slice() {
            let reach = a.can_ping(&b.ip, 2);
            let _ = writeln!(
                s,
                "ping {} -> {}: {}",
                a.ip,
                b.ip,
                if reach { "ok" } else { "FAILED" }
            );
            for (host, pod) in &self.remote {
                let _ = writeln!(
                    s,
                    "ping {} -> {} (host {}): {}",
                    a.ip,
                    pod.ip,
                    host.vtep_ip,
                    if a.reaches_within(&pod.ip, Duration::from_secs(10)) {
                        "ok"
                    } else {
                        "FAILED"
                    }
                );
            }
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            let service = loop {
                let ok = client
                    .netns
                    .exec(&["nc", "-z", "-w", "2", DEMO_VIP, "80"])
                    .is_ok();
                if ok || std::time::Instant::now() > deadline {
                    break ok;
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            };
            let _ = writeln!(
                s,
                "tcp {} -> {DEMO_VIP}:80 (service): {}",
                client.ip,
                if service { "ok" } else { "FAILED" }
            );
            let _ = writeln!(
                s,
                "try:       ip netns exec {} ping {}",
                a.netns.name(),
                b.ip
            );
            let _ = writeln!(
                s,
                "           ip netns exec {} nc -zv {DEMO_VIP} 80; curl http://{}/svcstats",
                client.netns.name(),
                c.debug_addr
            );
        }
        s
    }

    /// Leave everything running and return the record needed to tear it down later.
    pub fn detach(mut self) -> DemoState {
        let listeners = std::mem::take(&mut self.listeners.0);
        let remote = std::mem::take(&mut self.remote);
        let mut state = self.cluster.detach(self.pods);
        for (host, pod) in remote {
            let (pids, namespace, directories) = host.detach();
            state.pids.extend(pids);
            state.namespaces.push(namespace);
            state.directories.extend(directories);
            let pod = PodState {
                netns: pod.netns.detach(),
                ip: pod.ip,
                port: pod.container_id,
            };
            state.namespaces.push(pod.netns.clone());
            state.pods.push(pod);
        }
        state
            .pids
            .extend(listeners.iter().map(std::process::Child::id));
        state
    }
}

impl DemoState {
    /// Stop every recorded process and remove namespaces and directories. Best effort: a part
    /// already gone is not an error.
    pub fn tear_down(&self) {
        // Containers first, while dockerd, containerd and netplugin still run (a killed
        // containerd would leave the container shims behind).
        for host in &self.docker_hosts {
            if let Ok(ids) = run(&["docker", "-H", host, "ps", "-aq"]) {
                let ids: Vec<&str> = ids.split_whitespace().collect();
                if !ids.is_empty() {
                    let mut argv = vec!["docker", "-H", host, "rm", "-f"];
                    argv.extend(ids);
                    let _ = run(&argv);
                }
            }
        }
        for pid in &self.pids {
            if let Ok(raw) = i32::try_from(*pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(raw),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && self.pids.iter().any(|p| pid_alive(*p)) {
            std::thread::sleep(Duration::from_millis(20));
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
        let mut s = format!(
            "etcd: {}\nnetmaster: {}\novsdb: {}\n",
            self.etcd_url, self.netmaster_url, self.ovsdb
        );
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

/// Start a netmaster listening (and controlling) on `listen` and wait until it answers for the
/// global object (itself as leader, or proxied to the leader as a follower).
/// Start a netmaster; `etcd` are its etcd flags (see [`etcd_args`]).
pub(crate) fn spawn_netmaster(
    bins: &Binaries,
    etcd: &[String],
    listen: &str,
    log: &Path,
) -> Result<Daemon> {
    spawn_netmaster_with(bins, etcd, listen, log, None)
}

/// [`spawn_netmaster`] with more flags in `args` (etcd's and others) and the token its
/// readiness check sends.
pub(crate) fn spawn_netmaster_with(
    bins: &Binaries,
    etcd: &[String],
    listen: &str,
    log: &Path,
    token: Option<&str>,
) -> Result<Daemon> {
    let mut argv: Vec<String> = vec![bins.netmaster.to_string_lossy().into_owned()];
    argv.extend(etcd.iter().cloned());
    argv.extend(
        [
            "--listen-url",
            listen,
            "--control-url",
            listen,
            "--netmode",
            "vlan",
            // Clusters run side by side: each ofnet master on a port of its own.
            "--ofnet-port",
            "0",
        ]
        .iter()
        .map(|a| a.to_string()),
    );
    if !etcd.iter().any(|a| a == "--fwdmode") {
        argv.extend(["--fwdmode".to_string(), "bridge".to_string()]);
    }
    // `--mode test` unless the extra flags (e.g. `--mode docker --docker-host ...`) say.
    if !etcd.iter().any(|a| a == "--mode") {
        argv.extend(["--mode".to_string(), "test".to_string()]);
    }
    let mut netmaster = Daemon::spawn("netmaster", &argv, &[], log)?;
    netmaster.wait_ready(READY_TIMEOUT, || {
        http_auth("GET", listen, "/api/v1/globals/", token)
            .is_some_and(|(s, b)| s == 200 && b.contains("global"))
    })?;
    Ok(netmaster)
}

/// Another netmaster of a [`Cluster`] (a follower while the first leads), stopped on drop.
pub struct ExtraNetmaster {
    _daemon: Daemon,
    /// `ip:port` of its REST API.
    pub addr: String,
}

impl Cluster {
    /// Start one more netmaster on its own loopback port, sharing the cluster's etcd.
    pub fn add_netmaster(&self) -> Result<ExtraNetmaster> {
        let port = pick_port()?;
        let addr = format!("127.0.0.1:{port}");
        let log = self.dir.path().join(format!("netmaster-{port}.log"));
        let token = self.options.auth.then_some(AUTH_ADMIN_TOKEN);
        let daemon = spawn_netmaster_with(&self.bins, &self.netmaster_flags(), &addr, &log, token)?;
        Ok(ExtraNetmaster {
            _daemon: daemon,
            addr,
        })
    }

    /// Stop the cluster's first netmaster (SIGTERM: it releases the leader lock, so another
    /// netmaster takes over within a poll) and start it again on the same address, where it
    /// follows (and proxies to) the new leader. `between` runs while it is down.
    pub fn restart_netmaster(&mut self, between: impl FnOnce()) -> Result<()> {
        self.netmaster.stop();
        between();
        self.respawn_netmaster()
    }

    /// [`Cluster::restart_netmaster`] after a SIGKILL (a crash: the leader lock stays until its
    /// lease expires, so another netmaster takes over only after `--lock-ttl`).
    pub fn crash_netmaster(&mut self, between: impl FnOnce()) -> Result<()> {
        self.netmaster.kill();
        between();
        self.respawn_netmaster()
    }

    fn respawn_netmaster(&mut self) -> Result<()> {
        let listen = self.netmaster_url.trim_start_matches("http://").to_string();
        let log = self.dir.path().join("netmaster.log");
        let token = self.options.auth.then_some(AUTH_ADMIN_TOKEN);
        self.netmaster =
            spawn_netmaster_with(&self.bins, &self.netmaster_flags(), &listen, &log, token)?;
        Ok(())
    }

    /// Every netmaster's flags: etcd, the options' extra ones, and the token file of an
    /// [`ClusterOptions::auth`] cluster (written at start).
    fn netmaster_flags(&self) -> Vec<String> {
        let mut flags = [
            etcd_args(&self.etcd),
            self.options.netmaster_args.clone(),
            fwd_mode_flags(&self.options),
        ]
        .concat();
        if self.options.auth {
            flags.push("--token-file".into());
            flags.push(
                self.dir
                    .path()
                    .join("netmaster-tokens")
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        flags
    }

    /// SIGKILL a host's netplugin, as a crash would (no unregistration: its registrations
    /// expire with their lease).
    pub fn kill_host_netplugin(&self, host: &mut ExtraHost) {
        if let Some(mut d) = host.netplugin.take() {
            d.kill();
        }
    }

    /// Start a host's netplugin again (after [`Cluster::kill_host_netplugin`]).
    pub fn restart_host_netplugin(&self, host: &mut ExtraHost) -> Result<()> {
        let parts = HostParts {
            ovs: &host.ovs,
            netns: &host.netns,
            uplink: &host.uplink,
            label: &host.label,
            vtep_ip: &host.vtep_ip,
            cni_socket: &host.cni_socket,
            debug_addr: &host.debug_addr,
            log: host.dir.path().join("netplugin.log"),
            bgp_dir: host.bgp.dir().to_path_buf(),
            extra: &host.netplugin_args,
        };
        host.netplugin = Some(start_netplugin(self, &parts)?);
        Ok(())
    }
}

/// `testbed up --mode docker`: a [`Cluster`] whose netmaster runs in Docker cluster mode and
/// whose netplugin is Docker's network and IPAM driver (with the inline DNS), a dockerd in the
/// host's namespace, a VLAN network `demo-net` with group `web` (netmaster makes the Docker
/// network `web`) and two busybox containers on it. Returns the description and what
/// `testbed down` needs.
pub fn up_docker(bins: Binaries, etcd: EtcdOptions) -> Result<(String, DemoState)> {
    let dir = temp_dir("dkd")?;
    let api = dir.path().join("docker.sock");
    let docker_host = format!("unix://{}", api.display());
    let (driver, socket) = crate::docker::plugin_socket();
    let cluster = Cluster::start_with(
        bins,
        ClusterOptions {
            etcd,
            netmaster_args: vec![
                "--mode".into(),
                "docker".into(),
                "--docker-host".into(),
                docker_host.clone(),
                "--name".into(),
                driver.clone(),
            ],
            netplugin_mode: Some("docker".into()),
            netplugin_args: vec![
                "--docker-plugin-socket".into(),
                socket.to_string_lossy().into_owned(),
                "--docker-host".into(),
                docker_host.clone(),
                "--dns-enable".into(),
            ],
            ..ClusterOptions::default()
        },
    )?;
    let dockerd = crate::docker::Dockerd::start_with(Some(&cluster.host), Some(api))?;
    let image = dockerd.busybox()?;
    cluster.netctl(&[
        "net",
        "create",
        "-e",
        "vlan",
        "-s",
        "10.37.0.0/24",
        "-g",
        "10.37.0.1",
        "demo-net",
    ])?;
    cluster.netctl(&["group", "create", "demo-net", "web"])?;
    let mut ips = Vec::new();
    for name in ["web1", "web2"] {
        dockerd.docker(&[
            "run", "-d", "--init", "--name", name, "--net", "web", image, "sleep", "1000000",
        ])?;
        let ip = dockerd.docker(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            name,
        ])?;
        ips.push(ip.trim().to_string());
    }
    let reach = dockerd
        .docker(&["exec", "web1", "ping", "-c", "2", "-W", "1", &ips[1]])
        .is_ok();
    let mut s = String::new();
    let _ = writeln!(s, "etcd:      {}", cluster.etcd.endpoints_arg());
    let _ = writeln!(
        s,
        "netmaster: {} (Docker cluster mode; netctl --netmaster {0} group ls)",
        cluster.netmaster_url
    );
    let _ = writeln!(
        s,
        "host:      namespace {} running OVS and dockerd; netplugin is Docker's driver `{driver}`",
        cluster.host.name()
    );
    let _ = writeln!(
        s,
        "network:   demo-net (vlan 10.37.0.0/24), group web = Docker network `web`"
    );
    let _ = writeln!(s, "containers: web1 {}, web2 {}", ips[0], ips[1]);
    let _ = writeln!(
        s,
        "ping web1 -> web2: {}",
        if reach { "ok" } else { "FAILED" }
    );
    let _ = writeln!(s, "try:       export DOCKER_HOST={docker_host}");
    let _ = writeln!(s, "           docker exec web1 ping -c 2 {}", ips[1]);
    let _ = writeln!(
        s,
        "           docker exec web1 nslookup web2 {}   # inline DNS: container, group (web) names",
        ips[1]
    );
    let _ = writeln!(
        s,
        "           netctl --netmaster {} group create demo-net db; docker run -d --net db {image} sleep 1d",
        cluster.netmaster_url
    );
    let (docker_pids, docker_dir) = dockerd.detach();
    let mut state = cluster.detach(Vec::new());
    // dockerd first: it stops its containers (and their endpoints) while netplugin still runs.
    let mut pids = docker_pids;
    pids.append(&mut state.pids);
    state.pids = pids;
    state.directories.push(docker_dir);
    state.docker_hosts.push(docker_host);
    state.directories.push(dir.keep());
    Ok((s, state))
}
