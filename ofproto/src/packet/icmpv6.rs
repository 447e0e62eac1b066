//! ICMP for IPv6 (RFC 4443) and the neighbor discovery messages (RFC 4861) a switch answers.
//!
//! The checksum covers an IPv6 pseudo-header (source, destination, length, next header 58) and the
//! whole message, so checksum operations take the IPv6 addresses. [`Repr`] names echo messages and
//! neighbor solicitation/advertisement with their link-layer address option; other NDP options are
//! skipped on parse. Every other message keeps its type, code, four header bytes and data.

use core::fmt;
use core::net::Ipv6Addr;

use super::ethernet::EthernetAddress;
use super::ip::{self, ChecksumCheck, IpProtocol, PseudoHeader};
use super::{Error, Layer, Result, check_available, read_u16, read_u32, write_u16, write_u32};

enum_with_unknown! {
    /// ICMPv6 message type.
    pub enum Message(u8) {
        /// Destination unreachable.
        DstUnreachable = 1,
        /// Packet too big.
        PacketTooBig = 2,
        /// Time exceeded.
        TimeExceeded = 3,
        /// Parameter problem.
        ParamProblem = 4,
        /// Echo request.
        EchoRequest = 128,
        /// Echo reply.
        EchoReply = 129,
        /// Multicast listener query.
        MldQuery = 130,
        /// Router solicitation.
        RouterSolicit = 133,
        /// Router advertisement.
        RouterAdvert = 134,
        /// Neighbor solicitation.
        NeighborSolicit = 135,
        /// Neighbor advertisement.
        NeighborAdvert = 136,
        /// Redirect.
        Redirect = 137,
        /// Multicast listener report v2.
        MldReport = 143,
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::DstUnreachable => f.write_str("destination unreachable"),
            Message::PacketTooBig => f.write_str("packet too big"),
            Message::TimeExceeded => f.write_str("time exceeded"),
            Message::ParamProblem => f.write_str("parameter problem"),
            Message::EchoRequest => f.write_str("echo request"),
            Message::EchoReply => f.write_str("echo reply"),
            Message::MldQuery => f.write_str("multicast listener query"),
            Message::RouterSolicit => f.write_str("router solicitation"),
            Message::RouterAdvert => f.write_str("router advertisement"),
            Message::NeighborSolicit => f.write_str("neighbor solicitation"),
            Message::NeighborAdvert => f.write_str("neighbor advertisement"),
            Message::Redirect => f.write_str("redirect"),
            Message::MldReport => f.write_str("multicast listener report"),
            Message::Unknown(kind) => write!(f, "type {kind}"),
        }
    }
}

/// NDP option type: source link-layer address.
const OPTION_SOURCE_LLADDR: u8 = 1;
/// NDP option type: target link-layer address.
const OPTION_TARGET_LLADDR: u8 = 2;
/// Length of a link-layer address option carrying an Ethernet address.
const LLADDR_OPTION_LEN: usize = 8;

/// Flags of a neighbor advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NeighborFlags {
    /// The sender is a router.
    pub router: bool,
    /// Sent in response to a solicitation.
    pub solicited: bool,
    /// Override an existing cache entry.
    pub override_: bool,
}

impl NeighborFlags {
    const ROUTER: u32 = 0x8000_0000;
    const SOLICITED: u32 = 0x4000_0000;
    const OVERRIDE: u32 = 0x2000_0000;

    fn from_word(word: u32) -> NeighborFlags {
        NeighborFlags {
            router: word & Self::ROUTER != 0,
            solicited: word & Self::SOLICITED != 0,
            override_: word & Self::OVERRIDE != 0,
        }
    }

    fn to_word(self) -> u32 {
        let mut word = 0;
        if self.router {
            word |= Self::ROUTER;
        }
        if self.solicited {
            word |= Self::SOLICITED;
        }
        if self.override_ {
            word |= Self::OVERRIDE;
        }
        word
    }
}

/// A read/write view of an ICMPv6 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use crate::packet::Field;

    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    /// Type-specific; identifier and sequence number for echo, flags + reserved for NDP.
    pub const REST_OF_HEADER: Field = 4..8;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQ_NO: Field = 6..8;
    /// Neighbor solicitation/advertisement target address.
    pub const TARGET_ADDR: Field = 8..24;
    /// NDP options follow the target address.
    pub const NDP_OPTIONS: usize = 24;
}

/// Length of the header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = field::REST_OF_HEADER.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer, checking that it holds the 8-byte header, and the target address for a
    /// neighbor solicitation or advertisement.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the buffer holds the header, and the target address of NDP messages.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_available(Layer::Icmpv6, "header", HEADER_LEN, len)?;
        if self.is_neighbor_message() {
            check_available(Layer::Icmpv6, "target address", field::NDP_OPTIONS, len)?;
        }
        Ok(())
    }

    fn is_neighbor_message(&self) -> bool {
        matches!(
            self.msg_type(),
            Message::NeighborSolicit | Message::NeighborAdvert
        )
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Return the type field.
    pub fn msg_type(&self) -> Message {
        Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Return the code field.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Return the checksum field.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Return the four type-specific header bytes as one number.
    pub fn rest_of_header(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::REST_OF_HEADER)
    }

    /// Return the identifier field of an echo message.
    pub fn echo_ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Return the sequence number field of an echo message.
    pub fn echo_seq_no(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_SEQ_NO)
    }

    /// Return the flags of a neighbor advertisement.
    pub fn neighbor_flags(&self) -> NeighborFlags {
        NeighborFlags::from_word(self.rest_of_header())
    }

    /// Return the target address of a neighbor solicitation or advertisement.
    ///
    /// # Panics
    /// If the buffer is shorter than 24 bytes, which `new_checked` rules out for those messages.
    pub fn target_addr(&self) -> Ipv6Addr {
        let mut octets = [0; 16];
        octets.copy_from_slice(&self.buffer.as_ref()[field::TARGET_ADDR]);
        Ipv6Addr::from(octets)
    }

    /// Return the data after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Return the NDP options after the target address (empty for other messages).
    pub fn ndp_options(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(field::NDP_OPTIONS..)
            .filter(|_| self.is_neighbor_message())
            .unwrap_or(&[])
    }

    fn sum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> u64 {
        let data = self.buffer.as_ref();
        let pseudo = PseudoHeader::V6 {
            src: *src,
            dst: *dst,
        };
        // A length over u32 cannot come from a 16-bit IPv6 payload length; saturate.
        let length = u32::try_from(data.len()).unwrap_or(u32::MAX);
        pseudo.sum(IpProtocol::Icmpv6, length) + ip::sum(data)
    }

    /// Return whether the checksum over the pseudo-header and message is correct.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        ip::fold(self.sum(src, dst)) == 0xffff
    }

    /// Return the checksum the message calls for.
    pub fn expected_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> u16 {
        ip::expected_checksum(self.sum(src, dst), self.checksum())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the type field.
    pub fn set_msg_type(&mut self, value: Message) {
        self.buffer.as_mut()[field::TYPE] = value.into();
    }

    /// Set the code field.
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Set the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Set the four type-specific header bytes.
    pub fn set_rest_of_header(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), field::REST_OF_HEADER, value);
    }

    /// Set the identifier field of an echo message.
    pub fn set_echo_ident(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::ECHO_IDENT, value);
    }

    /// Set the sequence number field of an echo message.
    pub fn set_echo_seq_no(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::ECHO_SEQ_NO, value);
    }

    /// Set the flags of a neighbor advertisement (the reserved bits are cleared).
    pub fn set_neighbor_flags(&mut self, value: NeighborFlags) {
        self.set_rest_of_header(value.to_word());
    }

    /// Set the target address of a neighbor solicitation or advertisement.
    pub fn set_target_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::TARGET_ADDR].copy_from_slice(&value.octets());
    }

    /// Return the data after the 8-byte header, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Compute and write the checksum over the pseudo-header and message.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let total = self.sum(src, dst);
        self.set_checksum(ip::checksum(total));
    }
}

/// A high-level ICMPv6 message, borrowing its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repr<'a> {
    /// Echo request ("ping").
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data echoed back.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data of the request.
        data: &'a [u8],
    },
    /// Neighbor solicitation: who has `target_addr`?
    NeighborSolicit {
        /// Address being resolved.
        target_addr: Ipv6Addr,
        /// Sender's link-layer address option, if present.
        source_lladdr: Option<EthernetAddress>,
    },
    /// Neighbor advertisement: `target_addr` is at `target_lladdr`.
    NeighborAdvert {
        /// Router, solicited and override flags.
        flags: NeighborFlags,
        /// Address being advertised.
        target_addr: Ipv6Addr,
        /// Target link-layer address option, if present.
        target_lladdr: Option<EthernetAddress>,
    },
    /// Any other message, kept as is.
    Other {
        /// Type.
        msg_type: Message,
        /// Code.
        code: u8,
        /// The four type-specific header bytes.
        rest_of_header: u32,
        /// Data after the header.
        data: &'a [u8],
    },
}

/// Return the Ethernet address in the first link-layer address option of `kind` in `options`.
fn find_lladdr(options: &[u8], kind: u8) -> Result<Option<EthernetAddress>> {
    let mut rest = options;
    let mut offset = field::NDP_OPTIONS;
    let mut found = None;
    while !rest.is_empty() {
        check_available(Layer::Icmpv6, "NDP option header", 2, rest.len())?;
        let len = usize::from(rest[1]) * 8;
        if len == 0 {
            return Err(Error::Malformed {
                layer: Layer::Icmpv6,
                field: "NDP option length",
                offset: offset + 1,
                reason: "zero",
            });
        }
        check_available(Layer::Icmpv6, "NDP option", len, rest.len())?;
        // Only an 8-byte option carries an Ethernet address; other link types are skipped.
        if rest[0] == kind && found.is_none() && len == LLADDR_OPTION_LEN {
            found = EthernetAddress::from_bytes(&rest[2..LLADDR_OPTION_LEN]);
        }
        rest = &rest[len..];
        offset += len;
    }
    Ok(found)
}

impl<'a> Repr<'a> {
    /// Parse a checked message sent from `src` to `dst`; unless `checksum` is `Ignore`, the
    /// checksum must be correct.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&'a T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        checksum: ChecksumCheck,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if checksum == ChecksumCheck::Verify && !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum {
                layer: Layer::Icmpv6,
                found: packet.checksum(),
                expected: packet.expected_checksum(src, dst),
            });
        }
        let data = &packet.buffer.as_ref()[HEADER_LEN..];
        Ok(match (packet.msg_type(), packet.msg_code()) {
            (Message::EchoRequest, 0) => Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            },
            (Message::EchoReply, 0) => Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            },
            (Message::NeighborSolicit, 0) => Repr::NeighborSolicit {
                target_addr: packet.target_addr(),
                source_lladdr: find_lladdr(packet.ndp_options(), OPTION_SOURCE_LLADDR)?,
            },
            (Message::NeighborAdvert, 0) => Repr::NeighborAdvert {
                flags: packet.neighbor_flags(),
                target_addr: packet.target_addr(),
                target_lladdr: find_lladdr(packet.ndp_options(), OPTION_TARGET_LLADDR)?,
            },
            (msg_type, code) => Repr::Other {
                msg_type,
                code,
                rest_of_header: packet.rest_of_header(),
                data,
            },
        })
    }

    /// Return the length `emit` writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Repr::EchoRequest { data, .. }
            | Repr::EchoReply { data, .. }
            | Repr::Other { data, .. } => HEADER_LEN + data.len(),
            Repr::NeighborSolicit {
                source_lladdr: lladdr,
                ..
            }
            | Repr::NeighborAdvert {
                target_lladdr: lladdr,
                ..
            } => field::NDP_OPTIONS + lladdr.map_or(0, |_| LLADDR_OPTION_LEN),
        }
    }

    /// Write the message into `packet` and fill the checksum for `src` → `dst`.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) {
        match *self {
            Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                let kind = if matches!(self, Repr::EchoRequest { .. }) {
                    Message::EchoRequest
                } else {
                    Message::EchoReply
                };
                packet.set_msg_type(kind);
                packet.set_msg_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                packet.data_mut()[..data.len()].copy_from_slice(data);
            }
            Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => {
                packet.set_msg_type(Message::NeighborSolicit);
                packet.set_msg_code(0);
                packet.set_rest_of_header(0);
                packet.set_target_addr(target_addr);
                emit_lladdr(packet, OPTION_SOURCE_LLADDR, source_lladdr);
            }
            Repr::NeighborAdvert {
                flags,
                target_addr,
                target_lladdr,
            } => {
                packet.set_msg_type(Message::NeighborAdvert);
                packet.set_msg_code(0);
                packet.set_neighbor_flags(flags);
                packet.set_target_addr(target_addr);
                emit_lladdr(packet, OPTION_TARGET_LLADDR, target_lladdr);
            }
            Repr::Other {
                msg_type,
                code,
                rest_of_header,
                data,
            } => {
                packet.set_msg_type(msg_type);
                packet.set_msg_code(code);
                packet.set_rest_of_header(rest_of_header);
                packet.data_mut()[..data.len()].copy_from_slice(data);
            }
        }
        packet.fill_checksum(src, dst);
    }
}

fn emit_lladdr<T: AsRef<[u8]> + AsMut<[u8]>>(
    packet: &mut Packet<T>,
    kind: u8,
    lladdr: Option<EthernetAddress>,
) {
    if let Some(addr) = lladdr {
        let option = &mut packet.buffer.as_mut()[field::NDP_OPTIONS..][..LLADDR_OPTION_LEN];
        option[0] = kind;
        option[1] = 1; // in units of 8 bytes
        option[2..].copy_from_slice(addr.as_bytes());
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => write!(
                f,
                "ICMPv6 echo request id={ident} seq={seq_no} len={}",
                data.len()
            ),
            Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => write!(
                f,
                "ICMPv6 echo reply id={ident} seq={seq_no} len={}",
                data.len()
            ),
            Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => {
                write!(f, "ICMPv6 neighbor solicitation who-has {target_addr}")?;
                if let Some(lladdr) = source_lladdr {
                    write!(f, " sll={lladdr}")?;
                }
                Ok(())
            }
            Repr::NeighborAdvert {
                flags,
                target_addr,
                target_lladdr,
            } => {
                write!(f, "ICMPv6 neighbor advertisement {target_addr}")?;
                if let Some(lladdr) = target_lladdr {
                    write!(f, " is-at {lladdr}")?;
                }
                for (set, name) in [
                    (flags.router, "router"),
                    (flags.solicited, "solicited"),
                    (flags.override_, "override"),
                ] {
                    if set {
                        write!(f, " {name}")?;
                    }
                }
                Ok(())
            }
            Repr::Other {
                msg_type,
                code,
                data,
                ..
            } => write!(f, "ICMPv6 {msg_type} code={code} len={}", data.len()),
        }
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The checksum is not verified, so the pseudo-header's addresses do not matter.
        let unspecified = Ipv6Addr::UNSPECIFIED;
        let packet = Packet::new_unchecked(self.buffer.as_ref());
        match Repr::parse(&packet, &unspecified, &unspecified, ChecksumCheck::Ignore) {
            Ok(repr) => write!(f, "{repr}"),
            Err(err) => write!(f, "ICMPv6 ({err})"),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn addr(text: &str) -> Ipv6Addr {
        text.parse().unwrap()
    }

    // fe80::1 -> fe80::2: echo request id 7 seq 1, data "v6".
    static ECHO_BYTES: [u8; 10] = [0x80, 0x00, 0x0c, 0x78, 0x00, 0x07, 0x00, 0x01, 0x76, 0x36];

    // fe80::1 -> ff02::1:ff00:2: who has fe80::2, source lladdr 02:00:00:00:00:01.
    static SOLICIT_BYTES: [u8; 32] = [
        0x87, 0x00, 0x7a, 0x97, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00,
        0x00, 0x01,
    ];

    // fe80::2 -> fe80::1: fe80::2 is at 02:00:00:00:00:02, solicited + override.
    static ADVERT_BYTES: [u8; 32] = [
        0x88, 0x00, 0x18, 0x1a, 0x60, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x01, 0x02, 0x00, 0x00, 0x00,
        0x00, 0x02,
    ];

    fn solicit_repr() -> Repr<'static> {
        Repr::NeighborSolicit {
            target_addr: addr("fe80::2"),
            source_lladdr: Some(EthernetAddress([0x02, 0, 0, 0, 0, 0x01])),
        }
    }

    fn advert_repr() -> Repr<'static> {
        Repr::NeighborAdvert {
            flags: NeighborFlags {
                router: false,
                solicited: true,
                override_: true,
            },
            target_addr: addr("fe80::2"),
            target_lladdr: Some(EthernetAddress([0x02, 0, 0, 0, 0, 0x02])),
        }
    }

    #[test]
    fn deconstruct_echo() {
        let packet = Packet::new_checked(&ECHO_BYTES[..]).unwrap();
        assert_eq!(packet.msg_type(), Message::EchoRequest);
        assert_eq!(packet.msg_code(), 0);
        assert_eq!(packet.checksum(), 0x0c78);
        assert_eq!(packet.echo_ident(), 7);
        assert_eq!(packet.echo_seq_no(), 1);
        assert_eq!(packet.data(), b"v6");
        assert!(packet.verify_checksum(&addr("fe80::1"), &addr("fe80::2")));
        // The pseudo-header matters: swapping nothing but the destination breaks the sum.
        assert!(!packet.verify_checksum(&addr("fe80::1"), &addr("fe80::3")));
    }

    #[test]
    fn construct_echo() {
        let mut bytes = [0xa5u8; 10];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_msg_type(Message::EchoRequest);
        packet.set_msg_code(0);
        packet.set_echo_ident(7);
        packet.set_echo_seq_no(1);
        packet.data_mut().copy_from_slice(b"v6");
        packet.fill_checksum(&addr("fe80::1"), &addr("fe80::2"));
        assert_eq!(bytes, ECHO_BYTES);
    }

    #[test]
    fn parse_and_emit_echo() {
        let (src, dst) = (addr("fe80::1"), addr("fe80::2"));
        let packet = Packet::new_checked(&ECHO_BYTES[..]).unwrap();
        let repr = Repr::parse(&packet, &src, &dst, ChecksumCheck::Verify).unwrap();
        assert_eq!(
            repr,
            Repr::EchoRequest {
                ident: 7,
                seq_no: 1,
                data: b"v6"
            }
        );
        let mut bytes = vec![0xa5; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]), &src, &dst);
        assert_eq!(bytes, ECHO_BYTES);
    }

    #[test]
    fn parse_and_emit_neighbor_solicit() {
        let (src, dst) = (addr("fe80::1"), addr("ff02::1:ff00:2"));
        let packet = Packet::new_checked(&SOLICIT_BYTES[..]).unwrap();
        assert_eq!(packet.target_addr(), addr("fe80::2"));
        let repr = Repr::parse(&packet, &src, &dst, ChecksumCheck::Verify).unwrap();
        assert_eq!(repr, solicit_repr());
        let mut bytes = vec![0xa5; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]), &src, &dst);
        assert_eq!(bytes, SOLICIT_BYTES);
    }

    #[test]
    fn parse_and_emit_neighbor_advert() {
        let (src, dst) = (addr("fe80::2"), addr("fe80::1"));
        let packet = Packet::new_checked(&ADVERT_BYTES[..]).unwrap();
        let repr = Repr::parse(&packet, &src, &dst, ChecksumCheck::Verify).unwrap();
        assert_eq!(repr, advert_repr());
        let mut bytes = vec![0xa5; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]), &src, &dst);
        assert_eq!(bytes, ADVERT_BYTES);
    }

    #[test]
    fn malformed() {
        assert!(matches!(
            Packet::new_checked(&ECHO_BYTES[..7]),
            Err(Error::Truncated { what: "header", .. })
        ));
        // A solicitation cut inside its target address.
        assert!(matches!(
            Packet::new_checked(&SOLICIT_BYTES[..20]),
            Err(Error::Truncated {
                what: "target address",
                needed: 24,
                ..
            })
        ));
        let (src, dst) = (addr("fe80::1"), addr("ff02::1:ff00:2"));
        // Option length zero would loop forever in a naive parser.
        let mut bytes = SOLICIT_BYTES;
        bytes[25] = 0;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(matches!(
            Repr::parse(&packet, &src, &dst, ChecksumCheck::Ignore),
            Err(Error::Malformed {
                field: "NDP option length",
                offset: 25,
                ..
            })
        ));
        // Option length running past the end.
        let mut bytes = SOLICIT_BYTES;
        bytes[25] = 2;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(matches!(
            Repr::parse(&packet, &src, &dst, ChecksumCheck::Ignore),
            Err(Error::Truncated {
                what: "NDP option",
                needed: 16,
                available: 8,
                ..
            })
        ));
        // Checksum verified with the pseudo-header.
        let packet = Packet::new_checked(&SOLICIT_BYTES[..]).unwrap();
        assert!(matches!(
            Repr::parse(&packet, &src, &addr("fe80::9"), ChecksumCheck::Verify),
            Err(Error::Checksum {
                layer: Layer::Icmpv6,
                found: 0x7a97,
                ..
            })
        ));
    }

    #[test]
    fn display() {
        assert_eq!(
            solicit_repr().to_string(),
            "ICMPv6 neighbor solicitation who-has fe80::2 sll=02:00:00:00:00:01"
        );
        assert_eq!(
            advert_repr().to_string(),
            "ICMPv6 neighbor advertisement fe80::2 is-at 02:00:00:00:00:02 solicited override"
        );
    }
}
