//! Differential tests against Open vSwitch 3.1 (issue 3, "Differential test against the real
//! OVS").
//!
//! 1. `ovs-ofctl -O OpenFlow13 add-flows` (plain and `--bundle`) sends the corpus
//!    (`tests/support/flows.txt`) to a recording switch, so we get the FLOW_MOD bytes OVS itself
//!    encodes. Each one is decoded by `ofproto`, printed by our `ofp-print` and compared with
//!    `ovs-ofctl ofp-print` of the same bytes, and re-encoded and compared byte for byte.
//! 2. The same corpus is added to a real bridge (private ovsdb-server + ovs-vswitchd on the dummy
//!    datapath, via `testbed::Ovs`). We read the bridge's flow table ourselves (OFPMP_FLOW), print
//!    the replies with our `ofp-print`, and compare each flow with `ovs-ofctl dump-flows` after
//!    stripping cookie, duration and counters. The whole replies are also compared with
//!    `ovs-ofctl ofp-print` of the same bytes, and re-encoded.
//!
//! Each test prints its agreement rate (`N/M`) and fails on any mismatch that is not in
//! `tests/support/allow-list.txt`, which gives a reason for every entry.
//!
//! Run: `cargo test -p ofproto --test differential_ovs -- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use ofproto::Message;
use support::corpus::{self, Check, CorpusFlow};
use support::of_client::OfClient;
use support::recording_switch::{Recorded, RecordingSwitch};
use support::tools::{self, hex};

const OUR_OFP_PRINT: &str = env!("CARGO_BIN_EXE_ofp-print");

/// Send `file` with `ovs-ofctl add-flows` (optionally `--bundle`) to a recording switch.
fn capture_flow_mods(file: &str, bundle: bool) -> Vec<Recorded> {
    let switch = RecordingSwitch::start().expect("recording switch");
    let target = switch.target();
    let mut args = vec!["-O", "OpenFlow13", "--timeout=60"];
    if bundle {
        args.push("--bundle");
    }
    args.extend(["add-flows", &target, file]);
    tools::run("ovs-ofctl", &args).expect("ovs-ofctl add-flows to the recording switch");
    switch.take()
}

/// The cookie field of an OpenFlow 1.3 FLOW_MOD (bytes 8..16).
fn flow_mod_cookie(message: &[u8]) -> u64 {
    u64::from_be_bytes(message[8..16].try_into().unwrap())
}

/// Tally of one comparison over the corpus.
#[derive(Default)]
struct Tally {
    total: usize,
    agreed: usize,
    allowed: Vec<String>,
    failed: Vec<String>,
}

impl Tally {
    fn record(
        &mut self,
        allow_list: &[corpus::Allowed],
        flow: &str,
        check: Check,
        ok: bool,
        detail: impl FnOnce() -> String,
    ) {
        self.total += 1;
        if ok {
            self.agreed += 1;
        } else if let Some(allowed) = corpus::allowed(allow_list, flow, check) {
            self.allowed
                .push(format!("{flow}\n    allowed: {}", allowed.reason));
        } else {
            self.failed.push(detail());
        }
    }

    fn report(&self, name: &str) -> bool {
        println!(
            "{name}: {}/{} agree ({} allowed by the allow-list, {} unexpected)",
            self.agreed,
            self.total,
            self.allowed.len(),
            self.failed.len()
        );
        for allowed in &self.allowed {
            println!("  ALLOWED {allowed}");
        }
        for failure in &self.failed {
            println!("  MISMATCH {failure}");
        }
        self.failed.is_empty()
    }
}

/// Decode, re-encode and print every message; returns our renderings (or the decode error).
fn decode_all(messages: &[Vec<u8>]) -> Vec<Result<(u32, Message), String>> {
    messages
        .iter()
        .map(|bytes| Message::decode(bytes).map_err(|e| format!("decode error: {e}")))
        .collect()
}

#[test]
fn flow_mods_encoded_by_ovs_print_and_reencode_identically() {
    testbed::require!(Ovs);
    let flows = corpus::load_flows();
    let allow_list = corpus::load_allow_list();
    let file = corpus::path("flows.txt");

    let recorded = capture_flow_mods(&file, false);
    assert_eq!(recorded.len(), flows.len(), "one FLOW_MOD per corpus flow");
    // The bundled run must carry the very same FLOW_MODs (only the xids differ).
    let bundled = capture_flow_mods(&file, true);
    assert_eq!(bundled.len(), flows.len());
    for (plain, in_bundle) in recorded.iter().zip(&bundled) {
        assert!(in_bundle.in_bundle && !plain.in_bundle);
        assert_eq!(
            plain.bytes[8..],
            in_bundle.bytes[8..],
            "bundle carries the same body"
        );
    }

    let messages: Vec<Vec<u8>> = recorded.into_iter().map(|r| r.bytes).collect();
    let by_cookie: BTreeMap<u64, &CorpusFlow> = flows.iter().map(|f| (f.cookie, f)).collect();
    let ours = tools::our_ofp_print_many(OUR_OFP_PRINT, &messages).expect("our ofp-print");
    let decoded = decode_all(&messages);

    let mut print = Tally::default();
    let mut encode = Tally::default();
    for ((bytes, our_text), decoded) in messages.iter().zip(&ours).zip(&decoded) {
        let flow = by_cookie
            .get(&flow_mod_cookie(bytes))
            .expect("every FLOW_MOD carries a corpus cookie");
        let line = &flow.line;
        let ovs_text = tools::ovs_ofp_print(bytes).expect("ovs-ofctl ofp-print");
        print.record(
            &allow_list,
            line,
            Check::Print,
            *our_text == ovs_text,
            || {
                format!(
                    "{line}\n    hex:  {}\n    ovs:  {ovs_text}\n    ours: {our_text}",
                    hex(bytes)
                )
            },
        );
        let reencoded = decoded
            .as_ref()
            .map(|(xid, message)| message.encode_to_vec(*xid));
        encode.record(
            &allow_list,
            line,
            Check::Encode,
            reencoded.as_ref().is_ok_and(|r| r == bytes),
            || match &reencoded {
                Ok(r) => format!(
                    "{line}\n    sent:      {}\n    reencoded: {}",
                    hex(bytes),
                    hex(r)
                ),
                Err(e) => format!("{line}\n    hex: {}\n    {e}", hex(bytes)),
            },
        );
    }
    let printed_ok = print.report("FLOW_MOD ofp-print vs ovs-ofctl ofp-print");
    let encoded_ok = encode.report("FLOW_MOD decode -> encode vs OVS bytes");
    assert!(printed_ok && encoded_ok, "unexpected mismatches, see above");
}

/// The `commands.txt` lines: `(strict, subcommand, argument)`.
fn load_commands() -> Vec<(bool, String, Option<String>)> {
    let text = std::fs::read_to_string(corpus::path("commands.txt")).expect("commands.txt");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let (strict, rest) = match line.strip_prefix("--strict ") {
                Some(rest) => (true, rest),
                None => (false, line),
            };
            let mut parts = rest.splitn(2, ' ');
            let command = parts.next().unwrap_or_default().to_string();
            (strict, command, parts.next().map(str::to_string))
        })
        .collect()
}

#[test]
fn modify_delete_group_and_meter_mods_print_and_reencode_identically() {
    testbed::require!(Ovs);
    let allow_list = corpus::load_allow_list();
    let switch = RecordingSwitch::start().expect("recording switch");
    let target = switch.target();
    let mut print = Tally::default();
    let mut encode = Tally::default();
    for (strict, command, argument) in load_commands() {
        let mut args = vec!["-O", "OpenFlow13", "--timeout=30"];
        if strict {
            args.push("--strict");
        }
        args.extend([command.as_str(), target.as_str()]);
        args.extend(argument.as_deref());
        tools::run("ovs-ofctl", &args).expect("ovs-ofctl to the recording switch");
        let label = format!(
            "{}{command} {}",
            if strict { "--strict " } else { "" },
            argument.as_deref().unwrap_or("")
        );
        let recorded = switch.take();
        assert!(!recorded.is_empty(), "{label}: nothing recorded");
        let messages: Vec<Vec<u8>> = recorded.into_iter().map(|r| r.bytes).collect();
        let ours = tools::our_ofp_print_many(OUR_OFP_PRINT, &messages).expect("our ofp-print");
        for (bytes, our_text) in messages.iter().zip(&ours) {
            let ovs_text = tools::ovs_ofp_print(bytes).expect("ovs-ofctl ofp-print");
            print.record(
                &allow_list,
                &label,
                Check::Print,
                *our_text == ovs_text,
                || {
                    format!(
                        "{label}\n    hex:  {}\n    ovs:  {ovs_text}\n    ours: {our_text}",
                        hex(bytes)
                    )
                },
            );
            let reencoded = Message::decode(bytes).map(|(xid, m)| m.encode_to_vec(xid));
            encode.record(
                &allow_list,
                &label,
                Check::Encode,
                reencoded.as_ref().is_ok_and(|r| r == bytes),
                || format!("{label}\n    sent: {}\n    got:  {reencoded:?}", hex(bytes)),
            );
        }
    }
    let printed_ok = print.report("MOD/DEL/GROUP/METER ofp-print vs ovs-ofctl ofp-print");
    let encoded_ok = encode.report("MOD/DEL/GROUP/METER decode -> encode vs OVS bytes");
    assert!(printed_ok && encoded_ok, "unexpected mismatches, see above");
}

/// Strip what `DumpedFlow::normalized` strips from a flow-stats line printed by `ofp-print`.
fn normalized_stats_line(line: &str) -> Option<(u64, String)> {
    let flow = testbed::DumpedFlow::parse(line).ok()?;
    Some((flow.cookie, flow.normalized()))
}

/// Add the groups and meters the corpus refers to, so OVS accepts every flow.
fn add_referenced_groups_and_meters(ovs: &testbed::Ovs) {
    for group in [
        "group_id=1,type=all,bucket=output:1",
        "group_id=2,type=all,bucket=output:2",
        "group_id=4294967040,type=all,bucket=output:3",
    ] {
        ovs.ofctl(&["add-group", "br0", group]).expect("add-group");
    }
    for meter in [
        "meter=1,kbps,band=type=drop,rate=1000",
        "meter=2,pktps,band=type=drop,rate=100",
        "meter=5,kbps,burst,band=type=drop,rate=1000,burst_size=100",
    ] {
        ovs.ofctl(&["add-meter", "br0", meter]).expect("add-meter");
    }
}

#[test]
fn flow_table_of_a_real_bridge_prints_like_dump_flows() {
    testbed::require!(Ovs);
    let flows = corpus::load_flows();
    let allow_list = corpus::load_allow_list();
    let ovs = testbed::Ovs::start(testbed::OvsOptions::dummy()).expect("private OVS");
    ovs.add_bridge("br0").expect("bridge");
    add_referenced_groups_and_meters(&ovs);
    ovs.ofctl(&["add-flows", "br0", &corpus::path("flows.txt")])
        .expect("OVS accepts the whole corpus");

    let dumped: BTreeMap<u64, String> = ovs
        .dump_flows("br0")
        .expect("dump-flows")
        .into_iter()
        .map(|f| (f.cookie, f.normalized()))
        .collect();
    assert_eq!(dumped.len(), flows.len(), "every corpus flow is installed");

    let mut client = OfClient::connect(&ovs.bridge_mgmt("br0")).expect("connect to br0");
    let replies = client.flow_stats().expect("flow stats");
    let ours = tools::our_ofp_print_many(OUR_OFP_PRINT, &replies).expect("our ofp-print");

    // Whole replies: our ofp-print and re-encoding against OVS.
    let mut whole = Tally::default();
    let mut encode = Tally::default();
    for (reply, our_text) in replies.iter().zip(&ours) {
        let ovs_text = tools::ovs_ofp_print(reply).expect("ovs-ofctl ofp-print");
        let label = format!("OFPST_FLOW reply of {} bytes", reply.len());
        whole.record(
            &allow_list,
            &label,
            Check::Print,
            *our_text == ovs_text,
            || {
                let differences: Vec<String> = our_text
                    .lines()
                    .zip(ovs_text.lines())
                    .filter(|(a, b)| a != b)
                    .map(|(a, b)| format!("\n    ovs:  {b}\n    ours: {a}"))
                    .collect();
                let shown: String = differences.iter().take(20).map(String::as_str).collect();
                format!(
                    "{label}: {} of {} lines differ (ours has {} lines){shown}",
                    differences.len(),
                    ovs_text.lines().count(),
                    our_text.lines().count()
                )
            },
        );
        let reencoded = Message::decode(reply).map(|(xid, m)| m.encode_to_vec(xid));
        encode.record(
            &allow_list,
            &label,
            Check::Encode,
            reencoded.as_ref().is_ok_and(|r| r == reply),
            || format!("{label}: {:?}", reencoded.as_ref().map(|r| hex(r))),
        );
    }

    // Flow by flow against dump-flows, matched up by cookie.
    let rendered: BTreeMap<u64, String> = ours
        .iter()
        .flat_map(|text| text.lines().skip(1))
        .filter_map(normalized_stats_line)
        .collect();
    let mut per_flow = Tally::default();
    for flow in &flows {
        let expected = dumped.get(&flow.cookie).expect("installed flow");
        let ours = rendered.get(&flow.cookie);
        per_flow.record(
            &allow_list,
            &flow.line,
            Check::Dump,
            ours == Some(expected),
            || {
                format!(
                    "{}\n    dump-flows: {expected}\n    ours:       {}",
                    flow.line,
                    ours.map_or("(missing)", String::as_str)
                )
            },
        );
    }

    let whole_ok = whole.report("OFPST_FLOW reply ofp-print vs ovs-ofctl ofp-print");
    let encode_ok = encode.report("OFPST_FLOW reply decode -> encode vs OVS bytes");
    let per_flow_ok = per_flow.report("flow table: our rendering vs ovs-ofctl dump-flows");
    assert!(
        whole_ok && encode_ok && per_flow_ok,
        "unexpected mismatches, see above"
    );
}

#[test]
#[ignore = "rewrites benches/corpus/flow_mods.hex; run after editing benches/corpus/flow_mods.txt"]
fn regenerate_bench_corpus() {
    testbed::require!(Ovs);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/corpus");
    let text = dir.join("flow_mods.txt");
    let recorded = capture_flow_mods(&text.display().to_string(), false);
    let hex_lines: String = recorded.iter().map(|r| hex(&r.bytes) + "\n").collect();
    std::fs::write(dir.join("flow_mods.hex"), hex_lines).expect("write flow_mods.hex");
    println!("wrote {} FLOW_MODs", recorded.len());
}
