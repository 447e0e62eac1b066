//! The packet a trace follows: header and pipeline fields by their `ovs-ofctl` name, and the
//! user-level description it is built from.

use crate::model::MacAddr;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `ct_state` bits (`ovs-fields(7)`).
pub mod ct {
    pub const NEW: u32 = 0x01;
    pub const EST: u32 = 0x02;
    pub const REL: u32 = 0x04;
    pub const RPL: u32 = 0x08;
    pub const INV: u32 = 0x10;
    pub const TRK: u32 = 0x20;
    pub const SNAT: u32 = 0x40;
    pub const DNAT: u32 = 0x80;

    /// `trk|new`-style text.
    pub fn text(state: u32) -> String {
        let names = [
            (TRK, "trk"),
            (NEW, "new"),
            (EST, "est"),
            (REL, "rel"),
            (RPL, "rpl"),
            (INV, "inv"),
            (SNAT, "snat"),
            (DNAT, "dnat"),
        ];
        let parts: Vec<&str> = names
            .iter()
            .filter(|(b, _)| state & b != 0)
            .map(|(_, n)| *n)
            .collect();
        if parts.is_empty() {
            "0".into()
        } else {
            parts.join("|")
        }
    }

    /// Parse `trk|new`, `trk,est` or `+trk+new`.
    pub fn parse(s: &str) -> Option<u32> {
        let mut state = 0;
        for part in s.split(['|', ',', '+', ' ']).filter(|p| !p.is_empty()) {
            state |= match part {
                "trk" => TRK,
                "new" => NEW,
                "est" => EST,
                "rel" => REL,
                "rpl" => RPL,
                "inv" => INV,
                "snat" => SNAT,
                "dnat" => DNAT,
                _ => return None,
            };
        }
        Some(state)
    }
}

/// The fields of a packet in the pipeline, by `ovs-ofctl` field name (`nw_dst`, `metadata`,
/// `vlan_vid`, `reg0`, `ct_state`...). A field that is not set reads as 0, as in OVS (an
/// untagged packet has `vlan_vid` 0, an untracked one `ct_state` 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields(BTreeMap<&'static str, u128>);

impl Fields {
    pub fn get(&self, name: &str) -> u128 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// Set bits `mask` of `name` to those of `value`.
    pub fn set_masked(&mut self, name: &'static str, value: u128, mask: u128) {
        let old = self.get(name);
        let new = (old & !mask) | (value & mask);
        if new == 0 {
            self.0.remove(name);
        } else {
            self.0.insert(name, new);
        }
    }

    pub fn set(&mut self, name: &'static str, value: u128) {
        self.set_masked(name, value, u128::MAX);
    }

    /// The fields that differ from `before`, as `name=value` in hex (for step effects).
    pub fn changes_from(&self, before: &Fields) -> Vec<(&'static str, u128)> {
        let mut names: Vec<&'static str> = self.0.keys().chain(before.0.keys()).copied().collect();
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .filter(|n| self.get(n) != before.get(n))
            .map(|n| (n, self.get(n)))
            .collect()
    }

    /// The IPv4 destination, if the packet is IPv4.
    pub fn ipv4_dst(&self) -> Option<Ipv4Addr> {
        (self.get("dl_type") == 0x0800).then(|| Ipv4Addr::from(self.get("nw_dst") as u32))
    }

    /// The destination address, IPv4 or IPv6.
    pub fn ip_dst(&self) -> Option<IpAddr> {
        match self.get("dl_type") {
            0x0800 => Some(IpAddr::V4(Ipv4Addr::from(self.get("nw_dst") as u32))),
            0x86dd => Some(IpAddr::V6(Ipv6Addr::from(self.get("ipv6_dst")))),
            0x0806 => Some(IpAddr::V4(Ipv4Addr::from(self.get("arp_tpa") as u32))),
            _ => None,
        }
    }
}

/// Transport protocol of a traced packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Tcp,
    Udp,
    Icmp,
    /// An ARP request for the destination address (IPv4 only).
    Arp,
}

impl std::str::FromStr for Proto {
    type Err = String;
    fn from_str(s: &str) -> Result<Proto, String> {
        match s {
            "tcp" => Ok(Proto::Tcp),
            "udp" => Ok(Proto::Udp),
            "icmp" => Ok(Proto::Icmp),
            "arp" => Ok(Proto::Arp),
            other => Err(format!(
                "unknown protocol {other:?}: use tcp, udp, icmp or arp"
            )),
        }
    }
}

/// A packet as a user describes it: where it enters and its headers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketSpec {
    pub in_port: u32,
    pub dl_src: MacAddr,
    pub dl_dst: MacAddr,
    /// 802.1Q VLAN id, when tagged.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// Tunnel key, for a packet arriving from a VTEP.
    #[serde(default)]
    pub tun_id: Option<u64>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: Proto,
    #[serde(default)]
    pub tp_src: u16,
    #[serde(default)]
    pub tp_dst: u16,
    /// TCP flags (`0x002` = SYN, the first packet of a connection).
    #[serde(default)]
    pub tcp_flags: u16,
}

impl PacketSpec {
    /// The pipeline fields of this packet.
    pub fn fields(&self) -> Fields {
        let mut f = Fields::default();
        f.set("in_port", u128::from(self.in_port));
        f.set("dl_src", mac_u128(self.dl_src));
        f.set("dl_dst", mac_u128(self.dl_dst));
        if let Some(v) = self.vlan {
            f.set("vlan_vid", u128::from(0x1000 | (v & 0xfff)));
        }
        if let Some(t) = self.tun_id {
            f.set("tun_id", u128::from(t));
        }
        if self.proto == Proto::Arp {
            f.set("dl_type", 0x0806);
            f.set("arp_op", 1);
            if let (IpAddr::V4(s), IpAddr::V4(d)) = (self.src, self.dst) {
                f.set("arp_spa", u128::from(u32::from(s)));
                f.set("arp_tpa", u128::from(u32::from(d)));
            }
            f.set("arp_sha", mac_u128(self.dl_src));
            return f;
        }
        let v6 = match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.set("dl_type", 0x0800);
                f.set("nw_src", u128::from(u32::from(s)));
                f.set("nw_dst", u128::from(u32::from(d)));
                false
            }
            (s, d) => {
                f.set("dl_type", 0x86dd);
                f.set("ipv6_src", u128::from(v6_of(s)));
                f.set("ipv6_dst", u128::from(v6_of(d)));
                true
            }
        };
        match self.proto {
            Proto::Tcp => {
                f.set("nw_proto", 6);
                f.set("tcp_src", u128::from(self.tp_src));
                f.set("tcp_dst", u128::from(self.tp_dst));
                f.set("tcp_flags", u128::from(self.tcp_flags));
            }
            Proto::Udp => {
                f.set("nw_proto", 17);
                f.set("udp_src", u128::from(self.tp_src));
                f.set("udp_dst", u128::from(self.tp_dst));
            }
            Proto::Icmp if v6 => {
                f.set("nw_proto", 58);
                f.set("icmpv6_type", 128);
            }
            Proto::Icmp => {
                f.set("nw_proto", 1);
                f.set("icmp_type", 8);
            }
            Proto::Arp => {}
        }
        f
    }

    /// The same packet as `ovs-appctl ofproto/trace` takes it (its `br_flow` argument).
    pub fn ovs_flow(&self) -> String {
        let mut s = String::new();
        let v6 = matches!(self.src, IpAddr::V6(_)) || matches!(self.dst, IpAddr::V6(_));
        let proto = match (self.proto, v6) {
            (Proto::Arp, _) => "arp",
            (Proto::Tcp, false) => "tcp",
            (Proto::Tcp, true) => "tcp6",
            (Proto::Udp, false) => "udp",
            (Proto::Udp, true) => "udp6",
            (Proto::Icmp, false) => "icmp",
            (Proto::Icmp, true) => "icmp6",
        };
        let _ = write!(
            s,
            "{proto},in_port={},dl_src={},dl_dst={}",
            self.in_port, self.dl_src, self.dl_dst
        );
        if let Some(v) = self.vlan {
            let _ = write!(s, ",dl_vlan={v}");
        }
        if let Some(t) = self.tun_id {
            let _ = write!(s, ",tun_id={t:#x}");
        }
        match self.proto {
            Proto::Arp => {
                let _ = write!(
                    s,
                    ",arp_op=1,arp_spa={},arp_tpa={},arp_sha={}",
                    self.src, self.dst, self.dl_src
                );
            }
            _ if v6 => {
                let _ = write!(s, ",ipv6_src={},ipv6_dst={}", self.src, self.dst);
            }
            _ => {
                let _ = write!(s, ",nw_src={},nw_dst={}", self.src, self.dst);
            }
        }
        match self.proto {
            Proto::Tcp => {
                let _ = write!(
                    s,
                    ",tcp_src={},tcp_dst={},tcp_flags={:#x}",
                    self.tp_src, self.tp_dst, self.tcp_flags
                );
            }
            Proto::Udp => {
                let _ = write!(s, ",udp_src={},udp_dst={}", self.tp_src, self.tp_dst);
            }
            Proto::Icmp if v6 => s.push_str(",icmpv6_type=128"),
            Proto::Icmp => s.push_str(",icmp_type=8"),
            Proto::Arp => {}
        }
        s
    }
}

fn v6_of(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V6(a) => a,
        IpAddr::V4(a) => a.to_ipv6_mapped(),
    }
}

pub fn mac_u128(m: MacAddr) -> u128 {
    m.0.iter().fold(0u128, |acc, b| (acc << 8) | u128::from(*b))
}

pub fn mac_of(v: u128) -> MacAddr {
    let b = (v as u64).to_be_bytes();
    MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_packet_has_its_fields_and_ovs_syntax() {
        let p = PacketSpec {
            in_port: 3,
            dl_src: MacAddr([2, 2, 10, 1, 1, 2]),
            dl_dst: MacAddr([2, 2, 10, 1, 1, 3]),
            vlan: None,
            tun_id: None,
            src: "10.1.1.2".parse().unwrap(),
            dst: "10.1.1.3".parse().unwrap(),
            proto: Proto::Tcp,
            tp_src: 40000,
            tp_dst: 80,
            tcp_flags: 2,
        };
        let f = p.fields();
        assert_eq!(f.get("nw_dst"), 0x0a01_0103);
        assert_eq!(f.get("tcp_dst"), 80);
        assert_eq!(f.get("vlan_vid"), 0);
        assert_eq!(f.ipv4_dst(), Some(Ipv4Addr::new(10, 1, 1, 3)));
        assert_eq!(
            p.ovs_flow(),
            "tcp,in_port=3,dl_src=02:02:0a:01:01:02,dl_dst=02:02:0a:01:01:03,nw_src=10.1.1.2,\
             nw_dst=10.1.1.3,tcp_src=40000,tcp_dst=80,tcp_flags=0x2"
        );
        assert_eq!(ct::text(ct::TRK | ct::NEW), "trk|new");
        assert_eq!(ct::parse("+trk+est"), Some(ct::TRK | ct::EST));
        assert_eq!(ct::parse("bogus"), None);
    }
}
