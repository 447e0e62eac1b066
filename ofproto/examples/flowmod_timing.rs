//! Quick timing of FLOW_MOD decode and encode (the criterion benchmark in `benches/` is the
//! reference; this is a dependency-free sanity check): `cargo run --release -p ofproto --example flowmod_timing`.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

use bytes::BytesMut;
use ofproto::action::nicira::{CT_COMMIT, Ct, CtZone};
use ofproto::{Action, FlowMod, Match, Message, PortNo};

fn main() {
    let fm = FlowMod::add(3, 100)
        .cookie(0x1234)
        .matching(
            Match::new()
                .in_port(3)
                .eth_type(0x0800)
                .ip_proto(6)
                .ipv4_dst(
                    Ipv4Addr::new(10, 1, 0, 0),
                    Some(Ipv4Addr::new(255, 255, 0, 0)),
                )
                .tcp_dst(80)
                .reg(0, 5, None)
                .metadata(0x100, Some(0xff00)),
        )
        .apply(vec![
            Action::SetField(ofproto::Oxm::int(ofproto::nxm::reg(1), 7, None)),
            Action::Ct(Ct {
                flags: CT_COMMIT,
                zone: CtZone::Imm(5),
                recirc_table: 4,
                alg: 0,
                actions: vec![],
            }),
            Action::output(PortNo(2)),
        ])
        .goto(5);
    let msg = Message::FlowMod(fm);
    let bytes = msg.encode_to_vec(1);
    let n: u32 = std::env::var("OFPROTO_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    // OFPROTO_TIMING=decode|encode|stats runs one part only (for `perf stat` instruction counts).
    let only = std::env::var("OFPROTO_TIMING").unwrap_or_default();
    let t = Instant::now();
    for _ in 0..if only.is_empty() || only == "decode" {
        n
    } else {
        0
    } {
        black_box(Message::decode(black_box(&bytes)).ok());
    }
    let dec = t.elapsed().as_nanos() as f64 / f64::from(n);
    let mut out = BytesMut::with_capacity(4096);
    let t = Instant::now();
    for _ in 0..if only.is_empty() || only == "encode" {
        n
    } else {
        0
    } {
        out.clear();
        black_box(&msg).encode(1, &mut out);
        black_box(&out);
    }
    let enc = t.elapsed().as_nanos() as f64 / f64::from(n);
    println!(
        "FLOW_MOD of {} bytes: decode {dec:.1} ns, encode {enc:.1} ns",
        bytes.len()
    );

    // A flow-stats reply of 300 entries shaped like the flow mod above.
    let Message::FlowMod(fm) = &msg else { return };
    let entry = ofproto::multipart::FlowStats {
        table_id: fm.table_id,
        duration_sec: 10,
        duration_nsec: 5_000_000,
        priority: fm.priority,
        idle_timeout: 0,
        hard_timeout: 0,
        flags: 0,
        cookie: fm.cookie,
        packet_count: 7,
        byte_count: 700,
        matching: fm.matching.clone(),
        instructions: fm.instructions.clone(),
    };
    let reply = Message::MultipartReply(ofproto::multipart::MultipartReply {
        flags: 0,
        body: ofproto::multipart::MultipartReplyBody::Flow(vec![entry; 300]),
    });
    let bytes = reply.encode_to_vec(2);
    let m = (n / 300).max(1);
    let runs = if only == "stats" || only.is_empty() {
        m
    } else {
        0
    };
    let t = Instant::now();
    for _ in 0..runs {
        black_box(Message::decode(black_box(&bytes)).ok());
    }
    let per_entry = t.elapsed().as_nanos() as f64 / f64::from(m) / 300.0;
    println!(
        "OFPST_FLOW reply of 300 entries ({} bytes): decode {per_entry:.1} ns per entry",
        bytes.len()
    );
}
