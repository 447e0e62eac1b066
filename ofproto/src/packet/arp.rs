//! ARP packets (RFC 826).
//!
//! The view handles any hardware/protocol address sizes; [`Repr`] represents Ethernet + IPv4 only,
//! which is all this project resolves, and rejects anything else as `Unsupported`.

use core::fmt;
use core::net::Ipv4Addr;

use super::ethernet::{EtherType, EthernetAddress};
use super::{Error, Layer, Result, check_available, read_u16, write_u16};

enum_with_unknown! {
    /// ARP hardware type.
    pub enum Hardware(u16) {
        /// Ethernet.
        Ethernet = 1,
    }
}

enum_with_unknown! {
    /// ARP operation.
    pub enum Operation(u16) {
        /// Who has the target protocol address?
        Request = 1,
        /// The sender has the protocol address asked for.
        Reply = 2,
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operation::Request => f.write_str("request"),
            Operation::Reply => f.write_str("reply"),
            Operation::Unknown(op) => write!(f, "op{op}"),
        }
    }
}

/// A read/write view of an ARP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use crate::packet::Field;

    pub const HTYPE: Field = 0..2;
    pub const PTYPE: Field = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Field = 6..8;
    /// The four addresses follow, sized by HLEN and PLEN.
    pub const ADDRESSES: usize = 8;

    pub const fn sha(hlen: usize, _plen: usize) -> Field {
        ADDRESSES..ADDRESSES + hlen
    }
    pub const fn spa(hlen: usize, plen: usize) -> Field {
        let start = ADDRESSES + hlen;
        start..start + plen
    }
    pub const fn tha(hlen: usize, plen: usize) -> Field {
        let start = ADDRESSES + hlen + plen;
        start..start + hlen
    }
    pub const fn tpa(hlen: usize, plen: usize) -> Field {
        let start = ADDRESSES + 2 * hlen + plen;
        start..start + plen
    }
}

/// Length of an Ethernet + IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = field::tpa(6, 4).end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer, checking that it holds the fixed fields and the four addresses they size.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the buffer holds the fixed fields and all four addresses.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_available(Layer::Arp, "fixed fields", field::ADDRESSES, len)?;
        let end = field::tpa(self.hardware_len().into(), self.protocol_len().into()).end;
        check_available(Layer::Arp, "addresses", end, len)
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Return the hardware type field.
    pub fn hardware_type(&self) -> Hardware {
        Hardware::from(read_u16(self.buffer.as_ref(), field::HTYPE))
    }

    /// Return the protocol type field.
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(read_u16(self.buffer.as_ref(), field::PTYPE))
    }

    /// Return the hardware address length field.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Return the protocol address length field.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Return the operation field.
    pub fn operation(&self) -> Operation {
        Operation::from(read_u16(self.buffer.as_ref(), field::OPER))
    }

    fn lens(&self) -> (usize, usize) {
        (self.hardware_len().into(), self.protocol_len().into())
    }

    /// Return the sender hardware address field.
    pub fn source_hardware_addr(&self) -> &[u8] {
        let (hlen, plen) = self.lens();
        &self.buffer.as_ref()[field::sha(hlen, plen)]
    }

    /// Return the sender protocol address field.
    pub fn source_protocol_addr(&self) -> &[u8] {
        let (hlen, plen) = self.lens();
        &self.buffer.as_ref()[field::spa(hlen, plen)]
    }

    /// Return the target hardware address field.
    pub fn target_hardware_addr(&self) -> &[u8] {
        let (hlen, plen) = self.lens();
        &self.buffer.as_ref()[field::tha(hlen, plen)]
    }

    /// Return the target protocol address field.
    pub fn target_protocol_addr(&self) -> &[u8] {
        let (hlen, plen) = self.lens();
        &self.buffer.as_ref()[field::tpa(hlen, plen)]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the hardware type field.
    pub fn set_hardware_type(&mut self, value: Hardware) {
        write_u16(self.buffer.as_mut(), field::HTYPE, value.into());
    }

    /// Set the protocol type field.
    pub fn set_protocol_type(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), field::PTYPE, value.into());
    }

    /// Set the hardware address length field.
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Set the protocol address length field.
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Set the operation field.
    pub fn set_operation(&mut self, value: Operation) {
        write_u16(self.buffer.as_mut(), field::OPER, value.into());
    }

    /// Set the sender hardware address field; `value` must be `hardware_len()` bytes.
    pub fn set_source_hardware_addr(&mut self, value: &[u8]) {
        let (hlen, plen) = self.lens();
        self.buffer.as_mut()[field::sha(hlen, plen)].copy_from_slice(value);
    }

    /// Set the sender protocol address field; `value` must be `protocol_len()` bytes.
    pub fn set_source_protocol_addr(&mut self, value: &[u8]) {
        let (hlen, plen) = self.lens();
        self.buffer.as_mut()[field::spa(hlen, plen)].copy_from_slice(value);
    }

    /// Set the target hardware address field; `value` must be `hardware_len()` bytes.
    pub fn set_target_hardware_addr(&mut self, value: &[u8]) {
        let (hlen, plen) = self.lens();
        self.buffer.as_mut()[field::tha(hlen, plen)].copy_from_slice(value);
    }

    /// Set the target protocol address field; `value` must be `protocol_len()` bytes.
    pub fn set_target_protocol_addr(&mut self, value: &[u8]) {
        let (hlen, plen) = self.lens();
        self.buffer.as_mut()[field::tpa(hlen, plen)].copy_from_slice(value);
    }
}

/// A high-level Ethernet + IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Request or reply.
    pub operation: Operation,
    /// Sender hardware address.
    pub source_hardware_addr: EthernetAddress,
    /// Sender protocol address.
    pub source_protocol_addr: Ipv4Addr,
    /// Target hardware address (all-zero in a request).
    pub target_hardware_addr: EthernetAddress,
    /// Target protocol address.
    pub target_protocol_addr: Ipv4Addr,
}

impl Repr {
    /// Parse a checked packet; anything but Ethernet + IPv4 is `Unsupported`.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        let unsupported = |field, value: u32| Error::Unsupported {
            layer: Layer::Arp,
            field,
            value,
        };
        if packet.hardware_type() != Hardware::Ethernet {
            return Err(unsupported(
                "hardware type",
                u16::from(packet.hardware_type()).into(),
            ));
        }
        if packet.protocol_type() != EtherType::Ipv4 {
            return Err(unsupported(
                "protocol type",
                u16::from(packet.protocol_type()).into(),
            ));
        }
        if packet.hardware_len() != 6 {
            return Err(unsupported(
                "hardware address length",
                packet.hardware_len().into(),
            ));
        }
        if packet.protocol_len() != 4 {
            return Err(unsupported(
                "protocol address length",
                packet.protocol_len().into(),
            ));
        }
        // The lengths were just checked, so these conversions cannot fail; map defensively.
        let mac = |bytes: &[u8], offset| {
            EthernetAddress::from_bytes(bytes).ok_or(Error::Malformed {
                layer: Layer::Arp,
                field: "hardware address",
                offset,
                reason: "not 6 bytes",
            })
        };
        let ip = |bytes: &[u8], offset| {
            <[u8; 4]>::try_from(bytes)
                .map(Ipv4Addr::from)
                .map_err(|_| Error::Malformed {
                    layer: Layer::Arp,
                    field: "protocol address",
                    offset,
                    reason: "not 4 bytes",
                })
        };
        Ok(Repr {
            operation: packet.operation(),
            source_hardware_addr: mac(packet.source_hardware_addr(), field::sha(6, 4).start)?,
            source_protocol_addr: ip(packet.source_protocol_addr(), field::spa(6, 4).start)?,
            target_hardware_addr: mac(packet.target_hardware_addr(), field::tha(6, 4).start)?,
            target_protocol_addr: ip(packet.target_protocol_addr(), field::tpa(6, 4).start)?,
        })
    }

    /// Return the length `emit` writes (28).
    pub const fn buffer_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Write the packet into `packet`.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_hardware_type(Hardware::Ethernet);
        packet.set_protocol_type(EtherType::Ipv4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(self.source_hardware_addr.as_bytes());
        packet.set_source_protocol_addr(&self.source_protocol_addr.octets());
        packet.set_target_hardware_addr(self.target_hardware_addr.as_bytes());
        packet.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.operation {
            Operation::Request => write!(
                f,
                "ARP request who-has {} tell {} ({})",
                self.target_protocol_addr, self.source_protocol_addr, self.source_hardware_addr
            ),
            Operation::Reply => write!(
                f,
                "ARP reply {} is-at {} to {} ({})",
                self.source_protocol_addr,
                self.source_hardware_addr,
                self.target_protocol_addr,
                self.target_hardware_addr
            ),
            Operation::Unknown(_) => write!(
                f,
                "ARP {} sha={} spa={} tha={} tpa={}",
                self.operation,
                self.source_hardware_addr,
                self.source_protocol_addr,
                self.target_hardware_addr,
                self.target_protocol_addr
            ),
        }
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Repr::parse(self) {
            Ok(repr) => write!(f, "{repr}"),
            Err(err) => write!(f, "ARP ({err})"),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // Request: who-has 10.0.0.2 tell 10.0.0.1, sender 02:00:00:00:00:01.
    static REQUEST_BYTES: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02,
    ];

    fn request_repr() -> Repr {
        Repr {
            operation: Operation::Request,
            source_hardware_addr: EthernetAddress([0x02, 0, 0, 0, 0, 0x01]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
            target_hardware_addr: EthernetAddress::UNSPECIFIED,
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&REQUEST_BYTES[..]).unwrap();
        assert_eq!(packet.hardware_type(), Hardware::Ethernet);
        assert_eq!(packet.protocol_type(), EtherType::Ipv4);
        assert_eq!(packet.hardware_len(), 6);
        assert_eq!(packet.protocol_len(), 4);
        assert_eq!(packet.operation(), Operation::Request);
        assert_eq!(packet.source_hardware_addr(), &[0x02, 0, 0, 0, 0, 0x01]);
        assert_eq!(packet.source_protocol_addr(), &[10, 0, 0, 1]);
        assert_eq!(packet.target_hardware_addr(), &[0; 6]);
        assert_eq!(packet.target_protocol_addr(), &[10, 0, 0, 2]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 28];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_hardware_type(Hardware::Ethernet);
        packet.set_protocol_type(EtherType::Ipv4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(Operation::Request);
        packet.set_source_hardware_addr(&[0x02, 0, 0, 0, 0, 0x01]);
        packet.set_source_protocol_addr(&[10, 0, 0, 1]);
        packet.set_target_hardware_addr(&[0; 6]);
        packet.set_target_protocol_addr(&[10, 0, 0, 2]);
        assert_eq!(bytes, REQUEST_BYTES);
    }

    #[test]
    fn parse() {
        let packet = Packet::new_checked(&REQUEST_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&packet), Ok(request_repr()));
    }

    #[test]
    fn emit() {
        let repr = request_repr();
        let mut bytes = vec![0xa5; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, REQUEST_BYTES);
    }

    #[test]
    fn truncated() {
        assert!(matches!(
            Packet::new_checked(&REQUEST_BYTES[..7]),
            Err(Error::Truncated {
                what: "fixed fields",
                ..
            })
        ));
        assert_eq!(
            Packet::new_checked(&REQUEST_BYTES[..27]),
            Err(Error::Truncated {
                layer: Layer::Arp,
                what: "addresses",
                needed: 28,
                available: 27
            })
        );
    }

    #[test]
    fn unsupported_sizes_and_types() {
        let mut bytes = REQUEST_BYTES;
        bytes[1] = 6; // IEEE 802 hardware
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            Repr::parse(&packet),
            Err(Error::Unsupported {
                layer: Layer::Arp,
                field: "hardware type",
                value: 6
            })
        );

        // A long hardware address length makes the addresses run past the buffer: the view
        // refuses it instead of letting a getter panic.
        let mut bytes = REQUEST_BYTES;
        bytes[4] = 200;
        assert!(matches!(
            Packet::new_checked(&bytes[..]),
            Err(Error::Truncated { needed: 416, .. })
        ));

        let mut bytes = REQUEST_BYTES;
        bytes[3] = 0xdd;
        bytes[2] = 0x86;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(matches!(
            Repr::parse(&packet),
            Err(Error::Unsupported {
                field: "protocol type",
                value: 0x86dd,
                ..
            })
        ));
    }

    #[test]
    fn display() {
        assert_eq!(
            request_repr().to_string(),
            "ARP request who-has 10.0.0.2 tell 10.0.0.1 (02:00:00:00:00:01)"
        );
        let reply = Repr {
            operation: Operation::Reply,
            source_hardware_addr: EthernetAddress([0x02, 0, 0, 0, 0, 0x02]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
            target_hardware_addr: EthernetAddress([0x02, 0, 0, 0, 0, 0x01]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
        };
        assert_eq!(
            reply.to_string(),
            "ARP reply 10.0.0.2 is-at 02:00:00:00:00:02 to 10.0.0.1 (02:00:00:00:00:01)"
        );
    }
}
