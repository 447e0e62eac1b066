//! Our own OVSDB client (RFC 7047 JSON-RPC over the unix socket of ovsdb-server) and the
//! OVS driver operations built on it (reference §4.2).
//!
//! Layout:
//! - [`client`]: the connection task and its handle [`OvsdbClient`]: `transact`, `echo`,
//!   reconnecting, answering the server's `echo`, and a monitor-fed [`Cache`] that callers read
//!   or wait on ([`OvsdbClient::wait_for`]) instead of sleeping.
//! - [`cache`]: the monitored tables and typed row views.
//! - [`op`] / [`datum`]: transaction operations and OVSDB values in JSON.
//! - [`framing`]: splitting the socket's byte stream into JSON messages.
//! - [`bridge`] / [`port`]: bridges (with `fail_mode=secure`, controller, external_ids),
//!   access/trunk/internal/VXLAN ports, policing, OpenFlow port numbers.
//! - [`error`]: the error enum, [`OvsdbError`].
//!
//! Contract: every multi-row change is a single transaction; every `ensure_*` returns only
//! once the monitor cache shows the result, so a read right after sees it.

pub mod bridge;
pub mod cache;
pub mod client;
pub mod datum;
pub mod error;
pub mod framing;
pub mod op;
pub mod port;

pub use bridge::{BridgeSpec, FAIL_MODE};
pub use cache::{BridgeRow, Cache, ControllerRow, InterfaceRow, PortRow, RootRow};
pub use client::OvsdbClient;
pub use datum::Uuid;
pub use error::OvsdbError;
pub use port::{Policing, PortKind, PortRef, PortSpec, VlanMode, vtep_port_name};
