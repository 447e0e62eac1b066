//! Global records: `gstate.Cfg`/`gstate.Oper` (`/contiv.io/{state,oper}/global/global`), `GlobConfig`
//! (`/contiv.io/master/config/global`, read by netplugin at start) and per-host BGP state.

use serde::{Deserialize, Serialize};

use crate::store::keys;

/// Configured tag ranges.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AutoRanges {
    pub VLANs: String,
    pub VXLANs: String,
}

/// `gstate.Cfg`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GlobalCfg {
    pub id: String,
    pub auto: AutoRanges,
}

impl GlobalCfg {
    pub const KIND: &'static str = "gstate.Cfg";
    pub fn key() -> String {
        keys::state(keys::category::GLOBAL, "global")
    }
}

/// `gstate.Oper`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GlobalOper {
    pub id: String,
    #[serde(rename = "defaultNetwork")]
    pub default_network: String,
    #[serde(rename = "freeVXLANsStart")]
    pub free_vxlans_start: u32,
}

impl GlobalOper {
    pub const KIND: &'static str = "gstate.Oper";
    pub fn key() -> String {
        keys::oper(keys::category::GLOBAL, "global")
    }
}

/// `GlobConfig`: what netplugin needs to start (fwd mode, private subnet, ARP mode, infra type).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GlobConfig {
    pub id: String,
    #[serde(rename = "nw-infra-type")]
    pub nw_infra_type: String,
    #[serde(rename = "fwd-mode")]
    pub fwd_mode: String,
    #[serde(rename = "arp-mode")]
    pub arp_mode: String,
    #[serde(rename = "pvt-subnet")]
    pub pvt_subnet: String,
}

impl GlobConfig {
    pub const KIND: &'static str = "GlobConfig";
    pub fn key() -> String {
        keys::MASTER_GLOBAL_CONFIG.to_string()
    }
}

/// `CfgBgpState` at `/contiv.io/state/bgp/<hostname>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct BgpState {
    pub id: String,
    pub hostname: String,
    #[serde(rename = "router-ip")]
    pub router_ip: String,
    #[serde(rename = "as")]
    pub as_: String,
    #[serde(rename = "neighbor-as")]
    pub neighbor_as: String,
    pub neighbor: String,
}

impl BgpState {
    pub const KIND: &'static str = "CfgBgpState";
    pub fn key_for(host: &str) -> String {
        keys::state(keys::category::BGP, host)
    }
}
