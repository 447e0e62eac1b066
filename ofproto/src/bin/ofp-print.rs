//! `ofp-print`: print OpenFlow 1.3 messages given as hex the way `ovs-ofctl ofp-print` does.
//!
//! Usage: `ofp-print [--separate] [HEX...]`. Each argument is one message; without arguments,
//! each non-empty line of standard input is one message. Whitespace inside the hex is ignored
//! (so `ovs-ofctl`'s spaced dumps paste as is). Each message prints as a header line,
//! `OFPT_FLOW_MOD (OF1.3) (xid=0x2):`, followed by its body in `ovs-ofctl` syntax.
//! `--separate` prints a record separator line (`\x1e`) after each message, for tools that feed
//! many messages at once and need to split the output.
//!
//! A line that is not hex, or that does not decode, is reported on standard error with its line
//! number and the reason; the others are still printed, and the exit status is 1.
//!
//! The bodies of flow mods, group mods and flow stats come from `ofproto`'s `Display` impls;
//! this binary only frames them and renders the simple messages itself.

use std::fmt::Write as _;
use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use ofproto::Message;
use ofproto::multipart::{MultipartReplyBody, MultipartRequestBody, MultipartType};

/// Why one input line could not be printed.
#[derive(Debug)]
enum LineError {
    /// A character that is neither a hex digit nor whitespace.
    BadDigit { column: usize, found: char },
    /// An odd number of hex digits.
    OddDigits { count: usize },
    /// No hex digits at all.
    Empty,
    /// The bytes are not one OpenFlow 1.3 message.
    Decode(ofproto::DecodeError),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::BadDigit { column, found } => {
                write!(f, "bad hex digit {found:?} at column {column}")
            }
            LineError::OddDigits { count } => {
                write!(
                    f,
                    "odd number of hex digits ({count}): the last byte is incomplete"
                )
            }
            LineError::Empty => f.write_str("no hex digits"),
            LineError::Decode(err) => write!(f, "cannot decode OpenFlow message: {err}"),
        }
    }
}

/// Parse hex digits, ignoring whitespace.
fn parse_hex(text: &str) -> Result<Vec<u8>, LineError> {
    let mut digits = Vec::with_capacity(text.len());
    for (index, c) in text.chars().enumerate() {
        if c.is_whitespace() {
            continue;
        }
        let value = c.to_digit(16).ok_or(LineError::BadDigit {
            column: index + 1,
            found: c,
        })?;
        // A hex digit is below 16.
        digits.push(value as u8);
    }
    if digits.is_empty() {
        return Err(LineError::Empty);
    }
    if digits.len() % 2 != 0 {
        return Err(LineError::OddDigits {
            count: digits.len(),
        });
    }
    Ok(digits.chunks_exact(2).map(|p| (p[0] << 4) | p[1]).collect())
}

/// Append `bytes` as `ovs_hex_dump` prints them: 16 per line, offset, a dash after the eighth
/// byte, and the printable characters between bars.
fn hex_dump(out: &mut String, bytes: &[u8]) {
    for (line, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "{:08x}  ", line * 16);
        for column in 0..16 {
            match chunk.get(column) {
                Some(b) => {
                    let separator = if column == 7 && chunk.len() > 8 {
                        '-'
                    } else {
                        ' '
                    };
                    let _ = write!(out, "{b:02x}{separator}");
                }
                None => out.push_str("   "),
            }
        }
        out.push('|');
        for column in 0..16 {
            out.push(match chunk.get(column) {
                Some(&b) if (0x20..0x7f).contains(&b) => char::from(b),
                Some(_) => '.',
                None => ' ',
            });
        }
        out.push_str("|\n");
    }
}

/// The name `ovs-ofctl` gives a message, e.g. `OFPT_FLOW_MOD` or `OFPST_FLOW reply`.
fn message_name(message: &Message) -> String {
    match message {
        Message::MultipartRequest(request) => format!("{} request", stats_name(request.kind())),
        Message::MultipartReply(reply) => format!("{} reply", stats_name(reply.kind())),
        Message::BundleControl(_) => "ONFT_BUNDLE_CONTROL".into(),
        Message::BundleAdd(_) => "ONFT_BUNDLE_ADD_MESSAGE".into(),
        Message::PacketIn2(_) => "NXT_PACKET_IN2".into(),
        Message::NxSetAsyncConfig(_) => "NXT_SET_ASYNC_CONFIG".into(),
        Message::SetControllerId(_) => "NXT_SET_CONTROLLER_ID".into(),
        Message::TlvTableMod(_) => "NXT_TLV_TABLE_MOD".into(),
        Message::TlvTableRequest => "NXT_TLV_TABLE_REQUEST".into(),
        Message::TlvTableReply(_) => "NXT_TLV_TABLE_REPLY".into(),
        other => match other.msg_type().name() {
            Some(name) => name.to_string(),
            None => format!("OFPT_UNKNOWN_{}", other.msg_type().code()),
        },
    }
}

/// `OFPST_*` name of a multipart type (OVS calls port stats `OFPST_PORT`).
fn stats_name(kind: MultipartType) -> String {
    match kind {
        MultipartType::PortStats => "OFPST_PORT".into(),
        other => match other.name() {
            Some(name) => name.replacen("OFPMP_", "OFPST_", 1),
            None => format!("OFPST_{}", other.code()),
        },
    }
}

/// `ovs-ofctl`'s spelling of a wire version list.
fn versions(bitmap: &[u32]) -> String {
    let mut list = Vec::new();
    for (word_index, word) in bitmap.iter().enumerate() {
        for bit in 0..32 {
            if word & (1 << bit) != 0 {
                list.push(format!("{:#04x}", word_index * 32 + bit));
            }
        }
    }
    list.join(", ")
}

/// Append the text after the header line's colon.
fn render_body(out: &mut String, message: &Message, depth: usize) {
    use ofproto::hello::HelloElem;
    match message {
        Message::Hello(hello) => {
            let bitmap = hello.elements.iter().find_map(|e| match e {
                HelloElem::VersionBitmap(words) => Some(versions(words)),
                HelloElem::Unknown { .. } => None,
            });
            // Without a bitmap, a 1.3 hello offers every version up to 1.3.
            let bitmap = bitmap.unwrap_or_else(|| "0x01, 0x02, 0x03, 0x04".into());
            let _ = write!(out, "\n version bitmap: {bitmap}");
        }
        Message::EchoRequest(payload) | Message::EchoReply(payload) => {
            let _ = write!(out, " {} bytes of payload", payload.len());
            if !payload.is_empty() {
                out.push('\n');
                hex_dump(out, payload);
            }
        }
        Message::Error(error) => {
            // OVS keeps the OpenFlow 1.0 name of (1, 2) in every version.
            let name = error.kind.to_string();
            let name = match name.as_str() {
                "OFPBRC_BAD_MULTIPART" => "OFPBRC_BAD_STAT",
                other => other,
            };
            let _ = write!(out, " {name}");
            out.push('\n');
            match Message::decode(&error.data) {
                // An error may echo an error that echoes an error...; a few levels are plenty.
                Ok((xid, failed)) if depth < MAX_NESTING => render(out, xid, &failed, depth + 1),
                Err(_) if error.data.len() < 8 => {
                    let _ = writeln!(
                        out,
                        "OpenFlow packet too short (only {} bytes):",
                        error.data.len()
                    );
                    hex_dump(out, &error.data);
                }
                _ => hex_dump(out, &error.data),
            }
        }
        Message::FeaturesRequest
        | Message::GetConfigRequest
        | Message::BarrierRequest
        | Message::BarrierReply
        | Message::GetAsyncRequest
        | Message::TlvTableRequest => {}
        Message::GetConfigReply(config) | Message::SetConfig(config) => {
            let frags = match config.flags & 3 {
                0 => "normal",
                1 => "drop",
                2 => "reassemble",
                _ => "nx-match",
            };
            let _ = write!(out, " frags={frags} miss_send_len={}", config.miss_send_len);
        }
        Message::RoleRequest(role) | Message::RoleReply(role) => {
            use ofproto::role::ControllerRole;
            let name = match role.role {
                ControllerRole::Master => "primary".to_string(),
                ControllerRole::Slave => "secondary".to_string(),
                other => other.to_string(),
            };
            let _ = write!(out, " role={name}");
            if role.role != ControllerRole::NoChange && role.generation_id != u64::MAX {
                let _ = write!(out, " generation_id={}", role.generation_id);
            }
        }
        Message::BundleControl(control) => {
            let _ = write!(
                out,
                "\n bundle_id={:#x} type={} flags={}",
                control.bundle_id,
                control.ctrl_type,
                bundle_flags(control.flags)
            );
        }
        Message::BundleAdd(add) => {
            let _ = write!(
                out,
                "\n bundle_id={:#x} flags={}\n",
                add.bundle_id,
                bundle_flags(add.flags)
            );
            render(out, add.xid, &add.message, depth + 1);
        }
        Message::FlowMod(flow_mod) => {
            let _ = write!(out, " {flow_mod}");
        }
        Message::GroupMod(group_mod) => {
            let _ = write!(out, "\n {group_mod}");
        }
        Message::MeterMod(meter_mod) => render_meter_mod(out, meter_mod),
        Message::PacketIn(packet_in) => {
            if packet_in.table_id != 0 {
                let _ = write!(out, " table_id={}", packet_in.table_id);
            }
            if packet_in.cookie != u64::MAX {
                let _ = write!(out, " cookie={:#x}", packet_in.cookie);
            }
            let _ = write!(out, " total_len={}", packet_in.total_len);
            let matching = ofproto::format::format_match(&packet_in.matching, None);
            if !matching.is_empty() {
                let _ = write!(out, " {matching}");
            }
            let _ = write!(
                out,
                " (via {}) data_len={}",
                packet_in.reason,
                packet_in.data.len()
            );
            if packet_in.buffer_id == NO_BUFFER {
                out.push_str(" (unbuffered)");
            } else {
                let _ = write!(out, " buffer={:#010x}", packet_in.buffer_id);
            }
            if !packet_in.data.is_empty() {
                out.push('\n');
                out.push_str(&packet_flow_text(&packet_in.data));
            }
        }
        Message::PacketOut(packet_out) => {
            let _ = write!(out, " in_port={} actions=", packet_out.in_port);
            if packet_out.actions.is_empty() {
                out.push_str("drop");
            } else {
                ofproto::format::format_actions(out, &packet_out.actions);
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
        Message::FeaturesReply(features) => {
            let _ = write!(
                out,
                " dpid:{:016x}\nn_tables:{}, n_buffers:{}",
                features.datapath_id, features.n_tables, features.n_buffers
            );
            if features.auxiliary_id != 0 {
                let _ = write!(out, ", auxiliary_id:{}", features.auxiliary_id);
            }
            out.push_str("\ncapabilities: ");
            out.push_str(&bit_names(features.capabilities, CAPABILITY_NAMES, " "));
        }
        Message::PortStatus(status) => {
            use ofproto::port::PortReason;
            let reason = match status.reason {
                PortReason::Add => "ADD".to_string(),
                PortReason::Delete => "DEL".to_string(),
                PortReason::Modify => "MOD".to_string(),
                PortReason::Unknown(code) => format!("reason{code}"),
            };
            let _ = write!(out, " {reason}: ");
            render_port(out, &status.desc);
        }
        Message::MultipartRequest(request) => match &request.body {
            MultipartRequestBody::PortDesc => out.push_str(" port=ANY"),
            MultipartRequestBody::Desc
            | MultipartRequestBody::Table
            | MultipartRequestBody::GroupFeatures
            | MultipartRequestBody::MeterFeatures => {}
            MultipartRequestBody::GroupDesc => out.push_str(" group_id=ALL"),
            MultipartRequestBody::Flow(r) | MultipartRequestBody::Aggregate(r) => {
                if r.table_id != 0xff {
                    let _ = write!(out, " table={}", r.table_id);
                }
                if r.out_port != ofproto::port::OFPP_ANY {
                    let _ = write!(out, " out_port={}", ofproto::PortNo(r.out_port));
                }
                let matching = ofproto::format::format_match(&r.matching, None);
                if !matching.is_empty() {
                    let _ = write!(out, " {matching}");
                }
            }
            MultipartRequestBody::PortStats { port_no } => {
                let _ = write!(out, " port_no={}", ofproto::PortNo(*port_no));
            }
            MultipartRequestBody::Queue { port_no, queue_id } => {
                let queue = match queue_id {
                    0xffff_ffff => "ALL".to_string(),
                    id => id.to_string(),
                };
                let _ = write!(out, " port={} queue={queue}", ofproto::PortNo(*port_no));
            }
            MultipartRequestBody::Group { group_id } => {
                let _ = write!(out, " group_id={}", group_text(*group_id));
            }
            MultipartRequestBody::Meter { meter_id }
            | MultipartRequestBody::MeterConfig { meter_id } => {
                let _ = write!(out, " meter={}", meter_text(*meter_id));
            }
            other => {
                let _ = write!(out, " {other:?}");
            }
        },
        Message::QueueGetConfigRequest(port) => {
            let _ = write!(out, " port={}", ofproto::PortNo(*port));
        }
        Message::FlowRemoved(removed) => {
            let matching = ofproto::format::format_match(&removed.matching, Some(removed.priority));
            let _ = write!(out, " {matching} reason={}", removed.reason);
            if removed.table_id != 0xff {
                let _ = write!(out, " table_id={}", removed.table_id);
            }
            if removed.cookie != 0 {
                let _ = write!(out, " cookie:{:#x}", removed.cookie);
            }
            let _ = write!(
                out,
                " duration{} idle{}",
                duration(removed.duration_sec, removed.duration_nsec),
                removed.idle_timeout
            );
            if removed.hard_timeout != 0 {
                let _ = write!(out, " hard{}", removed.hard_timeout);
            }
            let _ = write!(
                out,
                " pkts{} bytes{}",
                removed.packet_count, removed.byte_count
            );
        }
        Message::MultipartReply(reply) => match &reply.body {
            MultipartReplyBody::Flow(entries) => {
                for entry in entries {
                    let _ = write!(out, "\n{entry}");
                }
            }
            MultipartReplyBody::Desc(desc) => {
                let _ = write!(
                    out,
                    "\nManufacturer: {}\nHardware: {}\nSoftware: {}\nSerial Num: {}\nDP Description: {}",
                    desc.mfr_desc, desc.hw_desc, desc.sw_desc, desc.serial_num, desc.dp_desc
                );
            }
            MultipartReplyBody::PortDesc(ports) => {
                // OVS lists ports in port-number order.
                let mut ports: Vec<_> = ports.iter().collect();
                ports.sort_by_key(|port| port.port_no);
                for port in ports {
                    out.push_str("\n ");
                    render_port(out, port);
                }
            }
            other => {
                let _ = write!(out, "\n {other:?}");
            }
        },
        other => {
            let _ = write!(out, " {other:?}");
        }
    }
}

/// Append a meter mod body as `ovs-ofctl` prints it:
/// ` ADD meter=1 kbps burst bands=` and one `type=... rate=...` line per band.
fn render_meter_mod(out: &mut String, meter_mod: &ofproto::meter::MeterMod) {
    use ofproto::meter::{MeterBand, MeterModCommand};
    const OFPMF_KBPS: u16 = 1;
    const OFPMF_PKTPS: u16 = 2;
    const OFPMF_BURST: u16 = 4;
    const OFPMF_STATS: u16 = 8;
    let command = match meter_mod.command {
        MeterModCommand::Add => "ADD".to_string(),
        MeterModCommand::Modify => "MOD".to_string(),
        MeterModCommand::Delete => "DEL".to_string(),
        MeterModCommand::Unknown(code) => format!("cmd:{code}"),
    };
    let _ = write!(out, " {command} meter={} ", meter_text(meter_mod.meter_id));
    for (bit, name) in [
        (OFPMF_KBPS, "kbps"),
        (OFPMF_PKTPS, "pktps"),
        (OFPMF_BURST, "burst"),
        (OFPMF_STATS, "stats"),
    ] {
        if meter_mod.flags & bit != 0 {
            let _ = write!(out, "{name} ");
        }
    }
    out.push_str("bands=");
    let burst = meter_mod.flags & OFPMF_BURST != 0;
    for band in &meter_mod.bands {
        let (kind, rate, burst_size) = match band {
            MeterBand::Drop { rate, burst_size } => ("drop".to_string(), rate, burst_size),
            MeterBand::DscpRemark {
                rate, burst_size, ..
            } => ("dscp_remark".to_string(), rate, burst_size),
            MeterBand::Other {
                kind,
                rate,
                burst_size,
                ..
            } => (kind.to_string(), rate, burst_size),
        };
        let _ = write!(out, "\ntype={kind} rate={rate}");
        if burst {
            let _ = write!(out, " burst_size={burst_size}");
        }
        if let MeterBand::DscpRemark { prec_level, .. } = band {
            let _ = write!(out, " prec_level={prec_level}");
        }
    }
}

/// `OFP_NO_BUFFER`.
const NO_BUFFER: u32 = 0xffff_ffff;

/// The flow OVS extracts from a frame, in its `ofp-print` spelling, e.g.
/// `arp,vlan_tci=0x0000,dl_src=...,arp_op=1,...` or `tcp,...,tcp_flags=syn tcp_csum:b366`.
/// Covers Ethernet (one VLAN tag), ARP, IPv4 and IPv6 with TCP, UDP, SCTP and ICMP; other
/// EtherTypes print their `dl_type`.
fn packet_flow_text(data: &[u8]) -> String {
    use ofproto::packet::{ArpPacket, ArpRepr, EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet};
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
        EtherType::Arp => match ArpPacket::new_checked(payload).map(|p| ArpRepr::parse(&p)) {
            Ok(Ok(arp)) => (
                Some("arp"),
                vec![
                    format!("arp_spa={}", arp.source_protocol_addr),
                    format!("arp_tpa={}", arp.target_protocol_addr),
                    format!("arp_op={}", u16::from(arp.operation)),
                    format!("arp_sha={}", arp.source_hardware_addr),
                    format!("arp_tha={}", arp.target_hardware_addr),
                ],
            ),
            _ => (Some("arp"), Vec::new()),
        },
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

/// The shorthand and fields of a transport header as OVS prints them in a packet's flow, and the
/// checksum suffix (` tcp_csum:...`). `with_ports` is false for later fragments.
fn transport_fields(
    protocol: ofproto::packet::IpProtocol,
    payload: &[u8],
    with_ports: bool,
    ipv6: bool,
    suffix: &mut String,
) -> (Option<&'static str>, Vec<String>) {
    use ofproto::packet::{IpProtocol, TcpPacket, UdpPacket};
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

/// A group id as `ovs-ofctl` prints it.
fn group_text(group_id: u32) -> String {
    match group_id {
        0xffff_fffc => "ALL".into(),
        0xffff_ffff => "ANY".into(),
        id => id.to_string(),
    }
}

/// A meter id as `ovs-ofctl` prints it.
fn meter_text(meter_id: u32) -> String {
    match meter_id {
        0xffff_ffff => "all".into(),
        0xffff_fffe => "controller".into(),
        0xffff_fffd => "slowpath".into(),
        id => id.to_string(),
    }
}

/// A duration as `ovs-ofctl` prints it: seconds, and the fraction with trailing zeros removed
/// but at least three decimals (`3.048825s`, `0.020s`, `5s`).
fn duration(sec: u32, nsec: u32) -> String {
    if nsec == 0 {
        return format!("{sec}s");
    }
    let mut fraction = format!("{nsec:09}");
    while fraction.len() > 3 && fraction.ends_with('0') {
        fraction.pop();
    }
    format!("{sec}.{fraction}s")
}

/// `ofp_capabilities` bits and their `ovs-ofctl` names.
const CAPABILITY_NAMES: &[(u32, &str)] = &[
    (1 << 0, "FLOW_STATS"),
    (1 << 1, "TABLE_STATS"),
    (1 << 2, "PORT_STATS"),
    (1 << 3, "GROUP_STATS"),
    (1 << 5, "IP_REASM"),
    (1 << 6, "QUEUE_STATS"),
    (1 << 8, "PORT_BLOCKED"),
];

/// `ofp_port_config` bits (OpenFlow 1.3).
const PORT_CONFIG_NAMES: &[(u32, &str)] = &[
    (1 << 0, "PORT_DOWN"),
    (1 << 2, "NO_RECV"),
    (1 << 5, "NO_FWD"),
    (1 << 6, "NO_PACKET_IN"),
];

/// `ofp_port_state` bits (OpenFlow 1.3).
const PORT_STATE_NAMES: &[(u32, &str)] =
    &[(1 << 0, "LINK_DOWN"), (1 << 1, "BLOCKED"), (1 << 2, "LIVE")];

/// `ofp_port_features` bits.
const PORT_FEATURE_NAMES: &[(u32, &str)] = &[
    (1 << 0, "10MB-HD"),
    (1 << 1, "10MB-FD"),
    (1 << 2, "100MB-HD"),
    (1 << 3, "100MB-FD"),
    (1 << 4, "1GB-HD"),
    (1 << 5, "1GB-FD"),
    (1 << 6, "10GB-FD"),
    (1 << 7, "40GB-FD"),
    (1 << 8, "100GB-FD"),
    (1 << 9, "1TB-FD"),
    (1 << 10, "OTHER"),
    (1 << 11, "COPPER"),
    (1 << 12, "FIBER"),
    (1 << 13, "AUTO_NEG"),
    (1 << 14, "PAUSE"),
    (1 << 15, "PAUSE_ASYM"),
];

/// The names of the bits set in `value`, joined by `separator`; unnamed bits as hex; `0` if none.
fn bit_names(value: u32, names: &[(u32, &str)], separator: &str) -> String {
    let mut parts: Vec<String> = names
        .iter()
        .filter(|(bit, _)| value & bit != 0)
        .map(|(_, name)| (*name).to_string())
        .collect();
    let unnamed = names.iter().fold(value, |rest, (bit, _)| rest & !bit);
    if unnamed != 0 {
        parts.push(format!("{unnamed:#x}"));
    }
    if parts.is_empty() {
        "0".into()
    } else {
        parts.join(separator)
    }
}

/// Append a port description as `ovs-ofctl` prints it (number, name, address, then indented
/// config, state, features and speed lines).
fn render_port(out: &mut String, port: &ofproto::port::Port) {
    let [a, b, c, d, e, f] = port.hw_addr;
    let _ = write!(
        out,
        "{}({}): addr:{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}",
        ofproto::PortNo(port.port_no),
        port.name
    );
    let _ = write!(
        out,
        "\n     config:     {}",
        bit_names(port.config, PORT_CONFIG_NAMES, " ")
    );
    let _ = write!(
        out,
        "\n     state:      {}",
        bit_names(port.state, PORT_STATE_NAMES, " ")
    );
    for (label, features) in [
        ("current:    ", port.curr),
        ("advertised: ", port.advertised),
        ("supported:  ", port.supported),
        ("peer:       ", port.peer),
    ] {
        if features != 0 {
            let _ = write!(
                out,
                "\n     {label}{}",
                bit_names(features, PORT_FEATURE_NAMES, " ")
            );
        }
    }
    if port.curr_speed != 0 || port.max_speed != 0 {
        let _ = write!(
            out,
            "\n     speed: {} Mbps now, {} Mbps max",
            port.curr_speed / 1000,
            port.max_speed / 1000
        );
    }
}

/// `ovs-ofctl`'s spelling of bundle flags.
fn bundle_flags(flags: u16) -> String {
    let mut names = Vec::new();
    if flags & ofproto::bundle::BUNDLE_ATOMIC != 0 {
        names.push("atomic");
    }
    if flags & ofproto::bundle::BUNDLE_ORDERED != 0 {
        names.push("ordered");
    }
    if names.is_empty() {
        "0".into()
    } else {
        names.join(" ")
    }
}

/// How deep embedded messages (in errors and bundle adds) are decoded and printed; deeper ones
/// are hex-dumped, so hostile nesting cannot exhaust the stack.
const MAX_NESTING: usize = 8;

/// Append the whole rendering of one message: header line and body, no trailing newline.
fn render(out: &mut String, xid: u32, message: &Message, depth: usize) {
    let _ = write!(out, "{} (OF1.3) (xid={xid:#x}):", message_name(message));
    render_body(out, message, depth);
    while out.ends_with('\n') {
        out.pop();
    }
}

/// Print one line of input; errors name the line.
fn print_one(text: &str) -> Result<String, LineError> {
    let bytes = parse_hex(text)?;
    let (xid, message) = Message::decode(&bytes).map_err(LineError::Decode)?;
    let mut out = String::new();
    render(&mut out, xid, &message, 0);
    Ok(out)
}

fn main() -> ExitCode {
    let mut separate = false;
    let mut inputs = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--separate" => separate = true,
            "-h" | "--help" => {
                println!(
                    "usage: ofp-print [--separate] [HEX...]  (no HEX: one message per stdin line)"
                );
                return ExitCode::SUCCESS;
            }
            _ => inputs.push(arg),
        }
    }
    let from_stdin = inputs.is_empty();
    if from_stdin {
        for line in io::stdin().lock().lines() {
            match line {
                Ok(line) => inputs.push(line),
                Err(err) => {
                    eprintln!("ofp-print: cannot read standard input: {err}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let stdout = io::stdout();
    let mut stdout = stdout.lock();
    let mut failed = false;
    for (index, text) in inputs.iter().enumerate() {
        if from_stdin && text.trim().is_empty() {
            continue;
        }
        let rendered = match print_one(text) {
            Ok(rendered) => rendered,
            Err(err) => {
                let place = if from_stdin { "line" } else { "argument" };
                eprintln!("ofp-print: {place} {}: {err}", index + 1);
                failed = true;
                // Keep the output aligned with the input for `--separate` readers.
                String::new()
            }
        };
        let result = if separate {
            writeln!(stdout, "{rendered}\n\u{1e}")
        } else if rendered.is_empty() {
            Ok(())
        } else {
            writeln!(stdout, "{rendered}")
        };
        if result.is_err() {
            // The reader went away (e.g. `| head`); nothing more to do.
            return ExitCode::FAILURE;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
