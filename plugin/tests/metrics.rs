//! Prometheus metrics of both daemons (issue 15): `GET /metrics` on netmaster's REST listener
//! and on netplugin's debug listener, checked as text (every family declared with HELP and
//! TYPE, values numeric, counters moving when pods are added through libcni and REST calls
//! are made) and scraped by a real Prometheus (Debian's package), asked through its query API.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use testbed::demo::{Cluster, http};

/// One metric family of the exposition: its declared type and help, and its samples.
#[derive(Debug, Default)]
struct FamilyText {
    kind: String,
    help: String,
    /// `(sample name, labels as written, value)`.
    samples: Vec<(String, String, f64)>,
}

/// Parse the text exposition strictly enough to catch format mistakes: every sample belongs to
/// a family declared by `# TYPE` with a `# HELP`, names its family (plus the suffix its type
/// allows), has a numeric value, and the text ends with `# EOF`.
fn parse(text: &str) -> BTreeMap<String, FamilyText> {
    assert!(text.ends_with("# EOF\n"), "no # EOF at the end:\n{text}");
    let mut families: BTreeMap<String, FamilyText> = BTreeMap::new();
    for line in text.lines() {
        if line == "# EOF" || line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP has a name and a text");
            families.entry(name.into()).or_default().help = help.into();
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a name and a type");
            families.entry(name.into()).or_default().kind = kind.into();
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment {line:?}");
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("value of {line:?} is not a number"));
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (series, ""),
        };
        let family = families
            .iter_mut()
            .filter(|(f, _)| name.starts_with(f.as_str()))
            .max_by_key(|(f, _)| f.len())
            .unwrap_or_else(|| panic!("sample {name} has no # TYPE before it"));
        let suffix = &name[family.0.len()..];
        let allowed: &[&str] = match family.1.kind.as_str() {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "gauge" => &[""],
            other => panic!("family {} has type {other:?}", family.0),
        };
        assert!(
            allowed.contains(&suffix),
            "sample {name} does not fit family {} of type {}",
            family.0,
            family.1.kind
        );
        family.1.samples.push((name.into(), labels.into(), value));
    }
    for (name, f) in &families {
        assert!(!f.help.is_empty(), "family {name} has no HELP");
        assert!(!f.kind.is_empty(), "family {name} has no TYPE");
    }
    families
}

/// The value of the sample `name` whose labels include every `key="value"` of `labels`
/// (summed over the samples that match; 0 when none does).
fn value(families: &BTreeMap<String, FamilyText>, name: &str, labels: &[(&str, &str)]) -> f64 {
    families
        .values()
        .flat_map(|f| &f.samples)
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.split(',').any(|p| p == format!("{k}=\"{v}\"")))
        })
        .map(|(_, _, v)| v)
        .sum()
}

fn scrape(addr: &str) -> String {
    let (status, body) = http("GET", addr, "/metrics").expect("metrics endpoint answers");
    assert_eq!(status, 200, "{body}");
    body
}

fn netmaster_addr(c: &Cluster) -> String {
    c.netmaster_url.trim_start_matches("http://").to_string()
}

/// Families each daemon must declare from the start, with their type. (A family whose every
/// series is labelled by what went wrong, `netplugin_cni_errors{code}` and
/// `netplugin_openflow_errors{type}`, appears with its first error: the first is checked below,
/// the second in the unit tests of `plugin::metrics`.)
const NETMASTER_FAMILIES: &[(&str, &str)] = &[
    ("netmaster_http_requests", "counter"),
    ("netmaster_http_request_duration_seconds", "histogram"),
    ("contiv_etcd_requests", "counter"),
    ("contiv_etcd_request_duration_seconds", "histogram"),
    ("netmaster_leader", "gauge"),
    ("netmaster_leader_elections", "counter"),
    ("netmaster_ofnet_rpc_peers", "gauge"),
    ("netmaster_ofnet_rpc_calls", "counter"),
    ("netmaster_endpoints", "gauge"),
    ("netmaster_policy_rules", "gauge"),
    ("netmaster_services", "gauge"),
];

const NETPLUGIN_FAMILIES: &[(&str, &str)] = &[
    ("contiv_etcd_requests", "counter"),
    ("contiv_etcd_request_duration_seconds", "histogram"),
    ("netplugin_bridge_connected", "gauge"),
    ("netplugin_bridge_in_sync", "gauge"),
    ("netplugin_bridge_flows", "gauge"),
    ("netplugin_bridge_bundles", "counter"),
    ("netplugin_bridge_bundle_duration_seconds", "histogram"),
    ("netplugin_bridge_reconciles", "counter"),
    ("netplugin_cni_request_duration_seconds", "histogram"),
    ("netplugin_pod_port_numbers", "counter"),
    ("netplugin_endpoints", "gauge"),
    ("netplugin_policy_rules", "gauge"),
    ("netplugin_services", "gauge"),
    ("netplugin_service_providers", "gauge"),
];

fn assert_families(families: &BTreeMap<String, FamilyText>, want: &[(&str, &str)]) {
    for (name, kind) in want {
        let f = families
            .get(*name)
            .unwrap_or_else(|| panic!("family {name} missing; have {:?}", families.keys()));
        assert_eq!(&f.kind, kind, "type of {name}");
    }
}

/// Both `/metrics` endpoints parse, declare every family, and their counters move: a pod added
/// and deleted through libcni moves netplugin's CNI histograms, endpoint gauge and bridge
/// bundles and netmaster's `/plugin/*` request counters; a failed ADD is counted by its CNI
/// code; the REST calls of `netctl` are counted by route template, never by raw path.
#[test]
fn both_daemons_serve_prometheus_text_whose_counters_move_with_pods_and_rest_calls() {
    testbed::require!(Root, Ovs, Etcd, Ip);
    let c = cluster();
    let nm = netmaster_addr(&c);
    create_network(&c, "mnet", "vxlan", "10.67.0.0/24", "10.67.0.1");

    let master0 = parse(&scrape(&nm));
    let plugin0 = parse(&scrape(&c.debug_addr));
    assert_families(&master0, NETMASTER_FAMILIES);
    assert_families(&plugin0, NETPLUGIN_FAMILIES);
    // The network create went through the object route's template.
    let create = [
        ("route", "/api/v1/networks/{key}/"),
        ("method", "POST"),
        ("status", "200"),
    ];
    assert!(
        value(&master0, "netmaster_http_requests_total", &create) >= 1.0,
        "no counted network create in\n{}",
        scrape(&nm)
    );
    assert_eq!(value(&master0, "netmaster_leader", &[]), 1.0);
    assert!(value(&master0, "netmaster_leader_elections_total", &[]) >= 1.0);
    assert!(value(&master0, "contiv_etcd_requests_total", &[("op", "txn")]) >= 1.0);
    assert_eq!(
        value(&master0, "netmaster_ofnet_rpc_peers", &[]),
        1.0,
        "the host's VXLAN agent registers with the ofnet master"
    );
    for bridge in [VXLAN_BRIDGE, VLAN_BRIDGE] {
        assert_eq!(
            value(
                &plugin0,
                "netplugin_bridge_connected",
                &[("bridge", bridge)]
            ),
            1.0,
            "{bridge} connected"
        );
        assert!(
            value(
                &plugin0,
                "netplugin_bridge_reconciles_total",
                &[("bridge", bridge)]
            ) >= 1.0,
            "{bridge} reconciled at connect"
        );
        assert!(value(&plugin0, "netplugin_bridge_flows", &[("bridge", bridge)]) > 0.0);
    }
    assert_eq!(
        value(
            &plugin0,
            "netplugin_cni_request_duration_seconds_count",
            &[("command", "ADD")]
        ),
        0.0
    );
    let etcd0 = value(&plugin0, "contiv_etcd_requests_total", &[]);
    let bundles0 = value(
        &plugin0,
        "netplugin_bridge_bundles_total",
        &[("bridge", VXLAN_BRIDGE), ("outcome", "applied")],
    );
    let vxlan_flows0 = value(
        &plugin0,
        "netplugin_bridge_flows",
        &[("bridge", VXLAN_BRIDGE)],
    );

    // A pod through libcni, then a failing ADD (no such network), then the pod's DEL.
    let conf = c.conflist("mnet", "mnet", "").unwrap();
    let pod = c.add_pod(&conf).expect("pod ADD");
    let bad = c.conflist("nosuchnet", "nosuchnet", "").unwrap();
    assert!(c.add_pod(&bad).is_err(), "ADD to a missing network fails");
    let plugin1 = parse(&scrape(&c.debug_addr));
    assert_eq!(
        value(
            &plugin1,
            "netplugin_cni_request_duration_seconds_count",
            &[("command", "ADD")]
        ),
        2.0
    );
    // The successful ADD's steps, each once; the labels went with createEndpoint (no
    // separate updateEndpoint round trip against this netmaster). The failed ADD timed none.
    assert_families(
        &plugin1,
        &[("netplugin_cni_add_step_duration_seconds", "histogram")],
    );
    for step in [
        "lookup",
        "netmaster",
        "veth",
        "ovsdb",
        "ofport",
        "pod_side",
        "oper",
        "flows",
    ] {
        assert_eq!(
            value(
                &plugin1,
                "netplugin_cni_add_step_duration_seconds_count",
                &[("step", step)]
            ),
            1.0,
            "step {step}"
        );
    }
    assert_eq!(
        value(
            &plugin1,
            "netplugin_cni_add_step_duration_seconds_count",
            &[("step", "labels")]
        ),
        0.0
    );
    assert_families(&plugin1, &[("netplugin_cni_errors", "counter")]);
    assert_eq!(
        value(
            &plugin1,
            "netplugin_cni_errors_total",
            &[("command", "ADD")]
        ),
        1.0,
        "the failed ADD is counted by its code:\n{}",
        scrape(&c.debug_addr)
    );
    assert_eq!(
        value(&plugin1, "netplugin_endpoints", &[("location", "local")]),
        1.0
    );
    assert!(value(&plugin1, "contiv_etcd_requests_total", &[]) > etcd0);
    assert!(
        value(
            &plugin1,
            "netplugin_bridge_bundles_total",
            &[("bridge", VXLAN_BRIDGE), ("outcome", "applied")]
        ) > bundles0,
        "the pod's flows went out in a bundle"
    );
    assert!(
        value(
            &plugin1,
            "netplugin_bridge_flows",
            &[("bridge", VXLAN_BRIDGE)]
        ) > vxlan_flows0
    );
    let master1 = parse(&scrape(&nm));
    assert!(
        value(
            &master1,
            "netmaster_http_requests_total",
            &[("route", "/plugin/createEndpoint"), ("status", "200")]
        ) >= 1.0,
        "the pod's endpoint create counted on netmaster"
    );
    assert!(
        value(&master1, "netmaster_endpoints", &[]) >= 1.0,
        "the pod's endpoint reached the ofnet master"
    );

    c.del_pod(&pod).expect("pod DEL");
    let plugin2 = parse(&scrape(&c.debug_addr));
    assert_eq!(
        value(
            &plugin2,
            "netplugin_cni_request_duration_seconds_count",
            &[("command", "DEL")]
        ),
        1.0
    );
    assert_eq!(
        value(&plugin2, "netplugin_endpoints", &[("location", "local")]),
        0.0
    );

    // Raw paths never become labels: two different objects, one route template.
    for name in ["metrics-a", "metrics-b"] {
        let _ = http("GET", &nm, &format!("/api/v1/networks/default:{name}/"));
    }
    let text = scrape(&nm);
    assert!(!text.contains("metrics-a"), "a raw path became a label");
    let master2 = parse(&text);
    assert!(
        value(
            &master2,
            "netmaster_http_requests_total",
            &[
                ("route", "/api/v1/networks/{key}/"),
                ("method", "GET"),
                ("status", "404")
            ]
        ) >= 2.0
    );
    let _ = http("GET", &nm, "/no/such/route/4711");
    let text = scrape(&nm);
    assert!(!text.contains("4711"), "an unmatched path became a label");
    assert!(
        value(
            &parse(&text),
            "netmaster_http_requests_total",
            &[("route", "unmatched")]
        ) >= 1.0
    );
}

/// A Prometheus of our own, on a free loopback port, scraping every second; killed on drop.
struct Prometheus {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(targets: &[(&str, &str)]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let port = testbed::free_port().unwrap();
        let addr = format!("127.0.0.1:{port}");
        let mut config = String::from(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
        );
        for (job, target) in targets {
            config.push_str(&format!(
                "  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n"
            ));
        }
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log.try_clone().unwrap())
            .spawn()
            .expect("starting prometheus");
        Prometheus {
            child,
            addr,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET /api/v1/query?query=<expr>`: the result vector (empty while Prometheus starts).
    fn query(&self, expr: &str) -> Vec<Value> {
        let encoded: String = expr
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => {
                    (b as char).to_string()
                }
                other => format!("%{other:02X}"),
            })
            .collect();
        let Some((200, body)) = http("GET", &self.addr, &format!("/api/v1/query?query={encoded}"))
        else {
            return Vec::new();
        };
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The values of `expr`'s series by `job` label.
    fn by_job(&self, expr: &str) -> BTreeMap<String, f64> {
        self.query(expr)
            .iter()
            .filter_map(|s| {
                let job = s["metric"]["job"].as_str().unwrap_or_default().to_string();
                let v = s["value"][1].as_str()?.parse().ok()?;
                Some((job, v))
            })
            .collect()
    }

    /// Wait until `check` holds for `expr`'s values by job.
    fn wait_for(
        &self,
        expr: &str,
        what: &str,
        check: impl Fn(&BTreeMap<String, f64>) -> bool,
    ) -> BTreeMap<String, f64> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let values = self.by_job(expr);
            if check(&values) {
                return values;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {expr} = {values:?}\nprometheus log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's Prometheus scrapes a running netmaster and netplugin every second: both targets
/// are up, and the CNI ADD counter it stores moves when pods are added through libcni.
#[test]
fn a_real_prometheus_scrapes_both_daemons_and_sees_pods_added() {
    testbed::require!(Root, Ovs, Etcd, Ip, Prometheus);
    let c = cluster();
    create_network(&c, "pnet", "vxlan", "10.68.0.0/24", "10.68.0.1");
    let nm = netmaster_addr(&c);
    let prom = Prometheus::start(&[("netmaster", &nm), ("netplugin", &c.debug_addr)]);

    let up = prom.wait_for("up", "both targets up", |v| {
        v.get("netmaster") == Some(&1.0) && v.get("netplugin") == Some(&1.0)
    });
    assert_eq!(up.len(), 2, "{up:?}");
    let adds = "sum by (job) (netplugin_cni_request_duration_seconds_count{command=\"ADD\"})";
    // Nothing added yet: the series is absent or 0.
    let before = prom.by_job(adds).get("netplugin").copied().unwrap_or(0.0);
    assert_eq!(before, 0.0);
    let leader = prom.wait_for("netmaster_leader", "leader scraped", |v| {
        v.get("netmaster") == Some(&1.0)
    });
    assert_eq!(leader.len(), 1);

    let conf = c.conflist("pnet", "pnet", "").unwrap();
    let pods: Vec<_> = (0..2).map(|_| c.add_pod(&conf).expect("pod ADD")).collect();
    prom.wait_for(adds, "two ADDs seen by Prometheus", |v| {
        v.get("netplugin") == Some(&2.0)
    });
    prom.wait_for(
        "netplugin_endpoints{location=\"local\"}",
        "two local endpoints",
        |v| v.get("netplugin") == Some(&2.0),
    );
    // The REST side of the same ADDs, on netmaster. (The series is new, so `increase()` could not
    // see its first step from nothing to 2: the stored value itself is asked.)
    prom.wait_for(
        "sum by (job) (netmaster_http_requests_total{route=\"/plugin/createEndpoint\",status=\"200\"})",
        "endpoint creates seen on netmaster",
        |v| v.get("netmaster").is_some_and(|n| *n >= 2.0),
    );
    for pod in &pods {
        c.del_pod(pod).expect("pod DEL");
    }
}
