//! Nicira and ONF extension match fields as Open vSwitch accepts them in OpenFlow 1.3: the NXM0
//! class (original OpenFlow 1.0 fields, still used to name fields in `move`/`load`), the NXM1
//! class (registers, tunnel, conntrack, `pkt_mark`, `conj_id`, ...), the 64-bit `xreg`
//! registers of class `0x8001`, and ONF experimenter fields (`tcp_flags`).
//!
//! Contract: this module is a table; framing is in [`crate::oxm`].

use crate::oxm::{
    ARP, CLASS_EXPERIMENTER, CLASS_NXM0, CLASS_NXM1, CLASS_PKT_REGS, FieldId, FieldInfo, IP_TYPES,
    IPV4, IPV6, ONF_EXPERIMENTER, Prerequisite as P, ValueFormat,
};

/// `NXM_NX_REG<n>` (32 bits).
pub const fn reg(n: u8) -> FieldId {
    FieldId::new(CLASS_NXM1, n)
}

/// `OXM_OF_PKT_REG<n>`, shown by OVS as `xreg<n>` (64 bits).
pub const fn xreg(n: u8) -> FieldId {
    FieldId::new(CLASS_PKT_REGS, n)
}

/// `NXM_NX_TUN_ID`.
pub const TUN_ID: FieldId = FieldId::new(CLASS_NXM1, 16);
/// `NXM_NX_TUN_IPV4_SRC`.
pub const TUN_IPV4_SRC: FieldId = FieldId::new(CLASS_NXM1, 31);
/// `NXM_NX_TUN_IPV4_DST`.
pub const TUN_IPV4_DST: FieldId = FieldId::new(CLASS_NXM1, 32);
/// `NXM_NX_PKT_MARK`.
pub const PKT_MARK: FieldId = FieldId::new(CLASS_NXM1, 33);
/// `NXM_NX_TCP_FLAGS`.
pub const NX_TCP_FLAGS: FieldId = FieldId::new(CLASS_NXM1, 34);
/// `NXM_NX_CONJ_ID`.
pub const CONJ_ID: FieldId = FieldId::new(CLASS_NXM1, 37);
/// `NXM_NX_CT_STATE`.
pub const CT_STATE: FieldId = FieldId::new(CLASS_NXM1, 105);
/// `NXM_NX_CT_ZONE`.
pub const CT_ZONE: FieldId = FieldId::new(CLASS_NXM1, 106);
/// `NXM_NX_CT_MARK`.
pub const CT_MARK: FieldId = FieldId::new(CLASS_NXM1, 107);
/// `NXM_NX_CT_LABEL`.
pub const CT_LABEL: FieldId = FieldId::new(CLASS_NXM1, 108);
/// `NXM_NX_CT_NW_PROTO`: the IP protocol of the connection's original direction.
pub const CT_NW_PROTO: FieldId = FieldId::new(CLASS_NXM1, 119);
/// `NXM_NX_CT_NW_DST`: the IPv4 destination of the connection's original direction.
pub const CT_NW_DST: FieldId = FieldId::new(CLASS_NXM1, 121);
/// `NXM_NX_CT_IPV6_DST`: the IPv6 destination of the connection's original direction.
pub const CT_IPV6_DST: FieldId = FieldId::new(CLASS_NXM1, 123);
/// `NXM_NX_CT_TP_DST`: the transport destination port of the connection's original direction.
pub const CT_TP_DST: FieldId = FieldId::new(CLASS_NXM1, 125);
/// `ONFOXM_ET_TCP_FLAGS`: how OVS encodes `tcp_flags` in OpenFlow 1.3.
pub const TCP_FLAGS: FieldId = FieldId::experimenter(ONF_EXPERIMENTER, 42);

const TCP: P = P::IpProto(6, IP_TYPES);

macro_rules! f {
    ($id:expr, $name:expr, $nxm:expr, $len:literal, $mask:literal, $fmt:ident, $pre:expr) => {
        FieldInfo {
            id: $id,
            name: $name,
            nxm_name: $nxm,
            len: $len,
            maskable: $mask,
            format: ValueFormat::$fmt,
            prereq: $pre,
        }
    };
}

macro_rules! regs {
    ($($n:literal),*) => {
        [$( f!(reg($n), concat!("reg", $n), concat!("NXM_NX_REG", $n), 4, true, Hex, P::None) ),*]
    };
}

macro_rules! xregs {
    ($($n:literal),*) => {
        [$( f!(xreg($n), concat!("xreg", $n), concat!("OXM_OF_PKT_REG", $n), 8, true, Hex, P::None) ),*]
    };
}

static REGS: [FieldInfo; 16] = regs!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
static XREGS: [FieldInfo; 8] = xregs!(0, 1, 2, 3, 4, 5, 6, 7);

const fn n0(f: u8) -> FieldId {
    FieldId::new(CLASS_NXM0, f)
}
const fn n1(f: u8) -> FieldId {
    FieldId::new(CLASS_NXM1, f)
}

/// NXM0 fields (the OpenFlow 1.0 subset in Nicira framing).
#[rustfmt::skip]
static NXM0: [FieldInfo; 18] = [
    f!(n0(0), "in_port", "NXM_OF_IN_PORT", 2, false, Port, P::None),
    f!(n0(1), "dl_dst", "NXM_OF_ETH_DST", 6, true, Mac, P::None),
    f!(n0(2), "dl_src", "NXM_OF_ETH_SRC", 6, true, Mac, P::None),
    f!(n0(3), "dl_type", "NXM_OF_ETH_TYPE", 2, false, Hex, P::None),
    f!(n0(4), "vlan_tci", "NXM_OF_VLAN_TCI", 2, true, Hex, P::None),
    f!(n0(5), "nw_tos", "NXM_OF_IP_TOS", 1, false, Decimal, P::EthType(IP_TYPES)),
    f!(n0(6), "nw_proto", "NXM_OF_IP_PROTO", 1, false, Decimal, P::EthType(IP_TYPES)),
    f!(n0(7), "nw_src", "NXM_OF_IP_SRC", 4, true, Ipv4, P::EthType(IPV4)),
    f!(n0(8), "nw_dst", "NXM_OF_IP_DST", 4, true, Ipv4, P::EthType(IPV4)),
    f!(n0(9), "tcp_src", "NXM_OF_TCP_SRC", 2, true, Decimal, TCP),
    f!(n0(10), "tcp_dst", "NXM_OF_TCP_DST", 2, true, Decimal, TCP),
    f!(n0(11), "udp_src", "NXM_OF_UDP_SRC", 2, true, Decimal, P::IpProto(17, IP_TYPES)),
    f!(n0(12), "udp_dst", "NXM_OF_UDP_DST", 2, true, Decimal, P::IpProto(17, IP_TYPES)),
    f!(n0(13), "icmp_type", "NXM_OF_ICMP_TYPE", 1, false, Decimal, P::IpProto(1, IPV4)),
    f!(n0(14), "icmp_code", "NXM_OF_ICMP_CODE", 1, false, Decimal, P::IpProto(1, IPV4)),
    f!(n0(15), "arp_op", "NXM_OF_ARP_OP", 2, false, Decimal, P::EthType(ARP)),
    f!(n0(16), "arp_spa", "NXM_OF_ARP_SPA", 4, true, Ipv4, P::EthType(ARP)),
    f!(n0(17), "arp_tpa", "NXM_OF_ARP_TPA", 4, true, Ipv4, P::EthType(ARP)),
];

/// NXM1 fields other than the registers, sorted by field number.
#[rustfmt::skip]
static NXM1: [FieldInfo; 42] = [
    f!(n1(16), "tun_id", "NXM_NX_TUN_ID", 8, true, Hex, P::None),
    f!(n1(17), "arp_sha", "NXM_NX_ARP_SHA", 6, true, Mac, P::EthType(ARP)),
    f!(n1(18), "arp_tha", "NXM_NX_ARP_THA", 6, true, Mac, P::EthType(ARP)),
    f!(n1(19), "ipv6_src", "NXM_NX_IPV6_SRC", 16, true, Ipv6, P::EthType(IPV6)),
    f!(n1(20), "ipv6_dst", "NXM_NX_IPV6_DST", 16, true, Ipv6, P::EthType(IPV6)),
    f!(n1(21), "icmpv6_type", "NXM_NX_ICMPV6_TYPE", 1, false, Decimal, P::IpProto(58, IPV6)),
    f!(n1(22), "icmpv6_code", "NXM_NX_ICMPV6_CODE", 1, false, Decimal, P::IpProto(58, IPV6)),
    f!(n1(23), "nd_target", "NXM_NX_ND_TARGET", 16, true, Ipv6, P::Icmpv6Type(&[135, 136])),
    f!(n1(24), "nd_sll", "NXM_NX_ND_SLL", 6, true, Mac, P::Icmpv6Type(&[135])),
    f!(n1(25), "nd_tll", "NXM_NX_ND_TLL", 6, true, Mac, P::Icmpv6Type(&[136])),
    f!(n1(26), "ip_frag", "NXM_NX_IP_FRAG", 1, true, Hex, P::EthType(IP_TYPES)),
    f!(n1(27), "ipv6_label", "NXM_NX_IPV6_LABEL", 4, true, Hex, P::EthType(IPV6)),
    f!(n1(28), "nw_ecn", "NXM_NX_IP_ECN", 1, false, Decimal, P::EthType(IP_TYPES)),
    f!(n1(29), "nw_ttl", "NXM_NX_IP_TTL", 1, false, Decimal, P::EthType(IP_TYPES)),
    f!(n1(30), "cookie", "NXM_NX_COOKIE", 8, true, Hex, P::None),
    f!(n1(31), "tun_src", "NXM_NX_TUN_IPV4_SRC", 4, true, Ipv4, P::None),
    f!(n1(32), "tun_dst", "NXM_NX_TUN_IPV4_DST", 4, true, Ipv4, P::None),
    f!(n1(33), "pkt_mark", "NXM_NX_PKT_MARK", 4, true, Hex, P::None),
    f!(n1(34), "tcp_flags", "NXM_NX_TCP_FLAGS", 2, true, Hex, TCP),
    f!(n1(35), "dp_hash", "NXM_NX_DP_HASH", 4, true, Hex, P::None),
    f!(n1(36), "recirc_id", "NXM_NX_RECIRC_ID", 4, false, Hex, P::None),
    f!(n1(37), "conj_id", "NXM_NX_CONJ_ID", 4, false, Decimal, P::None),
    f!(n1(38), "tun_gbp_id", "NXM_NX_TUN_GBP_ID", 2, true, Hex, P::None),
    f!(n1(39), "tun_gbp_flags", "NXM_NX_TUN_GBP_FLAGS", 1, true, Hex, P::None),
    f!(n1(104), "tun_flags", "NXM_NX_TUN_FLAGS", 2, true, Hex, P::None),
    f!(n1(105), "ct_state", "NXM_NX_CT_STATE", 4, true, Hex, P::None),
    f!(n1(106), "ct_zone", "NXM_NX_CT_ZONE", 2, false, Hex, P::None),
    f!(n1(107), "ct_mark", "NXM_NX_CT_MARK", 4, true, Hex, P::None),
    f!(n1(108), "ct_label", "NXM_NX_CT_LABEL", 16, true, Hex, P::None),
    f!(n1(109), "tun_ipv6_src", "NXM_NX_TUN_IPV6_SRC", 16, true, Ipv6, P::None),
    f!(n1(110), "tun_ipv6_dst", "NXM_NX_TUN_IPV6_DST", 16, true, Ipv6, P::None),
    f!(n1(111), "xxreg0", "NXM_NX_XXREG0", 16, true, Hex, P::None),
    f!(n1(112), "xxreg1", "NXM_NX_XXREG1", 16, true, Hex, P::None),
    f!(n1(113), "xxreg2", "NXM_NX_XXREG2", 16, true, Hex, P::None),
    f!(n1(114), "xxreg3", "NXM_NX_XXREG3", 16, true, Hex, P::None),
    f!(n1(119), "ct_nw_proto", "NXM_NX_CT_NW_PROTO", 1, false, Decimal, P::None),
    f!(n1(120), "ct_nw_src", "NXM_NX_CT_NW_SRC", 4, true, Ipv4, P::None),
    f!(n1(121), "ct_nw_dst", "NXM_NX_CT_NW_DST", 4, true, Ipv4, P::None),
    f!(n1(122), "ct_ipv6_src", "NXM_NX_CT_IPV6_SRC", 16, true, Ipv6, P::None),
    f!(n1(123), "ct_ipv6_dst", "NXM_NX_CT_IPV6_DST", 16, true, Ipv6, P::None),
    f!(n1(124), "ct_tp_src", "NXM_NX_CT_TP_SRC", 2, true, Decimal, P::None),
    f!(n1(125), "ct_tp_dst", "NXM_NX_CT_TP_DST", 2, true, Decimal, P::None),
];

/// ONF experimenter fields OVS accepts in OpenFlow 1.3.
#[rustfmt::skip]
static ONF: [FieldInfo; 1] = [
    f!(TCP_FLAGS, "tcp_flags", "ONFOXM_ET_TCP_FLAGS", 2, true, Hex, TCP),
];

/// Facts about a non-basic field.
pub(crate) fn info(id: FieldId) -> Option<&'static FieldInfo> {
    let f = usize::from(id.field);
    match id.class {
        CLASS_NXM0 => NXM0.get(f),
        CLASS_NXM1 if f < 16 => REGS.get(f),
        CLASS_NXM1 => NXM1.iter().find(|i| i.id == id),
        CLASS_PKT_REGS => XREGS.get(f),
        CLASS_EXPERIMENTER => ONF.iter().find(|i| i.id == id),
        _ => None,
    }
}

/// Every field in this module's tables.
pub(crate) fn all() -> impl Iterator<Item = &'static FieldInfo> {
    REGS.iter()
        .chain(XREGS.iter())
        .chain(NXM1.iter())
        .chain(ONF.iter())
        .chain(NXM0.iter())
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn registers_are_named() {
        assert_eq!(reg(7).info().unwrap().nxm_name, "NXM_NX_REG7");
        assert_eq!(xreg(2).info().unwrap().name, "xreg2");
        assert_eq!(CT_LABEL.info().unwrap().len, 16);
    }

    #[test]
    fn nxm_header_matches_ovs() {
        // NXM_NX_REG1 is 0x00010204, NXM_OF_ETH_DST 0x00000206.
        assert_eq!(reg(1).nxm_header(), 0x0001_0204);
        assert_eq!(FieldId::new(CLASS_NXM0, 1).nxm_header(), 0x0000_0206);
        assert_eq!(TCP_FLAGS.header(false, 2), 0xffff_5406);
    }

    #[test]
    fn unknown_field_has_no_info() {
        assert!(FieldId::new(0x1234, 3).info().is_none());
    }
}
