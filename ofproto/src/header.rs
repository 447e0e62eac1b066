//! The 8-byte OpenFlow header (`ofp_header`) and the message type codes.
//!
//! Contract: [`Header::parse`] checks only that 8 bytes exist; version and length policy belong
//! to [`crate::Message::decode`] and the framing codec.

use bytes::BytesMut;

use crate::macros::code_enum;
use crate::wire::{PResult, fixed, u8p, u16p, u32p};

/// The OpenFlow 1.3 wire version.
pub const OFP_VERSION: u8 = 0x04;
/// Size of `ofp_header`.
pub const HEADER_LEN: usize = 8;

code_enum! {
    /// `ofp_type`: the message type in the header.
    pub enum MsgType: u8 {
        Hello = 0 => "OFPT_HELLO",
        Error = 1 => "OFPT_ERROR",
        EchoRequest = 2 => "OFPT_ECHO_REQUEST",
        EchoReply = 3 => "OFPT_ECHO_REPLY",
        Experimenter = 4 => "OFPT_EXPERIMENTER",
        FeaturesRequest = 5 => "OFPT_FEATURES_REQUEST",
        FeaturesReply = 6 => "OFPT_FEATURES_REPLY",
        GetConfigRequest = 7 => "OFPT_GET_CONFIG_REQUEST",
        GetConfigReply = 8 => "OFPT_GET_CONFIG_REPLY",
        SetConfig = 9 => "OFPT_SET_CONFIG",
        PacketIn = 10 => "OFPT_PACKET_IN",
        FlowRemoved = 11 => "OFPT_FLOW_REMOVED",
        PortStatus = 12 => "OFPT_PORT_STATUS",
        PacketOut = 13 => "OFPT_PACKET_OUT",
        FlowMod = 14 => "OFPT_FLOW_MOD",
        GroupMod = 15 => "OFPT_GROUP_MOD",
        PortMod = 16 => "OFPT_PORT_MOD",
        TableMod = 17 => "OFPT_TABLE_MOD",
        MultipartRequest = 18 => "OFPT_MULTIPART_REQUEST",
        MultipartReply = 19 => "OFPT_MULTIPART_REPLY",
        BarrierRequest = 20 => "OFPT_BARRIER_REQUEST",
        BarrierReply = 21 => "OFPT_BARRIER_REPLY",
        QueueGetConfigRequest = 22 => "OFPT_QUEUE_GET_CONFIG_REQUEST",
        QueueGetConfigReply = 23 => "OFPT_QUEUE_GET_CONFIG_REPLY",
        RoleRequest = 24 => "OFPT_ROLE_REQUEST",
        RoleReply = 25 => "OFPT_ROLE_REPLY",
        GetAsyncRequest = 26 => "OFPT_GET_ASYNC_REQUEST",
        GetAsyncReply = 27 => "OFPT_GET_ASYNC_REPLY",
        SetAsync = 28 => "OFPT_SET_ASYNC",
        MeterMod = 29 => "OFPT_METER_MOD",
    }
}

/// `ofp_header`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Wire version (0x04 for OpenFlow 1.3).
    pub version: u8,
    /// Message type.
    pub msg_type: MsgType,
    /// Length of the whole message, header included.
    pub length: u16,
    /// Transaction id.
    pub xid: u32,
}

impl Header {
    /// Parse the first 8 bytes of `i`.
    pub fn parse(i: &[u8]) -> PResult<'_, Header> {
        let (rest, (version, t, length, xid)) =
            fixed(i, HEADER_LEN, "ofp_header", (u8p, u8p, u16p, u32p))?;
        Ok((
            rest,
            Header {
                version,
                msg_type: MsgType::from(t),
                length,
                xid,
            },
        ))
    }

    /// Append the header to `out`.
    pub fn emit(&self, out: &mut BytesMut) {
        let l = self.length.to_be_bytes();
        let x = self.xid.to_be_bytes();
        out.extend_from_slice(&[
            self.version,
            self.msg_type.code(),
            l[0],
            l[1],
            x[0],
            x[1],
            x[2],
            x[3],
        ]);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    static HEADER_BYTES: [u8; 8] = [0x04, 0x0e, 0x00, 0x50, 0x12, 0x34, 0x56, 0x78];

    #[test]
    fn test_parse() {
        let (rest, h) = Header::parse(&HEADER_BYTES).unwrap();
        assert!(rest.is_empty());
        assert_eq!(
            h,
            Header {
                version: 4,
                msg_type: MsgType::FlowMod,
                length: 0x50,
                xid: 0x1234_5678
            }
        );
    }

    #[test]
    fn test_emit() {
        let (_, h) = Header::parse(&HEADER_BYTES).unwrap();
        let mut out = BytesMut::new();
        h.emit(&mut out);
        assert_eq!(&out[..], &HEADER_BYTES[..]);
    }

    #[test]
    fn test_truncated() {
        assert!(
            Header::parse(&HEADER_BYTES[..7])
                .unwrap_err()
                .is_truncated()
        );
    }

    #[test]
    fn unknown_type_round_trips() {
        assert_eq!(MsgType::from(200), MsgType::Unknown(200));
        assert_eq!(MsgType::Unknown(200).code(), 200);
        assert_eq!(MsgType::FlowMod.to_string(), "OFPT_FLOW_MOD");
    }
}
