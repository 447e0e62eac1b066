//! Actions: every OpenFlow 1.3 action ([`standard`]) and the Nicira extensions Open vSwitch uses
//! ([`nicira`]), as one [`Action`] enum so that every dispatcher must handle every action.
//!
//! Contract: [`parse_actions`] decodes a whole action list; an experimenter action this crate
//! does not know becomes [`Action::Experimenter`] holding its bytes, which [`Action::emit`]
//! writes back unchanged. Decoding checks framing only; whether an output port or table exists
//! is the switch's business.

pub mod nicira;
pub mod standard;

use bytes::{Bytes, BytesMut};

use crate::oxm::Oxm;
use crate::port::PortNo;
use crate::wire::{DecodeError, PResult, fixed, take_tlv, u16p, u32p};

pub use nicira::{
    Bundle, Conjunction, Controller2, Ct, CtZone, Learn, LearnDst, LearnSpec, LearnSrc, Multipath,
    Nat, NatRange, NxmHeader, Sample, Subfield,
};

/// `OFPAT_EXPERIMENTER`.
pub const OFPAT_EXPERIMENTER: u16 = 0xffff;
/// The Nicira experimenter id.
pub const NX_EXPERIMENTER: u32 = 0x0000_2320;

/// One action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// `OFPAT_OUTPUT`: send to `port`, at most `max_len` bytes when to the controller.
    Output {
        /// Output port.
        port: PortNo,
        /// Bytes to send to the controller (`OFPCML_NO_BUFFER` = 0xffff for all).
        max_len: u16,
    },
    /// `OFPAT_COPY_TTL_OUT`.
    CopyTtlOut,
    /// `OFPAT_COPY_TTL_IN`.
    CopyTtlIn,
    /// `OFPAT_SET_MPLS_TTL`.
    SetMplsTtl(u8),
    /// `OFPAT_DEC_MPLS_TTL`.
    DecMplsTtl,
    /// `OFPAT_PUSH_VLAN` with this ethertype.
    PushVlan(u16),
    /// `OFPAT_POP_VLAN`.
    PopVlan,
    /// `OFPAT_PUSH_MPLS` with this ethertype.
    PushMpls(u16),
    /// `OFPAT_POP_MPLS`, the payload's ethertype.
    PopMpls(u16),
    /// `OFPAT_SET_QUEUE`.
    SetQueue(u32),
    /// `OFPAT_GROUP`.
    Group(u32),
    /// `OFPAT_SET_NW_TTL`.
    SetNwTtl(u8),
    /// `OFPAT_DEC_NW_TTL`.
    DecNwTtl,
    /// `OFPAT_SET_FIELD`.
    SetField(Oxm),
    /// `OFPAT_PUSH_PBB` with this ethertype.
    PushPbb(u16),
    /// `OFPAT_POP_PBB`.
    PopPbb,
    /// `NXAST_RESUBMIT`, `NXAST_RESUBMIT_TABLE` or `NXAST_RESUBMIT_TABLE_CT`.
    Resubmit {
        /// Port to pretend the packet came in on (`OFPP_IN_PORT` = keep).
        in_port: u16,
        /// Table; `None` encodes as the table-less `NXAST_RESUBMIT`.
        table: Option<u8>,
        /// Resubmit with the conntrack original tuple (`resubmit(,,ct)`).
        ct: bool,
    },
    /// `NXAST_REG_LOAD`: `load:value->dst`.
    RegLoad {
        /// Destination bits.
        dst: Subfield,
        /// Value (low `n_bits` bits are used).
        value: u64,
    },
    /// `NXAST_REG_LOAD2`: `set_field` in Nicira framing, possibly masked.
    RegLoad2(Oxm),
    /// `NXAST_REG_MOVE`: `move:src->dst`.
    RegMove {
        /// Source bits.
        src: Subfield,
        /// Destination bits (same width).
        dst: Subfield,
    },
    /// `NXAST_OUTPUT_REG`: output to the port in a register.
    OutputReg {
        /// Register bits holding the port.
        src: Subfield,
        /// Bytes to the controller.
        max_len: u16,
    },
    /// `NXAST_CT`.
    Ct(Ct),
    /// `NXAST_CT_CLEAR`.
    CtClear,
    /// `NXAST_NAT` (valid only inside `ct`).
    Nat(Nat),
    /// `NXAST_CONJUNCTION`.
    Conjunction(Conjunction),
    /// `NXAST_LEARN`.
    Learn(Learn),
    /// `NXAST_NOTE`: opaque bytes (padding included as received).
    Note(Bytes),
    /// `NXAST_DEC_TTL`.
    DecTtl,
    /// `NXAST_DEC_TTL_CNT_IDS`: decrement TTL, send to these controllers on expiry.
    DecTtlCntIds(Vec<u16>),
    /// `NXAST_CONTROLLER`.
    Controller {
        /// Bytes of the packet to send.
        max_len: u16,
        /// Controller connection id.
        controller_id: u16,
        /// `ofp_packet_in_reason`.
        reason: u8,
    },
    /// `NXAST_CONTROLLER2`: the property-based controller action (userdata, pause, meter...).
    Controller2(Controller2),
    /// `NXAST_FIN_TIMEOUT`.
    FinTimeout {
        /// New idle timeout on FIN/RST.
        idle: u16,
        /// New hard timeout on FIN/RST.
        hard: u16,
    },
    /// `NXAST_SET_TUNNEL` (32-bit tunnel id).
    SetTunnel(u32),
    /// `NXAST_SET_TUNNEL64`.
    SetTunnel64(u64),
    /// `NXAST_POP_QUEUE`.
    PopQueue,
    /// `NXAST_EXIT`.
    Exit,
    /// `NXAST_OUTPUT_TRUNC`: output to `port` truncated to `max_len` bytes.
    OutputTrunc {
        /// Output port (16-bit in this action).
        port: u16,
        /// Truncation length.
        max_len: u32,
    },
    /// `NXAST_SAMPLE`, `NXAST_SAMPLE2` or `NXAST_SAMPLE3`.
    Sample(Sample),
    /// `NXAST_MULTIPATH`: hash fields, pick one of n links, store it in `dst`.
    Multipath(Multipath),
    /// `NXAST_BUNDLE` / `NXAST_BUNDLE_LOAD`: pick a live member port (output it or load it).
    Bundle(Bundle),
    /// `NXAST_CLONE`: run these actions on a copy of the packet.
    Clone(Vec<Action>),
    /// `NXAST_CHECK_PKT_LARGER`: set the `dst` bit when the packet is longer than `pkt_len`.
    CheckPktLarger {
        /// Length to compare with.
        pkt_len: u16,
        /// One bit to write the result to.
        dst: Subfield,
    },
    /// `NXAST_STACK_PUSH`.
    StackPush(Subfield),
    /// `NXAST_STACK_POP`.
    StackPop(Subfield),
    /// Any other experimenter action, kept whole for exact re-encoding.
    Experimenter {
        /// Experimenter id.
        experimenter: u32,
        /// Everything after the experimenter id (for Nicira: subtype first), padding included.
        data: Bytes,
    },
    /// A standard action type this crate does not know.
    Unknown {
        /// `ofp_action_type`.
        kind: u16,
        /// Body after the 4-byte header.
        data: Bytes,
    },
}

impl Action {
    /// `output:port`.
    ///
    /// Like ovs-ofctl, `max_len` is 0xffff (whole packet) for `CONTROLLER` and 0 otherwise, so
    /// the action equals what OVS reports back in flow stats.
    pub fn output(port: impl Into<PortNo>) -> Action {
        let port = port.into();
        Action::Output {
            port,
            max_len: if port == PortNo::CONTROLLER {
                0xffff
            } else {
                0
            },
        }
    }

    /// `resubmit(,table)`.
    pub fn resubmit(table: u8) -> Action {
        Action::Resubmit {
            in_port: crate::port::OFPP_IN_PORT as u16,
            table: Some(table),
            ct: false,
        }
    }

    /// `set_field:value->field`.
    pub fn set_field(oxm: Oxm) -> Action {
        Action::SetField(oxm)
    }

    /// Parse one action.
    pub fn parse(i: &[u8]) -> PResult<'_, Action> {
        crate::wire::parse_one("action", |out| Action::parse_into(i, i, 0, out))
    }

    /// Parse the action at the start of `i`, which sits `depth` levels inside `ct`/`clone`
    /// action lists, append it to `out` and return the input after it. `extended` starts where
    /// `i` does and may run on into the rest of the message (fields are then copied with
    /// fixed-size loads).
    ///
    /// Actions are built straight into the list rather than returned and pushed: returning a
    /// 72-byte enum through `Result` layers made the compiler assemble it on the stack and copy
    /// it with wide loads that stall on the narrow stores just made.
    #[inline]
    pub(crate) fn parse_into<'a>(
        i: &'a [u8],
        extended: &[u8],
        depth: usize,
        out: &mut Vec<Action>,
    ) -> Result<&'a [u8], DecodeError> {
        let (_, (kind, len)) = fixed(i, 4, "action header", (u16p, u16p))?;
        let len = usize::from(len);
        if len % 8 != 0 {
            return Err(DecodeError::BadLength {
                what: "action",
                len,
                reason: "not a multiple of 8",
            });
        }
        let (rest, a) = take_tlv(i, len, 8, "action")?;
        let body = &a[4..];
        if kind == OFPAT_EXPERIMENTER {
            let (data, exp) = fixed(body, 4, "experimenter action", u32p)?;
            if exp == NX_EXPERIMENTER {
                nicira::parse_into(data, extended.get(8..).unwrap_or(data), depth, out)?;
            } else {
                out.push(Action::Experimenter {
                    experimenter: exp,
                    data: Bytes::copy_from_slice(data),
                });
            }
        } else {
            standard::parse_into(kind, body, extended.get(4..).unwrap_or(body), out)?;
        }
        Ok(rest)
    }

    /// Append the action to `out`.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        if !standard::emit(self, out) {
            match self {
                Action::Experimenter { experimenter, data } => {
                    let e = experimenter.to_be_bytes();
                    out.extend_from_slice(&[0xff, 0xff, 0, 0, e[0], e[1], e[2], e[3]]);
                    out.extend_from_slice(data);
                }
                _ => {
                    out.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0, 0x23, 0x20]);
                    nicira::emit(self, out);
                }
            }
            crate::wire::put_zeros(out, crate::wire::pad8(out.len() - start));
            crate::wire::patch_len(out, start + 2, start);
        }
    }
}

/// Parse a list of actions filling all of `i`.
pub fn parse_actions(i: &[u8]) -> Result<Vec<Action>, DecodeError> {
    parse_actions_nested(i, 0)
}

/// Deepest nesting of `ct`/`clone` action lists the decoder accepts; bounds its recursion.
pub const MAX_NESTING: usize = 8;

/// Parse an action list that sits `depth` levels inside `ct`/`clone`.
pub(crate) fn parse_actions_nested(i: &[u8], depth: usize) -> Result<Vec<Action>, DecodeError> {
    parse_action_list(i, i, depth)
}

/// Parse the action list `i`, `depth` levels inside `ct`/`clone`. `extended` starts where `i`
/// does and may run on into the rest of the message.
pub(crate) fn parse_action_list(
    i: &[u8],
    extended: &[u8],
    depth: usize,
) -> Result<Vec<Action>, DecodeError> {
    if depth > MAX_NESTING {
        return Err(DecodeError::Invalid {
            what: "nested action list",
            reason: "ct/clone actions nested more than 8 deep",
        });
    }
    let mut v = Vec::with_capacity(count_tlvs(i));
    let mut at = 0;
    while at < i.len() {
        let left = Action::parse_into(&i[at..], extended.get(at..).unwrap_or(&[]), depth, &mut v)?;
        at = i.len() - left.len();
    }
    Ok(v)
}

/// Count 16-bit-length TLVs (actions, instructions) in a list: a capacity hint bounded by the
/// input (at most one per 8 bytes), stopping at the first impossible length.
pub(crate) fn count_tlvs(mut i: &[u8]) -> usize {
    let mut n = 0;
    while i.len() >= 4 {
        let len = usize::from(u16::from_be_bytes([i[2], i[3]]));
        if len < 8 {
            break;
        }
        n += 1;
        i = i.get(len..).unwrap_or(&[]);
    }
    n
}

/// Append every action in `actions`.
pub fn emit_actions(actions: &[Action], out: &mut BytesMut) {
    for a in actions {
        a.emit(out);
    }
}
