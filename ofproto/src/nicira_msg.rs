//! Nicira extension messages (experimenter 0x00002320) Open vSwitch accepts with OpenFlow 1.3:
//! NXT_PACKET_IN2, NXT_SET_ASYNC_CONFIG, NXT_SET_CONTROLLER_ID, the TLV table messages (Geneve
//! option mappings), NXT_ROLE_REQUEST/REPLY, NXT_FLOW_MOD_TABLE_ID, NXT_SET_PACKET_IN_FORMAT,
//! NXT_FLOW_AGE and NXT_CT_FLUSH_ZONE. Other Nicira messages (and these with a body of another
//! size) stay [`crate::Message::Experimenter`], kept whole.

use bytes::{Bytes, BytesMut};

use crate::matches::Match;
use crate::oxm::Oxm;
use crate::wire::{DecodeError, fixed, pad8, put_zeros, take_tlv, u8p, u16p, u32p};

/// The Nicira experimenter id.
pub const NX_VENDOR_ID: u32 = 0x0000_2320;
/// `NXT_ROLE_REQUEST`.
pub const NXT_ROLE_REQUEST: u32 = 10;
/// `NXT_ROLE_REPLY`.
pub const NXT_ROLE_REPLY: u32 = 11;
/// `NXT_FLOW_MOD_TABLE_ID`.
pub const NXT_FLOW_MOD_TABLE_ID: u32 = 15;
/// `NXT_SET_PACKET_IN_FORMAT`.
pub const NXT_SET_PACKET_IN_FORMAT: u32 = 16;
/// `NXT_FLOW_AGE`.
pub const NXT_FLOW_AGE: u32 = 18;
/// `NXT_SET_ASYNC_CONFIG`.
pub const NXT_SET_ASYNC_CONFIG: u32 = 19;
/// `NXT_SET_CONTROLLER_ID`.
pub const NXT_SET_CONTROLLER_ID: u32 = 20;
/// `NXT_TLV_TABLE_MOD`.
pub const NXT_TLV_TABLE_MOD: u32 = 24;
/// `NXT_TLV_TABLE_REQUEST`.
pub const NXT_TLV_TABLE_REQUEST: u32 = 25;
/// `NXT_TLV_TABLE_REPLY`.
pub const NXT_TLV_TABLE_REPLY: u32 = 26;
/// `NXT_CT_FLUSH_ZONE`.
pub const NXT_CT_FLUSH_ZONE: u32 = 29;
/// `NXT_PACKET_IN2`.
pub const NXT_PACKET_IN2: u32 = 30;

/// `NX_ROLE_OTHER`: the role NXT_ROLE_REQUEST/REPLY calls "equal".
pub const NX_ROLE_OTHER: u32 = 0;
/// `NX_ROLE_MASTER`: the primary controller.
pub const NX_ROLE_PRIMARY: u32 = 1;
/// `NX_ROLE_SLAVE`: a secondary controller.
pub const NX_ROLE_SECONDARY: u32 = 2;

/// NXT_SET_PACKET_IN_FORMAT: OFPT_PACKET_IN as the OpenFlow version defines it.
pub const NXPIF_STANDARD: u32 = 0;
/// NXT_SET_PACKET_IN_FORMAT: the OpenFlow 1.0 NXT_PACKET_IN.
pub const NXPIF_NXT_PACKET_IN: u32 = 1;
/// NXT_SET_PACKET_IN_FORMAT: NXT_PACKET_IN2 (property based, with userdata and continuations).
pub const NXPIF_NXT_PACKET_IN2: u32 = 2;

/// `NXPINT_PACKET`.
pub const NXPINT_PACKET: u16 = 0;
/// `NXPINT_FULL_LEN`.
pub const NXPINT_FULL_LEN: u16 = 1;
/// `NXPINT_BUFFER_ID`.
pub const NXPINT_BUFFER_ID: u16 = 2;
/// `NXPINT_TABLE_ID`.
pub const NXPINT_TABLE_ID: u16 = 3;
/// `NXPINT_COOKIE`.
pub const NXPINT_COOKIE: u16 = 4;
/// `NXPINT_REASON`.
pub const NXPINT_REASON: u16 = 5;
/// `NXPINT_METADATA`.
pub const NXPINT_METADATA: u16 = 6;
/// `NXPINT_USERDATA`.
pub const NXPINT_USERDATA: u16 = 7;
/// `NXPINT_CONTINUATION`.
pub const NXPINT_CONTINUATION: u16 = 8;

/// NXT_PACKET_IN2: a property list (packet, reason, metadata, userdata, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PacketIn2 {
    /// Properties as (type, payload without header or padding), in wire order.
    pub props: Vec<(u16, Bytes)>,
}

impl PacketIn2 {
    fn prop(&self, t: u16) -> Option<&Bytes> {
        self.props.iter().find(|(k, _)| *k == t).map(|(_, v)| v)
    }

    /// The packet.
    pub fn packet(&self) -> Option<&Bytes> {
        self.prop(NXPINT_PACKET)
    }

    /// The `userdata` of the `controller` action that sent it.
    pub fn userdata(&self) -> Option<&Bytes> {
        self.prop(NXPINT_USERDATA)
    }

    /// The table that sent it.
    pub fn table_id(&self) -> Option<u8> {
        self.prop(NXPINT_TABLE_ID).and_then(|v| v.first().copied())
    }

    /// The reason (`OFPR_*`).
    pub fn reason(&self) -> Option<u8> {
        self.prop(NXPINT_REASON).and_then(|v| v.first().copied())
    }

    /// The cookie of the flow that sent it.
    pub fn cookie(&self) -> Option<u64> {
        self.prop(NXPINT_COOKIE)
            .and_then(|v| v.get(4..12))
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
    }

    /// Pipeline metadata (in_port, registers, ...) as a match, when present and well formed.
    pub fn metadata(&self) -> Option<Match> {
        let mut b = &self.prop(NXPINT_METADATA)?[..];
        let mut fields = Vec::new();
        while !b.is_empty() {
            let (r, f) = Oxm::parse(b).ok()?;
            fields.push(f);
            b = r;
        }
        Some(Match { fields })
    }

    /// Parse the body after the Nicira header.
    pub fn parse(i: &[u8]) -> Result<PacketIn2, DecodeError> {
        Ok(PacketIn2 {
            props: parse_props(i)?,
        })
    }

    /// Append the body after the Nicira header.
    pub fn emit(&self, out: &mut BytesMut) {
        emit_props(&self.props, out);
    }
}

/// Parse a list of 8-byte-aligned properties (`ofpprop` framing).
pub(crate) fn parse_props(mut i: &[u8]) -> Result<Vec<(u16, Bytes)>, DecodeError> {
    let mut props = Vec::new();
    while i.len() >= 4 {
        let (_, (t, len)) = fixed(i, 4, "property", (u16p, u16p))?;
        let len = usize::from(len);
        let (r, p) = take_tlv(i, len, 4, "property")?;
        props.push((t, Bytes::copy_from_slice(&p[4..])));
        let pad = pad8(len).min(r.len());
        i = &r[pad..];
    }
    Ok(props)
}

/// Append properties with `ofpprop` framing.
pub(crate) fn emit_props(props: &[(u16, Bytes)], out: &mut BytesMut) {
    for (t, v) in props {
        let len = 4 + v.len();
        out.extend_from_slice(&u16::to_be_bytes(*t));
        out.extend_from_slice(&u16::to_be_bytes(len as u16));
        out.extend_from_slice(v);
        put_zeros(out, pad8(len));
    }
}

/// One TLV (Geneve option) to field mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TlvMap {
    /// Option class.
    pub option_class: u16,
    /// Option type.
    pub option_type: u8,
    /// Option length in bytes (multiple of 4).
    pub option_len: u8,
    /// `tun_metadata<index>`.
    pub index: u16,
}

fn parse_maps(mut i: &[u8]) -> Result<Vec<TlvMap>, DecodeError> {
    let mut v = Vec::new();
    while !i.is_empty() {
        let (r, (option_class, option_type, option_len, index, _pad)) =
            fixed(i, 8, "tlv map", (u16p, u8p, u8p, u16p, u16p))?;
        v.push(TlvMap {
            option_class,
            option_type,
            option_len,
            index,
        });
        i = r;
    }
    Ok(v)
}

fn emit_maps(maps: &[TlvMap], out: &mut BytesMut) {
    for m in maps {
        out.extend_from_slice(&u16::to_be_bytes(m.option_class));
        out.extend_from_slice(&[m.option_type]);
        out.extend_from_slice(&[m.option_len]);
        out.extend_from_slice(&u16::to_be_bytes(m.index));
        out.extend_from_slice(&u16::to_be_bytes(0));
    }
}

/// NXT_TLV_TABLE_MOD.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TlvTableMod {
    /// `NXTTMC_ADD` 0, `NXTTMC_DELETE` 1, `NXTTMC_CLEAR` 2.
    pub command: u16,
    /// Mappings.
    pub mappings: Vec<TlvMap>,
}

impl TlvTableMod {
    /// Parse the body after the Nicira header.
    pub fn parse(i: &[u8]) -> Result<TlvTableMod, DecodeError> {
        let (r, command) = fixed(i, 8, "tlv_table_mod", u16p)?;
        Ok(TlvTableMod {
            command,
            mappings: parse_maps(r)?,
        })
    }

    /// Append the body after the Nicira header.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u16::to_be_bytes(self.command));
        put_zeros(out, 6);
        emit_maps(&self.mappings, out);
    }
}

/// NXT_TLV_TABLE_REPLY.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TlvTableReply {
    /// Bytes of option space available.
    pub max_option_space: u32,
    /// Number of `tun_metadata` fields.
    pub max_fields: u16,
    /// Current mappings.
    pub mappings: Vec<TlvMap>,
}

impl TlvTableReply {
    /// Parse the body after the Nicira header.
    pub fn parse(i: &[u8]) -> Result<TlvTableReply, DecodeError> {
        let (r, (max_option_space, max_fields)) = fixed(i, 16, "tlv_table_reply", (u32p, u16p))?;
        Ok(TlvTableReply {
            max_option_space,
            max_fields,
            mappings: parse_maps(r)?,
        })
    }

    /// Append the body after the Nicira header.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.max_option_space));
        out.extend_from_slice(&u16::to_be_bytes(self.max_fields));
        put_zeros(out, 10);
        emit_maps(&self.mappings, out);
    }
}

/// Parse an NXT_SET_CONTROLLER_ID body.
pub fn parse_controller_id(i: &[u8]) -> Result<u16, DecodeError> {
    let (r, _) = crate::wire::take(i, 6, "set_controller_id")?;
    Ok(fixed(r, 2, "set_controller_id", u16p)?.1)
}

/// Append an NXT_SET_CONTROLLER_ID body.
pub fn emit_controller_id(id: u16, out: &mut BytesMut) {
    put_zeros(out, 6);
    out.extend_from_slice(&u16::to_be_bytes(id));
}

/// The zone of an NXT_CT_FLUSH_ZONE body (6 zero bytes, then the zone); `None` when the
/// padding is not zero (the message then stays opaque, so it re-encodes as received).
pub fn parse_ct_flush_zone(i: &[u8]) -> Option<u16> {
    match i {
        [0, 0, 0, 0, 0, 0, hi, lo] => Some(u16::from_be_bytes([*hi, *lo])),
        _ => None,
    }
}

/// Append an NXT_CT_FLUSH_ZONE body.
pub fn emit_ct_flush_zone(zone: u16, out: &mut BytesMut) {
    put_zeros(out, 6);
    out.extend_from_slice(&u16::to_be_bytes(zone));
}

/// The `set` byte of an NXT_FLOW_MOD_TABLE_ID body (then 7 zero bytes); `None` when the
/// padding is not zero.
pub fn parse_flow_mod_table_id(i: &[u8]) -> Option<u8> {
    match i {
        [set, 0, 0, 0, 0, 0, 0, 0] => Some(*set),
        _ => None,
    }
}

/// Append an NXT_FLOW_MOD_TABLE_ID body.
pub fn emit_flow_mod_table_id(set: u8, out: &mut BytesMut) {
    out.extend_from_slice(&[set, 0, 0, 0, 0, 0, 0, 0]);
}

/// A 4-byte body holding one big-endian word (NXT_ROLE_*, NXT_SET_PACKET_IN_FORMAT).
pub fn parse_word(i: &[u8]) -> Option<u32> {
    <[u8; 4]>::try_from(i).ok().map(u32::from_be_bytes)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn packet_in2_props() {
        let p = PacketIn2 {
            props: vec![
                (NXPINT_PACKET, Bytes::from_static(&[1, 2, 3])),
                (NXPINT_TABLE_ID, Bytes::from_static(&[7])),
                (NXPINT_USERDATA, Bytes::from_static(b"hello")),
                (
                    NXPINT_METADATA,
                    Bytes::from_static(&[0x80, 0, 0, 4, 0, 0, 0, 9]),
                ),
            ],
        };
        let mut out = BytesMut::new();
        p.emit(&mut out);
        assert_eq!(out.len() % 8, 0);
        let back = PacketIn2::parse(&out).unwrap();
        assert_eq!(back, p);
        assert_eq!(back.table_id(), Some(7));
        assert_eq!(&back.userdata().unwrap()[..], b"hello");
        assert_eq!(back.metadata().unwrap(), Match::new().in_port(9));
    }

    /// The small NXT messages decode by exact size and zero padding; anything else stays an
    /// opaque experimenter message that re-encodes byte for byte.
    #[test]
    fn small_nxt_messages_decode_exactly_or_stay_opaque() {
        use crate::Message;
        let nxt = |subtype: u8, body: &[u8]| {
            let mut m = vec![4, 4, 0, 16 + body.len() as u8, 0, 0, 0, 7];
            m.extend_from_slice(&[0, 0, 0x23, 0x20, 0, 0, 0, subtype]);
            m.extend_from_slice(body);
            m
        };
        for (bytes, expect) in [
            (
                nxt(10, &[0, 0, 0, 1]),
                Message::NxRoleRequest(NX_ROLE_PRIMARY),
            ),
            (
                nxt(11, &[0, 0, 0, 2]),
                Message::NxRoleReply(NX_ROLE_SECONDARY),
            ),
            (
                nxt(15, &[1, 0, 0, 0, 0, 0, 0, 0]),
                Message::FlowModTableId(1),
            ),
            (
                nxt(16, &[0, 0, 0, 2]),
                Message::SetPacketInFormat(NXPIF_NXT_PACKET_IN2),
            ),
            (nxt(18, &[]), Message::FlowAge),
            (
                nxt(29, &[0, 0, 0, 0, 0, 0, 1, 2]),
                Message::CtFlushZone(0x102),
            ),
        ] {
            let (xid, m) = Message::decode(&bytes).unwrap();
            assert_eq!((xid, &m), (7, &expect));
            assert_eq!(m.encode_to_vec(7), bytes);
        }
        for bytes in [
            nxt(29, &[0, 0, 0, 0, 0, 9, 1, 2]), // padding not zero
            nxt(15, &[1, 0, 0, 0, 0, 0, 0, 5]),
            nxt(10, &[0, 0, 0, 1, 0, 0, 0, 0]), // longer than a role
            nxt(18, &[0, 0, 0, 0, 0, 0, 0, 0]),
        ] {
            let (_, m) = Message::decode(&bytes).unwrap();
            assert!(matches!(m, Message::Experimenter { .. }), "{m:?}");
            assert_eq!(m.encode_to_vec(7), bytes);
        }
    }

    #[test]
    fn tlv_table_round_trip() {
        let m = TlvTableMod {
            command: 0,
            mappings: vec![TlvMap {
                option_class: 0xffff,
                option_type: 1,
                option_len: 4,
                index: 0,
            }],
        };
        let mut out = BytesMut::new();
        m.emit(&mut out);
        assert_eq!(TlvTableMod::parse(&out).unwrap(), m);
        assert!(TlvTableMod::parse(&out[..12]).unwrap_err().is_truncated());
    }
}
