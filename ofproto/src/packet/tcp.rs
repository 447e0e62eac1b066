//! TCP segments (RFC 9293), with the pseudo-header checksum.
//!
//! Options are kept as raw bytes: a controller only needs them to pass a segment through. The
//! checksum covers the pseudo-header of the enclosing IPv4 or IPv6 packet, so checksum operations
//! take a [`PseudoHeader`].

use core::fmt;

use super::ip::{self, ChecksumCheck, IpProtocol, PseudoHeader};
use super::{Error, Layer, Result, check_available, read_u16, read_u32, write_u16, write_u32};

/// The nine TCP control flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u16);

impl Flags {
    /// No more data from sender.
    pub const FIN: Flags = Flags(0x001);
    /// Synchronize sequence numbers.
    pub const SYN: Flags = Flags(0x002);
    /// Reset the connection.
    pub const RST: Flags = Flags(0x004);
    /// Push function.
    pub const PSH: Flags = Flags(0x008);
    /// Acknowledgment field is significant.
    pub const ACK: Flags = Flags(0x010);
    /// Urgent pointer field is significant.
    pub const URG: Flags = Flags(0x020);
    /// ECN echo.
    pub const ECE: Flags = Flags(0x040);
    /// Congestion window reduced.
    pub const CWR: Flags = Flags(0x080);
    /// ECN nonce (historic).
    pub const NS: Flags = Flags(0x100);

    const MASK: u16 = 0x01ff;
    const NAMES: [(Flags, &'static str); 9] = [
        (Flags::FIN, "fin"),
        (Flags::SYN, "syn"),
        (Flags::RST, "rst"),
        (Flags::PSH, "psh"),
        (Flags::ACK, "ack"),
        (Flags::URG, "urg"),
        (Flags::ECE, "ece"),
        (Flags::CWR, "cwr"),
        (Flags::NS, "ns"),
    ];

    /// Return whether every flag in `other` is set.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for Flags {
    type Output = Flags;

    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

impl fmt::Display for Flags {
    /// Format as `syn|ack`, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (flag, name) in Flags::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// A read/write view of a TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use crate::packet::Field;

    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const SEQ_NUM: Field = 4..8;
    pub const ACK_NUM: Field = 8..12;
    /// Data offset (4 bits), reserved (3 bits), flags (9 bits).
    pub const OFF_FLAGS: Field = 12..14;
    pub const WINDOW: Field = 14..16;
    pub const CHECKSUM: Field = 16..18;
    pub const URGENT: Field = 18..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::URGENT.end;
/// Longest options a 4-bit data offset allows.
pub const MAX_OPTIONS_LEN: usize = 40;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer, checking that it holds the header its data offset announces.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check the fixed header fits, the data offset covers it, and the options fit.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_available(Layer::Tcp, "fixed header", HEADER_LEN, len)?;
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Error::Malformed {
                layer: Layer::Tcp,
                field: "data offset",
                offset: field::OFF_FLAGS.start,
                reason: "header shorter than 20 bytes",
            });
        }
        check_available(Layer::Tcp, "header with options", header_len, len)
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

    /// Return the sequence number field.
    pub fn seq_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::SEQ_NUM)
    }

    /// Return the acknowledgment number field.
    pub fn ack_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::ACK_NUM)
    }

    /// Return the header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(read_u16(self.buffer.as_ref(), field::OFF_FLAGS) >> 12) * 4
    }

    /// Return the control flags.
    pub fn flags(&self) -> Flags {
        Flags(read_u16(self.buffer.as_ref(), field::OFF_FLAGS) & Flags::MASK)
    }

    /// Return the window field.
    pub fn window_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::WINDOW)
    }

    /// Return the checksum field.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Return the urgent pointer field.
    pub fn urgent_at(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::URGENT)
    }

    /// Return the options, between the fixed header and the payload.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// Return the payload.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    fn sum(&self, pseudo: &PseudoHeader) -> u64 {
        let data = self.buffer.as_ref();
        let length = u32::try_from(data.len()).unwrap_or(u32::MAX);
        pseudo.sum(IpProtocol::Tcp, length) + ip::sum(data)
    }

    /// Return whether the checksum over the pseudo-header and segment is correct.
    pub fn verify_checksum(&self, pseudo: &PseudoHeader) -> bool {
        ip::fold(self.sum(pseudo)) == 0xffff
    }

    /// Return the checksum the segment calls for.
    pub fn expected_checksum(&self, pseudo: &PseudoHeader) -> u16 {
        ip::expected_checksum(self.sum(pseudo), self.checksum())
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

    /// Set the sequence number field.
    pub fn set_seq_number(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::SEQ_NUM, value);
    }

    /// Set the acknowledgment number field.
    pub fn set_ack_number(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::ACK_NUM, value);
    }

    /// Set the header length in bytes (stored divided by four, in four bits).
    pub fn set_header_len(&mut self, value: usize) {
        let flags = read_u16(self.buffer.as_ref(), field::OFF_FLAGS) & 0x0fff;
        // Four bits of 32-bit words; the mask keeps a bad value out of the flags.
        let offset = ((value / 4) & 0x0f) as u16;
        write_u16(
            self.buffer.as_mut(),
            field::OFF_FLAGS,
            (offset << 12) | flags,
        );
    }

    /// Set the control flags (the reserved bits are cleared).
    pub fn set_flags(&mut self, value: Flags) {
        let offset = read_u16(self.buffer.as_ref(), field::OFF_FLAGS) & 0xf000;
        write_u16(
            self.buffer.as_mut(),
            field::OFF_FLAGS,
            offset | (value.0 & Flags::MASK),
        );
    }

    /// Set the window field.
    pub fn set_window_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::WINDOW, value);
    }

    /// Set the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Set the urgent pointer field.
    pub fn set_urgent_at(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::URGENT, value);
    }

    /// Return the options, mutably.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Return the payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    /// Compute and write the checksum over the pseudo-header and the whole buffer.
    pub fn fill_checksum(&mut self, pseudo: &PseudoHeader) {
        self.set_checksum(0);
        let total = self.sum(pseudo);
        self.set_checksum(ip::checksum(total));
    }
}

/// A high-level TCP segment, borrowing its options and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number.
    pub ack_number: u32,
    /// Control flags.
    pub flags: Flags,
    /// Receive window.
    pub window_len: u16,
    /// Urgent pointer.
    pub urgent_at: u16,
    /// Raw options, at most 40 bytes; `emit` pads them to a multiple of four with zeros.
    pub options: &'a [u8],
    /// Payload.
    pub payload: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parse a checked segment carried under `pseudo`; unless `checksum` is `Ignore`, the
    /// checksum must be correct.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&'a T>,
        pseudo: &PseudoHeader,
        checksum: ChecksumCheck,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if checksum == ChecksumCheck::Verify && !packet.verify_checksum(pseudo) {
            return Err(Error::Checksum {
                layer: Layer::Tcp,
                found: packet.checksum(),
                expected: packet.expected_checksum(pseudo),
            });
        }
        let data: &'a [u8] = packet.buffer.as_ref();
        let header_len = packet.header_len();
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            urgent_at: packet.urgent_at(),
            options: &data[HEADER_LEN..header_len],
            payload: &data[header_len..],
        })
    }

    /// Return the header length `emit` writes: 20 plus the options padded to four bytes.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len().div_ceil(4) * 4
    }

    /// Return the length `emit` writes: header plus payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Write the segment, payload included, into `packet` and fill the checksum for `pseudo`.
    ///
    /// Fails if the options are longer than 40 bytes, which the data offset cannot express.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        pseudo: &PseudoHeader,
    ) -> Result<()> {
        if self.options.len() > MAX_OPTIONS_LEN {
            return Err(Error::Malformed {
                layer: Layer::Tcp,
                field: "options",
                offset: HEADER_LEN,
                reason: "longer than 40 bytes",
            });
        }
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        packet.set_header_len(self.header_len());
        packet.set_flags(self.flags);
        packet.set_window_len(self.window_len);
        packet.set_urgent_at(self.urgent_at);
        let options = packet.options_mut();
        options.fill(0);
        options[..self.options.len()].copy_from_slice(self.options);
        packet.payload_mut()[..self.payload.len()].copy_from_slice(self.payload);
        packet.fill_checksum(pseudo);
        Ok(())
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TCP src={} dst={} flags={} seq={} ack={} win={} len={}",
            self.src_port,
            self.dst_port,
            self.flags,
            self.seq_number,
            self.ack_number,
            self.window_len,
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
            Err(err) => write!(f, "TCP ({err})"),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use core::net::Ipv4Addr;

    fn pseudo_v4() -> PseudoHeader {
        PseudoHeader::V4 {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
        }
    }

    // 10.0.0.1:40000 -> 10.0.0.2:80 SYN seq 1000 win 64240, option MSS 1460.
    static SYN_BYTES: [u8; 24] = [
        0x9c, 0x40, 0x00, 0x50, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x60, 0x02, 0xfa,
        0xf0, 0xe8, 0xba, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4,
    ];

    // 10.0.0.1:40000 -> 10.0.0.2:80 PSH|ACK seq 1001 ack 2002 win 502, payload "GET /".
    static PSH_BYTES: [u8; 25] = [
        0x9c, 0x40, 0x00, 0x50, 0x00, 0x00, 0x03, 0xe9, 0x00, 0x00, 0x07, 0xd2, 0x50, 0x18, 0x01,
        0xf6, 0x27, 0x1e, 0x00, 0x00, 0x47, 0x45, 0x54, 0x20, 0x2f,
    ];

    // fe80::1:443 -> fe80::2:50000 ACK seq 7 ack 8 win 1000, payload "ok".
    static V6_BYTES: [u8; 22] = [
        0x01, 0xbb, 0xc3, 0x50, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x08, 0x50, 0x10, 0x03,
        0xe8, 0x7a, 0x60, 0x00, 0x00, 0x6f, 0x6b,
    ];

    fn syn_repr() -> Repr<'static> {
        Repr {
            src_port: 40000,
            dst_port: 80,
            seq_number: 1000,
            ack_number: 0,
            flags: Flags::SYN,
            window_len: 64240,
            urgent_at: 0,
            options: &[0x02, 0x04, 0x05, 0xb4],
            payload: &[],
        }
    }

    fn psh_repr() -> Repr<'static> {
        Repr {
            src_port: 40000,
            dst_port: 80,
            seq_number: 1001,
            ack_number: 2002,
            flags: Flags::PSH | Flags::ACK,
            window_len: 502,
            urgent_at: 0,
            options: &[],
            payload: b"GET /",
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&SYN_BYTES[..]).unwrap();
        assert_eq!(packet.src_port(), 40000);
        assert_eq!(packet.dst_port(), 80);
        assert_eq!(packet.seq_number(), 1000);
        assert_eq!(packet.ack_number(), 0);
        assert_eq!(packet.header_len(), 24);
        assert_eq!(packet.flags(), Flags::SYN);
        assert_eq!(packet.window_len(), 64240);
        assert_eq!(packet.checksum(), 0xe8ba);
        assert_eq!(packet.urgent_at(), 0);
        assert_eq!(packet.options(), &[0x02, 0x04, 0x05, 0xb4]);
        assert_eq!(packet.payload(), &[] as &[u8]);
        assert!(packet.verify_checksum(&pseudo_v4()));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 24];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_src_port(40000);
        packet.set_dst_port(80);
        packet.set_seq_number(1000);
        packet.set_ack_number(0);
        packet.set_header_len(24);
        packet.set_flags(Flags::SYN);
        packet.set_window_len(64240);
        packet.set_urgent_at(0);
        packet
            .options_mut()
            .copy_from_slice(&[0x02, 0x04, 0x05, 0xb4]);
        packet.fill_checksum(&pseudo_v4());
        assert_eq!(bytes, SYN_BYTES);
    }

    #[test]
    fn parse() {
        for (bytes, repr) in [(&SYN_BYTES[..], syn_repr()), (&PSH_BYTES[..], psh_repr())] {
            let packet = Packet::new_checked(bytes).unwrap();
            assert_eq!(
                Repr::parse(&packet, &pseudo_v4(), ChecksumCheck::Verify),
                Ok(repr)
            );
        }
    }

    #[test]
    fn emit() {
        for (bytes, repr) in [(&SYN_BYTES[..], syn_repr()), (&PSH_BYTES[..], psh_repr())] {
            let mut buffer = vec![0xa5; repr.buffer_len()];
            repr.emit(&mut Packet::new_unchecked(&mut buffer[..]), &pseudo_v4())
                .unwrap();
            assert_eq!(buffer, bytes);
        }
    }

    #[test]
    fn parse_and_emit_over_ipv6() {
        let pseudo = PseudoHeader::V6 {
            src: "fe80::1".parse().unwrap(),
            dst: "fe80::2".parse().unwrap(),
        };
        let packet = Packet::new_checked(&V6_BYTES[..]).unwrap();
        let repr = Repr::parse(&packet, &pseudo, ChecksumCheck::Verify).unwrap();
        assert_eq!(repr.flags, Flags::ACK);
        assert_eq!(repr.payload, b"ok");
        let mut buffer = vec![0; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut buffer[..]), &pseudo)
            .unwrap();
        assert_eq!(buffer, V6_BYTES);
        // The same bytes do not verify under the IPv4 pseudo-header.
        assert!(!packet.verify_checksum(&pseudo_v4()));
    }

    #[test]
    fn emit_pads_options_and_rejects_long_ones() {
        let repr = Repr {
            options: &[0x01, 0x01, 0x04, 0x02, 0x01],
            ..syn_repr()
        };
        assert_eq!(repr.header_len(), 28);
        let mut buffer = vec![0xa5; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut buffer[..]), &pseudo_v4())
            .unwrap();
        assert_eq!(&buffer[20..28], &[0x01, 0x01, 0x04, 0x02, 0x01, 0, 0, 0]);

        let long = [1u8; 41];
        let repr = Repr {
            options: &long,
            ..syn_repr()
        };
        let mut buffer = [0u8; 64];
        assert!(matches!(
            repr.emit(&mut Packet::new_unchecked(&mut buffer[..]), &pseudo_v4()),
            Err(Error::Malformed {
                field: "options",
                ..
            })
        ));
    }

    #[test]
    fn malformed() {
        assert!(matches!(
            Packet::new_checked(&SYN_BYTES[..19]),
            Err(Error::Truncated {
                what: "fixed header",
                ..
            })
        ));
        assert!(matches!(
            Packet::new_checked(&SYN_BYTES[..23]),
            Err(Error::Truncated {
                what: "header with options",
                needed: 24,
                ..
            })
        ));
        let mut bytes = SYN_BYTES;
        bytes[12] = 0x40; // data offset 4 words = 16 bytes
        assert!(matches!(
            Packet::new_checked(&bytes[..]),
            Err(Error::Malformed {
                field: "data offset",
                offset: 12,
                ..
            })
        ));
        let mut bytes = PSH_BYTES;
        bytes[24] = b'X';
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(matches!(
            Repr::parse(&packet, &pseudo_v4(), ChecksumCheck::Verify),
            Err(Error::Checksum {
                layer: Layer::Tcp,
                found: 0x271e,
                ..
            })
        ));
    }

    #[test]
    fn display() {
        assert_eq!(
            psh_repr().to_string(),
            "TCP src=40000 dst=80 flags=psh|ack seq=1001 ack=2002 win=502 len=5"
        );
        assert_eq!(Flags::default().to_string(), "none");
    }
}
