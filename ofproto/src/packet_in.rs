//! OFPT_PACKET_IN. The packet stays bytes here; [`crate::packet`] parses it.

use bytes::{BufMut, Bytes, BytesMut};

use crate::macros::code_enum;
use crate::matches::Match;
use crate::oxm::FieldId;
use crate::wire::{DecodeError, fixed, put_zeros, take, u8p, u16p, u32p, u64p};

code_enum! {
    /// `ofp_packet_in_reason`.
    pub enum PacketInReason: u8 {
        NoMatch = 0 => "no_match",
        Action = 1 => "action",
        InvalidTtl = 2 => "invalid_ttl",
        ActionSet = 3 => "action_set",
        Group = 4 => "group",
        PacketOut = 5 => "packet_out",
    }
}

/// OFPT_PACKET_IN body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketIn {
    /// Switch buffer holding the packet, or `OFP_NO_BUFFER`.
    pub buffer_id: u32,
    /// Full length of the packet (`data` may be shorter).
    pub total_len: u16,
    /// Why it was sent.
    pub reason: PacketInReason,
    /// Table that sent it.
    pub table_id: u8,
    /// Cookie of the flow that sent it.
    pub cookie: u64,
    /// Pipeline fields (in_port, metadata, registers, tunnel...).
    pub matching: Match,
    /// The packet (Ethernet frame), possibly truncated.
    pub data: Bytes,
}

impl PacketIn {
    /// The ingress port, from the `in_port` match field.
    pub fn in_port(&self) -> Option<u32> {
        self.matching
            .get(FieldId::IN_PORT)
            .map(|f| f.value_u128() as u32)
    }

    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<PacketIn, DecodeError> {
        let (rest, (buffer_id, total_len, reason, table_id, cookie)) =
            fixed(i, 16, "packet_in", (u32p, u16p, u8p, u8p, u64p))?;
        let (rest, matching) = Match::parse(rest)?;
        let (data, _) = take(rest, 2, "packet_in padding")?;
        Ok(PacketIn {
            buffer_id,
            total_len,
            reason: PacketInReason::from(reason),
            table_id,
            cookie,
            matching,
            data: Bytes::copy_from_slice(data),
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.buffer_id);
        out.put_u16(self.total_len);
        out.put_u8(self.reason.code());
        out.put_u8(self.table_id);
        out.put_u64(self.cookie);
        self.matching.emit(out);
        put_zeros(out, 2);
        out.put_slice(&self.data);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_round_trip() {
        let pi = PacketIn {
            buffer_id: 0xffff_ffff,
            total_len: 4,
            reason: PacketInReason::Action,
            table_id: 2,
            cookie: 7,
            matching: Match::new().in_port(5),
            data: Bytes::from_static(&[1, 2, 3, 4]),
        };
        let mut out = BytesMut::new();
        pi.emit(&mut out);
        assert_eq!(out.len(), 16 + 16 + 2 + 4);
        let back = PacketIn::parse(&out).unwrap();
        assert_eq!(back, pi);
        assert_eq!(back.in_port(), Some(5));
        assert!(PacketIn::parse(&out[..33]).unwrap_err().is_truncated());
    }
}
