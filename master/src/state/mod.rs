//! The records netmaster writes under `/contiv.io/state/` and `/contiv.io/oper/` for netplugin
//! (reference §1.1). Field names are Contiv's JSON names, byte for byte; netplugin and operators'
//! tools read them.

pub mod addr_map;
pub mod addr_map6;
pub mod chunks;
pub mod endpoint;
pub mod epg;
pub mod global;
pub mod network;
pub mod policy;
pub mod reservations;
pub mod service;

pub use endpoint::CfgEndpointState;
pub use epg::EndpointGroupState;
pub use global::{BgpState, GlobConfig, GlobalCfg, GlobalOper};
pub use network::CfgNetworkState;
pub use policy::{CfgPolicyRule, EpgPolicy, OfnetPolicyRule};
pub use service::{CfgServiceLbState, Provider, SvcProvider};
