//! netplugin's command line: the flags and environment variables of reference §3, plus what
//! running several netplugins on one machine needs (sockets, listen addresses, the namespace
//! of the OVS datapath).
//!
//! Contract: [`Args::into_config`] either returns a complete, checked [`Config`] or a
//! [`ConfigError`] naming the flag; the binary exits with 22 on it (Contiv's "bad options").

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;

use clap::Parser;

/// Exit status for bad options (Contiv: `EINVAL`).
pub const EXIT_BAD_OPTIONS: i32 = 22;

/// Port of the debug listener (Contiv's).
pub const DEBUG_PORT: u16 = 9090;

/// Bridge names of reference §3.
pub const VXLAN_BRIDGE: &str = "contivVxlanBridge";
pub const VLAN_BRIDGE: &str = "contivVlanBridge";
/// The host bridge (bridge mode): the host's port and the pods' host-access ports. Contiv
/// declared the kind (controller port 6635) but never created it; the name follows the other
/// two.
pub const HOST_BRIDGE: &str = "contivHostBridge";

#[derive(Parser, Debug, Clone)]
#[command(
    name = "netplugin",
    about = "Contiv host agent: OVS, pods, CNI",
    version
)]
pub struct Args {
    /// Cluster mode: docker, kubernetes, swarm-mode or test.
    #[arg(long, visible_aliases = ["plugin-mode", "cluster-mode"], env = "CONTIV_NETPLUGIN_MODE")]
    pub mode: String,
    /// Network mode: vlan or vxlan.
    #[arg(
        long,
        visible_alias = "network-mode",
        env = "CONTIV_NETPLUGIN_NET_MODE"
    )]
    pub netmode: String,
    /// Forwarding mode: bridge or routing.
    #[arg(
        long,
        visible_alias = "forward-mode",
        env = "CONTIV_NETPLUGIN_FORWARD_MODE"
    )]
    pub fwdmode: String,
    /// etcd endpoints, comma separated (every member of the cluster; requests fail over between them).
    #[arg(long, visible_alias = "etcd", env = "CONTIV_NETPLUGIN_ETCD_ENDPOINTS")]
    pub etcd_endpoints: Option<String>,
    /// CA certificate (PEM) the etcd server certificates are checked against; https:// endpoints.
    #[arg(long, env = "CONTIV_NETPLUGIN_ETCD_CACERT")]
    pub etcd_cacert: Option<PathBuf>,
    /// Client certificate (PEM) for an etcd that requires client certificates.
    #[arg(long, env = "CONTIV_NETPLUGIN_ETCD_CERT")]
    pub etcd_cert: Option<PathBuf>,
    /// Private key (PEM) of --etcd-cert.
    #[arg(long, env = "CONTIV_NETPLUGIN_ETCD_KEY")]
    pub etcd_key: Option<PathBuf>,
    /// Consul is not supported; given, it is rejected.
    #[arg(
        long,
        visible_alias = "consul",
        env = "CONTIV_NETPLUGIN_CONSUL_ENDPOINTS"
    )]
    pub consul_endpoints: Option<String>,
    #[arg(long, env = "CONTIV_NETPLUGIN_LOG_LEVEL", default_value = "INFO")]
    pub log_level: String,
    #[arg(
        long,
        visible_alias = "json-log",
        env = "CONTIV_NETPLUGIN_USE_JSON_LOG"
    )]
    pub use_json_log: bool,
    /// Accepted for compatibility; logs go to stderr.
    #[arg(long, visible_alias = "syslog", env = "CONTIV_NETPLUGIN_USE_SYSLOG")]
    pub use_syslog: bool,
    #[arg(
        long,
        env = "CONTIV_NETPLUGIN_SYSLOG_URL",
        default_value = "udp://127.0.0.1:514"
    )]
    pub syslog_url: String,
    /// This host's label (default: the kernel hostname).
    #[arg(long, visible_alias = "host-label", env = "CONTIV_NETPLUGIN_HOST")]
    pub host: Option<String>,
    /// VTEP address (default: the address of the default route's interface).
    #[arg(long, env = "CONTIV_NETPLUGIN_VTEP_IP")]
    pub vtep_ip: Option<Ipv4Addr>,
    /// Control address (default: as the VTEP address).
    #[arg(long, env = "CONTIV_NETPLUGIN_CONTROL_IP")]
    pub ctrl_ip: Option<Ipv4Addr>,
    /// VLAN uplink interfaces, comma separated (required with netmode vlan).
    #[arg(long, visible_alias = "vlan-if", env = "CONTIV_NETPLUGIN_VLAN_UPLINKS")]
    pub vlan_uplinks: Option<String>,
    #[arg(long, env = "CONTIV_NETPLUGIN_VXLAN_PORT", default_value_t = 4789)]
    pub vxlan_port: u16,
    /// ovsdb-server's unix socket.
    #[arg(
        long,
        env = "CONTIV_NETPLUGIN_OVSDB_SOCKET",
        default_value = "/var/run/openvswitch/db.sock"
    )]
    pub ovsdb_socket: PathBuf,
    /// The CNI server's unix socket.
    #[arg(long, env = "CONTIV_NETPLUGIN_CNI_SOCKET", default_value = cni::api::DEFAULT_SOCKET)]
    pub cni_socket: PathBuf,
    /// Docker mode: the unix socket of the remote network and IPAM driver. Docker finds
    /// plugins by socket name in `/run/docker/plugins/`; the driver name is the file name
    /// without `.sock` (`netplugin`).
    #[arg(
        long,
        env = "CONTIV_NETPLUGIN_DOCKER_PLUGIN_SOCKET",
        default_value = "/run/docker/plugins/netplugin.sock"
    )]
    pub docker_plugin_socket: PathBuf,
    /// Docker mode: the Docker API (container names and labels for endpoints and DNS).
    #[arg(
        long,
        env = "DOCKER_HOST",
        default_value = "unix:///var/run/docker.sock"
    )]
    pub docker_host: String,
    /// Inline DNS: answer endpoints' DNS queries (punted to the agent) from the tenant's
    /// service, group and container names; forward the rest to `--dns-upstream`.
    #[arg(long, env = "CONTIV_NETPLUGIN_DNS_ENABLE")]
    pub dns_enable: bool,
    /// Inline DNS: the resolver (`IP` or `IP:PORT`) queries for other names go to; default:
    /// the first nameserver of /etc/resolv.conf.
    #[arg(long, env = "CONTIV_NETPLUGIN_DNS_UPSTREAM")]
    pub dns_upstream: Option<String>,
    /// OpenFlow listen address of the VXLAN bridge's agent: `tcp:IP:PORT` or `unix:PATH`.
    #[arg(
        long,
        env = "CONTIV_NETPLUGIN_VXLAN_OF_LISTEN",
        default_value = "tcp:127.0.0.1:6633"
    )]
    pub vxlan_of_listen: String,
    /// OpenFlow listen address of the VLAN bridge's agent: `tcp:IP:PORT` or `unix:PATH`.
    #[arg(
        long,
        env = "CONTIV_NETPLUGIN_VLAN_OF_LISTEN",
        default_value = "tcp:127.0.0.1:6634"
    )]
    pub vlan_of_listen: String,
    /// OpenFlow listen address of the host bridge's agent (bridge mode): `tcp:IP:PORT` or
    /// `unix:PATH`.
    #[arg(
        long,
        env = "CONTIV_NETPLUGIN_HOST_OF_LISTEN",
        default_value = "tcp:127.0.0.1:6635"
    )]
    pub host_of_listen: String,
    /// Debug REST listen address (default: the control IP, port 9090).
    #[arg(long, env = "CONTIV_NETPLUGIN_DEBUG_LISTEN")]
    pub debug_listen: Option<SocketAddr>,
    /// Tokens ("<token> admin" lines) that may call the debug listener's destructive routes
    /// (`DELETE /debug/reclaimEndpoint/...`); without it those routes are refused.
    #[arg(long, env = "CONTIV_NETPLUGIN_DEBUG_TOKEN_FILE")]
    pub debug_token_file: Option<PathBuf>,
    /// File holding the bearer token netplugin sends to netmaster (a netmaster `plugin` or
    /// `admin` token; the first word of the first line that is not a comment).
    #[arg(long, env = "CONTIV_NETPLUGIN_NETMASTER_TOKEN_FILE")]
    pub netmaster_token_file: Option<PathBuf>,
    /// CA (PEM) netmaster's certificate is checked against; with it, a netmaster found in the
    /// registry is called over https.
    #[arg(long, env = "CONTIV_NETPLUGIN_NETMASTER_CACERT")]
    pub netmaster_cacert: Option<PathBuf>,
    /// Where the VXLAN agent serves ofnet RPC (`OfnetAgent.*`, `PolicyAgent.*`) for the master
    /// (Contiv: port 9002), and the address the master calls back; default: the control IP,
    /// port 9002. An address of this host, never the unspecified one; port 0 picks one.
    #[arg(long, env = "CONTIV_NETPLUGIN_OFNET_RPC_LISTEN")]
    pub ofnet_rpc_listen: Option<SocketAddr>,
    /// netmaster URL; default: the `netmaster` service registered in etcd.
    #[arg(long, env = "CONTIV_NETPLUGIN_NETMASTER")]
    pub netmaster: Option<String>,
    /// Network namespace where OVS's datapath runs (veth host ends, uplinks); default: ours.
    #[arg(long, env = "CONTIV_NETPLUGIN_HOST_NETNS")]
    pub host_netns: Option<PathBuf>,
    /// OVS datapath type of the bridges: `system` (kernel) or `netdev` (userspace).
    #[arg(long, env = "CONTIV_NETPLUGIN_OVS_DATAPATH", default_value = "system")]
    pub ovs_datapath: String,
    /// Kubernetes mode: the Contiv config file naming the Kubernetes API server and its token.
    /// Absent, or without `K8S_API_SERVER`: pod labels come from the CNI request only.
    #[arg(long, env = "CONTIV_NETPLUGIN_KUBE_CONFIG", default_value = crate::kubeapi::DEFAULT_CONFIG_PATH)]
    pub kube_config: PathBuf,
    /// Routing mode with BGP: where the BGP speaker (gobgpd) keeps its configuration, pid and
    /// log.
    #[arg(
        long,
        env = "CONTIV_NETPLUGIN_BGP_DIR",
        default_value = "/var/run/contiv/bgp"
    )]
    pub bgp_dir: PathBuf,
    /// Drop ovs-vswitchd's cached datapath flows after each flow change: `auto` (only on the
    /// userspace datapath of an Open vSwitch release that can keep a stale cached flow after
    /// a change: 2.8–2.17.7, 3.0.0–3.0.4, 3.1.0–3.1.2), `always` or `never`.
    #[arg(long, env = "CONTIV_NETPLUGIN_DATAPATH_FLUSH", default_value = "auto")]
    pub datapath_flush: String,
    /// ovs-vswitchd's control socket (what `ovs-appctl -t` takes); default: found next to
    /// `--ovsdb-socket` (`ovs-vswitchd.ctl`, or `ovs-vswitchd.<pid>.ctl`).
    #[arg(long, env = "CONTIV_NETPLUGIN_OVS_VSWITCHD_CTL")]
    pub ovs_vswitchd_ctl: Option<PathBuf>,
    /// Addresses of each network netmaster holds for this host's next pods (0–16; 0: none),
    /// so a pod's flows go to the switch before netmaster answers.
    #[arg(
        long,
        env = "CONTIV_NETPLUGIN_ADDRESS_RESERVE",
        default_value_t = 4,
        value_parser = clap::value_parser!(u32).range(0..=16)
    )]
    pub address_reserve: u32,
}

/// Where an agent accepts its switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfListen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl OfListen {
    fn parse(flag: &'static str, text: &str) -> Result<OfListen, ConfigError> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.starts_with('/') {
                return Ok(OfListen::Unix(PathBuf::from(path)));
            }
        } else if let Some(addr) = text.strip_prefix("tcp:")
            && let Ok(addr) = addr.parse()
        {
            return Ok(OfListen::Tcp(addr));
        }
        Err(ConfigError::Invalid {
            flag,
            value: text.to_string(),
            rule: "must be tcp:IP:PORT or unix:/absolute/path",
        })
    }

    /// The OVS controller target that reaches this listener.
    pub fn controller_target(&self) -> String {
        match self {
            OfListen::Tcp(addr) if addr.ip().is_unspecified() => {
                format!("tcp:127.0.0.1:{}", addr.port())
            }
            OfListen::Tcp(addr) => format!("tcp:{addr}"),
            OfListen::Unix(path) => format!("unix:{}", path.display()),
        }
    }
}

/// A checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub mode: String,
    pub netmode: String,
    pub fwdmode: String,
    pub etcd_endpoints: Vec<String>,
    /// TLS to etcd (`--etcd-cacert`, `--etcd-cert`, `--etcd-key`).
    pub etcd_ca: Option<PathBuf>,
    pub etcd_cert: Option<PathBuf>,
    pub etcd_key: Option<PathBuf>,
    pub host: String,
    pub vtep_ip: Ipv4Addr,
    pub ctrl_ip: Ipv4Addr,
    pub vlan_uplinks: Vec<String>,
    pub vxlan_port: u16,
    pub ovsdb_socket: PathBuf,
    pub cni_socket: PathBuf,
    pub docker_plugin_socket: PathBuf,
    pub docker_host: String,
    pub dns_enable: bool,
    /// Where the inline DNS forwards names it does not know; `None`: nowhere (SERVFAIL).
    pub dns_upstream: Option<SocketAddr>,
    pub vxlan_of_listen: OfListen,
    pub vlan_of_listen: OfListen,
    pub host_of_listen: OfListen,
    pub debug_listen: SocketAddr,
    /// Tokens allowed to call the debug listener's destructive routes; `None`: refused.
    pub debug_tokens: Option<std::sync::Arc<master::auth::Tokens>>,
    pub ofnet_rpc_listen: SocketAddr,
    pub netmaster: Option<String>,
    /// Bearer token for netmaster.
    pub netmaster_token: Option<Secret>,
    /// CA file for an https netmaster (checked readable at start).
    pub netmaster_cacert: Option<PathBuf>,
    pub host_netns: Option<PathBuf>,
    pub ovs_datapath: String,
    pub log_level: String,
    pub json_log: bool,
    pub kube_config: PathBuf,
    pub bgp_dir: PathBuf,
    pub datapath_flush: crate::vswitchd::FlushPolicy,
    pub ovs_vswitchd_ctl: Option<PathBuf>,
    /// Addresses per network held in reserve for this host's next pods (`--address-reserve`).
    pub address_reserve: u32,
}

impl Config {
    /// How the bridges forward (`--fwdmode`): routing runs the VXLAN bridge as `vrouter`.
    pub fn fwd_mode(&self) -> ofnet::FwdMode {
        if self.fwdmode == "routing" {
            ofnet::FwdMode::Routing
        } else {
            ofnet::FwdMode::Bridge
        }
    }
}

/// A bad option.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--{flag} {value:?}: {rule}")]
    Invalid {
        flag: &'static str,
        value: String,
        rule: &'static str,
    },
    #[error("--{0} is required")]
    Missing(&'static str),
    #[error("consul is not supported; use --etcd-endpoints")]
    Consul,
    #[error("{}", master::daemon::VXLAN_BRIDGE_REFUSED)]
    VxlanBridge,
    /// A token, certificate or CA file cannot be used.
    #[error("{0}")]
    File(#[from] master::auth::AuthError),
}

/// A secret string whose `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// The token of a token file: the first word of the first line that is neither blank nor a
/// `#` comment.
pub fn read_token(
    flag: &'static str,
    path: &std::path::Path,
) -> Result<Secret, master::auth::AuthError> {
    let text = std::fs::read_to_string(path).map_err(|source| master::auth::AuthError::Read {
        flag,
        path: path.to_path_buf(),
        source,
    })?;
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .and_then(|l| l.split_whitespace().next())
        .map(|t| Secret(t.to_string()))
        .ok_or_else(|| master::auth::AuthError::Invalid {
            flag,
            path: path.to_path_buf(),
            problem: "no token in the file".into(),
        })
}

fn one_of(
    flag: &'static str,
    value: &str,
    allowed: &[&str],
    rule: &'static str,
) -> Result<String, ConfigError> {
    if allowed.contains(&value) {
        Ok(value.to_string())
    } else {
        Err(ConfigError::Invalid {
            flag,
            value: value.to_string(),
            rule,
        })
    }
}

impl Args {
    /// Check the options and fill in defaults from the machine (hostname, default-route IP).
    pub fn into_config(self) -> Result<Config, ConfigError> {
        if self.consul_endpoints.is_some() {
            return Err(ConfigError::Consul);
        }
        let mode = one_of(
            "mode",
            &self.mode,
            &["docker", "kubernetes", "swarm-mode", "test"],
            "must be docker, kubernetes, swarm-mode or test",
        )?;
        let netmode = one_of(
            "netmode",
            &self.netmode,
            &["vlan", "vxlan"],
            "must be vlan or vxlan",
        )?;
        let fwdmode = one_of(
            "fwdmode",
            &self.fwdmode,
            &["bridge", "routing"],
            "must be bridge or routing",
        )?;
        if netmode == "vxlan" && fwdmode == "bridge" {
            return Err(ConfigError::VxlanBridge);
        }
        let etcd_endpoints: Vec<String> = self
            .etcd_endpoints
            .as_deref()
            .unwrap_or("http://127.0.0.1:2379")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if etcd_endpoints.is_empty() {
            return Err(ConfigError::Missing("etcd-endpoints"));
        }
        let vlan_uplinks: Vec<String> = self
            .vlan_uplinks
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if netmode == "vlan" && vlan_uplinks.is_empty() {
            return Err(ConfigError::Missing("vlan-uplinks"));
        }
        let ovs_datapath = one_of(
            "ovs-datapath",
            &self.ovs_datapath,
            &["system", "netdev"],
            "must be system or netdev",
        )?;
        let datapath_flush = crate::vswitchd::FlushPolicy::parse(&self.datapath_flush).ok_or(
            ConfigError::Invalid {
                flag: "datapath-flush",
                value: self.datapath_flush.clone(),
                rule: "must be auto, always or never",
            },
        )?;
        let host = match self.host {
            Some(h) if !h.is_empty() => h,
            _ => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "localhost".into()),
        };
        let default_ip = default_route_ip();
        let vtep_ip = self.vtep_ip.unwrap_or(default_ip);
        let ctrl_ip = self.ctrl_ip.unwrap_or(vtep_ip);
        let ofnet_rpc_listen = self.ofnet_rpc_listen.unwrap_or(SocketAddr::new(
            std::net::IpAddr::V4(ctrl_ip),
            crate::daemon::AGENT_RPC_PORT,
        ));
        if ofnet_rpc_listen.ip().is_unspecified() {
            return Err(ConfigError::Invalid {
                flag: "ofnet-rpc-listen",
                value: ofnet_rpc_listen.to_string(),
                rule: "must be an address of this host (default: the control IP), not the unspecified address",
            });
        }
        if let Some(ns) = &self.host_netns
            && !ns.is_absolute()
        {
            return Err(ConfigError::Invalid {
                flag: "host-netns",
                value: ns.display().to_string(),
                rule: "must be an absolute path such as /var/run/netns/NAME",
            });
        }
        let dns_upstream = match &self.dns_upstream {
            Some(text) => Some(parse_upstream(text).ok_or_else(|| ConfigError::Invalid {
                flag: "dns-upstream",
                value: text.clone(),
                rule: "must be IP or IP:PORT",
            })?),
            None => crate::dns::system_resolver(),
        };
        if !self.docker_plugin_socket.is_absolute() {
            return Err(ConfigError::Invalid {
                flag: "docker-plugin-socket",
                value: self.docker_plugin_socket.display().to_string(),
                rule: "must be an absolute path such as /run/docker/plugins/netplugin.sock",
            });
        }
        if !self.cni_socket.is_absolute() {
            return Err(ConfigError::Invalid {
                flag: "cni-socket",
                value: self.cni_socket.display().to_string(),
                rule: "must be an absolute path",
            });
        }
        let debug_tokens = match &self.debug_token_file {
            Some(path) => Some(std::sync::Arc::new(master::auth::Tokens::load(
                "--debug-token-file",
                path,
            )?)),
            None => None,
        };
        let netmaster_token = match &self.netmaster_token_file {
            Some(path) => Some(read_token("--netmaster-token-file", path)?),
            None => None,
        };
        if let Some(ca) = &self.netmaster_cacert {
            master::auth::client_config("--netmaster-cacert", ca)?;
        }
        Ok(Config {
            mode,
            netmode,
            fwdmode,
            etcd_endpoints,
            etcd_ca: self.etcd_cacert,
            etcd_cert: self.etcd_cert,
            etcd_key: self.etcd_key,
            host,
            vtep_ip,
            ctrl_ip,
            vlan_uplinks,
            vxlan_port: self.vxlan_port,
            ovsdb_socket: self.ovsdb_socket,
            cni_socket: self.cni_socket,
            docker_plugin_socket: self.docker_plugin_socket,
            docker_host: self.docker_host,
            dns_enable: self.dns_enable,
            dns_upstream,
            vxlan_of_listen: OfListen::parse("vxlan-of-listen", &self.vxlan_of_listen)?,
            vlan_of_listen: OfListen::parse("vlan-of-listen", &self.vlan_of_listen)?,
            host_of_listen: OfListen::parse("host-of-listen", &self.host_of_listen)?,
            debug_listen: self
                .debug_listen
                .unwrap_or(SocketAddr::new(IpAddr::V4(ctrl_ip), DEBUG_PORT)),
            debug_tokens,
            ofnet_rpc_listen,
            netmaster: self.netmaster.filter(|s| !s.is_empty()),
            netmaster_token,
            netmaster_cacert: self.netmaster_cacert,
            host_netns: self.host_netns,
            ovs_datapath,
            log_level: self.log_level,
            json_log: self.use_json_log,
            kube_config: self.kube_config,
            bgp_dir: self.bgp_dir,
            datapath_flush,
            ovs_vswitchd_ctl: self.ovs_vswitchd_ctl,
            address_reserve: self.address_reserve,
        })
    }
}

/// `IP`, `IP:PORT` or `[IPv6]:PORT` (port 53 when absent).
fn parse_upstream(text: &str) -> Option<SocketAddr> {
    text.parse::<SocketAddr>().ok().or_else(|| {
        text.parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, 53))
    })
}

/// The source address the kernel would use for the default route (no packet is sent: a
/// connected UDP socket only selects the route). Loopback when there is no default route.
fn default_route_ip() -> Ipv4Addr {
    let probe = || -> std::io::Result<IpAddr> {
        let socket = UdpSocket::bind("0.0.0.0:0")?;
        socket.connect("192.0.2.1:9")?;
        Ok(socket.local_addr()?.ip())
    };
    match probe() {
        Ok(IpAddr::V4(ip)) => ip,
        _ => Ipv4Addr::LOCALHOST,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<Config, ConfigError> {
        let mut argv = vec!["netplugin"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv).unwrap().into_config()
    }

    #[test]
    fn vlan_mode_needs_uplinks_and_vxlan_needs_routing() {
        let base = ["--mode", "test", "--netmode", "vlan", "--fwdmode", "bridge"];
        assert!(matches!(
            parse(&base),
            Err(ConfigError::Missing("vlan-uplinks"))
        ));
        let mut ok = base.to_vec();
        ok.extend(["--vlan-uplinks", "eth1, eth2", "--host", "h1"]);
        let cfg = parse(&ok).unwrap();
        assert_eq!(cfg.vlan_uplinks, ["eth1", "eth2"]);
        assert_eq!(cfg.host, "h1");
        assert_eq!(cfg.etcd_endpoints, ["http://127.0.0.1:2379"]);
        assert_eq!(
            cfg.vxlan_of_listen.controller_target(),
            "tcp:127.0.0.1:6633"
        );
        let vx = [
            "--mode",
            "test",
            "--netmode",
            "vxlan",
            "--fwdmode",
            "bridge",
        ];
        assert!(matches!(parse(&vx), Err(ConfigError::VxlanBridge)));
    }

    #[test]
    fn the_agent_rpc_listens_on_the_control_address_never_the_unspecified_one() {
        let base = [
            "--mode",
            "test",
            "--netmode",
            "vxlan",
            "--fwdmode",
            "routing",
        ];
        let cfg = parse(
            &[
                &base[..],
                &["--vtep-ip", "10.0.0.5", "--ctrl-ip", "10.1.0.5"],
            ]
            .concat(),
        )
        .unwrap();
        assert_eq!(cfg.ofnet_rpc_listen.to_string(), "10.1.0.5:9002");
        let cfg = parse(&[&base[..], &["--vtep-ip", "10.0.0.5"]].concat()).unwrap();
        assert_eq!(cfg.ofnet_rpc_listen.to_string(), "10.0.0.5:9002");
        let err = parse(&[&base[..], &["--ofnet-rpc-listen", "0.0.0.0:9002"]].concat())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ofnet-rpc-listen") && err.contains("0.0.0.0:9002"),
            "{err}"
        );
    }

    #[test]
    fn bad_values_name_the_flag() {
        let err = parse(&[
            "--mode",
            "k8s",
            "--netmode",
            "vxlan",
            "--fwdmode",
            "routing",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("--mode \"k8s\""), "{err}");
        let err = parse(&[
            "--mode",
            "test",
            "--netmode",
            "vxlan",
            "--fwdmode",
            "routing",
            "--vlan-of-listen",
            "unix:relative",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("vlan-of-listen"), "{err}");
        let cfg = parse(&[
            "--mode",
            "test",
            "--netmode",
            "vxlan",
            "--fwdmode",
            "routing",
            "--vxlan-of-listen",
            "unix:/run/x.sock",
        ])
        .unwrap();
        assert_eq!(cfg.vxlan_of_listen.controller_target(), "unix:/run/x.sock");
    }

    #[test]
    fn security_files_are_read_at_start_and_the_debug_listener_binds_the_control_ip() {
        let base = [
            "--mode",
            "test",
            "--netmode",
            "vxlan",
            "--fwdmode",
            "routing",
            "--ctrl-ip",
            "192.0.2.7",
        ];
        let cfg = parse(&base).unwrap();
        assert_eq!(cfg.debug_listen, "192.0.2.7:9090".parse().unwrap());
        assert!(cfg.debug_tokens.is_none() && cfg.netmaster_token.is_none());
        let with = |extra: &[&str]| {
            let mut argv = base.to_vec();
            argv.extend_from_slice(extra);
            parse(&argv)
        };
        let err = with(&["--netmaster-token-file", "/nonexistent/token"])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--netmaster-token-file /nonexistent/token: cannot read"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "# netplugin's\n\n  plugin-token-0123456789  \n").unwrap();
        let cfg = with(&["--netmaster-token-file", token.to_str().unwrap()]).unwrap();
        assert_eq!(
            cfg.netmaster_token.as_ref().unwrap().0,
            "plugin-token-0123456789"
        );
        assert_eq!(format!("{:?}", cfg.netmaster_token), "Some(Secret(..))");
        let err = with(&["--debug-token-file", token.to_str().unwrap()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--debug-token-file") && err.contains("line 3"),
            "{err}"
        );
        let err = with(&["--netmaster-cacert", token.to_str().unwrap()])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--netmaster-cacert "), "{err}");
    }
}
