//! The SDN logic of one host: bridge datapaths on top of `ofctrl`.
//!
//! Layout:
//! - [`model`]: networks, endpoints, policy rules (reference JSON shapes).
//! - [`metadata`], [`priority`], [`pipeline`]: the pipeline declared once as data: tables,
//!   metadata bits, priority bands, and the checked table handle flows are built through.
//! - [`flows`]: shared flow builders (input, port classification, destination groups, policy).
//! - [`datapath`]: [`VlanBridge`] and [`VxlanBridge`], pure functions from state to the
//!   complete set of flows and groups.
//! - [`epdb`]: the endpoint DB actor (networks, VRFs, endpoints).
//! - [`agent`]: the actor per bridge and [`AgentHandle`], the API the host daemon calls.
//! - [`arp`]: the ARP proxy decision table and gratuitous ARPs.
//! - [`nd`]: the neighbour-discovery proxy (IPv6's ARP).
//! - [`master`]: the master actor (agent registry, endpoint relay, rule fan-out).
//! - [`service`]: service load balancing in the switch (select groups, conntrack NAT, stats).
//! - [`netpol`]: Kubernetes NetworkPolicy (resolved to addresses) to conjunction flows.
//! - [`rpc`]: the master↔agent RPC (length-delimited JSON over TCP): peers and servers.
//! - [`inspect`]: the agent state in the reference's inspect JSON shape.
//! - [`timestamp`]: RFC 3339 instants (which endpoint announcement is newer).
//! - [`text`]: flows in `ovs-ofctl` syntax (golden tests, docs, inspect).
//! - [`trace`]: the offline pipeline evaluator behind `netctl trace`.

pub mod agent;
pub mod arp;
pub mod datapath;
pub mod epdb;
#[cfg(test)]
mod fixtures;
pub mod flows;
pub mod inspect;
pub mod master;
pub mod metadata;
pub mod model;
pub mod nd;
pub mod netpol;
pub mod pipeline;
pub mod priority;
pub mod rpc;
pub mod service;
pub mod text;
pub mod timestamp;
pub mod trace;

pub use agent::{AgentConfig, AgentCounts, AgentError, AgentHandle, AgentOp, DnsQuery};
pub use datapath::host::{HostAccessPort, HostBridge};
pub use datapath::vlan::VlanBridge;
pub use datapath::vlrouter::VlrouterBridge;
pub use datapath::vrouter::VrouterBridge;
pub use datapath::vxlan::VxlanBridge;
pub use datapath::{HostNatPort, RouterPort};
pub use master::MasterHandle;
pub use model::{
    ArpMode, Bandwidth, BridgeKind, Endpoint, FwdMode, LocalEndpoint, MacAddr, Network, Node,
    PolicyRule, ROUTER_MAC, RuleAction,
};
pub use netpol::{NetworkPolicy, PolicyRefused};
pub use service::stats::ServiceStats;
pub use service::{ServicePort, ServiceProtocol, ServiceSpec};
