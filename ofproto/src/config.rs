//! OFPT_GET_CONFIG_REPLY / OFPT_SET_CONFIG: fragment handling and miss_send_len.

use bytes::BytesMut;

use crate::wire::{DecodeError, fixed, u16p};

/// The switch configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SwitchConfig {
    /// `OFPC_FRAG_*` bits.
    pub flags: u16,
    /// Bytes of a table-miss packet sent to the controller.
    pub miss_send_len: u16,
}

impl SwitchConfig {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<SwitchConfig, DecodeError> {
        let (_, (flags, miss_send_len)) = fixed(i, 4, "switch_config", (u16p, u16p))?;
        Ok(SwitchConfig {
            flags,
            miss_send_len,
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u16::to_be_bytes(self.flags));
        out.extend_from_slice(&u16::to_be_bytes(self.miss_send_len));
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_parse_emit() {
        let body = [0, 0, 0xff, 0xe5];
        let c = SwitchConfig::parse(&body).unwrap();
        assert_eq!(c.miss_send_len, 0xffe5);
        let mut out = BytesMut::new();
        c.emit(&mut out);
        assert_eq!(&out[..], &body[..]);
        assert!(SwitchConfig::parse(&body[..3]).unwrap_err().is_truncated());
    }
}
