//! The built `contivk8s` executable against a fake netplugin socket: the CNI contract
//! (environment, stdin, stdout JSON, exit status) for every command.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{FakeNetplugin, add_reply, contivk8s};
use serde_json::{Value, json};

fn config(version: &str, socket: &std::path::Path) -> String {
    json!({"cniVersion": version, "name": "contiv-net", "type": "contivk8s",
           "socketPath": socket, "args": {"cni": {"labels": {"io.contiv.tenant": "t1"}}}})
    .to_string()
}

fn add_vars(command: &str) -> Vec<(&str, &str)> {
    vec![
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", "cid-1"),
        ("CNI_NETNS", "/var/run/netns/pod1"),
        ("CNI_IFNAME", "eth0"),
        (
            "CNI_ARGS",
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;io.contiv.network=blue",
        ),
        ("CNI_PATH", "/opt/cni/bin"),
    ]
}

#[test]
fn version_lists_supported_versions() {
    let run = contivk8s(&[("CNI_COMMAND", "VERSION")], r#"{"cniVersion":"1.0.0"}"#);
    assert_eq!(run.status, 0, "{}", run.stdout);
    let out = run.json.unwrap();
    assert_eq!(out["cniVersion"], "1.0.0");
    let supported: Vec<&str> = out["supportedVersions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for v in ["0.3.1", "0.4.0", "1.0.0"] {
        assert!(supported.contains(&v), "{supported:?}");
    }
}

#[test]
fn add_forwards_the_pod_and_prints_a_1_0_result() {
    let fake = FakeNetplugin::start(|_, _| (200, add_reply()));
    let run = contivk8s(&add_vars("ADD"), &config("1.0.0", &fake.socket()));
    assert_eq!(run.status, 0, "{}", run.stdout);
    assert_eq!(
        run.json.unwrap(),
        json!({
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "vvport1"},
                           {"name": "eth0", "mac": "02:02:0a:01:01:02", "sandbox": "/var/run/netns/pod1"}],
            "ips": [{"address": "10.1.1.2/24", "gateway": "10.1.1.1", "interface": 1},
                    {"address": "fd00:1::2/64", "gateway": "fd00:1::1", "interface": 1}],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.1.1"}, {"dst": "::/0", "gw": "fd00:1::1"}],
            "dns": {}
        })
    );
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/ContivCNI.AddPod");
    assert_eq!(seen[0].content_type.as_deref(), Some("application/json"));
    let body = &seen[0].body;
    assert_eq!(body["K8S_POD_NAME"], "web-1");
    assert_eq!(body["K8S_POD_NAMESPACE"], "default");
    assert_eq!(body["K8S_POD_INFRA_CONTAINER_ID"], "cid-1");
    assert_eq!(body["CNI_NETNS"], "/var/run/netns/pod1");
    assert_eq!(body["CNI_IFNAME"], "eth0");
    assert_eq!(
        body["labels"],
        json!({"io.contiv.tenant": "t1", "io.contiv.network": "blue"})
    );
}

#[test]
fn add_with_a_0_3_1_config_prints_versioned_ips() {
    let fake = FakeNetplugin::start(|_, _| (200, add_reply()));
    let run = contivk8s(&add_vars("ADD"), &config("0.3.1", &fake.socket()));
    assert_eq!(run.status, 0, "{}", run.stdout);
    let out = run.json.unwrap();
    assert_eq!(out["cniVersion"], "0.3.1");
    assert_eq!(out["ips"][0]["version"], "4");
    assert_eq!(out["ips"][1]["version"], "6");
}

#[test]
fn netplugin_down_is_try_again_later_naming_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("absent.sock");
    let run = contivk8s(&add_vars("ADD"), &config("1.0.0", &socket));
    assert_eq!(run.status, 1);
    let err = run.json.unwrap();
    assert_eq!(err["code"], 11);
    assert_eq!(err["cniVersion"], "1.0.0");
    let msg = err["msg"].as_str().unwrap();
    assert!(msg.contains("netplugin is not running"), "{msg}");
    assert!(msg.contains(&socket.display().to_string()), "{msg}");
    // STATUS says "not available" for the same situation.
    let run = contivk8s(&[("CNI_COMMAND", "STATUS")], &config("1.1.0", &socket));
    assert_eq!(run.json.unwrap()["code"], 50);
}

#[test]
fn config_and_environment_errors_have_spec_codes() {
    let fake = FakeNetplugin::start(|_, _| (200, add_reply()));
    let code = |vars: &[(&str, &str)], stdin: &str| {
        let run = contivk8s(vars, stdin);
        assert_eq!(run.status, 1, "{}", run.stdout);
        let err = run.json.unwrap();
        (
            err["code"].as_u64().unwrap(),
            err["msg"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(code(&add_vars("ADD"), "{not json").0, 6);
    let (c, msg) = code(
        &add_vars("ADD"),
        r#"{"cniVersion":"1.0.0","name":"n","type":"contivk8s","socketPath":42}"#,
    );
    assert_eq!(c, 7);
    assert!(msg.contains("socketPath"), "{msg}");
    assert_eq!(
        code(&add_vars("ADD"), r#"{"cniVersion":"7.0.0","name":"n"}"#).0,
        1
    );
    let mut no_netns = add_vars("ADD");
    no_netns.retain(|(k, _)| *k != "CNI_NETNS");
    let (c, msg) = code(&no_netns, &config("1.0.0", &fake.socket()));
    assert_eq!(c, 4);
    assert!(msg.contains("CNI_NETNS"), "{msg}");
    assert_eq!(code(&[], &config("1.0.0", &fake.socket())).0, 4);
    assert_eq!(
        code(&add_vars("FROB"), &config("1.0.0", &fake.socket())).0,
        4
    );
    assert!(fake.seen().is_empty(), "nothing reached netplugin");
}

#[test]
fn netplugin_errors_are_passed_through() {
    let fake = FakeNetplugin::start(|_, _| {
        (
            500,
            json!({"result": 1, "errmsg": "network blue not found in tenant t1; create it with netctl",
                   "errinfo": "key /contiv.io/state/nets/blue.t1 not found", "cniCode": 7}),
        )
    });
    let run = contivk8s(&add_vars("ADD"), &config("1.0.0", &fake.socket()));
    assert_eq!(run.status, 1);
    let err = run.json.unwrap();
    assert_eq!(err["code"], 7);
    assert!(err["msg"].as_str().unwrap().contains("network blue"));
    assert!(err["details"].as_str().unwrap().contains("not found"));

    // Contiv's own reply shape (no cniCode): plugin-specific code 100.
    let fake = FakeNetplugin::start(|_, _| (500, json!({"result": 1, "errmsg": "boom"})));
    let run = contivk8s(&add_vars("ADD"), &config("1.0.0", &fake.socket()));
    let err = run.json.unwrap();
    assert_eq!(err["code"], 100);
    assert_eq!(err["msg"], "boom");
}

#[test]
fn del_is_silent_and_repeatable_and_check_sends_prev_result() {
    let fake = FakeNetplugin::start(|_, _| (200, json!({"result": 0})));
    for _ in 0..2 {
        let mut vars = add_vars("DEL");
        vars.retain(|(k, _)| *k != "CNI_NETNS"); // DEL may come without a namespace
        let run = contivk8s(&vars, &config("1.0.0", &fake.socket()));
        assert_eq!(run.status, 0, "{}", run.stdout);
        assert_eq!(run.stdout, "");
    }
    let mut cfg: Value = serde_json::from_str(&config("1.0.0", &fake.socket())).unwrap();
    cfg["prevResult"] = json!({"cniVersion": "1.0.0", "ips": [{"address": "10.1.1.2/24"}]});
    let run = contivk8s(&add_vars("CHECK"), &cfg.to_string());
    assert_eq!(run.status, 0, "{}", run.stdout);
    let seen = fake.seen();
    let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "/ContivCNI.DelPod",
            "/ContivCNI.DelPod",
            "/ContivCNI.CheckPod"
        ]
    );
    assert_eq!(
        seen[2].body["prevResult"]["ips"][0]["address"],
        "10.1.1.2/24"
    );
    // CHECK is not defined for 0.3.x configs.
    let run = contivk8s(&add_vars("CHECK"), &config("0.3.1", &fake.socket()));
    assert_eq!(run.json.unwrap()["code"], 1);
}

#[test]
fn an_invocation_takes_a_few_milliseconds() {
    let fake = FakeNetplugin::start(|_, _| (200, add_reply()));
    let cfg = config("1.0.0", &fake.socket());
    let mut times: Vec<Duration> = (0..21)
        .map(|_| {
            let start = Instant::now();
            let run = contivk8s(&add_vars("ADD"), &cfg);
            assert_eq!(run.status, 0);
            start.elapsed()
        })
        .collect();
    times.sort();
    let median = times[times.len() / 2];
    eprintln!("contivk8s ADD against an instant server: median {median:?} (spawn included)");
    assert!(median < Duration::from_millis(50), "median {median:?}");
}
