//! `testbed bench convergence --agents N`: how fast the leader's ofnet master fans endpoints out.
//!
//! A real etcd and netmaster (release or debug build, as found); N emulated agents in this
//! process, each a JSON-RPC 1.0 server on loopback written here by hand (no OVS, not our `rpc`
//! module), registered with `OfnetMaster.RegisterNode`. An emulated origin host then announces
//! endpoints with `OfnetMaster.EndpointAdd` at a steady rate; each endpoint's latency runs from
//! the master's answer to the announcement until the last of the N agents received its
//! `OfnetAgent.EndpointAdd`. Reported: p50/p99/max, netmaster's RSS and CPU time over the run,
//! and, after the leader hands over to a second netmaster, the time until all N agents are
//! registered with the new one (from the old leader's SIGTERM; the agents re-register as soon as
//! the new master answers `/debug/ofnet`, as netplugins do on the new `netmaster.rpc` record).

use crate::Etcd;
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

fn endpoint(n: usize) -> Value {
    let ip = format!("10.{}.{}.{}", 100 + n / 65536, (n / 256) % 256, n % 256);
    json!({
        "EndpointID": format!("{ip}:default"), "EndpointType": 2, "EndpointGroup": 0,
        "IpAddr": ip, "IpMask": "255.255.255.255", "Ipv6Addr": null, "Ipv6Mask": null,
        "Vrf": "default", "MacAddrStr": "02:02:0a:00:00:01", "Vlan": 2, "Vni": 5000,
        "EndpointGroupVlan": 0, "OriginatorIp": "192.0.2.1", "OriginatorMac": "",
        "Timestamp": "2026-01-01T00:00:00Z"
    })
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
    rt.block_on(async {
        for _ in 0..agents {
            let l = TcpListener::bind("127.0.0.1:0").await?;
            nodes.push(json!({"HostAddr": "127.0.0.1", "HostPort": l.local_addr()?.port()}));
            tokio::spawn(agent(l, seen_tx.clone()));
        }
        let mut c = Client::open(&rpc).await?;
        for node in &nodes {
            c.call("OfnetMaster.RegisterNode", node.clone()).await?;
        }
        anyhow::Ok(())
    })?;
    wait_for("all agents registered", Duration::from_secs(60), || {
        master_state(&rest_a).is_some_and(|(_, n)| n == agents)
    })?;

    let (_, cpu_before) = usage(pid);
    let latencies = rt.block_on(async {
        let mut origin = Client::open(&rpc).await?;
        let mut answered: HashMap<String, Instant> = HashMap::new();
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut done = Vec::with_capacity(endpoints);
        let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
        let start = Instant::now();
        for n in 0..endpoints {
            let due = start + period.mul_f64(n as f64);
            tokio::time::sleep_until(due.into()).await;
            let ep = endpoint(n);
            let id = ep["EndpointID"].as_str().unwrap_or_default().to_string();
            origin.call("OfnetMaster.EndpointAdd", ep).await?;
            answered.insert(id, Instant::now());
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
    rt.block_on(async {
        let mut c = Client::open(&rpc_b).await?;
        for node in &nodes {
            c.call("OfnetMaster.RegisterNode", node.clone()).await?;
        }
        anyhow::Ok(())
    })?;
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
