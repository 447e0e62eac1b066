//! The seven OpenFlow 1.3 instructions (`OFPIT_*`).
//!
//! Contract: an instruction list decodes in wire order; unknown or experimenter instructions are
//! kept as bytes and re-encoded unchanged.

use bytes::{Bytes, BytesMut};

use crate::action::{Action, emit_actions, parse_action_list};
use crate::wire::{
    DecodeError, PResult, fixed, pad8, patch_len, put_zeros, take_tlv, u8p, u16p, u32p, u64p,
};

/// One instruction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Instruction {
    /// `OFPIT_GOTO_TABLE`.
    GotoTable(u8),
    /// `OFPIT_WRITE_METADATA`.
    WriteMetadata {
        /// Bits to write.
        metadata: u64,
        /// Which bits.
        mask: u64,
    },
    /// `OFPIT_WRITE_ACTIONS`.
    WriteActions(Vec<Action>),
    /// `OFPIT_APPLY_ACTIONS`.
    ApplyActions(Vec<Action>),
    /// `OFPIT_CLEAR_ACTIONS`.
    ClearActions,
    /// `OFPIT_METER`.
    Meter(u32),
    /// `OFPIT_EXPERIMENTER`.
    Experimenter {
        /// Experimenter id.
        experimenter: u32,
        /// Body after the experimenter id.
        data: Bytes,
    },
    /// An instruction type this crate does not know.
    Unknown {
        /// `ofp_instruction_type`.
        kind: u16,
        /// Body after the 4-byte header.
        data: Bytes,
    },
}

impl Instruction {
    /// Parse one instruction.
    pub fn parse(i: &[u8]) -> PResult<'_, Instruction> {
        crate::wire::parse_one("instruction", |out| Instruction::parse_into(i, out))
    }

    /// Parse the instruction at the start of `i`, append it to `out` and return the input
    /// after it. Each kind is pushed where it is built (see [`Action::parse`]'s decoder for why).
    #[inline]
    pub(crate) fn parse_into<'a>(
        i: &'a [u8],
        out: &mut Vec<Instruction>,
    ) -> Result<&'a [u8], DecodeError> {
        let (_, (kind, len)) = fixed(i, 4, "instruction header", (u16p, u16p))?;
        let (rest, ins) = take_tlv(i, usize::from(len), 8, "instruction")?;
        // Instructions are 8-byte aligned (OpenFlow 1.3 section 7.2.4; Open vSwitch answers
        // OFPBIC_BAD_LEN). Accepting another length could not round trip: the encoder pads
        // bodies it does not interpret to 8 bytes.
        if len % 8 != 0 {
            return Err(DecodeError::BadLength {
                what: "instruction",
                len: usize::from(len),
                reason: "not a multiple of 8",
            });
        }
        if matches!(kind, 1 | 5 | 6) && len != 8 {
            return Err(DecodeError::BadLength {
                what: "instruction",
                len: usize::from(len),
                reason: "goto_table, meter and clear_actions are 8 bytes",
            });
        }
        let body = &ins[4..];
        match kind {
            1 => out.push(Instruction::GotoTable(
                fixed(body, 1, "goto_table instruction", u8p)?.1,
            )),
            2 => {
                let (_, (_, metadata, mask)) =
                    fixed(body, 20, "write_metadata instruction", (u32p, u64p, u64p))?;
                out.push(Instruction::WriteMetadata { metadata, mask });
            }
            3 | 4 => {
                let (actions, _) = crate::wire::take(body, 4, "actions instruction")?;
                // The actions may read on into the rest of the message for fixed-size copies.
                let actions = parse_action_list(actions, i.get(8..).unwrap_or(actions), 0)?;
                if kind == 3 {
                    out.push(Instruction::WriteActions(actions));
                } else {
                    out.push(Instruction::ApplyActions(actions));
                }
            }
            5 => out.push(Instruction::ClearActions),
            6 => out.push(Instruction::Meter(
                fixed(body, 4, "meter instruction", u32p)?.1,
            )),
            0xffff => {
                let (data, experimenter) = fixed(body, 4, "experimenter instruction", u32p)?;
                out.push(Instruction::Experimenter {
                    experimenter,
                    data: Bytes::copy_from_slice(data),
                });
            }
            _ => out.push(Instruction::Unknown {
                kind,
                data: Bytes::copy_from_slice(body),
            }),
        }
        Ok(rest)
    }

    /// Append the instruction to `out`.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        match self {
            Instruction::GotoTable(t) => out.extend_from_slice(&[0, 1, 0, 8, *t, 0, 0, 0]),
            Instruction::WriteMetadata { metadata, mask } => {
                out.extend_from_slice(&u32::to_be_bytes(0x0002_0018));
                out.extend_from_slice(&u32::to_be_bytes(0));
                out.extend_from_slice(&u64::to_be_bytes(*metadata));
                out.extend_from_slice(&u64::to_be_bytes(*mask));
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                out.extend_from_slice(&u16::to_be_bytes(
                    if matches!(self, Instruction::WriteActions(_)) {
                        3
                    } else {
                        4
                    },
                ));
                out.extend_from_slice(&u16::to_be_bytes(0));
                out.extend_from_slice(&u32::to_be_bytes(0));
                emit_actions(a, out);
                patch_len(out, start + 2, start);
            }
            Instruction::ClearActions => {
                out.extend_from_slice(&u32::to_be_bytes(0x0005_0008));
                out.extend_from_slice(&u32::to_be_bytes(0));
            }
            Instruction::Meter(m) => {
                out.extend_from_slice(&u32::to_be_bytes(0x0006_0008));
                out.extend_from_slice(&u32::to_be_bytes(*m));
            }
            Instruction::Experimenter { experimenter, data } => {
                out.extend_from_slice(&u16::to_be_bytes(0xffff));
                out.extend_from_slice(&u16::to_be_bytes(0));
                out.extend_from_slice(&u32::to_be_bytes(*experimenter));
                out.extend_from_slice(data);
                put_zeros(out, pad8(out.len() - start));
                patch_len(out, start + 2, start);
            }
            Instruction::Unknown { kind, data } => {
                out.extend_from_slice(&u16::to_be_bytes(*kind));
                out.extend_from_slice(&u16::to_be_bytes(0));
                out.extend_from_slice(data);
                put_zeros(out, pad8(out.len() - start));
                patch_len(out, start + 2, start);
            }
        }
    }
}

/// Parse an instruction list filling all of `i`.
pub fn parse_instructions(i: &[u8]) -> Result<Vec<Instruction>, DecodeError> {
    let mut v = Vec::new();
    parse_instructions_into(i, &mut v)?;
    Ok(v)
}

/// Parse an instruction list filling all of `i` into `out` (replacing what it held), in place.
pub(crate) fn parse_instructions_into(
    mut i: &[u8],
    out: &mut Vec<Instruction>,
) -> Result<(), DecodeError> {
    *out = Vec::with_capacity(crate::action::count_tlvs(i));
    while !i.is_empty() {
        i = Instruction::parse_into(i, out)?;
    }
    Ok(())
}

/// Append every instruction.
pub fn emit_instructions(ins: &[Instruction], out: &mut BytesMut) {
    for x in ins {
        x.emit(out);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::port::PortNo;

    static APPLY_BYTES: [u8; 24] = [
        0, 4, 0, 24, 0, 0, 0, 0, // apply_actions header
        0, 0, 0, 16, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0, 0, 0, // output:1
    ];
    static GOTO_BYTES: [u8; 8] = [0, 1, 0, 8, 5, 0, 0, 0];

    #[test]
    fn test_parse_emit() {
        for (bytes, expect) in [
            (
                &APPLY_BYTES[..],
                Instruction::ApplyActions(vec![Action::Output {
                    port: PortNo(1),
                    max_len: 0xffff,
                }]),
            ),
            (&GOTO_BYTES[..], Instruction::GotoTable(5)),
        ] {
            let (rest, ins) = Instruction::parse(bytes).unwrap();
            assert!(rest.is_empty());
            assert_eq!(ins, expect);
            let mut out = BytesMut::new();
            ins.emit(&mut out);
            assert_eq!(&out[..], bytes);
        }
    }

    #[test]
    fn test_write_metadata() {
        let ins = Instruction::WriteMetadata {
            metadata: 0x10,
            mask: 0xff,
        };
        let mut out = BytesMut::new();
        ins.emit(&mut out);
        assert_eq!(out.len(), 24);
        assert_eq!(Instruction::parse(&out).unwrap().1, ins);
    }

    #[test]
    fn malformed() {
        assert!(
            Instruction::parse(&APPLY_BYTES[..20])
                .unwrap_err()
                .is_truncated()
        );
        assert!(Instruction::parse(&[0, 1, 0, 16, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(Instruction::parse(&[0, 1, 0, 2, 5, 0, 0, 0]).is_err());
    }

    /// Fuzz finding: an unknown instruction of 12 bytes re-encoded as 16 (its body padded), so
    /// decode(encode(m)) != m. Unaligned lengths are now refused, whatever the type.
    #[test]
    fn unaligned_instruction_lengths_are_rejected() {
        let unknown = [0, 7, 0, 12, 1, 2, 3, 4, 5, 6, 7, 8];
        let experimenter = [0xff, 0xff, 0, 12, 0, 0, 0x23, 0x20, 1, 2, 3, 4];
        for bytes in [&unknown[..], &experimenter[..]] {
            assert_eq!(
                Instruction::parse(bytes).unwrap_err(),
                DecodeError::BadLength {
                    what: "instruction",
                    len: 12,
                    reason: "not a multiple of 8",
                }
            );
        }
        // An aligned unknown instruction keeps its exact bytes.
        let aligned = [0, 7, 0, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
        let (rest, ins) = Instruction::parse(&aligned).unwrap();
        assert!(rest.is_empty());
        let mut out = BytesMut::new();
        ins.emit(&mut out);
        assert_eq!(&out[..], &aligned[..]);
    }
}
