//! `testbed bench convergence --agents N`: how fast the leader's ofnet master fans endpoints out.
//!
//! A real etcd and netmaster (release or debug build, as found); N emulated agents in this
//! process, each a JSON-RPC 1.0 server on loopback written here by hand (no OVS, not our `rpc`
//! module), registered with `OfnetMaster.RegisterNode` (their host registered as `netplugin` in
//! etcd, as netplugin does: the master serves registered hosts only). Endpoints are then created
//! through netmaster's REST API (`POST /plugin/createEndpoint`, on an emulated origin host
//! registered as `netplugin.vtep`) at a steady rate, in a VXLAN network; each endpoint's latency
//! runs from the REST answer until the last of the N agents received its
//! `OfnetAgent.EndpointAdd` (the master follows the endpoint records in etcd). Reported: p50/p99/max, netmaster's RSS and CPU time over the run,
//! and, after the leader hands over to a second netmaster, the time until all N agents are
//! registered with the new one (from the old leader's SIGTERM; the agents re-register as soon as
//! the new master answers `/debug/ofnet`, as netplugins do on the new `netmaster.rpc` record).

use crate::Etcd;
use crate::bench::scale::Conn;
use crate::demo::{Binaries, http, pick_port, spawn_netmaster};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The numbers of one run; printed as one JSON line.
#[derive(Debug, serde::Serialize)]
pub struct ConvergenceReport {
    pub agents: usize,
    pub endpoints: usize,
    pub rate_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub netmaster_rss_mib: f64,
    /// netmaster's user + system CPU time during the endpoint phase, seconds.
    pub netmaster_cpu_s: f64,
    pub reregister_after_failover_ms: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// An emulated agent: answer `true` to every call, report each `OfnetAgent.EndpointAdd`.
async fn agent(listener: TcpListener, seen: mpsc::UnboundedSender<(String, Instant)>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let seen = seen.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(req) = serde_json::from_str::<Value>(&line) else {
                    return;
                };
                if req["method"] == "OfnetAgent.EndpointAdd"
                    && let Some(id) = req["params"][0]["EndpointID"].as_str()
                {
                    let _ = seen.send((id.to_string(), Instant::now()));
                }
                let mut answer =
                    serde_json::to_vec(&json!({"id": req["id"], "result": true, "error": null}))
                        .unwrap_or_default();
                answer.push(b'\n');
                if write.write_all(&answer).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// One hand-written client connection to the master.
struct Client {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    write: tokio::net::tcp::OwnedWriteHalf,
    id: u64,
}

impl Client {
    async fn open(addr: &str) -> Result<Client> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to the ofnet master at {addr}"))?;
        let (read, write) = stream.into_split();
        Ok(Client {
            lines: BufReader::new(read).lines(),
            write,
            id: 0,
        })
    }

    async fn call(&mut self, method: &str, arg: Value) -> Result<()> {
        self.id += 1;
        let mut text = json!({"method": method, "params": [arg], "id": self.id}).to_string();
        text.push('\n');
        self.write.write_all(text.as_bytes()).await?;
        let line = self.lines.next_line().await?.context("the master closed")?;
        let answer: Value = serde_json::from_str(&line)?;
        if !answer["error"].is_null() {
            bail!("{method} refused: {}", answer["error"]);
        }
        Ok(())
    }
}

/// The emulated origin host (where the endpoints live) and its VTEP.
const ORIGIN_HOST: &str = "bench-origin";
const ORIGIN_VTEP: &str = "192.0.2.1";

/// `/plugin/createEndpoint` of endpoint `n` on the origin host.
fn endpoint_request(n: usize) -> Value {
    json!({"TenantName": "default", "NetworkName": "bench-net", "EndpointID": format!("c{n}"),
           "ConfigEP": {"Container": format!("c{n}"), "Host": ORIGIN_HOST}})
}

/// Register every agent with the master at `rpc`, once it admits their host (it has seen the
/// host's registration).
async fn register_all(rpc: &str, nodes: &[Value]) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut c = loop {
        let attempt = async {
            let mut c = Client::open(rpc).await?;
            c.call("OfnetMaster.RegisterNode", nodes[0].clone()).await?;
            anyhow::Ok(c)
        };
        match attempt.await {
            Ok(c) => break c,
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    for node in &nodes[1..] {
        c.call("OfnetMaster.RegisterNode", node.clone()).await?;
    }
    Ok(())
}

/// Register a host as `name` in etcd's service registry (no lease: it lasts the run), as its
/// netplugin does (written with `etcdctl`).
fn register(etcd: &Etcd, name: &str, addr: &str, port: u16, host: &str) -> Result<()> {
    let info = json!({"ServiceName": name, "Role": "", "Version": "", "TTL": 0,
                      "HostAddr": addr, "Port": port, "Hostname": host});
    let out = std::process::Command::new("etcdctl")
        .arg("--endpoints")
        .arg(etcd.client_url())
        .arg("put")
        .arg(format!("/contiv.io/service/{name}/{addr}:{port}"))
        .arg(info.to_string())
        .output()
        .context("running etcdctl")?;
    if !out.status.success() {
        bail!("etcdctl put: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// The ofnet master's address and how many agents it has, from `/debug/ofnet` on `rest`.
fn master_state(rest: &str) -> Option<(String, usize)> {
    let (status, body) = http("GET", rest, "/debug/ofnet")?;
    if status != 200 {
        return None;
    }
    let v: Value = serde_json::from_str(&body).ok()?;
    let addr = format!("{}:{}", v["MyAddr"].as_str()?, v["MyPort"].as_u64()?);
    Some((addr, v["AgentDb"].as_object()?.len()))
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) -> Result<()> {
    let start = Instant::now();
    while !ok() {
        if start.elapsed() > timeout {
            bail!("{what}: not within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// `(rss MiB, cpu seconds)` of process `pid`.
fn usage(pid: u32) -> (f64, f64) {
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1024.0;
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let cpu = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1.to_string();
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?)
        })
        .unwrap_or(0.0)
        / ticks;
    (rss, cpu)
}

/// Run the benchmark: `agents` emulated agents, `endpoints` announced at `rate` per second.
pub fn run(agents: usize, endpoints: usize, rate: f64) -> Result<ConvergenceReport> {
    let bins = Binaries::build(true).context("building the daemons")?;
    let etcd = Etcd::start()?;
    let dir = tempfile::tempdir()?;
    let rest_a = format!("127.0.0.1:{}", pick_port()?);
    let mut leader = spawn_netmaster(
        &bins,
        &["--etcd".to_string(), etcd.client_url()],
        &rest_a,
        &dir.path().join("a.log"),
    )?;
    let pid = leader.pid().context("netmaster pid")?;
    let mut rpc = None;
    wait_for("the ofnet master", Duration::from_secs(20), || {
        rpc = master_state(&rest_a).map(|(a, _)| a);
        rpc.is_some()
    })?;
    let rpc = rpc.unwrap_or_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let mut nodes = Vec::with_capacity(agents);
    let mut rest = Conn::open(&rest_a)?;
    rest.post(
        "/api/v1/networks/default:bench-net/",
        &json!({"tenantName": "default", "networkName": "bench-net", "encap": "vxlan",
                "subnet": "10.96.0.0/16", "gateway": "10.96.0.1"}),
    )?;
    register(&etcd, "netplugin", "127.0.0.1", 9002, "bench-agents")?;
    register(&etcd, "netplugin.vtep", ORIGIN_VTEP, 4789, ORIGIN_HOST)?;
    rt.block_on(async {
        for _ in 0..agents {
            let l = TcpListener::bind("127.0.0.1:0").await?;
            nodes.push(json!({"HostAddr": "127.0.0.1", "HostPort": l.local_addr()?.port()}));
            tokio::spawn(agent(l, seen_tx.clone()));
        }
        register_all(&rpc, &nodes).await
    })?;
    wait_for("all agents registered", Duration::from_secs(60), || {
        master_state(&rest_a).is_some_and(|(_, n)| n == agents)
    })?;

    let (_, cpu_before) = usage(pid);
    let latencies = rt.block_on(async {
        let mut answered: HashMap<String, Instant> = HashMap::new();
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut done = Vec::with_capacity(endpoints);
        let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
        let start = Instant::now();
        for n in 0..endpoints {
            let due = start + period.mul_f64(n as f64);
            tokio::time::sleep_until(due.into()).await;
            let (status, body) = rest.request(
                "POST",
                "/plugin/createEndpoint",
                &endpoint_request(n).to_string(),
            )?;
            if status != 200 {
                bail!("createEndpoint: {status} {body}");
            }
            let at = Instant::now();
            let created: Value = serde_json::from_str(&body)?;
            let ip = created["EndpointConfig"]["ipAddress"]
                .as_str()
                .context("createEndpoint answered no address")?;
            answered.insert(format!("{ip}:default"), at);
            while let Ok((id, at)) = seen.try_recv() {
                record(&mut counts, &answered, &mut done, agents, id, at);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while done.len() < endpoints {
            match tokio::time::timeout_at(deadline.into(), seen.recv()).await {
                Ok(Some((id, at))) => record(&mut counts, &answered, &mut done, agents, id, at),
                _ => bail!(
                    "only {} of {endpoints} endpoints reached every agent",
                    done.len()
                ),
            }
        }
        anyhow::Ok(done)
    })?;
    let (rss, cpu_after) = usage(pid);
    let mut sorted = latencies;
    sorted.sort_by(f64::total_cmp);

    // Leader change: a second netmaster takes over; every agent registers with it.
    let rest_b = format!("127.0.0.1:{}", pick_port()?);
    let _standby = spawn_netmaster(
        &bins,
        &["--etcd".to_string(), etcd.client_url()],
        &rest_b,
        &dir.path().join("b.log"),
    )?;
    let stopped = Instant::now();
    leader.stop();
    let mut rpc_b = None;
    wait_for(
        "the new leader's ofnet master",
        Duration::from_secs(60),
        || {
            rpc_b = master_state(&rest_b).map(|(a, _)| a);
            rpc_b.is_some()
        },
    )?;
    let rpc_b = rpc_b.unwrap_or_default();
    rt.block_on(register_all(&rpc_b, &nodes))?;
    wait_for("all agents re-registered", Duration::from_secs(60), || {
        master_state(&rest_b).is_some_and(|(_, n)| n == agents)
    })?;
    let reregister = stopped.elapsed().as_secs_f64() * 1000.0;

    Ok(ConvergenceReport {
        agents,
        endpoints,
        rate_per_s: rate,
        p50_ms: percentile(&sorted, 0.5),
        p99_ms: percentile(&sorted, 0.99),
        max_ms: sorted.last().copied().unwrap_or(0.0),
        netmaster_rss_mib: rss,
        netmaster_cpu_s: cpu_after - cpu_before,
        reregister_after_failover_ms: reregister,
    })
}

/// Count one arrival; when the last agent has it, record the endpoint's latency.
fn record(
    counts: &mut HashMap<String, usize>,
    answered: &HashMap<String, Instant>,
    done: &mut Vec<f64>,
    agents: usize,
    id: String,
    at: Instant,
) {
    let n = counts.entry(id.clone()).or_default();
    *n += 1;
    if *n == agents
        && let Some(sent) = answered.get(&id)
    {
        done.push(at.saturating_duration_since(*sent).as_secs_f64() * 1000.0);
    }
}
