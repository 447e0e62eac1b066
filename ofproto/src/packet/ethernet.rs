//! Ethernet II frames, optionally with one 802.1Q VLAN tag.
//!
//! A frame whose EtherType is `0x8100` carries a 4-byte tag (TPID + TCI) and then the real
//! EtherType; [`Frame::payload_ethertype`] and [`Frame::payload`] look through the tag. Stacked tags
//! (QinQ) are not unwrapped: the inner tag is then part of the payload.

use core::fmt;

use super::{Error, Layer, Result, check_available, read_u16, write_u16};

enum_with_unknown! {
    /// EtherType of an Ethernet II frame or of the payload of a VLAN tag.
    pub enum EtherType(u16) {
        /// IPv4.
        Ipv4 = 0x0800,
        /// ARP.
        Arp = 0x0806,
        /// 802.1Q VLAN tag.
        Vlan = 0x8100,
        /// IPv6.
        Ipv6 = 0x86dd,
        /// MPLS unicast.
        Mpls = 0x8847,
        /// 802.1ad service VLAN tag.
        QinQ = 0x88a8,
        /// LLDP.
        Lldp = 0x88cc,
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => f.write_str("IPv4"),
            EtherType::Arp => f.write_str("ARP"),
            EtherType::Vlan => f.write_str("802.1Q"),
            EtherType::Ipv6 => f.write_str("IPv6"),
            EtherType::Mpls => f.write_str("MPLS"),
            EtherType::QinQ => f.write_str("802.1ad"),
            EtherType::Lldp => f.write_str("LLDP"),
            EtherType::Unknown(value) => write!(f, "{value:#06x}"),
        }
    }
}

/// A 48-bit Ethernet (MAC) address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// The broadcast address `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);
    /// The all-zero address, used for "unknown" in ARP requests.
    pub const UNSPECIFIED: EthernetAddress = EthernetAddress([0; 6]);

    /// Return the address in `data`, which must be exactly six bytes.
    pub fn from_bytes(data: &[u8]) -> Option<EthernetAddress> {
        <[u8; 6]>::try_from(data).ok().map(EthernetAddress)
    }

    /// Return the address as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Return whether this is the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Return whether the group bit is set (multicast or broadcast).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Return whether this is a unicast address other than all-zero.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast() && *self != Self::UNSPECIFIED
    }
}

impl From<[u8; 6]> for EthernetAddress {
    fn from(bytes: [u8; 6]) -> Self {
        EthernetAddress(bytes)
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// The Tag Control Information of an 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

impl VlanTag {
    /// Return the tag for a 16-bit TCI.
    pub fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            // A 16-bit value shifted right by 13 fits three bits.
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    /// Return the 16-bit TCI; bits above each field's width are dropped.
    pub fn tci(&self) -> u16 {
        (u16::from(self.pcp & 0x7) << 13) | (u16::from(self.dei) << 12) | (self.vid & 0x0fff)
    }
}

impl fmt::Display for VlanTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vlan={},pcp={}", self.vid, self.pcp)?;
        if self.dei {
            f.write_str(",dei")?;
        }
        Ok(())
    }
}

/// A read/write view of an Ethernet II frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use crate::packet::Field;

    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    /// Present when ETHERTYPE is 802.1Q.
    pub const TCI: Field = 14..16;
    /// Present when ETHERTYPE is 802.1Q.
    pub const INNER_ETHERTYPE: Field = 16..18;
}

/// Length of an untagged header.
pub const HEADER_LEN: usize = field::ETHERTYPE.end;
/// Length a VLAN tag adds to the header.
pub const VLAN_TAG_LEN: usize = 4;

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap a buffer, checking that it holds the whole header (including a VLAN tag if the
    /// EtherType announces one).
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Check that the buffer holds the header the EtherType announces.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_available(Layer::Ethernet, "header", HEADER_LEN, len)?;
        check_available(Layer::Ethernet, "VLAN tag", self.header_len(), len)
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Return the header length: 14, or 18 with a VLAN tag.
    pub fn header_len(&self) -> usize {
        if self.ethertype() == EtherType::Vlan {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Return the destination address field.
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut bytes = [0; 6];
        bytes.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        EthernetAddress(bytes)
    }

    /// Return the source address field.
    pub fn src_addr(&self) -> EthernetAddress {
        let mut bytes = [0; 6];
        bytes.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        EthernetAddress(bytes)
    }

    /// Return the outer EtherType field (`Vlan` for a tagged frame).
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(read_u16(self.buffer.as_ref(), field::ETHERTYPE))
    }

    /// Return the VLAN tag, if the frame has one.
    pub fn vlan_tag(&self) -> Option<VlanTag> {
        (self.ethertype() == EtherType::Vlan)
            .then(|| VlanTag::from_tci(read_u16(self.buffer.as_ref(), field::TCI)))
    }

    /// Return the EtherType of the payload, looking through a VLAN tag.
    pub fn payload_ethertype(&self) -> EtherType {
        if self.ethertype() == EtherType::Vlan {
            EtherType::from(read_u16(self.buffer.as_ref(), field::INNER_ETHERTYPE))
        } else {
            self.ethertype()
        }
    }

    /// Return the payload, after the header and any VLAN tag.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Set the destination address field.
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Set the source address field.
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Set the outer EtherType field.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, ethertype.into());
    }

    /// Tag the frame: set the outer EtherType to 802.1Q and write the TCI and `inner` EtherType.
    ///
    /// # Panics
    /// If the buffer is shorter than 18 bytes.
    pub fn set_vlan_tag(&mut self, tag: VlanTag, inner: EtherType) {
        self.set_ethertype(EtherType::Vlan);
        let data = self.buffer.as_mut();
        write_u16(data, field::TCI, tag.tci());
        write_u16(data, field::INNER_ETHERTYPE, inner.into());
    }

    /// Return the payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

/// A high-level Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: EthernetAddress,
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// EtherType of the payload (after any tag).
    pub ethertype: EtherType,
}

impl Repr {
    /// Parse a checked frame header.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            vlan: frame.vlan_tag(),
            ethertype: frame.payload_ethertype(),
        })
    }

    /// Return the header length `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        if self.vlan.is_some() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Write the header into `frame`.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        match self.vlan {
            Some(tag) => frame.set_vlan_tag(tag, self.ethertype),
            None => frame.set_ethertype(self.ethertype),
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EthernetII src={} dst={}", self.src_addr, self.dst_addr)?;
        if let Some(tag) = self.vlan {
            write!(f, " {tag}")?;
        }
        write!(f, " type={}", self.ethertype)
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Frame<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Repr::parse(self) {
            Ok(repr) => write!(f, "{repr}"),
            Err(err) => write!(f, "EthernetII ({err})"),
        }
    }
}

/// Return an error unless a parsed Ethernet header's payload EtherType is `expected`.
pub(crate) fn expect_ethertype(found: EtherType, expected: EtherType) -> Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(Error::Unsupported {
            layer: Layer::Ethernet,
            field: "ethertype",
            value: u16::from(found).into(),
        })
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // dst 01:02:03:04:05:06, src 11:12:13:14:15:16, IPv4, payload aa bb.
    static FRAME_BYTES: [u8; 16] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x08, 0x00, 0xaa,
        0xbb,
    ];

    // Same addresses, 802.1Q tag pcp 5 dei 0 vid 100 (TCI 0xa064), ARP, payload cc.
    static TAGGED_BYTES: [u8; 19] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x81, 0x00, 0xa0,
        0x64, 0x08, 0x06, 0xcc,
    ];

    const DST: EthernetAddress = EthernetAddress([0x01, 0x02, 0x03, 0x04, 0x05, 0x06]);
    const SRC: EthernetAddress = EthernetAddress([0x11, 0x12, 0x13, 0x14, 0x15, 0x16]);

    fn tagged_repr() -> Repr {
        Repr {
            src_addr: SRC,
            dst_addr: DST,
            vlan: Some(VlanTag {
                pcp: 5,
                dei: false,
                vid: 100,
            }),
            ethertype: EtherType::Arp,
        }
    }

    #[test]
    fn deconstruct() {
        let frame = Frame::new_checked(&FRAME_BYTES[..]).unwrap();
        assert_eq!(frame.dst_addr(), DST);
        assert_eq!(frame.src_addr(), SRC);
        assert_eq!(frame.ethertype(), EtherType::Ipv4);
        assert_eq!(frame.vlan_tag(), None);
        assert_eq!(frame.header_len(), 14);
        assert_eq!(frame.payload(), &[0xaa, 0xbb]);
    }

    #[test]
    fn deconstruct_tagged() {
        let frame = Frame::new_checked(&TAGGED_BYTES[..]).unwrap();
        assert_eq!(frame.ethertype(), EtherType::Vlan);
        assert_eq!(frame.vlan_tag(), tagged_repr().vlan);
        assert_eq!(frame.payload_ethertype(), EtherType::Arp);
        assert_eq!(frame.header_len(), 18);
        assert_eq!(frame.payload(), &[0xcc]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 16];
        let mut frame = Frame::new_unchecked(&mut bytes[..]);
        frame.set_dst_addr(DST);
        frame.set_src_addr(SRC);
        frame.set_ethertype(EtherType::Ipv4);
        frame.payload_mut().copy_from_slice(&[0xaa, 0xbb]);
        assert_eq!(bytes, FRAME_BYTES);
    }

    #[test]
    fn parse_and_emit_tagged() {
        let repr = Repr::parse(&Frame::new_checked(&TAGGED_BYTES[..]).unwrap()).unwrap();
        assert_eq!(repr, tagged_repr());
        assert_eq!(repr.buffer_len(), 18);

        let mut bytes = [0u8; 19];
        let mut frame = Frame::new_unchecked(&mut bytes[..]);
        repr.emit(&mut frame);
        frame.payload_mut()[0] = 0xcc;
        assert_eq!(bytes, TAGGED_BYTES);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Frame::new_checked(&FRAME_BYTES[..13]),
            Err(Error::Truncated {
                layer: Layer::Ethernet,
                what: "header",
                needed: 14,
                available: 13
            })
        );
        // Tag announced but cut off.
        assert!(matches!(
            Frame::new_checked(&TAGGED_BYTES[..16]),
            Err(Error::Truncated { needed: 18, .. })
        ));
    }

    #[test]
    fn display() {
        assert_eq!(
            tagged_repr().to_string(),
            "EthernetII src=11:12:13:14:15:16 dst=01:02:03:04:05:06 vlan=100,pcp=5 type=ARP"
        );
        let frame = Frame::new_unchecked(&FRAME_BYTES[..]);
        assert_eq!(
            frame.to_string(),
            "EthernetII src=11:12:13:14:15:16 dst=01:02:03:04:05:06 type=IPv4"
        );
        assert_eq!(EtherType::from(0x1234).to_string(), "0x1234");
    }

    #[test]
    fn address_classes() {
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert!(DST.is_multicast());
        // 0x11 has the group bit set too.
        assert!(SRC.is_multicast());
        let unicast = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
        assert!(!unicast.is_multicast());
        assert!(unicast.is_unicast());
        assert!(!EthernetAddress::UNSPECIFIED.is_unicast());
        assert_eq!(EthernetAddress::from_bytes(&[1, 2, 3]), None);
    }

    #[test]
    fn vlan_tci_round_trip() {
        let tag = VlanTag {
            pcp: 7,
            dei: true,
            vid: 4095,
        };
        assert_eq!(tag.tci(), 0xffff);
        assert_eq!(VlanTag::from_tci(0xffff), tag);
    }
}
