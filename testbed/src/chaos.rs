//! The chaos run (`testbed chaos`): a two-host cluster carrying traffic while its parts fail in
//! turn, with what each fault cost.
//!
//! Set-up: etcd (one or more members), two netmasters (the first leads), two emulated hosts
//! (each a namespace with its own OVS and netplugin, wired by an underlay veth), a VXLAN network
//! and a service load balancer. Traffic that runs through every fault:
//! - a UDP prober: pod A (host 1) sends a datagram with a sequence number every 10 ms to pod B
//!   (host 2), which echoes it; a sequence number without its echo is a lost packet, counted per
//!   fault window exactly (no sampling, no time arithmetic);
//! - a TCP stream from a client pod (host 1) through the service VIP to a provider pod (host 2):
//!   an 8-byte counter every 10 ms, echoed and checked; the stream is *broken* when the
//!   connection fails, and its longest silence is reported as a stall.
//!
//! Faults, in turn: netplugin SIGKILLed on host 1 and restarted; ovs-vswitchd killed and
//! restarted on host 2; ovsdb-server killed and restarted on host 2; the netmaster leader
//! SIGKILLed (the standby takes over after the lock TTL; the old one comes back as follower);
//! every etcd member stopped for the outage and started again. After each fault a pod is
//! created (timed from the fault; for etcd from its return) and deleted through libcni, then
//! the state is compared with the snapshot taken before the fault: etcd's `/contiv.io/state/`
//! and `/contiv.io/oper/` keys (endpoints, networks with their allocation maps, ...) and every
//! bridge's `ovs-ofctl dump-flows`, normalized (no cookies, counters or ages).

use crate::demo::{Binaries, Cluster, ClusterOptions, CniPod, ExtraHost};
use crate::{Error, EtcdOptions, Ovs, Result};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The bridges netplugin drives on every host.
const BRIDGES: [&str; 2] = ["contivVxlanBridge", "contivVlanBridge"];
/// The chaos network and its service.
const SUBNET: &str = "10.77.0.0/24";
const GATEWAY: &str = "10.77.0.1";
const VIP: &str = "10.77.0.200";
const PROBE_PORT: u16 = 7000;
const SERVICE_PORT: u16 = 80;
const PROVIDER_PORT: u16 = 8080;
/// Prober and stream interval: 100 packets per second.
const INTERVAL: Duration = Duration::from_millis(10);
/// How long anything may take to come back before the run gives up on it.
const RECOVERY: Duration = Duration::from_secs(60);

/// What a run does.
#[derive(Debug, Clone)]
pub struct ChaosOptions {
    /// etcd members (all of them are stopped for the outage).
    pub etcd_members: usize,
    /// How long etcd stays down.
    pub etcd_outage: Duration,
    /// netmaster's `--lock-ttl` (seconds): how soon a standby replaces a killed leader.
    pub lock_ttl: u64,
    /// Quiet time before and after each fault, inside its window.
    pub settle: Duration,
    /// Run only the faults whose name contains this (all when empty).
    pub only: String,
    /// Copy the first host's and the netmasters' logs here at the end.
    pub logs: Option<std::path::PathBuf>,
}

impl Default for ChaosOptions {
    fn default() -> Self {
        ChaosOptions {
            etcd_members: 3,
            etcd_outage: Duration::from_secs(10),
            lock_ttl: 5,
            settle: Duration::from_secs(1),
            only: String::new(),
            logs: None,
        }
    }
}

/// What one fault cost.
#[derive(Debug, Clone, Serialize)]
pub struct FaultReport {
    pub fault: String,
    /// Probe datagrams sent A → B during the window, and those never echoed.
    pub packets_sent: u64,
    pub packets_lost: u64,
    /// When the first lost probes were sent, seconds from the fault (negative: before it).
    pub lost_at_s: Vec<f64>,
    /// The TCP stream through the VIP failed (connection error); why.
    pub tcp_broken: Option<String>,
    /// The stream's longest silence in the window, milliseconds.
    pub tcp_max_stall_ms: u64,
    /// Seconds from the fault (etcd: from its return) until a CNI ADD succeeded.
    pub pod_ready_s: f64,
    /// Failed CNI ADDs before that one.
    pub pod_attempts_failed: u32,
    /// Endpoints, allocations (etcd) and flows (every bridge) equal before and after.
    pub state_same: bool,
    /// What differed, if anything (first lines).
    pub differences: Vec<String>,
    /// etcd keys plus OVS interfaces, and flows, compared.
    pub keys_compared: usize,
    pub flows_compared: usize,
    /// OVS faults: seconds from the daemon being up again until every flow was back.
    pub flows_back_s: Option<f64>,
    /// OVS faults: what the first flow dump after the restart showed, if not everything.
    pub flows_meanwhile: Option<String>,
    /// Leader kill: seconds until the standby held the leader lock.
    pub failover_s: Option<f64>,
    /// etcd outage: a CNI ADD during the outage, how long it took to fail and its error.
    pub add_during_outage_s: Option<f64>,
    pub add_during_outage_error: Option<String>,
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct ChaosReport {
    pub etcd_members: usize,
    pub etcd_outage_s: u64,
    pub lock_ttl_s: u64,
    pub faults: Vec<FaultReport>,
}

fn step(step: &str, why: impl std::fmt::Display) -> Error {
    Error::Step {
        step: step.to_string(),
        why: why.to_string(),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Run `f` on a thread that entered the network namespace at `netns` (so the sockets it opens
/// live there; they keep working from any thread afterwards).
fn in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T> {
    let path = netns.to_path_buf();
    let io = |source| Error::Io {
        op: "enter network namespace",
        path: netns.to_path_buf(),
        source,
    };
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path)?;
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(std::io::Error::from)?;
        f()
    })
    .join()
    .map_err(|_| step("enter network namespace", "thread panicked"))?
    .map_err(io)
}

fn ip(pod: &CniPod) -> Result<Ipv4Addr> {
    pod.ip
        .parse()
        .map_err(|_| step("pod address", format!("{} is not IPv4", pod.ip)))
}

/// Threads of the traffic generators, stopped together.
struct Workers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    fn new() -> Workers {
        Workers {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        }
    }

    fn spawn(&mut self, f: impl FnOnce(Arc<AtomicBool>) + Send + 'static) {
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || f(stop)));
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The UDP prober: sequence numbers sent, and which came back.
struct Prober {
    next: Arc<AtomicU64>,
    /// Per sequence number: when it was sent, and whether its echo came back.
    echoed: Arc<Mutex<Vec<(Instant, bool)>>>,
}

impl Prober {
    fn start(workers: &mut Workers, from: &CniPod, to: &CniPod) -> Result<Prober> {
        let target = SocketAddr::from((ip(to)?, PROBE_PORT));
        let echo = in_netns(&to.netns.path(), move || {
            let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, PROBE_PORT))?;
            s.set_read_timeout(Some(Duration::from_millis(100)))?;
            Ok(s)
        })?;
        let socket = in_netns(&from.netns.path(), move || {
            let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
            s.connect(target)?;
            s.set_read_timeout(Some(Duration::from_millis(100)))?;
            Ok(s)
        })?;
        let receiver = socket
            .try_clone()
            .map_err(|e| step("clone the probe socket", e))?;
        workers.spawn(move |stop| {
            let mut buf = [0u8; 64];
            while !stop.load(Ordering::SeqCst) {
                if let Ok((n, peer)) = echo.recv_from(&mut buf) {
                    let _ = echo.send_to(&buf[..n], peer);
                }
            }
        });
        let prober = Prober {
            next: Arc::new(AtomicU64::new(0)),
            echoed: Arc::new(Mutex::new(Vec::new())),
        };
        let echoed = prober.echoed.clone();
        workers.spawn(move |stop| {
            let mut buf = [0u8; 64];
            while !stop.load(Ordering::SeqCst) {
                if let Ok(8) = receiver.recv(&mut buf) {
                    let mut seq = [0u8; 8];
                    seq.copy_from_slice(&buf[..8]);
                    let seq = u64::from_be_bytes(seq) as usize;
                    let mut got = lock(&echoed);
                    if let Some(probe) = got.get_mut(seq) {
                        probe.1 = true;
                    }
                }
            }
        });
        let (next, echoed) = (prober.next.clone(), prober.echoed.clone());
        workers.spawn(move |stop| {
            let mut at = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                let seq = next.load(Ordering::SeqCst);
                lock(&echoed).push((Instant::now(), false));
                // A send error (no route while a switch is down) is a lost packet like any other.
                let _ = socket.send(&seq.to_be_bytes());
                next.store(seq + 1, Ordering::SeqCst);
                at += INTERVAL;
                let now = Instant::now();
                if at > now {
                    std::thread::sleep(at - now);
                } else {
                    // Behind (a loaded machine): keep the rate, never burst.
                    at = now;
                }
            }
        });
        Ok(prober)
    }

    /// The next sequence number to be sent: a window boundary.
    fn mark(&self) -> u64 {
        self.next.load(Ordering::SeqCst)
    }

    /// (sent, lost) in `[from, to)`; call a second after `to` was sent.
    fn count(&self, from: u64, to: u64) -> (u64, u64) {
        (to - from, self.lost(from, to).len() as u64)
    }

    /// When the probes in `[from, to)` that never came back were sent.
    fn lost(&self, from: u64, to: u64) -> Vec<Instant> {
        let got = lock(&self.echoed);
        (from..to)
            .filter_map(|s| got.get(s as usize))
            .filter(|(_, echoed)| !echoed)
            .map(|(at, _)| *at)
            .collect()
    }

    /// Wait until `n` consecutive probes came back (the path is up).
    fn wait_flowing(&self, n: u64, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let end = self.mark();
            std::thread::sleep(Duration::from_millis(200));
            if end >= n && self.count(end - n, end).1 == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(step("UDP probes A -> B", "never came back"));
            }
        }
    }
}

/// The TCP stream through the VIP and what happened to it in the current window.
#[derive(Default)]
struct StreamWindow {
    broken: Option<String>,
    max_stall: Duration,
    last_echo: Option<Instant>,
}

struct Stream {
    window: Arc<Mutex<StreamWindow>>,
    /// Stops this connection's threads (a broken stream is replaced).
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// The provider side: accept and echo, until the run ends.
fn serve_echo(workers: &mut Workers, provider: &CniPod) -> Result<()> {
    let listener = in_netns(&provider.netns.path(), || {
        let l = TcpListener::bind((Ipv4Addr::UNSPECIFIED, PROVIDER_PORT))?;
        l.set_nonblocking(true)?;
        Ok(l)
    })?;
    workers.spawn(move |stop| {
        let mut conns = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    let stop = stop.clone();
                    conns.push(std::thread::spawn(move || {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
                        let mut buf = [0u8; 4096];
                        while !stop.load(Ordering::SeqCst) {
                            match conn.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    if conn.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        ErrorKind::WouldBlock | ErrorKind::TimedOut
                                    ) => {}
                                Err(_) => break,
                            }
                        }
                    }));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        for c in conns {
            let _ = c.join();
        }
    });
    Ok(())
}

impl Stream {
    /// Connect the client to the VIP (retrying while the service's first flows settle).
    fn connect(client: &CniPod) -> Result<Stream> {
        let vip = SocketAddr::from((
            VIP.parse::<Ipv4Addr>()
                .map_err(|e| step("service VIP", e))?,
            SERVICE_PORT,
        ));
        let deadline = Instant::now() + Duration::from_secs(20);
        let conn = loop {
            let attempt = in_netns(&client.netns.path(), move || {
                TcpStream::connect_timeout(&vip, Duration::from_secs(2))
            });
            match attempt {
                Ok(c) => break c,
                Err(e) if Instant::now() > deadline => {
                    return Err(step("TCP stream to the service VIP", e));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        };
        let reader = conn
            .try_clone()
            .map_err(|e| step("clone the stream socket", e))?;
        let _ = reader.set_read_timeout(Some(Duration::from_millis(50)));
        let window = Arc::new(Mutex::new(StreamWindow {
            last_echo: Some(Instant::now()),
            ..StreamWindow::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let (w, s) = (window.clone(), stop.clone());
        let mut writer = conn;
        threads.push(std::thread::spawn(move || {
            let mut n: u64 = 0;
            while !s.load(Ordering::SeqCst) {
                if let Err(e) = writer.write_all(&n.to_be_bytes()) {
                    lock(&w).broken.get_or_insert(format!("write: {e}"));
                    return;
                }
                n += 1;
                std::thread::sleep(INTERVAL);
            }
        }));
        let (w, s) = (window.clone(), stop.clone());
        let mut reader = reader;
        threads.push(std::thread::spawn(move || {
            let mut expect: u64 = 0;
            let mut buf = [0u8; 8];
            let mut have = 0;
            while !s.load(Ordering::SeqCst) {
                match reader.read(&mut buf[have..]) {
                    Ok(0) => {
                        lock(&w).broken.get_or_insert("closed by the peer".into());
                        return;
                    }
                    Ok(n) => {
                        have += n;
                        if have == 8 {
                            have = 0;
                            let got = u64::from_be_bytes(buf);
                            let mut win = lock(&w);
                            if got != expect {
                                win.broken.get_or_insert(format!(
                                    "stream corrupted: got {got}, expected {expect}"
                                ));
                                return;
                            }
                            expect += 1;
                            let now = Instant::now();
                            if let Some(last) = win.last_echo {
                                win.max_stall = win.max_stall.max(now - last);
                            }
                            win.last_echo = Some(now);
                        }
                    }
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        let mut win = lock(&w);
                        if let Some(last) = win.last_echo {
                            win.max_stall = win.max_stall.max(last.elapsed());
                        }
                    }
                    Err(e) => {
                        lock(&w).broken.get_or_insert(format!("read: {e}"));
                        return;
                    }
                }
            }
        }));
        Ok(Stream {
            window,
            stop,
            threads,
        })
    }

    fn start_window(&self) {
        let mut w = lock(&self.window);
        w.max_stall = Duration::ZERO;
    }

    /// (why it broke, longest silence) since [`Stream::start_window`].
    fn end_window(&self) -> (Option<String>, Duration) {
        let w = lock(&self.window);
        (w.broken.clone(), w.max_stall)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// etcd's endpoint and allocation state, every OVS interface (uuid, ofport) and every bridge's
/// flows, at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot {
    keys: BTreeMap<String, String>,
    flows: BTreeSet<String>,
}

fn etcd_prefix(endpoints: &str, prefix: &str) -> Result<BTreeMap<String, String>> {
    let out = crate::run(&[
        "etcdctl",
        "--endpoints",
        endpoints,
        "--command-timeout=5s",
        "get",
        "--prefix",
        prefix,
    ])?;
    let mut keys = BTreeMap::new();
    let mut lines = out.lines();
    while let Some(key) = lines.next() {
        keys.insert(
            key.to_string(),
            lines.next().unwrap_or_default().to_string(),
        );
    }
    Ok(keys)
}

/// Every OVS interface of a host as `label name uuid ofport`: a re-created port shows as a new
/// uuid even when its name and flows are the same.
fn host_ports(label: &str, ovs: &Ovs, into: &mut BTreeMap<String, String>) -> Result<()> {
    let out = ovs.vsctl(&[
        "-f",
        "csv",
        "--no-headings",
        "--columns=name,_uuid,ofport",
        "list",
        "Interface",
    ])?;
    for line in out.lines() {
        if let Some((name, rest)) = line.split_once(',') {
            into.insert(format!("ovs {label} interface {name}"), rest.to_string());
        }
    }
    Ok(())
}

/// The state without the hosts' address reserves, which a host tops up and refills as its pods
/// come and go (a restarted netplugin asks for its reserve again): the reservation keys, the
/// address maps and the network records' counters of them are left out, and each network's
/// addresses held by endpoints (netmaster's inspect, which lists reserves apart) go in instead,
/// so an address leaked or handed out twice still shows.
fn without_reserves(c: &Cluster, keys: &mut BTreeMap<String, String>) -> Result<()> {
    keys.retain(|k, _| {
        !k.starts_with("/contiv.io/state/ipReservations/")
            && !k.starts_with("/contiv.io/state/ipAlloc/")
    });
    let mut allocated = BTreeMap::new();
    for (k, v) in keys.iter_mut() {
        let Some(id) = k.strip_prefix("/contiv.io/state/nets/") else {
            continue;
        };
        let Ok(mut net) = serde_json::from_str::<Value>(v) else {
            continue;
        };
        if let Some(fields) = net.as_object_mut() {
            for counter in ["epAddrCount", "reserveGeneration", "ipAllocFull"] {
                fields.remove(counter);
            }
        }
        *v = net.to_string();
        let (Some(name), Some(tenant)) = (net["networkName"].as_str(), net["tenant"].as_str())
        else {
            continue;
        };
        let out = c.netctl(&["net", "inspect", "-t", tenant, name])?;
        let oper: Value = serde_json::from_str(&out).map_err(|_| Error::Parse {
            what: "netctl net inspect",
            line: out.clone(),
        })?;
        allocated.insert(
            format!("allocated addresses of {id}"),
            oper["Oper"]["allocatedIPAddresses"].to_string(),
        );
    }
    keys.extend(allocated);
    Ok(())
}

fn host_flows(label: &str, ovs: &Ovs, into: &mut BTreeSet<String>) -> Result<()> {
    for br in BRIDGES {
        for f in ovs.dump_flows(br)? {
            into.insert(format!("{label} {br} {}", f.normalized()));
        }
    }
    Ok(())
}

impl Snapshot {
    fn take(c: &Cluster, h2: &ExtraHost) -> Result<Snapshot> {
        let ep = c.etcd.endpoints_arg();
        let mut keys = etcd_prefix(&ep, "/contiv.io/state/")?;
        keys.extend(etcd_prefix(&ep, "/contiv.io/oper/")?);
        without_reserves(c, &mut keys)?;
        host_ports("host1", &c.ovs, &mut keys)?;
        host_ports("host2", &h2.ovs, &mut keys)?;
        let mut flows = BTreeSet::new();
        host_flows("host1", &c.ovs, &mut flows)?;
        host_flows("host2", &h2.ovs, &mut flows)?;
        Ok(Snapshot { keys, flows })
    }

    /// Human lines for what differs, at most `max`.
    fn diff(&self, after: &Snapshot, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in &self.keys {
            match after.keys.get(k) {
                None => out.push(format!("gone: {k}")),
                Some(w) if w != v => out.push(format!("changed: {k}: {v} -> {w}")),
                Some(_) => {}
            }
        }
        for k in after.keys.keys().filter(|k| !self.keys.contains_key(*k)) {
            out.push(format!("new: {k}"));
        }
        for f in self.flows.difference(&after.flows) {
            out.push(format!("flow gone: {f}"));
        }
        for f in after.flows.difference(&self.flows) {
            out.push(format!("flow new: {f}"));
        }
        out.truncate(max);
        out
    }
}

/// Poll until the state equals `before` (a restarted agent may still be reconciling) or
/// `timeout` passes; the differences left.
fn settle(c: &Cluster, h2: &ExtraHost, before: &Snapshot, timeout: Duration) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    loop {
        match Snapshot::take(c, h2) {
            Ok(now) if &now == before => return Vec::new(),
            Ok(now) if Instant::now() > deadline => return before.diff(&now, 20),
            Err(e) if Instant::now() > deadline => return vec![format!("no snapshot: {e}")],
            _ => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// Poll until every bridge of `ovs` holds exactly the `label`ed flows of `before`: seconds, and
/// the first difference seen on the way (what a packet met meanwhile).
fn flows_back(label: &str, ovs: &Ovs, before: &Snapshot) -> (Option<f64>, Option<String>) {
    let want: BTreeSet<String> = before
        .flows
        .iter()
        .filter(|f| f.starts_with(&format!("{label} ")))
        .cloned()
        .collect();
    let start = Instant::now();
    let mut seen = None;
    while start.elapsed() < RECOVERY {
        let mut now = BTreeSet::new();
        match host_flows(label, ovs, &mut now) {
            Ok(()) if now == want => return (Some(start.elapsed().as_secs_f64()), seen),
            Ok(()) => {
                seen.get_or_insert_with(|| {
                    format!(
                        "{} of {} flows missing, {} extra",
                        want.difference(&now).count(),
                        want.len(),
                        now.difference(&want).count()
                    )
                });
            }
            Err(e) => {
                seen.get_or_insert_with(|| format!("dump-flows failed: {e}"));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (None, seen)
}

/// Create pods (on the given host's conflist) until one succeeds, then delete it: seconds from
/// `since`, failed attempts.
fn new_pod(c: &Cluster, conflist: &Path, since: Instant) -> Result<(f64, u32)> {
    let mut failed = 0;
    loop {
        match c.add_pod(conflist) {
            Ok(pod) => {
                let secs = since.elapsed().as_secs_f64();
                c.del_pod(&pod)
                    .map_err(|e| step("delete the probe pod", e))?;
                return Ok((secs, failed));
            }
            Err(e) if since.elapsed() > RECOVERY => {
                return Err(step("create a pod after the fault", e));
            }
            Err(_) => {
                failed += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// Copy every `*.log` of `from` into `to` (best effort: logs are a diagnosis aid).
fn keep_logs(from: &Path, to: &Path) {
    let _ = std::fs::create_dir_all(to);
    for entry in std::fs::read_dir(from).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "log") {
            let _ = std::fs::copy(&path, to.join(entry.file_name()));
        }
    }
}

/// `to - from` in seconds, negative when `to` is earlier.
fn secs_between(from: Instant, to: Instant) -> f64 {
    match to.checked_duration_since(from) {
        Some(d) => d.as_secs_f64(),
        None => -(from - to).as_secs_f64(),
    }
}

/// Who holds netmaster's leader lock (its control address).
fn leader(endpoints: &str) -> Option<String> {
    etcd_prefix(endpoints, "/contiv.io/lock/netmaster/leader")
        .ok()?
        .into_values()
        .next()
}

/// The message of a failed CNI call: its first line, without the details libcni appends after
/// `; `.
fn cni_error(e: &str) -> String {
    let line = e.lines().find(|l| !l.trim().is_empty()).unwrap_or(e);
    let msg = line.split_once("; ").map_or(line, |(m, _)| m);
    msg.chars().take(300).collect()
}

/// Bring the cluster up, run every fault, tear everything down; the per-fault report.
pub fn run(bins: Binaries, options: &ChaosOptions) -> Result<ChaosReport> {
    let mut c = Cluster::start_with(
        bins,
        ClusterOptions {
            etcd: EtcdOptions {
                members: options.etcd_members,
                tls: false,
            },
            netmaster_args: vec!["--lock-ttl".into(), options.lock_ttl.to_string()],
            ..ClusterOptions::default()
        },
    )?;
    let standby = c.add_netmaster()?;
    let mut h2 = c.add_wired_host("192.168.77.1", "192.168.77.2")?;
    c.netctl(&[
        "net",
        "create",
        "-e",
        "vxlan",
        "-s",
        SUBNET,
        "-g",
        GATEWAY,
        "chaos-net",
    ])?;
    c.netctl(&[
        "service",
        "create",
        "chaos-svc",
        "-s",
        "chaos-net",
        "-l",
        "app=echo",
        "-p",
        &format!("{SERVICE_PORT}:{PROVIDER_PORT}:TCP"),
        "--ip",
        VIP,
    ])?;
    let conf1 = c.conflist("chaos-h1", "chaos-net", "")?;
    let conf2 = h2.conflist("chaos-h2", "chaos-net", "")?;
    let provider_conf = {
        // A conflist on host 2 whose pods carry the service's label.
        let plain = std::fs::read_to_string(&conf2).map_err(|source| Error::Io {
            op: "read",
            path: conf2.clone(),
            source,
        })?;
        let mut v: serde_json::Value =
            serde_json::from_str(&plain).map_err(|e| step("conflist", e))?;
        v["name"] = "chaos-provider".into();
        v["plugins"][0]["args"]["cni"]["labels"]["app"] = "echo".into();
        let path = conf2.with_file_name("chaos-provider.conflist");
        std::fs::write(&path, v.to_string()).map_err(|source| Error::Io {
            op: "write",
            path: path.clone(),
            source,
        })?;
        path
    };
    let add = |conf: &Path| c.add_pod(conf).map_err(|e| step("create a pod", e));
    let a = add(&conf1)?;
    let client = add(&conf1)?;
    let b = add(&conf2)?;
    let provider = add(&provider_conf)?;

    let mut workers = Workers::new();
    serve_echo(&mut workers, &provider)?;
    let prober = Prober::start(&mut workers, &a, &b)?;
    prober.wait_flowing(100, Duration::from_secs(30))?;
    let mut stream = Stream::connect(&client)?;
    std::thread::sleep(options.settle);

    let faults = [
        "netplugin SIGKILL + restart (host 1)",
        "ovs-vswitchd restart (host 2)",
        "ovsdb-server restart (host 2)",
        "netmaster leader SIGKILL",
        "etcd outage (all members)",
    ];
    let mut reports = Vec::new();
    for (n, fault) in faults.iter().enumerate() {
        if !fault.contains(options.only.as_str()) {
            continue;
        }
        let before = Snapshot::take(&c, &h2)?;
        let first = prober.mark();
        stream.start_window();
        std::thread::sleep(options.settle);
        let mut report = FaultReport {
            fault: fault.to_string(),
            packets_sent: 0,
            packets_lost: 0,
            lost_at_s: Vec::new(),
            tcp_broken: None,
            tcp_max_stall_ms: 0,
            pod_ready_s: 0.0,
            pod_attempts_failed: 0,
            state_same: false,
            differences: Vec::new(),
            keys_compared: before.keys.len(),
            flows_compared: before.flows.len(),
            flows_back_s: None,
            flows_meanwhile: None,
            failover_s: None,
            add_during_outage_s: None,
            add_during_outage_error: None,
        };
        let since = Instant::now();
        let conflist = match n {
            0 => {
                c.kill_netplugin();
                std::thread::sleep(Duration::from_millis(300));
                c.start_netplugin()?;
                &conf1
            }
            1 | 2 => {
                if n == 1 {
                    h2.ovs.kill_vswitchd();
                } else {
                    h2.ovs.kill_db();
                }
                std::thread::sleep(Duration::from_millis(300));
                h2.ovs.restart()?;
                (report.flows_back_s, report.flows_meanwhile) =
                    flows_back("host2", &h2.ovs, &before);
                &conf2
            }
            3 => {
                let addr = standby.addr.clone();
                let endpoints = c.etcd.endpoints_arg();
                let killed = Instant::now();
                let mut took = None;
                c.crash_netmaster(|| {
                    while killed.elapsed() < RECOVERY {
                        if leader(&endpoints).is_some_and(|l| l.contains(&addr)) {
                            took = Some(killed.elapsed().as_secs_f64());
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                })?;
                report.failover_s = took;
                &conf1
            }
            _ => {
                c.etcd.stop();
                let down = Instant::now();
                std::thread::sleep(Duration::from_secs(1));
                let tried = Instant::now();
                match c.add_pod(&conf1) {
                    Ok(pod) => {
                        report.add_during_outage_error =
                            Some("CNI ADD succeeded while etcd was down".into());
                        let _ = c.del_pod(&pod);
                    }
                    Err(e) => report.add_during_outage_error = Some(cni_error(&e)),
                }
                report.add_during_outage_s = Some(tried.elapsed().as_secs_f64());
                let rest = options.etcd_outage.saturating_sub(down.elapsed());
                std::thread::sleep(rest);
                c.etcd.start_again()?;
                &conf1
            }
        };
        let fault_at = since;
        let since = if n == 4 { Instant::now() } else { since };
        let (secs, failed) = new_pod(&c, conflist, since)?;
        report.pod_ready_s = secs;
        report.pod_attempts_failed = failed;
        std::thread::sleep(options.settle);
        let last = prober.mark();
        std::thread::sleep(Duration::from_secs(1));
        (report.packets_sent, report.packets_lost) = prober.count(first, last);
        report.lost_at_s = prober
            .lost(first, last)
            .into_iter()
            .take(10)
            .map(|at| secs_between(fault_at, at))
            .collect();
        let (broken, stall) = stream.end_window();
        report.tcp_max_stall_ms = stall.as_millis() as u64;
        report.differences = settle(&c, &h2, &before, Duration::from_secs(10));
        report.state_same = report.differences.is_empty();
        if broken.is_some() {
            report.tcp_broken = broken;
            // The next fault gets a stream of its own.
            drop(stream);
            stream = Stream::connect(&client)?;
        }
        reports.push(report);
    }
    if let Some(to) = &options.logs {
        keep_logs(c.dir.path(), to);
    }
    drop(stream);
    drop(workers);
    drop((a, b, client, provider));
    drop(h2);
    drop(standby);
    drop(c);
    Ok(ChaosReport {
        etcd_members: options.etcd_members,
        etcd_outage_s: options.etcd_outage.as_secs(),
        lock_ttl_s: options.lock_ttl,
        faults: reports,
    })
}

/// The report as a table for a terminal or a Markdown page.
pub fn table(report: &ChaosReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| fault | probes lost / sent (100/s) | TCP via VIP | longest TCP stall | new pod after | state same | notes |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for f in &report.faults {
        let mut notes = Vec::new();
        if let Some(x) = f.flows_back_s {
            notes.push(format!("all flows back {x:.2} s after OVS was up"));
        }
        if let Some(x) = &f.flows_meanwhile {
            notes.push(format!("before that: {x}"));
        }
        if !f.lost_at_s.is_empty() && f.flows_back_s.is_none() {
            let at: Vec<String> = f.lost_at_s.iter().map(|x| format!("{x:.2}")).collect();
            notes.push(format!(
                "lost probes sent at {} s from the fault",
                at.join(", ")
            ));
        }
        if let Some(x) = f.failover_s {
            notes.push(format!("standby leader after {x:.1} s"));
        }
        if let (Some(x), Some(e)) = (f.add_during_outage_s, &f.add_during_outage_error) {
            notes.push(format!("CNI ADD during outage failed in {x:.2} s: \"{e}\""));
        }
        if !f.differences.is_empty() {
            notes.push(f.differences.join("; "));
        }
        let _ = writeln!(
            s,
            "| {} | {} / {} | {} | {} ms | {:.2} s | {} ({} keys and ports, {} flows) | {} |",
            f.fault,
            f.packets_lost,
            f.packets_sent,
            match &f.tcp_broken {
                Some(why) => format!("broken ({why})"),
                None => "not interrupted".into(),
            },
            f.tcp_max_stall_ms,
            f.pod_ready_s,
            if f.state_same { "yes" } else { "NO" },
            f.keys_compared,
            f.flows_compared,
            notes.join("; ")
        );
    }
    s
}
