//! Contiv's CNI plugin: wire types shared by the `contivk8s` executable and netplugin.
//!
//! Layout:
//! - [`api`]: netplugin's CNI socket API (reference §7.1): paths, the pod request and reply.
//! - [`spec`]: the CNI specification's side: network configuration, results per spec
//!   version, error codes and error JSON.
//!
//! Only serde: netplugin depends on this crate for the types, the executable for everything,
//! and neither pulls in a web framework through it.

pub mod api;
pub mod spec;
