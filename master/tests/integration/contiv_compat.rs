//! netmaster's answers where Contiv's differ from a naive reading: what `inspect` reports
//! (gateway not counted, `clusterMode`, the endpoint's labels and empty IPv6 slot), a group in
//! several app profiles, and the ACI gateway settings kept while app profiles exist. Driven
//! with netctl and REST against a real netmaster and etcd.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::{Value, json};

use crate::common::*;

fn netctl(url: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_netctl"))
        .arg("--netmaster")
        .arg(url)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[track_caller]
fn ok(url: &str, args: &[&str]) -> String {
    let (code, out, err) = netctl(url, args);
    assert_eq!(code, 0, "netctl {args:?}: {err}{out}");
    out
}

fn rest(url: &str, method: &str, path: &str) -> (u16, String) {
    testbed::demo::http(method, url.trim_start_matches("http://"), path).unwrap()
}

#[tokio::test]
async fn netmaster_answers_as_contiv_does() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let nm = InProcess::start(&etcd.client_url(), 5).await;
    let client = nm.client();
    let url = nm.url.clone();

    // Global inspect names the cluster mode netmaster runs in.
    let u = url.clone();
    let global: Value = tokio::task::spawn_blocking(move || {
        serde_json::from_str(&ok(&u, &["global", "inspect"])).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(global["Oper"]["clusterMode"], "test", "{global}");

    // The gateway is an allocated address but not an endpoint's: not counted.
    let u = url.clone();
    tokio::task::spawn_blocking(move || {
        ok(
            &u,
            &["net", "create", "-s", "10.5.0.0/24", "-g", "10.5.0.1", "n1"],
        );
        let net: Value = serde_json::from_str(&ok(&u, &["net", "inspect", "n1"])).unwrap();
        assert_eq!(net["Oper"]["allocatedAddressesCount"], 0, "{net}");
        assert_eq!(net["Oper"]["allocatedIPAddresses"], "10.5.0.1", "{net}");
    })
    .await
    .unwrap();
    let ep = client
        .create_endpoint(&endpoint_request("n1", "c1"))
        .await
        .unwrap();
    client
        .update_endpoint(&master::endpoint::UpdateEndpointRequest {
            IPAddress: ep.ip_address.clone(),
            ContainerID: "c1".into(),
            Labels: BTreeMap::from([("app".into(), "web".into())]),
            Tenant: "default".into(),
            Network: "n1".into(),
            Event: "start".into(),
            EndpointID: "c1".into(),
            EPCommonName: "web-1".into(),
        })
        .await
        .unwrap();
    let u = url.clone();
    let ip = ep.ip_address.clone();
    tokio::task::spawn_blocking(move || {
        let net: Value = serde_json::from_str(&ok(&u, &["net", "inspect", "n1"])).unwrap();
        assert_eq!(net["Oper"]["allocatedAddressesCount"], 1, "{net}");
        let ep: Value = serde_json::from_str(&ok(&u, &["endpoint", "inspect", "c1"])).unwrap();
        assert_eq!(ep["Oper"]["ipAddress"], json!([ip, ""]), "{ep}");
        assert_eq!(ep["Oper"]["labels"], "map[app:web]", "{ep}");

        // One group in two app profiles; it stays protected until the last one drops it.
        ok(&u, &["group", "create", "n1", "g1"]);
        ok(&u, &["group", "create", "n1", "g2"]);
        ok(&u, &["aci-gw", "set", "-e", "no"]);
        ok(&u, &["app-profile", "create", "-g", "g1,g2", "ap1"]);
        ok(&u, &["app-profile", "create", "-g", "g1", "ap2"]);
        let listed = ok(&u, &["app-profile", "ls"]);
        assert!(listed.contains("ap1") && listed.contains("ap2"), "{listed}");
        assert_eq!(netctl(&u, &["group", "rm", "g1"]).0, 3);
        ok(&u, &["app-profile", "rm", "ap1"]);
        let (code, _, err) = netctl(&u, &["group", "rm", "g1"]);
        assert_eq!(code, 3, "g1 is still in ap2: {err}");
        ok(&u, &["group", "rm", "g2"]);

        // The ACI gateway settings stay while an app profile exists.
        let (status, body) = rest(&u, "DELETE", "/api/v1/aciGws/aciGw/");
        assert_eq!(status, 409, "{body}");
        assert!(body.contains("app profile"), "{body}");
        assert_eq!(rest(&u, "GET", "/api/v1/aciGws/aciGw/").0, 200);
        ok(&u, &["app-profile", "rm", "ap2"]);
        ok(&u, &["group", "rm", "g1"]);
        assert_eq!(rest(&u, "DELETE", "/api/v1/aciGws/aciGw/").0, 200);
    })
    .await
    .unwrap();
}

/// The column of a table row under `header` (tables are aligned, cells have no spaces here).
fn cell(table: &str, header: &str, row_starting: &str) -> String {
    let mut lines = table.lines();
    let head = lines
        .find(|l| l.contains(header))
        .unwrap_or_else(|| panic!("no {header:?} in\n{table}"));
    let col = head.find(header).unwrap();
    let row = lines
        .find(|l| l.starts_with(row_starting))
        .unwrap_or_else(|| panic!("no row {row_starting:?} in\n{table}"));
    row.get(col..)
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Output a script written for Contiv's netctl can read the same way.
#[tokio::test]
async fn netctl_output_reads_as_contivs() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let nm = InProcess::start(&etcd.client_url(), 5).await;
    let u = nm.url.clone();
    tokio::task::spawn_blocking(move || {
        // An automatic packet tag prints as 0.
        ok(&u, &["net", "create", "-s", "10.6.0.0/24", "auto"]);
        let nets = ok(&u, &["net", "ls"]);
        assert_eq!(cell(&nets, "Packet tag", "default  auto"), "0", "{nets}");

        // rule-ls: Contiv's columns, the To IpAddress of incoming rules, port 0 as 0.
        ok(&u, &["policy", "create", "p"]);
        // An incoming rule may name a destination address when one group uses the policy.
        ok(&u, &["group", "create", "-policy=p", "auto", "g1"]);
    })
    .await
    .unwrap();
    // ... and the address is one of that group's endpoints.
    let mut req = endpoint_request("auto", "c1");
    req.ServiceName = "g1".into();
    let dest = nm.client().create_endpoint(&req).await.unwrap().ip_address;
    let u = nm.url.clone();
    tokio::task::spawn_blocking(move || {
        let to_ip = format!("-to-ip-address={dest}");
        ok(
            &u,
            &[
                "policy", "rule-add", "p", "1", "-direction=in", "-protocol=tcp",
                "-from-ip-address=10.6.0.0/25", &to_ip, "-action=deny",
            ],
        );
        ok(
            &u,
            &[
                "policy", "rule-add", "p", "2", "-direction=out", "-protocol=udp", "-port=53",
                "-to-ip-address=8.8.8.8",
            ],
        );
        let rules = ok(&u, &["policy", "rule-ls", "p"]);
        let (incoming, outgoing) = rules.split_once("Outgoing Rules:").unwrap();
        assert!(
            incoming.lines().nth(1).unwrap().split_whitespace().collect::<Vec<_>>().join(" ")
                == "Rule Priority From EndpointGroup From Network From IpAddress To IpAddress Protocol Port Action",
            "{rules}"
        );
        assert_eq!(cell(incoming, "To IpAddress", "1 "), dest, "{rules}");
        assert_eq!(cell(incoming, "Port", "1 "), "0", "{rules}");
        assert_eq!(cell(outgoing, "To IpAddress", "2 "), "8.8.8.8", "{rules}");
        assert_eq!(cell(outgoing, "Port", "2 "), "53", "{rules}");

        // app-profile group-ls: the groups joined by commas; --json the app profile.
        ok(&u, &["group", "create", "auto", "g2"]);
        ok(&u, &["app-profile", "create", "-group=g1,g2", "ap"]);
        assert_eq!(ok(&u, &["app-profile", "group-ls", "ap"]), "g1,g2\n");
        let as_json: Value =
            serde_json::from_str(&ok(&u, &["app-profile", "group-ls", "-json", "ap"])).unwrap();
        assert_eq!(as_json["endpointGroups"], json!(["g1", "g2"]), "{as_json}");

        // inspect pretty-prints (indented, one field a line).
        let inspect = ok(&u, &["net", "inspect", "auto"]);
        assert!(inspect.starts_with("{\n  \"Config\": {\n    "), "{inspect}");
        assert!(inspect.lines().count() > 10, "{inspect}");
    })
    .await
    .unwrap();
}
