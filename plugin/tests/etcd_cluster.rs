//! netplugin and netmaster (real processes) against a 3-member etcd cluster and a TLS-only etcd
//! (issue 21): a member kill must not stop netplugin's watches or a pod ADD, and both daemons
//! must work with client certificates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::time::{Duration, Instant};
use testbed::EtcdOptions;
use testbed::demo::{Cluster, ClusterOptions};

fn cluster_with(etcd: EtcdOptions) -> Cluster {
    Cluster::start_with(
        binaries(),
        ClusterOptions {
            etcd,
            ..ClusterOptions::default()
        },
    )
    .expect("starting the cluster")
}

/// Both daemons start on member 0 (the first endpoint). Kill it: a policy rule added during the
/// outage reaches the host's flow table through netplugin's watch (resumed on another member), and
/// a pod ADD during the outage succeeds. Then a second member goes (quorum lost) and comes back.
#[test]
fn watches_and_pod_add_survive_the_member_in_use_being_killed() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let mut c = cluster_with(EtcdOptions {
        members: 3,
        tls: false,
    });
    create_network(&c, "fo", "vxlan", "10.61.0.0/24", "10.61.0.1");
    c.netctl(&["policy", "create", "fop"]).unwrap();
    c.netctl(&["group", "create", "-p", "fop", "fo", "web"])
        .unwrap();
    let conf = c.conflist("fo", "fo", "web").unwrap();
    let first = c.add_pod(&conf).unwrap();
    assert!(!flows(&c, VXLAN_BRIDGE).contains("tp_dst=8123"));

    c.etcd.kill_member(0);
    let killed = Instant::now();
    c.netctl(&[
        "policy", "rule-add", "fop", "1", "-d", "in", "-l", "tcp", "-P", "8123", "-j", "deny",
    ])
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !flows(&c, VXLAN_BRIDGE).contains("tp_dst=8123") {
        assert!(
            Instant::now() < deadline,
            "the rule added during the outage never reached the flow table:\n{}",
            flows(&c, VXLAN_BRIDGE)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let rule_in_flows = killed.elapsed();
    let add_started = Instant::now();
    let second = c.add_pod(&conf).expect("pod ADD during the outage");
    let add_took = add_started.elapsed();
    println!(
        "{}",
        serde_json::json!({"test": "netplugin_member_kill", "rule_in_flows_ms": rule_in_flows.as_millis(), "pod_add_ms": add_took.as_millis()})
    );
    assert_ne!(first.ip, second.ip);
    assert!(
        reaches(&second, &first.ip),
        "the pod added during the outage cannot reach the first"
    );

    // Quorum lost (members 0 and 1 down): a pod ADD fails fast saying the store is unavailable,
    // the pods already running still reach each other, and ADD works again once quorum is back.
    c.etcd.kill_member(1);
    let started = Instant::now();
    let Err(err) = c.add_pod(&conf) else {
        panic!("pod ADD succeeded without an etcd quorum");
    };
    let failed_after = started.elapsed();
    assert!(
        err.contains("state store unavailable") && err.contains("503"),
        "{err}"
    );
    assert!(
        failed_after < Duration::from_secs(15),
        "ADD failed only after {failed_after:?}"
    );
    assert!(
        reaches(&second, &first.ip),
        "existing traffic broke when quorum was lost"
    );
    c.etcd.start_member(0).unwrap();
    let back = Instant::now();
    let third = loop {
        match c.add_pod(&conf) {
            Ok(pod) => break pod,
            Err(e) => assert!(
                back.elapsed() < Duration::from_secs(15),
                "pod ADD still failing {:?} after quorum returned: {e}",
                back.elapsed()
            ),
        }
    };
    let recovered = back.elapsed();
    println!(
        "{}",
        serde_json::json!({"test": "netplugin_quorum_loss", "add_failed_ms": failed_after.as_millis(), "add_ok_after_quorum_ms": recovered.as_millis()})
    );
    assert!(reaches(&third, &first.ip));
    assert!(
        recovered <= Duration::from_secs(5),
        "recovery took {recovered:?}"
    );
    c.etcd.start_member(1).unwrap();
}

/// A TLS-only etcd that requires client certificates: netmaster and netplugin start with
/// `--etcd-cacert/--etcd-cert/--etcd-key`, and pods get addresses and reach each other.
#[test]
fn both_daemons_work_against_a_tls_only_etcd() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let c = cluster_with(EtcdOptions {
        members: 1,
        tls: true,
    });
    assert!(c.etcd.client_url().starts_with("https://"));
    create_network(&c, "tls", "vxlan", "10.62.0.0/24", "10.62.0.1");
    let conf = c.conflist("tls", "tls", "").unwrap();
    let a = c.add_pod(&conf).unwrap();
    let b = c.add_pod(&conf).unwrap();
    assert!(reaches(&a, &b.ip), "{} cannot reach {}", a.ip, b.ip);
}

/// netplugin with a CA that did not sign the etcd server certificates: it stops at start, naming
/// the file and the reason (no OVS needed: etcd is the first thing it connects to).
#[test]
fn netplugin_refuses_a_wrong_ca_at_start() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start_cluster(EtcdOptions {
        members: 1,
        tls: true,
    })
    .unwrap();
    let tls = etcd.tls().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_netplugin"))
        .args([
            "--mode",
            "test",
            "--netmode",
            "vxlan",
            "--fwdmode",
            "routing",
        ])
        .args(["--etcd-endpoints", &etcd.client_url()])
        .arg("--etcd-cacert")
        .arg(&tls.wrong_ca)
        .arg("--etcd-cert")
        .arg(&tls.cert)
        .arg("--etcd-key")
        .arg(&tls.key)
        .args(["--cni-socket", "/nonexistent-contiv-test/cni.sock"])
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("netplugin still running with a wrong CA after 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains(&tls.wrong_ca.display().to_string()) && err.contains("not signed by the CA"),
        "{err}"
    );
}
