//! The answer to a connection to a service port without providers: a TCP reset for TCP, an
//! ICMP (ICMPv6) port unreachable for UDP, as if the VIP itself refused it (what a host without a
//! listener does, and what kube-proxy does for a service without endpoints).
//!
//! Contract: [`answer`] reads the frame the reject flow sent up (possibly 802.1Q-tagged) and
//! builds the untagged frame to send back out of the client's port; anything it cannot parse
//! is an error, never a panic.

use ofproto::packet::frame;
use ofproto::packet::ip::ChecksumCheck;
use std::net::Ipv4Addr;

/// Why a punted packet gets no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RejectError {
    #[error("not an Ethernet + IPv4 or IPv6 frame")]
    NotIpv4,
    #[error("IP protocol {0} is neither TCP nor UDP")]
    Protocol(u8),
    #[error("truncated transport header")]
    Truncated,
    #[error("a TCP reset is never answered")]
    Reset,
}

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;

/// The one's-complement sum of `data`, folded (RFC 1071).
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for part in parts {
        let mut chunks = part.chunks_exact(2);
        for c in &mut chunks {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u32::from(u16::from_be_bytes([*last, 0]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn ipv4_header(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload_len: usize) -> Vec<u8> {
    let total = (20 + payload_len) as u16;
    let mut h = vec![0x45, 0];
    h.extend(total.to_be_bytes());
    h.extend([0, 0, 0x40, 0, 64, proto, 0, 0]);
    h.extend(src.octets());
    h.extend(dst.octets());
    let sum = checksum(&[&h]);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    h
}

/// The TCP reset answering the segment `payload` (header and data): ports swapped, acking it
/// (or taking its ACK as sequence number), checksum left 0.
fn reset_for(payload: &[u8]) -> Result<Vec<u8>, RejectError> {
    let h = payload.get(..20).ok_or(RejectError::Truncated)?;
    let flags = h[13];
    if flags & 0x04 != 0 {
        return Err(RejectError::Reset);
    }
    let seq = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let ack = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
    let data_off = usize::from(h[12] >> 4) * 4;
    let mut len = payload.len().saturating_sub(data_off) as u32;
    // SYN and FIN take a sequence number each.
    len += u32::from(flags & 0x02 != 0) + u32::from(flags & 0x01 != 0);
    let mut t = Vec::with_capacity(20);
    t.extend(&h[2..4]);
    t.extend(&h[0..2]);
    if flags & 0x10 != 0 {
        // RFC 793: a reset answering an ACK takes its sequence number from the ACK.
        t.extend(ack.to_be_bytes());
        t.extend(0u32.to_be_bytes());
        t.extend([0x50, 0x04]);
    } else {
        t.extend(0u32.to_be_bytes());
        t.extend(seq.wrapping_add(len).to_be_bytes());
        t.extend([0x50, 0x14]);
    }
    t.extend([0, 0, 0, 0, 0, 0]);
    Ok(t)
}

/// The reset or port unreachable answering `data`, untagged, from the VIP's MAC to the client:
/// IPv4 (TCP reset, ICMP port unreachable) or IPv6 (TCP reset, ICMPv6 port unreachable).
pub fn answer(data: &[u8]) -> Result<Vec<u8>, RejectError> {
    if let Some(v6) = ipv6_packet(data) {
        return answer_ipv6(data, v6);
    }
    let (_, ip, payload) =
        frame::parse_ipv4(data, ChecksumCheck::Ignore).map_err(|_| RejectError::NotIpv4)?;
    let eth = data.get(..12).ok_or(RejectError::NotIpv4)?;
    let (client_mac, vip_mac) = (&eth[6..12], &eth[..6]);
    let (client, vip) = (ip.src_addr, ip.dst_addr);
    let proto = u8::from(ip.protocol);
    let (l4_proto, l4) = match proto {
        TCP => {
            let mut t = reset_for(payload)?;
            let mut pseudo = Vec::with_capacity(12);
            pseudo.extend(vip.octets());
            pseudo.extend(client.octets());
            pseudo.extend([0, TCP]);
            pseudo.extend((t.len() as u16).to_be_bytes());
            let sum = checksum(&[&pseudo, &t]);
            t[16..18].copy_from_slice(&sum.to_be_bytes());
            (TCP, t)
        }
        UDP => {
            // The offending datagram's IP header (rebuilt: options are not kept) and first 8
            // bytes, as RFC 792 asks.
            let first = payload.get(..8.min(payload.len())).unwrap_or_default();
            let mut orig = ipv4_header(client, vip, UDP, payload.len());
            orig.extend(first);
            let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
            icmp.extend(orig);
            let sum = checksum(&[&icmp]);
            icmp[2..4].copy_from_slice(&sum.to_be_bytes());
            (ICMP, icmp)
        }
        other => return Err(RejectError::Protocol(other)),
    };
    let mut out = Vec::with_capacity(34 + l4.len());
    out.extend(client_mac);
    out.extend(vip_mac);
    out.extend([0x08, 0x00]);
    out.extend(ipv4_header(vip, client, l4_proto, l4.len()));
    out.extend(l4);
    Ok(out)
}

/// The offset of the IPv6 header in an (optionally 802.1Q-tagged) Ethernet frame carrying
/// IPv6.
fn ipv6_packet(data: &[u8]) -> Option<usize> {
    let at = match data.get(12..14)? {
        [0x81, 0x00] => 16,
        _ => 12,
    };
    (data.get(at..at + 2)? == [0x86, 0xdd]).then_some(at + 2)
}

/// The IPv6 pseudo-header of RFC 8200 section 8.1.
fn pseudo6(src: &[u8], dst: &[u8], len: usize, next: u8) -> Vec<u8> {
    let mut p = Vec::with_capacity(40);
    p.extend(src);
    p.extend(dst);
    p.extend((len as u32).to_be_bytes());
    p.extend([0, 0, 0, next]);
    p
}

/// [`answer`] for an IPv6 packet at offset `at` of `data` (no extension headers: the reject
/// flow matches TCP or UDP as the next header).
fn answer_ipv6(data: &[u8], at: usize) -> Result<Vec<u8>, RejectError> {
    let ip = data.get(at..at + 40).ok_or(RejectError::NotIpv4)?;
    let (client, vip) = (&ip[8..24], &ip[24..40]);
    let declared = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let rest = &data[at + 40..];
    let payload = rest.get(..declared).unwrap_or(rest);
    let (next, l4) = match ip[6] {
        TCP => {
            let mut t = reset_for(payload)?;
            let sum = checksum(&[&pseudo6(vip, client, t.len(), TCP), &t]);
            t[16..18].copy_from_slice(&sum.to_be_bytes());
            (TCP, t)
        }
        UDP => {
            // RFC 4443: destination unreachable, code 4 (port unreachable), quoting as much of
            // the invoking packet as fits in the minimum IPv6 MTU.
            let quoted = &data[at..(at + 40 + payload.len()).min(at + 1280 - 48)];
            let mut icmp = vec![1, 4, 0, 0, 0, 0, 0, 0];
            icmp.extend(quoted);
            let sum = checksum(&[&pseudo6(vip, client, icmp.len(), ICMPV6), &icmp]);
            icmp[2..4].copy_from_slice(&sum.to_be_bytes());
            (ICMPV6, icmp)
        }
        other => return Err(RejectError::Protocol(other)),
    };
    let mut out = Vec::with_capacity(54 + l4.len());
    out.extend(&data[6..12]);
    out.extend(&data[..6]);
    out.extend([0x86, 0xdd]);
    out.extend([0x60, 0, 0, 0]);
    out.extend((l4.len() as u16).to_be_bytes());
    out.extend([next, 64]);
    out.extend(vip);
    out.extend(client);
    out.extend(l4);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT_MAC: [u8; 6] = [2, 2, 10, 1, 1, 2];
    const VIP_MAC: [u8; 6] = [2, 2, 10, 254, 0, 10];

    /// Ethernet (optionally tagged) + IPv4 from 10.1.1.2 to the VIP + `l4`.
    fn frame(tagged: bool, proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut f = VIP_MAC.to_vec();
        f.extend(CLIENT_MAC);
        if tagged {
            f.extend([0x81, 0x00, 0x00, 0x02]);
        }
        f.extend([0x08, 0x00]);
        f.extend(ipv4_header(
            Ipv4Addr::new(10, 1, 1, 2),
            Ipv4Addr::new(10, 254, 0, 10),
            proto,
            l4.len(),
        ));
        f.extend(l4);
        f
    }

    fn syn() -> Vec<u8> {
        // 40000 → 80, seq 1000, SYN, window.
        let mut t = vec![0x9c, 0x40, 0x00, 0x50];
        t.extend(1000u32.to_be_bytes());
        t.extend(0u32.to_be_bytes());
        t.extend([0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        t
    }

    #[test]
    fn a_syn_gets_a_reset_acking_it_from_the_vip() {
        for tagged in [false, true] {
            let out = answer(&frame(tagged, TCP, &syn())).unwrap();
            assert_eq!(&out[..6], &CLIENT_MAC, "to the client");
            assert_eq!(&out[6..12], &VIP_MAC, "from the VIP's MAC");
            assert_eq!(&out[12..14], &[0x08, 0x00], "untagged");
            let ip = &out[14..34];
            assert_eq!(checksum(&[ip]), 0, "IP checksum");
            assert_eq!(&ip[12..16], &[10, 254, 0, 10]);
            assert_eq!(&ip[16..20], &[10, 1, 1, 2]);
            let t = &out[34..];
            assert_eq!(&t[..4], &[0x00, 0x50, 0x9c, 0x40], "ports swapped");
            assert_eq!(&t[8..12], &1001u32.to_be_bytes(), "acks the SYN");
            assert_eq!(t[13], 0x14, "RST+ACK");
            let mut pseudo = vec![10, 254, 0, 10, 10, 1, 1, 2, 0, TCP, 0, 20];
            pseudo.extend(t);
            assert_eq!(checksum(&[&pseudo]), 0, "TCP checksum");
        }
    }

    #[test]
    fn a_datagram_gets_port_unreachable_quoting_it() {
        let udp = [
            0x9c, 0x40, 0x00, 0x35, 0, 13, 0, 0, b'h', b'e', b'l', b'l', b'o',
        ];
        let out = answer(&frame(false, UDP, &udp)).unwrap();
        let ip = &out[14..34];
        assert_eq!(ip[9], ICMP);
        let icmp = &out[34..];
        assert_eq!(&icmp[..2], &[3, 3], "port unreachable");
        assert_eq!(checksum(&[icmp]), 0, "ICMP checksum");
        assert_eq!(&icmp[8 + 20..8 + 28], &udp[..8], "quotes the first 8 bytes");
    }

    #[test]
    fn resets_other_protocols_and_garbage_get_no_answer() {
        let mut rst = syn();
        rst[13] = 0x04;
        assert_eq!(answer(&frame(false, TCP, &rst)), Err(RejectError::Reset));
        assert_eq!(
            answer(&frame(false, 1, &[8, 0, 0, 0])),
            Err(RejectError::Protocol(1))
        );
        assert_eq!(
            answer(&frame(false, TCP, &[0; 4])),
            Err(RejectError::Truncated)
        );
        assert_eq!(answer(&[0u8; 10]), Err(RejectError::NotIpv4));
    }
    /// Ethernet + IPv6 from fd00::2 to the IPv6 VIP fd00:254::10 + `l4`.
    fn frame6(next: u8, l4: &[u8]) -> Vec<u8> {
        let mut f = VIP_MAC.to_vec();
        f.extend(CLIENT_MAC);
        f.extend([0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend((l4.len() as u16).to_be_bytes());
        f.extend([next, 64]);
        f.extend("fd00::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
        f.extend(VIP6.octets());
        f.extend(l4);
        f
    }

    const VIP6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0xfd00, 0x254, 0, 0, 0, 0, 0, 0x10);

    #[test]
    fn over_ipv6_a_syn_gets_a_reset_and_a_datagram_an_icmpv6_port_unreachable() {
        let client: std::net::Ipv6Addr = "fd00::2".parse().unwrap();
        let out = answer(&frame6(TCP, &syn())).unwrap();
        assert_eq!(&out[..6], &CLIENT_MAC);
        assert_eq!(&out[12..14], &[0x86, 0xdd]);
        assert_eq!(out[20], TCP);
        assert_eq!(&out[22..38], &VIP6.octets(), "from the VIP");
        assert_eq!(&out[38..54], &client.octets());
        let t = &out[54..];
        assert_eq!(&t[8..12], &1001u32.to_be_bytes(), "acks the SYN");
        assert_eq!(t[13], 0x14, "RST+ACK");
        let pseudo = pseudo6(&VIP6.octets(), &client.octets(), t.len(), TCP);
        assert_eq!(checksum(&[&pseudo, t]), 0, "TCP checksum");

        let udp = [
            0x9c, 0x40, 0x00, 0x35, 0, 13, 0, 0, b'h', b'e', b'l', b'l', b'o',
        ];
        let sent = frame6(UDP, &udp);
        let out = answer(&sent).unwrap();
        assert_eq!(out[20], ICMPV6);
        let icmp = &out[54..];
        assert_eq!(&icmp[..2], &[1, 4], "port unreachable");
        assert_eq!(&icmp[8..], &sent[14..], "quotes the whole datagram");
        let pseudo = pseudo6(&VIP6.octets(), &client.octets(), icmp.len(), ICMPV6);
        assert_eq!(checksum(&[&pseudo, icmp]), 0, "ICMPv6 checksum");
        assert_eq!(
            answer(&frame6(58, &[128, 0, 0, 0])),
            Err(RejectError::Protocol(58))
        );
    }
}
