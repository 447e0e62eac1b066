//! Our `ofp-print` binary against `ovs-ofctl ofp-print` (Open vSwitch 3.1), text for text:
//! - hand-built messages of every kind (`messages.rs`: edges included — reserved ids, unknown
//!   bits, empty bodies, several entries, bodies OVS refuses),
//! - the os-ken OpenFlow 1.3 vectors,
//! - every multipart reply and a whole session's worth of replies, errors, packet-ins and flow
//!   removals from a private Open vSwitch bridge,
//! - the hand-built messages and vectors with random bytes changed (an agreement floor),
//!
//! and the binary's handling of bad input.
//!
//! Run: `CI=true cargo test -p ofproto --test differential_ofp_print -- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "differential_ofp_print/messages.rs"]
mod messages;
mod support;

use std::process::Command;

use messages::{MESSAGES, SESSION_REQUESTS};
use support::of_client::OfClient;
use support::tools;

const OUR_OFP_PRINT: &str = env!("CARGO_BIN_EXE_ofp-print");

#[test]
fn renders_like_ovs_ofctl() {
    testbed::require!(Ovs);
    let mut agreed = 0;
    let mut failures = Vec::new();
    for (label, text) in MESSAGES {
        let bytes = hex_bytes(text);
        let ovs = tools::ovs_ofp_print(&bytes).expect("ovs-ofctl ofp-print");
        let ours = tools::our_ofp_print_many(OUR_OFP_PRINT, std::slice::from_ref(&bytes))
            .expect("our ofp-print")
            .remove(0);
        if ours == ovs {
            agreed += 1;
        } else {
            failures.push(format!("{label}\n  ovs:\n{ovs}\n  ours:\n{ours}"));
        }
    }
    println!(
        "ofp-print vs ovs-ofctl ofp-print: {agreed}/{} agree",
        MESSAGES.len()
    );
    for failure in &failures {
        println!("MISMATCH {failure}");
    }
    assert!(failures.is_empty(), "see mismatches above");
}

fn hex_bytes(text: &str) -> Vec<u8> {
    let digits: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}

/// Run our binary with `args`; return (success, stdout, stderr).
fn run_ours(args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(OUR_OFP_PRINT)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let output = child.wait_with_output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn argument_and_stdin_forms_print_the_same() {
    let (ok, from_arg, _) = run_ours(&["04140008 000000ff"], None);
    assert!(ok);
    assert_eq!(from_arg, "OFPT_BARRIER_REQUEST (OF1.3) (xid=0xff):\n");
    let (ok, from_stdin, _) = run_ours(&[], Some("04140008000000ff\n\n  0415 0008 0000 ff00  \n"));
    assert!(ok);
    assert_eq!(
        from_stdin,
        "OFPT_BARRIER_REQUEST (OF1.3) (xid=0xff):\nOFPT_BARRIER_REPLY (OF1.3) (xid=0xff00):\n"
    );
}

#[test]
fn bad_hex_is_reported_with_its_line_and_fails() {
    let (ok, stdout, stderr) = run_ours(&[], Some("04140008000000ff\n0414zz08000000ff\n"));
    assert!(!ok, "bad input must give a non-zero exit");
    // The good line still prints.
    assert_eq!(stdout, "OFPT_BARRIER_REQUEST (OF1.3) (xid=0xff):\n");
    assert!(
        stderr.contains("line 2") && stderr.contains("bad hex digit 'z' at column 5"),
        "{stderr}"
    );

    let (ok, _, stderr) = run_ours(&["041400080"], None);
    assert!(!ok);
    assert!(stderr.contains("argument 1") && stderr.contains("odd number of hex digits (9)"));
}

#[test]
fn undecodable_messages_are_reported_and_fail() {
    // Version 1 (OpenFlow 1.0) is not this codec's.
    let (ok, _, stderr) = run_ours(&["01000008000000ff"], None);
    assert!(!ok);
    assert!(
        stderr.contains("cannot decode OpenFlow message"),
        "{stderr}"
    );
    // Header says 16 bytes, only 8 given.
    let (ok, _, stderr) = run_ours(&["04140010000000ff"], None);
    assert!(!ok);
    assert!(stderr.contains("truncated"), "{stderr}");
}

/// os-ken vectors our `ofp-print` renders exactly like `ovs-ofctl`: all 88 that OVS 3.1 decodes
/// cleanly. The other 16 `.packet` files are ones OVS itself refuses or flags
/// (`***decode error***`, `***truncated***`): bad set-field lengths, unknown vendors, port
/// numbers outside its 16-bit range, an experimenter error with a short body; they are no
/// reference and are skipped. A regression guard: every vector must keep agreeing.
const OS_KEN_AGREEMENT_FLOOR: usize = 88;

#[test]
fn os_ken_vectors_render_like_ovs_ofctl() {
    testbed::require!(Ovs);
    let dir = std::env::var("OFPROTO_VECTORS")
        .unwrap_or_else(|_| "/work/shared/vectors/os-ken-4.2.2/packet_data_of13".into());
    let Ok(entries) = std::fs::read_dir(&dir) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "vector directory {dir} missing under CI"
        );
        println!("skipped: no vectors at {dir}");
        return;
    };
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "packet"))
        .collect();
    paths.sort();
    let (mut compared, mut agreed, mut differing) = (0, 0, Vec::new());
    for path in &paths {
        let bytes = std::fs::read(path).unwrap();
        // Only what OVS itself decodes is a fair reference.
        let Ok(ovs) = tools::ovs_ofp_print(&bytes) else {
            continue;
        };
        if ovs.contains("***") {
            continue;
        }
        compared += 1;
        let ours = tools::our_ofp_print_many(OUR_OFP_PRINT, std::slice::from_ref(&bytes))
            .expect("our ofp-print")
            .remove(0);
        if ours == ovs {
            agreed += 1;
        } else {
            differing.push(path.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    println!(
        "os-ken vectors OVS decodes: {agreed}/{compared} print identically; differing: {}",
        differing.join(" ")
    );
    assert!(
        agreed >= OS_KEN_AGREEMENT_FLOOR,
        "agreement fell below {OS_KEN_AGREEMENT_FLOOR}"
    );
}

/// Share of randomly mutated messages that must print exactly like `ovs-ofctl`, in percent.
/// Most of the rest are flow mods and matches OVS refuses while decoding (action and
/// prerequisite checks, unknown fields), which the codec accepts: its business, not the
/// printer's. Measured 717/774 (93%) when this floor was set.
const MUTATION_AGREEMENT_FLOOR_PERCENT: usize = 85;

/// Every hand-built message and os-ken vector with one or two random bytes after the header
/// replaced (three variants each, fixed seed): of those both printers accept, at least
/// [`MUTATION_AGREEMENT_FLOOR_PERCENT`] percent must print identically. This exercises the
/// refusals and odd values no hand-built list thinks of.
#[test]
fn mutated_messages_mostly_render_like_ovs_ofctl() {
    testbed::require!(Ovs);
    let mut bases: Vec<Vec<u8>> = MESSAGES.iter().map(|(_, text)| hex_bytes(text)).collect();
    let dir = std::env::var("OFPROTO_VECTORS")
        .unwrap_or_else(|_| "/work/shared/vectors/os-ken-4.2.2/packet_data_of13".into());
    if let Ok(entries) = std::fs::read_dir(&dir) {
        let mut paths: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "packet"))
            .collect();
        paths.sort();
        bases.extend(paths.iter().map(|p| std::fs::read(p).unwrap()));
    }
    // xorshift64: deterministic without a dependency.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut mutants = Vec::new();
    for base in bases.iter().filter(|b| b.len() > 8) {
        for _ in 0..3 {
            let mut mutant = base.clone();
            for _ in 0..=(next() % 2) {
                let at = 8 + (next() as usize) % (mutant.len() - 8);
                mutant[at] = match next() % 4 {
                    0 => 0,
                    1 => 0xff,
                    2 => mutant[at] ^ (1 << (next() % 8)),
                    _ => next() as u8,
                };
            }
            mutants.push(mutant);
        }
    }
    let ours = tools::our_ofp_print_many(OUR_OFP_PRINT, &mutants).expect("our ofp-print");
    let (mut compared, mut agreed) = (0, 0);
    let mut differing: Vec<String> = Vec::new();
    for (mutant, ours) in mutants.iter().zip(&ours) {
        // Only messages both sides accept: ours prints nothing for what it cannot decode.
        if ours.is_empty() {
            continue;
        }
        let Ok(ovs) = tools::ovs_ofp_print(mutant) else {
            continue;
        };
        compared += 1;
        if *ours == ovs {
            agreed += 1;
        } else {
            differing.push(ovs.lines().next().unwrap_or_default().to_string());
        }
    }
    differing.sort();
    differing.dedup();
    println!(
        "mutated messages: {agreed}/{compared} print identically; OVS's first line where they \
         differ:\n  {}",
        differing.join("\n  ")
    );
    assert!(compared > 500, "too few mutants compared: {compared}");
    assert!(
        agreed * 100 >= MUTATION_AGREEMENT_FLOOR_PERCENT * compared,
        "agreement {agreed}/{compared} fell below {MUTATION_AGREEMENT_FLOOR_PERCENT}%"
    );
}

/// The replies of a real switch: a private Open vSwitch bridge with two ports, flows, a group
/// and a meter answers every multipart request (table features as ovs-vswitchd describes its
/// own tables, port and queue stats, ...); each reply message must print like `ovs-ofctl`.
#[test]
fn replies_of_a_real_bridge_render_like_ovs_ofctl() {
    testbed::require!(Ovs);
    let ovs = testbed::Ovs::start(testbed::OvsOptions::dummy()).expect("private OVS");
    ovs.add_bridge("br0").expect("bridge");
    for port in ["p1", "p2"] {
        ovs.vsctl(&[
            "add-port",
            "br0",
            port,
            "--",
            "set",
            "interface",
            port,
            "type=dummy",
        ])
        .expect("add-port");
    }
    let ofctl13 = |args: &[&str]| {
        let mut argv = vec!["-O", "OpenFlow13"];
        argv.extend_from_slice(args);
        ovs.ofctl(&argv).expect("ovs-ofctl")
    };
    ofctl13(&[
        "add-group",
        "br0",
        "group_id=1,type=select,bucket=output:1,bucket=output:2",
    ]);
    ofctl13(&[
        "add-meter",
        "br0",
        "meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100",
    ]);
    ofctl13(&["add-flow", "br0", "table=0,priority=10,ip,actions=group:1"]);
    ofctl13(&[
        "add-flow",
        "br0",
        "table=1,in_port=1,actions=meter:1,output:2",
    ]);

    let any = 0xffff_ffffu32.to_be_bytes();
    let all_groups = 0xffff_fffcu32.to_be_bytes();
    let flow_request: Vec<u8> = [0xff, 0, 0, 0]
        .into_iter()
        .chain(any)
        .chain(any)
        .chain([0; 20])
        .chain([0x00, 0x01, 0x00, 0x04, 0, 0, 0, 0])
        .collect();
    let requests: Vec<(u16, Vec<u8>)> = vec![
        (0, vec![]),                        // desc
        (1, flow_request.clone()),          // flow
        (2, flow_request),                  // aggregate
        (3, vec![]),                        // table
        (4, [any, [0; 4]].concat()),        // port stats, all ports
        (5, [any, any].concat()),           // queue stats, all
        (6, [all_groups, [0; 4]].concat()), // group stats
        (7, vec![]),                        // group desc
        (8, vec![]),                        // group features
        (9, [any, [0; 4]].concat()),        // meter stats
        (10, [any, [0; 4]].concat()),       // meter config
        (11, vec![]),                       // meter features
        (12, vec![]),                       // table features
        (13, vec![]),                       // port desc
    ];
    let mut client = OfClient::connect(&ovs.bridge_mgmt("br0")).expect("connect to br0");
    let mut replies = Vec::new();
    for (kind, body) in &requests {
        replies.extend(client.multipart(*kind, body).expect("multipart reply"));
    }
    let ours = tools::our_ofp_print_many(OUR_OFP_PRINT, &replies).expect("our ofp-print");
    let mut failures = Vec::new();
    for (reply, ours) in replies.iter().zip(&ours) {
        let ovs_text = tools::ovs_ofp_print(reply).expect("ovs-ofctl ofp-print");
        if *ours != ovs_text {
            failures.push(format!("  ovs:\n{ovs_text}\n  ours:\n{ours}"));
        }
    }
    println!(
        "real bridge replies: {}/{} print identically",
        replies.len() - failures.len(),
        replies.len()
    );
    for failure in &failures {
        println!("MISMATCH\n{failure}");
    }
    assert!(failures.is_empty(), "see mismatches above");
}

/// Send every [`SESSION_REQUESTS`] entry to `target` and return every message the switch sends
/// back up to the final barrier reply (its HELLO excepted).
fn session_messages(target: &str) -> Vec<Vec<u8>> {
    use std::io::{Read, Write};
    let path = target.strip_prefix("unix:").unwrap_or(target);
    let mut stream = std::os::unix::net::UnixStream::connect(path).expect("connect to br0");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    stream
        .write_all(&hex_bytes("04000010 00000000 0001000800000010"))
        .unwrap();
    for (_, request) in SESSION_REQUESTS {
        stream.write_all(&hex_bytes(request)).unwrap();
    }
    let mut messages = Vec::new();
    let mut after_barrier = false;
    loop {
        let mut header = [0u8; 8];
        if let Err(err) = stream.read_exact(&mut header) {
            // Asynchronous messages may trail the barrier reply; a quiet second ends them.
            assert!(
                after_barrier,
                "switch went quiet before the barrier reply: {err}"
            );
            return messages;
        }
        let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
        let mut message = header.to_vec();
        message.resize(length.max(8), 0);
        stream
            .read_exact(&mut message[8..])
            .expect("switch message body");
        let xid = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        match (message[1], xid) {
            (0, _) => {} // HELLO
            (21, 0x11) => {
                after_barrier = true;
                stream
                    .set_read_timeout(Some(std::time::Duration::from_secs(1)))
                    .unwrap();
            }
            _ => messages.push(message),
        }
    }
}

/// A real switch's side of a session: features, config, async config, role, queue config,
/// echo and TLV table replies, errors for bad requests (each echoing the request), bundle
/// replies, and the packet-in and flow-removed a flow and a packet-out cause. Each must print
/// like `ovs-ofctl`.
#[test]
fn session_with_a_real_bridge_renders_like_ovs_ofctl() {
    testbed::require!(Ovs);
    let ovs = testbed::Ovs::start(testbed::OvsOptions::dummy()).expect("private OVS");
    ovs.add_bridge("br0").expect("bridge");
    ovs.vsctl(&[
        "add-port",
        "br0",
        "p1",
        "--",
        "set",
        "interface",
        "p1",
        "type=dummy",
    ])
    .expect("add-port");
    let messages = session_messages(&ovs.bridge_mgmt("br0"));
    let kinds: std::collections::BTreeSet<u8> = messages.iter().map(|m| m[1]).collect();
    // features, config, async, role replies, errors, packet-in, flow removed, echo reply,
    // experimenter (TLV table and bundle replies).
    for kind in [6, 8, 27, 25, 1, 10, 11, 3, 4] {
        assert!(
            kinds.contains(&kind),
            "no message of type {kind} in {kinds:?}"
        );
    }
    let ours = tools::our_ofp_print_many(OUR_OFP_PRINT, &messages).expect("our ofp-print");
    let mut failures = Vec::new();
    for (message, ours) in messages.iter().zip(&ours) {
        let ovs_text = tools::ovs_ofp_print(message).expect("ovs-ofctl ofp-print");
        if *ours != ovs_text {
            failures.push(format!("  ovs:\n{ovs_text}\n  ours:\n{ours}"));
        }
    }
    println!(
        "real bridge session: {}/{} messages print identically",
        messages.len() - failures.len(),
        messages.len()
    );
    for failure in &failures {
        println!("MISMATCH\n{failure}");
    }
    assert!(failures.is_empty(), "see mismatches above");
}
