//! Whole-frame helpers for the packets a controller answers or originates: ARP replies,
//! gratuitous ARP, ICMP echo requests, and taking an Ethernet + ARP frame apart.
//!
//! Built frames are not padded to the 60-byte Ethernet minimum: OVS pads on output when a
//! physical port needs it, and PACKET_OUT carries the exact bytes given.

use core::net::Ipv4Addr;

use super::arp::{self, Operation};
use super::ethernet::{self, EtherType, EthernetAddress, Frame, VlanTag, expect_ethertype};
use super::icmpv4;
use super::ip::{ChecksumCheck, IpProtocol};
use super::ipv4;
use super::{ArpRepr, EthernetRepr, Icmpv4Repr, Ipv4Repr, Result};

/// Return a frame of `ethernet`'s header followed by `payload_len` bytes that `fill_payload`
/// writes.
fn ethernet_frame(
    ethernet: &EthernetRepr,
    payload_len: usize,
    fill_payload: impl FnOnce(&mut [u8]),
) -> Vec<u8> {
    let mut bytes = vec![0; ethernet.buffer_len() + payload_len];
    let mut frame = Frame::new_unchecked(&mut bytes[..]);
    ethernet.emit(&mut frame);
    fill_payload(frame.payload_mut());
    bytes
}

fn arp_frame(arp: &ArpRepr, dst_addr: EthernetAddress, vlan: Option<VlanTag>) -> Vec<u8> {
    let ethernet = EthernetRepr {
        src_addr: arp.source_hardware_addr,
        dst_addr,
        vlan,
        ethertype: EtherType::Arp,
    };
    ethernet_frame(&ethernet, arp.buffer_len(), |payload| {
        arp.emit(&mut arp::Packet::new_unchecked(payload));
    })
}

/// Return the Ethernet + ARP reply frame answering `request`: "`request.target_protocol_addr`
/// is at `resolved`", sent to the requester, with `vlan` as its tag if given.
pub fn arp_reply(request: &ArpRepr, resolved: EthernetAddress, vlan: Option<VlanTag>) -> Vec<u8> {
    let reply = ArpRepr {
        operation: Operation::Reply,
        source_hardware_addr: resolved,
        source_protocol_addr: request.target_protocol_addr,
        target_hardware_addr: request.source_hardware_addr,
        target_protocol_addr: request.source_protocol_addr,
    };
    arp_frame(&reply, request.source_hardware_addr, vlan)
}

/// Return a gratuitous ARP frame announcing that `ip` is at `mac`: a broadcast request whose
/// sender and target protocol addresses are both `ip` (RFC 5227 announcement).
pub fn gratuitous_arp(mac: EthernetAddress, ip: Ipv4Addr, vlan: Option<VlanTag>) -> Vec<u8> {
    let announcement = ArpRepr {
        operation: Operation::Request,
        source_hardware_addr: mac,
        source_protocol_addr: ip,
        target_hardware_addr: EthernetAddress::UNSPECIFIED,
        target_protocol_addr: ip,
    };
    arp_frame(&announcement, EthernetAddress::BROADCAST, vlan)
}

/// Return a broadcast ARP request frame: "who has `target_ip`? tell `ip` (at `mac`)".
pub fn arp_request(
    mac: EthernetAddress,
    ip: Ipv4Addr,
    target_ip: Ipv4Addr,
    vlan: Option<VlanTag>,
) -> Vec<u8> {
    let request = ArpRepr {
        operation: Operation::Request,
        source_hardware_addr: mac,
        source_protocol_addr: ip,
        target_hardware_addr: EthernetAddress::UNSPECIFIED,
        target_protocol_addr: target_ip,
    };
    arp_frame(&request, EthernetAddress::BROADCAST, vlan)
}

/// Return the Ethernet and ARP headers of an Ethernet + ARP frame (tagged or not).
///
/// Fails with a typed error if the frame is short, is not ARP, or is not Ethernet + IPv4 ARP.
pub fn parse_arp(bytes: &[u8]) -> Result<(EthernetRepr, ArpRepr)> {
    let frame = Frame::new_checked(bytes)?;
    let ethernet = EthernetRepr::parse(&frame)?;
    expect_ethertype(ethernet.ethertype, EtherType::Arp)?;
    let arp = ArpRepr::parse(&arp::Packet::new_checked(frame.payload())?)?;
    Ok((ethernet, arp))
}

/// An ICMP echo request to put in a PACKET_OUT, e.g. to probe a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpEchoRequest<'a> {
    /// Ethernet source.
    pub src_mac: EthernetAddress,
    /// Ethernet destination.
    pub dst_mac: EthernetAddress,
    /// 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// IPv4 source.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination.
    pub dst_ip: Ipv4Addr,
    /// IPv4 time to live.
    pub ttl: u8,
    /// ICMP identifier.
    pub ident: u16,
    /// ICMP sequence number.
    pub seq_no: u16,
    /// ICMP data.
    pub data: &'a [u8],
}

impl IcmpEchoRequest<'_> {
    /// Return the frame: Ethernet, IPv4 (identification 0, no flags, checksum filled) and ICMP
    /// (checksum filled).
    pub fn build(&self) -> Vec<u8> {
        let icmp = Icmpv4Repr::EchoRequest {
            ident: self.ident,
            seq_no: self.seq_no,
            data: self.data,
        };
        let ip = Ipv4Repr {
            src_addr: self.src_ip,
            dst_addr: self.dst_ip,
            protocol: IpProtocol::Icmp,
            payload_len: icmp.buffer_len(),
            ttl: self.ttl,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
        };
        let ethernet = EthernetRepr {
            src_addr: self.src_mac,
            dst_addr: self.dst_mac,
            vlan: self.vlan,
            ethertype: EtherType::Ipv4,
        };
        ethernet_frame(&ethernet, ip.buffer_len() + ip.payload_len, |payload| {
            let mut packet = ipv4::Packet::new_unchecked(payload);
            ip.emit(&mut packet);
            icmp.emit(&mut icmpv4::Packet::new_unchecked(packet.payload_mut()));
        })
    }
}

/// Return the IPv4 header of an Ethernet + IPv4 frame and the IPv4 payload, verifying the header
/// checksum as `checksum` says.
pub fn parse_ipv4(
    bytes: &[u8],
    checksum: ChecksumCheck,
) -> Result<(EthernetRepr, Ipv4Repr, &[u8])> {
    let frame = Frame::new_checked(bytes)?;
    let ethernet = EthernetRepr::parse(&frame)?;
    expect_ethertype(ethernet.ethertype, EtherType::Ipv4)?;
    let payload = &bytes[frame.header_len()..];
    let packet = ipv4::Packet::new_checked(payload)?;
    let ip = Ipv4Repr::parse(&packet, checksum)?;
    let start = packet.header_len();
    Ok((ethernet, ip, &payload[start..start + ip.payload_len]))
}

/// Length of an untagged Ethernet + ARP frame.
pub const ARP_FRAME_LEN: usize = ethernet::HEADER_LEN + arp::ETHERNET_IPV4_LEN;

#[cfg(test)]
mod test {
    use super::*;
    use crate::packet::{Error, Layer, UdpPacket, UdpRepr, ip::PseudoHeader};

    const HOST1: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
    const HOST2: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);

    // The frames below were printed by `ovs-ofctl compose-packet` (Open vSwitch 3.1), so they
    // pin these builders to what OVS itself considers correct.

    // eth_src=02:..:02,eth_dst=02:..:01,arp,arp_op=2,arp_spa=10.0.0.2,arp_tpa=10.0.0.1,
    // arp_sha=02:..:02,arp_tha=02:..:01
    static ARP_REPLY_BYTES: [u8; 42] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x0a, 0x00,
        0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x01,
    ];

    // eth_src=02:..:01,eth_dst=ff:..:ff,arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.1,
    // arp_sha=02:..:01
    static GARP_BYTES: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x01,
    ];

    /// The 64 data bytes `compose-packet` puts in ICMP and UDP: 0x00, 0x01, … 0x3f.
    fn compose_data() -> Vec<u8> {
        (0..64).collect()
    }

    /// eth_src=02:..:01,eth_dst=02:..:02,dl_type=0x0800,nw_src=10.0.0.1,nw_dst=10.0.0.2,
    /// nw_proto=1,nw_ttl=64,icmp_type=8,icmp_code=0
    fn icmp_echo_bytes() -> Vec<u8> {
        let mut bytes = vec![
            0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,
            0x45, 0x00, 0x00, 0x5c, 0x00, 0x00, 0x00, 0x00, 0x40, 0x01, 0x66, 0x9f, 0x0a, 0x00,
            0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0x13, 0xfc, 0x00, 0x00, 0x00, 0x00,
        ];
        bytes.extend(compose_data());
        bytes
    }

    /// eth_src=02:..:01,eth_dst=02:..:02,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_ttl=64,
    /// udp_src=5000,udp_dst=53
    fn udp_bytes() -> Vec<u8> {
        let mut bytes = vec![
            0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,
            0x45, 0x00, 0x00, 0x5c, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0x66, 0x8f, 0x0a, 0x00,
            0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x13, 0x88, 0x00, 0x35, 0x00, 0x48, 0xf3, 0x9a,
        ];
        bytes.extend(compose_data());
        bytes
    }

    fn request() -> ArpRepr {
        ArpRepr {
            operation: Operation::Request,
            source_hardware_addr: HOST1,
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
            target_hardware_addr: EthernetAddress::UNSPECIFIED,
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
        }
    }

    #[test]
    fn arp_reply_matches_ovs() {
        let reply = arp_reply(&request(), HOST2, None);
        assert_eq!(reply, ARP_REPLY_BYTES);
        assert_eq!(reply.len(), ARP_FRAME_LEN);
    }

    #[test]
    fn tagged_arp_reply_parses_back() {
        let tag = VlanTag {
            pcp: 0,
            dei: false,
            vid: 42,
        };
        let reply = arp_reply(&request(), HOST2, Some(tag));
        assert_eq!(reply.len(), ARP_FRAME_LEN + 4);
        let (ethernet, arp) = parse_arp(&reply).unwrap();
        assert_eq!(ethernet.vlan, Some(tag));
        assert_eq!(ethernet.dst_addr, HOST1);
        assert_eq!(arp.operation, Operation::Reply);
        assert_eq!(arp.source_hardware_addr, HOST2);
        assert_eq!(arp.source_protocol_addr, Ipv4Addr::new(10, 0, 0, 2));
    }

    #[test]
    fn gratuitous_arp_matches_ovs() {
        assert_eq!(
            gratuitous_arp(HOST1, Ipv4Addr::new(10, 0, 0, 1), None),
            GARP_BYTES
        );
    }

    #[test]
    fn arp_request_is_a_broadcast_who_has() {
        // The same bytes `ovs-ofctl compose-packet` gives for a request from 10.0.0.1 for
        // 10.0.0.1 (the gratuitous form); only the target address differs otherwise.
        assert_eq!(
            arp_request(
                HOST1,
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 1),
                None
            ),
            GARP_BYTES
        );
        let frame = arp_request(
            HOST1,
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            None,
        );
        let (ethernet, arp) = parse_arp(&frame).unwrap();
        assert!(ethernet.dst_addr.is_broadcast());
        assert_eq!(arp, request());
    }

    #[test]
    fn parse_arp_frame() {
        let (ethernet, arp) = parse_arp(&GARP_BYTES).unwrap();
        assert!(ethernet.dst_addr.is_broadcast());
        assert_eq!(arp.source_protocol_addr, arp.target_protocol_addr);
        assert_eq!(
            parse_arp(&icmp_echo_bytes()),
            Err(Error::Unsupported {
                layer: Layer::Ethernet,
                field: "ethertype",
                value: 0x0800
            })
        );
        assert!(matches!(
            parse_arp(&GARP_BYTES[..41]),
            Err(Error::Truncated {
                layer: Layer::Arp,
                ..
            })
        ));
    }

    #[test]
    fn icmp_echo_request_matches_ovs() {
        let data = compose_data();
        let frame = IcmpEchoRequest {
            src_mac: HOST1,
            dst_mac: HOST2,
            vlan: None,
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 0, 2),
            ttl: 64,
            ident: 0,
            seq_no: 0,
            data: &data,
        }
        .build();
        assert_eq!(frame, icmp_echo_bytes());

        let (_, ip, payload) = parse_ipv4(&frame, ChecksumCheck::Verify).unwrap();
        assert_eq!(ip.protocol, IpProtocol::Icmp);
        let icmp = icmpv4::Packet::new_checked(payload).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&icmp, ChecksumCheck::Verify),
            Ok(Icmpv4Repr::EchoRequest {
                ident: 0,
                seq_no: 0,
                data: &data
            })
        );
    }

    #[test]
    fn ovs_udp_frame_verifies_and_rebuilds() {
        let bytes = udp_bytes();
        let (ethernet, ip, payload) = parse_ipv4(&bytes, ChecksumCheck::Verify).unwrap();
        let pseudo = PseudoHeader::V4 {
            src: ip.src_addr,
            dst: ip.dst_addr,
        };
        let udp = UdpPacket::new_checked(payload).unwrap();
        let repr = UdpRepr::parse(&udp, &pseudo, ChecksumCheck::Verify).unwrap();
        assert_eq!((repr.src_port, repr.dst_port), (5000, 53));

        // Rebuild the frame layer by layer and get OVS's bytes back.
        let mut rebuilt = vec![0; bytes.len()];
        let mut frame = Frame::new_unchecked(&mut rebuilt[..]);
        ethernet.emit(&mut frame);
        let mut packet = ipv4::Packet::new_unchecked(frame.payload_mut());
        ip.emit(&mut packet);
        repr.emit(&mut UdpPacket::new_unchecked(packet.payload_mut()), &pseudo)
            .unwrap();
        assert_eq!(rebuilt, bytes);
    }
}
