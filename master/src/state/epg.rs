//! `EndpointGroupState` at `/contiv.io/state/endpointGroups/<group>:<tenant>`.

use serde::{Deserialize, Serialize};

use crate::resources::Bitset;
use crate::store::keys;

/// An endpoint group's config state: id, tags copied from its network, netprofile values, pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct EndpointGroupState {
    pub id: String,
    #[serde(rename = "groupName")]
    pub group_name: String,
    #[serde(rename = "tenantName")]
    pub tenant_name: String,
    #[serde(rename = "networkName")]
    pub network_name: String,
    #[serde(rename = "endpointGroupId")]
    pub endpoint_group_id: u32,
    #[serde(rename = "pktTagType")]
    pub pkt_tag_type: String,
    #[serde(rename = "pktTag")]
    pub pkt_tag: u32,
    #[serde(rename = "extPktTag")]
    pub ext_pkt_tag: u32,
    #[serde(rename = "epCount")]
    pub ep_count: u32,
    #[serde(rename = "DSCP")]
    pub dscp: u32,
    #[serde(rename = "Bandwidth")]
    pub bandwidth: String,
    #[serde(rename = "Burst")]
    pub burst: u32,
    /// `a.b.c.d-e.f.g.h` or empty.
    #[serde(rename = "IPPool")]
    pub ip_pool: String,
    /// The previous layout's whole pool map; read only to convert it (see
    /// [`crate::state::addr_map`]), empty (and not written) since.
    #[serde(
        rename = "epgIpAllocMap",
        default,
        skip_serializing_if = "Bitset::is_empty"
    )]
    pub epg_ip_alloc_map: Bitset,
    /// Not in Contiv: one bit per 4,096-address chunk of the pool map, set when it has no free
    /// address.
    #[serde(
        rename = "epgIpAllocFull",
        default,
        skip_serializing_if = "Bitset::is_empty"
    )]
    pub epg_ip_alloc_full: Bitset,
    #[serde(rename = "groupTag")]
    pub group_tag: String,
}

impl EndpointGroupState {
    pub const KIND: &'static str = "EndpointGroupState";

    /// `<group>:<tenant>`.
    pub fn id_for(tenant: &str, group: &str) -> String {
        format!("{group}:{tenant}")
    }

    pub fn key_for(id: &str) -> String {
        keys::state(keys::category::EPGS, id)
    }
}
