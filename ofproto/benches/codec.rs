//! Codec benchmark: decode and encode a realistic corpus with `ofproto`, and the same corpus with
//! `rovs-openflow` (the other Rust OpenFlow codec on crates.io) in the same run.
//!
//! Corpus:
//! - 500 FLOW_MODs that Open vSwitch 3.1 encoded (`corpus/flow_mods.hex`, from the flows in
//!   `corpus/flow_mods.txt`: 3–8 match fields, 2–5 actions, Contiv-like tables);
//! - 300 PACKET_INs (in_port, reg0 and metadata in the match) carrying ARP requests, ICMP echo
//!   requests and TCP SYNs built with `ofproto::packet`;
//! - OFPST_FLOW multipart replies holding 4,000 flow stats entries (8 messages, each just under
//!   64 KiB with the MORE flag on all but the last), made from the FLOW_MOD corpus.
//!
//! `rovs-openflow` has no FLOW_MOD or PACKET_IN message type of its own to decode into, so its
//! decode is the sum of its parts: `Header::decode`, the 40 fixed bytes, `Match::decode` and
//! `InstructionList::decode` (for flow stats: `parse_flow_stats_reply` plus
//! `decoded_instructions`). Its encode is `Flow::to_message(..).encode()`. It cannot decode every
//! message of the corpus (no support for several Nicira fields and actions); the comparison is
//! made on the messages both decode ("common subset"), and the coverage is printed.
//!
//! Run: `cargo bench -p ofproto --bench codec`. After criterion's own report, a summary table
//! prints ns per message, messages/s and MB/s for each codec.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use criterion::{Criterion, Throughput};
use ofproto::Message;
use ofproto::packet::frame::{self, IcmpEchoRequest};
use ofproto::packet::{EthernetAddress, TcpFlags, TcpPacket, TcpRepr};

const FLOW_MODS_HEX: &str = include_str!("corpus/flow_mods.hex");
const FLOW_STATS_ENTRIES: usize = 4000;
const PACKET_INS: usize = 300;
/// Largest OpenFlow message.
const MAX_MESSAGE: usize = 65535;

fn from_hex(line: &str) -> Vec<u8> {
    (0..line.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&line[i..i + 2], 16).expect("corpus is hex"))
        .collect()
}

fn flow_mods() -> Vec<Vec<u8>> {
    FLOW_MODS_HEX
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(from_hex)
        .collect()
}

/// An OpenFlow 1.3 header.
fn header(kind: u8, length: usize, xid: u32) -> Vec<u8> {
    let mut bytes = vec![0x04, kind];
    bytes.extend_from_slice(&u16::try_from(length).unwrap().to_be_bytes());
    bytes.extend_from_slice(&xid.to_be_bytes());
    bytes
}

/// PACKET_INs with an ARP request, an ICMP echo request or a TCP SYN, in rotation.
fn packet_ins() -> Vec<Vec<u8>> {
    (0..PACKET_INS)
        .map(|i| {
            let n = u8::try_from(i % 250).unwrap() + 1;
            let host = EthernetAddress([0x02, 0, 0, 0, 1, n]);
            let gateway = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
            let host_ip = Ipv4Addr::new(10, 1, 1, n);
            let gateway_ip = Ipv4Addr::new(10, 1, 1, 254);
            let payload = match i % 3 {
                0 => frame::arp_request(host, host_ip, gateway_ip, None),
                1 => IcmpEchoRequest {
                    src_mac: host,
                    dst_mac: gateway,
                    vlan: None,
                    src_ip: host_ip,
                    dst_ip: gateway_ip,
                    ttl: 64,
                    ident: 0x1234,
                    seq_no: u16::from(n),
                    data: &[0x5a; 56],
                }
                .build(),
                _ => tcp_syn(host, gateway, host_ip, gateway_ip, u16::from(n)),
            };
            packet_in(&payload, u32::from(n), i)
        })
        .collect()
}

fn tcp_syn(
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src_ip: Ipv4Addr,
    dst_ip: Ipv4Addr,
    port: u16,
) -> Vec<u8> {
    use ofproto::packet::{EtherType, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet};
    let options = [
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0, 0, 0, 1, 0, 0, 0, 0,
    ];
    let tcp = TcpRepr {
        src_port: 40000 + port,
        dst_port: 443,
        seq_number: 1,
        ack_number: 0,
        flags: TcpFlags::SYN,
        window_len: 64240,
        urgent_at: 0,
        options: &options,
        payload: &[],
    };
    let ip = ofproto::packet::Ipv4Repr {
        src_addr: src_ip,
        dst_addr: dst_ip,
        protocol: IpProtocol::Tcp,
        payload_len: tcp.buffer_len(),
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    let ethernet = EthernetRepr {
        src_addr: src_mac,
        dst_addr: dst_mac,
        vlan: None,
        ethertype: EtherType::Ipv4,
    };
    let mut bytes = vec![0; ethernet.buffer_len() + ip.buffer_len() + tcp.buffer_len()];
    let mut frame = EthernetFrame::new_unchecked(&mut bytes[..]);
    ethernet.emit(&mut frame);
    let mut packet = Ipv4Packet::new_unchecked(frame.payload_mut());
    ip.emit(&mut packet);
    let pseudo = ofproto::packet::PseudoHeader::V4 {
        src: src_ip,
        dst: dst_ip,
    };
    tcp.emit(&mut TcpPacket::new_unchecked(packet.payload_mut()), &pseudo)
        .unwrap();
    bytes
}

/// An OpenFlow 1.3 PACKET_IN (no buffer, reason "action") whose match holds in_port, reg0 and
/// metadata, as OVS sends for a packet punted by a flow.
fn packet_in(data: &[u8], in_port: u32, i: usize) -> Vec<u8> {
    let mut oxms = Vec::new();
    oxms.extend_from_slice(&[0x80, 0x00, 0x00, 0x04]); // OXM_OF_IN_PORT
    oxms.extend_from_slice(&in_port.to_be_bytes());
    oxms.extend_from_slice(&[0x80, 0x00, 0x04, 0x08]); // OXM_OF_METADATA
    oxms.extend_from_slice(&(0x100u64 + i as u64).to_be_bytes());
    oxms.extend_from_slice(&[0x00, 0x01, 0x00, 0x04]); // NXM_NX_REG0
    oxms.extend_from_slice(&5u32.to_be_bytes());
    let match_len = 4 + oxms.len();
    let padded = match_len.div_ceil(8) * 8;
    let mut body = Vec::new();
    body.extend_from_slice(&0xffff_ffffu32.to_be_bytes()); // buffer id: none
    body.extend_from_slice(&u16::try_from(data.len()).unwrap().to_be_bytes()); // total len
    body.push(1); // reason: action
    body.push(3); // table id
    body.extend_from_slice(&0x1234u64.to_be_bytes()); // cookie
    body.extend_from_slice(&1u16.to_be_bytes()); // OFPMT_OXM
    body.extend_from_slice(&u16::try_from(match_len).unwrap().to_be_bytes());
    body.extend_from_slice(&oxms);
    body.resize(body.len() + padded - match_len, 0);
    body.extend_from_slice(&[0, 0]); // pad
    body.extend_from_slice(data);
    let mut message = header(10, 8 + body.len(), u32::try_from(i).unwrap());
    message.extend_from_slice(&body);
    message
}

/// OFPST_FLOW replies with `FLOW_STATS_ENTRIES` entries made from the FLOW_MODs: each entry is
/// the flow mod's table, priority, timeouts, flags and cookie, some counters, and its match and
/// instructions bytes as they are.
fn flow_stats_replies(flow_mods: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let entries: Vec<Vec<u8>> = (0..FLOW_STATS_ENTRIES)
        .map(|i| {
            let fm = &flow_mods[i % flow_mods.len()];
            let rest = &fm[48..]; // match + instructions
            let mut entry = Vec::with_capacity(48 + rest.len());
            entry.extend_from_slice(&u16::try_from(48 + rest.len()).unwrap().to_be_bytes());
            entry.push(fm[24]); // table id
            entry.push(0);
            entry.extend_from_slice(&(i as u32).to_be_bytes()); // duration sec
            entry.extend_from_slice(&123_000_000u32.to_be_bytes()); // duration nsec
            entry.extend_from_slice(&fm[30..32]); // priority
            entry.extend_from_slice(&fm[26..30]); // idle, hard timeout
            entry.extend_from_slice(&fm[44..46]); // flags
            entry.extend_from_slice(&[0; 4]);
            entry.extend_from_slice(&((i as u64) << 8 | 1).to_be_bytes()); // cookie, unique
            entry.extend_from_slice(&(i as u64 * 3).to_be_bytes()); // packets
            entry.extend_from_slice(&(i as u64 * 300).to_be_bytes()); // bytes
            entry.extend_from_slice(rest);
            entry
        })
        .collect();
    // Pack entries into messages of at most 64 KiB; all but the last carry MORE.
    let mut groups: Vec<Vec<&Vec<u8>>> = vec![Vec::new()];
    let mut size = 16;
    for entry in &entries {
        if size + entry.len() > MAX_MESSAGE {
            groups.push(Vec::new());
            size = 16;
        }
        size += entry.len();
        groups.last_mut().unwrap().push(entry);
    }
    let last = groups.len() - 1;
    groups
        .iter()
        .enumerate()
        .map(|(n, group)| {
            let body_len: usize = group.iter().map(|e| e.len()).sum();
            let mut message = header(19, 16 + body_len, 7);
            message.extend_from_slice(&1u16.to_be_bytes()); // OFPMP_FLOW
            message.extend_from_slice(&u16::from(n != last).to_be_bytes()); // MORE
            message.extend_from_slice(&[0; 4]);
            for entry in group {
                message.extend_from_slice(entry);
            }
            message
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// rovs-openflow adaptors: the same work expressed with its API.

mod rovs {
    use bytes::Bytes;
    use rovs_openflow::{Flow, FlowStatsEntry, Header, InstructionList, Match, PacketIn, Version};

    /// The parts of a FLOW_MOD rovs-openflow can decode into.
    pub struct FlowMod {
        pub xid: u32,
        pub flow: Flow,
    }

    fn be16(b: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    fn be64(b: &[u8], at: usize) -> u64 {
        u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
    }

    /// Decode a whole FLOW_MOD message.
    pub fn decode_flow_mod(message: &[u8]) -> rovs_openflow::Result<FlowMod> {
        let mut bytes = Bytes::copy_from_slice(message);
        let header = Header::decode(&mut bytes)?;
        let body = &message[8..];
        if body.len() < 40 {
            return Err(rovs_openflow::Error::Parse("flow mod too short".into()));
        }
        let (matching, match_len) = Match::decode(&body[40..])?;
        let instructions = InstructionList::decode(&body[40 + match_len..])?;
        let mut flow = Flow::add()
            .table(body[16])
            .priority(be16(body, 22))
            .cookie(be64(body, 0))
            .idle_timeout(be16(body, 18))
            .hard_timeout(be16(body, 20))
            .match_fields(matching)
            .instructions(instructions);
        flow.cookie_mask = be64(body, 8);
        Ok(FlowMod {
            xid: header.xid,
            flow,
        })
    }

    /// Encode a FLOW_MOD message.
    pub fn encode_flow_mod(flow_mod: &FlowMod) -> bytes::BytesMut {
        flow_mod
            .flow
            .to_message(Version::Of13, flow_mod.xid)
            .encode()
    }

    /// Decode a whole PACKET_IN message.
    pub fn decode_packet_in(message: &[u8]) -> rovs_openflow::Result<PacketIn> {
        let mut bytes = Bytes::copy_from_slice(message);
        let _header = Header::decode(&mut bytes)?;
        PacketIn::parse(bytes)
    }

    /// Decode a whole OFPST_FLOW reply, instructions included.
    pub fn decode_flow_stats(message: &[u8]) -> rovs_openflow::Result<usize> {
        let mut bytes = Bytes::copy_from_slice(message);
        let _header = Header::decode(&mut bytes)?;
        // The multipart header (type, flags, pad) precedes the entries; rovs-openflow's
        // reply parser is private, so walk the entries with its public entry decoder.
        let mut rest = &message[16..];
        let mut count = 0;
        while !rest.is_empty() {
            let (entry, length) = FlowStatsEntry::decode(rest)?;
            entry.decoded_instructions()?;
            rest = &rest[length.max(1).min(rest.len())..];
            count += 1;
        }
        Ok(count)
    }
}

// ---------------------------------------------------------------------------------------------

/// One corpus and the work to time over it.
struct Case<'a> {
    name: &'static str,
    messages: usize,
    bytes: usize,
    run: Box<dyn FnMut() + 'a>,
}

/// Time `case.run` (one pass over the corpus) for about `budget`; returns ns per pass (median of
/// passes).
fn time_pass(run: &mut dyn FnMut(), budget: Duration) -> f64 {
    for _ in 0..3 {
        run();
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget || samples.len() < 10 {
        let t = Instant::now();
        run();
        samples.push(t.elapsed().as_nanos() as f64);
    }
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn summary(cases: &mut [Case<'_>]) {
    println!();
    println!(
        "{:<44} {:>8} {:>12} {:>12} {:>10}",
        "summary (median pass)", "msgs", "ns/msg", "msgs/s", "MB/s"
    );
    for case in cases {
        let ns = time_pass(&mut case.run, Duration::from_secs(2));
        let per_msg = ns / case.messages as f64;
        let msgs_per_s = 1e9 / per_msg;
        let mb_per_s = case.bytes as f64 / (ns / 1e9) / 1e6;
        println!(
            "{:<44} {:>8} {:>12.1} {:>12.0} {:>10.1}",
            case.name, case.messages, per_msg, msgs_per_s, mb_per_s
        );
    }
}

/// `OFPROTO_BENCH_PROFILE=decode|encode`: loop FLOW_MOD decode (or encode) for 10 s and exit,
/// for `perf record` (criterion's own setup and summary would otherwise blur the profile).
fn profile_loop(what: &str, flow_mods: &[Vec<u8>]) {
    let decoded: Vec<(u32, Message)> = flow_mods
        .iter()
        .map(|m| Message::decode(m).unwrap())
        .collect();
    let mut out = BytesMut::with_capacity(MAX_MESSAGE);
    let start = Instant::now();
    let mut passes = 0u64;
    // The fastest pass is the figure least disturbed by other work on a shared machine.
    let mut best = Duration::MAX;
    while start.elapsed() < Duration::from_secs(10) {
        let pass = Instant::now();
        if what == "encode" {
            for (xid, m) in &decoded {
                out.clear();
                m.encode(*xid, &mut out);
                black_box(&out);
            }
        } else {
            for m in flow_mods {
                black_box(Message::decode(black_box(m)).unwrap());
            }
        }
        best = best.min(pass.elapsed());
        passes += 1;
    }
    let per_msg = start.elapsed().as_nanos() as f64 / (passes as f64 * flow_mods.len() as f64);
    let best_per_msg = best.as_nanos() as f64 / flow_mods.len() as f64;
    println!(
        "{what}: {per_msg:.1} ns per FLOW_MOD over {passes} passes (fastest pass {best_per_msg:.1} ns)"
    );
}

fn main() {
    let flow_mods = flow_mods();
    if let Ok(what) = std::env::var("OFPROTO_BENCH_PROFILE") {
        profile_loop(&what, &flow_mods);
        return;
    }
    let packet_ins = packet_ins();
    let stats = flow_stats_replies(&flow_mods);

    // ofproto must take the whole corpus; rovs-openflow only part of it.
    let decode_all = |messages: &[Vec<u8>]| -> Vec<(u32, Message)> {
        messages
            .iter()
            .map(|m| Message::decode(m).expect("ofproto decodes the corpus"))
            .collect()
    };
    let fm_decoded = decode_all(&flow_mods);
    let pi_decoded = decode_all(&packet_ins);
    let st_decoded = decode_all(&stats);
    for ((xid, message), bytes) in fm_decoded.iter().zip(&flow_mods) {
        assert_eq!(
            &message.encode_to_vec(*xid),
            bytes,
            "ofproto re-encodes exactly"
        );
    }

    let rovs_fm: Vec<(usize, rovs::FlowMod)> = flow_mods
        .iter()
        .enumerate()
        .filter_map(|(i, m)| rovs::decode_flow_mod(m).ok().map(|f| (i, f)))
        .collect();
    let rovs_exact = rovs_fm
        .iter()
        .filter(|(i, f)| rovs::encode_flow_mod(f)[..] == flow_mods[*i][..])
        .count();
    let common: Vec<Vec<u8>> = rovs_fm.iter().map(|(i, _)| flow_mods[*i].clone()).collect();
    let common_decoded = decode_all(&common);
    let rovs_pi = packet_ins
        .iter()
        .filter(|m| rovs::decode_packet_in(m).is_ok())
        .count();
    let rovs_stats = stats
        .iter()
        .filter(|m| rovs::decode_flow_stats(m).is_ok())
        .count();
    let total = |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>();
    println!(
        "corpus: {} FLOW_MODs ({} bytes), {} PACKET_INs ({} bytes), {} OFPST_FLOW replies with {} entries ({} bytes)",
        flow_mods.len(),
        total(&flow_mods),
        packet_ins.len(),
        total(&packet_ins),
        stats.len(),
        FLOW_STATS_ENTRIES,
        total(&stats)
    );
    println!(
        "rovs-openflow coverage: decodes {}/{} FLOW_MODs (re-encodes {} of them to the same bytes), {}/{} PACKET_INs, {}/{} OFPST_FLOW replies",
        rovs_fm.len(),
        flow_mods.len(),
        rovs_exact,
        rovs_pi,
        packet_ins.len(),
        rovs_stats,
        stats.len()
    );

    // Criterion's detailed measurements.
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
        .configure_from_args();
    {
        let mut group = c.benchmark_group("flow_mod");
        group.throughput(Throughput::Bytes(total(&flow_mods) as u64));
        group.bench_function("decode/ofproto", |b| {
            b.iter(|| {
                for m in &flow_mods {
                    black_box(Message::decode(black_box(m)).unwrap());
                }
            })
        });
        let mut out = BytesMut::with_capacity(MAX_MESSAGE);
        group.bench_function("encode/ofproto", |b| {
            b.iter(|| {
                for (xid, m) in &fm_decoded {
                    out.clear();
                    m.encode(*xid, &mut out);
                    black_box(&out);
                }
            })
        });
        group.throughput(Throughput::Bytes(total(&common) as u64));
        group.bench_function("decode/ofproto-common-subset", |b| {
            b.iter(|| {
                for m in &common {
                    black_box(Message::decode(black_box(m)).unwrap());
                }
            })
        });
        group.bench_function("decode/rovs-openflow-common-subset", |b| {
            b.iter(|| {
                for m in &common {
                    black_box(rovs::decode_flow_mod(black_box(m)).unwrap());
                }
            })
        });
        group.bench_function("encode/ofproto-common-subset", |b| {
            b.iter(|| {
                for (xid, m) in &common_decoded {
                    out.clear();
                    m.encode(*xid, &mut out);
                    black_box(&out);
                }
            })
        });
        group.bench_function("encode/rovs-openflow-common-subset", |b| {
            b.iter(|| {
                for (_, f) in &rovs_fm {
                    black_box(rovs::encode_flow_mod(f));
                }
            })
        });
        group.finish();
    }
    {
        let mut group = c.benchmark_group("packet_in");
        group.throughput(Throughput::Bytes(total(&packet_ins) as u64));
        group.bench_function("decode/ofproto", |b| {
            b.iter(|| {
                for m in &packet_ins {
                    black_box(Message::decode(black_box(m)).unwrap());
                }
            })
        });
        group.bench_function("decode/rovs-openflow", |b| {
            b.iter(|| {
                for m in &packet_ins {
                    black_box(rovs::decode_packet_in(black_box(m)).unwrap());
                }
            })
        });
        let mut out = BytesMut::with_capacity(MAX_MESSAGE);
        group.bench_function("encode/ofproto", |b| {
            b.iter(|| {
                for (xid, m) in &pi_decoded {
                    out.clear();
                    m.encode(*xid, &mut out);
                    black_box(&out);
                }
            })
        });
        group.finish();
    }
    {
        let mut group = c.benchmark_group("flow_stats_reply");
        group.throughput(Throughput::Bytes(total(&stats) as u64));
        group.bench_function("decode/ofproto", |b| {
            b.iter(|| {
                for m in &stats {
                    black_box(Message::decode(black_box(m)).unwrap());
                }
            })
        });
        group.bench_function("decode/rovs-openflow", |b| {
            b.iter(|| {
                for m in &stats {
                    black_box(rovs::decode_flow_stats(black_box(m)).ok());
                }
            })
        });
        let mut out = BytesMut::with_capacity(MAX_MESSAGE);
        group.bench_function("encode/ofproto", |b| {
            b.iter(|| {
                for (xid, m) in &st_decoded {
                    out.clear();
                    m.encode(*xid, &mut out);
                    black_box(&out);
                }
            })
        });
        group.finish();
    }
    c.final_summary();

    // A compact table: per-message cost and throughput, same corpus, same run.
    let mut out = BytesMut::with_capacity(MAX_MESSAGE);
    let mut out2 = BytesMut::with_capacity(MAX_MESSAGE);
    let mut out3 = BytesMut::with_capacity(MAX_MESSAGE);
    let mut out4 = BytesMut::with_capacity(MAX_MESSAGE);
    let mut cases = vec![
        Case {
            name: "FLOW_MOD decode  ofproto (all 500)",
            messages: flow_mods.len(),
            bytes: total(&flow_mods),
            run: Box::new(|| {
                for m in &flow_mods {
                    black_box(Message::decode(m).unwrap());
                }
            }),
        },
        Case {
            name: "FLOW_MOD encode  ofproto (all 500)",
            messages: fm_decoded.len(),
            bytes: total(&flow_mods),
            run: Box::new(|| {
                for (xid, m) in &fm_decoded {
                    out.clear();
                    m.encode(*xid, &mut out);
                    black_box(&out);
                }
            }),
        },
        Case {
            name: "FLOW_MOD decode  ofproto (common subset)",
            messages: common.len(),
            bytes: total(&common),
            run: Box::new(|| {
                for m in &common {
                    black_box(Message::decode(m).unwrap());
                }
            }),
        },
        Case {
            name: "FLOW_MOD decode  rovs-openflow (common)",
            messages: common.len(),
            bytes: total(&common),
            run: Box::new(|| {
                for m in &common {
                    black_box(rovs::decode_flow_mod(m).unwrap());
                }
            }),
        },
        Case {
            name: "FLOW_MOD encode  ofproto (common subset)",
            messages: common_decoded.len(),
            bytes: total(&common),
            run: Box::new(|| {
                for (xid, m) in &common_decoded {
                    out2.clear();
                    m.encode(*xid, &mut out2);
                    black_box(&out2);
                }
            }),
        },
        Case {
            name: "FLOW_MOD encode  rovs-openflow (common)",
            messages: rovs_fm.len(),
            bytes: total(&common),
            run: Box::new(|| {
                for (_, f) in &rovs_fm {
                    black_box(rovs::encode_flow_mod(f));
                }
            }),
        },
        Case {
            name: "PACKET_IN decode ofproto",
            messages: packet_ins.len(),
            bytes: total(&packet_ins),
            run: Box::new(|| {
                for m in &packet_ins {
                    black_box(Message::decode(m).unwrap());
                }
            }),
        },
        Case {
            name: "PACKET_IN decode rovs-openflow",
            messages: packet_ins.len(),
            bytes: total(&packet_ins),
            run: Box::new(|| {
                for m in &packet_ins {
                    black_box(rovs::decode_packet_in(m).unwrap());
                }
            }),
        },
        Case {
            name: "PACKET_IN encode ofproto",
            messages: pi_decoded.len(),
            bytes: total(&packet_ins),
            run: Box::new(|| {
                for (xid, m) in &pi_decoded {
                    out3.clear();
                    m.encode(*xid, &mut out3);
                    black_box(&out3);
                }
            }),
        },
        Case {
            name: "OFPST_FLOW reply decode ofproto",
            messages: stats.len(),
            bytes: total(&stats),
            run: Box::new(|| {
                for m in &stats {
                    black_box(Message::decode(m).unwrap());
                }
            }),
        },
        Case {
            name: "OFPST_FLOW reply decode rovs-openflow",
            messages: stats.len(),
            bytes: total(&stats),
            run: Box::new(|| {
                for m in &stats {
                    black_box(rovs::decode_flow_stats(m).ok());
                }
            }),
        },
        Case {
            name: "OFPST_FLOW reply encode ofproto",
            messages: st_decoded.len(),
            bytes: total(&stats),
            run: Box::new(|| {
                for (xid, m) in &st_decoded {
                    out4.clear();
                    m.encode(*xid, &mut out4);
                    black_box(&out4);
                }
            }),
        },
    ];
    summary(&mut cases);
    println!(
        "(flow stats: per message = per 64 KiB reply of ~{} entries; per entry = ns/msg / {})",
        FLOW_STATS_ENTRIES / stats.len(),
        FLOW_STATS_ENTRIES / stats.len()
    );
}
