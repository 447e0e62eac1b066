//! The command tree and its flags (reference §8), as clap derives.

use clap::{Args, Parser, Subcommand};

/// Contiv network control.
#[derive(Debug, Parser)]
#[command(
    name = "netctl",
    version,
    about = "Manage the container network through netmaster"
)]
pub struct Cli {
    /// netmaster URL.
    #[arg(
        long,
        env = "NETMASTER",
        default_value = "http://netmaster:9999",
        global = true
    )]
    pub netmaster: String,
    /// Accepted for compatibility; certificates are always checked (give --cacert).
    #[arg(long, env = "INSECURE", global = true)]
    pub insecure: bool,
    /// Bearer token for a netmaster started with --token-file (prefer $NETCTL_TOKEN: a
    /// command line is visible to other users in `ps`).
    #[arg(long, env = "NETCTL_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// CA certificate (PEM) an https:// netmaster's certificate is checked against.
    #[arg(long, env = "NETCTL_CACERT", global = true)]
    pub cacert: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Client and server versions.
    Version,
    /// Tenants.
    #[command(subcommand)]
    Tenant(TenantCmd),
    /// Networks.
    #[command(subcommand, visible_alias = "net")]
    Network(NetworkCmd),
    /// Endpoint groups.
    #[command(subcommand, visible_alias = "epg")]
    Group(GroupCmd),
    /// Endpoints.
    #[command(subcommand, visible_alias = "ep")]
    Endpoint(EndpointCmd),
    /// Network profiles (bandwidth, DSCP).
    #[command(subcommand)]
    Netprofile(NetprofileCmd),
    /// Policies and their rules.
    #[command(subcommand)]
    Policy(PolicyCmd),
    /// External contract groups.
    #[command(subcommand, name = "external-contracts")]
    ExternalContracts(ContractsCmd),
    /// Global settings.
    #[command(subcommand)]
    Global(GlobalCmd),
    /// ACI gateway settings.
    #[command(subcommand, name = "aci-gw")]
    AciGw(AciGwCmd),
    /// BGP peering per host.
    #[command(subcommand)]
    Bgp(BgpCmd),
    /// Application profiles.
    #[command(subcommand, name = "app-profile")]
    AppProfile(AppProfileCmd),
    /// Load-balanced services.
    #[command(subcommand)]
    Service(ServiceCmd),
    /// Why a packet is delivered or dropped: walk it through the hosts' flow tables offline.
    Trace(TraceArgs),
}

/// `netctl trace`.
#[derive(Debug, Args, Clone)]
pub struct TraceArgs {
    /// The source: an endpoint id (`10.1.1.2:default`), its IP address, or a pod
    /// `namespace/name`.
    #[arg(long)]
    pub from: String,
    /// The destination: `IP` or `IP:port` (`[v6]:port`).
    #[arg(long)]
    pub to: String,
    /// tcp, udp, icmp or arp (an ARP request for the destination).
    #[arg(long, default_value = "tcp")]
    pub proto: String,
    /// Source port (tcp, udp).
    #[arg(long, default_value_t = 40000)]
    pub sport: u16,
    /// The netplugin debug listeners to ask for their tables (`http://host:9090`), one per
    /// host; comma-separated or repeated. Default: every host registered with netmaster.
    #[arg(long, env = "NETPLUGINS", value_delimiter = ',')]
    pub netplugin: Vec<String>,
    /// The bridge: vxlan or vlan.
    #[arg(long, default_value = "vxlan")]
    pub bridge: String,
    /// Assumed conntrack state after each `ct` action (`trk,est`); default: a new connection.
    #[arg(long = "ct-next")]
    pub ct_next: Vec<String>,
    /// JSON output.
    #[arg(short, long)]
    pub json: bool,
}

/// Listing flags.
#[derive(Debug, Args, Clone)]
pub struct ListFlags {
    /// Tenant.
    #[arg(short, long, default_value = "default")]
    pub tenant: String,
    /// All tenants.
    #[arg(short, long)]
    pub all: bool,
    /// JSON output.
    #[arg(short, long)]
    pub json: bool,
    /// Names only.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args, Clone)]
pub struct TenantFlag {
    /// Tenant.
    #[arg(short, long, default_value = "default")]
    pub tenant: String,
}

#[derive(Debug, Subcommand)]
pub enum TenantCmd {
    #[command(visible_alias = "list")]
    Ls(ListFlags),
    Create {
        name: String,
    },
    #[command(visible_alias = "delete")]
    Rm {
        name: String,
    },
    Inspect {
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum NetworkCmd {
    #[command(visible_alias = "list")]
    Ls(ListFlags),
    Create {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
        /// data or infra.
        #[arg(short = 'n', long = "nw-type", default_value = "data")]
        nw_type: String,
        /// vlan or vxlan.
        #[arg(short, long, default_value = "vxlan")]
        encap: String,
        /// VLAN id or VNI (0 = automatic).
        #[arg(short, long = "pkt-tag", default_value_t = 0)]
        pkt_tag: i64,
        /// IPv4 subnet, `a.b.c.d/len` or `a.b.c.d-e.f.g.h/len`.
        #[arg(short, long)]
        subnet: String,
        #[arg(short, long, default_value = "")]
        gateway: String,
        #[arg(long = "subnetv6", visible_alias = "s6", default_value = "")]
        subnetv6: String,
        #[arg(long = "gatewayv6", visible_alias = "g6", default_value = "")]
        gatewayv6: String,
        #[arg(long = "nw-tag", visible_alias = "tag", default_value = "")]
        tag: String,
    },
    #[command(visible_alias = "delete")]
    Rm {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
    Inspect {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
}

#[derive(Debug, Subcommand)]
pub enum GroupCmd {
    #[command(visible_alias = "list")]
    Ls(ListFlags),
    Create {
        network: String,
        group: String,
        #[command(flatten)]
        t: TenantFlag,
        /// Policy (repeatable).
        #[arg(short, long)]
        policy: Vec<String>,
        #[arg(short = 'n', long = "networkprofile", default_value = "")]
        networkprofile: String,
        /// External contract group (repeatable).
        #[arg(short = 'e', long = "external-contract")]
        external_contract: Vec<String>,
        #[arg(short = 'r', long = "ip-pool", default_value = "")]
        ip_pool: String,
        #[arg(long = "epg-tag", visible_alias = "tag", default_value = "")]
        tag: String,
    },
    #[command(visible_alias = "delete")]
    Rm {
        group: String,
        #[command(flatten)]
        t: TenantFlag,
    },
    Inspect {
        group: String,
        #[command(flatten)]
        t: TenantFlag,
    },
}

#[derive(Debug, Subcommand)]
pub enum EndpointCmd {
    Inspect { id: String },
}

#[derive(Debug, Subcommand)]
pub enum NetprofileCmd {
    #[command(visible_alias = "list")]
    Ls(ListFlags),
    Create {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
        #[arg(short, long, default_value = "")]
        bandwidth: String,
        #[arg(short, long, default_value_t = 0)]
        dscp: i64,
        #[arg(short = 's', long, default_value_t = 0)]
        burst: i64,
    },
    #[command(visible_alias = "delete")]
    Rm {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
    Inspect {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
}

#[derive(Debug, Args)]
pub struct RuleFlags {
    #[arg(short, long, default_value_t = 1)]
    pub priority: i64,
    #[arg(short, long, default_value = "in")]
    pub direction: String,
    #[arg(short = 'g', long = "from-group", default_value = "")]
    pub from_group: String,
    #[arg(short = 'e', long = "to-group", default_value = "")]
    pub to_group: String,
    #[arg(short = 'n', long = "from-network", default_value = "")]
    pub from_network: String,
    #[arg(short = 'o', long = "to-network", default_value = "")]
    pub to_network: String,
    #[arg(short = 'i', long = "from-ip-address", default_value = "")]
    pub from_ip: String,
    #[arg(short = 's', long = "to-ip-address", default_value = "")]
    pub to_ip: String,
    #[arg(short = 'l', long, default_value = "")]
    pub protocol: String,
    #[arg(short = 'P', long, default_value_t = 0)]
    pub port: i64,
    #[arg(short = 'j', long, default_value = "allow")]
    pub action: String,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCmd {
    #[command(visible_alias = "list")]
    Ls(ListFlags),
    Create {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
    #[command(visible_alias = "delete")]
    Rm {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
    Inspect {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
    #[command(name = "rule-add")]
    RuleAdd {
        policy: String,
        rule_id: String,
        #[command(flatten)]
        t: TenantFlag,
        #[command(flatten)]
        rule: Box<RuleFlags>,
    },
    #[command(name = "rule-rm")]
    RuleRm {
        policy: String,
        rule_id: String,
        #[command(flatten)]
        t: TenantFlag,
    },
    #[command(name = "rule-ls")]
    RuleLs {
        policy: String,
        #[command(flatten)]
        l: ListFlags,
    },
}

#[derive(Debug, Subcommand)]
pub enum ContractsCmd {
    #[command(visible_alias = "list")]
    Ls(ListFlags),
    Create {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
        #[arg(short = 'c', long, conflicts_with = "provided")]
        consumed: bool,
        #[arg(short = 'p', long)]
        provided: bool,
        /// Contract DN (repeatable, at least one).
        #[arg(short = 'a', long = "contract", required = true)]
        contract: Vec<String>,
    },
    #[command(visible_alias = "delete")]
    Rm {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
}

#[derive(Debug, Subcommand)]
pub enum GlobalCmd {
    Info {
        #[arg(short, long)]
        json: bool,
    },
    Inspect,
    Set {
        #[arg(short = 'f', long = "fabric-mode")]
        fabric_mode: Option<String>,
        #[arg(short = 'v', long = "vlan-range")]
        vlan_range: Option<String>,
        #[arg(short = 'x', long = "vxlan-range")]
        vxlan_range: Option<String>,
        #[arg(short = 'b', long = "fwd-mode")]
        fwd_mode: Option<String>,
        #[arg(short = 'a', long = "arp-mode")]
        arp_mode: Option<String>,
        #[arg(short = 's', long = "private-subnet")]
        private_subnet: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AciGwCmd {
    Info {
        #[arg(short, long)]
        json: bool,
    },
    Inspect,
    Set {
        #[arg(short = 'p', long = "path-bindings", default_value = "")]
        path_bindings: String,
        #[arg(short = 'n', long = "node-bindings", default_value = "")]
        node_bindings: String,
        #[arg(short = 'd', long = "phys-dom", default_value = "")]
        phys_dom: String,
        #[arg(short = 'e', long = "enforce-policies", default_value = "yes")]
        enforce_policies: String,
        #[arg(short = 'i', long = "include-common-tenant", default_value = "no")]
        include_common_tenant: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum BgpCmd {
    #[command(visible_alias = "list")]
    Ls(ListFlags),
    Create {
        hostname: String,
        #[arg(long = "router-ip")]
        router_ip: String,
        #[arg(long = "as")]
        as_: String,
        #[arg(long = "neighbor-as")]
        neighbor_as: String,
        #[arg(long)]
        neighbor: String,
    },
    #[command(visible_alias = "delete")]
    Rm {
        hostname: String,
    },
    Inspect {
        hostname: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum AppProfileCmd {
    #[command(visible_alias = "list")]
    Ls(ListFlags),
    Create {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
        /// Comma list of groups.
        #[arg(short, long, default_value = "")]
        group: String,
    },
    Update {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
        #[arg(short, long, default_value = "")]
        group: String,
    },
    #[command(visible_alias = "delete")]
    Rm {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
    #[command(name = "group-ls")]
    GroupLs {
        name: String,
        #[command(flatten)]
        l: ListFlags,
    },
}

#[derive(Debug, Subcommand)]
pub enum ServiceCmd {
    #[command(visible_alias = "list")]
    Ls(ListFlags),
    Create {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
        #[arg(short = 's', long)]
        network: String,
        /// `key=value` (repeatable).
        #[arg(short = 'l', long)]
        selector: Vec<String>,
        /// `svcPort:provPort:proto` (repeatable).
        #[arg(short = 'p', long)]
        port: Vec<String>,
        #[arg(long = "preferred-ip", visible_alias = "ip", default_value = "")]
        preferred_ip: String,
        /// `ClientIP`: keep each client on one provider (session affinity); `None`: balance
        /// every connection (the default).
        #[arg(long = "session-affinity", default_value = "")]
        session_affinity: String,
        /// Seconds without a new connection after which a client's affinity ends (1–65535;
        /// default 10800). Only with `--session-affinity ClientIP`.
        #[arg(long = "affinity-timeout", default_value_t = 0)]
        affinity_timeout: u32,
    },
    #[command(visible_alias = "delete")]
    Rm {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
    Inspect {
        name: String,
        #[command(flatten)]
        t: TenantFlag,
    },
}
