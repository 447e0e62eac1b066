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
/// a pod ADD during the outage succeeds.
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
    c.etcd.start_member(0).unwrap();
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
