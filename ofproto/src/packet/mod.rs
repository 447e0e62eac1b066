//! Packet codecs for the frames carried in PACKET_IN and PACKET_OUT.
//!
//! Contract:
//! - Each protocol has a zero-copy view `Packet<T: AsRef<[u8]>>` (`Frame<T>` for Ethernet) over a byte
//!   buffer, and an owned high-level `Repr` that is parsed from a view and emitted into one.
//! - `new_checked` validates every length the getters rely on, so after it succeeds no getter
//!   panics, whatever the bytes are. `new_unchecked` skips that, and getters may then panic on a
//!   short buffer. Setters write into a buffer the caller sized (usually with `Repr::buffer_len`) and
//!   panic if it is too short, like slice indexing does; they never see network input first.
//! - `Repr::parse` checks the semantics (version, address sizes, checksums when asked to) and
//!   returns a typed [`Error`] naming the layer, field and problem. Nothing here panics on input.
//! - `Repr::emit` writes exactly `buffer_len()` bytes of header (plus the payload for the ICMP, TCP
//!   and UDP reprs, which borrow it) and fills in checksums.
//! - Every numeric code (EtherType, IP protocol, ARP operation, ICMP type) has an `Unknown` arm so
//!   unknown values survive a round trip.
//!
//! Each protocol file keeps the same order: code enums, `Packet`, `mod field` (byte ranges),
//! getters, setters, `Repr` (`parse`, `buffer_len`, `emit`), `Display`, tests.
//!
//! [`frame`] holds whole-frame helpers (ARP replies, gratuitous ARP, ICMP echo requests) built from
//! these pieces.

use core::fmt;
use core::ops::Range;

/// Declares a `#[repr]`-free code enum over an integer type, with an `Unknown` arm that keeps any
/// value without a name, and `From` conversions both ways.
macro_rules! enum_with_unknown {
    (
        $(#[$enum_attr:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$variant_attr:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        $(#[$enum_attr])*
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy, Hash)]
        pub enum $name {
            $( $(#[$variant_attr])* $variant, )+
            /// A value without a name here, kept as is.
            Unknown($ty),
        }

        impl ::core::convert::From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl ::core::convert::From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}

pub mod arp;
pub mod ethernet;
pub mod frame;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;

pub use arp::{Operation as ArpOperation, Packet as ArpPacket, Repr as ArpRepr};
pub use ethernet::{
    EtherType, EthernetAddress, Frame as EthernetFrame, Repr as EthernetRepr, VlanTag,
};
pub use icmpv4::{Message as Icmpv4Message, Packet as Icmpv4Packet, Repr as Icmpv4Repr};
pub use icmpv6::{Message as Icmpv6Message, Packet as Icmpv6Packet, Repr as Icmpv6Repr};
pub use ip::{ChecksumCheck, IpProtocol, PseudoHeader};
pub use ipv4::{Packet as Ipv4Packet, Repr as Ipv4Repr};
pub use ipv6::{Packet as Ipv6Packet, Repr as Ipv6Repr};
pub use tcp::{Flags as TcpFlags, Packet as TcpPacket, Repr as TcpRepr};
pub use udp::{Packet as UdpPacket, Repr as UdpRepr};

/// A byte range of a header field.
type Field = Range<usize>;

/// The protocol layer an [`Error`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Ethernet II header, with or without an 802.1Q tag.
    Ethernet,
    /// Address Resolution Protocol.
    Arp,
    /// IPv4 header.
    Ipv4,
    /// IPv6 fixed header.
    Ipv6,
    /// ICMP for IPv4.
    Icmpv4,
    /// ICMP for IPv6, including neighbor discovery.
    Icmpv6,
    /// TCP header.
    Tcp,
    /// UDP header.
    Udp,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Ethernet => "Ethernet",
            Layer::Arp => "ARP",
            Layer::Ipv4 => "IPv4",
            Layer::Ipv6 => "IPv6",
            Layer::Icmpv4 => "ICMPv4",
            Layer::Icmpv6 => "ICMPv6",
            Layer::Tcp => "TCP",
            Layer::Udp => "UDP",
        })
    }
}

/// Why a packet could not be viewed or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer ends before the data a field or length says is there.
    #[error("{layer}: truncated: {what} needs {needed} bytes, buffer has {available}")]
    Truncated {
        /// Layer being read.
        layer: Layer,
        /// What needed the bytes (a header, or the length a field announces).
        what: &'static str,
        /// Bytes needed from the start of this layer.
        needed: usize,
        /// Bytes available from the start of this layer.
        available: usize,
    },
    /// A field holds a value that contradicts the format.
    #[error("{layer}: malformed {field} at offset {offset}: {reason}")]
    Malformed {
        /// Layer being read.
        layer: Layer,
        /// Field name.
        field: &'static str,
        /// Byte offset of the field within this layer.
        offset: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A well-formed value this codec's `Repr` does not represent (e.g. ARP over non-Ethernet).
    #[error("{layer}: unsupported {field} {value:#x}")]
    Unsupported {
        /// Layer being read.
        layer: Layer,
        /// Field name.
        field: &'static str,
        /// The value found.
        value: u32,
    },
    /// The checksum field does not match the data.
    #[error("{layer}: bad checksum: field is {found:#06x}, data sums to {expected:#06x}")]
    Checksum {
        /// Layer being read.
        layer: Layer,
        /// Checksum in the packet.
        found: u16,
        /// Checksum the data calls for.
        expected: u16,
    },
}

/// Result of the packet codecs.
pub type Result<T> = core::result::Result<T, Error>;

/// Return `Truncated` unless `available >= needed`.
fn check_available(
    layer: Layer,
    what: &'static str,
    needed: usize,
    available: usize,
) -> Result<()> {
    if available < needed {
        Err(Error::Truncated {
            layer,
            what,
            needed,
            available,
        })
    } else {
        Ok(())
    }
}

/// Read a big-endian u16 at `field` (two bytes).
fn read_u16(data: &[u8], field: Field) -> u16 {
    let bytes = &data[field];
    u16::from_be_bytes([bytes[0], bytes[1]])
}

/// Read a big-endian u32 at `field` (four bytes).
fn read_u32(data: &[u8], field: Field) -> u32 {
    let bytes = &data[field];
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// Write a big-endian u16 at `field` (two bytes).
fn write_u16(data: &mut [u8], field: Field, value: u16) {
    data[field].copy_from_slice(&value.to_be_bytes());
}

/// Write a big-endian u32 at `field` (four bytes).
fn write_u32(data: &mut [u8], field: Field, value: u32) {
    data[field].copy_from_slice(&value.to_be_bytes());
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;

    /// Run every view and repr over `bytes` the way a packet-in handler would; none may panic.
    fn parse_everything(bytes: &[u8]) {
        let pseudo = PseudoHeader::V4 {
            src: core::net::Ipv4Addr::UNSPECIFIED,
            dst: core::net::Ipv4Addr::UNSPECIFIED,
        };
        let v6 = core::net::Ipv6Addr::UNSPECIFIED;
        if let Ok(frame) = EthernetFrame::new_checked(bytes) {
            let _ = EthernetRepr::parse(&frame);
            let _ = frame.to_string();
        }
        let _ = frame::parse_arp(bytes);
        let _ = frame::parse_ipv4(bytes, ChecksumCheck::Verify);
        if let Ok(packet) = ArpPacket::new_checked(bytes) {
            let _ = ArpRepr::parse(&packet);
            let _ = packet.to_string();
        }
        if let Ok(packet) = Ipv4Packet::new_checked(bytes) {
            let _ = Ipv4Repr::parse(&packet, ChecksumCheck::Verify);
            let _ = (packet.options(), packet.payload(), packet.to_string());
        }
        if let Ok(packet) = Ipv6Packet::new_checked(bytes) {
            let _ = Ipv6Repr::parse(&packet);
            let _ = (packet.payload(), packet.to_string());
        }
        for check in [ChecksumCheck::Verify, ChecksumCheck::Ignore] {
            if let Ok(packet) = Icmpv4Packet::new_checked(bytes) {
                let _ = Icmpv4Repr::parse(&packet, check);
            }
            if let Ok(packet) = Icmpv6Packet::new_checked(bytes) {
                let _ = Icmpv6Repr::parse(&packet, &v6, &v6, check);
                let _ = (packet.ndp_options(), packet.to_string());
            }
            if let Ok(packet) = TcpPacket::new_checked(bytes) {
                let _ = TcpRepr::parse(&packet, &pseudo, check);
                let _ = (packet.options(), packet.to_string());
            }
            if let Ok(packet) = UdpPacket::new_checked(bytes) {
                let _ = UdpRepr::parse(&packet, &pseudo, check);
                let _ = packet.to_string();
            }
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            parse_everything(&bytes);
        }

        #[test]
        fn arbitrary_ndp_options_never_panic(
            kind in prop_oneof![Just(135u8), Just(136u8)],
            options in proptest::collection::vec(any::<u8>(), 0..48),
        ) {
            let mut bytes = vec![kind, 0, 0, 0, 0, 0, 0, 0];
            bytes.extend_from_slice(&[0; 16]);
            bytes.extend_from_slice(&options);
            parse_everything(&bytes);
        }
    }
}
