//! The packet codecs (`ofproto::packet`) on arbitrary bytes must never panic; what parses must
//! emit back to a buffer that parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofproto::packet::{
    self, ArpPacket, ArpRepr, ChecksumCheck, EthernetFrame, EthernetRepr, Icmpv4Packet, Icmpv4Repr,
    Icmpv6Packet, Icmpv6Repr, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, PseudoHeader, TcpPacket,
    TcpRepr, UdpPacket, UdpRepr,
};
use std::net::{Ipv4Addr, Ipv6Addr};

fuzz_target!(|data: &[u8]| {
    let pseudo = PseudoHeader::V4 {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
    };
    let (v6_src, v6_dst) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);

    if let Ok(frame) = EthernetFrame::new_checked(data) {
        let _ = frame.to_string();
        if let Ok(repr) = EthernetRepr::parse(&frame) {
            let mut buffer = vec![0; repr.buffer_len()];
            repr.emit(&mut EthernetFrame::new_unchecked(&mut buffer[..]));
            assert_eq!(
                EthernetRepr::parse(&EthernetFrame::new_unchecked(&buffer[..])),
                Ok(repr)
            );
        }
    }
    let _ = packet::frame::parse_arp(data);
    let _ = packet::frame::parse_ipv4(data, ChecksumCheck::Verify);
    if let Ok(arp) = ArpPacket::new_checked(data) {
        if let Ok(repr) = ArpRepr::parse(&arp) {
            let mut buffer = vec![0; repr.buffer_len()];
            repr.emit(&mut ArpPacket::new_unchecked(&mut buffer[..]));
            assert_eq!(
                ArpRepr::parse(&ArpPacket::new_unchecked(&buffer[..])),
                Ok(repr)
            );
        }
    }
    if let Ok(ip) = Ipv4Packet::new_checked(data) {
        let _ = ip.to_string();
        if let Ok(repr) = Ipv4Repr::parse(&ip, ChecksumCheck::Ignore) {
            let mut buffer = vec![0; repr.buffer_len() + repr.payload_len];
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut buffer[..]));
            let reparsed = Ipv4Repr::parse(
                &Ipv4Packet::new_unchecked(&buffer[..]),
                ChecksumCheck::Verify,
            );
            assert_eq!(reparsed, Ok(repr));
        }
    }
    if let Ok(ip) = Ipv6Packet::new_checked(data) {
        let _ = ip.to_string();
        if let Ok(repr) = Ipv6Repr::parse(&ip) {
            let mut buffer = vec![0; repr.buffer_len() + repr.payload_len];
            repr.emit(&mut Ipv6Packet::new_unchecked(&mut buffer[..]));
            assert_eq!(
                Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&buffer[..])),
                Ok(repr)
            );
        }
    }
    if let Ok(icmp) = Icmpv4Packet::new_checked(data) {
        if let Ok(repr) = Icmpv4Repr::parse(&icmp, ChecksumCheck::Ignore) {
            let mut buffer = vec![0; repr.buffer_len()];
            repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buffer[..]));
            let packet = Icmpv4Packet::new_unchecked(&buffer[..]);
            assert_eq!(Icmpv4Repr::parse(&packet, ChecksumCheck::Verify), Ok(repr));
        }
    }
    if let Ok(icmp) = Icmpv6Packet::new_checked(data) {
        let _ = icmp.to_string();
        if let Ok(repr) = Icmpv6Repr::parse(&icmp, &v6_src, &v6_dst, ChecksumCheck::Ignore) {
            let mut buffer = vec![0; repr.buffer_len()];
            repr.emit(
                &mut Icmpv6Packet::new_unchecked(&mut buffer[..]),
                &v6_src,
                &v6_dst,
            );
            let packet = Icmpv6Packet::new_unchecked(&buffer[..]);
            assert_eq!(
                Icmpv6Repr::parse(&packet, &v6_src, &v6_dst, ChecksumCheck::Verify),
                Ok(repr)
            );
        }
    }
    if let Ok(tcp) = TcpPacket::new_checked(data) {
        let _ = tcp.to_string();
        if let Ok(repr) = TcpRepr::parse(&tcp, &pseudo, ChecksumCheck::Ignore) {
            let mut buffer = vec![0; repr.buffer_len()];
            if repr
                .emit(&mut TcpPacket::new_unchecked(&mut buffer[..]), &pseudo)
                .is_ok()
            {
                let packet = TcpPacket::new_unchecked(&buffer[..]);
                let reparsed = TcpRepr::parse(&packet, &pseudo, ChecksumCheck::Verify);
                assert_eq!(reparsed, Ok(repr));
            }
        }
    }
    if let Ok(udp) = UdpPacket::new_checked(data) {
        let _ = udp.to_string();
        if let Ok(repr) = UdpRepr::parse(&udp, &pseudo, ChecksumCheck::Ignore) {
            let mut buffer = vec![0; repr.buffer_len()];
            if repr
                .emit(&mut UdpPacket::new_unchecked(&mut buffer[..]), &pseudo)
                .is_ok()
            {
                let packet = UdpPacket::new_unchecked(&buffer[..]);
                let reparsed = UdpRepr::parse(&packet, &pseudo, ChecksumCheck::Verify);
                assert_eq!(reparsed, Ok(repr));
            }
        }
    }
});
