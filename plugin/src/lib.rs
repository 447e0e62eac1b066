//! netplugin, the host agent: programs Open vSwitch (through its own OVSDB client) and the
//! kernel (through netlink) for the endpoints of this host.
//!
//! Layout:
//! - [`ovsdb`]: OVSDB JSON-RPC client, monitor cache, bridge and port operations.
//! - [`netlink`]: veth pairs, moving links into pod namespaces, addresses, routes.

pub mod netlink;
pub mod ovsdb;
