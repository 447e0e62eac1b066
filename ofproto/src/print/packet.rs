//! Packet-in and packet-out, and the flow OVS extracts from their payload (the line after the
//! header: `arp,vlan_tci=0x0000,dl_src=...` or `tcp,...,tcp_flags=syn tcp_csum:b366`).

use std::fmt::Write as _;

use crate::packet_in::PacketIn;
use crate::packet_out::PacketOut;

/// `OFP_NO_BUFFER`.
const NO_BUFFER: u32 = 0xffff_ffff;

/// ` total_len=... in_port=... (via no_match) data_len=... (unbuffered)` and the payload's flow.
pub(super) fn packet_in(out: &mut String, packet_in: &PacketIn) {
    if packet_in.table_id != 0 {
        let _ = write!(out, " table_id={}", packet_in.table_id);
    }
    if packet_in.cookie != u64::MAX {
        let _ = write!(out, " cookie={:#x}", packet_in.cookie);
    }
    let _ = write!(out, " total_len={}", packet_in.total_len);
    // OVS reads a packet-in's match loosely: fields it does not know are skipped, and it has
    // no in_phy_port in its flows.
    let matching = packet_in
        .matching
        .fields
        .iter()
        .filter(|field| {
            field.field != crate::oxm::FieldId::IN_PHY_PORT && field.field.info().is_some()
        })
        .fold(crate::Match::new(), |m, field| m.with(field.clone()));
    let matching = crate::format::format_match(&matching, None);
    // The match is printed even when empty (two spaces then).
    let _ = write!(
        out,
        " {matching} (via {}) data_len={}",
        packet_in.reason,
        packet_in.data.len()
    );
    buffer(out, packet_in.buffer_id);
    // Even an empty payload has a flow (all zeros) for OVS.
    out.push('\n');
    out.push_str(&packet_flow_text(&packet_in.data));
}

/// ` (unbuffered)` or ` buffer=0x00000005`.
pub(super) fn buffer(out: &mut String, buffer_id: u32) {
    if buffer_id == NO_BUFFER {
        out.push_str(" (unbuffered)");
    } else {
        let _ = write!(out, " buffer={buffer_id:#010x}");
    }
}

/// ` in_port=... actions=... data_len=...` and the payload's flow.
pub(super) fn packet_out(out: &mut String, packet_out: &PacketOut) {
    let _ = write!(out, " in_port={} actions=", packet_out.in_port);
    if packet_out.actions.is_empty() {
        out.push_str("drop");
    } else {
        crate::format::format_actions(out, &packet_out.actions);
    }
    if packet_out.buffer_id == NO_BUFFER {
        let _ = write!(out, " data_len={}", packet_out.data.len());
        if !packet_out.data.is_empty() {
            out.push('\n');
            out.push_str(&packet_flow_text(&packet_out.data));
        }
    } else {
        let _ = write!(out, " buffer={:#010x}", packet_out.buffer_id);
    }
}

/// The flow OVS extracts from a frame, in its `ofp-print` spelling, e.g.
/// `arp,vlan_tci=0x0000,dl_src=...,arp_op=1,...` or `tcp,...,tcp_flags=syn tcp_csum:b366`.
/// Covers Ethernet (one VLAN tag), ARP, IPv4 and IPv6 with TCP, UDP, SCTP and ICMP; other
/// EtherTypes print their `dl_type`.
pub(super) fn packet_flow_text(data: &[u8]) -> String {
    use crate::packet::{EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet};
    let Ok(frame) = EthernetFrame::new_checked(data) else {
        // Too short for an Ethernet header: OVS extracts an all-zero flow.
        return "vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,dl_type=0x0000"
            .into();
    };
    let ethertype = frame.payload_ethertype();
    let payload = frame.payload();
    let mut fields: Vec<String> = Vec::new();
    let mut suffix = String::new();
    // The transport protocol and its fields, if the IP header parses.
    let (shorthand, network): (Option<&str>, Vec<String>) = match ethertype {
        EtherType::Arp => (Some("arp"), arp_fields(payload)),
        EtherType::Ipv4 => match Ipv4Packet::new_checked(payload) {
            Ok(ip) => {
                let protocol = ip.protocol();
                let fragment = if ip.frag_offset() != 0 {
                    "later"
                } else if ip.more_frags() {
                    "first"
                } else {
                    "no"
                };
                let (name, transport) = transport_fields(
                    protocol,
                    ip.payload(),
                    fragment != "later",
                    false,
                    &mut suffix,
                );
                let mut network = vec![
                    format!("nw_src={}", ip.src_addr()),
                    format!("nw_dst={}", ip.dst_addr()),
                ];
                if name.is_none() {
                    network.push(format!("nw_proto={}", u8::from(protocol)));
                }
                network.push(format!("nw_tos={}", ip.dscp() << 2));
                network.push(format!("nw_ecn={}", ip.ecn()));
                network.push(format!("nw_ttl={}", ip.ttl()));
                network.push(format!("nw_frag={fragment}"));
                network.extend(transport);
                (Some(name.unwrap_or("ip")), network)
            }
            Err(_) => (Some("ip"), Vec::new()),
        },
        EtherType::Ipv6 => match Ipv6Packet::new_checked(payload) {
            Ok(ip) => {
                let protocol = ip.next_header();
                let (name, transport) =
                    transport_fields(protocol, ip.payload(), true, true, &mut suffix);
                let mut network = vec![
                    format!("ipv6_src={}", ip.src_addr()),
                    format!("ipv6_dst={}", ip.dst_addr()),
                    format!("ipv6_label={:#07x}", ip.flow_label()),
                ];
                if name.is_none() {
                    network.push(format!("nw_proto={}", u8::from(protocol)));
                }
                network.push(format!("nw_tos={}", ip.traffic_class() & 0xfc));
                network.push(format!("nw_ecn={}", ip.traffic_class() & 0x03));
                network.push(format!("nw_ttl={}", ip.hop_limit()));
                network.push("nw_frag=no".into());
                network.extend(transport);
                (Some(name.unwrap_or("ipv6")), network)
            }
            Err(_) => (Some("ipv6"), Vec::new()),
        },
        _ => (None, Vec::new()),
    };
    if let Some(name) = shorthand {
        fields.push(name.to_string());
    }
    match frame.vlan_tag() {
        Some(tag) => {
            fields.push(format!("dl_vlan={}", tag.vid));
            fields.push(format!("dl_vlan_pcp={}", tag.pcp));
            fields.push("vlan_tci1=0x0000".into());
        }
        None => fields.push("vlan_tci=0x0000".into()),
    }
    fields.push(format!("dl_src={}", frame.src_addr()));
    fields.push(format!("dl_dst={}", frame.dst_addr()));
    if shorthand.is_none() {
        fields.push(format!("dl_type={:#06x}", u16::from(ethertype)));
    }
    fields.extend(network);
    fields.join(",") + &suffix
}

/// The ARP fields of a flow. OVS takes them only from an Ethernet/IPv4 ARP header that is all
/// there, and keeps the opcode only when it fits in 8 bits; otherwise every field is zero.
fn arp_fields(payload: &[u8]) -> Vec<String> {
    let mut spa = [0u8; 4];
    let mut tpa = [0u8; 4];
    let mut sha = [0u8; 6];
    let mut tha = [0u8; 6];
    let mut op = 0u16;
    if let Some(arp) = payload.get(..28)
        && arp[..6] == [0, 1, 8, 0, 6, 4]
    {
        op = u16::from_be_bytes([arp[6], arp[7]]);
        if op > 0xff {
            op = 0;
        }
        sha.copy_from_slice(&arp[8..14]);
        spa.copy_from_slice(&arp[14..18]);
        tha.copy_from_slice(&arp[18..24]);
        tpa.copy_from_slice(&arp[24..28]);
    }
    let mac = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    vec![
        format!("arp_spa={}", std::net::Ipv4Addr::from(spa)),
        format!("arp_tpa={}", std::net::Ipv4Addr::from(tpa)),
        format!("arp_op={op}"),
        format!("arp_sha={}", mac(sha)),
        format!("arp_tha={}", mac(tha)),
    ]
}

/// The shorthand and fields of a transport header as OVS prints them in a packet's flow, and the
/// checksum suffix (` tcp_csum:...`). `with_ports` is false for later fragments.
fn transport_fields(
    protocol: crate::packet::IpProtocol,
    payload: &[u8],
    with_ports: bool,
    ipv6: bool,
    suffix: &mut String,
) -> (Option<&'static str>, Vec<String>) {
    use crate::packet::{IpProtocol, TcpPacket, UdpPacket};
    let name = |v4: &'static str, v6: &'static str| Some(if ipv6 { v6 } else { v4 });
    match protocol {
        IpProtocol::Tcp => {
            let mut fields = Vec::new();
            if let (true, Ok(tcp)) = (with_ports, TcpPacket::new_checked(payload)) {
                fields.push(format!("tp_src={}", tcp.src_port()));
                fields.push(format!("tp_dst={}", tcp.dst_port()));
                let flags = tcp.flags();
                let flags = if flags.0 == 0 {
                    "0".to_string()
                } else {
                    flags.to_string()
                };
                fields.push(format!("tcp_flags={flags}"));
                let _ = write!(suffix, " tcp_csum:{:x}", tcp.checksum());
            }
            (name("tcp", "tcp6"), fields)
        }
        IpProtocol::Udp => {
            let mut fields = Vec::new();
            if let (true, Ok(udp)) = (with_ports, UdpPacket::new_checked(payload)) {
                fields.push(format!("tp_src={}", udp.src_port()));
                fields.push(format!("tp_dst={}", udp.dst_port()));
                let _ = write!(suffix, " udp_csum:{:x}", udp.checksum());
            }
            (name("udp", "udp6"), fields)
        }
        IpProtocol::Sctp => {
            let mut fields = Vec::new();
            if let (true, Some(ports)) = (with_ports, payload.get(..12)) {
                fields.push(format!(
                    "tp_src={}",
                    u16::from_be_bytes([ports[0], ports[1]])
                ));
                fields.push(format!(
                    "tp_dst={}",
                    u16::from_be_bytes([ports[2], ports[3]])
                ));
                // SCTP's checksum is the CRC32c at offset 8.
                let checksum = u32::from_be_bytes([ports[8], ports[9], ports[10], ports[11]]);
                let _ = write!(suffix, " sctp_csum:{checksum:x}");
            }
            (name("sctp", "sctp6"), fields)
        }
        IpProtocol::Icmp | IpProtocol::Icmpv6 if (protocol == IpProtocol::Icmpv6) == ipv6 => {
            let mut fields = Vec::new();
            if let (true, Some(header)) = (with_ports, payload.get(..4)) {
                fields.push(format!("icmp_type={}", header[0]));
                fields.push(format!("icmp_code={}", header[1]));
                let checksum = u16::from_be_bytes([header[2], header[3]]);
                let label = if ipv6 { "icmp6_csum" } else { "icmp_csum" };
                let _ = write!(suffix, " {label}:{checksum:x}");
            }
            (name("icmp", "icmp6"), fields)
        }
        _ => (None, Vec::new()),
    }
}
