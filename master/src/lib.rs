//! netmaster and netctl: the control plane of the Contiv-compatible network.
//!
//! Layout:
//! * [`store`]: the state-store contract (etcd v3 and in-memory), optimistic transactions, key layout.
//! * [`resources`]: bitsets, VLAN/VXLAN pools, IPv4/IPv6 address allocation, EPG ids, MACs.
//! * [`state`]: the `/contiv.io/state` and `/contiv.io/oper` records netplugin consumes.
//! * [`model`]: one module per REST object kind (JSON shape, validation, create/update/delete).
//! * [`policy`]: compilation of policy rules into directional ofnet rules.
//! * [`endpoint`]: the `/plugin/*` operations (address allocation, endpoint create/delete/update).
//! * [`rest`]: the actix-web routes and error mapping.
//! * [`registry`] and [`leader`]: service registration on leases and the leader lock/FSM.
//! * [`daemon`]: netmaster's `run(config, shutdown)`.
//! * [`docker`]: Docker cluster mode, the Docker networks of Contiv networks and groups.
//! * [`metrics`]: the Prometheus registry and metrics (`/metrics`), the metered store.
//! * [`client`]: the REST client used by netctl and netplugin; [`netctl`]: the CLI command tree.

pub mod auth;
pub mod client;
pub mod daemon;
pub mod docker;
pub mod endpoint;
pub mod error;
pub mod https;
pub mod leader;
pub mod metrics;
pub mod model;
pub mod netctl;
pub mod ofnet_master;
pub mod policy;
pub mod registry;
pub mod resources;
pub mod rest;
#[cfg(test)]
mod scenarios;
pub mod state;
pub mod store;

pub use error::{Error, Result};
