//! OFPT_PACKET_OUT. The packet is bytes; build it with [`crate::packet`].

use bytes::{BufMut, Bytes, BytesMut};

use crate::action::{Action, emit_actions, parse_actions};
use crate::port::PortNo;
use crate::wire::{DecodeError, fixed, patch_len, put_zeros, take, u16p, u32p};

/// OFPT_PACKET_OUT body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketOut {
    /// Switch buffer to send, or `OFP_NO_BUFFER` to send `data`.
    pub buffer_id: u32,
    /// Port the packet is taken to have arrived on (`CONTROLLER` if none).
    pub in_port: PortNo,
    /// What to do with it.
    pub actions: Vec<Action>,
    /// The packet when `buffer_id` is `OFP_NO_BUFFER`.
    pub data: Bytes,
}

impl PacketOut {
    /// Send `data` with `actions`, arriving from the controller.
    pub fn new(actions: Vec<Action>, data: Bytes) -> PacketOut {
        PacketOut {
            buffer_id: crate::flow_mod::OFP_NO_BUFFER,
            in_port: PortNo::CONTROLLER,
            actions,
            data,
        }
    }

    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<PacketOut, DecodeError> {
        let (rest, (buffer_id, in_port, actions_len)) =
            fixed(i, 16, "packet_out", (u32p, u32p, u16p))?;
        let (data, actions) = take(rest, usize::from(actions_len), "packet_out actions")?;
        Ok(PacketOut {
            buffer_id,
            in_port: PortNo(in_port),
            actions: parse_actions(actions)?,
            data: Bytes::copy_from_slice(data),
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.buffer_id);
        out.put_u32(self.in_port.0);
        let at = out.len();
        out.put_u16(0);
        put_zeros(out, 6);
        let start = out.len();
        emit_actions(&self.actions, out);
        patch_len(out, at, start);
        out.put_slice(&self.data);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_round_trip() {
        let po = PacketOut::new(
            vec![Action::output(PortNo(3))],
            Bytes::from_static(&[9; 14]),
        );
        let mut out = BytesMut::new();
        po.emit(&mut out);
        assert_eq!(&out[8..10], &[0, 16]);
        assert_eq!(out.len(), 16 + 16 + 14);
        assert_eq!(PacketOut::parse(&out).unwrap(), po);
        assert!(PacketOut::parse(&out[..20]).unwrap_err().is_truncated());
    }
}
