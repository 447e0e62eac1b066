//! `ofp_match` (OXM type): an ordered list of [`Oxm`] fields, its framing, a builder, and the
//! prerequisite check.
//!
//! Contract: fields keep their wire order so a decoded match re-encodes byte for byte. The
//! ovs-ofctl rendering (which reorders fields the way OVS does) is in [`crate::format`].

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::BytesMut;

use crate::nxm;
use crate::oxm::{FieldId, Oxm, Prerequisite};
use crate::wire::{DecodeError, EncodeError, PResult, fixed, pad8, take, u16p};

/// `OFPMT_OXM`.
pub const MATCH_TYPE_OXM: u16 = 1;

/// A flow match: the fields that must all hold.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Match {
    /// The fields, in wire order.
    pub fields: Vec<Oxm>,
}

impl Match {
    /// The empty match (matches every packet).
    pub fn new() -> Match {
        Match { fields: Vec::new() }
    }

    /// Parse an `ofp_match` including its padding.
    pub fn parse(i: &[u8]) -> PResult<'_, Match> {
        let mut m = Match::new();
        let rest = m.parse_into(i)?;
        Ok((rest, m))
    }

    /// Parse an `ofp_match` (with its padding) into `self`, replacing its fields; returns the
    /// input after it. Filling a match that already sits where it belongs (a flow mod's field)
    /// spares the caller a copy of the freshly written vector header, which stalls on the
    /// stores that just made it.
    pub(crate) fn parse_into<'a>(&mut self, i: &'a [u8]) -> Result<&'a [u8], DecodeError> {
        let (_, (kind, len)) = fixed(i, 4, "ofp_match", (u16p, u16p))?;
        let len = usize::from(len);
        if kind != MATCH_TYPE_OXM {
            return Err(DecodeError::Unsupported {
                what: "ofp_match type",
                value: u32::from(kind),
            });
        }
        if len < 4 {
            return Err(DecodeError::BadLength {
                what: "ofp_match",
                len,
                reason: "shorter than its 4-byte header",
            });
        }
        let (rest, body) = take(i, len + pad8(len), "ofp_match")?;
        // `with_capacity` allocates directly; `reserve` on the empty vector goes through the
        // (slower) growth path.
        self.fields = Vec::with_capacity(Oxm::count(&body[4..len]));
        let out = &mut self.fields;
        let mut at = 4;
        while at < len {
            // The field may be read with fixed-size loads running into what follows the match.
            let left = Oxm::parse_into(&body[at..len], &i[at..], out)?;
            at = len - left.len();
        }
        Ok(rest)
    }

    /// Encoded length without padding (the value of the `length` field).
    pub fn unpadded_len(&self) -> usize {
        4 + self.fields.iter().map(Oxm::wire_len).sum::<usize>()
    }

    /// Append the `ofp_match` with padding to `out`.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        out.extend_from_slice(&[0, MATCH_TYPE_OXM as u8, 0, 0]);
        for f in &self.fields {
            f.emit(out);
        }
        let len = out.len() - start;
        out[start + 2..start + 4].copy_from_slice(&(len as u16).to_be_bytes());
        crate::wire::put_zeros(out, pad8(len));
    }

    /// The field with this id, if present.
    pub fn get(&self, id: FieldId) -> Option<&Oxm> {
        self.fields.iter().find(|f| f.field == id)
    }

    fn exact(&self, ids: &[FieldId]) -> Option<u128> {
        self.fields
            .iter()
            .find(|f| ids.contains(&f.field) && !f.is_masked())
            .map(Oxm::value_u128)
    }

    fn eth_type_in(&self, types: &[u16]) -> bool {
        self.exact(&[FieldId::ETH_TYPE, FieldId::new(0, 3)])
            .is_some_and(|t| types.iter().any(|x| u128::from(*x) == t))
    }

    /// Check that every field is present once, masks are only on maskable fields, and every
    /// field's prerequisite holds (OpenFlow 1.3 §7.2.3.8), as a switch would on FLOW_MOD.
    pub fn check(&self) -> Result<(), EncodeError> {
        for (n, f) in self.fields.iter().enumerate() {
            let Some(info) = f.field.info() else { continue };
            if self.fields[..n].iter().any(|g| g.field == f.field) {
                return Err(EncodeError::DuplicateField(info.name));
            }
            if f.is_masked() && !info.maskable {
                return Err(EncodeError::NotMaskable(info.name));
            }
            let missing = |requires| {
                Err(EncodeError::MissingPrerequisite {
                    field: info.name,
                    requires,
                })
            };
            match info.prereq {
                Prerequisite::None => {}
                Prerequisite::InPort => {
                    if self.get(FieldId::IN_PORT).is_none() {
                        return missing("in_port");
                    }
                }
                Prerequisite::EthType(types) => {
                    if !self.eth_type_in(types) {
                        return missing(eth_type_text(types));
                    }
                }
                Prerequisite::IpProto(proto, types) => {
                    if !self.eth_type_in(types) {
                        return missing(eth_type_text(types));
                    }
                    if self.exact(&[FieldId::IP_PROTO, FieldId::new(0, 6)])
                        != Some(u128::from(proto))
                    {
                        return missing(match proto {
                            1 => "nw_proto=1",
                            6 => "nw_proto=6",
                            17 => "nw_proto=17",
                            58 => "nw_proto=58",
                            _ => "nw_proto=132",
                        });
                    }
                }
                Prerequisite::Icmpv6Type(types) => {
                    let t = self.exact(&[FieldId::ICMPV6_TYPE, FieldId::new(1, 21)]);
                    if !types.iter().any(|x| Some(u128::from(*x)) == t) {
                        return missing(if types.len() == 2 {
                            "icmpv6_type=135 or 136"
                        } else if types[0] == 135 {
                            "icmpv6_type=135"
                        } else {
                            "icmpv6_type=136"
                        });
                    }
                }
                Prerequisite::Vlan => {
                    // OFPVID_PRESENT must be set in an exact or masked vlan_vid.
                    let present = self
                        .get(FieldId::VLAN_VID)
                        .is_some_and(|v| v.value_u128() & 0x1000 != 0);
                    if !present {
                        return missing("vlan_vid with OFPVID_PRESENT");
                    }
                }
            }
        }
        Ok(())
    }

    /// Add a field, builder style.
    pub fn with(mut self, oxm: Oxm) -> Match {
        self.fields.push(oxm);
        self
    }

    fn int(self, id: FieldId, v: u128, m: Option<u128>) -> Match {
        self.with(Oxm::int(id, v, m))
    }

    /// `in_port`.
    pub fn in_port(self, port: u32) -> Match {
        self.int(FieldId::IN_PORT, port.into(), None)
    }
    /// `metadata`, optionally masked.
    pub fn metadata(self, v: u64, mask: Option<u64>) -> Match {
        self.int(FieldId::METADATA, v.into(), mask.map(u128::from))
    }
    /// `eth_dst` (`dl_dst`), optionally masked.
    pub fn eth_dst(self, mac: [u8; 6], mask: Option<[u8; 6]>) -> Match {
        self.with(Oxm::new(
            FieldId::ETH_DST,
            &mac,
            mask.as_ref().map(|m| &m[..]),
        ))
    }
    /// `eth_src` (`dl_src`), optionally masked.
    pub fn eth_src(self, mac: [u8; 6], mask: Option<[u8; 6]>) -> Match {
        self.with(Oxm::new(
            FieldId::ETH_SRC,
            &mac,
            mask.as_ref().map(|m| &m[..]),
        ))
    }
    /// `eth_type` (`dl_type`).
    pub fn eth_type(self, t: u16) -> Match {
        self.int(FieldId::ETH_TYPE, t.into(), None)
    }
    /// `vlan_vid` as on the wire (include `0x1000`, OFPVID_PRESENT, to match a tagged VLAN).
    pub fn vlan_vid(self, vid: u16, mask: Option<u16>) -> Match {
        self.int(FieldId::VLAN_VID, vid.into(), mask.map(u128::from))
    }
    /// `vlan_pcp`.
    pub fn vlan_pcp(self, pcp: u8) -> Match {
        self.int(FieldId::VLAN_PCP, pcp.into(), None)
    }
    /// `ip_dscp` (the 6-bit DSCP value).
    pub fn ip_dscp(self, dscp: u8) -> Match {
        self.int(FieldId::IP_DSCP, dscp.into(), None)
    }
    /// `ip_ecn`.
    pub fn ip_ecn(self, ecn: u8) -> Match {
        self.int(FieldId::IP_ECN, ecn.into(), None)
    }
    /// `ip_proto` (`nw_proto`).
    pub fn ip_proto(self, proto: u8) -> Match {
        self.int(FieldId::IP_PROTO, proto.into(), None)
    }
    /// `ipv4_src` (`nw_src`), optionally masked.
    pub fn ipv4_src(self, a: Ipv4Addr, mask: Option<Ipv4Addr>) -> Match {
        self.with(Oxm::new(
            FieldId::IPV4_SRC,
            &a.octets(),
            mask.map(|m| m.octets()).as_ref().map(|m| &m[..]),
        ))
    }
    /// `ipv4_dst` (`nw_dst`), optionally masked.
    pub fn ipv4_dst(self, a: Ipv4Addr, mask: Option<Ipv4Addr>) -> Match {
        self.with(Oxm::new(
            FieldId::IPV4_DST,
            &a.octets(),
            mask.map(|m| m.octets()).as_ref().map(|m| &m[..]),
        ))
    }
    /// `tcp_src`.
    pub fn tcp_src(self, port: u16) -> Match {
        self.int(FieldId::TCP_SRC, port.into(), None)
    }
    /// `tcp_dst`.
    pub fn tcp_dst(self, port: u16) -> Match {
        self.int(FieldId::TCP_DST, port.into(), None)
    }
    /// `udp_src`.
    pub fn udp_src(self, port: u16) -> Match {
        self.int(FieldId::UDP_SRC, port.into(), None)
    }
    /// `udp_dst`.
    pub fn udp_dst(self, port: u16) -> Match {
        self.int(FieldId::UDP_DST, port.into(), None)
    }
    /// `sctp_src`.
    pub fn sctp_src(self, port: u16) -> Match {
        self.int(FieldId::SCTP_SRC, port.into(), None)
    }
    /// `sctp_dst`.
    pub fn sctp_dst(self, port: u16) -> Match {
        self.int(FieldId::SCTP_DST, port.into(), None)
    }
    /// `icmpv4_type`.
    pub fn icmpv4_type(self, t: u8) -> Match {
        self.int(FieldId::ICMPV4_TYPE, t.into(), None)
    }
    /// `icmpv4_code`.
    pub fn icmpv4_code(self, c: u8) -> Match {
        self.int(FieldId::ICMPV4_CODE, c.into(), None)
    }
    /// `arp_op`.
    pub fn arp_op(self, op: u16) -> Match {
        self.int(FieldId::ARP_OP, op.into(), None)
    }
    /// `arp_spa`, optionally masked.
    pub fn arp_spa(self, a: Ipv4Addr, mask: Option<Ipv4Addr>) -> Match {
        self.with(Oxm::new(
            FieldId::ARP_SPA,
            &a.octets(),
            mask.map(|m| m.octets()).as_ref().map(|m| &m[..]),
        ))
    }
    /// `arp_tpa`, optionally masked.
    pub fn arp_tpa(self, a: Ipv4Addr, mask: Option<Ipv4Addr>) -> Match {
        self.with(Oxm::new(
            FieldId::ARP_TPA,
            &a.octets(),
            mask.map(|m| m.octets()).as_ref().map(|m| &m[..]),
        ))
    }
    /// `arp_sha`.
    pub fn arp_sha(self, mac: [u8; 6]) -> Match {
        self.with(Oxm::new(FieldId::ARP_SHA, &mac, None))
    }
    /// `arp_tha`.
    pub fn arp_tha(self, mac: [u8; 6]) -> Match {
        self.with(Oxm::new(FieldId::ARP_THA, &mac, None))
    }
    /// `ipv6_src`, optionally masked.
    pub fn ipv6_src(self, a: Ipv6Addr, mask: Option<Ipv6Addr>) -> Match {
        self.with(Oxm::new(
            FieldId::IPV6_SRC,
            &a.octets(),
            mask.map(|m| m.octets()).as_ref().map(|m| &m[..]),
        ))
    }
    /// `ipv6_dst`, optionally masked.
    pub fn ipv6_dst(self, a: Ipv6Addr, mask: Option<Ipv6Addr>) -> Match {
        self.with(Oxm::new(
            FieldId::IPV6_DST,
            &a.octets(),
            mask.map(|m| m.octets()).as_ref().map(|m| &m[..]),
        ))
    }
    /// `icmpv6_type`.
    pub fn icmpv6_type(self, t: u8) -> Match {
        self.int(FieldId::ICMPV6_TYPE, t.into(), None)
    }
    /// `icmpv6_code`.
    pub fn icmpv6_code(self, c: u8) -> Match {
        self.int(FieldId::ICMPV6_CODE, c.into(), None)
    }
    /// `ipv6_nd_target`.
    pub fn nd_target(self, a: Ipv6Addr) -> Match {
        self.with(Oxm::new(FieldId::IPV6_ND_TARGET, &a.octets(), None))
    }
    /// `mpls_label`.
    pub fn mpls_label(self, label: u32) -> Match {
        self.int(FieldId::MPLS_LABEL, label.into(), None)
    }
    /// `tunnel_id` (`tun_id`), OpenFlow 1.3 basic field, optionally masked.
    pub fn tun_id(self, id: u64, mask: Option<u64>) -> Match {
        self.int(FieldId::TUNNEL_ID, id.into(), mask.map(u128::from))
    }
    /// Nicira register `reg<n>` (0–15), optionally masked.
    pub fn reg(self, n: u8, v: u32, mask: Option<u32>) -> Match {
        self.int(nxm::reg(n), v.into(), mask.map(u128::from))
    }
    /// 64-bit register `xreg<n>` (0–7), optionally masked.
    pub fn xreg(self, n: u8, v: u64, mask: Option<u64>) -> Match {
        self.int(nxm::xreg(n), v.into(), mask.map(u128::from))
    }
    /// `tun_src` (Nicira `tun_ipv4_src`).
    pub fn tun_ipv4_src(self, a: Ipv4Addr) -> Match {
        self.with(Oxm::new(nxm::TUN_IPV4_SRC, &a.octets(), None))
    }
    /// `tun_dst` (Nicira `tun_ipv4_dst`).
    pub fn tun_ipv4_dst(self, a: Ipv4Addr) -> Match {
        self.with(Oxm::new(nxm::TUN_IPV4_DST, &a.octets(), None))
    }
    /// `ct_state`, value and mask of the `CT_*` flag bits.
    pub fn ct_state(self, v: u32, mask: Option<u32>) -> Match {
        self.int(nxm::CT_STATE, v.into(), mask.map(u128::from))
    }
    /// `ct_zone`.
    pub fn ct_zone(self, zone: u16) -> Match {
        self.int(nxm::CT_ZONE, zone.into(), None)
    }
    /// `ct_mark`, optionally masked.
    pub fn ct_mark(self, v: u32, mask: Option<u32>) -> Match {
        self.int(nxm::CT_MARK, v.into(), mask.map(u128::from))
    }
    /// `ct_label`, optionally masked.
    pub fn ct_label(self, v: u128, mask: Option<u128>) -> Match {
        self.int(nxm::CT_LABEL, v, mask)
    }
    /// `pkt_mark`, optionally masked.
    pub fn pkt_mark(self, v: u32, mask: Option<u32>) -> Match {
        self.int(nxm::PKT_MARK, v.into(), mask.map(u128::from))
    }
    /// `conj_id`.
    pub fn conj_id(self, id: u32) -> Match {
        self.int(nxm::CONJ_ID, id.into(), None)
    }
    /// `tcp_flags` as OVS encodes it in OpenFlow 1.3 (ONF experimenter field), optionally masked.
    pub fn tcp_flags(self, flags: u16, mask: Option<u16>) -> Match {
        self.int(nxm::TCP_FLAGS, flags.into(), mask.map(u128::from))
    }
}

fn eth_type_text(types: &[u16]) -> &'static str {
    match types.first() {
        Some(0x0800) if types.len() == 2 => "dl_type=0x0800 or 0x86dd",
        Some(0x0800) => "dl_type=0x0800",
        Some(0x86dd) => "dl_type=0x86dd",
        Some(0x0806) => "dl_type=0x0806 or 0x8035",
        Some(0x8847) => "dl_type=0x8847 or 0x8848",
        _ => "dl_type=0x88e7",
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // OFPMT_OXM, length 22: eth_type=0x0800, ct_state=0/0x20, 2 bytes padding.
    static MATCH_BYTES: [u8; 24] = [
        0x00, 0x01, 0x00, 0x16, 0x80, 0x00, 0x0a, 0x02, 0x08, 0x00, 0x00, 0x01, 0xd3, 0x08, 0, 0,
        0, 0, 0, 0, 0, 0x20, 0, 0,
    ];

    #[test]
    fn test_parse() {
        let (rest, m) = Match::parse(&MATCH_BYTES).unwrap();
        assert!(rest.is_empty());
        assert_eq!(m, Match::new().eth_type(0x0800).ct_state(0, Some(0x20)));
    }

    #[test]
    fn test_emit() {
        let m = Match::new().eth_type(0x0800).ct_state(0, Some(0x20));
        let mut out = BytesMut::new();
        m.emit(&mut out);
        assert_eq!(&out[..], &MATCH_BYTES[..]);
        assert_eq!(m.unpadded_len(), 22);
    }

    #[test]
    fn empty_match_is_eight_bytes() {
        let mut out = BytesMut::new();
        Match::new().emit(&mut out);
        assert_eq!(&out[..], &[0, 1, 0, 4, 0, 0, 0, 0]);
        assert_eq!(Match::parse(&out).unwrap().1, Match::new());
    }

    #[test]
    fn malformed() {
        assert!(Match::parse(&MATCH_BYTES[..20]).unwrap_err().is_truncated());
        assert!(matches!(
            Match::parse(&[0, 1, 0, 2, 0, 0, 0, 0]),
            Err(DecodeError::BadLength { .. })
        ));
        assert!(matches!(
            Match::parse(&[0, 0, 0, 4, 0, 0, 0, 0]),
            Err(DecodeError::Unsupported { .. })
        ));
    }

    #[test]
    fn prerequisites() {
        assert!(
            Match::new()
                .eth_type(0x0800)
                .ip_proto(6)
                .tcp_dst(80)
                .check()
                .is_ok()
        );
        assert_eq!(
            Match::new().tcp_dst(80).check(),
            Err(EncodeError::MissingPrerequisite {
                field: "tcp_dst",
                requires: "dl_type=0x0800 or 0x86dd"
            })
        );
        assert!(
            Match::new()
                .eth_type(0x0800)
                .ip_proto(17)
                .tcp_dst(80)
                .check()
                .is_err()
        );
        assert!(Match::new().vlan_pcp(3).check().is_err());
        assert!(
            Match::new()
                .vlan_vid(0x1005, None)
                .vlan_pcp(3)
                .check()
                .is_ok()
        );
        assert_eq!(
            Match::new().in_port(1).in_port(2).check(),
            Err(EncodeError::DuplicateField("in_port"))
        );
        assert!(Match::new().reg(0, 1, Some(0xff)).check().is_ok());
    }
}
