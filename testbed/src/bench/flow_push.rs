//! `testbed bench flow-push`: push N distinct flows into a fresh OVS bridge through ofctrl (one
//! bundle, confirmed by OVS), and in the same run push the same flows into another fresh bridge
//! of the same OVS with `ovs-ofctl --bundle add-flows`; then apply a 1,000-flow change (half
//! replaced, half removed) to each full table the same two ways.
//!
//! The flows look like a Contiv pipeline's: port classification (table 0), source MAC to
//! VLAN/port checks (table 1), destination group by IP (table 4), policy by group metadata and
//! TCP port (table 5) and MAC forwarding by VRF (table 9). Both forms of a flow, the ofctrl
//! value and the ovs-ofctl text line, come from one description, so the two bridges receive
//! the same flows; the run checks that both bridges end with the same flow count.

use crate::{Ovs, OvsOptions};
use anyhow::{Context, Result, bail, ensure};
use ofctrl::{
    Applied, BridgeConfig, BridgeHandle, Change, Flow, Listener, Miss, SwitchOptions, TableSpec,
};
use ofproto::{Action, Instruction, Match};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The numbers of one run; printed as one JSON line.
#[derive(Debug, serde::Serialize)]
pub struct FlowPushReport {
    pub flows: usize,
    /// Seconds for ofctrl to push all flows, from the call until OVS confirmed the bundle.
    pub ofctrl_s: f64,
    /// Seconds for `ovs-ofctl --bundle add-flows` (process start, parsing, pushing).
    pub ovs_ofctl_s: f64,
    /// `ovs_ofctl_s / ofctrl_s`: above 1 means ofctrl is faster.
    pub ratio: f64,
    /// `ofctrl_s / ovs_ofctl_s` (issue 17's form: the goal is at most 0.7).
    pub ofctrl_time_ratio: f64,
    pub ofctrl_flows_per_s: f64,
    pub ovs_ofctl_flows_per_s: f64,
    /// Size of the change applied to the full table.
    pub change_flows: usize,
    pub ofctrl_change_ms: f64,
    pub ovs_ofctl_change_ms: f64,
}

/// The tables the generated flows use, with Contiv's numbering.
fn tables() -> Vec<TableSpec> {
    [
        (0, "classify", 1),
        (1, "src-vlan", 4),
        (4, "dst-group", 5),
        (5, "policy", 9),
    ]
    .into_iter()
    .map(|(id, name, next)| TableSpec {
        id,
        name,
        miss: Miss::Goto(next),
    })
    .chain(std::iter::once(TableSpec {
        id: 9,
        name: "mac-dst",
        miss: Miss::Drop,
    }))
    .collect()
}

/// Flow number `i` of a run, both as an ofctrl flow and as an `ovs-ofctl add-flows` line.
/// `variant` changes the actions (not the match), to produce a replacement of the same flow.
fn flow(i: usize, variant: u32) -> (Flow, String) {
    let j = (i / 5) as u32;
    let mac = |tag: u8| {
        let b = j.to_be_bytes();
        [0x02, tag, b[0], b[1], b[2], b[3]]
    };
    let mac_text = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let port = 1 + (j + variant) % 64;
    match i % 5 {
        0 => {
            let md = u64::from(j % 4096) << 16;
            (
                Flow::new(
                    0,
                    100,
                    Match::new().in_port(j + 1),
                    vec![
                        Instruction::WriteMetadata {
                            metadata: md | u64::from(variant),
                            mask: 0xffff_ffff,
                        },
                        Instruction::GotoTable(1),
                    ],
                ),
                format!(
                    "table=0,priority=100,in_port={} actions=write_metadata:{:#x}/0xffffffff,goto_table:1",
                    j + 1,
                    md | u64::from(variant)
                ),
            )
        }
        1 => {
            let m = mac(1);
            (
                Flow::new(
                    1,
                    100,
                    Match::new().eth_src(m, None),
                    vec![Instruction::ApplyActions(vec![Action::output(port)])],
                ),
                format!(
                    "table=1,priority=100,dl_src={} actions=output:{port}",
                    mac_text(m)
                ),
            )
        }
        2 => {
            let ip = Ipv4Addr::from(0x0a00_0000 + j);
            let md = u64::from(j % 32767 + 1) << 1;
            (
                Flow::new(
                    4,
                    100,
                    Match::new().eth_type(0x0800).ipv4_dst(ip, None),
                    vec![
                        Instruction::WriteMetadata {
                            metadata: md,
                            mask: 0xfffe,
                        },
                        Instruction::ApplyActions(vec![Action::output(port)]),
                    ],
                ),
                format!(
                    "table=4,priority=100,ip,nw_dst={ip} actions=output:{port},write_metadata:{md:#x}/0xfffe"
                ),
            )
        }
        3 => {
            let src = u64::from(j / 1000 + 1) << 16;
            let tp = (j % 1000 + 1) as u16;
            let prio = 10 + (j % 100) as u16;
            (
                Flow::new(
                    5,
                    prio,
                    Match::new()
                        .metadata(src, Some(0x7fff_0000))
                        .eth_type(0x0800)
                        .ip_proto(6)
                        .tcp_dst(tp),
                    vec![Instruction::ApplyActions(vec![Action::output(port)])],
                ),
                format!(
                    "table=5,priority={prio},tcp,metadata={src:#x}/0x7fff0000,tp_dst={tp} actions=output:{port}"
                ),
            )
        }
        _ => {
            let m = mac(9);
            let vrf = u64::from(j % 255 + 1) << 32;
            (
                Flow::new(
                    9,
                    100,
                    Match::new()
                        .metadata(vrf, Some(0xff_0000_0000))
                        .eth_dst(m, None),
                    vec![Instruction::ApplyActions(vec![Action::output(port)])],
                ),
                format!(
                    "table=9,priority=100,metadata={vrf:#x}/0xff00000000,dl_dst={} actions=output:{port}",
                    mac_text(m)
                ),
            )
        }
    }
}

/// Run the benchmark with `n` flows (and a change of `change` flows).
pub fn run(n: usize, change: usize) -> Result<FlowPushReport> {
    ensure!(n >= 2 && change <= n, "need 2 <= flows and change <= flows");
    if let Err(why) = crate::require::check(&[crate::Need::Ovs]) {
        bail!("cannot run the benchmark: {why}");
    }
    let ovs = Ovs::start(OvsOptions::dummy()).context("starting OVS")?;
    let sys = actix_rt::System::new();
    sys.block_on(measure(&ovs, n, change))
}

async fn measure(ovs: &Ovs, n: usize, change: usize) -> Result<FlowPushReport> {
    let flows: Vec<(Flow, String)> = (0..n).map(|i| flow(i, 0)).collect();
    // The change: the first half gets new actions, the second half is removed.
    let replaced = change / 2;
    let changed: Vec<(Flow, String)> = (0..replaced).map(|i| flow(i, 1)).collect();
    let removed: Vec<&(Flow, String)> = flows[n - (change - replaced)..].iter().collect();

    // ofctrl.
    let bridge = BridgeHandle::start(BridgeConfig::new("bench-ofctrl", tables()));
    let listener = Listener::tcp(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        SwitchOptions {
            request_timeout: Duration::from_secs(600),
            ..SwitchOptions::default()
        },
        vec![bridge.events()],
    )
    .await?;
    let port = listener.port().context("listener port")?;
    add_bridge(ovs, "bofctrl", Some(port))?;
    wait_synced(&bridge).await?;
    let changes: Vec<Change> = flows
        .iter()
        .map(|(f, _)| Change::add_flow(f.clone()))
        .collect();
    let start = Instant::now();
    let applied = bridge.apply(changes).await?;
    let ofctrl_s = start.elapsed().as_secs_f64();
    ensure!(
        applied == Applied::Installed(n),
        "ofctrl applied {applied:?}"
    );

    let mut changes: Vec<Change> = changed
        .iter()
        .map(|(f, _)| Change::add_flow(f.clone()))
        .collect();
    changes.extend(
        removed
            .iter()
            .map(|(f, _)| Change::RemoveFlow(f.key.clone())),
    );
    let start = Instant::now();
    bridge.apply(changes).await?;
    let ofctrl_change_ms = start.elapsed().as_secs_f64() * 1e3;

    // ovs-ofctl, same flows (plus the same miss flows, so both tables end equal).
    add_bridge(ovs, "bofctl", None)?;
    let dir = ovs.run_dir();
    let mut text = String::new();
    for t in tables() {
        let _ = match t.miss {
            Miss::Goto(next) => {
                writeln!(text, "table={},priority=0 actions=goto_table:{next}", t.id)
            }
            _ => writeln!(text, "table={},priority=0 actions=drop", t.id),
        };
    }
    for (_, line) in &flows {
        text.push_str(line);
        text.push('\n');
    }
    let file = dir.join("flows.txt");
    std::fs::write(&file, &text)?;
    let start = Instant::now();
    ovs.ofctl(&[
        "--bundle",
        "add-flows",
        "bofctl",
        &file.display().to_string(),
    ])?;
    let ovs_ofctl_s = start.elapsed().as_secs_f64();

    // The reference change: one bundle with the replacements and the strict deletes.
    let mut text = String::new();
    for (_, line) in &changed {
        let _ = writeln!(text, "add {line}");
    }
    for (_, line) in &removed {
        let m = line.split(" actions=").next().unwrap_or(line);
        let _ = writeln!(text, "delete_strict {m}");
    }
    let file = dir.join("change.txt");
    std::fs::write(&file, &text)?;
    let start = Instant::now();
    ovs.ofctl(&[
        "--bundle",
        "add-flows",
        "bofctl",
        &file.display().to_string(),
    ])?;
    let ovs_ofctl_change_ms = start.elapsed().as_secs_f64() * 1e3;

    let a = flow_count(ovs, "bofctrl")?;
    let b = flow_count(ovs, "bofctl")?;
    ensure!(
        a == b,
        "the two bridges differ: ofctrl {a} flows, ovs-ofctl {b} flows"
    );
    ensure!(
        a == n + tables().len() - (change - replaced),
        "unexpected flow count {a}"
    );
    drop(listener);
    Ok(FlowPushReport {
        flows: n,
        ofctrl_s,
        ovs_ofctl_s,
        ratio: ovs_ofctl_s / ofctrl_s,
        ofctrl_time_ratio: ofctrl_s / ovs_ofctl_s,
        ofctrl_flows_per_s: n as f64 / ofctrl_s,
        ovs_ofctl_flows_per_s: n as f64 / ovs_ofctl_s,
        change_flows: change,
        ofctrl_change_ms,
        ovs_ofctl_change_ms,
    })
}

fn add_bridge(ovs: &Ovs, name: &str, controller_port: Option<u16>) -> Result<()> {
    ovs.add_bridge(name)?;
    let mut args = vec![
        "set".to_string(),
        "bridge".into(),
        name.into(),
        "fail_mode=secure".into(),
        "protocols=OpenFlow13".into(),
    ];
    if let Some(port) = controller_port {
        args.extend([
            "--".into(),
            "set-controller".into(),
            name.into(),
            format!("tcp:127.0.0.1:{port}"),
        ]);
    }
    ovs.vsctl(&args)?;
    Ok(())
}

async fn wait_synced(bridge: &BridgeHandle) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if bridge.status().await.is_some_and(|s| s.synced) {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "OVS did not connect to the controller"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Flow count from `ovs-ofctl dump-aggregate`.
fn flow_count(ovs: &Ovs, bridge: &str) -> Result<usize> {
    let out = ovs.ofctl(&["dump-aggregate", bridge])?;
    out.split_whitespace()
        .find_map(|w| w.strip_prefix("flow_count="))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no flow_count in {out:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_flows_are_distinct() {
        let keys: std::collections::HashSet<_> = (0..5000).map(|i| flow(i, 0).0.key).collect();
        assert_eq!(keys.len(), 5000);
        assert_eq!(
            flow(7, 0).0.key,
            flow(7, 1).0.key,
            "a variant replaces the same flow"
        );
        assert_ne!(flow(7, 0).0, flow(7, 1).0);
    }

    #[test]
    fn both_paths_end_with_the_same_flows() {
        crate::require!(Ovs);
        let report = run(500, 100).unwrap();
        assert_eq!(report.flows, 500);
        assert!(report.ofctrl_s > 0.0 && report.ovs_ofctl_s > 0.0);
    }
}
