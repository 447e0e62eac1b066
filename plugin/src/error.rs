//! netplugin's error type: every failure names the object (endpoint, network, port) and the
//! layer that failed, and maps to a CNI error code for the CNI server.

use crate::kubeapi::KubeError;
use crate::netlink::NetlinkError;
use crate::ovsdb::OvsdbError;

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("OVSDB: {0}")]
    Ovsdb(#[from] OvsdbError),
    #[error("netlink: {0}")]
    Netlink(#[from] NetlinkError),
    #[error("ofnet agent of the {bridge} bridge: {source}")]
    Agent {
        bridge: &'static str,
        source: ofnet::AgentError,
    },
    #[error("state store: {0}")]
    Store(#[from] master::store::StoreError),
    #[error("etcd: {0}")]
    Etcd(#[from] master::store::ConnectError),
    #[error("{0}")]
    Kube(#[from] KubeError),
    #[error("BGP: {0}")]
    Bgp(#[from] crate::bgp::BgpError),
    #[error("{0}")]
    Policy(#[from] crate::kubenetpol::NetpolError),
    #[error("netmaster: {0}")]
    Netmaster(#[from] master::client::ClientError),
    #[error(
        "no netmaster is registered in etcd (service `netmaster`); start netmaster or pass --netmaster"
    )]
    NoNetmaster,
    #[error(
        "network {network} does not exist in tenant {tenant}; create it (netctl net create) or fix the io.contiv.network/io.contiv.tenant label"
    )]
    UnknownNetwork { tenant: String, network: String },
    #[error("endpoint group {group} does not exist in tenant {tenant}")]
    UnknownGroup { tenant: String, group: String },
    #[error("invalid {field}: {problem}")]
    Invalid {
        field: &'static str,
        problem: String,
    },
    #[error("the endpoint {0} already exists on this host with another pod namespace or interface")]
    EndpointExists(String),
    #[error("cannot turn transmit checksum offload off on {ifname}: {problem}")]
    Offload { ifname: String, problem: String },
    #[error("stored {kind} at {key} is not valid: {reason}")]
    Corrupt {
        kind: &'static str,
        key: String,
        reason: String,
    },
}

impl PluginError {
    pub fn agent(kind: ofnet::BridgeKind, source: ofnet::AgentError) -> PluginError {
        PluginError::Agent {
            bridge: kind.name(),
            source,
        }
    }

    /// The CNI error code to report (CNI spec: 7 invalid network config, 11 try again later,
    /// 100+ plugin specific).
    pub fn cni_code(&self) -> u32 {
        match self {
            PluginError::UnknownNetwork { .. }
            | PluginError::UnknownGroup { .. }
            | PluginError::Invalid { .. } => 7,
            PluginError::NoNetmaster
            | PluginError::Store(_)
            | PluginError::Etcd(_)
            | PluginError::Policy(_) => 11,
            PluginError::Kube(e) => e.cni_code(),
            PluginError::Netmaster(e) if e.status().is_none() || e.status() == Some(503) => 11,
            PluginError::Netmaster(e) if e.status() == Some(404) => 7,
            _ => 100,
        }
    }
}

pub type Result<T, E = PluginError> = std::result::Result<T, E>;
