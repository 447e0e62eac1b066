//! The endpoint oper state netplugin keeps in etcd at `/contiv.io/oper/eps/<endpoint id>`
//! (Contiv's `OperEndpointState`): what this host plumbed for an endpoint, so a restarted
//! netplugin can find its ports again and `netctl endpoint inspect` can show the port.
//!
//! Contract: written after an endpoint is completely plumbed, deleted after it is completely
//! removed; `homingHost` says which netplugin owns the record.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use master::store::keys;

/// One local endpoint as plumbed. Field names follow Contiv's JSON where it had the field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct OperEndpointState {
    /// `<network>.<tenant>-<container>`, the `CfgEndpointState` id.
    pub id: String,
    #[serde(rename = "netID")]
    pub net_id: String,
    #[serde(rename = "endpointID")]
    pub endpoint_id: String,
    #[serde(rename = "serviceName")]
    pub service_name: String,
    #[serde(rename = "endpointGroupId")]
    pub endpoint_group_id: u32,
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
    /// The pod end's name (`CNI_IFNAME`).
    #[serde(rename = "intfName")]
    pub intf_name: String,
    /// `vport<x>`; the OVS port (veth host end) is `v` + this.
    #[serde(rename = "portName")]
    pub port_name: String,
    #[serde(rename = "vtepIP")]
    pub vtep_ip: String,
    #[serde(rename = "containerId")]
    pub container_id: String,
    #[serde(rename = "epCommonName")]
    pub ep_common_name: String,
    /// Additions: the pod's namespace path and Kubernetes identity, the tenant and network.
    pub netns: String,
    #[serde(rename = "podNamespace")]
    pub pod_namespace: String,
    pub tenant: String,
    pub network: String,
    pub labels: BTreeMap<String, String>,
}

impl OperEndpointState {
    pub const KIND: &'static str = "OperEndpointState";

    pub fn key_for(id: &str) -> String {
        keys::oper(keys::category::EPS, id)
    }

    /// Prefix of every endpoint's oper state.
    pub fn prefix() -> String {
        format!("{}{}/", keys::OPER, keys::category::EPS)
    }

    /// The OVS port (host end of the veth pair).
    pub fn ovs_port(&self) -> String {
        format!("v{}", self.port_name)
    }
}

/// `vport` + 9 hex digits of a hash of the endpoint id: a stable name (a restarted netplugin,
/// or a DEL without state, finds the same port), at most 14 bytes so `v` + it fits the
/// kernel's 15-byte limit.
pub fn port_name_for(endpoint_id: &str) -> String {
    // FNV-1a, 64 bits.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in endpoint_id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("vport{:09x}", hash >> 28)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_are_stable_distinct_and_short() {
        let a = port_name_for("default-net.default-c1");
        assert_eq!(a, port_name_for("default-net.default-c1"));
        assert_ne!(a, port_name_for("default-net.default-c2"));
        assert_eq!(a.len(), 14);
        let names: std::collections::BTreeSet<String> = (0..10_000)
            .map(|i| port_name_for(&format!("net.t-{i}")))
            .collect();
        assert_eq!(names.len(), 10_000);
    }

    #[test]
    fn record_uses_contiv_names() {
        let s = OperEndpointState {
            id: "n.t-c".into(),
            port_name: "vport1".into(),
            ..Default::default()
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["portName"], "vport1");
        assert_eq!(s.ovs_port(), "vvport1");
        assert_eq!(
            OperEndpointState::key_for("n.t-c"),
            "/contiv.io/oper/eps/n.t-c"
        );
    }
}
