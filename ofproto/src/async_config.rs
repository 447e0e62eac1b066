//! OFPT_GET_ASYNC_REPLY / OFPT_SET_ASYNC (and Nicira's NXT_SET_ASYNC_CONFIG, same layout):
//! which asynchronous messages a controller receives, for the master/equal role (index 0) and
//! the slave role (index 1).

use bytes::BytesMut;

use crate::wire::{DecodeError, fixed, u32p};

/// The three mask pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AsyncConfig {
    /// `OFPR_*` reasons for PACKET_IN.
    pub packet_in_mask: [u32; 2],
    /// `OFPPR_*` reasons for PORT_STATUS.
    pub port_status_mask: [u32; 2],
    /// `OFPRR_*` reasons for FLOW_REMOVED.
    pub flow_removed_mask: [u32; 2],
}

impl AsyncConfig {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<AsyncConfig, DecodeError> {
        let (_, (a, b, c, d, e, f)) =
            fixed(i, 24, "async config", (u32p, u32p, u32p, u32p, u32p, u32p))?;
        Ok(AsyncConfig {
            packet_in_mask: [a, b],
            port_status_mask: [c, d],
            flow_removed_mask: [e, f],
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        for v in self
            .packet_in_mask
            .iter()
            .chain(&self.port_status_mask)
            .chain(&self.flow_removed_mask)
        {
            out.extend_from_slice(&u32::to_be_bytes(*v));
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_parse_emit() {
        let mut body = [0u8; 24];
        body[3] = 3;
        body[23] = 0xf;
        let a = AsyncConfig::parse(&body).unwrap();
        assert_eq!((a.packet_in_mask[0], a.flow_removed_mask[1]), (3, 0xf));
        let mut out = BytesMut::new();
        a.emit(&mut out);
        assert_eq!(&out[..], &body[..]);
        assert!(AsyncConfig::parse(&body[..20]).unwrap_err().is_truncated());
    }
}
