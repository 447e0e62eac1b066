//! What a runtime following the CNI conventions, or a Contiv user, sends verbatim — against
//! real parts: etcd, netmaster, OVS, netplugin, and pods through libcni (`cnirun`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use testbed::demo::{Cluster, http};

/// A conflist whose labels are in the CNI conventions' shape (a list of `{key, value}`), with
/// `args` this plugin does not understand next to them.
fn conventions_conflist(c: &Cluster, name: &str, labels: &[(&str, &str)]) -> PathBuf {
    let labels: Vec<Value> = labels
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    let list = json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [{
            "type": "contivk8s",
            "socketPath": c.cni_socket,
            "args": {
                "cni": {"labels": labels, "x-unknown": {"anything": [1, 2]}},
                "org.example.runtime": "whatever"
            }
        }]
    });
    let path = c.dir.path().join(format!("{name}.conflist"));
    std::fs::write(&path, list.to_string()).unwrap();
    path
}

/// netmaster's REST view of one object.
fn rest(c: &Cluster, path: &str) -> Value {
    let addr = c.netmaster_url.trim_start_matches("http://");
    let (status, body) = http("GET", addr, path).unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// Labels as a list of `{key, value}` objects (CONVENTIONS.md) select the pod's network and
/// group, and an `app` label makes it the provider of a service whose selector names it;
/// unknown `args` are ignored.
#[test]
fn cni_conventions_label_list_selects_network_group_and_service() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let c = cluster();
    create_network(&c, "lbl", "vxlan", "10.61.0.0/24", "10.61.0.1");
    c.netctl(&["group", "create", "lbl", "g1"]).unwrap();
    c.netctl(&[
        "service",
        "create",
        "websvc",
        "-network",
        "lbl",
        "-selector",
        "app=web",
        "-port",
        "80:8080:TCP",
    ])
    .unwrap();
    let conf = conventions_conflist(
        &c,
        "listform",
        &[
            ("io.contiv.network", "lbl"),
            ("io.contiv.net-group", "g1"),
            ("app", "web"),
        ],
    );
    let a = c
        .add_pod(&conf)
        .expect("ADD with the conventions' label list");
    let b = c.add_pod(&conf).unwrap();
    assert!(a.ip.starts_with("10.61.0."), "{}", a.ip);
    assert!(reaches(&a, &b.ip), "{} cannot reach {}", a.ip, b.ip);

    // netmaster put the endpoint in the group the label named, with the pod's labels.
    let ep = rest(
        &c,
        &format!("/api/v1/inspect/endpoints/{}/", a.container_id),
    );
    assert_eq!(ep["Oper"]["endpointGroupKey"], "g1:default", "{ep}");
    // Contiv prints the labels as a Go map, and keeps the IPv6 slot even when it is empty.
    let labels = ep["Oper"]["labels"].as_str().unwrap_or_default();
    assert!(
        labels.contains("app:web") && labels.contains("io.contiv.net-group:g1"),
        "{ep}"
    );
    assert_eq!(ep["Oper"]["ipAddress"], json!([a.ip, ""]), "{ep}");
    // ... and made it a provider of the service selecting app=web.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let svc = rest(&c, "/api/v1/inspect/serviceLBs/default:websvc/");
        let providers = svc["Oper"]["providers"].to_string();
        if providers.contains(&a.ip) && providers.contains(&b.ip) {
            break;
        }
        assert!(Instant::now() < deadline, "providers never listed: {svc}");
        std::thread::sleep(Duration::from_millis(200));
    }
    c.del_pod(&a).unwrap();
    c.del_pod(&b).unwrap();
}

/// `--netmode vxlan --fwdmode bridge`: netmaster refuses to start as netplugin does, with the
/// same message and Contiv's bad-option exit code 22.
#[test]
fn vxlan_with_bridge_is_refused_by_netmaster_and_netplugin_alike() {
    let bins = binaries();
    let args = [
        "--mode",
        "test",
        "--netmode",
        "vxlan",
        "--fwdmode",
        "bridge",
        "--etcd",
        "http://127.0.0.1:1",
    ];
    let refusal = |exe: &std::path::Path, prefix: &str| {
        let out = std::process::Command::new(exe).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        assert_eq!(out.status.code(), Some(22), "{}: {stderr}", exe.display());
        stderr
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{stderr}"))
            .to_string()
    };
    let master = refusal(&bins.netmaster, "netmaster: ");
    let plugin = refusal(&bins.netplugin, "netplugin: ");
    assert_eq!(master, plugin);
    assert!(
        master.contains("--netmode vxlan") && master.contains("--fwdmode routing"),
        "{master}"
    );
    assert!(!master.contains('§'), "{master}");
}
