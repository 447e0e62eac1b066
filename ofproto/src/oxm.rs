//! OXM match fields: field identities, the field table for the OpenFlow 1.3 basic class
//! (`OFPXMC_OPENFLOW_BASIC`, fields 0–41), values with optional masks, and the TLV framing
//! (including the 4-byte experimenter id of class `0xffff`).
//!
//! Contract: [`Oxm::parse`] accepts any well-framed TLV, known or not, and [`Oxm::emit`] writes
//! back the same bytes. Width and prerequisite rules are checked by [`crate::Match::check`], not
//! by the decoder, so a switch's odd but well-framed reply still decodes. The Nicira classes and
//! experimenter fields live in [`crate::nxm`].

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::BytesMut;

use crate::nxm;
use crate::wire::{DecodeError, PResult};

/// `OFPXMC_NXM_0`: the original Nicira match class.
pub const CLASS_NXM0: u16 = 0x0000;
/// `OFPXMC_NXM_1`: the Nicira extension class.
pub const CLASS_NXM1: u16 = 0x0001;
/// `OFPXMC_OPENFLOW_BASIC`.
pub const CLASS_BASIC: u16 = 0x8000;
/// `OFPXMC_PACKET_REGS` (the 64-bit `xreg` registers).
pub const CLASS_PKT_REGS: u16 = 0x8001;
/// `OFPXMC_EXPERIMENTER`: the header is followed by a 32-bit experimenter id.
pub const CLASS_EXPERIMENTER: u16 = 0xffff;
/// The ONF experimenter id (`ONF_EXPERIMENTER_ID`).
pub const ONF_EXPERIMENTER: u32 = 0x4f4e_4600;

/// Identity of a match field: its class, field number and, for class `0xffff`, experimenter id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldId {
    /// OXM class.
    pub class: u16,
    /// Field number within the class (7 bits on the wire).
    pub field: u8,
    /// Experimenter id; 0 unless `class` is [`CLASS_EXPERIMENTER`].
    pub experimenter: u32,
}

/// How a field's value is written in ovs-ofctl syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueFormat {
    /// Decimal integer.
    Decimal,
    /// Hexadecimal integer with `0x`.
    Hex,
    /// Ethernet address.
    Mac,
    /// IPv4 address.
    Ipv4,
    /// IPv6 address.
    Ipv6,
    /// OpenFlow port number, printed with its name (`LOCAL`, `CONTROLLER`, ...).
    Port,
}

/// What must hold in the same match for a field to be meaningful (OpenFlow 1.3 §7.2.3.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prerequisite {
    /// Always meaningful.
    None,
    /// `in_port` must be present.
    InPort,
    /// `eth_type` must equal one of these.
    EthType(&'static [u16]),
    /// `ip_proto` must equal this, over IPv4 or IPv6 (or the listed ethertypes).
    IpProto(u8, &'static [u16]),
    /// `icmpv6_type` must equal one of these.
    Icmpv6Type(&'static [u8]),
    /// `vlan_vid` must be present and not `OFPVID_NONE`.
    Vlan,
}

/// Static facts about one field.
#[derive(Debug, Clone, Copy)]
pub struct FieldInfo {
    /// The field.
    pub id: FieldId,
    /// ovs-ofctl name (`dl_dst`, `nw_src`, `reg0`, ...).
    pub name: &'static str,
    /// NXM/OXM symbolic name used in `load:`/`move:` (`NXM_OF_ETH_DST`, `OXM_OF_METADATA`).
    pub nxm_name: &'static str,
    /// Value width in bytes.
    pub len: u8,
    /// Whether OVS accepts a mask for it.
    pub maskable: bool,
    /// How its value prints.
    pub format: ValueFormat,
    /// Its prerequisite.
    pub prereq: Prerequisite,
}

pub(crate) const IP_TYPES: &[u16] = &[0x0800, 0x86dd];
pub(crate) const IPV4: &[u16] = &[0x0800];
pub(crate) const IPV6: &[u16] = &[0x86dd];
pub(crate) const ARP: &[u16] = &[0x0806, 0x8035];
pub(crate) const MPLS: &[u16] = &[0x8847, 0x8848];
pub(crate) const PBB: &[u16] = &[0x88e7];

macro_rules! basic {
    ($f:literal, $name:literal, $nxm:literal, $len:literal, $mask:literal, $fmt:ident, $pre:expr) => {
        FieldInfo {
            id: FieldId::basic($f),
            name: $name,
            nxm_name: $nxm,
            len: $len,
            maskable: $mask,
            format: ValueFormat::$fmt,
            prereq: $pre,
        }
    };
}

use Prerequisite as P;

/// The basic class, indexed by field number.
#[rustfmt::skip]
static BASIC: [FieldInfo; 42] = [
    basic!(0, "in_port", "OXM_OF_IN_PORT", 4, false, Port, P::None),
    basic!(1, "in_phy_port", "OXM_OF_IN_PHY_PORT", 4, false, Port, P::InPort),
    basic!(2, "metadata", "OXM_OF_METADATA", 8, true, Hex, P::None),
    basic!(3, "dl_dst", "NXM_OF_ETH_DST", 6, true, Mac, P::None),
    basic!(4, "dl_src", "NXM_OF_ETH_SRC", 6, true, Mac, P::None),
    basic!(5, "dl_type", "NXM_OF_ETH_TYPE", 2, false, Hex, P::None),
    basic!(6, "vlan_vid", "OXM_OF_VLAN_VID", 2, true, Decimal, P::None),
    basic!(7, "vlan_pcp", "OXM_OF_VLAN_PCP", 1, false, Decimal, P::Vlan),
    basic!(8, "ip_dscp", "OXM_OF_IP_DSCP", 1, false, Decimal, P::EthType(IP_TYPES)),
    basic!(9, "nw_ecn", "NXM_NX_IP_ECN", 1, false, Decimal, P::EthType(IP_TYPES)),
    basic!(10, "nw_proto", "NXM_OF_IP_PROTO", 1, false, Decimal, P::EthType(IP_TYPES)),
    basic!(11, "nw_src", "NXM_OF_IP_SRC", 4, true, Ipv4, P::EthType(IPV4)),
    basic!(12, "nw_dst", "NXM_OF_IP_DST", 4, true, Ipv4, P::EthType(IPV4)),
    basic!(13, "tcp_src", "NXM_OF_TCP_SRC", 2, true, Decimal, P::IpProto(6, IP_TYPES)),
    basic!(14, "tcp_dst", "NXM_OF_TCP_DST", 2, true, Decimal, P::IpProto(6, IP_TYPES)),
    basic!(15, "udp_src", "NXM_OF_UDP_SRC", 2, true, Decimal, P::IpProto(17, IP_TYPES)),
    basic!(16, "udp_dst", "NXM_OF_UDP_DST", 2, true, Decimal, P::IpProto(17, IP_TYPES)),
    basic!(17, "sctp_src", "OXM_OF_SCTP_SRC", 2, true, Decimal, P::IpProto(132, IP_TYPES)),
    basic!(18, "sctp_dst", "OXM_OF_SCTP_DST", 2, true, Decimal, P::IpProto(132, IP_TYPES)),
    basic!(19, "icmp_type", "NXM_OF_ICMP_TYPE", 1, false, Decimal, P::IpProto(1, IPV4)),
    basic!(20, "icmp_code", "NXM_OF_ICMP_CODE", 1, false, Decimal, P::IpProto(1, IPV4)),
    basic!(21, "arp_op", "NXM_OF_ARP_OP", 2, false, Decimal, P::EthType(ARP)),
    basic!(22, "arp_spa", "NXM_OF_ARP_SPA", 4, true, Ipv4, P::EthType(ARP)),
    basic!(23, "arp_tpa", "NXM_OF_ARP_TPA", 4, true, Ipv4, P::EthType(ARP)),
    basic!(24, "arp_sha", "NXM_NX_ARP_SHA", 6, true, Mac, P::EthType(ARP)),
    basic!(25, "arp_tha", "NXM_NX_ARP_THA", 6, true, Mac, P::EthType(ARP)),
    basic!(26, "ipv6_src", "NXM_NX_IPV6_SRC", 16, true, Ipv6, P::EthType(IPV6)),
    basic!(27, "ipv6_dst", "NXM_NX_IPV6_DST", 16, true, Ipv6, P::EthType(IPV6)),
    basic!(28, "ipv6_label", "NXM_NX_IPV6_LABEL", 4, true, Hex, P::EthType(IPV6)),
    basic!(29, "icmpv6_type", "NXM_NX_ICMPV6_TYPE", 1, false, Decimal, P::IpProto(58, IPV6)),
    basic!(30, "icmpv6_code", "NXM_NX_ICMPV6_CODE", 1, false, Decimal, P::IpProto(58, IPV6)),
    basic!(31, "nd_target", "NXM_NX_ND_TARGET", 16, true, Ipv6, P::Icmpv6Type(&[135, 136])),
    basic!(32, "nd_sll", "NXM_NX_ND_SLL", 6, true, Mac, P::Icmpv6Type(&[135])),
    basic!(33, "nd_tll", "NXM_NX_ND_TLL", 6, true, Mac, P::Icmpv6Type(&[136])),
    basic!(34, "mpls_label", "OXM_OF_MPLS_LABEL", 4, false, Decimal, P::EthType(MPLS)),
    basic!(35, "mpls_tc", "OXM_OF_MPLS_TC", 1, false, Decimal, P::EthType(MPLS)),
    basic!(36, "mpls_bos", "OXM_OF_MPLS_BOS", 1, false, Decimal, P::EthType(MPLS)),
    basic!(37, "pbb_isid", "OXM_OF_PBB_ISID", 3, true, Decimal, P::EthType(PBB)),
    basic!(38, "tun_id", "NXM_NX_TUN_ID", 8, true, Hex, P::None),
    basic!(39, "ipv6_exthdr", "OXM_OF_IPV6_EXTHDR", 2, true, Hex, P::EthType(IPV6)),
    basic!(40, "field40", "OXM_OF_FIELD40", 0, false, Hex, P::None),
    basic!(41, "pbb_uca", "OXM_OF_PBB_UCA", 1, false, Decimal, P::EthType(PBB)),
];

impl FieldId {
    /// A field of the OpenFlow basic class.
    pub const fn basic(field: u8) -> FieldId {
        FieldId {
            class: CLASS_BASIC,
            field,
            experimenter: 0,
        }
    }

    /// A field of a non-experimenter class.
    pub const fn new(class: u16, field: u8) -> FieldId {
        FieldId {
            class,
            field,
            experimenter: 0,
        }
    }

    /// An experimenter field.
    pub const fn experimenter(experimenter: u32, field: u8) -> FieldId {
        FieldId {
            class: CLASS_EXPERIMENTER,
            field,
            experimenter,
        }
    }

    /// `OXM_OF_IN_PORT`.
    pub const IN_PORT: FieldId = FieldId::basic(0);
    /// `OXM_OF_IN_PHY_PORT`.
    pub const IN_PHY_PORT: FieldId = FieldId::basic(1);
    /// `OXM_OF_METADATA`.
    pub const METADATA: FieldId = FieldId::basic(2);
    /// `OXM_OF_ETH_DST`.
    pub const ETH_DST: FieldId = FieldId::basic(3);
    /// `OXM_OF_ETH_SRC`.
    pub const ETH_SRC: FieldId = FieldId::basic(4);
    /// `OXM_OF_ETH_TYPE`.
    pub const ETH_TYPE: FieldId = FieldId::basic(5);
    /// `OXM_OF_VLAN_VID`.
    pub const VLAN_VID: FieldId = FieldId::basic(6);
    /// `OXM_OF_VLAN_PCP`.
    pub const VLAN_PCP: FieldId = FieldId::basic(7);
    /// `OXM_OF_IP_DSCP`.
    pub const IP_DSCP: FieldId = FieldId::basic(8);
    /// `OXM_OF_IP_ECN`.
    pub const IP_ECN: FieldId = FieldId::basic(9);
    /// `OXM_OF_IP_PROTO`.
    pub const IP_PROTO: FieldId = FieldId::basic(10);
    /// `OXM_OF_IPV4_SRC`.
    pub const IPV4_SRC: FieldId = FieldId::basic(11);
    /// `OXM_OF_IPV4_DST`.
    pub const IPV4_DST: FieldId = FieldId::basic(12);
    /// `OXM_OF_TCP_SRC`.
    pub const TCP_SRC: FieldId = FieldId::basic(13);
    /// `OXM_OF_TCP_DST`.
    pub const TCP_DST: FieldId = FieldId::basic(14);
    /// `OXM_OF_UDP_SRC`.
    pub const UDP_SRC: FieldId = FieldId::basic(15);
    /// `OXM_OF_UDP_DST`.
    pub const UDP_DST: FieldId = FieldId::basic(16);
    /// `OXM_OF_SCTP_SRC`.
    pub const SCTP_SRC: FieldId = FieldId::basic(17);
    /// `OXM_OF_SCTP_DST`.
    pub const SCTP_DST: FieldId = FieldId::basic(18);
    /// `OXM_OF_ICMPV4_TYPE`.
    pub const ICMPV4_TYPE: FieldId = FieldId::basic(19);
    /// `OXM_OF_ICMPV4_CODE`.
    pub const ICMPV4_CODE: FieldId = FieldId::basic(20);
    /// `OXM_OF_ARP_OP`.
    pub const ARP_OP: FieldId = FieldId::basic(21);
    /// `OXM_OF_ARP_SPA`.
    pub const ARP_SPA: FieldId = FieldId::basic(22);
    /// `OXM_OF_ARP_TPA`.
    pub const ARP_TPA: FieldId = FieldId::basic(23);
    /// `OXM_OF_ARP_SHA`.
    pub const ARP_SHA: FieldId = FieldId::basic(24);
    /// `OXM_OF_ARP_THA`.
    pub const ARP_THA: FieldId = FieldId::basic(25);
    /// `OXM_OF_IPV6_SRC`.
    pub const IPV6_SRC: FieldId = FieldId::basic(26);
    /// `OXM_OF_IPV6_DST`.
    pub const IPV6_DST: FieldId = FieldId::basic(27);
    /// `OXM_OF_IPV6_FLABEL`.
    pub const IPV6_FLABEL: FieldId = FieldId::basic(28);
    /// `OXM_OF_ICMPV6_TYPE`.
    pub const ICMPV6_TYPE: FieldId = FieldId::basic(29);
    /// `OXM_OF_ICMPV6_CODE`.
    pub const ICMPV6_CODE: FieldId = FieldId::basic(30);
    /// `OXM_OF_IPV6_ND_TARGET`.
    pub const IPV6_ND_TARGET: FieldId = FieldId::basic(31);
    /// `OXM_OF_IPV6_ND_SLL`.
    pub const IPV6_ND_SLL: FieldId = FieldId::basic(32);
    /// `OXM_OF_IPV6_ND_TLL`.
    pub const IPV6_ND_TLL: FieldId = FieldId::basic(33);
    /// `OXM_OF_MPLS_LABEL`.
    pub const MPLS_LABEL: FieldId = FieldId::basic(34);
    /// `OXM_OF_MPLS_TC`.
    pub const MPLS_TC: FieldId = FieldId::basic(35);
    /// `OXM_OF_MPLS_BOS`.
    pub const MPLS_BOS: FieldId = FieldId::basic(36);
    /// `OXM_OF_PBB_ISID`.
    pub const PBB_ISID: FieldId = FieldId::basic(37);
    /// `OXM_OF_TUNNEL_ID`.
    pub const TUNNEL_ID: FieldId = FieldId::basic(38);
    /// `OXM_OF_IPV6_EXTHDR`.
    pub const IPV6_EXTHDR: FieldId = FieldId::basic(39);
    /// `OXM_OF_PBB_UCA` (OpenFlow 1.4 number, accepted in 1.3 messages).
    pub const PBB_UCA: FieldId = FieldId::basic(41);

    /// The 32-bit NXM/OXM header for this field with the given value length and mask flag.
    /// For experimenter fields the length counts the 4-byte experimenter id.
    pub fn header(self, hasmask: bool, value_len: usize) -> u32 {
        let body = if hasmask { 2 * value_len } else { value_len };
        let body = if self.class == CLASS_EXPERIMENTER {
            body + 4
        } else {
            body
        };
        (u32::from(self.class) << 16)
            | (u32::from(self.field & 0x7f) << 9)
            | (u32::from(hasmask) << 8)
            | (body as u32 & 0xff)
    }

    /// Split a 32-bit NXM header (as used by `reg_load`/`reg_move`) into field, mask flag and
    /// payload length. Experimenter headers cannot be expressed in 32 bits; they get id 0.
    pub fn from_header(h: u32) -> (FieldId, bool, u8) {
        let class = (h >> 16) as u16;
        let field = ((h >> 9) & 0x7f) as u8;
        let hasmask = h & 0x100 != 0;
        (FieldId::new(class, field), hasmask, (h & 0xff) as u8)
    }

    /// The header `reg_load`/`reg_move` use to name this field (no mask, natural width).
    pub fn nxm_header(self) -> u32 {
        self.header(false, usize::from(self.info().map_or(0, |i| i.len)))
    }

    /// Static facts about this field, if this crate knows it.
    pub fn info(self) -> Option<&'static FieldInfo> {
        match self.class {
            CLASS_BASIC => BASIC.get(usize::from(self.field)).filter(|f| f.len != 0),
            _ => nxm::info(self),
        }
    }

    /// Width of the field's value in bits, if known.
    pub fn bits(self) -> Option<u16> {
        self.info().map(|i| u16::from(i.len) * 8)
    }
}

/// Look a field up by its ovs-ofctl name (`reg0`, `nw_src`, `tun_id`, ...).
pub fn field_by_name(name: &str) -> Option<&'static FieldInfo> {
    BASIC
        .iter()
        .chain(nxm::all())
        .find(|f| f.len != 0 && (f.name == name || f.nxm_name == name))
}

/// A field's value or mask as bytes (big-endian, as wide as the field), borrowed from its
/// [`Oxm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FieldValue<'a>(&'a [u8]);

impl<'a> FieldValue<'a> {
    /// The bytes.
    pub fn as_slice(self) -> &'a [u8] {
        self.0
    }

    /// The value as an unsigned integer (the last 16 bytes for longer values).
    pub fn to_u128(self) -> u128 {
        be_u128(self.0)
    }

    /// The value as u64 (truncating wider values).
    pub fn to_u64(self) -> u64 {
        self.to_u128() as u64
    }

    /// Width in bytes.
    pub fn len(self) -> usize {
        self.0.len()
    }

    /// Whether the value has no bytes.
    pub fn is_empty(self) -> bool {
        self.0.is_empty()
    }

    /// Whether every bit is one.
    pub fn is_all_ones(self) -> bool {
        self.0.iter().all(|b| *b == 0xff)
    }

    /// Whether every bit is zero.
    pub fn is_zero(self) -> bool {
        self.0.iter().all(|b| *b == 0)
    }
}

/// The last (up to) 16 bytes of `bytes` as a big-endian integer.
fn be_u128(bytes: &[u8]) -> u128 {
    let tail = &bytes[bytes.len().saturating_sub(16)..];
    tail.iter()
        .fold(0u128, |acc, b| (acc << 8) | u128::from(*b))
}

/// Bytes a field's value and mask share inline; longer ones (a masked IPv6 address or
/// conntrack label, tunnel metadata, experimenter fields) go to the heap. 16, not 32: a flow's
/// fields are most of a controller's memory (tens of thousands of flows, each kept as long as it
/// is installed), and 16 bytes hold every field a flow usually matches; the codec benchmark
/// (`benches/codec.rs`) decodes and encodes as fast as with 32.
const INLINE: usize = 16;

/// One match field: `field = value` or `field = value/mask`.
///
/// Value and mask sit side by side in one 16-byte inline buffer (the value first), which covers
/// every field but masked IPv6 addresses and labels and tunnel metadata. The type is plain
/// integers and arrays rather than an enum of inline and boxed bytes so the decoder can build it
/// straight into a match's vector: an enum there made the compiler assemble each field on the
/// stack piece by piece and copy it with wide loads, stalling on every field (store-to-load
/// forwarding failures).
#[derive(Clone)]
pub struct Oxm {
    /// Which field.
    pub field: FieldId,
    /// Value width in bytes.
    value_len: u8,
    /// Whether a mask follows the value.
    masked: bool,
    /// Value then mask when they fit; bytes past them are unspecified (never compared).
    inline: [u8; INLINE],
    /// Value then mask when they do not fit inline.
    long: Option<Box<[u8]>>,
}

impl Oxm {
    /// A field with a value given as bytes and an optional mask.
    ///
    /// A mask wider or narrower than the value is cut or zero-extended on the left to the
    /// value's width (OXM masks are always as wide as the value).
    #[inline]
    pub fn new(field: FieldId, value: &[u8], mask: Option<&[u8]>) -> Oxm {
        let len = value.len().min(usize::from(u8::MAX));
        let value = &value[..len];
        let mut both = Vec::with_capacity(2 * len);
        both.extend_from_slice(value);
        if let Some(mask) = mask {
            let keep = mask.len().min(len);
            both.resize(2 * len - keep, 0);
            both.extend_from_slice(&mask[mask.len() - keep..]);
        }
        Oxm::from_parts(field, len, mask.is_some(), &both)
    }

    /// Build from the wire body (value, then mask when `masked`).
    #[inline(always)]
    fn from_parts(field: FieldId, value_len: usize, masked: bool, body: &[u8]) -> Oxm {
        let mut inline = [0u8; INLINE];
        let long = match inline.get_mut(..body.len()) {
            Some(head) => {
                head.copy_from_slice(body);
                None
            }
            None => Some(Box::from(body)),
        };
        Oxm {
            field,
            value_len: value_len as u8,
            masked,
            inline,
            long,
        }
    }

    /// A known field holding an integer (big-endian over the field's width), optionally masked.
    /// Unknown fields are taken as 4 bytes wide.
    pub fn int(field: FieldId, value: u128, mask: Option<u128>) -> Oxm {
        let len = field.info().map_or(4, |i| usize::from(i.len)).min(16);
        let value = value.to_be_bytes();
        let mask = mask.map(u128::to_be_bytes);
        Oxm::new(
            field,
            &value[16 - len..],
            mask.as_ref().map(|m| &m[16 - len..]),
        )
    }

    /// Value then mask, as on the wire.
    fn body(&self) -> &[u8] {
        let n = usize::from(self.value_len) * (1 + usize::from(self.masked));
        match &self.long {
            Some(long) => long,
            None => &self.inline[..n],
        }
    }

    /// The value.
    pub fn value(&self) -> FieldValue<'_> {
        FieldValue(&self.body()[..usize::from(self.value_len)])
    }

    /// The mask, when the field is masked.
    pub fn mask(&self) -> Option<FieldValue<'_>> {
        self.masked
            .then(|| FieldValue(&self.body()[usize::from(self.value_len)..]))
    }

    /// Whether the field carries a mask.
    pub fn is_masked(&self) -> bool {
        self.masked
    }

    /// The value as an integer.
    pub fn value_u128(&self) -> u128 {
        self.value().to_u128()
    }

    /// The mask as an integer, when masked.
    pub fn mask_u128(&self) -> Option<u128> {
        self.mask().map(FieldValue::to_u128)
    }

    /// Value as an IPv4 address, if 4 bytes wide.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        <[u8; 4]>::try_from(self.value().as_slice())
            .ok()
            .map(Ipv4Addr::from)
    }

    /// Value as an IPv6 address, if 16 bytes wide.
    pub fn ipv6(&self) -> Option<Ipv6Addr> {
        <[u8; 16]>::try_from(self.value().as_slice())
            .ok()
            .map(Ipv6Addr::from)
    }

    /// Encoded size in bytes.
    pub fn wire_len(&self) -> usize {
        let ext = if self.field.class == CLASS_EXPERIMENTER {
            4
        } else {
            0
        };
        4 + ext + self.body().len()
    }

    /// Parse one OXM TLV.
    #[inline]
    pub fn parse(i: &[u8]) -> PResult<'_, Oxm> {
        crate::wire::parse_one("oxm field", |out| Oxm::parse_into(i, i, out))
    }

    /// Parse the OXM TLV at the start of `i` and append `wrap(field)` to `out`; returns what
    /// follows the TLV inside `i` (set-field actions pad it). `extended` starts at the same byte
    /// and may run on past `i` (the rest of the message), so the value is copied with one
    /// fixed-size load.
    #[inline(always)]
    pub(crate) fn parse_extended_into<'a, T>(
        i: &'a [u8],
        extended: &[u8],
        out: &mut Vec<T>,
        wrap: impl Fn(Oxm) -> T,
    ) -> Result<&'a [u8], DecodeError> {
        let tlv = OxmTlv::split(i, extended)?;
        tlv.push_into(out, wrap);
        Ok(tlv.rest)
    }

    /// Parse one OXM TLV at the start of `i` and append it to `out`; returns the input after
    /// it. `extended` starts where `i` does and may run on past its end (the rest of the
    /// message): the field's bytes are then copied with one fixed-size load.
    ///
    /// The field is built straight into the vector instead of being returned and copied in,
    /// which keeps the match decoder's loop free of a stack round trip per field.
    #[inline(always)]
    pub(crate) fn parse_into<'a>(
        i: &'a [u8],
        extended: &[u8],
        out: &mut Vec<Oxm>,
    ) -> Result<&'a [u8], DecodeError> {
        let tlv = OxmTlv::split(i, extended)?;
        tlv.push_into(out, |oxm| oxm);
        Ok(tlv.rest)
    }

    /// Count the TLVs in a well-framed list (a capacity hint; stops at the first bad header).
    pub(crate) fn count(mut i: &[u8]) -> usize {
        let mut n = 0;
        while i.len() >= 4 {
            let skip = 4 + usize::from(i[3]);
            n += 1;
            i = i.get(skip..).unwrap_or(&[]);
        }
        n
    }

    /// Append the TLV to `out`.
    #[inline]
    pub fn emit(&self, out: &mut BytesMut) {
        let body = self.body();
        let exp = self.field.class == CLASS_EXPERIMENTER;
        let header = self
            .field
            .header(self.masked, usize::from(self.value_len))
            .to_be_bytes();
        if self.long.is_none() {
            // Assemble the TLV on the stack with fixed-size copies, append a fixed 40 bytes and
            // cut back: no variable-length memcpy on the hot path.
            let mut buf = [0u8; 8 + INLINE];
            buf[..4].copy_from_slice(&header);
            let total = if exp {
                buf[4..8].copy_from_slice(&self.field.experimenter.to_be_bytes());
                buf[8..].copy_from_slice(&self.inline);
                8 + body.len()
            } else {
                buf[4..4 + INLINE].copy_from_slice(&self.inline);
                4 + body.len()
            };
            let start = out.len();
            out.extend_from_slice(&buf);
            out.truncate(start + total);
        } else {
            out.extend_from_slice(&header);
            if exp {
                out.extend_from_slice(&u32::to_be_bytes(self.field.experimenter));
            }
            out.extend_from_slice(body);
        }
    }
}

/// One OXM TLV split into its parts, before it becomes an [`Oxm`].
struct OxmTlv<'a, 'x> {
    id: FieldId,
    masked: bool,
    value_len: usize,
    /// Value then mask.
    body: &'a [u8],
    /// The input from the body on (past the TLV too), for fixed-size copies.
    from_body: &'x [u8],
    /// The input after the TLV.
    rest: &'a [u8],
}

impl<'a, 'x> OxmTlv<'a, 'x> {
    /// Check the framing of the TLV at the start of `i`; `extended` starts at the same byte
    /// and may be longer.
    #[inline(always)]
    fn split(i: &'a [u8], extended: &'x [u8]) -> Result<OxmTlv<'a, 'x>, DecodeError> {
        let Some((h, after_header)) = i.split_first_chunk::<4>() else {
            return Err(DecodeError::Truncated {
                what: "oxm header",
                need: 4,
                have: i.len(),
            });
        };
        let h = u32::from_be_bytes(*h);
        let class = (h >> 16) as u16;
        let field = ((h >> 9) & 0x7f) as u8;
        let masked = h & 0x100 != 0;
        let len = (h & 0xff) as usize;
        let Some((tlv, rest)) = after_header.split_at_checked(len) else {
            return Err(DecodeError::Truncated {
                what: "oxm field",
                need: len,
                have: after_header.len(),
            });
        };
        let (id, body, body_at) = if class == CLASS_EXPERIMENTER {
            match tlv.split_first_chunk::<4>() {
                Some((exp, body)) => (
                    FieldId::experimenter(u32::from_be_bytes(*exp), field),
                    body,
                    8,
                ),
                _ => {
                    return Err(DecodeError::Truncated {
                        what: "oxm experimenter id",
                        need: 4,
                        have: tlv.len(),
                    });
                }
            }
        } else {
            (FieldId::new(class, field), tlv, 4)
        };
        if masked && !body.len().is_multiple_of(2) {
            return Err(DecodeError::BadLength {
                what: "masked oxm field",
                len,
                reason: "value and mask differ in length",
            });
        }
        Ok(OxmTlv {
            id,
            masked,
            value_len: if masked { body.len() / 2 } else { body.len() },
            body,
            from_body: extended.get(body_at..).unwrap_or(&[]),
            rest,
        })
    }

    /// Append the field, wrapped by `wrap` (e.g. into an action), to `out`. When the input has
    /// 32 bytes from the body on (the usual case inside a message) they are copied whole; the
    /// bytes past the body are never read back. Each path pushes its own value so the compiler
    /// can write it straight into the vector.
    #[inline(always)]
    fn push_into<T>(&self, out: &mut Vec<T>, wrap: impl Fn(Oxm) -> T) {
        match self.from_body.first_chunk::<INLINE>() {
            Some(chunk) if self.body.len() <= INLINE => {
                out.push(wrap(self.with_inline(*chunk)));
            }
            _ => out.push(wrap(Oxm::from_parts(
                self.id,
                self.value_len,
                self.masked,
                self.body,
            ))),
        }
    }

    #[inline(always)]
    fn with_inline(&self, inline: [u8; INLINE]) -> Oxm {
        Oxm {
            field: self.id,
            value_len: self.value_len as u8,
            masked: self.masked,
            inline,
            long: None,
        }
    }
}

// Equality, hashing and debug output look at the meaningful bytes only: the inline buffer's
// tail past the value and mask holds whatever followed the field on the wire.
impl PartialEq for Oxm {
    fn eq(&self, other: &Oxm) -> bool {
        self.field == other.field
            && self.value_len == other.value_len
            && self.masked == other.masked
            && self.body() == other.body()
    }
}

impl Eq for Oxm {}

impl std::hash::Hash for Oxm {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.field.hash(state);
        self.value_len.hash(state);
        self.masked.hash(state);
        self.body().hash(state);
    }
}

impl std::fmt::Debug for Oxm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oxm")
            .field("field", &self.field)
            .field("value", &self.value().as_slice())
            .field("mask", &self.mask().map(FieldValue::as_slice))
            .finish()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // eth_dst=f2:0b:a4:7d:f8:ea
    static ETH_DST_BYTES: [u8; 10] = [0x80, 0x00, 0x06, 0x06, 0xf2, 0x0b, 0xa4, 0x7d, 0xf8, 0xea];
    // ct_state=0/0x20 (NXM1 105, masked)
    static CT_STATE_BYTES: [u8; 12] = [0x00, 0x01, 0xd3, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x20];
    // ONF tcp_flags=0x002/0x0fff
    static TCP_FLAGS_BYTES: [u8; 12] = [
        0xff, 0xff, 0x55, 0x08, 0x4f, 0x4e, 0x46, 0x00, 0x00, 0x02, 0x0f, 0xff,
    ];

    fn round_trip(bytes: &[u8]) -> Oxm {
        let (rest, o) = Oxm::parse(bytes).unwrap();
        assert!(rest.is_empty());
        let mut out = BytesMut::new();
        o.emit(&mut out);
        assert_eq!(&out[..], bytes);
        assert_eq!(o.wire_len(), bytes.len());
        o
    }

    #[test]
    fn test_eth_dst() {
        let o = round_trip(&ETH_DST_BYTES);
        assert_eq!(o.field, FieldId::ETH_DST);
        assert_eq!(o.value().as_slice(), &[0xf2, 0x0b, 0xa4, 0x7d, 0xf8, 0xea]);
        assert_eq!(o.mask(), None);
    }

    #[test]
    fn test_ct_state_masked() {
        let o = round_trip(&CT_STATE_BYTES);
        assert_eq!(o.field, FieldId::new(CLASS_NXM1, 105));
        assert_eq!(o.field.info().unwrap().name, "ct_state");
        assert_eq!(o.mask_u128(), Some(0x20));
    }

    #[test]
    fn test_experimenter_tcp_flags() {
        let o = round_trip(&TCP_FLAGS_BYTES);
        assert_eq!(o.field, nxm::TCP_FLAGS);
        assert_eq!(o.value_u128(), 2);
    }

    #[test]
    fn test_truncated_and_bad_mask() {
        assert!(Oxm::parse(&ETH_DST_BYTES[..7]).unwrap_err().is_truncated());
        assert!(Oxm::parse(&[0x80, 0, 0x07, 0x03, 1, 2, 3]).is_err());
    }

    #[test]
    fn int_constructor_uses_field_width() {
        let o = Oxm::int(FieldId::ETH_TYPE, 0x0800, None);
        assert_eq!(o.value().as_slice(), &[0x08, 0x00]);
        assert_eq!(field_by_name("reg3").unwrap().id, nxm::reg(3));
    }
}
