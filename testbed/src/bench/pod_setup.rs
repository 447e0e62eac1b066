//! `testbed bench pod-setup`: CNI ADD latency through libcni (`cnirun`, as a runtime calls
//! plugins) for our plugin — `contivk8s` → netplugin → netmaster/etcd, OVS port, veth, flows —
//! and, in the same run, for Debian's standard `bridge` + `host-local` plugins from
//! `/usr/lib/cni`. Each ADD is timed from the runtime's start to its exit, with a fresh
//! namespace per pod created beforehand (not timed). `concurrency` ADDs run at once (1:
//! one after another); pods/s is the pods over the wall time of all ADDs. Our pods carry the
//! label `app=bench`; with `services` > 0 that many services select them first, so each ADD
//! also makes its pod a provider of every one (a Kubernetes cluster with services).
//!
//! Where our time goes: netplugin's `netplugin_cni_add_step_duration_seconds{step}` and
//! `netplugin_cni_request_duration_seconds{command="ADD"}` (scraped from `/metrics` before and
//! after, so the means are this run's), and the median of `contivk8s` alone answering a
//! STATUS (process start + socket round trip, no work). What is left of the ADD time is the
//! runtime (`cnirun`, libcni) and the request's share of the socket exchange.

use crate::demo::{Binaries, Cluster, http};
use crate::{Netns, run, unique_name};
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Where Debian's containernetworking-plugins live.
pub const STANDARD_PLUGINS: &str = "/usr/lib/cni";

/// The numbers of one run; printed as one JSON line.
#[derive(Debug, serde::Serialize)]
pub struct PodSetupReport {
    pub pods: usize,
    /// ADDs in flight at once (1: sequential).
    pub concurrency: usize,
    /// Services selecting our pods (each ADD makes the pod a provider of every one).
    pub services: usize,
    pub ours_median_ms: f64,
    pub ours_p99_ms: f64,
    pub ours_pods_per_s: f64,
    pub bridge_median_ms: f64,
    pub bridge_p99_ms: f64,
    pub bridge_pods_per_s: f64,
    /// `ours_median_ms / bridge_median_ms`: at most 1.0 is the goal.
    pub ratio: f64,
    /// `ours_p99_ms / bridge_p99_ms`: at most 1.5 is the goal.
    pub p99_ratio: f64,
    /// Mean time of an ADD inside netplugin (socket request in, reply out).
    pub netplugin_add_mean_ms: f64,
    /// Mean time of each step inside netplugin's ADD (steps that run at once overlap);
    /// a step that did not run is absent.
    pub steps_mean_ms: BTreeMap<String, f64>,
    /// Mean time netmaster took to answer `/plugin/createEndpoint` (request in, answer out;
    /// netplugin's `netmaster` step minus this is the HTTP client and the wire).
    pub netmaster_create_mean_ms: f64,
    /// Mean time of netmaster's etcd requests during our ADDs, by operation.
    pub netmaster_etcd_mean_ms: BTreeMap<String, f64>,
    /// Mean time from sending a flow transaction (bundle) until the switch confirmed it, by
    /// bridge: the switch's share of the `flows` step.
    pub bundle_mean_ms: BTreeMap<String, f64>,
    /// Median of `contivk8s` answering a STATUS on its own: process start, connect, one
    /// request, exit.
    pub contivk8s_status_median_ms: f64,
    /// CPU time (user and system) each daemon used while our ADDs ran, per pod: with services
    /// also the providers' joins, which run beside the next pods' ADDs.
    pub cpu_ms_per_pod: BTreeMap<String, f64>,
}

/// CPU time a process has used (user and system), in seconds; `None` once it is gone.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (which may hold spaces), field 3 (state) onwards: utime and stime
    // are fields 14 and 15, in clock ticks (USER_HZ, 100 per second on Linux).
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// The daemons of `cluster` whose CPU time the report gives, by name.
fn daemons(cluster: &Cluster) -> Vec<(String, u32)> {
    let (netmaster, netplugin) = cluster.pids();
    let mut out: Vec<(String, u32)> = [("netmaster", netmaster), ("netplugin", netplugin)]
        .into_iter()
        .filter_map(|(n, p)| Some((n.to_string(), p?)))
        .collect();
    out.extend(cluster.etcd.pid().map(|p| ("etcd".to_string(), p)));
    for pid in cluster.ovs.pids() {
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        out.push((name.trim().to_string(), pid));
    }
    out
}

/// CPU seconds of each daemon now.
fn cpu_now(daemons: &[(String, u32)]) -> BTreeMap<String, f64> {
    daemons
        .iter()
        .filter_map(|(n, p)| Some((n.clone(), cpu_seconds(*p)?)))
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Sorted ADD times (ms), the wall time of all of them (s), and the pods made (namespace,
/// container id).
struct Timed {
    times: Vec<f64>,
    wall_s: f64,
    made: Vec<(Netns, String)>,
}

/// `pods` ADDs with `concurrency` of them in flight; fails on the first failed ADD.
fn time_adds(
    pods: usize,
    concurrency: usize,
    add: &(dyn Fn(&Netns, &str) -> Result<()> + Sync),
) -> Result<Timed> {
    let mut pending = Vec::with_capacity(pods);
    for _ in 0..pods {
        pending.push((Netns::new("b")?, format!("c{}", unique_name(""))));
    }
    let next = AtomicUsize::new(0);
    let times = Mutex::new(Vec::with_capacity(pods));
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..concurrency.max(1))
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((ns, id)) = pending.get(i) else {
                            return Ok(());
                        };
                        let t = Instant::now();
                        add(ns, id)?;
                        let ms = t.elapsed().as_secs_f64() * 1000.0;
                        times
                            .lock()
                            .map_err(|_| anyhow::anyhow!("poisoned"))?
                            .push(ms);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("an ADD worker panicked"))??;
        }
        Ok(())
    })?;
    let wall_s = start.elapsed().as_secs_f64();
    let mut times = times
        .into_inner()
        .map_err(|_| anyhow::anyhow!("poisoned"))?;
    times.sort_by(f64::total_cmp);
    Ok(Timed {
        times,
        wall_s,
        made: pending,
    })
}

fn cnirun(bins: &Binaries, cni_path: &Path, argv: &[&str]) -> Result<()> {
    let out = Command::new(&bins.cnirun)
        .args(argv)
        .env("CNI_PATH", cni_path)
        .env("POD_NS", "default")
        .env("POD_NAME", "bench")
        .output()
        .context("running cnirun")?;
    if !out.status.success() {
        bail!(
            "cnirun {}: {}{}",
            argv.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// `(sum, count)` of every histogram series of `metric` in a Prometheus text exposition, by
/// the value of `label` (e.g. `step`).
pub fn histogram_sums(text: &str, metric: &str, label: &str) -> BTreeMap<String, (f64, f64)> {
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for line in text.lines() {
        for (suffix, is_sum) in [("_sum{", true), ("_count{", false)] {
            let Some(rest) = line
                .strip_prefix(metric)
                .and_then(|r| r.strip_prefix(suffix))
            else {
                continue;
            };
            let Some((labels, value)) = rest.split_once('}') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            let key = labels.split(',').find_map(|kv| {
                kv.split_once('=')
                    .filter(|(k, _)| k.trim() == label)
                    .map(|(_, v)| v.trim().trim_matches('"').to_string())
            });
            if let Some(key) = key {
                let entry = out.entry(key).or_default();
                if is_sum {
                    entry.0 = value;
                } else {
                    entry.1 = value;
                }
            }
        }
    }
    out
}

/// Mean (ms) per label value of what was observed between two scrapes.
fn means_between(before: &str, after: &str, metric: &str, label: &str) -> BTreeMap<String, f64> {
    let before = histogram_sums(before, metric, label);
    histogram_sums(after, metric, label)
        .into_iter()
        .filter_map(|(key, (sum, count))| {
            let (sum0, count0) = before.get(&key).copied().unwrap_or_default();
            let n = count - count0;
            (n > 0.0).then(|| (key, (sum - sum0) / n * 1000.0))
        })
        .collect()
}

/// `GET /metrics` of the daemon `who` listening on `addr` (`host:port`).
fn scrape(addr: &str, who: &str) -> Result<String> {
    match http("GET", addr, "/metrics") {
        Some((200, body)) => Ok(body),
        other => bail!("GET /metrics on {who}: {other:?}"),
    }
}

/// Median of `rounds` runs of `contivk8s` answering STATUS straight from netplugin's socket.
fn contivk8s_status_ms(bins: &Binaries, cluster: &Cluster, rounds: usize) -> Result<f64> {
    let config = json!({
        "cniVersion": "1.1.0", "name": "bench", "type": "contivk8s",
        "socketPath": cluster.cni_socket,
    })
    .to_string();
    let exe = bins.cni_dir.join("contivk8s");
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        let mut child = Command::new(&exe)
            .env("CNI_COMMAND", "STATUS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running contivk8s")?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(config.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        if !out.status.success() {
            bail!(
                "contivk8s STATUS: {}",
                String::from_utf8_lossy(&out.stdout).trim()
            );
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(percentile(&times, 0.5))
}

/// Run the benchmark with `pods` pods per plugin, `concurrency` ADDs at once, and `services`
/// services selecting our pods (labelled `app=bench`).
pub fn run_bench(pods: usize, concurrency: usize, services: usize) -> Result<PodSetupReport> {
    let bins = Binaries::build(true).context("building netmaster, netplugin and contivk8s")?;
    if !Path::new(STANDARD_PLUGINS).join("bridge").exists() {
        bail!("{STANDARD_PLUGINS}/bridge is missing (apt-get install containernetworking-plugins)");
    }
    let cluster = Cluster::start(bins.clone()).context("starting the cluster")?;
    cluster.netctl(&[
        "net",
        "create",
        "-e",
        "vxlan",
        "-s",
        "10.77.0.0/16",
        "-g",
        "10.77.0.1",
        "bench-net",
    ])?;
    super::create_services(&cluster, "bench-net", "app=bench", services)?;
    let ours_conf = cluster.conflist_with_labels("bench", "bench-net", "", &[("app", "bench")])?;
    let conf = ours_conf.to_string_lossy().into_owned();
    let status_ms = contivk8s_status_ms(&bins, &cluster, 20)?;
    let netmaster_addr = cluster.netmaster_url.trim_start_matches("http://");
    let before = scrape(&cluster.debug_addr, "netplugin")?;
    let master_before = scrape(netmaster_addr, "netmaster")?;
    let daemons = daemons(&cluster);
    let cpu_before = cpu_now(&daemons);
    let ours = time_adds(pods, concurrency, &|ns, id| {
        cnirun(
            &bins,
            &bins.cni_dir,
            &["add", &conf, id, &ns.path().to_string_lossy()],
        )
    })?;
    let cpu_ms_per_pod: BTreeMap<String, f64> = cpu_now(&daemons)
        .into_iter()
        .filter_map(|(n, after)| {
            let used = after - cpu_before.get(&n)?;
            Some((n, 1000.0 * used / pods.max(1) as f64))
        })
        .collect();
    let after = scrape(&cluster.debug_addr, "netplugin")?;
    let master_after = scrape(netmaster_addr, "netmaster")?;
    for (ns, id) in &ours.made {
        cnirun(
            &bins,
            &bins.cni_dir,
            &["del", &conf, id, &ns.path().to_string_lossy()],
        )?;
    }
    let steps = means_between(
        &before,
        &after,
        "netplugin_cni_add_step_duration_seconds",
        "step",
    );
    let handler = means_between(
        &before,
        &after,
        "netplugin_cni_request_duration_seconds",
        "command",
    );
    let routes = means_between(
        &master_before,
        &master_after,
        "netmaster_http_request_duration_seconds",
        "route",
    );
    let bundles = means_between(
        &before,
        &after,
        "netplugin_bridge_bundle_duration_seconds",
        "bridge",
    );
    let etcd = means_between(
        &master_before,
        &master_after,
        "contiv_etcd_request_duration_seconds",
        "op",
    );

    let bridge = unique_name("br");
    let bridge_conf = cluster.dir.path().join("bridge.conflist");
    let list = json!({
        "cniVersion": "1.0.0",
        "name": "bench-bridge",
        "plugins": [{
            "type": "bridge",
            "bridge": bridge,
            "isGateway": true,
            "ipMasq": false,
            "ipam": {
                "type": "host-local",
                "subnet": "10.78.0.0/16",
                "dataDir": cluster.dir.path().join("host-local"),
                "routes": [{ "dst": "0.0.0.0/0" }]
            }
        }]
    });
    std::fs::write(&bridge_conf, list.to_string())?;
    let conf = bridge_conf.to_string_lossy().into_owned();
    let std_path = Path::new(STANDARD_PLUGINS);
    let measured = time_adds(pods, concurrency, &|ns, id| {
        cnirun(
            &bins,
            std_path,
            &["add", &conf, id, &ns.path().to_string_lossy()],
        )
    });
    if let Ok(timed) = &measured {
        for (ns, id) in &timed.made {
            let _ = cnirun(
                &bins,
                std_path,
                &["del", &conf, id, &ns.path().to_string_lossy()],
            );
        }
    }
    let _ = run(&["ip", "link", "del", &bridge]);
    let standard = measured?;

    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let ours_median = percentile(&ours.times, 0.5);
    let ours_p99 = percentile(&ours.times, 0.99);
    let bridge_median = percentile(&standard.times, 0.5);
    let bridge_p99 = percentile(&standard.times, 0.99);
    Ok(PodSetupReport {
        pods,
        concurrency: concurrency.max(1),
        services,
        ours_median_ms: ours_median,
        ours_p99_ms: ours_p99,
        ours_pods_per_s: ratio(pods as f64, ours.wall_s),
        bridge_median_ms: bridge_median,
        bridge_p99_ms: bridge_p99,
        bridge_pods_per_s: ratio(pods as f64, standard.wall_s),
        ratio: ratio(ours_median, bridge_median),
        p99_ratio: ratio(ours_p99, bridge_p99),
        netplugin_add_mean_ms: handler.get("ADD").copied().unwrap_or_default(),
        steps_mean_ms: steps,
        netmaster_create_mean_ms: routes
            .get("/plugin/createEndpoint")
            .copied()
            .unwrap_or_default(),
        netmaster_etcd_mean_ms: etcd,
        bundle_mean_ms: bundles,
        contivk8s_status_median_ms: status_ms,
        cpu_ms_per_pod,
    })
}

#[cfg(test)]
mod tests {
    use super::{cpu_seconds, histogram_sums, means_between, percentile};

    #[test]
    fn cpu_time_of_a_process_grows_with_its_work_and_ends_with_it() {
        let me = std::process::id();
        let before = cpu_seconds(me).expect("this process's CPU time");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let after = cpu_seconds(me).expect("this process's CPU time");
        assert!(after - before >= 0.02, "{before} -> {after}");
        assert_eq!(cpu_seconds(u32::MAX), None);
    }

    #[test]
    fn percentiles_of_sorted_samples() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn step_means_come_from_histogram_sums_between_two_scrapes() {
        let before = "# TYPE x histogram\n\
            x_sum{step=\"veth\"} 0.010\nx_count{step=\"veth\"} 5\n\
            x_bucket{step=\"veth\",le=\"0.001\"} 1\n";
        let after = "x_sum{step=\"veth\"} 0.030\nx_count{step=\"veth\"} 15\n\
            x_sum{step=\"oper\"} 0.004\nx_count{step=\"oper\"} 2\n\
            x_sum{step=\"idle\"} 0.0\nx_count{step=\"idle\"} 0\n";
        assert_eq!(histogram_sums(before, "x", "step")["veth"], (0.010, 5.0));
        let means = means_between(before, after, "x", "step");
        assert!((means["veth"] - 2.0).abs() < 1e-9, "{means:?}");
        assert!((means["oper"] - 2.0).abs() < 1e-9, "{means:?}");
        assert!(!means.contains_key("idle"));
    }
}
