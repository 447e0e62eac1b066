//! netplugin, the host agent: programs Open vSwitch (through its own OVSDB client and the
//! ofnet agents) and the kernel (through netlink) for the endpoints of this host, and serves
//! the CNI socket.
//!
//! Layout:
//! - [`config`]: flags and environment (reference §3).
//! - [`daemon`]: start-up order and run loop (§4.1).
//! - [`driver`]: bridges, agents, networks, groups and local endpoints (§4.2).
//! - [`watch`]: replay and etcd watches of networks, groups and the global config.
//! - [`cniserver`]: AddPod/DelPod/CheckPod/Status on the unix socket (§7).
//! - [`docker`]: Docker's remote network and IPAM driver (`--mode docker`, §7.6).
//! - [`dns`]: the inline DNS (`--dns-enable`, §4.4).
//! - [`kubeapi`]: the `kube` client from the §7.4 config file; pods at ADD (§7.3).
//! - [`kubewatch`]: one resource followed with `kube::runtime`'s watcher.
//! - [`kubenetpol`]: Kubernetes NetworkPolicies of this host's pods onto the agents.
//! - [`kubesvc`]: Kubernetes Services and EndpointSlices onto the agents, the pods' service route (§7.5).
//! - [`debug`]: the debug REST (§4.3).
//! - [`http`]: the small HTTP/1.1 server both APIs use.
//! - [`oper`]: the endpoint oper state kept in etcd.
//! - [`ofnet_rpc`]: the VXLAN agent's RPC server and its registration with the ofnet master.
//! - [`heap`]: gives the heap freed after a burst of rebuilt flows back to the kernel.
//! - [`hostnet`]: netlink in the namespace OVS's datapath lives in.
//! - [`ovsdb`]: OVSDB JSON-RPC client, monitor cache, bridge and port operations.
//! - [`netlink`]: veth pairs, pod namespaces, addresses, routes.
//! - [`error`]: the error type, `PluginError`.

pub mod bgp;
pub mod cniserver;
pub mod config;
pub mod daemon;
pub mod debug;
pub mod dns;
pub mod docker;
pub mod driver;
pub mod error;
pub mod heap;
pub mod hostnet;
pub mod http;
pub mod kubeapi;
pub mod kubenetpol;
pub mod kubeobj;
pub mod kubesvc;
pub mod kubewatch;
pub mod metrics;
pub mod netlink;
pub mod ofnet_rpc;
pub mod oper;
pub mod ovsdb;
pub mod vswitchd;
pub mod watch;

pub use error::PluginError;
