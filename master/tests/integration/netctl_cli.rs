//! netctl (the real binary) drives every object kind through a real netmaster.

use std::process::Command;

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
    assert_eq!(code, 0, "netctl {args:?} failed: {err}{out}");
    out
}

#[tokio::test]
async fn netctl_drives_every_object() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let nm = InProcess::start(&etcd.client_url(), 5).await;
    let url = nm.url.clone();
    // The blocking CLI calls run on a worker thread so the in-process netmaster keeps serving.
    tokio::task::spawn_blocking(move || drive(&url))
        .await
        .unwrap();
}

fn drive(url: &str) {
    assert!(ok(url, &["version"]).contains("Server Version"));
    ok(
        url,
        &[
            "global",
            "set",
            "--vlan-range",
            "100-2000",
            "--arp-mode",
            "flood",
        ],
    );
    let info = ok(url, &["global", "info"]);
    assert!(
        info.contains("Vlan Range: 100-2000") && info.contains("ARP mode: flood"),
        "{info}"
    );
    ok(url, &["global", "inspect"]);

    ok(url, &["tenant", "create", "blue"]);
    assert!(
        ok(url, &["tenant", "ls", "-q"])
            .lines()
            .any(|l| l == "blue")
    );
    ok(
        url,
        &[
            "net",
            "create",
            "-t",
            "blue",
            "-s",
            "10.1.1.0/24",
            "-g",
            "10.1.1.254",
            "-e",
            "vlan",
            "web",
        ],
    );
    ok(
        url,
        &["network", "create", "-t", "blue", "-s", "10.2.1.0/24", "db"],
    );
    let nets = ok(url, &["net", "ls", "-t", "blue"]);
    assert!(
        nets.starts_with("Tenant") && nets.contains("10.1.1.0/24") && nets.contains("vlan"),
        "{nets}"
    );
    let nets_json: serde_json::Value =
        serde_json::from_str(&ok(url, &["net", "ls", "-a", "-j"])).unwrap();
    assert_eq!(nets_json.as_array().unwrap().len(), 2);
    let inspect: serde_json::Value =
        serde_json::from_str(&ok(url, &["net", "inspect", "-t", "blue", "web"])).unwrap();
    assert_eq!(inspect["Oper"]["pktTag"], 100);
    assert_eq!(inspect["Oper"]["allocatedIPAddresses"], "10.1.1.254");

    ok(
        url,
        &[
            "netprofile",
            "create",
            "-t",
            "blue",
            "-b",
            "6Mbps",
            "-d",
            "6",
            "-s",
            "80",
            "gold",
        ],
    );
    assert!(ok(url, &["netprofile", "ls", "-t", "blue"]).contains("6Mbps"));
    ok(url, &["netprofile", "inspect", "-t", "blue", "gold"]);
    ok(url, &["policy", "create", "-t", "blue", "web-in"]);
    ok(
        url,
        &[
            "policy", "rule-add", "-t", "blue", "-d", "in", "-l", "tcp", "-j", "deny", "web-in",
            "1",
        ],
    );
    ok(
        url,
        &[
            "policy", "rule-add", "-t", "blue", "-d", "in", "-l", "tcp", "-P", "8000", "-p", "100",
            "web-in", "2",
        ],
    );
    ok(
        url,
        &[
            "policy", "rule-add", "-t", "blue", "-d", "out", "-o", "db", "-l", "udp", "-P", "53",
            "web-in", "3",
        ],
    );
    let rules = ok(url, &["policy", "rule-ls", "-t", "blue", "web-in"]);
    assert!(
        rules.contains("Incoming Rules")
            && rules.contains("8000")
            && rules.contains("Outgoing Rules"),
        "{rules}"
    );
    assert!(ok(url, &["policy", "ls", "-t", "blue"]).contains("web-in"));
    ok(url, &["policy", "inspect", "-t", "blue", "web-in"]);
    // Client-side rule checks exit 1; server-side validation exits 3 with the message.
    assert_eq!(
        netctl(
            url,
            &[
                "policy", "rule-add", "-t", "blue", "-d", "in", "-e", "x", "web-in", "9"
            ]
        )
        .0,
        1
    );
    let (code, _, err) = netctl(
        url,
        &[
            "policy", "rule-add", "-t", "blue", "-d", "in", "-l", "sctp", "web-in", "9",
        ],
    );
    assert_eq!(code, 3);
    assert!(err.contains("protocol"), "{err}");

    ok(
        url,
        &[
            "external-contracts",
            "create",
            "-t",
            "blue",
            "-p",
            "-a",
            "uni/tn-common/brc-default",
            "ext1",
        ],
    );
    assert!(ok(url, &["external-contracts", "ls", "-t", "blue"]).contains("provided"));
    ok(
        url,
        &[
            "group", "create", "-t", "blue", "-p", "web-in", "-n", "gold", "-e", "ext1", "web",
            "frontend",
        ],
    );
    ok(
        url,
        &[
            "group",
            "create",
            "-t",
            "blue",
            "-r",
            "10.2.1.10-10.2.1.20",
            "db",
            "backend",
        ],
    );
    let groups = ok(url, &["group", "ls", "-t", "blue"]);
    assert!(
        groups.contains("frontend")
            && groups.contains("web-in")
            && groups.contains("10.2.1.10-10.2.1.20"),
        "{groups}"
    );
    let g: serde_json::Value =
        serde_json::from_str(&ok(url, &["group", "inspect", "-t", "blue", "frontend"])).unwrap();
    assert_eq!(g["Config"]["netProfile"], "gold");
    ok(
        url,
        &[
            "app-profile",
            "create",
            "-t",
            "blue",
            "-g",
            "frontend,backend",
            "app1",
        ],
    );
    assert!(ok(url, &["app-profile", "group-ls", "-t", "blue", "app1"]).contains("backend"));
    ok(
        url,
        &[
            "app-profile",
            "update",
            "-t",
            "blue",
            "-g",
            "frontend",
            "app1",
        ],
    );
    assert!(ok(url, &["app-profile", "ls", "-t", "blue"]).contains("app1"));
    ok(
        url,
        &[
            "service",
            "create",
            "-t",
            "blue",
            "-s",
            "web",
            "-l",
            "app=web",
            "-p",
            "80:8080:TCP",
            "--ip",
            "10.1.1.200",
            "websvc",
        ],
    );
    assert!(ok(url, &["service", "ls", "-t", "blue"]).contains("app=web"));
    let svc: serde_json::Value =
        serde_json::from_str(&ok(url, &["service", "inspect", "-t", "blue", "websvc"])).unwrap();
    assert_eq!(svc["Oper"]["serviceVip"], "10.1.1.200");
    assert!(
        svc["Oper"]["sessionAffinityTimeout"].as_u64() == Some(0),
        "no affinity unless asked: {svc}"
    );

    // Session affinity (not in Contiv's netctl): ClientIP with a timeout, read back through
    // REST as the object and as the state netplugin gets; bad values refused in the user's words.
    ok(
        url,
        &[
            "service",
            "create",
            "-t",
            "blue",
            "-s",
            "web",
            "-l",
            "app=db",
            "-p",
            "5432:5432:TCP",
            "--session-affinity",
            "ClientIP",
            "--affinity-timeout",
            "60",
            "sticky",
        ],
    );
    let sticky: serde_json::Value =
        serde_json::from_str(&ok(url, &["service", "inspect", "-t", "blue", "sticky"])).unwrap();
    assert_eq!(sticky["Config"]["sessionAffinity"], "ClientIP", "{sticky}");
    assert_eq!(sticky["Config"]["sessionAffinityTimeout"], 60, "{sticky}");
    assert_eq!(sticky["Oper"]["sessionAffinityTimeout"], 60, "{sticky}");
    for (args, why) in [
        (
            &[
                "--session-affinity",
                "ClientIP",
                "--affinity-timeout",
                "70000",
            ][..],
            "more than 65535",
        ),
        (
            &["--affinity-timeout", "60"][..],
            "needs sessionAffinity ClientIP",
        ),
        (
            &["--session-affinity", "sticky"][..],
            "must be ClientIP or None",
        ),
    ] {
        let mut all = vec![
            "service", "create", "-t", "blue", "-s", "web", "-l", "app=db", "bad",
        ];
        all.extend(args);
        let (code, out, err) = netctl(url, &all);
        assert_eq!(code, 3, "{args:?}: {err}{out}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    assert!(!ok(url, &["service", "ls", "-t", "blue"]).contains("bad"));
    ok(url, &["service", "rm", "-t", "blue", "sticky"]);

    let (code, _, err) = netctl(url, &["global", "set", "--fwd-mode", "routing"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("forwarding mode"), "{err}");
    let (code, _, err) = netctl(url, &["global", "set", "--vlan-range", "1-10"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("existing vlans 100"), "{err}");
    ok(
        url,
        &[
            "bgp",
            "create",
            "--router-ip",
            "50.1.1.2/24",
            "--as",
            "65002",
            "--neighbor-as",
            "500",
            "--neighbor",
            "50.1.1.200",
            "host1",
        ],
    );
    assert!(ok(url, &["bgp", "ls"]).contains("50.1.1.2/24"));
    ok(url, &["bgp", "inspect", "host1"]);
    ok(
        url,
        &[
            "aci-gw",
            "set",
            "-n",
            "topology/pod-1/node-101",
            "-d",
            "allvlans",
        ],
    );
    assert!(ok(url, &["aci-gw", "info"]).contains("topology/pod-1/node-101"));
    ok(url, &["aci-gw", "inspect"]);

    // Endpoint inspect goes through an endpoint created the way netplugin would.
    let (code, _, _) = netctl(url, &["endpoint", "inspect", "nothing-here"]);
    assert_eq!(code, 3);

    // In-use objects refuse deletion with exit code 3; then everything is torn down.
    let (code, _, err) = netctl(url, &["net", "rm", "-t", "blue", "web"]);
    assert_eq!(code, 3);
    assert!(err.contains("used by"), "{err}");
    ok(url, &["bgp", "rm", "host1"]);
    ok(url, &["service", "rm", "-t", "blue", "websvc"]);
    ok(url, &["app-profile", "rm", "-t", "blue", "app1"]);
    ok(url, &["group", "rm", "-t", "blue", "frontend"]);
    ok(url, &["group", "rm", "-t", "blue", "backend"]);
    ok(url, &["external-contracts", "rm", "-t", "blue", "ext1"]);
    ok(url, &["policy", "rule-rm", "-t", "blue", "web-in", "1"]);
    ok(url, &["policy", "rm", "-t", "blue", "web-in"]);
    ok(url, &["netprofile", "rm", "-t", "blue", "gold"]);
    ok(url, &["net", "rm", "-t", "blue", "web"]);
    ok(url, &["net", "rm", "-t", "blue", "db"]);
    ok(url, &["tenant", "rm", "blue"]);
    assert!(!ok(url, &["tenant", "ls", "-q"]).contains("blue"));

    // Unreachable netmaster: exit 2 and a hint; bad URL: usage-level failure.
    let (code, _, err) = netctl("http://127.0.0.1:1", &["tenant", "ls"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot reach netmaster"), "{err}");
    assert_eq!(netctl("ftp://x", &["tenant", "ls"]).0, 2);
}
