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
//! - [`text`]: flows in `ovs-ofctl` syntax (golden tests, docs, inspect).

pub mod datapath;
pub mod epdb;
pub mod flows;
pub mod metadata;
pub mod model;
pub mod pipeline;
pub mod priority;
pub mod text;

pub use datapath::vlan::VlanBridge;
pub use datapath::vxlan::VxlanBridge;
