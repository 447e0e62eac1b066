//! netmaster: parse flags and environment (reference §3), then run the daemon until SIGINT/SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use master::daemon::{self, Config};

/// Contiv-compatible network master.
#[derive(Debug, Parser)]
#[command(name = "netmaster", version)]
struct Flags {
    /// Cluster mode: docker, kubernetes, swarm-mode or test.
    #[arg(long = "mode", visible_aliases = ["plugin-mode", "cluster-mode"], env = "CONTIV_NETMASTER_MODE")]
    mode: String,
    /// Network mode: vlan or vxlan.
    #[arg(
        long = "netmode",
        visible_alias = "network-mode",
        env = "CONTIV_NETMASTER_NET_MODE"
    )]
    netmode: String,
    /// Forwarding mode: bridge or routing.
    #[arg(
        long = "fwdmode",
        visible_alias = "forward-mode",
        env = "CONTIV_NETMASTER_FORWARD_MODE"
    )]
    fwdmode: String,
    /// etcd endpoints (comma list of http:// URLs).
    #[arg(
        long = "etcd",
        visible_alias = "etcd-endpoints",
        env = "CONTIV_NETMASTER_ETCD_ENDPOINTS",
        value_delimiter = ',',
        default_value = "http://127.0.0.1:2379"
    )]
    etcd: Vec<String>,
    /// CA certificate (PEM) the etcd server certificates are checked against; https:// endpoints.
    #[arg(long = "etcd-cacert", env = "CONTIV_NETMASTER_ETCD_CACERT")]
    etcd_cacert: Option<PathBuf>,
    /// Client certificate (PEM) for an etcd that requires client certificates.
    #[arg(long = "etcd-cert", env = "CONTIV_NETMASTER_ETCD_CERT")]
    etcd_cert: Option<PathBuf>,
    /// Private key (PEM) of --etcd-cert.
    #[arg(long = "etcd-key", env = "CONTIV_NETMASTER_ETCD_KEY")]
    etcd_key: Option<PathBuf>,
    /// Certificate chain (PEM) the REST API is served with over TLS (with --tls-key).
    #[arg(long = "tls-cert", env = "CONTIV_NETMASTER_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long = "tls-key", env = "CONTIV_NETMASTER_TLS_KEY")]
    tls_key: Option<PathBuf>,
    /// CA (PEM) a follower checks the leader's certificate against; default: the --tls-cert chain.
    #[arg(long = "tls-cacert", env = "CONTIV_NETMASTER_TLS_CACERT")]
    tls_cacert: Option<PathBuf>,
    /// Bearer tokens of the REST API: one "<token> <role>" a line, role admin, plugin or read.
    #[arg(long = "token-file", env = "CONTIV_NETMASTER_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// Fabric type: default, aci or aci-opflex.
    #[arg(
        long = "infra",
        visible_alias = "infra-type",
        env = "CONTIV_NETMASTER_INFRA",
        default_value = "default"
    )]
    infra: String,
    /// netplugin's Docker network and IPAM driver name (Docker cluster mode).
    #[arg(
        long = "name",
        visible_alias = "plugin-name",
        env = "CONTIV_NETMASTER_PLUGIN_NAME",
        default_value = "netplugin"
    )]
    plugin_name: String,
    /// Docker cluster mode: a Docker engine (`unix:///var/run/docker.sock`) to create the
    /// Docker networks of Contiv networks and groups on; repeat or comma-separate for several.
    #[arg(
        long = "docker-host",
        env = "CONTIV_NETMASTER_DOCKER_HOST",
        value_delimiter = ','
    )]
    docker_host: Vec<String>,
    /// External REST listener.
    #[arg(
        long = "listen-url",
        visible_alias = "external-address",
        env = "CONTIV_NETMASTER_EXTERNAL_ADDRESS",
        default_value = "0.0.0.0:9999"
    )]
    listen_url: String,
    /// Control address (ip:port) other netmasters and netplugins use; default: host IP and listen port.
    #[arg(
        long = "control-url",
        visible_alias = "internal-address",
        env = "CONTIV_NETMASTER_INTERNAL_ADDRESS",
        default_value = ""
    )]
    control_url: String,
    /// Log level: DEBUG, INFO, WARN or ERROR.
    #[arg(
        long = "log-level",
        env = "CONTIV_NETMASTER_LOG_LEVEL",
        default_value = "INFO"
    )]
    log_level: String,
    /// Log as JSON lines.
    #[arg(
        long = "use-json-log",
        visible_alias = "json-log",
        env = "CONTIV_NETMASTER_USE_JSON_LOG"
    )]
    json_log: bool,
    /// Accepted for compatibility; logs go to stderr.
    #[arg(
        long = "use-syslog",
        visible_alias = "syslog",
        env = "CONTIV_NETMASTER_USE_SYSLOG"
    )]
    syslog: bool,
    /// Accepted for compatibility.
    #[arg(
        long = "syslog-url",
        env = "CONTIV_NETMASTER_SYSLOG_URL",
        default_value = "udp://127.0.0.1:514"
    )]
    syslog_url: String,
    /// Leader lock TTL in seconds.
    #[arg(
        long = "lock-ttl",
        env = "CONTIV_NETMASTER_LOCK_TTL",
        default_value_t = 30
    )]
    lock_ttl: u64,
    /// Port of the ofnet master RPC server (on the control address' host) while leader.
    #[arg(
        long = "ofnet-port",
        env = "CONTIV_NETMASTER_OFNET_PORT",
        default_value_t = daemon::OFNET_MASTER_PORT
    )]
    ofnet_port: u16,
    /// Seconds a departed host's endpoints stay before they are withdrawn from other hosts.
    #[arg(
        long = "ofnet-grace",
        env = "CONTIV_NETMASTER_OFNET_GRACE",
        default_value_t = 24 * 3600
    )]
    ofnet_grace: u64,
    /// Seconds between the leader's sweeps for address reserves of hosts whose netplugin is
    /// gone; a host missing from two sweeps in a row gets its reserves released.
    #[arg(
        long = "reserve-sweep",
        env = "CONTIV_NETMASTER_RESERVE_SWEEP",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    reserve_sweep: u64,
}

/// Contiv's exit code for bad options.
const EXIT_BAD_OPTION: u8 = 22;

fn main() -> ExitCode {
    let flags = match Flags::try_parse() {
        Ok(f) => f,
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(EXIT_BAD_OPTION);
        }
    };
    let level = match flags.log_level.to_ascii_uppercase().as_str() {
        "DEBUG" => "debug",
        "WARN" | "WARNING" => "warn",
        "ERROR" => "error",
        _ => "info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    if flags.json_log {
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    } else {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    tracing::debug!(syslog = flags.syslog, syslog_url = %flags.syslog_url, "compatibility flags");

    let mut config = Config::new("", &flags.mode, &flags.netmode, &flags.fwdmode);
    config.etcd_endpoints = flags.etcd;
    config.etcd_ca = flags.etcd_cacert;
    config.etcd_cert = flags.etcd_cert;
    config.etcd_key = flags.etcd_key;
    config.infra = flags.infra;
    config.docker_hosts = flags.docker_host;
    config.plugin_name = flags.plugin_name;
    config.security = master::auth::SecurityFiles {
        tls_cert: flags.tls_cert,
        tls_key: flags.tls_key,
        tls_ca: flags.tls_cacert,
        token_file: flags.token_file,
    };
    config.listen_url = flags.listen_url;
    config.control_url = flags.control_url;
    config.lock_ttl = Duration::from_secs(flags.lock_ttl.max(2));
    config.ofnet_port = flags.ofnet_port;
    config.ofnet_grace = Duration::from_secs(flags.ofnet_grace);
    config.reserve_sweep = Duration::from_secs(flags.reserve_sweep);

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("netmaster: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(daemon::run(config, shutdown_signal()));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(
            e @ (daemon::DaemonError::Option { .. }
            | daemon::DaemonError::VxlanBridge
            | daemon::DaemonError::Etcd(_)
            | daemon::DaemonError::Security(_)),
        ) => {
            eprintln!("netmaster: {e}");
            ExitCode::from(EXIT_BAD_OPTION)
        }
        Err(e) => {
            eprintln!("netmaster: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
