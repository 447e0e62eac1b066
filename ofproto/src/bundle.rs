//! ONF bundles for OpenFlow 1.3 (ONF extension 230, as Open vSwitch implements it):
//! `ONFT_BUNDLE_CONTROL` (2300) and `ONFT_BUNDLE_ADD_MESSAGE` (2301), experimenter messages of
//! the ONF id `0x4f4e4600`.
//!
//! Contract: the message added to a bundle is a whole OpenFlow message with its own header and
//! xid; it is decoded and re-encoded fully.

use bytes::{Bytes, BytesMut};

use crate::flow_mod::FlowModRef;
use crate::header::MsgType;
use crate::macros::code_enum;
use crate::msg::Message;
use crate::wire::{DecodeError, EncodeError, fixed, pad8, put_zeros, take, u16p, u32p};

/// `ONFT_BUNDLE_CONTROL`.
pub const ONFT_BUNDLE_CONTROL: u32 = 2300;
/// `ONFT_BUNDLE_ADD_MESSAGE`.
pub const ONFT_BUNDLE_ADD_MESSAGE: u32 = 2301;
/// `OFPBF_ATOMIC`.
pub const BUNDLE_ATOMIC: u16 = 1;
/// `OFPBF_ORDERED`.
pub const BUNDLE_ORDERED: u16 = 2;

code_enum! {
    /// `ofp_bundle_ctrl_type`.
    pub enum BundleCtrlType: u16 {
        OpenRequest = 0 => "OPEN_REQUEST",
        OpenReply = 1 => "OPEN_REPLY",
        CloseRequest = 2 => "CLOSE_REQUEST",
        CloseReply = 3 => "CLOSE_REPLY",
        CommitRequest = 4 => "COMMIT_REQUEST",
        CommitReply = 5 => "COMMIT_REPLY",
        DiscardRequest = 6 => "DISCARD_REQUEST",
        DiscardReply = 7 => "DISCARD_REPLY",
    }
}

/// `ONFT_BUNDLE_CONTROL` body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleControl {
    /// Bundle id.
    pub bundle_id: u32,
    /// Open, close, commit or discard (request or reply).
    pub ctrl_type: BundleCtrlType,
    /// `OFPBF_*` flags.
    pub flags: u16,
    /// Properties, kept as bytes.
    pub properties: Bytes,
}

impl BundleControl {
    /// A control message without properties.
    pub fn new(bundle_id: u32, ctrl_type: BundleCtrlType, flags: u16) -> BundleControl {
        BundleControl {
            bundle_id,
            ctrl_type,
            flags,
            properties: Bytes::new(),
        }
    }

    /// Parse the body after the experimenter header.
    pub fn parse(i: &[u8]) -> Result<BundleControl, DecodeError> {
        let (props, (bundle_id, ctrl_type, flags)) =
            fixed(i, 8, "bundle control", (u32p, u16p, u16p))?;
        Ok(BundleControl {
            bundle_id,
            ctrl_type: BundleCtrlType::from(ctrl_type),
            flags,
            properties: Bytes::copy_from_slice(props),
        })
    }

    /// Append the body after the experimenter header.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.bundle_id));
        out.extend_from_slice(&u16::to_be_bytes(self.ctrl_type.code()));
        out.extend_from_slice(&u16::to_be_bytes(self.flags));
        out.extend_from_slice(&self.properties);
    }
}

/// `ONFT_BUNDLE_ADD_MESSAGE` body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleAdd {
    /// Bundle id.
    pub bundle_id: u32,
    /// `OFPBF_*` flags.
    pub flags: u16,
    /// Xid of the embedded message (OVS requires it to equal the outer xid).
    pub xid: u32,
    /// The embedded message.
    pub message: Box<Message>,
    /// Properties after the (8-byte padded) message, kept as bytes.
    pub properties: Bytes,
}

impl BundleAdd {
    /// Add `message`, sent with transaction id `xid` (use the same xid for the outer message,
    /// as OVS requires), to bundle `bundle_id`.
    pub fn new(bundle_id: u32, flags: u16, xid: u32, message: Message) -> BundleAdd {
        BundleAdd {
            bundle_id,
            flags,
            xid,
            message: Box::new(message),
            properties: Bytes::new(),
        }
    }

    /// Parse the body after the experimenter header.
    pub fn parse(i: &[u8]) -> Result<BundleAdd, DecodeError> {
        let (inner, (bundle_id, _pad, flags)) = fixed(i, 8, "bundle add", (u32p, u16p, u16p))?;
        let (_, (_, _, len)) = fixed(
            inner,
            4,
            "bundled message header",
            (crate::wire::u8p, crate::wire::u8p, u16p),
        )?;
        let len = usize::from(len);
        let (rest, msg) = take(inner, len, "bundled message")?;
        // A bundle inside a bundle is meaningless (OVS rejects it); refusing it also bounds
        // the decoder's recursion depth.
        if msg.len() >= 16
            && msg[1] == 4
            && msg[8..12] == crate::oxm::ONF_EXPERIMENTER.to_be_bytes()
        {
            let t = u32::from_be_bytes([msg[12], msg[13], msg[14], msg[15]]);
            if t == ONFT_BUNDLE_CONTROL || t == ONFT_BUNDLE_ADD_MESSAGE {
                return Err(DecodeError::Invalid {
                    what: "bundle add",
                    reason: "a bundle message cannot be bundled",
                });
            }
        }
        let (xid, message) = Message::decode(msg)?;
        let props = if rest.len() > pad8(len) {
            &rest[pad8(len)..]
        } else {
            &[][..]
        };
        Ok(BundleAdd {
            bundle_id,
            flags,
            xid,
            message: Box::new(message),
            properties: Bytes::copy_from_slice(props),
        })
    }

    /// Append the whole `ONFT_BUNDLE_ADD_MESSAGE` that adds `message` to bundle `bundle_id`
    /// (outer and inner xid `xid`, no properties), checked like [`Message::check`] (match
    /// prerequisites, the 65535-byte limit), without building a `BundleAdd`: the message is
    /// borrowed and encoded once. On error `out` is left as it was. Byte for byte what
    /// `Message::BundleAdd(BundleAdd::new(bundle_id, flags, xid, message)).encode(xid, out)` writes.
    pub fn encode_borrowed(
        bundle_id: u32,
        flags: u16,
        xid: u32,
        message: &Message,
        out: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        if let Message::FlowMod(f) = message {
            f.matching.check()?;
        }
        let inner_name = message.msg_type().name().unwrap_or("message");
        Self::encode_wrapped(bundle_id, flags, xid, inner_name, out, |out| {
            message.encode(xid, out)
        })
    }

    /// [`BundleAdd::encode_borrowed`] for a FLOW_MOD whose match and instructions are borrowed
    /// ([`FlowMod::borrowing`]): byte for byte what it writes for the `FlowMod` owning them.
    pub fn encode_flow_mod(
        bundle_id: u32,
        flags: u16,
        xid: u32,
        flow_mod: FlowModRef<'_>,
        out: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        flow_mod.matching().check()?;
        let inner_name = MsgType::FlowMod.name().unwrap_or("message");
        Self::encode_wrapped(bundle_id, flags, xid, inner_name, out, |out| {
            crate::msg::encode_framed(MsgType::FlowMod, xid, out, |out| flow_mod.emit(out));
        })
    }

    /// The bundle add around the message `inner` appends (named `inner_name` in errors).
    fn encode_wrapped(
        bundle_id: u32,
        flags: u16,
        xid: u32,
        inner_name: &'static str,
        out: &mut BytesMut,
        inner_message: impl FnOnce(&mut BytesMut),
    ) -> Result<(), EncodeError> {
        let start = out.len();
        out.extend_from_slice(&[crate::header::OFP_VERSION, 4, 0, 0]);
        out.extend_from_slice(&xid.to_be_bytes());
        out.extend_from_slice(&crate::oxm::ONF_EXPERIMENTER.to_be_bytes());
        out.extend_from_slice(&ONFT_BUNDLE_ADD_MESSAGE.to_be_bytes());
        out.extend_from_slice(&bundle_id.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&flags.to_be_bytes());
        let inner = out.len();
        inner_message(out);
        let len = out.len() - start;
        let Ok(len16) = u16::try_from(len) else {
            let inner_len = out.len() - inner;
            out.truncate(start);
            let what = if inner_len > usize::from(u16::MAX) {
                inner_name
            } else {
                "bundle add"
            };
            return Err(EncodeError::TooLong {
                what,
                len: inner_len.max(len),
            });
        };
        out[start + 2..start + 4].copy_from_slice(&len16.to_be_bytes());
        Ok(())
    }

    /// Append the body after the experimenter header.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.bundle_id));
        out.extend_from_slice(&u16::to_be_bytes(0));
        out.extend_from_slice(&u16::to_be_bytes(self.flags));
        let start = out.len();
        self.message.encode(self.xid, out);
        if !self.properties.is_empty() {
            put_zeros(out, pad8(out.len() - start));
            out.extend_from_slice(&self.properties);
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// ONFT_BUNDLE_CONTROL OPEN_REQUEST for bundle 1, atomic.
    static OPEN_BYTES: [u8; 24] = [
        0x04, 0x04, 0x00, 0x18, 0x00, 0x00, 0x00, 0x05, // header, xid 5
        0x4f, 0x4e, 0x46, 0x00, 0x00, 0x00, 0x08, 0xfc, // ONF, 2300
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, // bundle 1, OPEN_REQUEST, ATOMIC
    ];

    /// ONFT_BUNDLE_ADD_MESSAGE carrying a BARRIER_REQUEST with the same xid.
    static ADD_BYTES: [u8; 32] = [
        0x04, 0x04, 0x00, 0x20, 0x00, 0x00, 0x00, 0x06, // header, xid 6
        0x4f, 0x4e, 0x46, 0x00, 0x00, 0x00, 0x08, 0xfd, // ONF, 2301
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, // bundle 1, pad, ATOMIC
        0x04, 0x14, 0x00, 0x08, 0x00, 0x00, 0x00, 0x06, // barrier request, xid 6
    ];

    #[test]
    fn encode_borrowed_writes_what_a_bundle_add_message_encodes() {
        use crate::flow_mod::FlowMod;
        use crate::matches::Match;
        let fm = Message::FlowMod(
            FlowMod::add(5, 100)
                .cookie(7)
                .matching(Match::new().eth_type(0x0800).ip_proto(6).tcp_dst(80)),
        );
        for msg in [Message::BarrierRequest, fm] {
            let mut out = BytesMut::from(&b"xy"[..]);
            BundleAdd::encode_borrowed(9, BUNDLE_ATOMIC | BUNDLE_ORDERED, 42, &msg, &mut out)
                .unwrap();
            let whole = Message::BundleAdd(BundleAdd::new(
                9,
                BUNDLE_ATOMIC | BUNDLE_ORDERED,
                42,
                msg.clone(),
            ))
            .encode_to_vec(42);
            assert_eq!(&out[..2], b"xy");
            assert_eq!(out[2..].to_vec(), whole, "{msg:?}");
        }
        let mut out = BytesMut::new();
        BundleAdd::encode_borrowed(1, BUNDLE_ATOMIC, 6, &Message::BarrierRequest, &mut out)
            .unwrap();
        assert_eq!(out.to_vec(), ADD_BYTES.to_vec());
        // Refused as `check` refuses: a match without its prerequisite, a message too long.
        let bad = Message::FlowMod(FlowMod::add(0, 1).matching(Match::new().tcp_dst(80)));
        let mut out = BytesMut::from(&b"xy"[..]);
        assert!(BundleAdd::encode_borrowed(1, 0, 1, &bad, &mut out).is_err());
        let long = Message::EchoRequest(Bytes::from(vec![0u8; 65_530]));
        assert!(BundleAdd::encode_borrowed(1, 0, 1, &long, &mut out).is_err());
        assert_eq!(&out[..], b"xy", "nothing left behind");
    }

    #[test]
    fn a_borrowed_flow_mod_encodes_as_the_flow_mod_owning_its_parts() {
        use crate::action::Action;
        use crate::flow_mod::{FlowMod, OFPFF_SEND_FLOW_REM};
        use crate::instruction::Instruction;
        use crate::matches::Match;
        let matching = Match::new().eth_type(0x0800).ip_proto(6).tcp_dst(80);
        let instructions = vec![
            Instruction::ApplyActions(vec![Action::Output {
                port: crate::port::PortNo(3),
                max_len: 0,
            }]),
            Instruction::GotoTable(9),
        ];
        let fixed = FlowMod::add(5, 100)
            .cookie(7)
            .idle_timeout(30)
            .flags(OFPFF_SEND_FLOW_REM);
        let owning = Message::FlowMod(FlowMod {
            matching: matching.clone(),
            instructions: instructions.clone(),
            ..fixed.clone()
        });
        let mut borrowed = BytesMut::from(&b"xy"[..]);
        BundleAdd::encode_flow_mod(
            9,
            BUNDLE_ATOMIC,
            42,
            fixed.borrowing(&matching, &instructions),
            &mut borrowed,
        )
        .unwrap();
        let mut whole = BytesMut::from(&b"xy"[..]);
        BundleAdd::encode_borrowed(9, BUNDLE_ATOMIC, 42, &owning, &mut whole).unwrap();
        assert_eq!(borrowed, whole);
        // The fixed flow mod's own match is not read; the borrowed one is checked.
        let with_own = fixed.clone().matching(Match::new().in_port(1));
        let mut out = BytesMut::new();
        BundleAdd::encode_flow_mod(
            9,
            BUNDLE_ATOMIC,
            42,
            with_own.borrowing(&matching, &instructions),
            &mut out,
        )
        .unwrap();
        assert_eq!(out[..], whole[2..]);
        let no_prerequisite = Match::new().tcp_dst(80);
        let mut out = BytesMut::from(&b"xy"[..]);
        assert!(
            BundleAdd::encode_flow_mod(1, 0, 1, fixed.borrowing(&no_prerequisite, &[]), &mut out)
                .is_err()
        );
        assert_eq!(&out[..], b"xy", "nothing left behind");
    }

    #[test]
    fn test_control_parse_emit() {
        let (xid, m) = Message::decode(&OPEN_BYTES).unwrap();
        let expect = Message::BundleControl(BundleControl::new(
            1,
            BundleCtrlType::OpenRequest,
            BUNDLE_ATOMIC,
        ));
        assert_eq!((xid, &m), (5, &expect));
        assert_eq!(expect.encode_to_vec(5), OPEN_BYTES.to_vec());
    }

    #[test]
    fn test_add_parse_emit() {
        let expect =
            Message::BundleAdd(BundleAdd::new(1, BUNDLE_ATOMIC, 6, Message::BarrierRequest));
        assert_eq!(Message::decode(&ADD_BYTES).unwrap(), (6, expect.clone()));
        assert_eq!(expect.encode_to_vec(6), ADD_BYTES.to_vec());
    }

    #[test]
    fn malformed() {
        assert!(
            Message::decode(&OPEN_BYTES[..20])
                .unwrap_err()
                .is_truncated()
        );
        // The embedded message claims 16 bytes but only 8 follow.
        let mut bad = ADD_BYTES;
        bad[27] = 0x10;
        assert!(Message::decode(&bad).unwrap_err().is_truncated());
    }
}
