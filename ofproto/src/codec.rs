//! `tokio_util` framing (feature `codec`): splits a byte stream into OpenFlow messages by the
//! header's length field and decodes them with [`Message::decode`].
//!
//! Contract: a header whose version is not 0x04 or whose length is below 8 is a fatal
//! [`CodecError`] (the stream cannot be re-synchronised); a well-framed message whose body does
//! not decode is also returned as an error, carrying the xid and type so the caller can answer
//! with an OFPT_ERROR. Encoding a message longer than 65535 bytes (the most the 16-bit length
//! field can say) fails with [`CodecError::Encode`] and writes nothing.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::header::{HEADER_LEN, MsgType, OFP_VERSION};
use crate::msg::Message;
use crate::wire::{DecodeError, EncodeError};

/// Why the codec failed.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// Reading or writing the transport failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The peer speaks another OpenFlow version.
    #[error("unsupported OpenFlow version {0:#04x} (expected 0x04)")]
    BadVersion(u8),
    /// The header's length is below the 8-byte header size.
    #[error("bad OpenFlow message length {0} (must be at least 8)")]
    BadLength(u16),
    /// A framed message did not decode.
    #[error("cannot decode {msg_type} xid={xid:#x}: {error}")]
    Decode {
        /// Its transaction id.
        xid: u32,
        /// Its header type.
        msg_type: MsgType,
        /// What was wrong.
        error: DecodeError,
    },
    /// A message to send does not fit OpenFlow's 16-bit length; nothing was written.
    #[error("cannot encode xid={xid:#x}: {error}")]
    Encode {
        /// Its transaction id.
        xid: u32,
        /// What was wrong.
        error: EncodeError,
    },
}

/// OpenFlow 1.3 framing codec.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfCodec;

impl OfCodec {
    /// A new codec.
    pub fn new() -> OfCodec {
        OfCodec
    }
}

impl Decoder for OfCodec {
    type Item = (u32, Message);
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, CodecError> {
        if src.len() < HEADER_LEN {
            src.reserve(HEADER_LEN - src.len());
            return Ok(None);
        }
        if src[0] != OFP_VERSION {
            return Err(CodecError::BadVersion(src[0]));
        }
        let len = u16::from_be_bytes([src[2], src[3]]);
        if usize::from(len) < HEADER_LEN {
            return Err(CodecError::BadLength(len));
        }
        let len = usize::from(len);
        if src.len() < len {
            src.reserve(len - src.len());
            return Ok(None);
        }
        let frame = src.split_to(len);
        let xid = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        Message::decode(&frame)
            .map(Some)
            .map_err(|error| CodecError::Decode {
                xid,
                msg_type: MsgType::from(frame[1]),
                error,
            })
    }
}

impl Encoder<(u32, Message)> for OfCodec {
    type Error = CodecError;

    fn encode(&mut self, (xid, msg): (u32, Message), dst: &mut BytesMut) -> Result<(), CodecError> {
        encode_framed(xid, &msg, dst)
    }
}

impl Encoder<(u32, &Message)> for OfCodec {
    type Error = CodecError;

    fn encode(
        &mut self,
        (xid, msg): (u32, &Message),
        dst: &mut BytesMut,
    ) -> Result<(), CodecError> {
        encode_framed(xid, msg, dst)
    }
}

/// Append `msg`, or leave `dst` as it was and fail when it would exceed the 65535-byte limit
/// (its length field would otherwise wrap and desynchronise the peer's framing).
fn encode_framed(xid: u32, msg: &Message, dst: &mut BytesMut) -> Result<(), CodecError> {
    let start = dst.len();
    msg.encode(xid, dst);
    let len = dst.len() - start;
    if len > usize::from(u16::MAX) {
        dst.truncate(start);
        return Err(CodecError::Encode {
            xid,
            error: EncodeError::TooLong {
                what: msg.msg_type().name().unwrap_or("message"),
                len,
            },
        });
    }
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn frames_split_messages() {
        let mut buf = BytesMut::new();
        let mut c = OfCodec;
        Encoder::<(u32, Message)>::encode(&mut c, (1, Message::BarrierRequest), &mut buf).unwrap();
        Encoder::<(u32, Message)>::encode(
            &mut c,
            (2, Message::EchoRequest(bytes::Bytes::from_static(b"x"))),
            &mut buf,
        )
        .unwrap();
        let mut partial = buf.split_to(12);
        assert_eq!(
            c.decode(&mut partial).unwrap(),
            Some((1, Message::BarrierRequest))
        );
        assert_eq!(c.decode(&mut partial).unwrap(), None);
        partial.unsplit(buf);
        assert_eq!(
            c.decode(&mut partial).unwrap(),
            Some((2, Message::EchoRequest(bytes::Bytes::from_static(b"x"))))
        );
        assert!(partial.is_empty());
    }

    #[test]
    fn rejects_bad_headers() {
        let mut c = OfCodec;
        assert!(matches!(
            c.decode(&mut BytesMut::from(&[1u8, 0, 0, 8, 0, 0, 0, 0][..])),
            Err(CodecError::BadVersion(1))
        ));
        assert!(matches!(
            c.decode(&mut BytesMut::from(&[4u8, 0, 0, 7, 0, 0, 0, 0][..])),
            Err(CodecError::BadLength(7))
        ));
        assert!(matches!(
            c.decode(&mut BytesMut::from(&[4u8, 14, 0, 8, 0, 0, 0, 3][..])),
            Err(CodecError::Decode { xid: 3, .. })
        ));
    }

    #[test]
    fn refuses_to_encode_past_the_length_limit() {
        // 7,000 16-byte outputs: a 112,000-byte packet-out.
        let big = Message::PacketOut(crate::packet_out::PacketOut {
            buffer_id: 0xffff_ffff,
            in_port: crate::port::PortNo::CONTROLLER,
            actions: vec![crate::action::Action::output(1u32); 7000],
            data: bytes::Bytes::new(),
        });
        let mut c = OfCodec;
        let mut buf = BytesMut::new();
        Encoder::<(u32, Message)>::encode(&mut c, (1, Message::BarrierRequest), &mut buf).unwrap();
        let err = Encoder::<(u32, &Message)>::encode(&mut c, (9, &big), &mut buf).unwrap_err();
        assert!(
            matches!(
                &err,
                CodecError::Encode {
                    xid: 9,
                    error: EncodeError::TooLong { len, .. }
                } if *len > 65535
            ),
            "{err}"
        );
        // What was queued before is intact and nothing of the refused message was written.
        assert_eq!(buf.len(), 8);
        assert_eq!(
            c.decode(&mut buf).unwrap(),
            Some((1, Message::BarrierRequest))
        );
    }
}
