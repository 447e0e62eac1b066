//! `CfgNetworkState` at `/contiv.io/state/nets/<network>.<tenant>`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::resources::Bitset;
use crate::resources::ipv4::SubnetSpec;
use crate::store::keys;

/// A network's config state, including its address allocation map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CfgNetworkState {
    pub id: String,
    pub tenant: String,
    #[serde(rename = "networkName")]
    pub network_name: String,
    /// `"data"` or `"infra"`.
    #[serde(rename = "nwType")]
    pub nw_type: String,
    /// `"vlan"` or `"vxlan"`.
    #[serde(rename = "pktTagType")]
    pub pkt_tag_type: String,
    /// VLAN id for VLAN networks; the host-local VLAN for VXLAN networks.
    #[serde(rename = "pktTag")]
    pub pkt_tag: u32,
    /// VNI for VXLAN networks, 0 otherwise.
    #[serde(rename = "extPktTag")]
    pub ext_pkt_tag: u32,
    #[serde(rename = "subnetIP")]
    pub subnet_ip: String,
    #[serde(rename = "subnetLen")]
    pub subnet_len: u8,
    pub gateway: String,
    #[serde(rename = "ipAddrRange")]
    pub ip_addr_range: String,
    /// Addresses allocated to endpoints.
    #[serde(rename = "epAddrCount")]
    pub ep_addr_count: u32,
    #[serde(rename = "epCount")]
    pub ep_count: u32,
    /// The previous layout's whole allocation map; read only to convert it (see
    /// [`crate::state::addr_map`]), empty (and not written) since.
    #[serde(
        rename = "ipAllocMap",
        default,
        skip_serializing_if = "Bitset::is_empty"
    )]
    pub ip_alloc_map: Bitset,
    /// Not in Contiv: one bit per 4,096-address chunk of the allocation map, set when the chunk
    /// has no free address (the chunks are their own keys, [`crate::state::addr_map`]).
    #[serde(rename = "ipAllocFull", default)]
    pub ip_alloc_full: Bitset,
    #[serde(rename = "ipv6SubnetIP", default)]
    pub ipv6_subnet_ip: String,
    #[serde(rename = "ipv6SubnetLen", default)]
    pub ipv6_subnet_len: u8,
    #[serde(rename = "ipv6Gateway", default)]
    pub ipv6_gateway: String,
    #[serde(rename = "ipv6AllocMap", default)]
    pub ipv6_alloc_map: BTreeMap<String, bool>,
    #[serde(rename = "ipv6LastHost", default)]
    pub ipv6_last_host: String,
    #[serde(rename = "networkTag", default)]
    pub network_tag: String,
    /// The previous layout's reservations (now one key each, [`crate::state::reservations`]):
    /// still honoured, moved to keys at leader start.
    #[serde(
        rename = "ipReservations",
        default,
        skip_serializing_if = "BTreeSet::is_empty"
    )]
    pub ip_reservations: BTreeSet<String>,
    /// Not in Contiv: counts the changes to the hosts' address reserves of this network
    /// (`crate::endpoint::reserve`), so a host can tell an older answer listing its reserve
    /// from a newer one.
    #[serde(rename = "reserveGeneration", default, skip_serializing_if = "is_zero")]
    pub reserve_generation: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CfgNetworkState {
    pub const KIND: &'static str = "CfgNetworkState";

    /// `<network>.<tenant>`.
    pub fn id_for(tenant: &str, network: &str) -> String {
        format!("{network}.{tenant}")
    }

    pub fn key_for(id: &str) -> String {
        keys::state(keys::category::NETS, id)
    }

    /// The subnet (with allocation range) this state was created with.
    pub fn subnet(&self) -> Result<SubnetSpec> {
        let mut spec = SubnetSpec::parse(
            "subnetIP",
            &format!("{}/{}", self.subnet_ip, self.subnet_len),
        )?;
        if let Some((a, b)) = self.ip_addr_range.split_once('-')
            && let (Ok(a), Ok(b)) = (a.parse(), b.parse())
        {
            spec.range = Some((a, b));
        }
        Ok(spec)
    }
}
