//! IPv6 fixed headers (RFC 8200).
//!
//! Extension headers are not walked: `next_header` and `payload()` are those of the fixed header.
//! `payload()` is bounded by the payload length field.

use core::fmt;
use core::net::Ipv6Addr;

use super::ip::IpProtocol;
use super::{Error, Layer, Result, check_available, read_u16, read_u32, write_u16, write_u32};

/// A read/write view of an IPv6 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use crate::packet::Field;

    /// Version (4 bits), traffic class (8 bits), flow label (20 bits).
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

const FLOW_LABEL_MASK: u32 = 0x000f_ffff;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer, checking that it holds the fixed header and the payload length announced.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the buffer holds the fixed header and the announced payload.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_available(Layer::Ipv6, "fixed header", HEADER_LEN, len)?;
        let end = HEADER_LEN + usize::from(self.payload_len());
        check_available(Layer::Ipv6, "payload length", end, len)
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn ver_tc_flow(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    /// Return the version field.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Return the traffic class field.
    pub fn traffic_class(&self) -> u8 {
        // Eight bits after the version.
        ((self.ver_tc_flow() >> 20) & 0xff) as u8
    }

    /// Return the flow label field (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & FLOW_LABEL_MASK
    }

    /// Return the payload length field.
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Return the next header field.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Return the hop limit field.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Return the source address field.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut octets = [0; 16];
        octets.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv6Addr::from(octets)
    }

    /// Return the destination address field.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut octets = [0; 16];
        octets.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv6Addr::from(octets)
    }

    /// Return the payload, bounded by the payload length field.
    pub fn payload(&self) -> &[u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &self.buffer.as_ref()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_ver_tc_flow(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::VER_TC_FLOW, value);
    }

    /// Set the version field.
    pub fn set_version(&mut self, value: u8) {
        let word = (self.ver_tc_flow() & 0x0fff_ffff) | (u32::from(value & 0x0f) << 28);
        self.set_ver_tc_flow(word);
    }

    /// Set the traffic class field.
    pub fn set_traffic_class(&mut self, value: u8) {
        let word = (self.ver_tc_flow() & 0xf00f_ffff) | (u32::from(value) << 20);
        self.set_ver_tc_flow(word);
    }

    /// Set the flow label field; bits above 20 are dropped.
    pub fn set_flow_label(&mut self, value: u32) {
        let word = (self.ver_tc_flow() & !FLOW_LABEL_MASK) | (value & FLOW_LABEL_MASK);
        self.set_ver_tc_flow(word);
    }

    /// Set the payload length field.
    pub fn set_payload_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Set the next header field.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = value.into();
    }

    /// Set the hop limit field.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Set the source address field.
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Set the destination address field.
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// Return the payload, bounded by the payload length field, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// A high-level IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header (the payload protocol when there are no extension headers).
    pub next_header: IpProtocol,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Repr {
    /// Parse a checked packet; the version must be 6.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::Malformed {
                layer: Layer::Ipv6,
                field: "version",
                offset: 0,
                reason: "not 6",
            });
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// Return the header length `emit` writes (40).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the fixed header into `packet`. The payload bytes are the caller's to write.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_ver_tc_flow(0);
        packet.set_version(6);
        packet.set_traffic_class(self.traffic_class);
        packet.set_flow_label(self.flow_label);
        // Jumbograms are out of scope; saturate rather than wrap.
        packet.set_payload_len(u16::try_from(self.payload_len).unwrap_or(u16::MAX));
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv6 src={} dst={} nxt_hdr={} hop_limit={} len={}",
            self.src_addr, self.dst_addr, self.next_header, self.hop_limit, self.payload_len
        )
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Repr::parse(self) {
            Ok(repr) => write!(f, "{repr}"),
            Err(err) => write!(f, "IPv6 ({err})"),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // fe80::1 -> fe80::2, flow label 0x12345, ICMPv6, hop limit 255, 10-byte echo request.
    static PACKET_BYTES: [u8; 50] = [
        0x60, 0x01, 0x23, 0x45, 0x00, 0x0a, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0x0c, 0x78, 0x00,
        0x07, 0x00, 0x01, 0x76, 0x36,
    ];

    static PAYLOAD_BYTES: [u8; 10] = [0x80, 0x00, 0x0c, 0x78, 0x00, 0x07, 0x00, 0x01, 0x76, 0x36];

    fn packet_repr() -> Repr {
        Repr {
            src_addr: "fe80::1".parse().unwrap(),
            dst_addr: "fe80::2".parse().unwrap(),
            next_header: IpProtocol::Icmpv6,
            payload_len: 10,
            hop_limit: 255,
            traffic_class: 0,
            flow_label: 0x12345,
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(packet.version(), 6);
        assert_eq!(packet.traffic_class(), 0);
        assert_eq!(packet.flow_label(), 0x12345);
        assert_eq!(packet.payload_len(), 10);
        assert_eq!(packet.next_header(), IpProtocol::Icmpv6);
        assert_eq!(packet.hop_limit(), 255);
        assert_eq!(packet.src_addr(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(packet.dst_addr(), "fe80::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(packet.payload(), &PAYLOAD_BYTES[..]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 50];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_version(6);
        packet.set_traffic_class(0);
        packet.set_flow_label(0x12345);
        packet.set_payload_len(10);
        packet.set_next_header(IpProtocol::Icmpv6);
        packet.set_hop_limit(255);
        packet.set_src_addr("fe80::1".parse().unwrap());
        packet.set_dst_addr("fe80::2".parse().unwrap());
        packet.payload_mut().copy_from_slice(&PAYLOAD_BYTES);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn traffic_class_does_not_touch_neighbours() {
        let mut bytes = [0u8; 40];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_version(6);
        packet.set_flow_label(0xfffff);
        packet.set_traffic_class(0xb8);
        assert_eq!(packet.version(), 6);
        assert_eq!(packet.traffic_class(), 0xb8);
        assert_eq!(packet.flow_label(), 0xfffff);
        assert_eq!(&bytes[..4], &[0x6b, 0x8f, 0xff, 0xff]);
    }

    #[test]
    fn parse() {
        let packet = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&packet), Ok(packet_repr()));
    }

    #[test]
    fn emit() {
        let repr = packet_repr();
        let mut bytes = vec![0xa5; repr.buffer_len() + repr.payload_len];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet);
        packet.payload_mut().copy_from_slice(&PAYLOAD_BYTES);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn malformed() {
        assert!(matches!(
            Packet::new_checked(&PACKET_BYTES[..39]),
            Err(Error::Truncated {
                what: "fixed header",
                ..
            })
        ));
        assert!(matches!(
            Packet::new_checked(&PACKET_BYTES[..49]),
            Err(Error::Truncated {
                what: "payload length",
                needed: 50,
                available: 49,
                ..
            })
        ));
        let mut bytes = PACKET_BYTES;
        bytes[0] = 0x40;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(matches!(
            Repr::parse(&packet),
            Err(Error::Malformed {
                field: "version",
                ..
            })
        ));
    }

    #[test]
    fn display() {
        assert_eq!(
            packet_repr().to_string(),
            "IPv6 src=fe80::1 dst=fe80::2 nxt_hdr=icmp6 hop_limit=255 len=10"
        );
    }
}
