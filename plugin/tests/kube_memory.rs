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

mod common;
mod fake_kube;

use std::time::Duration;

use fake_kube::FakeKube;
use serde_json::{Value, json};
use testbed::demo::{Cluster, ClusterOptions};

/// A pod as a kubelet-era API server sends it.
fn full_pod(ns: &str, name: &str, node: &str, ip: &str) -> Value {
    json!({
        "metadata": {
            "name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"),
            "generation": 1, "creationTimestamp": "2026-11-28T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6", "tier": "front"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-28T09:59:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web-5d8f7c9b6", "uid": "1a2b", "controller": true,
                "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-28T10:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:tier": {}},
                    "f:ownerReferences": {".": {}, "k:{\"uid\":\"1a2b\"}": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {},
                        "f:name": {}, "f:ports": {".": {}, "k:{\"containerPort\":80}": {}}}}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-28T10:00:05Z", "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {}},
                    "f:containerStatuses": {}, "f:podIP": {}, "f:podIPs": {}}}}
            ]
        },
        "spec": {
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
            "containers": [{
                "name": "web", "image": "nginx:1.27",
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "env": [{"name": "MODE", "value": "prod"}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": true,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 10},
                "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "nodeName": node,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running", "hostIP": "192.168.1.10", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-11-28T10:00:05Z"}],
            "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0,
                "image": "nginx:1.27", "imageID": "docker-pullable://nginx@sha256:00",
                "containerID": "containerd://abc",
                "state": {"running": {"startedAt": "2026-11-28T10:00:04Z"}}}],
            "qosClass": "Burstable"
        }
    })
}

fn kib(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
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
        let ip = format!("10.{}.{}.{}", 100 + i / 65_536, (i / 256) % 256, i % 256);
        let pod = full_pod(
            &format!("ns{}", i % namespaces),
            &format!("web-{i}"),
            &format!("node-{}", i % 100),
            &ip,
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
                json!({"addresses": [format!("10.{}.{}.{}", 100 + i / 65_536, (i / 256) % 256, i % 256)],
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
    let kube_config = dir.path().join("contiv.json");
    std::fs::write(
        &kube_config,
        json!({"K8S_API_SERVER": api.url, "K8S_TOKEN": fake_kube::TOKEN}).to_string(),
    )
    .unwrap();
    let mut bins = common::binaries();
    if let Some(path) = std::env::var_os("MEASURE_NETPLUGIN") {
        bins.netplugin = path.into();
    }
    let c = Cluster::start_with(
        bins,
        ClusterOptions {
            netplugin_mode: Some("kubernetes".into()),
            kube_config: Some(kube_config),
            ..ClusterOptions::default()
        },
    )
    .unwrap();
    // The daemon waits at most 5 s for the first lists before its switches connect; a big
    // cluster's lists may still be arriving then. Each watch opens once its list is complete;
    // then read once the resident size has held still for 3 s (the lists applied; the heap
    // trimmer runs every second).
    for resource in ["namespaces", "pods", "services", "endpointslices"] {
        api.wait_watching(resource, Duration::from_secs(300));
    }
    let pid = c.pids().1.expect("netplugin runs");
    let read = || std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let started = std::time::Instant::now();
    let (mut last, mut still) = (0u64, 0);
    while still < 6 && started.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(500));
        let rss = kib(&read(), "VmRSS:");
        still = if rss.abs_diff(last) * 100 <= last {
            still + 1
        } else {
            0
        };
        last = rss;
    }
    let status = read();
    println!(
        "{}",
        json!({
            "pods": pods, "namespaces": namespaces, "services": services,
            "netplugin_rss_mib": kib(&status, "VmRSS:") as f64 / 1024.0,
            "netplugin_rss_anon_mib": kib(&status, "RssAnon:") as f64 / 1024.0,
            "netplugin_peak_rss_mib": kib(&status, "VmHWM:") as f64 / 1024.0,
        })
    );
}
