//! IPv4 headers (RFC 791), with the header checksum.
//!
//! The view exposes options as raw bytes; [`Repr`] ignores them on parse and never emits any, so a
//! packet with options re-emits with a 20-byte header. `payload()` is bounded by the total length
//! field, so Ethernet padding after a short packet is not part of it.

use core::fmt;
use core::net::Ipv4Addr;

use super::ip::{self, ChecksumCheck, IpProtocol};
use super::{Error, Layer, Result, check_available, read_u16, write_u16};

/// A read/write view of an IPv4 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use crate::packet::Field;

    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

const FLAG_DONT_FRAG: u16 = 0x4000;
const FLAG_MORE_FRAGS: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer, checking the header length and total length fields against it.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the header fits, the IHL covers at least the fixed header, the total length
    /// covers the header, and the buffer holds the total length.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_available(Layer::Ipv4, "fixed header", HEADER_LEN, len)?;
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                field: "IHL",
                offset: field::VER_IHL,
                reason: "header shorter than 20 bytes",
            });
        }
        check_available(Layer::Ipv4, "header with options", header_len, len)?;
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                field: "total length",
                offset: field::LENGTH.start,
                reason: "shorter than the header",
            });
        }
        check_available(Layer::Ipv4, "total length", total_len, len)
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Return the version field.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Return the header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Return the DSCP field (6 bits).
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Return the ECN field (2 bits).
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Return the total length field.
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Return the identification field.
    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT)
    }

    /// Return the "don't fragment" flag.
    pub fn dont_frag(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & FLAG_DONT_FRAG != 0
    }

    /// Return the "more fragments" flag.
    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & FLAG_MORE_FRAGS != 0
    }

    /// Return the fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (read_u16(self.buffer.as_ref(), field::FLG_OFF) & FRAG_OFFSET_MASK) << 3
    }

    /// Return the time-to-live field.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Return the protocol field.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Return the header checksum field.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Return the source address field.
    pub fn src_addr(&self) -> Ipv4Addr {
        let mut octets = [0; 4];
        octets.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv4Addr::from(octets)
    }

    /// Return the destination address field.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let mut octets = [0; 4];
        octets.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv4Addr::from(octets)
    }

    /// Return the options, between the fixed header and the payload.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// Return the header checksum the header calls for.
    pub fn expected_checksum(&self) -> u16 {
        let header = &self.buffer.as_ref()[..self.header_len()];
        ip::expected_checksum(ip::sum(header), self.checksum())
    }

    /// Return whether the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        ip::fold(ip::sum(&self.buffer.as_ref()[..self.header_len()])) == 0xffff
    }

    /// Return the payload, bounded by the total length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the version field.
    pub fn set_version(&mut self, value: u8) {
        let data = self.buffer.as_mut();
        data[field::VER_IHL] = (data[field::VER_IHL] & 0x0f) | (value << 4);
    }

    /// Set the header length in bytes; it is stored divided by four.
    pub fn set_header_len(&mut self, value: usize) {
        let data = self.buffer.as_mut();
        // IHL is four bits; the mask keeps a bad value from touching the version.
        let ihl = ((value / 4) & 0x0f) as u8;
        data[field::VER_IHL] = (data[field::VER_IHL] & 0xf0) | ihl;
    }

    /// Set the DSCP field.
    pub fn set_dscp(&mut self, value: u8) {
        let data = self.buffer.as_mut();
        data[field::DSCP_ECN] = (data[field::DSCP_ECN] & 0x03) | (value << 2);
    }

    /// Set the ECN field.
    pub fn set_ecn(&mut self, value: u8) {
        let data = self.buffer.as_mut();
        data[field::DSCP_ECN] = (data[field::DSCP_ECN] & 0xfc) | (value & 0x03);
    }

    /// Set the total length field.
    pub fn set_total_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Set the identification field.
    pub fn set_ident(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::IDENT, value);
    }

    /// Set the flags and fragment offset (in bytes; must be a multiple of 8).
    pub fn set_fragmentation(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let mut value = (offset >> 3) & FRAG_OFFSET_MASK;
        if dont_frag {
            value |= FLAG_DONT_FRAG;
        }
        if more_frags {
            value |= FLAG_MORE_FRAGS;
        }
        write_u16(self.buffer.as_mut(), field::FLG_OFF, value);
    }

    /// Set the time-to-live field.
    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }

    /// Set the protocol field.
    pub fn set_protocol(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = value.into();
    }

    /// Set the header checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Set the source address field.
    pub fn set_src_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Set the destination address field.
    pub fn set_dst_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// Compute and write the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let total = ip::sum(&self.buffer.as_ref()[..self.header_len()]);
        self.set_checksum(ip::checksum(total));
    }

    /// Return the payload, bounded by the total length field, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.header_len()..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

/// A high-level IPv4 header (options are not represented).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Payload protocol.
    pub protocol: IpProtocol,
    /// Payload length in bytes (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// "Don't fragment" flag.
    pub dont_frag: bool,
    /// "More fragments" flag.
    pub more_frags: bool,
    /// Fragment offset in bytes.
    pub frag_offset: u16,
}

impl Repr {
    /// Parse a checked packet; the version must be 4 and, unless `checksum` is `Ignore`, the
    /// header checksum must be correct.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>, checksum: ChecksumCheck) -> Result<Repr> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                field: "version",
                offset: field::VER_IHL,
                reason: "not 4",
            });
        }
        if checksum == ChecksumCheck::Verify && !packet.verify_checksum() {
            return Err(Error::Checksum {
                layer: Layer::Ipv4,
                found: packet.checksum(),
                expected: packet.expected_checksum(),
            });
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.payload().len(),
            ttl: packet.ttl(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
        })
    }

    /// Return the header length `emit` writes (20).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into `packet` (total length = 20 + `payload_len`) and fill the checksum.
    /// The payload bytes are the caller's to write.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN);
        packet.set_dscp(self.dscp);
        packet.set_ecn(self.ecn);
        // Callers size payloads from a 16-bit length; saturate rather than wrap if one does not.
        let total = u16::try_from(HEADER_LEN + self.payload_len).unwrap_or(u16::MAX);
        packet.set_total_len(total);
        packet.set_ident(self.ident);
        packet.set_fragmentation(self.dont_frag, self.more_frags, self.frag_offset);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv4 src={} dst={} proto={} ttl={} len={}",
            self.src_addr, self.dst_addr, self.protocol, self.ttl, self.payload_len
        )?;
        if self.more_frags || self.frag_offset != 0 {
            write!(f, " frag_off={}", self.frag_offset)?;
            if self.more_frags {
                f.write_str(",mf")?;
            }
        }
        Ok(())
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Repr::parse(self, ChecksumCheck::Ignore) {
            Ok(repr) => write!(f, "{repr}"),
            Err(err) => write!(f, "IPv4 ({err})"),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // 10.0.0.1 -> 10.0.0.2, ident 0x1234, DF, ttl 64, ICMP, carrying a 12-byte echo request.
    static PACKET_BYTES: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01, 0x14, 0xa7, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0x18, 0x2a, 0x01, 0x02, 0x00, 0x03, 0x70, 0x69,
        0x6e, 0x67,
    ];

    static PAYLOAD_BYTES: [u8; 12] = [
        0x08, 0x00, 0x18, 0x2a, 0x01, 0x02, 0x00, 0x03, 0x70, 0x69, 0x6e, 0x67,
    ];

    fn packet_repr() -> Repr {
        Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: IpProtocol::Icmp,
            payload_len: 12,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: 0x1234,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(packet.version(), 4);
        assert_eq!(packet.header_len(), 20);
        assert_eq!(packet.dscp(), 0);
        assert_eq!(packet.ecn(), 0);
        assert_eq!(packet.total_len(), 32);
        assert_eq!(packet.ident(), 0x1234);
        assert!(packet.dont_frag());
        assert!(!packet.more_frags());
        assert_eq!(packet.frag_offset(), 0);
        assert_eq!(packet.ttl(), 64);
        assert_eq!(packet.protocol(), IpProtocol::Icmp);
        assert_eq!(packet.checksum(), 0x14a7);
        assert_eq!(packet.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(packet.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
        assert!(packet.verify_checksum());
        assert_eq!(packet.options(), &[] as &[u8]);
        assert_eq!(packet.payload(), &PAYLOAD_BYTES[..]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 32];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_version(4);
        packet.set_header_len(20);
        packet.set_dscp(0);
        packet.set_ecn(0);
        packet.set_total_len(32);
        packet.set_ident(0x1234);
        packet.set_fragmentation(true, false, 0);
        packet.set_ttl(64);
        packet.set_protocol(IpProtocol::Icmp);
        packet.set_src_addr(Ipv4Addr::new(10, 0, 0, 1));
        packet.set_dst_addr(Ipv4Addr::new(10, 0, 0, 2));
        packet.fill_checksum();
        packet.payload_mut().copy_from_slice(&PAYLOAD_BYTES);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn parse() {
        let packet = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(
            Repr::parse(&packet, ChecksumCheck::Verify),
            Ok(packet_repr())
        );
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
    fn payload_excludes_ethernet_padding() {
        let mut padded = PACKET_BYTES.to_vec();
        padded.extend_from_slice(&[0; 14]);
        let packet = Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(packet.payload(), &PAYLOAD_BYTES[..]);
    }

    #[test]
    fn bad_checksum() {
        let mut bytes = PACKET_BYTES;
        bytes[8] = 63; // ttl changed, checksum not updated
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(!packet.verify_checksum());
        assert_eq!(
            Repr::parse(&packet, ChecksumCheck::Verify),
            Err(Error::Checksum {
                layer: Layer::Ipv4,
                found: 0x14a7,
                expected: 0x15a7
            })
        );
        assert_eq!(
            Repr::parse(&packet, ChecksumCheck::Ignore).map(|repr| repr.ttl),
            Ok(63)
        );
    }

    #[test]
    fn malformed() {
        assert!(matches!(
            Packet::new_checked(&PACKET_BYTES[..19]),
            Err(Error::Truncated {
                what: "fixed header",
                ..
            })
        ));
        // Total length says 32 but only 31 bytes arrived.
        assert!(matches!(
            Packet::new_checked(&PACKET_BYTES[..31]),
            Err(Error::Truncated {
                what: "total length",
                needed: 32,
                available: 31,
                ..
            })
        ));
        let mut bytes = PACKET_BYTES;
        bytes[0] = 0x44; // IHL 4 = 16 bytes
        assert!(matches!(
            Packet::new_checked(&bytes[..]),
            Err(Error::Malformed { field: "IHL", .. })
        ));
        let mut bytes = PACKET_BYTES;
        bytes[0] = 0x4f; // IHL 15 = 60 bytes, past the end
        assert!(matches!(
            Packet::new_checked(&bytes[..]),
            Err(Error::Truncated {
                what: "header with options",
                needed: 60,
                ..
            })
        ));
        let mut bytes = PACKET_BYTES;
        bytes[3] = 0x10; // total length 16 < header
        assert!(matches!(
            Packet::new_checked(&bytes[..]),
            Err(Error::Malformed {
                field: "total length",
                ..
            })
        ));
        let mut bytes = PACKET_BYTES;
        bytes[0] = 0x65;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(matches!(
            Repr::parse(&packet, ChecksumCheck::Ignore),
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
            "IPv4 src=10.0.0.1 dst=10.0.0.2 proto=icmp ttl=64 len=12"
        );
    }
}
