//! UDP datagrams (RFC 768), with the pseudo-header checksum.
//!
//! `payload()` is bounded by the length field. A zero checksum means "none" over IPv4 and is
//! accepted there; over IPv6 the checksum is mandatory (RFC 8200 §8.1), so zero fails verification.
//! A computed checksum of zero is sent as `0xffff`.

use core::fmt;

use super::ip::{self, ChecksumCheck, IpProtocol, PseudoHeader};
use super::{Error, Layer, Result, check_available, read_u16, write_u16};

/// A read/write view of a UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use crate::packet::Field;

    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
}

/// Length of the header.
pub const HEADER_LEN: usize = field::CHECKSUM.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer, checking the header fits and the length field is consistent with it.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check the header fits, the length field covers the header, and the buffer holds it.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_available(Layer::Udp, "header", HEADER_LEN, len)?;
        let datagram_len = usize::from(self.len());
        if datagram_len < HEADER_LEN {
            return Err(Error::Malformed {
                layer: Layer::Udp,
                field: "length",
                offset: field::LENGTH.start,
                reason: "shorter than the header",
            });
        }
        check_available(Layer::Udp, "length", datagram_len, len)
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Return the source port field.
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Return the destination port field.
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Return the length field (header plus payload).
    #[allow(clippy::len_without_is_empty)] // a header field, not a container length
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Return the checksum field.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Return the payload, bounded by the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    fn sum(&self, pseudo: &PseudoHeader) -> u64 {
        let datagram = &self.buffer.as_ref()[..usize::from(self.len())];
        pseudo.sum(IpProtocol::Udp, u32::from(self.len())) + ip::sum(datagram)
    }

    /// Return whether the checksum is correct (a zero checksum over IPv4 means "none").
    pub fn verify_checksum(&self, pseudo: &PseudoHeader) -> bool {
        if self.checksum() == 0 {
            return matches!(pseudo, PseudoHeader::V4 { .. });
        }
        ip::fold(self.sum(pseudo)) == 0xffff
    }

    /// Return the checksum the datagram calls for.
    pub fn expected_checksum(&self, pseudo: &PseudoHeader) -> u16 {
        match ip::expected_checksum(self.sum(pseudo), self.checksum()) {
            0 => 0xffff,
            value => value,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the source port field.
    pub fn set_src_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, value);
    }

    /// Set the destination port field.
    pub fn set_dst_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, value);
    }

    /// Set the length field.
    pub fn set_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Set the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Return the payload, bounded by the length field, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Compute and write the checksum over the pseudo-header and datagram (zero is sent as
    /// `0xffff`, since zero means "no checksum").
    pub fn fill_checksum(&mut self, pseudo: &PseudoHeader) {
        self.set_checksum(0);
        let value = match ip::checksum(self.sum(pseudo)) {
            0 => 0xffff,
            value => value,
        };
        self.set_checksum(value);
    }
}

/// A high-level UDP datagram, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload.
    pub payload: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parse a checked datagram carried under `pseudo`; unless `checksum` is `Ignore`, the
    /// checksum must be correct.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&'a T>,
        pseudo: &PseudoHeader,
        checksum: ChecksumCheck,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if checksum == ChecksumCheck::Verify && !packet.verify_checksum(pseudo) {
            return Err(Error::Checksum {
                layer: Layer::Udp,
                found: packet.checksum(),
                expected: packet.expected_checksum(pseudo),
            });
        }
        let data: &'a [u8] = packet.buffer.as_ref();
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload: &data[HEADER_LEN..usize::from(packet.len())],
        })
    }

    /// Return the length `emit` writes: header plus payload.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }

    /// Write the datagram, payload included, into `packet` and fill the checksum for `pseudo`.
    ///
    /// Fails if the datagram would be longer than the 16-bit length field allows.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        pseudo: &PseudoHeader,
    ) -> Result<()> {
        let len = u16::try_from(self.buffer_len()).map_err(|_| Error::Malformed {
            layer: Layer::Udp,
            field: "length",
            offset: field::LENGTH.start,
            reason: "payload longer than 65527 bytes",
        })?;
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.payload_mut().copy_from_slice(self.payload);
        packet.fill_checksum(pseudo);
        Ok(())
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UDP src={} dst={} len={}",
            self.src_port,
            self.dst_port,
            self.payload.len()
        )
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The checksum is not verified, so the pseudo-header's addresses do not matter.
        let pseudo = PseudoHeader::V4 {
            src: core::net::Ipv4Addr::UNSPECIFIED,
            dst: core::net::Ipv4Addr::UNSPECIFIED,
        };
        let packet = Packet::new_unchecked(self.buffer.as_ref());
        match Repr::parse(&packet, &pseudo, ChecksumCheck::Ignore) {
            Ok(repr) => write!(f, "{repr}"),
            Err(err) => write!(f, "UDP ({err})"),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn pseudo_v4() -> PseudoHeader {
        PseudoHeader::V4 {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
        }
    }

    // 10.0.0.1:5000 -> 10.0.0.2:53, payload "dns?".
    static DATAGRAM_BYTES: [u8; 12] = [
        0x13, 0x88, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x69, 0x64, 0x6e, 0x73, 0x3f,
    ];

    fn datagram_repr() -> Repr<'static> {
        Repr {
            src_port: 5000,
            dst_port: 53,
            payload: b"dns?",
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&DATAGRAM_BYTES[..]).unwrap();
        assert_eq!(packet.src_port(), 5000);
        assert_eq!(packet.dst_port(), 53);
        assert_eq!(packet.len(), 12);
        assert_eq!(packet.checksum(), 0x0069);
        assert_eq!(packet.payload(), b"dns?");
        assert!(packet.verify_checksum(&pseudo_v4()));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 12];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_src_port(5000);
        packet.set_dst_port(53);
        packet.set_len(12);
        packet.payload_mut().copy_from_slice(b"dns?");
        packet.fill_checksum(&pseudo_v4());
        assert_eq!(bytes, DATAGRAM_BYTES);
    }

    #[test]
    fn parse() {
        let packet = Packet::new_checked(&DATAGRAM_BYTES[..]).unwrap();
        assert_eq!(
            Repr::parse(&packet, &pseudo_v4(), ChecksumCheck::Verify),
            Ok(datagram_repr())
        );
    }

    #[test]
    fn emit() {
        let repr = datagram_repr();
        let mut bytes = vec![0xa5; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]), &pseudo_v4())
            .unwrap();
        assert_eq!(bytes, DATAGRAM_BYTES);
    }

    #[test]
    fn zero_checksum_means_none_only_over_ipv4() {
        let mut bytes = DATAGRAM_BYTES;
        bytes[6] = 0;
        bytes[7] = 0;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(packet.verify_checksum(&pseudo_v4()));
        let pseudo_v6 = PseudoHeader::V6 {
            src: Ipv6Addr::LOCALHOST,
            dst: Ipv6Addr::LOCALHOST,
        };
        assert!(!packet.verify_checksum(&pseudo_v6));
        assert!(matches!(
            Repr::parse(&packet, &pseudo_v6, ChecksumCheck::Verify),
            Err(Error::Checksum {
                layer: Layer::Udp,
                found: 0,
                ..
            })
        ));
    }

    #[test]
    fn payload_bounded_by_length_field() {
        let mut bytes = DATAGRAM_BYTES.to_vec();
        bytes.extend_from_slice(&[0xee; 6]); // trailing garbage, e.g. Ethernet padding
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.payload(), b"dns?");
        assert!(packet.verify_checksum(&pseudo_v4()));
    }

    #[test]
    fn malformed() {
        assert!(matches!(
            Packet::new_checked(&DATAGRAM_BYTES[..7]),
            Err(Error::Truncated { what: "header", .. })
        ));
        assert!(matches!(
            Packet::new_checked(&DATAGRAM_BYTES[..11]),
            Err(Error::Truncated {
                what: "length",
                needed: 12,
                available: 11,
                ..
            })
        ));
        let mut bytes = DATAGRAM_BYTES;
        bytes[5] = 7;
        assert!(matches!(
            Packet::new_checked(&bytes[..]),
            Err(Error::Malformed {
                field: "length",
                offset: 4,
                ..
            })
        ));
        let mut bytes = DATAGRAM_BYTES;
        bytes[8] = b'D';
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(matches!(
            Repr::parse(&packet, &pseudo_v4(), ChecksumCheck::Verify),
            Err(Error::Checksum { found: 0x0069, .. })
        ));
    }

    #[test]
    fn display() {
        assert_eq!(datagram_repr().to_string(), "UDP src=5000 dst=53 len=4");
    }
}
