//! Framing for a switch connection: ofproto's codec, made tolerant of single bad messages.
//!
//! A `FramedRead` ends its stream after the first decoder error, so a codec error would drop
//! the whole connection because of one message we cannot read (a newer OVS extension, say).
//! Here a well-framed message that does not decode is an item, not an error; only a broken
//! frame (which leaves no way to find the next message) ends the stream. A HELLO of another
//! OpenFlow version is also an item, so the connection can answer it with a clear error.

use bytes::{Buf, BytesMut};
use ofproto::DecodeError;
use ofproto::Message;
use ofproto::codec::{CodecError, OfCodec};
use ofproto::header::{HEADER_LEN, MsgType, OFP_VERSION};
use tokio_util::codec::{Decoder, Encoder};

/// What arrived from a switch.
#[derive(Debug)]
pub(crate) enum Incoming {
    Message(u32, Message),
    /// A whole message whose body did not decode.
    Undecodable {
        xid: u32,
        msg_type: MsgType,
        error: DecodeError,
    },
    /// A HELLO of an OpenFlow version other than 1.3.
    WrongVersion(u8),
}

#[derive(Debug, Default)]
pub(crate) struct SwitchCodec(OfCodec);

/// What goes to a switch: a message, or messages already encoded (a transaction's bundle adds,
/// encoded once and checked before anything is sent).
pub(crate) enum Out {
    Message(u32, Message),
    Encoded(BytesMut),
}

impl Out {
    pub(crate) fn message(xid: u32, msg: Message) -> Out {
        Out::Message(xid, msg)
    }
}

impl Encoder<Out> for SwitchCodec {
    type Error = CodecError;

    fn encode(&mut self, item: Out, dst: &mut BytesMut) -> Result<(), CodecError> {
        match item {
            Out::Message(xid, msg) => self.0.encode((xid, msg), dst),
            Out::Encoded(bytes) => {
                if dst.is_empty() {
                    *dst = bytes;
                } else {
                    dst.extend_from_slice(&bytes);
                }
                Ok(())
            }
        }
    }
}

/// OFPT_HELLO's type number, the same in every OpenFlow version.
const OFPT_HELLO: u8 = 0;

impl Decoder for SwitchCodec {
    type Item = Incoming;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Incoming>, CodecError> {
        if src.len() >= HEADER_LEN && src[0] != OFP_VERSION && src[1] == OFPT_HELLO {
            let version = src[0];
            let len = usize::from(u16::from_be_bytes([src[2], src[3]])).max(HEADER_LEN);
            if src.len() < len {
                return Ok(None);
            }
            src.advance(len);
            return Ok(Some(Incoming::WrongVersion(version)));
        }
        match self.0.decode(src) {
            Ok(Some((xid, msg))) => Ok(Some(Incoming::Message(xid, msg))),
            Ok(None) => Ok(None),
            Err(CodecError::Decode {
                xid,
                msg_type,
                error,
            }) => Ok(Some(Incoming::Undecodable {
                xid,
                msg_type,
                error,
            })),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undecodable_body_is_an_item_and_the_next_message_still_decodes() {
        // A FEATURES_REPLY cut short (8 bytes of body instead of 24), then an ECHO_REQUEST.
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[4, 6, 0, 16, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1]);
        buf.extend_from_slice(&Message::EchoRequest(Default::default()).encode_to_vec(9));
        let mut codec = SwitchCodec::default();
        assert!(matches!(
            codec.decode(&mut buf),
            Ok(Some(Incoming::Undecodable { xid: 7, .. }))
        ));
        assert!(matches!(
            codec.decode(&mut buf),
            Ok(Some(Incoming::Message(9, Message::EchoRequest(_))))
        ));
    }

    #[test]
    fn an_openflow_1_0_hello_is_recognised() {
        let mut buf = BytesMut::from(&[1u8, 0, 0, 8, 0, 0, 0, 1][..]);
        assert!(matches!(
            SwitchCodec::default().decode(&mut buf),
            Ok(Some(Incoming::WrongVersion(1)))
        ));
        assert!(buf.is_empty());
    }

    #[test]
    fn a_broken_frame_is_fatal() {
        let mut buf = BytesMut::from(&[4u8, 2, 0, 4, 0, 0, 0, 1][..]);
        assert!(SwitchCodec::default().decode(&mut buf).is_err());
    }
}
