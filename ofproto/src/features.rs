//! OFPT_FEATURES_REPLY: the switch's datapath id and capabilities.

use bytes::BytesMut;

use crate::wire::{DecodeError, fixed, u8p, u16p, u32p, u64p};

/// OFPT_FEATURES_REPLY body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FeaturesReply {
    /// Datapath id (low 48 bits usually the MAC).
    pub datapath_id: u64,
    /// Packets the switch can buffer.
    pub n_buffers: u32,
    /// Number of tables.
    pub n_tables: u8,
    /// Auxiliary connection id (0 = main).
    pub auxiliary_id: u8,
    /// `OFPC_*` bits.
    pub capabilities: u32,
    /// Reserved word, kept as read.
    pub reserved: u32,
}

impl FeaturesReply {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<FeaturesReply, DecodeError> {
        let (_, (datapath_id, n_buffers, n_tables, auxiliary_id, _pad, capabilities, reserved)) =
            fixed(
                i,
                24,
                "features_reply",
                (u64p, u32p, u8p, u8p, u16p, u32p, u32p),
            )?;
        Ok(FeaturesReply {
            datapath_id,
            n_buffers,
            n_tables,
            auxiliary_id,
            capabilities,
            reserved,
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u64::to_be_bytes(self.datapath_id));
        out.extend_from_slice(&u32::to_be_bytes(self.n_buffers));
        out.extend_from_slice(&[self.n_tables]);
        out.extend_from_slice(&[self.auxiliary_id]);
        out.extend_from_slice(&u16::to_be_bytes(0));
        out.extend_from_slice(&u32::to_be_bytes(self.capabilities));
        out.extend_from_slice(&u32::to_be_bytes(self.reserved));
    }
}

#[cfg(test)]
mod test {
    use super::*;

    static BODY: [u8; 24] = [
        0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0xfe, 0, 0, 0, 0, 0, 0, 0x4f, 0, 0, 0, 0,
    ];

    #[test]
    fn test_parse_emit() {
        let f = FeaturesReply::parse(&BODY).unwrap();
        assert_eq!(
            (f.datapath_id, f.n_buffers, f.n_tables, f.capabilities),
            (1, 256, 254, 0x4f)
        );
        let mut out = BytesMut::new();
        f.emit(&mut out);
        assert_eq!(&out[..], &BODY[..]);
        assert!(
            FeaturesReply::parse(&BODY[..23])
                .unwrap_err()
                .is_truncated()
        );
    }
}
