//! `testbed bench policy` and `testbed bench objects` (issue 20): create rates through netmaster's
//! REST API against a real etcd, with a real netplugin and OVS for the policy flows.
//!
//! * policy: a network, a group with a local pod and an attached policy; `rules` rules (a
//!   distinct TCP port each) created with 1 request in flight into policy `p1`, then with 16 into
//!   `p16` (attached too). For each: creates/s of the first and the last 1,000, the seconds from
//!   the last answer until every rule's flows are in `ovs-ofctl dump-flows`; then the flows
//!   installed and the RSS of netplugin and netmaster.
//! * objects: `networks` networks, then `groups` groups spread over them, 16 in flight; creates/s
//!   of the first and the last 1,000 of each. Contiv's tag space holds ~4,000 networks (each
//!   takes a VLAN or a local VLAN), so networks default to 4,000.
//!
//! * endpoints (issue 17 point 3): `endpoints` endpoints created through `/plugin/createEndpoint`
//!   (netplugin's call) into etcd with 1 request in flight on one /16 network, then with 32 on
//!   another; creates/s overall and for the first and the last 1,000 of each.
//!
//! Requests go over plain HTTP/1.1 keep-alive connections, one per worker thread.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::demo::{BRIDGE, Binaries, Cluster};

/// One keep-alive HTTP/1.1 connection.
pub(crate) struct Conn {
    addr: String,
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub(crate) fn open(addr: &str) -> Result<Conn> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Conn {
            addr: addr.to_string(),
            reader: BufReader::new(stream),
        })
    }

    /// `(status, body)`.
    pub(crate) fn request(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
    ) -> Result<(u16, String)> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let stream = self.reader.get_mut();
        stream.write_all(head.as_bytes())?;
        stream.write_all(body.as_bytes())?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad status line {line:?}"))?;
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            self.reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((name, value)) = h.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().context("Content-Length")?;
            }
        }
        let mut buf = vec![0; length];
        self.reader.read_exact(&mut buf)?;
        Ok((status, String::from_utf8_lossy(&buf).into_owned()))
    }

    pub(crate) fn post(&mut self, path: &str, body: &Value) -> Result<()> {
        let (status, text) = self.request("POST", path, &body.to_string())?;
        if status != 200 {
            bail!("POST {path}: {status} {text}");
        }
        Ok(())
    }
}

/// POST `count` objects (`make(i)` gives path and body) to netmaster at `addr` (`host:port`)
/// with `in_flight` keep-alive connections; fails on the first answer that is not 200.
pub fn post_many(
    addr: &str,
    count: usize,
    in_flight: usize,
    make: &(dyn Fn(usize) -> (String, Value) + Sync),
) -> Result<()> {
    create_many(addr, count, in_flight, make).map(|_| ())
}

/// The number of flows on the VXLAN bridge matching TCP port `from` or above (`tp_dst=` or
/// `tp_src=`).
/// Flows one ported rule becomes on the switch: its two directions (`inRx`/`outTx`-style pair),
/// each for IPv4 and IPv6.
pub const FLOWS_PER_RULE: usize = 4;

pub fn port_flows(c: &Cluster, from: u32) -> Result<usize> {
    let dump = c.ovs.ofctl(&["dump-flows", BRIDGE])?;
    Ok(dump
        .lines()
        .filter(|l| {
            l.split([',', ' '])
                .filter_map(|f| {
                    f.strip_prefix("tp_dst=")
                        .or_else(|| f.strip_prefix("tp_src="))
                })
                .any(|p| p.parse::<u32>().is_ok_and(|p| p >= from))
        })
        .count())
}

/// Creates/s of the first and the last 1,000, and the instant of the last answer.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Rates {
    pub first_1000_per_s: f64,
    pub last_1000_per_s: f64,
}

/// POST `count` objects (`make(i)` gives path and body) with `in_flight` workers.
fn create_many(
    addr: &str,
    count: usize,
    in_flight: usize,
    make: &(dyn Fn(usize) -> (String, Value) + Sync),
) -> Result<(Rates, Instant)> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Instant>> = Mutex::new(Vec::with_capacity(count));
    let started = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..in_flight)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    let mut conn = Conn::open(addr)?;
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= count {
                            return Ok(());
                        }
                        let (path, body) = make(i);
                        conn.post(&path, &body)?;
                        done.lock()
                            .map_err(|_| anyhow::anyhow!("poisoned"))?
                            .push(Instant::now());
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().map_err(|_| anyhow::anyhow!("worker panicked"))??;
        }
        Ok(())
    })?;
    let mut times = done.into_inner().map_err(|_| anyhow::anyhow!("poisoned"))?;
    times.sort();
    let n = times.len();
    let k = 1000.min(n);
    let end = *times.last().context("nothing created")?;
    let first = times[k - 1].duration_since(started).as_secs_f64();
    let last_start = if n > k { times[n - k - 1] } else { started };
    let last = end.duration_since(last_start).as_secs_f64();
    Ok((
        Rates {
            first_1000_per_s: k as f64 / first,
            last_1000_per_s: k as f64 / last,
        },
        end,
    ))
}

fn rss_mib(pid: Option<u32>) -> f64 {
    pid.and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// Flows on the VXLAN bridge that match a TCP port of ours (`tp_dst=` or `tp_src=` in 20000..).
fn policy_flows(c: &Cluster) -> Result<usize> {
    let dump = c.ovs.ofctl(&["dump-flows", BRIDGE])?;
    Ok(dump
        .lines()
        .filter(|l| {
            l.split([',', ' '])
                .filter_map(|f| {
                    f.strip_prefix("tp_dst=")
                        .or_else(|| f.strip_prefix("tp_src="))
                })
                .any(|p| p.parse::<u32>().is_ok_and(|p| p >= BASE_PORT))
        })
        .count())
}

const BASE_PORT: u32 = 20_000;

/// Path and body of an `in` TCP allow rule `i` of `policy` (tenant `default`) on `port`.
pub fn rule(policy: &str, i: usize, port: u32) -> (String, Value) {
    let key = format!("default:{policy}:{i}");
    (
        format!("/api/v1/rules/{key}/"),
        json!({
            "key": key, "tenantName": "default", "policyName": policy, "ruleId": i.to_string(),
            "direction": "in", "protocol": "tcp", "port": port, "action": "allow", "priority": 1,
        }),
    )
}

/// The numbers of `testbed bench policy`.
#[derive(Debug, serde::Serialize)]
pub struct PolicyReport {
    pub rules: usize,
    pub one_in_flight: Rates,
    pub sixteen_in_flight: Rates,
    /// Seconds from the last REST answer until every flow was in OVS (1 and 16 in flight).
    pub flows_confirmed_s: [f64; 2],
    pub flows_installed: usize,
    pub netplugin_rss_mib: f64,
    pub netmaster_rss_mib: f64,
}

/// Flows in the policy table (table 5), counted by the switch (`ovs-ofctl dump-aggregate`: no
/// flow is printed, so polling costs milliseconds even with 80,000 flows, where a
/// `dump-flows` takes longer than the install it waits for).
fn policy_table_flows(c: &Cluster) -> Result<usize> {
    let out = c.ovs.ofctl(&["dump-aggregate", BRIDGE, "table=5"])?;
    out.split_whitespace()
        .find_map(|w| w.strip_prefix("flow_count="))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no flow_count in {out:?}"))
}

/// Seconds from `since` until the policy table holds `want` flows (polled every 5 ms).
fn wait_flows(c: &Cluster, want: usize, since: Instant) -> Result<f64> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let have = policy_table_flows(c)?;
        if have >= want {
            return Ok(since.elapsed().as_secs_f64());
        }
        if Instant::now() > deadline {
            bail!("only {have} of {want} policy flows after 300 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn run_policy(rules: usize) -> Result<PolicyReport> {
    let bins = Binaries::build(true).context("building netmaster, netplugin and contivk8s")?;
    let c = Cluster::start(bins)?;
    let addr = c
        .netmaster_url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut conn = Conn::open(&addr)?;
    conn.post(
        "/api/v1/networks/default:bench/",
        &json!({"tenantName": "default", "networkName": "bench", "encap": "vxlan",
                "subnet": "10.77.0.0/16", "gateway": "10.77.0.1"}),
    )?;
    for p in ["p1", "p16"] {
        conn.post(
            &format!("/api/v1/policys/default:{p}/"),
            &json!({"tenantName": "default", "policyName": p}),
        )?;
    }
    conn.post(
        "/api/v1/endpointGroups/default:web/",
        &json!({"tenantName": "default", "groupName": "web", "networkName": "bench",
                "policies": ["p1", "p16"]}),
    )?;
    let conf = c.conflist("bench", "bench", "web")?;
    let _pod = c.add_pod(&conf).map_err(|e| anyhow::anyhow!("pod: {e}"))?;
    let base = policy_table_flows(&c)?;

    let port =
        |p: &str, i: usize| BASE_PORT + u32::try_from(i).unwrap_or(0) * 2 + u32::from(p == "p16");
    let (one, end) = create_many(&addr, rules, 1, &|i| rule("p1", i, port("p1", i)))?;
    let confirmed_one = wait_flows(&c, base + FLOWS_PER_RULE * rules, end)?;
    let (sixteen, end) = create_many(&addr, rules, 16, &|i| rule("p16", i, port("p16", i)))?;
    let confirmed_sixteen = wait_flows(&c, base + 2 * FLOWS_PER_RULE * rules, end)?;
    let (nm, np) = c.pids();
    Ok(PolicyReport {
        rules,
        one_in_flight: one,
        sixteen_in_flight: sixteen,
        flows_confirmed_s: [confirmed_one, confirmed_sixteen],
        flows_installed: policy_flows(&c)?,
        netplugin_rss_mib: rss_mib(np),
        netmaster_rss_mib: rss_mib(nm),
    })
}

/// The numbers of `testbed bench objects`.
#[derive(Debug, serde::Serialize)]
pub struct ObjectsReport {
    pub networks: usize,
    pub groups: usize,
    pub network_creates: Rates,
    pub group_creates: Rates,
    pub netmaster_rss_mib: f64,
}

pub fn run_objects(networks: usize, groups: usize) -> Result<ObjectsReport> {
    let bins = Binaries::build(true).context("building netmaster, netplugin and contivk8s")?;
    let c = Cluster::start(bins)?;
    let addr = c
        .netmaster_url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let (network_creates, _) = create_many(&addr, networks, 16, &|i| {
        (
            format!("/api/v1/networks/default:n{i}/"),
            json!({"tenantName": "default", "networkName": format!("n{i}"), "encap": "vxlan",
                   "subnet": format!("10.{}.{}.0/24", 64 + i / 256, i % 256)}),
        )
    })?;
    let (group_creates, _) = create_many(&addr, groups, 16, &|i| {
        (
            format!("/api/v1/endpointGroups/default:g{i}/"),
            json!({"tenantName": "default", "groupName": format!("g{i}"),
                   "networkName": format!("n{}", i % networks.max(1))}),
        )
    })?;
    let (nm, _) = c.pids();
    Ok(ObjectsReport {
        networks,
        groups,
        network_creates,
        group_creates,
        netmaster_rss_mib: rss_mib(nm),
    })
}

/// One phase of `testbed bench endpoints`.
#[derive(Debug, serde::Serialize)]
pub struct EndpointPhase {
    pub in_flight: usize,
    /// Endpoints with labels that a service of their tenant selects (each create also
    /// makes a provider).
    pub labelled: bool,
    pub creates_per_s: f64,
    #[serde(flatten)]
    pub rates: Rates,
}

/// The numbers of `testbed bench endpoints`.
#[derive(Debug, serde::Serialize)]
pub struct EndpointsReport {
    pub endpoints: usize,
    pub phases: Vec<EndpointPhase>,
    pub netmaster_rss_mib: f64,
}

pub fn run_endpoints(endpoints: usize) -> Result<EndpointsReport> {
    let bins = Binaries::build(true).context("building netmaster, netplugin and contivk8s")?;
    let c = Cluster::start(bins)?;
    let addr = c
        .netmaster_url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut phases = Vec::new();
    // The third phase is what Kubernetes pods look like: labelled, in a tenant with a
    // service whose selector picks them, so each create also makes the pod a provider.
    for (n, in_flight, labelled) in [(1usize, 1usize, false), (2, 32, false), (3, 32, true)] {
        let net = format!("eps{n}-{in_flight}");
        // A fresh connection per phase: netmaster closes one left idle through a whole phase.
        let mut conn = Conn::open(&addr)?;
        conn.post(
            &format!("/api/v1/networks/default:{net}/"),
            &json!({"tenantName": "default", "networkName": net, "encap": "vxlan",
                    "subnet": format!("10.{}.0.0/16", 80 + n)}),
        )?;
        let labels = if labelled {
            conn.post(
                &format!("/api/v1/serviceLBs/default:svc-{net}/"),
                &json!({"tenantName": "default", "serviceName": format!("svc-{net}"),
                        "networkName": net, "selectors": [format!("app={net}")],
                        "ports": ["80:8080:TCP"]}),
            )?;
            json!({ "app": net })
        } else {
            json!({})
        };
        let started = Instant::now();
        let (rates, end) = create_many(&addr, endpoints, in_flight, &|i| {
            (
                "/plugin/createEndpoint".to_string(),
                json!({"TenantName": "default", "NetworkName": net, "ServiceName": "",
                       "EndpointID": format!("bench-{n}-{i}"),
                       "ConfigEP": {"Container": format!("bench-{n}-{i}"),
                                    "Host": "bench-host"},
                       "Labels": labels}),
            )
        })?;
        phases.push(EndpointPhase {
            in_flight,
            labelled,
            creates_per_s: endpoints as f64 / end.duration_since(started).as_secs_f64(),
            rates,
        });
    }
    let (nm, _) = c.pids();
    Ok(EndpointsReport {
        endpoints,
        phases,
        netmaster_rss_mib: rss_mib(nm),
    })
}
