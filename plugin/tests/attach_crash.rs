//! Pod set-up interrupted by a crash, against real parts (etcd, netmaster, OVS, netplugin,
//! pods through libcni): whatever moment netplugin is SIGKILLed during a burst of ADDs, after
//! a restart and the runtime's DEL of every pod whose ADD failed (as kubelet does), no address
//! is handed out twice, netmaster's allocation map holds exactly the endpoints' addresses, and
//! once every pod is deleted nothing is allocated and no port, veth or oper state is left.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;
use testbed::demo::{Cluster, http};
use testbed::{Netns, unique_name};

/// netmaster's inspect of network `net`: (allocated addresses without the gateway, endpoint
/// count, the endpoints' addresses).
fn allocation(c: &Cluster, net: &str, gateway: &str) -> (BTreeSet<String>, u64, Vec<String>) {
    let addr = c.netmaster_url.trim_start_matches("http://");
    let path = format!("/api/v1/inspect/networks/default:{net}/");
    let (status, body) = http("GET", addr, &path).unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let oper = &v["Oper"];
    let allocated = expand(oper["allocatedIPAddresses"].as_str().unwrap_or_default())
        .into_iter()
        .filter(|a| a != gateway)
        .collect();
    let count = oper["numEndpoints"].as_u64().unwrap_or(0);
    let eps = oper["endpoints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e["ipAddress"][0].as_str().map(str::to_string))
        .collect();
    (allocated, count, eps)
}

/// `10.1.1.1-10.1.1.3, 10.1.1.7` → every address (last octet ranges, as netmaster prints).
fn expand(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((from, to)) => {
                let from: std::net::Ipv4Addr = from.parse().unwrap();
                let to: std::net::Ipv4Addr = to.parse().unwrap();
                for n in u32::from(from)..=u32::from(to) {
                    out.push(std::net::Ipv4Addr::from(n).to_string());
                }
            }
            None => out.push(part.to_string()),
        }
    }
    out
}

fn oper_keys(c: &Cluster) -> Vec<String> {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &c.etcd.client_url(), "get", "--prefix"])
        .args(["--keys-only", "/contiv.io/oper/eps/"])
        .output()
        .expect("etcdctl");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// The map and the endpoints agree, and no address is held twice.
fn assert_consistent(c: &Cluster, net: &str, gateway: &str, when: &str) -> usize {
    let (allocated, count, eps) = allocation(c, net, gateway);
    let distinct: BTreeSet<String> = eps.iter().cloned().collect();
    assert_eq!(
        distinct.len(),
        eps.len(),
        "{when}: an address held twice: {eps:?}"
    );
    assert_eq!(allocated, distinct, "{when}: allocation map vs endpoints");
    assert_eq!(count as usize, eps.len(), "{when}: endpoint counter");
    eps.len()
}

#[test]
fn adds_interrupted_by_a_netplugin_crash_leak_nothing_and_share_no_address() {
    testbed::require!(Root, Ovs, Etcd, Etcdctl, Ip, Ping);
    let mut c = cluster();
    let (net, gateway) = ("crash", "10.46.0.1");
    create_network(&c, net, "vxlan", "10.46.0.0/24", gateway);
    let conf = c
        .conflist_with_labels(net, net, "", &[("app", "crash")])
        .unwrap();
    let steady = c.add_pod(&conf).unwrap();

    // Kill netplugin at different moments of a burst of 8 ADDs in flight. `half_done`: pods
    // netmaster holds an address for although their ADD failed (killed after the allocation).
    let mut half_done = 0;
    for (round, delay_ms) in [20u64, 30, 40, 50, 60, 80, 200, 400]
        .into_iter()
        .enumerate()
    {
        let pods: Vec<(Netns, String)> = (0..8)
            .map(|_| (Netns::new("k").unwrap(), format!("c{}", unique_name(""))))
            .collect();
        let pid = c.pids().1.expect("netplugin runs").to_string();
        let results: Vec<Result<String, String>> = std::thread::scope(|s| {
            let adds: Vec<_> = pods
                .iter()
                .map(|(ns, id)| {
                    let c = &c;
                    let conf = &conf;
                    s.spawn(move || c.cnirun("add", conf, id, &ns.path()))
                })
                .collect();
            std::thread::sleep(Duration::from_millis(delay_ms));
            let killed = Command::new("kill").args(["-KILL", &pid]).status().unwrap();
            assert!(killed.success());
            adds.into_iter().map(|a| a.join().unwrap()).collect()
        });
        c.kill_netplugin(); // reaps it
        c.start_netplugin().expect("netplugin restarts");
        // Whatever was half done, the store is consistent before any clean-up.
        let held = assert_consistent(&c, net, gateway, &format!("round {round} after restart"));
        let completed = results.iter().filter(|r| r.is_ok()).count();
        half_done += held - 1 - completed;
        eprintln!(
            "round {round}: killed after {delay_ms} ms: {completed} of 8 ADDs completed, {} \
             held an address without completing",
            held - 1 - completed
        );
        // The runtime deletes every pod whose ADD failed; DEL of a half-done ADD succeeds.
        for ((ns, id), result) in pods.iter().zip(&results) {
            if result.is_err() {
                c.cnirun("del", &conf, id, &ns.path())
                    .unwrap_or_else(|e| panic!("round {round}: DEL {id}: {e}"));
            }
        }
        let held = assert_consistent(&c, net, gateway, &format!("round {round} after DELs"));
        assert_eq!(
            held,
            1 + completed,
            "round {round}: only completed pods hold addresses"
        );
        // A retried ADD of a failed pod works; then every pod of the round goes.
        if let Some(((ns, id), _)) = pods.iter().zip(&results).find(|(_, r)| r.is_err()) {
            c.cnirun("add", &conf, id, &ns.path())
                .unwrap_or_else(|e| panic!("round {round}: retried ADD: {e}"));
        }
        assert_consistent(&c, net, gateway, &format!("round {round} after a retry"));
        for (ns, id) in &pods {
            c.cnirun("del", &conf, id, &ns.path())
                .unwrap_or_else(|e| panic!("round {round}: final DEL {id}: {e}"));
        }
        assert_eq!(
            assert_consistent(&c, net, gateway, &format!("round {round} at the end")),
            1
        );
    }
    assert!(
        half_done > 0,
        "no kill landed between netmaster's allocation and the end of an ADD; the rounds \
         did not test a half-done ADD"
    );
    c.del_pod(&steady).unwrap();
    assert_eq!(assert_consistent(&c, net, gateway, "after the last DEL"), 0);
    let (allocated, _, _) = allocation(&c, net, gateway);
    assert!(allocated.is_empty(), "addresses left: {allocated:?}");
    assert!(endpoint_ports(&c).is_empty(), "{:?}", endpoint_ports(&c));
    assert!(endpoint_veths(&c).is_empty(), "{:?}", endpoint_veths(&c));
    assert!(oper_keys(&c).is_empty(), "{:?}", oper_keys(&c));
}
