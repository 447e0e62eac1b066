//! What the agent reads from a packet a watch flow punted: the client, the VIP, the protocol
//! and the service port; and the frame to re-inject, untagged (on the VXLAN bridge table 1
//! pushed the local VLAN before table 3 punted it, and the re-injected packet runs table 1
//! again).

use super::ServiceProtocol;
use ofproto::packet::frame;
use ofproto::packet::ip::ChecksumCheck;
use std::net::Ipv4Addr;

/// A punted first packet of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstPacket {
    pub client: Ipv4Addr,
    pub vip: Ipv4Addr,
    pub protocol: ServiceProtocol,
    pub svc_port: u16,
    /// The frame without 802.1Q tag.
    pub frame: Vec<u8>,
}

/// Why a punted packet is not a first packet the agent can balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FirstPacketError {
    #[error("not an Ethernet + IPv4 frame")]
    NotIpv4,
    #[error("IP protocol {0} is neither TCP nor UDP")]
    Protocol(u8),
    #[error("truncated transport header")]
    Truncated,
    #[error("a fragment without the transport header")]
    Fragment,
}

const TPID_8021Q: [u8; 2] = [0x81, 0x00];

/// Parse a punted frame (possibly 802.1Q-tagged).
pub fn parse(data: &[u8]) -> Result<FirstPacket, FirstPacketError> {
    let (_, ip, payload) =
        frame::parse_ipv4(data, ChecksumCheck::Ignore).map_err(|_| FirstPacketError::NotIpv4)?;
    let proto = u8::from(ip.protocol);
    let protocol =
        ServiceProtocol::from_ip_proto(proto).ok_or(FirstPacketError::Protocol(proto))?;
    if ip.frag_offset != 0 {
        return Err(FirstPacketError::Fragment);
    }
    let dst = payload.get(2..4).ok_or(FirstPacketError::Truncated)?;
    let svc_port = u16::from_be_bytes([dst[0], dst[1]]);
    let mut frame = data.to_vec();
    if data.get(12..14) == Some(&TPID_8021Q[..]) {
        frame.drain(12..16);
    }
    Ok(FirstPacket {
        client: ip.src_addr,
        vip: ip.dst_addr,
        protocol,
        svc_port,
        frame,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet (optionally tagged) + IPv4 + the first 4 bytes of a TCP/UDP header.
    fn frame(tagged: bool, proto: u8) -> Vec<u8> {
        let mut f = vec![2, 2, 10, 254, 0, 10, 2, 2, 10, 1, 1, 2];
        if tagged {
            f.extend([0x81, 0x00, 0x00, 0x02]);
        }
        f.extend([0x08, 0x00]);
        let mut ip = vec![
            0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, proto, 0, 0, 10, 1, 1, 2, 10, 254, 0, 10,
        ];
        // Header checksum.
        let sum: u32 = ip
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend(ip);
        f.extend([0x9c, 0x40, 0x00, 0x50, 0, 0, 0, 0]);
        f
    }

    #[test]
    fn reads_client_vip_protocol_port_and_strips_the_tag() {
        let untagged = frame(false, 6);
        let p = parse(&untagged).unwrap();
        assert_eq!(p.client, Ipv4Addr::new(10, 1, 1, 2));
        assert_eq!(p.vip, Ipv4Addr::new(10, 254, 0, 10));
        assert_eq!((p.protocol, p.svc_port), (ServiceProtocol::Tcp, 80));
        assert_eq!(p.frame, untagged);
        let tagged = parse(&frame(true, 17)).unwrap();
        assert_eq!(tagged.protocol, ServiceProtocol::Udp);
        assert_eq!(tagged.frame, frame(false, 17), "802.1Q tag removed");
    }

    #[test]
    fn other_protocols_and_garbage_are_refused() {
        assert_eq!(parse(&frame(false, 1)), Err(FirstPacketError::Protocol(1)));
        assert_eq!(parse(&[0u8; 10]), Err(FirstPacketError::NotIpv4));
    }
}
