//! Nicira extension actions (`NXAST_*`, experimenter 0x00002320) as Open vSwitch encodes them in
//! OpenFlow 1.3: resubmit, register load/move, conntrack (`ct`, `nat`, `ct_clear`), conjunction,
//! learn, note, dec_ttl, output_reg, controller/controller2, and smaller ones. Subtypes this
//! crate does not model become [`Action::Experimenter`] and re-encode byte for byte.
//!
//! Layouts follow OVS's `nx_action_*` structs: a 10-byte header (type, len, vendor, subtype),
//! fixed fields, then for variable actions a payload padded to 8 bytes with zeros.

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::{Bytes, BytesMut};

use super::{Action, NX_EXPERIMENTER, emit_actions};
use crate::oxm::{FieldId, Oxm};
use crate::wire::{DecodeError, fixed, put_zeros, take, u8p, u16p, u32p, u64p};

/// A 32-bit NXM header naming a field in `reg_load`/`reg_move`/`learn` (class, field, mask
/// flag, length), kept exactly as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NxmHeader(pub u32);

impl NxmHeader {
    /// The header OVS uses for `field`.
    pub fn of(field: FieldId) -> NxmHeader {
        NxmHeader(field.nxm_header())
    }

    /// The field it names.
    pub fn field(self) -> FieldId {
        FieldId::from_header(self.0).0
    }

    /// Width of the named field in bits (from the header's length byte).
    pub fn bits(self) -> u16 {
        let (_, hasmask, len) = FieldId::from_header(self.0);
        let len = if hasmask { len / 2 } else { len };
        u16::from(len) * 8
    }
}

/// A bit range of a field: `field[ofs..ofs+n_bits-1]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subfield {
    /// The field.
    pub field: NxmHeader,
    /// First bit (0 = least significant).
    pub ofs: u16,
    /// Number of bits.
    pub n_bits: u16,
}

impl Subfield {
    /// The whole of `field`.
    pub fn whole(field: FieldId) -> Subfield {
        let h = NxmHeader::of(field);
        Subfield {
            field: h,
            ofs: 0,
            n_bits: h.bits(),
        }
    }

    /// Bits `ofs..ofs+n_bits` of `field`.
    pub fn bits(field: FieldId, ofs: u16, n_bits: u16) -> Subfield {
        Subfield {
            field: NxmHeader::of(field),
            ofs,
            n_bits,
        }
    }

    /// The `ofs_nbits` encoding: offset in the top 10 bits, `n_bits - 1` in the low 6.
    fn ofs_nbits(self) -> u16 {
        (self.ofs << 6) | (self.n_bits.wrapping_sub(1) & 0x3f)
    }

    fn from_ofs_nbits(field: u32, v: u16) -> Subfield {
        Subfield {
            field: NxmHeader(field),
            ofs: v >> 6,
            n_bits: (v & 0x3f) + 1,
        }
    }
}

/// Where `ct` takes its zone from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtZone {
    /// An immediate zone number.
    Imm(u16),
    /// Bits of a field.
    Field(Subfield),
}

/// `NXAST_CT`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ct {
    /// `NX_CT_F_COMMIT` (1), `NX_CT_F_FORCE` (2).
    pub flags: u16,
    /// Conntrack zone.
    pub zone: CtZone,
    /// Table to recirculate to; 255 = none.
    pub recirc_table: u8,
    /// ALG port (21 = ftp, 69 = tftp), 0 = none.
    pub alg: u16,
    /// Nested actions (`nat`, `set_field` of `ct_mark`/`ct_label`).
    pub actions: Vec<Action>,
}

/// `NX_CT_F_COMMIT`.
pub const CT_COMMIT: u16 = 1;
/// `NX_CT_F_FORCE`.
pub const CT_FORCE: u16 = 2;

/// Address and port ranges of a `nat` action; each bound is present only when set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NatRange {
    /// Lowest IPv4 address.
    pub ipv4_min: Option<Ipv4Addr>,
    /// Highest IPv4 address.
    pub ipv4_max: Option<Ipv4Addr>,
    /// Lowest IPv6 address.
    pub ipv6_min: Option<Ipv6Addr>,
    /// Highest IPv6 address.
    pub ipv6_max: Option<Ipv6Addr>,
    /// Lowest port.
    pub proto_min: Option<u16>,
    /// Highest port.
    pub proto_max: Option<u16>,
}

/// `NXAST_NAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Nat {
    /// `NX_NAT_F_SRC` 1, `DST` 2, `PERSISTENT` 4, `PROTO_HASH` 8, `PROTO_RANDOM` 16.
    pub flags: u16,
    /// Ranges.
    pub range: NatRange,
}

/// `NX_NAT_F_SRC`.
pub const NAT_SRC: u16 = 1;
/// `NX_NAT_F_DST`.
pub const NAT_DST: u16 = 2;

/// `NXAST_CONJUNCTION`: this flow is clause `clause` (0-based) of `n_clauses` of conjunction `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Conjunction {
    /// Conjunction id (matched by `conj_id`).
    pub id: u32,
    /// Clause index, 0-based on the wire (ovs-ofctl prints it 1-based).
    pub clause: u8,
    /// Number of clauses.
    pub n_clauses: u8,
}

/// Source of a learned value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LearnSrc {
    /// Bits of a field of the packet being processed (`n_bits` from the spec).
    Field {
        /// The field.
        field: NxmHeader,
        /// First bit.
        ofs: u16,
    },
    /// An immediate value, `2 * ceil(n_bits / 16)` bytes big-endian.
    Imm(Bytes),
}

/// Destination of a learned value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LearnDst {
    /// Match on bits of a field in the learned flow.
    Match {
        /// The field.
        field: NxmHeader,
        /// First bit.
        ofs: u16,
    },
    /// Load into bits of a field, as an action of the learned flow.
    Load {
        /// The field.
        field: NxmHeader,
        /// First bit.
        ofs: u16,
    },
    /// Output to the port given by the source.
    Output,
}

/// One `flow_mod_spec` of a learn action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LearnSpec {
    /// Number of bits copied.
    pub n_bits: u16,
    /// Source.
    pub src: LearnSrc,
    /// Destination.
    pub dst: LearnDst,
}

/// `NXAST_LEARN`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Learn {
    /// Learned flow's idle timeout.
    pub idle_timeout: u16,
    /// Learned flow's hard timeout.
    pub hard_timeout: u16,
    /// Learned flow's priority.
    pub priority: u16,
    /// Learned flow's cookie.
    pub cookie: u64,
    /// `NX_LEARN_F_*` flags.
    pub flags: u16,
    /// Table for the learned flow.
    pub table_id: u8,
    /// Learned flow's fin_idle_timeout.
    pub fin_idle_timeout: u16,
    /// Learned flow's fin_hard_timeout.
    pub fin_hard_timeout: u16,
    /// What to match and do.
    pub specs: Vec<LearnSpec>,
    /// Most flows this action may learn (0 = unlimited); nonzero selects `NXAST_LEARN2`.
    pub limit: u32,
    /// Bit set to 1 when learning succeeded (`result_dst`, with `NX_LEARN_F_WRITE_RESULT` in
    /// `flags`); present selects `NXAST_LEARN2`.
    pub result_dst: Option<Subfield>,
}

/// `NX_LEARN_F_WRITE_RESULT`.
pub const LEARN_WRITE_RESULT: u16 = 4;

impl Learn {
    /// Whether this learn needs the `NXAST_LEARN2` encoding.
    pub fn is_learn2(&self) -> bool {
        self.limit != 0 || self.result_dst.is_some()
    }
}

/// `NXAST_CONTROLLER2`: a list of `NXAC2PT_*` properties kept as (type, payload).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Controller2 {
    /// Properties in wire order; the payload excludes the 4-byte header and the padding.
    pub props: Vec<(u16, Bytes)>,
}

/// `NXAC2PT_MAX_LEN`.
pub const NXAC2PT_MAX_LEN: u16 = 0;
/// `NXAC2PT_CONTROLLER_ID`.
pub const NXAC2PT_CONTROLLER_ID: u16 = 1;
/// `NXAC2PT_REASON`.
pub const NXAC2PT_REASON: u16 = 2;
/// `NXAC2PT_USERDATA`.
pub const NXAC2PT_USERDATA: u16 = 3;
/// `NXAC2PT_PAUSE`.
pub const NXAC2PT_PAUSE: u16 = 4;
/// `NXAC2PT_METER_ID`.
pub const NXAC2PT_METER_ID: u16 = 5;

impl Controller2 {
    fn prop(&self, t: u16) -> Option<&[u8]> {
        self.props
            .iter()
            .find(|(k, _)| *k == t)
            .map(|(_, v)| &v[..])
    }

    fn prop_u16(&self, t: u16) -> Option<u16> {
        self.prop(t)
            .and_then(|v| v.get(..2))
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    /// `max_len`, if set.
    pub fn max_len(&self) -> Option<u16> {
        self.prop_u16(NXAC2PT_MAX_LEN)
    }

    /// `id` (controller connection id), if set.
    pub fn controller_id(&self) -> Option<u16> {
        self.prop_u16(NXAC2PT_CONTROLLER_ID)
    }

    /// `reason`, if set.
    pub fn reason(&self) -> Option<u8> {
        self.prop(NXAC2PT_REASON).and_then(|v| v.first().copied())
    }

    /// `userdata`, if set.
    pub fn userdata(&self) -> Option<&[u8]> {
        self.prop(NXAC2PT_USERDATA)
    }

    /// Whether `pause` is set.
    pub fn pause(&self) -> bool {
        self.prop(NXAC2PT_PAUSE).is_some()
    }

    /// `meter_id`, if set.
    pub fn meter_id(&self) -> Option<u32> {
        self.prop(NXAC2PT_METER_ID)
            .and_then(|v| v.get(..4))
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Builder: add a 16-bit property the way OVS pads it (2 value bytes + 2 zero bytes).
    pub fn with_u16(mut self, t: u16, v: u16) -> Controller2 {
        let b = v.to_be_bytes();
        self.props
            .push((t, Bytes::copy_from_slice(&[b[0], b[1], 0, 0])));
        self
    }

    /// Builder: add `userdata`.
    pub fn with_userdata(mut self, data: &[u8]) -> Controller2 {
        self.props
            .push((NXAC2PT_USERDATA, Bytes::copy_from_slice(data)));
        self
    }
}

/// `NXAST_MULTIPATH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Multipath {
    /// `NX_HASH_FIELDS_*`: what to hash.
    pub fields: u16,
    /// Hash basis.
    pub basis: u16,
    /// `NX_MP_ALG_*`: 0 modulo_n, 1 hash_threshold, 2 hrw, 3 iter_hash.
    pub algorithm: u16,
    /// Number of links minus one.
    pub max_link: u16,
    /// Algorithm argument.
    pub arg: u32,
    /// Where the chosen link number goes.
    pub dst: Subfield,
}

/// `NXAST_BUNDLE` and `NXAST_BUNDLE_LOAD`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bundle {
    /// `NX_BD_ALG_*`: 0 active_backup, 1 hrw.
    pub algorithm: u16,
    /// `NX_HASH_FIELDS_*`.
    pub fields: u16,
    /// Hash basis.
    pub basis: u16,
    /// Member type; OVS supports only `NXM_OF_IN_PORT` (OpenFlow ports).
    pub member_type: u32,
    /// `bundle_load`: where the chosen port goes; `None` for `bundle` (output to it).
    pub dst: Option<Subfield>,
    /// Member ports.
    pub members: Vec<u16>,
}

/// Sampling actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sample {
    /// `NXAST_SAMPLE` (29) or `NXAST_SAMPLE2` (38).
    pub subtype: u16,
    /// Packets sampled per 65535.
    pub probability: u16,
    /// IPFIX collector set.
    pub collector_set_id: u32,
    /// Observation domain id.
    pub obs_domain_id: u32,
    /// Observation point id.
    pub obs_point_id: u32,
    /// Sampling port (sample2 only).
    pub sampling_port: u16,
    /// Direction: 0 default, 1 ingress, 2 egress (sample2 only).
    pub direction: u8,
}

mod subtype {
    pub const RESUBMIT: u16 = 1;
    pub const SET_TUNNEL: u16 = 2;
    pub const POP_QUEUE: u16 = 5;
    pub const REG_MOVE: u16 = 6;
    pub const REG_LOAD: u16 = 7;
    pub const NOTE: u16 = 8;
    pub const SET_TUNNEL64: u16 = 9;
    pub const RESUBMIT_TABLE: u16 = 14;
    pub const OUTPUT_REG: u16 = 15;
    pub const LEARN: u16 = 16;
    pub const EXIT: u16 = 17;
    pub const DEC_TTL: u16 = 18;
    pub const FIN_TIMEOUT: u16 = 19;
    pub const CONTROLLER: u16 = 20;
    pub const DEC_TTL_CNT_IDS: u16 = 21;
    pub const STACK_PUSH: u16 = 27;
    pub const STACK_POP: u16 = 28;
    pub const SAMPLE: u16 = 29;
    pub const REG_LOAD2: u16 = 33;
    pub const CONJUNCTION: u16 = 34;
    pub const CT: u16 = 35;
    pub const NAT: u16 = 36;
    pub const CONTROLLER2: u16 = 37;
    pub const SAMPLE2: u16 = 38;
    pub const OUTPUT_TRUNC: u16 = 39;
    pub const CT_CLEAR: u16 = 43;
    pub const RESUBMIT_TABLE_CT: u16 = 44;
    pub const LEARN2: u16 = 45;
    pub const MULTIPATH: u16 = 10;
    pub const BUNDLE: u16 = 12;
    pub const BUNDLE_LOAD: u16 = 13;
    pub const CLONE: u16 = 42;
    pub const CHECK_PKT_LARGER: u16 = 49;
}

const NAT_RANGE_IPV4_MIN: u16 = 1;
const NAT_RANGE_IPV4_MAX: u16 = 2;
const NAT_RANGE_IPV6_MIN: u16 = 4;
const NAT_RANGE_IPV6_MAX: u16 = 8;
const NAT_RANGE_PROTO_MIN: u16 = 16;
const NAT_RANGE_PROTO_MAX: u16 = 32;

const LEARN_SRC_IMM: u16 = 1 << 13;
const LEARN_DST_MASK: u16 = 3 << 11;
const LEARN_DST_LOAD: u16 = 1 << 11;
const LEARN_DST_OUTPUT: u16 = 2 << 11;

/// A raw 16-bit bit count (reg_move, stack push/pop, learn specs) must not be zero: Open
/// vSwitch rejects a zero-bit subfield (`OFPBAC_BAD_SET_LEN`), and a zero-bit subfield has no
/// ovs-ofctl text (`field[ofs..ofs-1]`). The `ofs_nbits` encodings cannot express zero.
fn nonzero_bits(n_bits: u16, what: &'static str) -> Result<u16, DecodeError> {
    if n_bits == 0 {
        return Err(DecodeError::Invalid {
            what,
            reason: "a subfield of zero bits (Open vSwitch: OFPBAC_BAD_SET_LEN)",
        });
    }
    Ok(n_bits)
}

/// Decode a Nicira action from what follows the experimenter id (subtype first) and append it
/// to `out`. Each arm pushes the variant it builds, so the action is written straight into the
/// list (see [`Action::parse_into`](super::Action) for why).
///
/// `extended` starts where `data` does and may run on into the rest of the message; a field in
/// `reg_load2` is then copied with a fixed-size load.
pub(crate) fn parse_into(
    data: &[u8],
    extended: &[u8],
    depth: usize,
    out: &mut Vec<Action>,
) -> Result<(), DecodeError> {
    use subtype::*;
    let (b, st) = fixed(data, 2, "nicira action subtype", u16p)?;
    let opaque = || Action::Experimenter {
        experimenter: NX_EXPERIMENTER,
        data: Bytes::copy_from_slice(data),
    };
    match st {
        RESUBMIT | RESUBMIT_TABLE | RESUBMIT_TABLE_CT => {
            let (_, (in_port, table)) = fixed(b, 3, "resubmit action", (u16p, u8p))?;
            out.push(Action::Resubmit {
                in_port,
                table: (st != RESUBMIT).then_some(table),
                ct: st == RESUBMIT_TABLE_CT,
            });
        }
        SET_TUNNEL => {
            let id = fixed(b, 6, "set_tunnel action", (u16p, u32p))?.1.1;
            out.push(Action::SetTunnel(id));
        }
        SET_TUNNEL64 => {
            let id = fixed(b, 14, "set_tunnel64 action", (u16p, u32p, u64p))?.1.2;
            out.push(Action::SetTunnel64(id));
        }
        POP_QUEUE => out.push(Action::PopQueue),
        EXIT => out.push(Action::Exit),
        DEC_TTL => out.push(Action::DecTtl),
        CT_CLEAR => out.push(Action::CtClear),
        REG_MOVE => {
            let (_, (n_bits, src_ofs, dst_ofs, src, dst)) =
                fixed(b, 14, "reg_move action", (u16p, u16p, u16p, u32p, u32p))?;
            let n_bits = nonzero_bits(n_bits, "reg_move n_bits")?;
            out.push(Action::RegMove {
                src: Subfield {
                    field: NxmHeader(src),
                    ofs: src_ofs,
                    n_bits,
                },
                dst: Subfield {
                    field: NxmHeader(dst),
                    ofs: dst_ofs,
                    n_bits,
                },
            });
        }
        REG_LOAD => {
            let (_, (ofs_nbits, dst, value)) = fixed(b, 14, "reg_load action", (u16p, u32p, u64p))?;
            out.push(Action::RegLoad {
                dst: Subfield::from_ofs_nbits(dst, ofs_nbits),
                value,
            });
        }
        REG_LOAD2 => {
            let ext = extended.get(2..).unwrap_or(b);
            let rest = Oxm::parse_extended_into(b, ext, out, Action::RegLoad2)?;
            if rest.iter().any(|x| *x != 0) {
                // Nonzero padding would not survive re-encoding: keep the action whole instead.
                out.pop();
                out.push(opaque());
            }
        }
        OUTPUT_REG => {
            let (_, (ofs_nbits, src, max_len)) =
                fixed(b, 8, "output_reg action", (u16p, u32p, u16p))?;
            out.push(Action::OutputReg {
                src: Subfield::from_ofs_nbits(src, ofs_nbits),
                max_len,
            });
        }
        NOTE => out.push(Action::Note(Bytes::copy_from_slice(b))),
        FIN_TIMEOUT => {
            let (_, (idle, hard)) = fixed(b, 4, "fin_timeout action", (u16p, u16p))?;
            out.push(Action::FinTimeout { idle, hard });
        }
        CONTROLLER => {
            let (_, (max_len, controller_id, reason)) =
                fixed(b, 5, "controller action", (u16p, u16p, u8p))?;
            out.push(Action::Controller {
                max_len,
                controller_id,
                reason,
            });
        }
        CONTROLLER2 => out.push(Action::Controller2(parse_controller2(b)?)),
        DEC_TTL_CNT_IDS => {
            let (ids, n) = fixed(b, 6, "dec_ttl_cnt_ids action", u16p)?;
            let (_, ids) = take(ids, usize::from(n) * 2, "dec_ttl_cnt_ids controller ids")?;
            out.push(Action::DecTtlCntIds(
                ids.chunks_exact(2)
                    .map(|c| u16::from_be_bytes([c[0], c[1]]))
                    .collect(),
            ));
        }
        STACK_PUSH | STACK_POP => {
            let (_, (ofs, field, n_bits)) = fixed(b, 8, "stack action", (u16p, u32p, u16p))?;
            let n_bits = nonzero_bits(n_bits, "stack action n_bits")?;
            let sf = Subfield {
                field: NxmHeader(field),
                ofs,
                n_bits,
            };
            out.push(if st == STACK_PUSH {
                Action::StackPush(sf)
            } else {
                Action::StackPop(sf)
            });
        }
        SAMPLE => {
            let (_, (probability, collector_set_id, obs_domain_id, obs_point_id)) =
                fixed(b, 14, "sample action", (u16p, u32p, u32p, u32p))?;
            out.push(Action::Sample(Sample {
                subtype: st,
                probability,
                collector_set_id,
                obs_domain_id,
                obs_point_id,
                sampling_port: 0,
                direction: 0,
            }));
        }
        SAMPLE2 => {
            let (
                _,
                (
                    probability,
                    collector_set_id,
                    obs_domain_id,
                    obs_point_id,
                    sampling_port,
                    direction,
                ),
            ) = fixed(b, 17, "sample2 action", (u16p, u32p, u32p, u32p, u16p, u8p))?;
            out.push(Action::Sample(Sample {
                subtype: st,
                probability,
                collector_set_id,
                obs_domain_id,
                obs_point_id,
                sampling_port,
                direction,
            }));
        }
        CONJUNCTION => {
            let (_, (clause, n_clauses, id)) = fixed(b, 6, "conjunction action", (u8p, u8p, u32p))?;
            out.push(Action::Conjunction(Conjunction {
                id,
                clause,
                n_clauses,
            }));
        }
        OUTPUT_TRUNC => {
            let (_, (port, max_len)) = fixed(b, 6, "output_trunc action", (u16p, u32p))?;
            out.push(Action::OutputTrunc { port, max_len });
        }
        CT => out.push(Action::Ct(parse_ct(b, depth)?)),
        CLONE => {
            let (nested, _) = take(b, 6, "clone action")?;
            out.push(Action::Clone(super::parse_actions_nested(
                nested,
                depth + 1,
            )?));
        }
        CHECK_PKT_LARGER => {
            let (_, (pkt_len, ofs, dst)) =
                fixed(b, 8, "check_pkt_larger action", (u16p, u16p, u32p))?;
            out.push(Action::CheckPktLarger {
                pkt_len,
                dst: Subfield {
                    field: NxmHeader(dst),
                    ofs,
                    n_bits: 1,
                },
            });
        }
        MULTIPATH => {
            let (_, (fields, basis, _pad0, algorithm, max_link, arg, _pad1, ofs_nbits, dst)) =
                fixed(
                    b,
                    22,
                    "multipath action",
                    (u16p, u16p, u16p, u16p, u16p, u32p, u16p, u16p, u32p),
                )?;
            out.push(Action::Multipath(Multipath {
                fields,
                basis,
                algorithm,
                max_link,
                arg,
                dst: Subfield::from_ofs_nbits(dst, ofs_nbits),
            }));
        }
        BUNDLE | BUNDLE_LOAD => {
            let (members, (algorithm, fields, basis, member_type, n, ofs_nbits, dst, _zero)) =
                fixed(
                    b,
                    22,
                    "bundle action",
                    (u16p, u16p, u16p, u32p, u16p, u16p, u32p, u32p),
                )?;
            let (_, members) = take(members, usize::from(n) * 2, "bundle members")?;
            let dst = (st == BUNDLE_LOAD).then(|| Subfield::from_ofs_nbits(dst, ofs_nbits));
            if st == BUNDLE && (ofs_nbits != 0 || dst_is_set(b)) {
                out.push(opaque());
                return Ok(());
            }
            out.push(Action::Bundle(Bundle {
                algorithm,
                fields,
                basis,
                member_type,
                dst,
                members: members
                    .chunks_exact(2)
                    .map(|c| u16::from_be_bytes([c[0], c[1]]))
                    .collect(),
            }));
        }
        NAT => out.push(Action::Nat(parse_nat(b)?)),
        LEARN => out.push(Action::Learn(parse_learn(b, false)?)),
        LEARN2 => out.push(match parse_learn(b, true)? {
            // Only a learn2 that needs it re-encodes as learn2; keep any other one whole.
            l if l.is_learn2() && (l.flags & LEARN_WRITE_RESULT != 0) == l.result_dst.is_some() => {
                Action::Learn(l)
            }
            _ => opaque(),
        }),
        _ => out.push(opaque()),
    }
    Ok(())
}

/// Whether the `dst` word of a bundle action (bytes 14..18 after the subtype) is nonzero.
fn dst_is_set(b: &[u8]) -> bool {
    b.get(14..18).is_some_and(|d| d.iter().any(|x| *x != 0))
}

fn parse_ct(b: &[u8], depth: usize) -> Result<Ct, DecodeError> {
    let (nested, (flags, zone_src, zone_v, recirc_table, _pad1, _pad2, alg)) =
        fixed(b, 14, "ct action", (u16p, u32p, u16p, u8p, u8p, u16p, u16p))?;
    let zone = if zone_src == 0 {
        CtZone::Imm(zone_v)
    } else {
        CtZone::Field(Subfield::from_ofs_nbits(zone_src, zone_v))
    };
    reject_nested_ct(nested)?;
    Ok(Ct {
        flags,
        zone,
        recirc_table,
        alg,
        actions: super::parse_actions_nested(nested, depth + 1)?,
    })
}

/// OVS forbids `ct` inside `ct`; refusing it here also bounds the decoder's recursion depth.
fn reject_nested_ct(mut i: &[u8]) -> Result<(), DecodeError> {
    while i.len() >= 10 {
        let (_, (kind, len, exp, st)) = fixed(i, 10, "ct nested action", (u16p, u16p, u32p, u16p))?;
        if kind == super::OFPAT_EXPERIMENTER && exp == NX_EXPERIMENTER && st == subtype::CT {
            return Err(DecodeError::Invalid {
                what: "ct action",
                reason: "ct nested inside ct",
            });
        }
        let len = usize::from(len).max(8).min(i.len());
        i = &i[len..];
    }
    Ok(())
}

fn parse_nat(b: &[u8]) -> Result<Nat, DecodeError> {
    let (mut i, (_pad, flags, present)) = fixed(b, 6, "nat action", (u16p, u16p, u16p))?;
    let mut range = NatRange::default();
    if present & NAT_RANGE_IPV4_MIN != 0 {
        let (r, v) = fixed(i, 4, "nat ipv4_min", u32p)?;
        range.ipv4_min = Some(Ipv4Addr::from(v));
        i = r;
    }
    if present & NAT_RANGE_IPV4_MAX != 0 {
        let (r, v) = fixed(i, 4, "nat ipv4_max", u32p)?;
        range.ipv4_max = Some(Ipv4Addr::from(v));
        i = r;
    }
    if present & NAT_RANGE_IPV6_MIN != 0 {
        let (r, v) = take(i, 16, "nat ipv6_min")?;
        range.ipv6_min = <[u8; 16]>::try_from(v).ok().map(Ipv6Addr::from);
        i = r;
    }
    if present & NAT_RANGE_IPV6_MAX != 0 {
        let (r, v) = take(i, 16, "nat ipv6_max")?;
        range.ipv6_max = <[u8; 16]>::try_from(v).ok().map(Ipv6Addr::from);
        i = r;
    }
    if present & NAT_RANGE_PROTO_MIN != 0 {
        let (r, v) = fixed(i, 2, "nat proto_min", u16p)?;
        range.proto_min = Some(v);
        i = r;
    }
    if present & NAT_RANGE_PROTO_MAX != 0 {
        let (_, v) = fixed(i, 2, "nat proto_max", u16p)?;
        range.proto_max = Some(v);
    }
    Ok(Nat { flags, range })
}

fn parse_learn(b: &[u8], learn2: bool) -> Result<Learn, DecodeError> {
    let (
        mut i,
        (
            idle_timeout,
            hard_timeout,
            priority,
            cookie,
            flags,
            table_id,
            _pad,
            fin_idle_timeout,
            fin_hard_timeout,
        ),
    ) = fixed(
        b,
        22,
        "learn action",
        (u16p, u16p, u16p, u64p, u16p, u8p, u8p, u16p, u16p),
    )?;
    let (mut limit, mut result_dst) = (0, None);
    if learn2 {
        let (r, (l, dst_ofs, _pad)) = fixed(i, 8, "learn2 action", (u32p, u16p, u16p))?;
        limit = l;
        i = r;
        if flags & LEARN_WRITE_RESULT != 0 {
            let (r, field) = fixed(i, 4, "learn2 result_dst", u32p)?;
            result_dst = Some(Subfield {
                field: NxmHeader(field),
                ofs: dst_ofs,
                n_bits: 1,
            });
            i = r;
        }
    }
    let mut specs = Vec::new();
    while i.len() >= 2 {
        let (r, h) = fixed(i, 2, "learn spec", u16p)?;
        if h == 0 {
            break;
        }
        // A zero-bit spec has a header the encoder may write as 0x0000, which ends the list
        // (and Open vSwitch's learn check refuses zero-bit subfields), so refuse it here.
        let n_bits = nonzero_bits(h & 0x3ff, "learn spec n_bits")?;
        let (r, src) = if h & LEARN_SRC_IMM != 0 {
            let n = 2 * usize::from(n_bits).div_ceil(16);
            let (r, v) = take(r, n, "learn spec immediate")?;
            (r, LearnSrc::Imm(Bytes::copy_from_slice(v)))
        } else {
            let (r, (field, ofs)) = fixed(r, 6, "learn spec source", (u32p, u16p))?;
            (
                r,
                LearnSrc::Field {
                    field: NxmHeader(field),
                    ofs,
                },
            )
        };
        let (r, dst) = match h & LEARN_DST_MASK {
            LEARN_DST_OUTPUT => (r, LearnDst::Output),
            kind => {
                let (r, (field, ofs)) = fixed(r, 6, "learn spec destination", (u32p, u16p))?;
                let field = NxmHeader(field);
                if kind == LEARN_DST_LOAD {
                    (r, LearnDst::Load { field, ofs })
                } else {
                    (r, LearnDst::Match { field, ofs })
                }
            }
        };
        specs.push(LearnSpec { n_bits, src, dst });
        i = r;
    }
    Ok(Learn {
        idle_timeout,
        hard_timeout,
        priority,
        cookie,
        flags,
        table_id,
        fin_idle_timeout,
        fin_hard_timeout,
        specs,
        limit,
        result_dst,
    })
}

fn parse_controller2(b: &[u8]) -> Result<Controller2, DecodeError> {
    let (mut i, _) = take(b, 6, "controller2 action")?;
    let mut props = Vec::new();
    while i.len() >= 4 {
        let (_, (t, len)) = fixed(i, 4, "controller2 property", (u16p, u16p))?;
        let len = usize::from(len);
        let (r, p) = crate::wire::take_tlv(i, len, 4, "controller2 property")?;
        props.push((t, Bytes::copy_from_slice(&p[4..])));
        let pad = crate::wire::pad8(len).min(r.len());
        i = &r[pad..];
    }
    Ok(Controller2 { props })
}

/// Encode the part of a Nicira action after the experimenter id; the caller pads and patches
/// the length.
pub(crate) fn emit(a: &Action, out: &mut BytesMut) {
    use subtype::*;
    match a {
        Action::Resubmit { in_port, table, ct } => {
            out.extend_from_slice(&u16::to_be_bytes(match (table, ct) {
                (_, true) => RESUBMIT_TABLE_CT,
                (Some(_), false) => RESUBMIT_TABLE,
                (None, false) => RESUBMIT,
            }));
            out.extend_from_slice(&u16::to_be_bytes(*in_port));
            out.extend_from_slice(&[table.unwrap_or(0)]);
        }
        Action::SetTunnel(id) => {
            out.extend_from_slice(&u16::to_be_bytes(SET_TUNNEL));
            out.extend_from_slice(&u16::to_be_bytes(0));
            out.extend_from_slice(&u32::to_be_bytes(*id));
        }
        Action::SetTunnel64(id) => {
            out.extend_from_slice(&u16::to_be_bytes(SET_TUNNEL64));
            put_zeros(out, 6);
            out.extend_from_slice(&u64::to_be_bytes(*id));
        }
        Action::PopQueue => out.extend_from_slice(&u16::to_be_bytes(POP_QUEUE)),
        Action::Exit => out.extend_from_slice(&u16::to_be_bytes(EXIT)),
        Action::DecTtl => out.extend_from_slice(&u16::to_be_bytes(DEC_TTL)),
        Action::CtClear => out.extend_from_slice(&u16::to_be_bytes(CT_CLEAR)),
        Action::Clone(actions) => {
            out.extend_from_slice(&u16::to_be_bytes(CLONE));
            put_zeros(out, 6);
            emit_actions(actions, out);
        }
        Action::CheckPktLarger { pkt_len, dst } => {
            out.extend_from_slice(&u16::to_be_bytes(CHECK_PKT_LARGER));
            out.extend_from_slice(&u16::to_be_bytes(*pkt_len));
            out.extend_from_slice(&u16::to_be_bytes(dst.ofs));
            out.extend_from_slice(&u32::to_be_bytes(dst.field.0));
        }
        Action::Multipath(m) => {
            out.extend_from_slice(&u16::to_be_bytes(MULTIPATH));
            for v in [m.fields, m.basis, 0, m.algorithm, m.max_link] {
                out.extend_from_slice(&v.to_be_bytes());
            }
            out.extend_from_slice(&m.arg.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&m.dst.ofs_nbits().to_be_bytes());
            out.extend_from_slice(&m.dst.field.0.to_be_bytes());
        }
        Action::Bundle(bd) => {
            let st = if bd.dst.is_some() {
                BUNDLE_LOAD
            } else {
                BUNDLE
            };
            out.extend_from_slice(&st.to_be_bytes());
            for v in [bd.algorithm, bd.fields, bd.basis] {
                out.extend_from_slice(&v.to_be_bytes());
            }
            out.extend_from_slice(&bd.member_type.to_be_bytes());
            out.extend_from_slice(&(bd.members.len() as u16).to_be_bytes());
            out.extend_from_slice(&bd.dst.map_or(0, |d| d.ofs_nbits()).to_be_bytes());
            out.extend_from_slice(&bd.dst.map_or(0, |d| d.field.0).to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            for m in &bd.members {
                out.extend_from_slice(&m.to_be_bytes());
            }
        }
        Action::RegMove { src, dst } => {
            out.extend_from_slice(&u16::to_be_bytes(REG_MOVE));
            out.extend_from_slice(&u16::to_be_bytes(src.n_bits));
            out.extend_from_slice(&u16::to_be_bytes(src.ofs));
            out.extend_from_slice(&u16::to_be_bytes(dst.ofs));
            out.extend_from_slice(&u32::to_be_bytes(src.field.0));
            out.extend_from_slice(&u32::to_be_bytes(dst.field.0));
        }
        Action::RegLoad { dst, value } => {
            out.extend_from_slice(&u16::to_be_bytes(REG_LOAD));
            out.extend_from_slice(&u16::to_be_bytes(dst.ofs_nbits()));
            out.extend_from_slice(&u32::to_be_bytes(dst.field.0));
            out.extend_from_slice(&u64::to_be_bytes(*value));
        }
        Action::RegLoad2(oxm) => {
            out.extend_from_slice(&u16::to_be_bytes(REG_LOAD2));
            oxm.emit(out);
        }
        Action::OutputReg { src, max_len } => {
            out.extend_from_slice(&u16::to_be_bytes(OUTPUT_REG));
            out.extend_from_slice(&u16::to_be_bytes(src.ofs_nbits()));
            out.extend_from_slice(&u32::to_be_bytes(src.field.0));
            out.extend_from_slice(&u16::to_be_bytes(*max_len));
        }
        Action::Note(b) => {
            out.extend_from_slice(&u16::to_be_bytes(NOTE));
            out.extend_from_slice(b);
        }
        Action::FinTimeout { idle, hard } => {
            out.extend_from_slice(&u16::to_be_bytes(FIN_TIMEOUT));
            out.extend_from_slice(&u16::to_be_bytes(*idle));
            out.extend_from_slice(&u16::to_be_bytes(*hard));
        }
        Action::Controller {
            max_len,
            controller_id,
            reason,
        } => {
            out.extend_from_slice(&u16::to_be_bytes(CONTROLLER));
            out.extend_from_slice(&u16::to_be_bytes(*max_len));
            out.extend_from_slice(&u16::to_be_bytes(*controller_id));
            out.extend_from_slice(&[*reason]);
        }
        Action::Controller2(c) => {
            out.extend_from_slice(&u16::to_be_bytes(CONTROLLER2));
            put_zeros(out, 6);
            for (t, v) in &c.props {
                let len = 4 + v.len();
                out.extend_from_slice(&u16::to_be_bytes(*t));
                out.extend_from_slice(&u16::to_be_bytes(len as u16));
                out.extend_from_slice(v);
                put_zeros(out, crate::wire::pad8(len));
            }
        }
        Action::DecTtlCntIds(ids) => {
            out.extend_from_slice(&u16::to_be_bytes(DEC_TTL_CNT_IDS));
            out.extend_from_slice(&u16::to_be_bytes(ids.len() as u16));
            out.extend_from_slice(&u32::to_be_bytes(0));
            for id in ids {
                out.extend_from_slice(&u16::to_be_bytes(*id));
            }
        }
        Action::StackPush(sf) | Action::StackPop(sf) => {
            out.extend_from_slice(&u16::to_be_bytes(if matches!(a, Action::StackPush(_)) {
                STACK_PUSH
            } else {
                STACK_POP
            }));
            out.extend_from_slice(&u16::to_be_bytes(sf.ofs));
            out.extend_from_slice(&u32::to_be_bytes(sf.field.0));
            out.extend_from_slice(&u16::to_be_bytes(sf.n_bits));
        }
        Action::Sample(s) => {
            out.extend_from_slice(&u16::to_be_bytes(s.subtype));
            out.extend_from_slice(&u16::to_be_bytes(s.probability));
            out.extend_from_slice(&u32::to_be_bytes(s.collector_set_id));
            out.extend_from_slice(&u32::to_be_bytes(s.obs_domain_id));
            out.extend_from_slice(&u32::to_be_bytes(s.obs_point_id));
            if s.subtype != SAMPLE {
                out.extend_from_slice(&u16::to_be_bytes(s.sampling_port));
                out.extend_from_slice(&[s.direction]);
            }
        }
        Action::Conjunction(c) => {
            out.extend_from_slice(&u16::to_be_bytes(CONJUNCTION));
            out.extend_from_slice(&[c.clause]);
            out.extend_from_slice(&[c.n_clauses]);
            out.extend_from_slice(&u32::to_be_bytes(c.id));
        }
        Action::OutputTrunc { port, max_len } => {
            out.extend_from_slice(&u16::to_be_bytes(OUTPUT_TRUNC));
            out.extend_from_slice(&u16::to_be_bytes(*port));
            out.extend_from_slice(&u32::to_be_bytes(*max_len));
        }
        Action::Ct(ct) => {
            out.extend_from_slice(&u16::to_be_bytes(CT));
            out.extend_from_slice(&u16::to_be_bytes(ct.flags));
            match ct.zone {
                CtZone::Imm(z) => {
                    out.extend_from_slice(&u32::to_be_bytes(0));
                    out.extend_from_slice(&u16::to_be_bytes(z));
                }
                CtZone::Field(sf) => {
                    out.extend_from_slice(&u32::to_be_bytes(sf.field.0));
                    out.extend_from_slice(&u16::to_be_bytes(sf.ofs_nbits()));
                }
            }
            out.extend_from_slice(&[ct.recirc_table]);
            put_zeros(out, 3);
            out.extend_from_slice(&u16::to_be_bytes(ct.alg));
            emit_actions(&ct.actions, out);
        }
        Action::Nat(nat) => {
            out.extend_from_slice(&u16::to_be_bytes(NAT));
            out.extend_from_slice(&u16::to_be_bytes(0));
            out.extend_from_slice(&u16::to_be_bytes(nat.flags));
            let r = &nat.range;
            let present = [
                (r.ipv4_min.is_some(), NAT_RANGE_IPV4_MIN),
                (r.ipv4_max.is_some(), NAT_RANGE_IPV4_MAX),
                (r.ipv6_min.is_some(), NAT_RANGE_IPV6_MIN),
                (r.ipv6_max.is_some(), NAT_RANGE_IPV6_MAX),
                (r.proto_min.is_some(), NAT_RANGE_PROTO_MIN),
                (r.proto_max.is_some(), NAT_RANGE_PROTO_MAX),
            ]
            .iter()
            .filter(|(p, _)| *p)
            .fold(0, |acc, (_, bit)| acc | bit);
            out.extend_from_slice(&u16::to_be_bytes(present));
            for a in [r.ipv4_min, r.ipv4_max].into_iter().flatten() {
                out.extend_from_slice(&a.octets());
            }
            for a in [r.ipv6_min, r.ipv6_max].into_iter().flatten() {
                out.extend_from_slice(&a.octets());
            }
            for p in [r.proto_min, r.proto_max].into_iter().flatten() {
                out.extend_from_slice(&u16::to_be_bytes(p));
            }
        }
        Action::Learn(l) => {
            out.extend_from_slice(&u16::to_be_bytes(if l.is_learn2() {
                LEARN2
            } else {
                LEARN
            }));
            out.extend_from_slice(&u16::to_be_bytes(l.idle_timeout));
            out.extend_from_slice(&u16::to_be_bytes(l.hard_timeout));
            out.extend_from_slice(&u16::to_be_bytes(l.priority));
            out.extend_from_slice(&u64::to_be_bytes(l.cookie));
            out.extend_from_slice(&u16::to_be_bytes(l.flags));
            out.extend_from_slice(&[l.table_id]);
            out.extend_from_slice(&[0]);
            out.extend_from_slice(&u16::to_be_bytes(l.fin_idle_timeout));
            out.extend_from_slice(&u16::to_be_bytes(l.fin_hard_timeout));
            if l.is_learn2() {
                out.extend_from_slice(&u32::to_be_bytes(l.limit));
                let ofs = l.result_dst.map_or(0, |r| r.ofs);
                out.extend_from_slice(&u16::to_be_bytes(ofs));
                out.extend_from_slice(&[0, 0]);
                if let Some(r) = l.result_dst {
                    out.extend_from_slice(&u32::to_be_bytes(r.field.0));
                }
            }
            for s in &l.specs {
                let src_bit = if matches!(s.src, LearnSrc::Imm(_)) {
                    LEARN_SRC_IMM
                } else {
                    0
                };
                let dst_bits = match s.dst {
                    LearnDst::Match { .. } => 0,
                    LearnDst::Load { .. } => LEARN_DST_LOAD,
                    LearnDst::Output => LEARN_DST_OUTPUT,
                };
                out.extend_from_slice(&u16::to_be_bytes(src_bit | dst_bits | (s.n_bits & 0x3ff)));
                match &s.src {
                    LearnSrc::Imm(v) => out.extend_from_slice(v),
                    LearnSrc::Field { field, ofs } => {
                        out.extend_from_slice(&u32::to_be_bytes(field.0));
                        out.extend_from_slice(&u16::to_be_bytes(*ofs));
                    }
                }
                match s.dst {
                    LearnDst::Match { field, ofs } | LearnDst::Load { field, ofs } => {
                        out.extend_from_slice(&u32::to_be_bytes(field.0));
                        out.extend_from_slice(&u16::to_be_bytes(ofs));
                    }
                    LearnDst::Output => {}
                }
            }
        }
        // Standard actions and opaque experimenters never reach here (see Action::emit).
        _ => {}
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::action::Action;

    macro_rules! assert_nx_round_trips {
        ($action:expr, $bytes:expr) => {{
            let bytes: &[u8] = &$bytes;
            let (rest, a) = Action::parse(bytes).unwrap();
            assert!(rest.is_empty());
            assert_eq!(a, $action);
            let mut out = BytesMut::new();
            a.emit(&mut out);
            assert_eq!(&out[..], bytes);
        }};
    }

    const NX: [u8; 4] = [0, 0, 0x23, 0x20];

    fn nx(len: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![0xff, 0xff, 0, len];
        v.extend_from_slice(&NX);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn test_resubmit_table() {
        assert_nx_round_trips!(
            Action::Resubmit {
                in_port: 1234,
                table: Some(99),
                ct: false
            },
            nx(16, &[0, 14, 0x04, 0xd2, 99, 0, 0, 0])
        );
        assert_nx_round_trips!(
            Action::Resubmit {
                in_port: 5,
                table: None,
                ct: false
            },
            nx(16, &[0, 1, 0, 5, 0, 0, 0, 0])
        );
    }

    #[test]
    fn test_reg_load() {
        // load:0xdeadbee->NXM_NX_REG0[4..31]
        assert_nx_round_trips!(
            Action::RegLoad {
                dst: Subfield::bits(crate::nxm::reg(0), 4, 28),
                value: 0x0dea_dbee
            },
            nx(
                24,
                &[
                    0, 7, 0x01, 0x1b, 0, 1, 0, 4, 0, 0, 0, 0, 0x0d, 0xea, 0xdb, 0xee
                ]
            )
        );
    }

    #[test]
    fn test_reg_move() {
        // move:NXM_NX_REG0[10..15]->NXM_NX_REG1[0..5]
        assert_nx_round_trips!(
            Action::RegMove {
                src: Subfield::bits(crate::nxm::reg(0), 10, 6),
                dst: Subfield::bits(crate::nxm::reg(1), 0, 6)
            },
            nx(24, &[0, 6, 0, 6, 0, 10, 0, 0, 0, 1, 0, 4, 0, 1, 2, 4])
        );
    }

    #[test]
    fn test_ct_with_zone_field() {
        // ct(table=4,zone=NXM_NX_REG0[4..31])
        assert_nx_round_trips!(
            Action::Ct(Ct {
                flags: 0,
                zone: CtZone::Field(Subfield::bits(crate::nxm::reg(0), 4, 28)),
                recirc_table: 4,
                alg: 0,
                actions: vec![]
            }),
            nx(
                24,
                &[0, 0x23, 0, 0, 0, 1, 0, 4, 0x01, 0x1b, 4, 0, 0, 0, 0, 0]
            )
        );
    }

    #[test]
    fn test_nat_ranges() {
        // nat(src=10.1.12.0-10.1.13.255:1-1023)
        assert_nx_round_trips!(
            Action::Nat(Nat {
                flags: NAT_SRC,
                range: NatRange {
                    ipv4_min: Some(Ipv4Addr::new(10, 1, 12, 0)),
                    ipv4_max: Some(Ipv4Addr::new(10, 1, 13, 255)),
                    proto_min: Some(1),
                    proto_max: Some(1023),
                    ..NatRange::default()
                }
            }),
            nx(
                32,
                &[
                    0, 0x24, 0, 0, 0, 1, 0, 0x33, 10, 1, 12, 0, 10, 1, 13, 255, 0, 1, 3, 0xff, 0,
                    0, 0, 0
                ]
            )
        );
    }

    #[test]
    fn test_conjunction() {
        assert_nx_round_trips!(
            Action::Conjunction(Conjunction {
                id: 0xab_cdef,
                clause: 0,
                n_clauses: 2
            }),
            nx(16, &[0, 0x22, 0, 2, 0, 0xab, 0xcd, 0xef])
        );
    }

    #[test]
    fn test_learn_specs() {
        // learn(table=99,NXM_OF_VLAN_TCI[0..11],output:NXM_OF_IN_PORT[])
        let l = Learn {
            table_id: 99,
            specs: vec![
                LearnSpec {
                    n_bits: 12,
                    src: LearnSrc::Field {
                        field: NxmHeader(0x0000_0802),
                        ofs: 0,
                    },
                    dst: LearnDst::Match {
                        field: NxmHeader(0x0000_0802),
                        ofs: 0,
                    },
                },
                LearnSpec {
                    n_bits: 16,
                    src: LearnSrc::Field {
                        field: NxmHeader(0x0000_0002),
                        ofs: 0,
                    },
                    dst: LearnDst::Output,
                },
            ],
            ..Learn::default()
        };
        let mut out = BytesMut::new();
        Action::Learn(l.clone()).emit(&mut out);
        assert_eq!(out.len(), 32 + 14 + 8 + 2);
        assert_eq!(&out[32..34], &[0x00, 0x0c]);
        assert_eq!(&out[46..48], &[0x10, 0x10]);
        assert_eq!(Action::parse(&out).unwrap().1, Action::Learn(l));
    }

    #[test]
    fn unknown_subtype_is_kept() {
        let raw = nx(16, &[0, 200, 1, 2, 3, 4, 5, 6]);
        let (_, a) = Action::parse(&raw).unwrap();
        assert!(matches!(
            a,
            Action::Experimenter {
                experimenter: 0x2320,
                ..
            }
        ));
        let mut out = BytesMut::new();
        a.emit(&mut out);
        assert_eq!(&out[..], &raw[..]);
    }

    #[test]
    fn malformed() {
        // reg_load cut short inside its fixed part.
        assert!(
            Action::parse(&nx(16, &[0, 7, 0, 0, 0, 0, 0, 0]))
                .unwrap_err()
                .is_truncated()
        );
        // ct nested inside ct is refused.
        let inner = nx(24, &[0, 0x23, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0]);
        let mut outer = nx(48, &[0, 0x23, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0]);
        outer.extend_from_slice(&inner);
        assert!(matches!(
            Action::parse(&outer),
            Err(DecodeError::Invalid { .. })
        ));
    }

    /// Fuzz finding: a reg_move of zero bits decoded, then overflowed `ofs + n_bits - 1` when
    /// rendered. Open vSwitch rejects it (`OFPBAC_BAD_SET_LEN`); so does decoding now.
    #[test]
    fn zero_bit_reg_move_is_rejected() {
        let reproducer = hex(
            "040e0058002e029280000000000001470000000000000000000000000000052fffffffffffff0000000000000430000000010004000080000004002000000000ffff00180000232000060000000001002000630800010604",
        );
        assert_eq!(
            crate::Message::decode(&reproducer).unwrap_err(),
            DecodeError::Invalid {
                what: "reg_move n_bits",
                reason: "a subfield of zero bits (Open vSwitch: OFPBAC_BAD_SET_LEN)",
            }
        );
        // move:NXM_NX_REG0[0..n_bits-1]->NXM_NX_REG1[...]: one bit decodes, zero bits do not.
        let reg_move = |n_bits: u8| nx(24, &[0, 6, 0, n_bits, 0, 0, 0, 0, 0, 1, 0, 4, 0, 1, 2, 4]);
        assert!(Action::parse(&reg_move(1)).is_ok());
        assert!(matches!(
            Action::parse(&reg_move(0)),
            Err(DecodeError::Invalid {
                what: "reg_move n_bits",
                ..
            })
        ));
        // stack_push:NXM_NX_REG0[0..n_bits-1]
        let push = |n_bits: u8| nx(24, &[0, 27, 0, 0, 0, 1, 0, 4, 0, n_bits, 0, 0, 0, 0, 0, 0]);
        assert!(Action::parse(&push(16)).is_ok());
        assert!(matches!(
            Action::parse(&push(0)),
            Err(DecodeError::Invalid {
                what: "stack action n_bits",
                ..
            })
        ));
        // A hand-built zero-bit subfield still renders without overflowing.
        let reg0 = Subfield::bits(crate::nxm::reg(0), 0, 0);
        let text = Action::RegMove {
            src: reg0,
            dst: reg0,
        }
        .to_string();
        assert_eq!(text, "move:NXM_NX_REG0[0..-1]->NXM_NX_REG0[0..-1]");
    }

    /// Fuzz finding: a learn spec with header 0x4000 (a reserved bit and zero bits) decoded as
    /// a spec, was re-encoded as 0x0000 and so ended the spec list on the next decode, losing
    /// the specs after it. Zero-bit specs are refused, as Open vSwitch's learn check does.
    #[test]
    fn zero_bit_learn_spec_is_rejected() {
        let reproducer = hex(
            "040e0078000002e800000000000001720000000000000000000000000000055affffffffffffffffffffffff0000000000010004000000000004004000000000ffff00380000232000100000000080000000ff0000000000010004000000000004004000000000ff00000406000028080005000104040000",
        );
        assert_eq!(
            crate::Message::decode(&reproducer).unwrap_err(),
            DecodeError::Invalid {
                what: "learn spec n_bits",
                reason: "a subfield of zero bits (Open vSwitch: OFPBAC_BAD_SET_LEN)",
            }
        );
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
