//! OpenFlow 1.3 wire codec with the Nicira and ONF extensions Open vSwitch uses.
//!
//! Layout (one module per OpenFlow concern, named as in Open vSwitch):
//! - [`msg`]: the [`Message`] enum and the dispatching [`Message::decode`]/[`Message::encode`].
//! - [`header`], [`hello`], [`error`] (the error table), [`features`], [`config`], [`role`],
//!   [`async_config`], [`table_mod`], [`queue`], [`port`], [`meter`], [`group`]: one message
//!   family each.
//! - [`fixed_str`]: [`FixedStr`], the lossless text of NUL-padded string fields.
//! - [`oxm`] (basic match fields and TLV framing), [`nxm`] (Nicira/ONF fields), [`matches`](mod@matches)
//!   (the [`Match`] type and prerequisite check).
//! - [`instruction`], [`action`] (standard and Nicira actions).
//! - [`flow_mod`], [`flow_removed`], [`packet_in`], [`packet_out`], [`multipart`], [`bundle`],
//!   [`nicira_msg`].
//! - [`format`](mod@format): ovs-ofctl text for matches, actions, instructions, flow mods, group mods and
//!   flow stats (the `Display` impls).
//! - [`print`]: whole messages as `ovs-ofctl ofp-print` prints them (the `ofp-print` binary).
//! - [`packet`]: Ethernet/ARP/IP/... codecs for packet-in and packet-out payloads.
//! - [`codec`] (feature `codec`): `tokio_util` framing.
//!
//! Decoding never panics and allocates at most in proportion to its input; encoding a value is
//! infallible, and [`Message::check`] reports what would make it invalid.

pub mod action;
pub mod async_config;
pub mod bundle;
#[cfg(feature = "codec")]
pub mod codec;
pub mod config;
pub mod error;
pub mod features;
pub mod fixed_str;
pub mod flow_mod;
pub mod flow_removed;
pub mod format;
pub mod group;
pub mod header;
pub mod hello;
pub mod instruction;
mod macros;
pub mod matches;
pub mod meter;
pub mod msg;
pub mod multipart;
pub mod nicira_msg;
pub mod nxm;
pub mod oxm;
pub mod packet;
pub mod packet_in;
pub mod packet_out;
pub mod port;
pub mod print;
pub mod queue;
pub mod role;
pub mod table_mod;
mod wire;

pub use action::Action;
pub use error::{ErrorKind, ErrorMsg};
pub use fixed_str::FixedStr;
pub use flow_mod::{FlowMod, FlowModCommand};
pub use group::{Bucket, GroupMod};
pub use instruction::Instruction;
pub use matches::Match;
pub use msg::Message;
pub use oxm::{FieldId, Oxm};
pub use port::PortNo;
pub use wire::{DecodeError, EncodeError};
