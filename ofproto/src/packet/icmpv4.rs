//! ICMP for IPv4 (RFC 792).
//!
//! The checksum covers the whole ICMP message (no pseudo-header). [`Repr`] names echo request and
//! reply; every other message keeps its type, code, the four "rest of header" bytes and its data,
//! so it survives a round trip.

use core::fmt;

use super::ip::{self, ChecksumCheck};
use super::{Error, Layer, Result, check_available, read_u16, read_u32, write_u16, write_u32};

enum_with_unknown! {
    /// ICMPv4 message type.
    pub enum Message(u8) {
        /// Echo reply.
        EchoReply = 0,
        /// Destination unreachable.
        DstUnreachable = 3,
        /// Redirect.
        Redirect = 5,
        /// Echo request.
        EchoRequest = 8,
        /// Router advertisement.
        RouterAdvert = 9,
        /// Router solicitation.
        RouterSolicit = 10,
        /// Time exceeded.
        TimeExceeded = 11,
        /// Parameter problem.
        ParamProblem = 12,
        /// Timestamp.
        Timestamp = 13,
        /// Timestamp reply.
        TimestampReply = 14,
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::EchoReply => f.write_str("echo reply"),
            Message::DstUnreachable => f.write_str("destination unreachable"),
            Message::Redirect => f.write_str("redirect"),
            Message::EchoRequest => f.write_str("echo request"),
            Message::RouterAdvert => f.write_str("router advertisement"),
            Message::RouterSolicit => f.write_str("router solicitation"),
            Message::TimeExceeded => f.write_str("time exceeded"),
            Message::ParamProblem => f.write_str("parameter problem"),
            Message::Timestamp => f.write_str("timestamp"),
            Message::TimestampReply => f.write_str("timestamp reply"),
            Message::Unknown(kind) => write!(f, "type {kind}"),
        }
    }
}

/// A read/write view of an ICMPv4 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use crate::packet::Field;

    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    /// Type-specific; identifier and sequence number for echo messages.
    pub const REST_OF_HEADER: Field = 4..8;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQ_NO: Field = 6..8;
}

/// Length of the header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = field::REST_OF_HEADER.end;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer, checking that it holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the buffer holds the 8-byte header.
    pub fn check_len(&self) -> Result<()> {
        check_available(
            Layer::Icmpv4,
            "header",
            HEADER_LEN,
            self.buffer.as_ref().len(),
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

    /// Return the data after the header.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Return whether the checksum over the whole message is correct.
    pub fn verify_checksum(&self) -> bool {
        ip::fold(ip::sum(self.buffer.as_ref())) == 0xffff
    }

    /// Return the checksum the message calls for.
    pub fn expected_checksum(&self) -> u16 {
        ip::expected_checksum(ip::sum(self.buffer.as_ref()), self.checksum())
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

    /// Return the data after the header, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Compute and write the checksum over the whole message.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let total = ip::sum(self.buffer.as_ref());
        self.set_checksum(ip::checksum(total));
    }
}

/// A high-level ICMPv4 message, borrowing its data.
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

impl<'a> Repr<'a> {
    /// Parse a checked message; unless `checksum` is `Ignore`, the checksum must be correct.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&'a T>,
        checksum: ChecksumCheck,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if checksum == ChecksumCheck::Verify && !packet.verify_checksum() {
            return Err(Error::Checksum {
                layer: Layer::Icmpv4,
                found: packet.checksum(),
                expected: packet.expected_checksum(),
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
            (msg_type, code) => Repr::Other {
                msg_type,
                code,
                rest_of_header: packet.rest_of_header(),
                data,
            },
        })
    }

    /// Return the length `emit` writes: header plus data.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match self {
                Repr::EchoRequest { data, .. }
                | Repr::EchoReply { data, .. }
                | Repr::Other { data, .. } => data.len(),
            }
    }

    /// Write the message, data included, into `packet` and fill the checksum.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let data = match *self {
            Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                packet.set_msg_type(Message::EchoRequest);
                packet.set_msg_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                data
            }
            Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                packet.set_msg_type(Message::EchoReply);
                packet.set_msg_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                data
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
                data
            }
        };
        packet.data_mut()[..data.len()].copy_from_slice(data);
        packet.fill_checksum();
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
                "ICMPv4 echo request id={ident} seq={seq_no} len={}",
                data.len()
            ),
            Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => write!(
                f,
                "ICMPv4 echo reply id={ident} seq={seq_no} len={}",
                data.len()
            ),
            Repr::Other {
                msg_type,
                code,
                data,
                ..
            } => write!(f, "ICMPv4 {msg_type} code={code} len={}", data.len()),
        }
    }
}

impl<T: AsRef<[u8]>> fmt::Display for Packet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Repr::parse(
            &Packet::new_unchecked(self.buffer.as_ref()),
            ChecksumCheck::Ignore,
        ) {
            Ok(repr) => write!(f, "{repr}"),
            Err(err) => write!(f, "ICMPv4 ({err})"),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // Echo request id 0x0102 seq 3, data "ping".
    static ECHO_BYTES: [u8; 12] = [
        0x08, 0x00, 0x18, 0x2a, 0x01, 0x02, 0x00, 0x03, 0x70, 0x69, 0x6e, 0x67,
    ];

    fn echo_repr() -> Repr<'static> {
        Repr::EchoRequest {
            ident: 0x0102,
            seq_no: 3,
            data: b"ping",
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&ECHO_BYTES[..]).unwrap();
        assert_eq!(packet.msg_type(), Message::EchoRequest);
        assert_eq!(packet.msg_code(), 0);
        assert_eq!(packet.checksum(), 0x182a);
        assert_eq!(packet.echo_ident(), 0x0102);
        assert_eq!(packet.echo_seq_no(), 3);
        assert_eq!(packet.data(), b"ping");
        assert!(packet.verify_checksum());
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 12];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_msg_type(Message::EchoRequest);
        packet.set_msg_code(0);
        packet.set_echo_ident(0x0102);
        packet.set_echo_seq_no(3);
        packet.data_mut().copy_from_slice(b"ping");
        packet.fill_checksum();
        assert_eq!(bytes, ECHO_BYTES);
    }

    #[test]
    fn parse() {
        let packet = Packet::new_checked(&ECHO_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&packet, ChecksumCheck::Verify), Ok(echo_repr()));
    }

    #[test]
    fn emit() {
        let repr = echo_repr();
        let mut bytes = vec![0xa5; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, ECHO_BYTES);
    }

    #[test]
    fn other_message_round_trips() {
        // Destination unreachable, port unreachable (code 3), with 4 bytes of quoted data.
        let repr = Repr::Other {
            msg_type: Message::DstUnreachable,
            code: 3,
            rest_of_header: 0,
            data: &[0x45, 0, 0, 0x1c],
        };
        let mut bytes = vec![0; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(packet.verify_checksum());
        assert_eq!(Repr::parse(&packet, ChecksumCheck::Verify), Ok(repr));
        assert_eq!(
            repr.to_string(),
            "ICMPv4 destination unreachable code=3 len=4"
        );
    }

    #[test]
    fn malformed() {
        assert_eq!(
            Packet::new_checked(&ECHO_BYTES[..7]),
            Err(Error::Truncated {
                layer: Layer::Icmpv4,
                what: "header",
                needed: 8,
                available: 7
            })
        );
        let mut bytes = ECHO_BYTES;
        bytes[11] = b'G';
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(matches!(
            Repr::parse(&packet, ChecksumCheck::Verify),
            Err(Error::Checksum {
                layer: Layer::Icmpv4,
                found: 0x182a,
                ..
            })
        ));
        assert!(Repr::parse(&packet, ChecksumCheck::Ignore).is_ok());
    }

    #[test]
    fn display() {
        assert_eq!(
            echo_repr().to_string(),
            "ICMPv4 echo request id=258 seq=3 len=4"
        );
    }
}
