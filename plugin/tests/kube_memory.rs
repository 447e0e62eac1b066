//! netplugin's memory in kubernetes mode, following a cluster bigger than its host: a
//! measurement (`#[ignore]`d), not a check. netplugin follows every pod, namespace, service
//! and EndpointSlice of the cluster (NetworkPolicy peers and service providers are anywhere);
//! this puts a cluster's worth of them, shaped as a real API server sends them (managed
//! fields, volumes, probes, status), in the handcrafted API server, starts one host's netplugin
//! against it and prints its resident memory once it has listed them, and its peak.
//!
//! ```text
//! MEASURE_PODS=5000 MEASURE_NETPLUGIN=<binary> \
//!   cargo nextest run -p plugin --test kube_memory --run-ignored only --no-capture
//! ```
//! (`MEASURE_NETPLUGIN` defaults to this build's netplugin; docs/performance.md, "Memory".)
#![allow(clippy::unwrap_used)]

mod common;
mod fake_kube;

use std::time::Duration;

use fake_kube::FakeKube;
use serde_json::{Value, json};
use testbed::bench::memory::proc_status;
use testbed::demo::Cluster;

/// `data/pod.json` (a pod as an API server sends it) as pod `ns/name` on `node` at `ip`.
fn full_pod(ns: &str, name: &str, node: &str, ip: &str) -> Value {
    let mut pod: Value = serde_json::from_str(include_str!("data/pod.json")).unwrap();
    pod["metadata"]["name"] = json!(name);
    pod["metadata"]["namespace"] = json!(ns);
    pod["metadata"]["uid"] = json!(format!("uid-{ns}-{name}"));
    pod["spec"]["nodeName"] = json!(node);
    pod["status"]["podIP"] = json!(ip);
    pod["status"]["podIPs"] = json!([{"ip": ip}]);
    pod
}

/// The address of the cluster's `i`th pod.
fn pod_ip(i: usize) -> String {
    format!("10.{}.{}.{}", 100 + i / 65_536, (i / 256) % 256, i % 256)
}

/// A `/proc/<pid>/status` field of netplugin in MiB.
fn mib(pid: u32, field: &str) -> f64 {
    proc_status(Some(pid), field) / 1024.0
}

#[test]
#[ignore]
fn measure_netplugin_memory_following_a_cluster() {
    testbed::require!(Root, Ovs, Etcd, Ip);
    let pods: usize = std::env::var("MEASURE_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let namespaces = 50;
    let services = pods / 25;
    let api = FakeKube::start();
    for n in 0..namespaces {
        api.put("namespaces", fake_kube::namespace(&format!("ns{n}"), &[]));
    }
    for i in 0..pods {
        let pod = full_pod(
            &format!("ns{}", i % namespaces),
            &format!("web-{i}"),
            &format!("node-{}", i % 100),
            &pod_ip(i),
        );
        api.put("pods", pod);
    }
    // A service per 25 pods, its slice listing them.
    for s in 0..services {
        let ns = format!("ns{}", s % namespaces);
        api.put(
            "services",
            json!({"metadata": {"name": format!("svc-{s}"), "namespace": ns,
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
                "spec": {"type": "ClusterIP", "clusterIP": format!("10.254.{}.{}", s / 256, s % 256),
                    "ports": [{"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP"}],
                    "selector": {"app": "web"}}}),
        );
        let endpoints: Vec<Value> = (0..25)
            .map(|e| {
                let i = s * 25 + e;
                json!({"addresses": [pod_ip(i)],
                    "conditions": {"ready": true, "serving": true, "terminating": false},
                    "nodeName": format!("node-{}", i % 100), "zone": "a",
                    "targetRef": {"kind": "Pod", "name": format!("web-{i}"), "namespace": ns, "uid": "u"}})
            })
            .collect();
        api.put(
            "endpointslices",
            json!({"metadata": {"name": format!("svc-{s}-abcde"), "namespace": ns,
                "labels": {"kubernetes.io/service-name": format!("svc-{s}")},
                "managedFields": [{"manager": "endpointslice-controller", "operation": "Update"}]},
                "addressType": "IPv4", "endpoints": endpoints,
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}),
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let mut bins = common::binaries();
    if let Some(path) = std::env::var_os("MEASURE_NETPLUGIN") {
        bins.netplugin = path.into();
    }
    // As `bench memory` does: the binary's code read by netplugin's own page faults.
    testbed::bench::memory::evict_from_page_cache(&bins.netplugin).unwrap();
    let c = Cluster::start_with(bins, api.cluster_options(dir.path())).unwrap();
    // The daemon waits at most 5 s for the first lists before its switches connect; a big
    // cluster's lists may still be arriving then. Each watch opens once its list is complete;
    // then read once the resident size has held still for 3 s (the lists applied; the heap
    // trimmer runs every second).
    for resource in ["namespaces", "pods", "services", "endpointslices"] {
        api.wait_watching(resource, Duration::from_secs(300));
    }
    let pid = c.pids().1.expect("netplugin runs");
    let started = std::time::Instant::now();
    let (mut last, mut still) = (0.0, 0);
    while still < 6 && started.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(500));
        let rss = mib(pid, "VmRSS");
        still = if (rss - last).abs() <= last / 100.0 {
            still + 1
        } else {
            0
        };
        last = rss;
    }
    println!(
        "{}",
        json!({
            "pods": pods, "namespaces": namespaces, "services": services,
            "netplugin_rss_mib": mib(pid, "VmRSS"),
            "netplugin_rss_anon_mib": mib(pid, "RssAnon"),
            "netplugin_peak_rss_mib": mib(pid, "VmHWM"),
        })
    );
}
