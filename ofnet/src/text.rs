//! Flows and groups in `ovs-ofctl -O OpenFlow13 dump-flows` / `dump-groups` syntax, without
//! cookies and counters: `table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.2
//! actions=write_metadata:0xa/0xfffe,goto_table:5`.
//!
//! Contract: for every flow this crate builds, the text equals what Open vSwitch prints for it
//! (field order, shorthands such as `ip`/`tcp`/`arp`, hex and CIDR forms), so golden lists can
//! be compared with a real bridge's dump. Only the fields and actions the pipelines declare are
//! covered; anything else renders as `?<name>` so a gap shows in a golden diff instead of
//! passing silently.

use ofctrl::{Flow, Group};
use ofproto::action::Action;
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::nxm;
use ofproto::oxm::{FieldId, Oxm};
use ofproto::port::PortNo;
use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

/// One flow as a `dump-flows` line (normalized: no cookie, no counters).
pub fn flow(f: &Flow) -> String {
    let mut s = format!("table={}, priority={}", f.key.table, f.key.priority);
    let m = matches(&f.key.matches);
    if !m.is_empty() {
        s.push(',');
        s.push_str(&m);
    }
    s.push_str(" actions=");
    s.push_str(&instructions(&f.instructions));
    s
}

/// Flows sorted as [`sorted`] does, one line each.
pub fn flows<'a>(fs: impl IntoIterator<Item = &'a Flow>) -> Vec<String> {
    sorted(fs.into_iter().map(flow).collect())
}

/// Lines in a stable order (table, then descending priority, then text), so two listings of
/// the same flows compare equal however they were produced.
pub fn sorted(mut lines: Vec<String>) -> Vec<String> {
    fn key(l: &str) -> (u32, std::cmp::Reverse<u32>, String) {
        let num = |name: &str| -> u32 {
            l.split([',', ' '])
                .find_map(|p| p.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (
            num("table="),
            std::cmp::Reverse(num("priority=")),
            l.to_string(),
        )
    }
    lines.sort_by_cached_key(|l| key(l));
    lines
}

/// One group as a `dump-groups` line.
pub fn group(g: &Group) -> String {
    let select = g.group_type == ofproto::group::GroupType::Select;
    let mut s = format!(
        "group_id={},type={}",
        g.id,
        if select { "select" } else { "all" }
    );
    for b in &g.buckets {
        s.push_str(",bucket=");
        if select {
            let _ = write!(s, "weight:{},", b.weight);
        }
        s.push_str("actions=");
        s.push_str(&actions(&b.actions));
    }
    s
}

/// The conntrack fields OVS prints before the protocol shorthand, in its order.
const CT_FIELDS: [FieldId; 9] = [
    nxm::CONJ_ID,
    nxm::CT_STATE,
    nxm::CT_ZONE,
    nxm::CT_MARK,
    nxm::CT_LABEL,
    nxm::CT_NW_DST,
    nxm::CT_IPV6_DST,
    nxm::CT_NW_PROTO,
    nxm::CT_TP_DST,
];

fn get(m: &Match, id: FieldId) -> Option<&Oxm> {
    m.fields.iter().find(|f| f.field == id)
}

fn u(o: &Oxm) -> u128 {
    o.value_u128()
}

/// The match part, in Open vSwitch's order.
pub fn matches(m: &Match) -> String {
    let mut out: Vec<String> = Vec::new();
    let eth_type = get(m, FieldId::ETH_TYPE).map(|o| u(o) as u16);
    let proto = get(m, FieldId::IP_PROTO).map(|o| u(o) as u8);
    // The protocol shorthand, and whether it already says the IP protocol.
    let (shorthand, proto_shown) = match (eth_type, proto) {
        (Some(0x0800), Some(1)) => (Some("icmp"), true),
        (Some(0x0800), Some(6)) => (Some("tcp"), true),
        (Some(0x0800), Some(17)) => (Some("udp"), true),
        (Some(0x0800), _) => (Some("ip"), false),
        (Some(0x86dd), Some(58)) => (Some("icmp6"), true),
        (Some(0x86dd), Some(6)) => (Some("tcp6"), true),
        (Some(0x86dd), Some(17)) => (Some("udp6"), true),
        (Some(0x86dd), _) => (Some("ipv6"), false),
        (Some(0x0806), _) => (Some("arp"), false),
        _ => (None, false),
    };
    let type_shown = shorthand.is_some();
    if let Some(o) = get(m, nxm::CONJ_ID) {
        out.push(format!("conj_id={}", u(o)));
    }
    for f in [nxm::CT_STATE, nxm::CT_ZONE, nxm::CT_MARK] {
        if let Some(o) = get(m, f) {
            let one = Match {
                fields: vec![o.clone()],
            };
            let text = ofproto::format::format_match(&one, None);
            out.push(text.trim_end_matches(',').to_string());
        }
    }
    if let Some(o) = get(m, nxm::CT_LABEL) {
        out.push(format!("ct_label={}", hex_masked(o)));
    }
    if let Some(o) = get(m, nxm::CT_NW_DST) {
        out.push(format!("ct_nw_dst={}", ipv4_masked(o)));
    }
    if let Some(o) = get(m, nxm::CT_IPV6_DST) {
        out.push(format!("ct_ipv6_dst={}", ipv6_masked(o)));
    }
    if let Some(o) = get(m, nxm::CT_NW_PROTO) {
        out.push(format!("ct_nw_proto={}", u(o)));
    }
    if let Some(o) = get(m, nxm::CT_TP_DST) {
        out.push(format!("ct_tp_dst={}", u(o)));
    }
    out.extend(shorthand.map(String::from));
    for n in 0..8 {
        if let Some(o) = get(m, nxm::reg(n)) {
            out.push(format!("reg{n}={}", hex_masked(o)));
        }
    }
    for o in &m.fields {
        if o.field == FieldId::TUNNEL_ID {
            out.push(format!("tun_id={}", hex_masked(o)));
        }
    }
    if let Some(o) = get(m, FieldId::METADATA) {
        out.push(format!("metadata={}", hex_masked(o)));
    }
    if let Some(o) = get(m, FieldId::IN_PORT) {
        out.push(format!("in_port={}", port(u(o) as u32)));
    }
    if let Some(o) = get(m, FieldId::VLAN_VID) {
        match o.mask() {
            None if u(o) & 0x1000 != 0 => out.push(format!("dl_vlan={}", u(o) & 0xfff)),
            _ => out.push(format!("vlan_tci={}", hex_masked(o))),
        }
    }
    if let Some(o) = get(m, FieldId::ETH_SRC) {
        out.push(format!("dl_src={}", mac_masked(o)));
    }
    if let Some(o) = get(m, FieldId::ETH_DST) {
        out.push(format!("dl_dst={}", mac_masked(o)));
    }
    if !type_shown && let Some(t) = eth_type {
        out.push(format!("dl_type={t:#06x}"));
    }
    for (id, name) in [
        (FieldId::IPV6_SRC, "ipv6_src"),
        (FieldId::IPV6_DST, "ipv6_dst"),
    ] {
        if let Some(o) = get(m, id) {
            out.push(format!("{name}={}", ipv6_masked(o)));
        }
    }
    for (id, name) in [
        (FieldId::IPV4_SRC, "nw_src"),
        (FieldId::IPV4_DST, "nw_dst"),
        (FieldId::ARP_SPA, "arp_spa"),
        (FieldId::ARP_TPA, "arp_tpa"),
    ] {
        if let Some(o) = get(m, id) {
            out.push(format!("{name}={}", ipv4_masked(o)));
        }
    }
    if let Some(o) = get(m, FieldId::ARP_OP) {
        out.push(format!("arp_op={}", u(o)));
    }
    if let (Some(p), false) = (proto, proto_shown) {
        out.push(format!("nw_proto={p}"));
    }
    for (id, name) in [(FieldId::ARP_SHA, "arp_sha"), (FieldId::ARP_THA, "arp_tha")] {
        if let Some(o) = get(m, id) {
            out.push(format!("{name}={}", mac_masked(o)));
        }
    }
    if let Some(o) = get(m, FieldId::IP_DSCP) {
        out.push(format!("nw_tos={}", u(o) << 2));
    }
    if let Some(o) = get(m, FieldId::ICMPV6_TYPE) {
        out.push(format!("icmp_type={}", u(o)));
    }
    if let Some(o) = get(m, FieldId::IPV6_ND_TARGET) {
        out.push(format!("nd_target={}", ipv6_masked(o)));
    }
    for (ids, name) in [
        ([FieldId::TCP_SRC, FieldId::UDP_SRC], "tp_src"),
        ([FieldId::TCP_DST, FieldId::UDP_DST], "tp_dst"),
    ] {
        if let Some(o) = ids.iter().find_map(|id| get(m, *id)) {
            match o.mask().map(|m| m.to_u128() as u16) {
                Some(mask) if mask != 0xffff => {
                    out.push(format!("{name}={:#x}/{mask:#x}", u(o)));
                }
                _ => out.push(format!("{name}={}", u(o))),
            }
        }
    }
    if let Some(o) = get(m, nxm::TCP_FLAGS) {
        out.push(format!("tcp_flags={}", tcp_flags(o)));
    }
    for o in &m.fields {
        let known = [
            FieldId::ETH_TYPE,
            FieldId::IP_PROTO,
            FieldId::TUNNEL_ID,
            FieldId::METADATA,
            FieldId::IN_PORT,
            FieldId::VLAN_VID,
            FieldId::ETH_SRC,
            FieldId::ETH_DST,
            FieldId::IPV6_SRC,
            FieldId::IPV6_DST,
            FieldId::IPV4_SRC,
            FieldId::IPV4_DST,
            FieldId::ARP_SPA,
            FieldId::ARP_TPA,
            FieldId::ARP_SHA,
            FieldId::ARP_THA,
            FieldId::ICMPV6_TYPE,
            FieldId::IPV6_ND_TARGET,
            FieldId::ARP_OP,
            FieldId::IP_DSCP,
            FieldId::TCP_SRC,
            FieldId::UDP_SRC,
            FieldId::TCP_DST,
            FieldId::UDP_DST,
            nxm::TCP_FLAGS,
        ];
        let reg = (0..8).any(|n| o.field == nxm::reg(n));
        if !known.contains(&o.field) && !CT_FIELDS.contains(&o.field) && !reg {
            out.push(format!("?{}", o.field.info().map_or("field", |i| i.name)));
        }
    }
    out.join(",")
}

/// `%#x` as C prints it: `0` for zero, `0x..` otherwise.
fn c_hex(v: u128) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

fn hex_masked(o: &Oxm) -> String {
    match o.mask() {
        Some(mask) if !mask.is_all_ones() => {
            format!("{}/{}", c_hex(u(o)), c_hex(mask.to_u128()))
        }
        _ => c_hex(u(o)),
    }
}

fn mac(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn mac_masked(o: &Oxm) -> String {
    match o.mask() {
        Some(mask) if !mask.is_all_ones() => {
            format!("{}/{}", mac(o.value().as_slice()), mac(mask.as_slice()))
        }
        _ => mac(o.value().as_slice()),
    }
}

fn ipv4_masked(o: &Oxm) -> String {
    let a = Ipv4Addr::from(u(o) as u32);
    match o.mask() {
        Some(mask) if !mask.is_all_ones() => {
            let m = mask.to_u128() as u32;
            if m.leading_ones() + m.trailing_zeros() == 32 {
                format!("{a}/{}", m.leading_ones())
            } else {
                format!("{a}/{}", Ipv4Addr::from(m))
            }
        }
        _ => a.to_string(),
    }
}

fn ipv6_masked(o: &Oxm) -> String {
    let a = Ipv6Addr::from(u(o));
    match o.mask() {
        Some(mask) if !mask.is_all_ones() => {
            let m = mask.to_u128();
            if m.leading_ones() + m.trailing_zeros() == 128 {
                format!("{a}/{}", m.leading_ones())
            } else {
                format!("{a}/{}", Ipv6Addr::from(m))
            }
        }
        _ => a.to_string(),
    }
}

/// TCP flags in Open vSwitch's `+syn-ack` form.
fn tcp_flags(o: &Oxm) -> String {
    const NAMES: [&str; 12] = [
        "fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]",
    ];
    let v = u(o) as u16;
    let Some(mask) = o.mask() else {
        return format!("{v:#x}");
    };
    let mask = mask.to_u128() as u16;
    let mut s = String::new();
    for (bit, name) in NAMES.iter().enumerate() {
        if mask & (1 << bit) != 0 {
            s.push(if v & (1 << bit) != 0 { '+' } else { '-' });
            s.push_str(name);
        }
    }
    s
}

fn port(p: u32) -> String {
    match PortNo(p).name() {
        Some(n) => n.to_string(),
        None => p.to_string(),
    }
}

/// The instructions in Open vSwitch's order: meter, apply-actions, write-metadata, goto-table.
pub fn instructions(ins: &[Instruction]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for i in ins {
        if let Instruction::Meter(m) = i {
            parts.push(format!("meter:{m}"));
        }
    }
    for i in ins {
        if let Instruction::ApplyActions(a) = i {
            parts.push(actions(a));
        }
    }
    for i in ins {
        match i {
            Instruction::ApplyActions(_) | Instruction::Meter(_) => {}
            Instruction::WriteMetadata { metadata, mask } => {
                let o = Oxm::int(
                    FieldId::METADATA,
                    u128::from(*metadata),
                    Some(u128::from(*mask)),
                );
                parts.push(format!("write_metadata:{}", hex_masked(&o)));
            }
            Instruction::GotoTable(t) => parts.push(format!("goto_table:{t}")),
            other => parts.push(format!("?{other:?}")),
        }
    }
    parts.retain(|p| !p.is_empty());
    if parts.is_empty() {
        "drop".into()
    } else {
        parts.join(",")
    }
}

/// An action list, comma-separated.
pub fn actions(acts: &[Action]) -> String {
    let mut s = String::new();
    for (n, a) in acts.iter().enumerate() {
        if n > 0 {
            s.push(',');
        }
        match a {
            Action::Output { port: p, max_len } => {
                if p.0 == ofproto::port::OFPP_CONTROLLER {
                    let _ = write!(s, "CONTROLLER:{max_len}");
                } else if let Some(name) = p.name() {
                    s.push_str(name);
                } else {
                    let _ = write!(s, "output:{}", p.0);
                }
            }
            Action::PushVlan(t) => {
                let _ = write!(s, "push_vlan:{t:#06x}");
            }
            Action::PopVlan => s.push_str("pop_vlan"),
            Action::Group(g) => {
                let _ = write!(s, "group:{g}");
            }
            Action::SetField(o) => {
                // OVS names set-field targets by their OXM names (`ip_dst`, `eth_dst`), not
                // the match names (`nw_dst`, `dl_dst`).
                let name = match o.field {
                    FieldId::IPV4_SRC => "ip_src",
                    FieldId::IPV4_DST => "ip_dst",
                    FieldId::ETH_SRC => "eth_src",
                    FieldId::ETH_DST => "eth_dst",
                    f => f.info().map_or("?", |i| i.name),
                };
                let value = match o.field {
                    FieldId::TUNNEL_ID => c_hex(u(o)),
                    FieldId::ETH_SRC | FieldId::ETH_DST => mac(o.value().as_slice()),
                    FieldId::IPV4_SRC | FieldId::IPV4_DST => {
                        o.ipv4().map_or_else(|| u(o).to_string(), |a| a.to_string())
                    }
                    _ => u(o).to_string(),
                };
                let _ = write!(s, "set_field:{value}->{name}");
            }
            other => ofproto::format::format_actions(&mut s, std::slice::from_ref(other)),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_flag_forms() {
        let o = |v, m| Oxm::int(nxm::TCP_FLAGS, v, Some(m));
        assert_eq!(tcp_flags(&o(0x02, 0x12)), "+syn-ack");
        assert_eq!(tcp_flags(&o(0x10, 0x12)), "-syn+ack");
        assert_eq!(tcp_flags(&o(0x02, 0x02)), "+syn");
    }

    #[test]
    fn masks_print_as_ovs_does() {
        let md = Oxm::int(FieldId::METADATA, 0, Some(1));
        assert_eq!(hex_masked(&md), "0/0x1");
        let a = Oxm::int(FieldId::IPV4_SRC, 0x0a01_0100, Some(0xffff_ff00));
        assert_eq!(ipv4_masked(&a), "10.1.1.0/24");
        let mc = Oxm::new(
            FieldId::ETH_SRC,
            &[1, 0, 0, 0, 0, 0],
            Some(&[1, 0, 0, 0, 0, 0]),
        );
        assert_eq!(mac_masked(&mc), "01:00:00:00:00:00/01:00:00:00:00:00");
    }

    #[test]
    fn empty_instructions_are_drop() {
        assert_eq!(instructions(&[]), "drop");
    }
}
