//! The answer to a connection to a service port without providers: a TCP reset for TCP, an
//! ICMP port unreachable for UDP, as if the VIP itself refused it (what a host without a
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
    #[error("not an Ethernet + IPv4 frame")]
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

/// The reset or port unreachable answering `data`, untagged, from the VIP's MAC to the client.
pub fn answer(data: &[u8]) -> Result<Vec<u8>, RejectError> {
    let (_, ip, payload) =
        frame::parse_ipv4(data, ChecksumCheck::Ignore).map_err(|_| RejectError::NotIpv4)?;
    let eth = data.get(..12).ok_or(RejectError::NotIpv4)?;
    let (client_mac, vip_mac) = (&eth[6..12], &eth[..6]);
    let (client, vip) = (ip.src_addr, ip.dst_addr);
    let proto = u8::from(ip.protocol);
    let (l4_proto, l4) = match proto {
        TCP => {
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
}
