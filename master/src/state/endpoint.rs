//! `CfgEndpointState` at `/contiv.io/state/eps/<network>.<tenant>-<container>`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::store::keys;

/// One endpoint's config state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CfgEndpointState {
    pub id: String,
    #[serde(rename = "netID")]
    pub net_id: String,
    #[serde(rename = "endpointID")]
    pub endpoint_id: String,
    /// The endpoint group name (Contiv calls it the service name).
    #[serde(rename = "serviceName")]
    pub service_name: String,
    #[serde(rename = "endpointGroupId")]
    pub endpoint_group_id: u32,
    /// `<group>:<tenant>` or empty.
    #[serde(rename = "endpointGroupKey")]
    pub endpoint_group_key: String,
    #[serde(rename = "ipAddress")]
    pub ip_address: String,
    #[serde(rename = "ipv6Address")]
    pub ipv6_address: String,
    #[serde(rename = "macAddress")]
    pub mac_address: String,
    #[serde(rename = "homingHost")]
    pub homing_host: String,
    #[serde(rename = "intfName")]
    pub intf_name: String,
    #[serde(rename = "vtepIP")]
    pub vtep_ip: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(rename = "containerId")]
    pub container_id: String,
    #[serde(rename = "epCommonName")]
    pub ep_common_name: String,
}

impl CfgEndpointState {
    pub const KIND: &'static str = "CfgEndpointState";

    /// `<network>.<tenant>-<container>`.
    pub fn id_for(net_id: &str, container: &str) -> String {
        format!("{net_id}-{container}")
    }

    pub fn key_for(id: &str) -> String {
        keys::state(keys::category::EPS, id)
    }
}
