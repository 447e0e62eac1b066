//! The OpenFlow controller runtime: everything that programs Open vSwitch goes through here.
//!
//! Layout:
//! - [`cookie`]: the `generation | category | object` cookie layout that makes restarts hitless.
//! - [`table`]: tables declared as data (id, name, miss behaviour).
//! - [`desired`]: the desired state of one bridge (flows, groups, meters) and the minimal set
//!   of modifications between two states.
//! - [`listener`]: accepts switch connections (TCP and unix), one actor per connection.
//! - [`switch`]: the per-connection actor: handshake, echo keepalive, xid correlation, multipart
//!   reassembly, bundle- or barrier-confirmed transactions.
//! - [`bridge`]: the actor that owns a bridge's desired state and reconciles the switch with it
//!   on every (re)connect.
//! - [`ports`]: the ports the connected switch reports, by name (a new port's number as soon
//!   as the switch installs it).
//!
//! This crate knows OpenFlow, not tenants, endpoints or policies.

pub mod bridge;
pub mod cookie;
pub mod desired;
mod error;
pub mod listener;
pub mod ports;
pub mod switch;
pub mod table;
mod wire;

pub use bridge::{
    Applied, BridgeConfig, BridgeHandle, BridgeObserver, BridgeStatus, FlowAdopter, GenerationStore,
};
pub use cookie::Cookie;
pub use desired::{Change, Flow, FlowKey, Group, Meter};
pub use error::{RequestFailure, SwitchError, TxError, describe};
pub use listener::{ListenAddr, Listener};
pub use ports::{PortsHandle, SwitchPorts};
pub use switch::{SwitchEvent, SwitchHandle, SwitchInfo, SwitchOptions, TxMode, TxRequest};
pub use table::{Miss, TableSpec};
