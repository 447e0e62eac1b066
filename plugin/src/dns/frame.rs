//! The Ethernet/IP/UDP around a punted DNS query, and the same around its answer: the answer
//! goes back to the endpoint as if the server it asked had sent it (addresses and ports
//! swapped). IPv4 and IPv6, an optional 802.1Q tag; the DNS message itself is
//! `hickory-proto`'s business.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_VLAN: u16 = 0x8100;
const UDP: u8 = 17;

/// A UDP datagram in an Ethernet frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub vlan: Option<u16>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub payload: Vec<u8>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

impl Datagram {
    /// Parse a frame; `None` if it is not an unfragmented UDP datagram.
    pub fn parse(frame: &[u8]) -> Option<Datagram> {
        let dst_mac: [u8; 6] = frame.get(0..6)?.try_into().ok()?;
        let src_mac: [u8; 6] = frame.get(6..12)?.try_into().ok()?;
        let (mut ethertype, mut at, mut vlan) = (u16_at(frame, 12)?, 14, None);
        if ethertype == ETH_VLAN {
            vlan = Some(u16_at(frame, 14)? & 0x0fff);
            ethertype = u16_at(frame, 16)?;
            at = 18;
        }
        let ip = frame.get(at..)?;
        let (src, dst, udp) = match ethertype {
            ETH_IPV4 => {
                let ihl = usize::from(ip.first()? & 0x0f) * 4;
                let flags_frag = u16_at(ip, 6)?;
                // More fragments, or not the first: not a whole datagram.
                if ip.get(9)? != &UDP || flags_frag & 0x3fff != 0 || ihl < 20 {
                    return None;
                }
                let total = usize::from(u16_at(ip, 2)?);
                let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
                let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
                (
                    IpAddr::V4(Ipv4Addr::from(src)),
                    IpAddr::V4(Ipv4Addr::from(dst)),
                    ip.get(ihl..total)?,
                )
            }
            ETH_IPV6 => {
                if ip.get(6)? != &UDP {
                    return None;
                }
                let len = usize::from(u16_at(ip, 4)?);
                let src: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
                let dst: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
                (
                    IpAddr::V6(Ipv6Addr::from(src)),
                    IpAddr::V6(Ipv6Addr::from(dst)),
                    ip.get(40..40 + len)?,
                )
            }
            _ => return None,
        };
        let udp_len = usize::from(u16_at(udp, 4)?);
        Some(Datagram {
            dst_mac,
            src_mac,
            vlan,
            src,
            dst,
            src_port: u16_at(udp, 0)?,
            dst_port: u16_at(udp, 2)?,
            payload: udp.get(8..udp_len)?.to_vec(),
        })
    }

    /// The reply to this datagram carrying `payload`: MACs, addresses and ports swapped.
    pub fn reply(&self, payload: Vec<u8>) -> Datagram {
        Datagram {
            dst_mac: self.src_mac,
            src_mac: self.dst_mac,
            vlan: self.vlan,
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
            payload,
        }
    }

    /// The whole Ethernet frame, checksums computed.
    pub fn to_frame(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(62 + self.payload.len());
        f.extend_from_slice(&self.dst_mac);
        f.extend_from_slice(&self.src_mac);
        if let Some(v) = self.vlan {
            f.extend_from_slice(&ETH_VLAN.to_be_bytes());
            f.extend_from_slice(&v.to_be_bytes());
        }
        let udp_len = 8 + self.payload.len();
        let mut udp = Vec::with_capacity(udp_len);
        udp.extend_from_slice(&self.src_port.to_be_bytes());
        udp.extend_from_slice(&self.dst_port.to_be_bytes());
        udp.extend_from_slice(&u16::try_from(udp_len).unwrap_or(u16::MAX).to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(&self.payload);
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.extend_from_slice(&ETH_IPV4.to_be_bytes());
                let total = u16::try_from(20 + udp_len).unwrap_or(u16::MAX);
                let mut ip = vec![0x45, 0];
                ip.extend_from_slice(&total.to_be_bytes());
                ip.extend_from_slice(&[0, 0, 0x40, 0, 64, UDP, 0, 0]);
                ip.extend_from_slice(&s.octets());
                ip.extend_from_slice(&d.octets());
                let sum = checksum(&[&ip]);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
                let mut pseudo = Vec::with_capacity(12);
                pseudo.extend_from_slice(&s.octets());
                pseudo.extend_from_slice(&d.octets());
                pseudo.extend_from_slice(&[0, UDP]);
                pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
                set_udp_checksum(&mut udp, &pseudo);
                f.extend_from_slice(&ip);
            }
            (s, d) => {
                let (s, d) = (v6_of(s), v6_of(d));
                f.extend_from_slice(&ETH_IPV6.to_be_bytes());
                f.extend_from_slice(&[0x60, 0, 0, 0]);
                f.extend_from_slice(&(udp.len() as u16).to_be_bytes());
                f.extend_from_slice(&[UDP, 64]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
                let mut pseudo = Vec::with_capacity(40);
                pseudo.extend_from_slice(&s.octets());
                pseudo.extend_from_slice(&d.octets());
                pseudo.extend_from_slice(&(udp.len() as u32).to_be_bytes());
                pseudo.extend_from_slice(&[0, 0, 0, UDP]);
                set_udp_checksum(&mut udp, &pseudo);
            }
        }
        f.extend_from_slice(&udp);
        f
    }
}

fn v6_of(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V6(a) => a,
        IpAddr::V4(a) => a.to_ipv6_mapped(),
    }
}

fn set_udp_checksum(udp: &mut [u8], pseudo: &[u8]) {
    let sum = match checksum(&[pseudo, udp]) {
        // 0 means "no checksum" in UDP; all ones is the same value.
        0 => 0xffff,
        s => s,
    };
    udp[6..8].copy_from_slice(&sum.to_be_bytes());
}

/// The Internet checksum (RFC 1071) over the concatenation of `parts`.
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    let mut odd: Option<u8> = None;
    for part in parts {
        for &b in *part {
            match odd.take() {
                Some(hi) => sum += u32::from(u16::from_be_bytes([hi, b])),
                None => odd = Some(b),
            }
        }
    }
    if let Some(hi) = odd {
        sum += u32::from(u16::from_be_bytes([hi, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(src: &str, dst: &str, vlan: Option<u16>) -> Datagram {
        Datagram {
            dst_mac: [2, 2, 10, 0, 0, 1],
            src_mac: [2, 2, 10, 0, 0, 5],
            vlan,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            src_port: 40000,
            dst_port: 53,
            payload: b"hello dns".to_vec(),
        }
    }

    #[test]
    fn frames_round_trip_with_valid_checksums_both_families() {
        for d in [
            sample("10.0.0.5", "10.0.0.1", None),
            sample("10.0.0.5", "10.0.0.1", Some(7)),
            sample("fd00::5", "fd00::1", None),
        ] {
            let frame = d.to_frame();
            assert_eq!(Datagram::parse(&frame), Some(d.clone()));
            let r = d.reply(b"answer".to_vec());
            assert_eq!((r.src, r.dst_port, r.dst_mac), (d.dst, 40000, d.src_mac));
            // A checksum over the IP header (and the UDP datagram with its pseudo header)
            // including the stored checksum comes out 0.
            let frame = r.to_frame();
            let at = if d.vlan.is_some() { 18 } else { 14 };
            if d.src.is_ipv4() {
                assert_eq!(checksum(&[&frame[at..at + 20]]), 0);
            }
        }
        assert_eq!(Datagram::parse(&[0; 20]), None);
        assert_eq!(Datagram::parse(&[]), None);
    }
}
