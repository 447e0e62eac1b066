//! OFPT_METER_MOD and meter bands (also used by the meter-config multipart reply).

use bytes::{Bytes, BytesMut};

use crate::macros::code_enum;
use crate::wire::{DecodeError, PResult, fixed, put_zeros, take_tlv, u8p, u16p, u32p};

code_enum! {
    /// `ofp_meter_mod_command`.
    pub enum MeterModCommand: u16 {
        Add = 0 => "add",
        Modify = 1 => "modify",
        Delete = 2 => "delete",
    }
}

/// A meter band.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MeterBand {
    /// `OFPMBT_DROP`.
    Drop {
        /// Rate in kb/s or packets/s.
        rate: u32,
        /// Burst size.
        burst_size: u32,
    },
    /// `OFPMBT_DSCP_REMARK`.
    DscpRemark {
        /// Rate.
        rate: u32,
        /// Burst size.
        burst_size: u32,
        /// Drop-precedence levels to add.
        prec_level: u8,
    },
    /// `OFPMBT_EXPERIMENTER` or an unknown band type.
    Other {
        /// Band type.
        kind: u16,
        /// Rate.
        rate: u32,
        /// Burst size.
        burst_size: u32,
        /// Bytes after burst_size (experimenter id and data).
        data: Bytes,
    },
}

impl MeterBand {
    /// Parse one band.
    pub fn parse(i: &[u8]) -> PResult<'_, MeterBand> {
        let (_, (kind, len)) = fixed(i, 4, "meter band", (u16p, u16p))?;
        let (rest, b) = take_tlv(i, usize::from(len), 16, "meter band")?;
        let (tail, (_, _, rate, burst_size)) =
            fixed(b, 12, "meter band", (u16p, u16p, u32p, u32p))?;
        let band = match kind {
            1 if tail.len() == 4 && tail.iter().all(|x| *x == 0) => {
                MeterBand::Drop { rate, burst_size }
            }
            2 if tail.len() == 4 && tail[1..].iter().all(|x| *x == 0) => MeterBand::DscpRemark {
                rate,
                burst_size,
                prec_level: fixed(tail, 1, "dscp_remark band", u8p)?.1,
            },
            _ => MeterBand::Other {
                kind,
                rate,
                burst_size,
                data: Bytes::copy_from_slice(tail),
            },
        };
        Ok((rest, band))
    }

    /// Append the band.
    pub fn emit(&self, out: &mut BytesMut) {
        match self {
            MeterBand::Drop { rate, burst_size } => {
                out.extend_from_slice(&u32::to_be_bytes(0x0001_0010));
                out.extend_from_slice(&u32::to_be_bytes(*rate));
                out.extend_from_slice(&u32::to_be_bytes(*burst_size));
                out.extend_from_slice(&u32::to_be_bytes(0));
            }
            MeterBand::DscpRemark {
                rate,
                burst_size,
                prec_level,
            } => {
                out.extend_from_slice(&u32::to_be_bytes(0x0002_0010));
                out.extend_from_slice(&u32::to_be_bytes(*rate));
                out.extend_from_slice(&u32::to_be_bytes(*burst_size));
                out.extend_from_slice(&[*prec_level]);
                put_zeros(out, 3);
            }
            MeterBand::Other {
                kind,
                rate,
                burst_size,
                data,
            } => {
                out.extend_from_slice(&u16::to_be_bytes(*kind));
                out.extend_from_slice(&u16::to_be_bytes((12 + data.len()) as u16));
                out.extend_from_slice(&u32::to_be_bytes(*rate));
                out.extend_from_slice(&u32::to_be_bytes(*burst_size));
                out.extend_from_slice(data);
            }
        }
    }
}

/// Parse bands filling all of `i`.
pub fn parse_bands(mut i: &[u8]) -> Result<Vec<MeterBand>, DecodeError> {
    let mut v = Vec::new();
    while !i.is_empty() {
        let (rest, b) = MeterBand::parse(i)?;
        v.push(b);
        i = rest;
    }
    Ok(v)
}

/// OFPT_METER_MOD body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterMod {
    /// Command.
    pub command: MeterModCommand,
    /// `OFPMF_*` bits.
    pub flags: u16,
    /// Meter id.
    pub meter_id: u32,
    /// Bands.
    pub bands: Vec<MeterBand>,
}

impl MeterMod {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<MeterMod, DecodeError> {
        let (rest, (command, flags, meter_id)) = fixed(i, 8, "meter_mod", (u16p, u16p, u32p))?;
        Ok(MeterMod {
            command: MeterModCommand::from(command),
            flags,
            meter_id,
            bands: parse_bands(rest)?,
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u16::to_be_bytes(self.command.code()));
        out.extend_from_slice(&u16::to_be_bytes(self.flags));
        out.extend_from_slice(&u32::to_be_bytes(self.meter_id));
        for b in &self.bands {
            b.emit(out);
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    static METER_MOD_BODY: [u8; 24] = [
        0, 0, 0, 1, 0, 0, 0, 7, // add, kbps, meter 7
        0, 1, 0, 16, 0, 0, 0x03, 0xe8, 0, 0, 0, 0x64, 0, 0, 0, 0, // drop 1000/100
    ];

    #[test]
    fn test_parse_emit() {
        let m = MeterMod::parse(&METER_MOD_BODY).unwrap();
        assert_eq!(
            m.bands,
            vec![MeterBand::Drop {
                rate: 1000,
                burst_size: 100
            }]
        );
        let mut out = BytesMut::new();
        m.emit(&mut out);
        assert_eq!(&out[..], &METER_MOD_BODY[..]);
        assert!(
            MeterMod::parse(&METER_MOD_BODY[..20])
                .unwrap_err()
                .is_truncated()
        );
    }
}
