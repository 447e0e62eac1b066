//! ovs-ofctl text: `Display` for [`Match`], [`Oxm`] subfields, [`Action`], [`Instruction`],
//! [`FlowMod`], [`GroupMod`] and [`FlowStats`], in the exact syntax `ovs-ofctl -O OpenFlow13`
//! (Open vSwitch 3.1) prints, so flows can be compared with `ovs-ofctl dump-flows` text.
//!
//! Contract: a match is first folded into the fields OVS keeps in its own flow structure (OXM and
//! NXM spellings of one field become one, `vlan_vid`+`vlan_pcp` become the TCI, `xreg<n>` become
//! `reg<2n>`/`reg<2n+1>`), then printed in OVS's fixed field order with its shorthands (`ip`,
//! `tcp`, `arp`, ...). Values are masked before printing, as OVS stores them.

use std::fmt::{self, Write};
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::action::nicira::{CtZone, LearnDst, LearnSrc, NxmHeader, Subfield};
use crate::action::{Action, NX_EXPERIMENTER};
use crate::flow_mod::{DEFAULT_PRIORITY, FlowMod, FlowModCommand, OFP_NO_BUFFER};
use crate::group::{GroupMod, GroupType, OFPG_ANY};
use crate::instruction::Instruction;
use crate::matches::Match;
use crate::multipart::FlowStats;
use crate::oxm::{
    CLASS_BASIC, CLASS_EXPERIMENTER, CLASS_NXM0, CLASS_NXM1, CLASS_PKT_REGS, FieldId, Oxm,
    ValueFormat,
};
use crate::port::{OFPP_ANY, PortNo};

/// The fields of OVS's flow structure that matches print, in no particular order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum F {
    InPort,
    DlSrc,
    DlDst,
    DlType,
    VlanTci,
    NwSrc,
    NwDst,
    Ipv6Src,
    Ipv6Dst,
    Ipv6Label,
    NwProto,
    NwTos,
    NwEcn,
    NwTtl,
    NwFrag,
    ArpSha,
    ArpTha,
    TpSrc,
    TpDst,
    TcpFlags,
    MplsLabel,
    MplsTc,
    MplsBos,
    NdTarget,
    TunId,
    TunSrc,
    TunDst,
    Metadata,
    PktMark,
    ConjId,
    CtState,
    CtZone,
    CtMark,
    CtLabel,
    DpHash,
    RecircId,
    Reg(u8),
}

const N_FIXED: usize = 36;

impl F {
    fn index(self) -> usize {
        match self {
            F::Reg(n) => N_FIXED + usize::from(n & 15),
            other => {
                let all = [
                    F::InPort,
                    F::DlSrc,
                    F::DlDst,
                    F::DlType,
                    F::VlanTci,
                    F::NwSrc,
                    F::NwDst,
                    F::Ipv6Src,
                    F::Ipv6Dst,
                    F::Ipv6Label,
                    F::NwProto,
                    F::NwTos,
                    F::NwEcn,
                    F::NwTtl,
                    F::NwFrag,
                    F::ArpSha,
                    F::ArpTha,
                    F::TpSrc,
                    F::TpDst,
                    F::TcpFlags,
                    F::MplsLabel,
                    F::MplsTc,
                    F::MplsBos,
                    F::NdTarget,
                    F::TunId,
                    F::TunSrc,
                    F::TunDst,
                    F::Metadata,
                    F::PktMark,
                    F::ConjId,
                    F::CtState,
                    F::CtZone,
                    F::CtMark,
                    F::CtLabel,
                    F::DpHash,
                    F::RecircId,
                ];
                all.iter().position(|f| *f == other).unwrap_or(0)
            }
        }
    }
}

/// A match folded into OVS's flow fields: (value, mask) per field, values already masked.
struct Flow {
    f: [(u128, u128); N_FIXED + 16],
    unknown: Vec<String>,
}

/// C's `%#x`: `0` for zero, `0x..` otherwise.
fn hx(v: u128) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

fn ones(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

impl Flow {
    fn get(&self, f: F) -> Option<(u128, u128)> {
        let (v, m) = self.f[f.index()];
        (m != 0).then_some((v, m))
    }

    fn exact(&self, f: F) -> Option<u128> {
        self.get(f).map(|(v, _)| v)
    }

    fn set(&mut self, f: F, v: u128, m: u128) {
        let e = &mut self.f[f.index()];
        e.0 = (e.0 & !m) | (v & m);
        e.1 |= m;
    }

    fn from_match(m: &Match) -> Flow {
        let mut flow = Flow {
            f: [(0, 0); N_FIXED + 16],
            unknown: Vec::new(),
        };
        for o in &m.fields {
            let len = o.value().len() as u32 * 8;
            let v = o.value_u128();
            let mask = o.mask_u128().unwrap_or(ones(len));
            flow.fold(o, v & mask, mask);
        }
        flow
    }

    fn fold(&mut self, o: &Oxm, v: u128, m: u128) {
        let id = o.field;
        let target = match (id.class, id.field) {
            (CLASS_BASIC, 0) => {
                // OpenFlow 1.1+ port numbers map to OVS's 16-bit ports.
                let p = v as u32;
                let p16 = if p >= 0xffff_ff00 { p & 0xffff } else { p };
                return self.set(F::InPort, u128::from(p16), 0xffff);
            }
            (CLASS_NXM0, 0) => F::InPort,
            (CLASS_BASIC, 2) => F::Metadata,
            (CLASS_BASIC, 3) | (CLASS_NXM0, 1) => F::DlDst,
            (CLASS_BASIC, 4) | (CLASS_NXM0, 2) => F::DlSrc,
            (CLASS_BASIC, 5) | (CLASS_NXM0, 3) => F::DlType,
            (CLASS_BASIC, 6) => {
                // OFPVID_PRESENT is the CFI bit of OVS's TCI.
                return self.set(
                    F::VlanTci,
                    v & 0x1fff,
                    (m & 0x1fff) | (0x1000 * u128::from(m & 0x1fff != 0)),
                );
            }
            (CLASS_BASIC, 7) => {
                return self.set(F::VlanTci, ((v & 7) << 13) | 0x1000, 0xe000 | 0x1000);
            }
            (CLASS_NXM0, 4) => F::VlanTci,
            (CLASS_BASIC, 8) => return self.set(F::NwTos, (v & 0x3f) << 2, (m & 0x3f) << 2),
            (CLASS_NXM0, 5) => return self.set(F::NwTos, v & 0xfc, m & 0xfc),
            (CLASS_BASIC, 9) | (CLASS_NXM1, 28) => return self.set(F::NwEcn, v & 3, m & 3),
            (CLASS_NXM1, 29) => F::NwTtl,
            (CLASS_BASIC, 10) | (CLASS_NXM0, 6) | (CLASS_BASIC, 21) | (CLASS_NXM0, 15) => {
                return self.set(F::NwProto, v & 0xff, m & 0xff);
            }
            (CLASS_BASIC, 11) | (CLASS_NXM0, 7) | (CLASS_BASIC, 22) | (CLASS_NXM0, 16) => F::NwSrc,
            (CLASS_BASIC, 12) | (CLASS_NXM0, 8) | (CLASS_BASIC, 23) | (CLASS_NXM0, 17) => F::NwDst,
            (CLASS_BASIC, 13 | 15 | 17) | (CLASS_NXM0, 9 | 11) => F::TpSrc,
            (CLASS_BASIC, 14 | 16 | 18) | (CLASS_NXM0, 10 | 12) => F::TpDst,
            // One-byte ICMP type/code live in OVS's 16-bit tp_src/tp_dst with a full mask.
            (CLASS_BASIC, 19 | 29) | (CLASS_NXM0, 13) | (CLASS_NXM1, 21) => {
                return self.set(F::TpSrc, v, 0xffff);
            }
            (CLASS_BASIC, 20 | 30) | (CLASS_NXM0, 14) | (CLASS_NXM1, 22) => {
                return self.set(F::TpDst, v, 0xffff);
            }
            (CLASS_BASIC, 24 | 32) | (CLASS_NXM1, 17 | 24) => F::ArpSha,
            (CLASS_BASIC, 25 | 33) | (CLASS_NXM1, 18 | 25) => F::ArpTha,
            (CLASS_BASIC, 26) | (CLASS_NXM1, 19) => F::Ipv6Src,
            (CLASS_BASIC, 27) | (CLASS_NXM1, 20) => F::Ipv6Dst,
            (CLASS_BASIC, 28) | (CLASS_NXM1, 27) => F::Ipv6Label,
            (CLASS_BASIC, 31) | (CLASS_NXM1, 23) => F::NdTarget,
            (CLASS_BASIC, 34) => F::MplsLabel,
            (CLASS_BASIC, 35) => F::MplsTc,
            (CLASS_BASIC, 36) => F::MplsBos,
            (CLASS_BASIC, 38) | (CLASS_NXM1, 16) => F::TunId,
            (CLASS_NXM1, n) if n < 16 => F::Reg(n),
            (CLASS_NXM1, 26) => F::NwFrag,
            (CLASS_NXM1, 30) => return self.unknown.push(format!("cookie={v:#x}")),
            (CLASS_NXM1, 31) => F::TunSrc,
            (CLASS_NXM1, 32) => F::TunDst,
            (CLASS_NXM1, 33) => F::PktMark,
            (CLASS_NXM1, 34) => F::TcpFlags,
            (CLASS_NXM1, 35) => F::DpHash,
            (CLASS_NXM1, 36) => F::RecircId,
            (CLASS_NXM1, 37) => F::ConjId,
            (CLASS_NXM1, 105) => F::CtState,
            (CLASS_NXM1, 106) => F::CtZone,
            (CLASS_NXM1, 107) => F::CtMark,
            (CLASS_NXM1, 108) => F::CtLabel,
            (CLASS_PKT_REGS, n) if n < 8 => {
                self.set(F::Reg(2 * n), v >> 32, m >> 32);
                return self.set(F::Reg(2 * n + 1), v & 0xffff_ffff, m & 0xffff_ffff);
            }
            (CLASS_EXPERIMENTER, 42) if id == crate::nxm::TCP_FLAGS => F::TcpFlags,
            _ => {
                let name = id.info().map_or_else(
                    || format!("oxm({:#06x}:{})", id.class, id.field),
                    |i| i.name.to_string(),
                );
                return self.unknown.push(match o.mask() {
                    Some(_) => format!("{name}={v:#x}/{m:#x}"),
                    None => format!("{name}={v:#x}"),
                });
            }
        };
        self.set(target, v, m);
    }
}

fn mac(v: u128) -> String {
    let b = v.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[10], b[11], b[12], b[13], b[14], b[15]
    )
}

fn put_eth(s: &mut String, name: &str, f: Option<(u128, u128)>) {
    if let Some((v, m)) = f {
        if m == ones(48) {
            let _ = write!(s, "{name}={},", mac(v));
        } else {
            let _ = write!(s, "{name}={}/{},", mac(v), mac(m));
        }
    }
}

fn put_ipv4(s: &mut String, name: &str, f: Option<(u128, u128)>) {
    if let Some((v, m)) = f {
        let _ = write!(s, "{name}={},", ipv4_masked(v as u32, m as u32));
    }
}

fn ipv4_masked(v: u32, m: u32) -> String {
    let a = Ipv4Addr::from(v);
    if m == u32::MAX {
        a.to_string()
    } else if m.leading_ones() + m.trailing_zeros() == 32 {
        format!("{a}/{}", m.leading_ones())
    } else {
        format!("{a}/{}", Ipv4Addr::from(m))
    }
}

fn ipv6_masked(v: u128, m: u128) -> String {
    let a = Ipv6Addr::from(v);
    if m == u128::MAX {
        a.to_string()
    } else if m.leading_ones() + m.trailing_zeros() == 128 {
        format!("{a}/{}", m.leading_ones())
    } else {
        format!("{a}/{}", Ipv6Addr::from(m))
    }
}

fn put_ipv6(s: &mut String, name: &str, f: Option<(u128, u128)>) {
    if let Some((v, m)) = f {
        let _ = write!(s, "{name}={},", ipv6_masked(v, m));
    }
}

/// OVS's `format_be16_masked`: decimal when exact, hex pair when masked.
fn put_u16_masked(s: &mut String, name: &str, f: Option<(u128, u128)>) {
    if let Some((v, m)) = f {
        if m == 0xffff {
            let _ = write!(s, "{name}={v},");
        } else {
            let _ = write!(s, "{name}={v:#x}/{m:#x},");
        }
    }
}

/// OVS's `format_uint32_masked` / `format_be64_masked`: hex, with a mask unless exact.
fn put_hex_masked(s: &mut String, name: &str, f: Option<(u128, u128)>, full: u128) {
    if let Some((v, m)) = f {
        let _ = write!(s, "{name}={}", hx(v));
        if m != full {
            let _ = write!(s, "/{}", hx(m));
        }
        s.push(',');
    }
}

const CT_STATE_NAMES: [&str; 8] = ["new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"];
const TCP_FLAG_NAMES: [&str; 12] = [
    "fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]",
];

/// OVS's `format_flags_masked`.
fn flags_masked(names: &[&str], v: u32, m: u32, max: u32) -> String {
    let name = |bit: u32| names.get(bit.trailing_zeros() as usize).copied();
    let mut s = String::new();
    if m == max {
        if v == 0 {
            return "0".into();
        }
        let mut bad = 0;
        let mut f = v;
        while f != 0 {
            let bit = f & f.wrapping_neg();
            match name(bit) {
                Some(n) => {
                    s.push_str(n);
                    s.push('|');
                }
                None => bad |= bit,
            }
            f &= !bit;
        }
        if bad != 0 {
            let _ = write!(s, "{bad:#x}|");
        }
        s.pop();
        return s;
    }
    if m == 0 {
        return "0/0".into();
    }
    let mut mm = m;
    while mm != 0 {
        let bit = mm & mm.wrapping_neg();
        s.push(if v & bit != 0 { '+' } else { '-' });
        s.push_str(name(bit).unwrap_or("[Unknown]"));
        mm &= !bit;
    }
    s
}

fn frag_text(v: u8, m: u8) -> Option<&'static str> {
    Some(match (v & m, m & 3) {
        (_, 0) => return None,
        (0, 3) => "no",
        (1, 3) => "first",
        (3, 3) => "later",
        (0, 1) => "no",
        (1, 1) => "yes",
        (0, 2) => "not_later",
        (2, 2) => "later",
        _ => "yes",
    })
}

/// Print `m` the way OVS's `match_format` does, `priority` first when it is not the default.
pub fn format_match(m: &Match, priority: Option<u16>) -> String {
    let flow = Flow::from_match(m);
    let mut s = String::new();
    if let Some(p) = priority.filter(|p| *p != DEFAULT_PRIORITY) {
        let _ = write!(s, "priority={p},");
    }
    put_hex_masked(&mut s, "pkt_mark", flow.get(F::PktMark), 0xffff_ffff);
    put_hex_masked(&mut s, "recirc_id", flow.get(F::RecircId), 0xffff_ffff);
    put_hex_masked(&mut s, "dp_hash", flow.get(F::DpHash), 0xffff_ffff);
    if let Some(v) = flow.exact(F::ConjId) {
        let _ = write!(s, "conj_id={v},");
    }
    if let Some((v, m)) = flow.get(F::CtState) {
        let _ = write!(
            s,
            "ct_state={},",
            flags_masked(&CT_STATE_NAMES, v as u32, (m as u32) & 0xff, 0xff)
        );
    }
    if let Some((v, m)) = flow.get(F::CtZone) {
        if m == 0xffff {
            let _ = write!(s, "ct_zone={v},");
        } else {
            let _ = write!(s, "ct_zone={v:#x}/{m:#x},");
        }
    }
    put_hex_masked(&mut s, "ct_mark", flow.get(F::CtMark), 0xffff_ffff);
    put_hex_masked(&mut s, "ct_label", flow.get(F::CtLabel), u128::MAX);

    let dl_type = flow.exact(F::DlType).map(|t| t as u16);
    let nw_proto = flow
        .exact(F::NwProto)
        .filter(|_| flow.get(F::NwProto).is_some_and(|(_, m)| m == 0xff));
    let (mut skip_type, mut skip_proto) = (false, false);
    if let Some(t) = dl_type {
        skip_type = true;
        let short = match t {
            0x0800 | 0x86dd => {
                let v6 = t == 0x86dd;
                let named = match nw_proto {
                    Some(1) if !v6 => Some("icmp"),
                    Some(2) if !v6 => Some("igmp"),
                    Some(6) => Some(if v6 { "tcp6" } else { "tcp" }),
                    Some(17) => Some(if v6 { "udp6" } else { "udp" }),
                    Some(132) => Some(if v6 { "sctp6" } else { "sctp" }),
                    Some(58) if v6 => Some("icmp6"),
                    _ => None,
                };
                skip_proto = named.is_some();
                Some(named.unwrap_or(if v6 { "ipv6" } else { "ip" }))
            }
            0x0806 => Some("arp"),
            0x8035 => Some("rarp"),
            0x8847 => Some("mpls"),
            0x8848 => Some("mplsm"),
            _ => None,
        };
        match short {
            Some(n) => {
                s.push_str(n);
                s.push(',');
            }
            None => skip_type = false,
        }
    }
    for r in 0..16 {
        put_hex_masked(&mut s, &format!("reg{r}"), flow.get(F::Reg(r)), 0xffff_ffff);
    }
    put_hex_masked(&mut s, "tun_id", flow.get(F::TunId), u128::from(u64::MAX));
    put_ipv4(&mut s, "tun_src", flow.get(F::TunSrc));
    put_ipv4(&mut s, "tun_dst", flow.get(F::TunDst));
    put_hex_masked(
        &mut s,
        "metadata",
        flow.get(F::Metadata),
        u128::from(u64::MAX),
    );
    if let Some(p) = flow.exact(F::InPort) {
        let _ = write!(s, "in_port={},", PortNo::from_u16(p as u16));
    }
    if let Some((v, m)) = flow.get(F::VlanTci) {
        let (vid_m, pcp_m, cfi) = (m & 0x0fff, m & 0xe000, m & 0x1000);
        if cfi != 0
            && v & 0x1000 != 0
            && (vid_m == 0 || vid_m == 0x0fff)
            && (pcp_m == 0 || pcp_m == 0xe000)
            && (vid_m | pcp_m) != 0
        {
            if vid_m != 0 {
                let _ = write!(s, "dl_vlan={},", v & 0x0fff);
            }
            if pcp_m != 0 {
                let _ = write!(s, "dl_vlan_pcp={},", (v >> 13) & 7);
            }
        } else if m == 0xffff {
            let _ = write!(s, "vlan_tci={v:#06x},");
        } else {
            let _ = write!(s, "vlan_tci={v:#06x}/{m:#06x},");
        }
    }
    put_eth(&mut s, "dl_src", flow.get(F::DlSrc));
    put_eth(&mut s, "dl_dst", flow.get(F::DlDst));
    if let Some(t) = dl_type.filter(|_| !skip_type) {
        let _ = write!(s, "dl_type={t:#06x},");
    }
    let is_arp = matches!(dl_type, Some(0x0806 | 0x8035));
    if dl_type == Some(0x86dd) {
        put_ipv6(&mut s, "ipv6_src", flow.get(F::Ipv6Src));
        put_ipv6(&mut s, "ipv6_dst", flow.get(F::Ipv6Dst));
        if let Some((v, m)) = flow.get(F::Ipv6Label) {
            if m == 0xfffff || m == 0xffff_ffff {
                let _ = write!(s, "ipv6_label={v:#07x},");
            } else {
                let _ = write!(s, "ipv6_label={v:#07x}/{m:#07x},");
            }
        }
    } else if is_arp {
        put_ipv4(&mut s, "arp_spa", flow.get(F::NwSrc));
        put_ipv4(&mut s, "arp_tpa", flow.get(F::NwDst));
    } else {
        put_ipv4(&mut s, "nw_src", flow.get(F::NwSrc));
        put_ipv4(&mut s, "nw_dst", flow.get(F::NwDst));
    }
    if let Some(p) = flow.exact(F::NwProto).filter(|_| !skip_proto) {
        let _ = write!(s, "{}={p},", if is_arp { "arp_op" } else { "nw_proto" });
    }
    if is_arp {
        put_eth(&mut s, "arp_sha", flow.get(F::ArpSha));
        put_eth(&mut s, "arp_tha", flow.get(F::ArpTha));
    }
    if let Some(v) = flow.get(F::NwTos).map(|(v, _)| v) {
        let _ = write!(s, "nw_tos={v},");
    }
    if let Some(v) = flow.get(F::NwEcn).map(|(v, _)| v) {
        let _ = write!(s, "nw_ecn={v},");
    }
    if let Some(v) = flow.exact(F::NwTtl) {
        let _ = write!(s, "nw_ttl={v},");
    }
    if let Some(v) = flow.exact(F::MplsLabel) {
        let _ = write!(s, "mpls_label={v},");
    }
    if let Some(v) = flow.exact(F::MplsTc) {
        let _ = write!(s, "mpls_tc={v},");
    }
    if let Some(v) = flow.exact(F::MplsBos) {
        let _ = write!(s, "mpls_bos={v},");
    }
    if let Some(t) = flow
        .get(F::NwFrag)
        .and_then(|(v, m)| frag_text(v as u8, m as u8))
    {
        let _ = write!(s, "nw_frag={t},");
    }
    let ip = matches!(dl_type, Some(0x0800 | 0x86dd));
    if dl_type == Some(0x0800) && nw_proto == Some(1) {
        put_u16_masked(&mut s, "icmp_type", flow.get(F::TpSrc));
        put_u16_masked(&mut s, "icmp_code", flow.get(F::TpDst));
    } else if dl_type == Some(0x86dd) && nw_proto == Some(58) {
        put_u16_masked(&mut s, "icmp_type", flow.get(F::TpSrc));
        put_u16_masked(&mut s, "icmp_code", flow.get(F::TpDst));
        put_ipv6(&mut s, "nd_target", flow.get(F::NdTarget));
        put_eth(&mut s, "nd_sll", flow.get(F::ArpSha));
        put_eth(&mut s, "nd_tll", flow.get(F::ArpTha));
    } else {
        put_u16_masked(&mut s, "tp_src", flow.get(F::TpSrc));
        put_u16_masked(&mut s, "tp_dst", flow.get(F::TpDst));
    }
    if let Some((v, m)) = flow.get(F::TcpFlags).filter(|_| ip && nw_proto == Some(6)) {
        let _ = write!(
            s,
            "tcp_flags={},",
            flags_masked(&TCP_FLAG_NAMES, v as u32, (m as u32) & 0xfff, 0xfff)
        );
    }
    for u in &flow.unknown {
        s.push_str(u);
        s.push(',');
    }
    if s.ends_with(',') {
        s.pop();
    }
    s
}

impl fmt::Display for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_match(self, None))
    }
}

/// OVS's canonical field name (`mf->name`) and value style, as used by `set_field`.
fn mf_name(id: FieldId) -> (String, ValueFormat) {
    let info = id.info();
    let fmt = info.map_or(ValueFormat::Hex, |i| i.format);
    let name = match (id.class, id.field) {
        (CLASS_BASIC, 0) => "in_port_oxm",
        (CLASS_BASIC | CLASS_NXM0, _) => match info.map(|i| i.name) {
            Some("dl_dst") => "eth_dst",
            Some("dl_src") => "eth_src",
            Some("dl_type") => "eth_type",
            Some("nw_src") => "ip_src",
            Some("nw_dst") => "ip_dst",
            Some("ip_dscp") => "ip_dscp",
            Some("nw_proto") => "nw_proto",
            Some(n) => n,
            None => "unknown",
        },
        _ => info.map_or("unknown", |i| i.name),
    };
    let fmt = match name {
        "eth_type" | "vlan_tci" | "ct_zone" => ValueFormat::Hex,
        _ => fmt,
    };
    (name.to_string(), fmt)
}

/// OVS's `ds_put_hex`: `0x` and the value without leading zeros, or `0`.
fn put_hex(s: &mut String, bytes: &[u8]) {
    let mut printed = false;
    for b in bytes {
        if *b != 0 || printed {
            if printed {
                let _ = write!(s, "{b:02x}");
            } else {
                let _ = write!(s, "{b:#x}");
            }
            printed = true;
        }
    }
    if !printed {
        s.push('0');
    }
}

/// OVS's `mf_format`: a field value (and mask) as `set_field` prints it.
fn mf_format(s: &mut String, id: FieldId, v: &[u8], m: Option<&[u8]>) {
    let (name, fmt) = mf_name(id);
    let n = v.iter().fold(0u128, |a, b| (a << 8) | u128::from(*b));
    let mn = m.map(|m| m.iter().fold(0u128, |a, b| (a << 8) | u128::from(*b)));
    if mn == Some(0) {
        s.push_str("ANY");
        return;
    }
    match (name.as_str(), fmt) {
        ("ct_state", _) => {
            s.push_str(&flags_masked(
                &CT_STATE_NAMES,
                n as u32,
                mn.map_or(0xff, |m| m as u32 & 0xff),
                0xff,
            ));
        }
        ("tcp_flags", _) => {
            s.push_str(&flags_masked(
                &TCP_FLAG_NAMES,
                n as u32,
                mn.map_or(0xfff, |m| m as u32 & 0xfff),
                0xfff,
            ));
        }
        (_, ValueFormat::Port) if mn.is_none() => {
            let p = if name == "in_port_oxm" {
                let p = n as u32;
                PortNo::from_u16(if p >= 0xffff_ff00 {
                    (p & 0xffff) as u16
                } else {
                    p as u16
                })
            } else {
                PortNo::from_u16(n as u16)
            };
            let _ = write!(s, "{p}");
        }
        (_, ValueFormat::Mac) => {
            s.push_str(&mac(n));
            if let Some(m) = mn {
                let _ = write!(s, "/{}", mac(m));
            }
        }
        (_, ValueFormat::Ipv4) => {
            s.push_str(&ipv4_masked(n as u32, mn.map_or(u32::MAX, |m| m as u32)))
        }
        (_, ValueFormat::Ipv6) => s.push_str(&ipv6_masked(n, mn.unwrap_or(u128::MAX))),
        (_, ValueFormat::Decimal | ValueFormat::Port) => {
            let _ = write!(s, "{n}");
            if let Some(m) = m {
                s.push('/');
                put_hex(s, m);
            }
        }
        (_, ValueFormat::Hex) => {
            put_hex(s, v);
            if let Some(m) = m {
                s.push('/');
                put_hex(s, m);
            }
        }
    }
}

/// OVS's `mf_format_subfield`: `NXM_NX_REG0[]`, `NXM_NX_REG0[5]`, `NXM_NX_REG0[0..15]`.
fn subfield(s: &mut String, field: NxmHeader, ofs: u16, n_bits: u16) {
    let id = field.field();
    match id.info() {
        Some(i) => s.push_str(i.nxm_name),
        None => s.push_str("<unknown>"),
    }
    let width = ovs_bits(id).unwrap_or(field.bits());
    if ofs == 0 && n_bits == width {
        s.push_str("[]");
    } else if n_bits == 1 {
        let _ = write!(s, "[{ofs}]");
    } else {
        // Decoding rejects zero-bit subfields, but a hand-built one still renders (as
        // `[ofs..ofs-1]`, the way OVS's signed arithmetic would) instead of overflowing.
        let last = i32::from(ofs) + i32::from(n_bits) - 1;
        let _ = write!(s, "[{ofs}..{last}]");
    }
}

/// Width of a field in OVS's meta-flow, which is narrower than its OXM encoding for some fields.
fn ovs_bits(id: FieldId) -> Option<u16> {
    Some(match (id.class, id.field) {
        (CLASS_BASIC, 6) => 12,
        (CLASS_BASIC, 7) | (CLASS_BASIC, 35) => 3,
        (CLASS_BASIC, 8) => 6,
        (CLASS_BASIC, 9) | (CLASS_NXM1, 28) => 2,
        (CLASS_BASIC, 28) | (CLASS_NXM1, 27) | (CLASS_BASIC, 34) => 20,
        (CLASS_BASIC, 36) => 1,
        (CLASS_BASIC, 37) => 24,
        (CLASS_NXM1, 34) => 12,
        (CLASS_NXM0, 0) => 16,
        _ => return id.bits(),
    })
}

fn sub(s: &mut String, sf: &Subfield) {
    subfield(s, sf.field, sf.ofs, sf.n_bits);
}

fn port_text(p: PortNo) -> String {
    match p.name() {
        Some(_) => p.to_string(),
        None => p.0.to_string(),
    }
}

fn reason_text(r: u8) -> String {
    match r {
        0 => "no_match".into(),
        1 => "action".into(),
        2 => "invalid_ttl".into(),
        3 => "action_set".into(),
        4 => "group".into(),
        5 => "packet_out".into(),
        n => n.to_string(),
    }
}

fn hex_dotted(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(".")
}

fn format_action(s: &mut String, a: &Action) {
    match a {
        Action::Output { port, max_len } => {
            if port.0 < 0xffff_ff00 {
                let _ = write!(s, "output:{}", port.0);
            } else {
                s.push_str(&port_text(*port));
                if *port == PortNo::CONTROLLER {
                    let _ = write!(s, ":{max_len}");
                }
            }
        }
        Action::CopyTtlOut => s.push_str("copy_ttl_out"),
        Action::CopyTtlIn => s.push_str("copy_ttl_in"),
        Action::SetMplsTtl(t) => {
            let _ = write!(s, "set_mpls_ttl({t})");
        }
        Action::DecMplsTtl => s.push_str("dec_mpls_ttl"),
        Action::PushVlan(e) => {
            let _ = write!(s, "push_vlan:{e:#06x}");
        }
        Action::PopVlan => s.push_str("pop_vlan"),
        Action::PushMpls(e) => {
            let _ = write!(s, "push_mpls:{e:#06x}");
        }
        Action::PopMpls(e) => {
            let _ = write!(s, "pop_mpls:{e:#06x}");
        }
        Action::SetQueue(q) => {
            let _ = write!(s, "set_queue:{q}");
        }
        Action::Group(g) => {
            let _ = write!(s, "group:{g}");
        }
        Action::SetNwTtl(t) => {
            let _ = write!(s, "mod_nw_ttl:{t}");
        }
        Action::DecNwTtl | Action::DecTtl => s.push_str("dec_ttl"),
        Action::SetField(o) | Action::RegLoad2(o) => {
            s.push_str("set_field:");
            let v = o.value().as_slice();
            let m = o
                .mask()
                .map(|m| m.as_slice())
                .filter(|m| !m.iter().all(|b| *b == 0xff));
            // OVS stores set-field values masked.
            let masked: Vec<u8> = match m {
                Some(m) => v.iter().zip(m).map(|(a, b)| a & b).collect(),
                None => v.to_vec(),
            };
            mf_format(s, o.field, &masked, m);
            let _ = write!(s, "->{}", mf_name(o.field).0);
        }
        Action::PushPbb(e) => {
            let _ = write!(s, "push_pbb:{e:#06x}");
        }
        Action::PopPbb => s.push_str("pop_pbb"),
        Action::Resubmit { in_port, table, ct } => {
            // OVS prints by value, not by which of the three resubmit encodings was used.
            let port = PortNo::from_u16(*in_port);
            let table = table.unwrap_or(255);
            if port != PortNo::IN_PORT && table == 255 && !ct {
                let _ = write!(s, "resubmit:{}", port_text(port));
            } else {
                s.push_str("resubmit(");
                if port != PortNo::IN_PORT {
                    s.push_str(&port_text(port));
                }
                s.push(',');
                if table != 255 {
                    let _ = write!(s, "{table}");
                }
                if *ct {
                    s.push_str(",ct");
                }
                s.push(')');
            }
        }
        Action::RegLoad { dst, value } => {
            let _ = write!(s, "load:{}->", hx(u128::from(*value)));
            sub(s, dst);
        }
        Action::RegMove { src, dst } => {
            s.push_str("move:");
            sub(s, src);
            s.push_str("->");
            sub(s, dst);
        }
        Action::OutputReg { src, max_len } => {
            if *max_len == u16::MAX {
                s.push_str("output:");
                sub(s, src);
            } else {
                s.push_str("output(port=");
                sub(s, src);
                let _ = write!(s, ",max_len={max_len})");
            }
        }
        Action::Ct(ct) => {
            s.push_str("ct(");
            if ct.flags & 1 != 0 {
                s.push_str("commit,");
            }
            if ct.flags & 2 != 0 {
                s.push_str("force,");
            }
            if ct.recirc_table != 255 {
                let _ = write!(s, "table={},", ct.recirc_table);
            }
            match ct.zone {
                CtZone::Field(sf) => {
                    s.push_str("zone=");
                    sub(s, &sf);
                    s.push(',');
                }
                CtZone::Imm(0) => {}
                CtZone::Imm(z) => {
                    let _ = write!(s, "zone={z},");
                }
            }
            let mut rest = &ct.actions[..];
            if let Some(Action::Nat(_)) = rest.first() {
                format_action(s, &rest[0]);
                s.push(',');
                rest = &rest[1..];
            }
            if !rest.is_empty() {
                s.push_str("exec(");
                format_actions(s, rest);
                s.push_str("),");
            }
            match ct.alg {
                0 => {}
                21 => s.push_str("alg=ftp,"),
                69 => s.push_str("alg=tftp,"),
                n => {
                    let _ = write!(s, "alg={n},");
                }
            }
            if s.ends_with(',') {
                s.pop();
            }
            s.push(')');
        }
        Action::CtClear => s.push_str("ct_clear"),
        Action::Nat(n) => {
            s.push_str("nat");
            if n.flags & 3 != 0 {
                s.push('(');
                s.push_str(if n.flags & 1 != 0 { "src" } else { "dst" });
                let r = &n.range;
                let proto_min = r.proto_min.unwrap_or(0);
                if let Some(min) = r.ipv4_min {
                    let _ = write!(s, "={min}");
                    if let Some(max) = r.ipv4_max.filter(|m| *m != min && !m.is_unspecified()) {
                        let _ = write!(s, "-{max}");
                    }
                } else if let Some(min) = r.ipv6_min {
                    let br = |a: Ipv6Addr| {
                        if proto_min != 0 {
                            format!("[{a}]")
                        } else {
                            a.to_string()
                        }
                    };
                    let _ = write!(s, "={}", br(min));
                    if let Some(max) = r.ipv6_max.filter(|m| *m != min && !m.is_unspecified()) {
                        let _ = write!(s, "-{}", br(max));
                    }
                }
                if (r.ipv4_min.is_some() || r.ipv6_min.is_some()) && proto_min != 0 {
                    let _ = write!(s, ":{proto_min}");
                    if let Some(max) = r.proto_max.filter(|m| *m != 0 && *m != proto_min) {
                        let _ = write!(s, "-{max}");
                    }
                }
                s.push(',');
                if n.flags & 4 != 0 {
                    s.push_str("persistent,");
                }
                if n.flags & 8 != 0 {
                    s.push_str("hash,");
                }
                if n.flags & 16 != 0 {
                    s.push_str("random,");
                }
                s.pop();
                s.push(')');
            }
        }
        Action::Conjunction(c) => {
            let _ = write!(
                s,
                "conjunction({},{}/{})",
                c.id,
                u16::from(c.clause) + 1,
                c.n_clauses
            );
        }
        Action::Learn(l) => format_learn(s, l),
        Action::Note(n) => {
            let _ = write!(s, "note:{}", hex_dotted(n));
        }
        Action::DecTtlCntIds(ids) => {
            s.push_str("dec_ttl(");
            s.push_str(&ids.iter().map(u16::to_string).collect::<Vec<_>>().join(","));
            s.push(')');
        }
        Action::Controller {
            max_len,
            controller_id,
            reason,
        } => format_controller(s, *max_len, *controller_id, *reason, None, false, None),
        Action::Controller2(c) => format_controller(
            s,
            c.max_len().unwrap_or(u16::MAX),
            c.controller_id().unwrap_or(0),
            c.reason().unwrap_or(1),
            c.userdata(),
            c.pause(),
            c.meter_id(),
        ),
        Action::FinTimeout { idle, hard } => {
            s.push_str("fin_timeout(");
            if *idle != 0 {
                let _ = write!(s, "idle_timeout={idle},");
            }
            if *hard != 0 {
                let _ = write!(s, "hard_timeout={hard},");
            }
            if s.ends_with(',') {
                s.pop();
            }
            s.push(')');
        }
        Action::SetTunnel(t) => {
            let _ = write!(s, "set_tunnel:{t:#x}");
        }
        Action::SetTunnel64(t) => {
            let _ = write!(s, "set_tunnel64:{t:#x}");
        }
        Action::PopQueue => s.push_str("pop_queue"),
        Action::Exit => s.push_str("exit"),
        Action::OutputTrunc { port, max_len } => {
            let _ = write!(
                s,
                "output(port={},max_len={max_len})",
                port_text(PortNo::from_u16(*port))
            );
        }
        Action::Sample(x) => {
            let _ = write!(
                s,
                "sample(probability={},collector_set_id={},obs_domain_id={},obs_point_id={}",
                x.probability, x.collector_set_id, x.obs_domain_id, x.obs_point_id
            );
            if x.subtype != 29 && x.sampling_port != 0 && x.sampling_port != 0xffff {
                let _ = write!(
                    s,
                    ",sampling_port={}",
                    port_text(PortNo::from_u16(x.sampling_port))
                );
            }
            match x.direction {
                1 => s.push_str(",ingress"),
                2 => s.push_str(",egress"),
                _ => {}
            }
            s.push(')');
        }
        Action::Multipath(m) => {
            let _ = write!(
                s,
                "multipath({},{},{},{},{},",
                hash_fields(m.fields),
                m.basis,
                match m.algorithm {
                    0 => "modulo_n".to_string(),
                    1 => "hash_threshold".to_string(),
                    2 => "hrw".to_string(),
                    3 => "iter_hash".to_string(),
                    n => n.to_string(),
                },
                u32::from(m.max_link) + 1,
                m.arg
            );
            sub(s, &m.dst);
            s.push(')');
        }
        Action::Bundle(b) => {
            let _ = write!(
                s,
                "{}({},{},{},{},",
                if b.dst.is_some() {
                    "bundle_load"
                } else {
                    "bundle"
                },
                hash_fields(b.fields),
                b.basis,
                match b.algorithm {
                    0 => "active_backup".to_string(),
                    1 => "hrw".to_string(),
                    n => n.to_string(),
                },
                if b.member_type == 0x0000_0002 {
                    "ofport".to_string()
                } else {
                    format!("{:#x}", b.member_type)
                }
            );
            if let Some(d) = &b.dst {
                sub(s, d);
                s.push(',');
            }
            s.push_str("members:");
            s.push_str(
                &b.members
                    .iter()
                    .map(|m| port_text(PortNo::from_u16(*m)))
                    .collect::<Vec<_>>()
                    .join(","),
            );
            s.push(')');
        }
        Action::Clone(actions) => {
            s.push_str("clone(");
            format_actions(s, actions);
            s.push(')');
        }
        Action::CheckPktLarger { pkt_len, dst } => {
            let _ = write!(s, "check_pkt_larger({pkt_len})->");
            sub(s, dst);
        }
        Action::StackPush(sf) => {
            s.push_str("push:");
            sub(s, sf);
        }
        Action::StackPop(sf) => {
            s.push_str("pop:");
            sub(s, sf);
        }
        Action::Experimenter { experimenter, data } => {
            if *experimenter == NX_EXPERIMENTER && data.len() >= 2 {
                let _ = write!(
                    s,
                    "experimenter(nicira,subtype={})",
                    u16::from_be_bytes([data[0], data[1]])
                );
            } else {
                let _ = write!(s, "experimenter({experimenter:#x},{})", hex_dotted(data));
            }
        }
        Action::Unknown { kind, .. } => {
            let _ = write!(s, "unknown_action({kind})");
        }
    }
}

/// `NX_HASH_FIELDS_*` names.
fn hash_fields(f: u16) -> String {
    match f {
        0 => "eth_src".into(),
        1 => "symmetric_l4".into(),
        2 => "symmetric_l3l4".into(),
        3 => "symmetric_l3l4+udp".into(),
        4 => "nw_src".into(),
        5 => "nw_dst".into(),
        6 => "symmetric_l3".into(),
        n => n.to_string(),
    }
}

fn format_controller(
    s: &mut String,
    max_len: u16,
    id: u16,
    reason: u8,
    userdata: Option<&[u8]>,
    pause: bool,
    meter: Option<u32>,
) {
    let meter = meter.filter(|m| *m != u32::MAX);
    if reason == 1 && id == 0 && userdata.is_none() && !pause && meter.is_none() {
        let _ = write!(s, "CONTROLLER:{max_len}");
        return;
    }
    s.push_str("controller(");
    if reason != 1 {
        let _ = write!(s, "reason={},", reason_text(reason));
    }
    if max_len != u16::MAX {
        let _ = write!(s, "max_len={max_len},");
    }
    if id != 0 {
        let _ = write!(s, "id={id},");
    }
    if let Some(u) = userdata.filter(|u| !u.is_empty()) {
        let _ = write!(s, "userdata={},", hex_dotted(u));
    }
    if pause {
        s.push_str("pause,");
    }
    if let Some(m) = meter {
        let _ = write!(s, "meter_id={m},");
    }
    if s.ends_with(',') {
        s.pop();
    }
    s.push(')');
}

fn format_learn(s: &mut String, l: &crate::action::Learn) {
    let _ = write!(s, "learn(table={},", l.table_id);
    if l.idle_timeout != 0 {
        let _ = write!(s, "idle_timeout={},", l.idle_timeout);
    }
    if l.hard_timeout != 0 {
        let _ = write!(s, "hard_timeout={},", l.hard_timeout);
    }
    if l.fin_idle_timeout != 0 {
        let _ = write!(s, "fin_idle_timeout={},", l.fin_idle_timeout);
    }
    if l.fin_hard_timeout != 0 {
        let _ = write!(s, "fin_hard_timeout={},", l.fin_hard_timeout);
    }
    if l.priority != DEFAULT_PRIORITY {
        let _ = write!(s, "priority={},", l.priority);
    }
    if l.flags & 1 != 0 {
        s.push_str("send_flow_rem,");
    }
    if l.flags & 2 != 0 {
        s.push_str("delete_learned,");
    }
    if l.cookie != 0 {
        let _ = write!(s, "cookie={:#x},", l.cookie);
    }
    if l.limit != 0 {
        let _ = write!(s, "limit={},", l.limit);
    }
    if let Some(r) = l.result_dst {
        s.push_str("result_dst=");
        sub(s, &r);
        s.push(',');
    }
    for spec in &l.specs {
        match (&spec.src, spec.dst) {
            (
                LearnSrc::Field { field: sf, ofs: so },
                LearnDst::Match {
                    field: df,
                    ofs: dofs,
                },
            ) => {
                subfield(s, df, dofs, spec.n_bits);
                if sf.field() != df.field() || *so != dofs {
                    s.push('=');
                    subfield(s, *sf, *so, spec.n_bits);
                }
            }
            (LearnSrc::Imm(v), LearnDst::Match { field, ofs }) => {
                let id = field.field();
                let whole = ofs == 0 && Some(spec.n_bits) == ovs_bits(id);
                if whole {
                    let (name, _) = mf_name(id);
                    let width = usize::from(id.info().map_or(0, |i| i.len));
                    let mut val = String::new();
                    mf_format(&mut val, id, &fit(v, width), None);
                    let _ = write!(s, "{name}={val}");
                } else {
                    subfield(s, field, ofs, spec.n_bits);
                    s.push('=');
                    put_hex(s, v);
                }
            }
            (src, LearnDst::Load { field, ofs }) => {
                s.push_str("load:");
                match src {
                    LearnSrc::Field { field: sf, ofs: so } => subfield(s, *sf, *so, spec.n_bits),
                    LearnSrc::Imm(v) => put_hex(s, v),
                }
                s.push_str("->");
                subfield(s, field, ofs, spec.n_bits);
            }
            (LearnSrc::Field { field, ofs }, LearnDst::Output) => {
                s.push_str("output:");
                subfield(s, *field, *ofs, spec.n_bits);
            }
            (LearnSrc::Imm(v), LearnDst::Output) => {
                s.push_str("output:");
                put_hex(s, v);
            }
        }
        s.push(',');
    }
    if s.ends_with(',') {
        s.pop();
    }
    s.push(')');
}

/// Right-align `v` into `width` bytes.
fn fit(v: &[u8], width: usize) -> Vec<u8> {
    let mut out = vec![0u8; width];
    let n = v.len().min(width);
    out[width - n..].copy_from_slice(&v[v.len() - n..]);
    out
}

/// Format an action list as `ofpacts_format` does (`drop` when empty).
pub fn format_actions(s: &mut String, actions: &[Action]) {
    for (n, a) in actions.iter().enumerate() {
        if n > 0 {
            s.push(',');
        }
        format_action(s, a);
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        format_action(&mut s, self);
        f.write_str(&s)
    }
}

fn format_instruction(s: &mut String, i: &Instruction) {
    match i {
        Instruction::GotoTable(t) => {
            let _ = write!(s, "goto_table:{t}");
        }
        Instruction::WriteMetadata { metadata, mask } => {
            let _ = write!(s, "write_metadata:{}", hx(u128::from(*metadata)));
            if *mask != u64::MAX {
                let _ = write!(s, "/{}", hx(u128::from(*mask)));
            }
        }
        Instruction::WriteActions(a) => {
            s.push_str("write_actions(");
            format_actions(s, a);
            s.push(')');
        }
        Instruction::ApplyActions(a) => format_actions(s, a),
        Instruction::ClearActions => s.push_str("clear_actions"),
        Instruction::Meter(m) => {
            let _ = write!(s, "meter:{m}");
        }
        Instruction::Experimenter { experimenter, .. } => {
            let _ = write!(s, "experimenter_instruction({experimenter:#x})");
        }
        Instruction::Unknown { kind, .. } => {
            let _ = write!(s, "unknown_instruction({kind})");
        }
    }
}

impl fmt::Display for Instruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        format_instruction(&mut s, self);
        f.write_str(&s)
    }
}

/// Format instructions as OVS prints a flow's `actions=`: in OVS's fixed instruction order
/// (meter, apply, clear, write actions, write metadata, goto), `drop` when nothing remains.
pub fn format_instructions(s: &mut String, ins: &[Instruction]) {
    let rank = |i: &Instruction| match i {
        Instruction::Meter(_) => 0,
        Instruction::ApplyActions(_) => 1,
        Instruction::ClearActions => 2,
        Instruction::WriteActions(_) => 3,
        Instruction::WriteMetadata { .. } => 4,
        Instruction::GotoTable(_) => 5,
        _ => 6,
    };
    let mut sorted: Vec<&Instruction> = ins
        .iter()
        .filter(|i| !matches!(i, Instruction::ApplyActions(a) if a.is_empty()))
        .collect();
    sorted.sort_by_key(|i| rank(i));
    if sorted.is_empty() {
        s.push_str("drop");
        return;
    }
    for (n, i) in sorted.iter().enumerate() {
        if n > 0 {
            s.push(',');
        }
        format_instruction(s, i);
    }
}

fn flow_flags(s: &mut String, flags: u16, sep: &str) {
    for (bit, name) in [
        (1, "send_flow_rem"),
        (2, "check_overlap"),
        (4, "reset_counts"),
        (8, "no_packet_counts"),
        (16, "no_byte_counts"),
    ] {
        if flags & bit != 0 {
            s.push_str(name);
            s.push_str(sep);
        }
    }
}

impl fmt::Display for FlowMod {
    /// The `ovs-ofctl ofp-print` body of a flow mod, e.g.
    /// `ADD table:1 priority=100,tcp,in_port=3 cookie:0x5 actions=output:2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        s.push_str(match self.command {
            FlowModCommand::Add => "ADD",
            FlowModCommand::Modify => "MOD",
            FlowModCommand::ModifyStrict => "MOD_STRICT",
            FlowModCommand::Delete => "DEL",
            FlowModCommand::DeleteStrict => "DEL_STRICT",
            FlowModCommand::Unknown(_) => "***unknown command***",
        });
        s.push(' ');
        if self.table_id != 0 {
            let _ = write!(s, "table:{} ", self.table_id);
        }
        s.push_str(&format_match(&self.matching, Some(self.priority)));
        if !s.ends_with(' ') {
            s.push(' ');
        }
        // OVS ignores the cookie mask of an ADD and the new cookie of the other commands.
        if self.command == FlowModCommand::Add {
            if self.cookie != 0 && self.cookie != u64::MAX {
                let _ = write!(s, "cookie:{:#x} ", self.cookie);
            }
        } else if self.cookie_mask != 0 {
            let _ = write!(s, "cookie:{:#x}/{:#x} ", self.cookie, self.cookie_mask);
        }
        if self.idle_timeout != 0 {
            let _ = write!(s, "idle:{} ", self.idle_timeout);
        }
        if self.hard_timeout != 0 {
            let _ = write!(s, "hard:{} ", self.hard_timeout);
        }
        if self.buffer_id != OFP_NO_BUFFER {
            let _ = write!(s, "buf:{:#x} ", self.buffer_id);
        }
        if self.out_port != OFPP_ANY {
            let _ = write!(s, "out_port:{} ", port_text(PortNo(self.out_port)));
        }
        flow_flags(&mut s, self.flags, " ");
        s.push_str("actions=");
        format_instructions(&mut s, &self.instructions);
        f.write_str(&s)
    }
}

/// OVS's `ofp_print_duration`: whole milliseconds print with exactly 3 decimals (OVS keeps
/// millisecond precision, so dumps line up), finer values with as many as needed.
fn duration(s: &mut String, sec: u32, nsec: u32) {
    let _ = write!(s, "{sec}");
    if nsec > 0 {
        if nsec.is_multiple_of(1_000_000) {
            let _ = write!(s, ".{:03}", nsec / 1_000_000);
        } else {
            let frac = format!("{nsec:09}");
            let _ = write!(s, ".{}", frac.trim_end_matches('0'));
        }
    }
    s.push('s');
}

impl fmt::Display for FlowStats {
    /// One `ovs-ofctl dump-flows` line, e.g.
    /// ` cookie=0x0, duration=1.500s, table=0, n_packets=0, n_bytes=0, priority=0 actions=NORMAL`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        let _ = write!(s, " cookie={:#x}, duration=", self.cookie);
        duration(&mut s, self.duration_sec, self.duration_nsec);
        let _ = write!(
            s,
            ", table={}, n_packets={}, n_bytes={}, ",
            self.table_id, self.packet_count, self.byte_count
        );
        if self.idle_timeout != 0 {
            let _ = write!(s, "idle_timeout={}, ", self.idle_timeout);
        }
        if self.hard_timeout != 0 {
            let _ = write!(s, "hard_timeout={}, ", self.hard_timeout);
        }
        flow_flags(&mut s, self.flags, " ");
        s.push_str(&format_match(&self.matching, Some(self.priority)));
        if !s.ends_with(' ') {
            s.push(' ');
        }
        s.push_str("actions=");
        format_instructions(&mut s, &self.instructions);
        f.write_str(&s)
    }
}

impl fmt::Display for GroupMod {
    /// The `ovs-ofctl ofp-print` body of a group mod, e.g.
    /// `ADD group_id=5,type=select,bucket=actions=output:1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        let _ = write!(s, "{} group_id={}", self.command, self.group_id);
        let _ = write!(
            s,
            ",type={}",
            match self.group_type {
                GroupType::Unknown(n) => format!("{n}"),
                t => t.to_string(),
            }
        );
        for b in &self.buckets {
            s.push_str(",bucket=");
            let default_weight = if self.group_type == GroupType::Select {
                1
            } else {
                0
            };
            if b.weight != default_weight {
                let _ = write!(s, "weight:{},", b.weight);
            }
            if b.watch_port != OFPP_ANY {
                // OVS keeps ports as 16 bits: an unnamed reserved-range port prints folded.
                let watch = match PortNo(b.watch_port) {
                    p if p.name().is_none() && p.0 >= 0xffff_ff00 => PortNo(p.0 - 0xffff_0000),
                    p => p,
                };
                let _ = write!(s, "watch_port:{},", port_text(watch));
            }
            if b.watch_group != OFPG_ANY {
                let _ = write!(s, "watch_group:{},", b.watch_group);
            }
            s.push_str("actions=");
            if b.actions.is_empty() {
                s.push_str("drop");
            } else {
                format_actions(&mut s, &b.actions);
            }
        }
        f.write_str(&s)
    }
}
