//! OFPT_TABLE_MOD.

use bytes::BytesMut;

use crate::wire::{DecodeError, fixed, u8p, u32p};

/// OFPT_TABLE_MOD body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TableMod {
    /// Table (0xff = all).
    pub table_id: u8,
    /// `OFPTC_*` bits (deprecated in 1.3, kept).
    pub config: u32,
}

impl TableMod {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<TableMod, DecodeError> {
        let (r, table_id) = fixed(i, 4, "table_mod", u8p)?;
        let (_, config) = fixed(r, 4, "table_mod", u32p)?;
        Ok(TableMod { table_id, config })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&[self.table_id]);
        crate::wire::put_zeros(out, 3);
        out.extend_from_slice(&u32::to_be_bytes(self.config));
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_parse_emit() {
        let body = [0xff, 0, 0, 0, 0, 0, 0, 3];
        let t = TableMod::parse(&body).unwrap();
        assert_eq!((t.table_id, t.config), (0xff, 3));
        let mut out = BytesMut::new();
        t.emit(&mut out);
        assert_eq!(&out[..], &body[..]);
        assert!(TableMod::parse(&body[..7]).unwrap_err().is_truncated());
    }
}
