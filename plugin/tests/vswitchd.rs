//! The datapath flusher (`plugin::vswitchd`) against a real ovs-vswitchd (testbed, dummy
//! userspace datapath): Open vSwitch's own reproduction of its stale-megaflow bug (upstream
//! "PMD - revalidator modify overlapping flows"), and our purge removing the stale flow.
//! Assertions read the datapath with `ovs-appctl dpctl/dump-flows`, a tool that is not ours.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use plugin::ovsdb::OvsdbClient;
use plugin::vswitchd::{FlushPolicy, Flusher, call, control_socket, has_stale_megaflow_bug};
use testbed::{Ovs, OvsOptions};

const BR: &str = "br0";
const TCP_TO: &str = "ipv4(src=10.0.0.1,dst=10.1.2.2,proto=6),tcp(src=1,dst=2)";
const TCP_TO_OTHER: &str = "ipv4(src=10.0.0.1,dst=10.1.0.2,proto=6),tcp(src=1,dst=2)";

fn receive(ovs: &Ovs, packet: &str) {
    ovs.appctl(&["netdev-dummy/receive", "p1", packet]).unwrap();
}

fn replace_flows(ovs: &Ovs, flows: &str) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), flows).unwrap();
    ovs.ofctl(&[
        "--bundle",
        "replace-flows",
        BR,
        &file.path().display().to_string(),
    ])
    .unwrap();
    ovs.appctl(&["revalidator/wait"]).unwrap();
}

/// The datapath flows whose key contains `key`.
fn datapath_flows(ovs: &Ovs, key: &str) -> Vec<String> {
    ovs.appctl(&["dpctl/dump-flows"])
        .unwrap()
        .lines()
        .filter(|l| l.contains(key))
        .map(str::to_string)
        .collect()
}

/// The datapath flows towards 10.1.2.0/24 (the megaflow the bug leaves behind).
fn flows_to_the_24(ovs: &Ovs) -> Vec<String> {
    datapath_flows(ovs, "dst=10.1.2.2/255.255.255.0")
}

/// Two overlapping megaflows, then a flow change the revalidator applies to the wrong one:
/// afterwards the /24 megaflow still carries the previous table's `ct(commit)`.
async fn leave_a_stale_megaflow(ovs: &Ovs) {
    ovs.vsctl(&[
        "add-br",
        BR,
        "--",
        "set",
        "bridge",
        BR,
        "datapath-type=dummy",
        "--",
        "add-port",
        BR,
        "p1",
        "--",
        "set",
        "interface",
        "p1",
        "type=dummy-pmd",
        "--",
        "add-port",
        BR,
        "p2",
        "--",
        "set",
        "interface",
        "p2",
        "type=dummy-pmd",
    ])
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while ovs.ofctl(&["show", BR]).is_err() {
        assert!(Instant::now() < deadline, "bridge {BR} never came up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    replace_flows(ovs, "table=0,in_port=p1,ip,nw_dst=10.1.2.0/24,actions=p2\n");
    receive(ovs, TCP_TO);
    let deadline = Instant::now() + Duration::from_secs(10);
    while flows_to_the_24(ovs).is_empty() {
        assert!(
            Instant::now() < deadline,
            "no megaflow for the first packet"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    receive(ovs, TCP_TO);
    // The rule widens to /16: the /24 megaflow is kept, its actions changed.
    replace_flows(
        ovs,
        "table=0,in_port=p1,ip,nw_dst=10.1.0.0/16,actions=ct(commit)\n",
    );
    // A packet the /24 does not cover makes an overlapping /16 megaflow.
    receive(ovs, TCP_TO_OTHER);
    tokio::time::sleep(Duration::from_millis(500)).await;
    receive(ovs, TCP_TO);
    for _ in 0..=256 {
        receive(ovs, TCP_TO_OTHER);
    }
    // Back to forwarding: both megaflows must now say "2".
    replace_flows(ovs, "table=0,in_port=p1,ip,nw_dst=10.1.0.0/16,actions=p2\n");
}

#[tokio::test]
async fn a_purge_removes_the_megaflow_open_vswitch_left_stale() {
    testbed::require!(Root, Ovs);
    // The bug needs the revalidator to meet the two megaflows in one order; on a loaded machine
    // a run can miss it. A release our table lists gets a few fresh switches to show it; a
    // release it does not list must never show it.
    const ATTEMPTS: usize = 5;
    let mut attempt = 0;
    let (ovs, ovsdb, is_stale) = loop {
        attempt += 1;
        let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
        let ovsdb = OvsdbClient::connect(ovs.db_socket()).await.unwrap();
        let ctl = control_socket(None, &ovs.db_socket()).unwrap();
        let release = call(&ctl, "version", &[]).await.unwrap();
        let release = release.split_whitespace().last().unwrap().to_string();
        leave_a_stale_megaflow(&ovs).await;
        let stale = flows_to_the_24(&ovs);
        let is_stale = stale.iter().any(|l| l.contains("actions:ct(commit)"));
        let expected = has_stale_megaflow_bug(&release);
        // Our release table must agree with what this Open vSwitch really does.
        if is_stale == expected {
            break (ovs, ovsdb, is_stale);
        }
        assert!(
            expected && attempt < ATTEMPTS,
            "Open vSwitch {release}, attempt {attempt}: datapath flows to the /24 after the \
             change: {stale:?}"
        );
        eprintln!("attempt {attempt}: the bug did not show this time, on a fresh switch again");
    };

    let done = prometheus_client::metrics::counter::Counter::default();
    let flush = Flusher {
        policy: FlushPolicy::Auto,
        datapath: "netdev".into(),
        ovsdb: ovsdb.clone(),
        control: None,
        done: done.clone(),
    }
    .start()
    .expect("auto on the userspace datapath starts a flusher");
    flush.request();
    let deadline = Instant::now() + Duration::from_secs(5);
    while done.get() == 0 {
        assert!(Instant::now() < deadline, "no purge within 5 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if is_stale {
        assert!(
            flows_to_the_24(&ovs).is_empty(),
            "the stale megaflow survived the purge: {:?}",
            flows_to_the_24(&ovs)
        );
        // The next packet is translated against the current table (a /16 megaflow now).
        receive(&ovs, TCP_TO);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let flows = datapath_flows(&ovs, "dst=10.1.2.2/");
            if flows.iter().any(|l| l.contains("actions:2")) {
                assert!(!flows.iter().any(|l| l.contains("ct(commit)")), "{flows:?}");
                break;
            }
            assert!(Instant::now() < deadline, "no fresh megaflow: {flows:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // Many requests at once share purges: at most one per interval, never one per request.
    let before = done.get();
    let started = Instant::now();
    for _ in 0..50 {
        flush.request();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tokio::time::sleep(plugin::vswitchd::MIN_INTERVAL * 3).await;
    let purges = done.get() - before;
    let most = started.elapsed().as_millis() / plugin::vswitchd::MIN_INTERVAL.as_millis() + 2;
    assert!(
        purges >= 1 && u128::from(purges) <= most,
        "{purges} purges for 50 requests over {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn no_flusher_for_the_kernel_datapath_or_when_told_never() {
    testbed::require!(Root, Ovs);
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    let ovsdb = OvsdbClient::connect(ovs.db_socket()).await.unwrap();
    for (policy, datapath, starts) in [
        (FlushPolicy::Auto, "system", false),
        (FlushPolicy::Never, "netdev", false),
        (FlushPolicy::Always, "system", true),
    ] {
        let flusher = Flusher {
            policy,
            datapath: datapath.into(),
            ovsdb: ovsdb.clone(),
            control: None,
            done: Default::default(),
        };
        assert_eq!(
            flusher.start().is_some(),
            starts,
            "{policy:?} on {datapath}"
        );
    }
}

#[tokio::test]
async fn a_refused_command_names_what_ovs_vswitchd_said() {
    testbed::require!(Root, Ovs);
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    let ctl = control_socket(None, &ovs.db_socket()).unwrap();
    let err = call(&ctl, "no-such/command", &[]).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("no-such/command") && text.contains("refused"),
        "{text}"
    );
    let missing = call(
        &ovs.db_socket().with_file_name("nothing.ctl"),
        "version",
        &[],
    )
    .await
    .unwrap_err();
    assert!(missing.to_string().contains("nothing.ctl"), "{missing}");
}
