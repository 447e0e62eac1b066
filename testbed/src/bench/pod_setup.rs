//! `testbed bench pod-setup`: CNI ADD latency through libcni (`cnirun`, as a runtime calls
//! plugins) for our plugin — `contivk8s` → netplugin → netmaster/etcd, OVS port, veth, flows —
//! and, in the same run, for Debian's standard `bridge` + `host-local` plugins from
//! `/usr/lib/cni`. Pods are added one after another; each ADD is timed from the runtime's
//! start to its exit, with a fresh namespace per pod created beforehand (not timed).

use crate::demo::{Binaries, Cluster};
use crate::{Netns, run, unique_name};
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Where Debian's containernetworking-plugins live.
pub const STANDARD_PLUGINS: &str = "/usr/lib/cni";

/// The numbers of one run; printed as one JSON line.
#[derive(Debug, serde::Serialize)]
pub struct PodSetupReport {
    pub pods: usize,
    pub ours_median_ms: f64,
    pub ours_p99_ms: f64,
    pub bridge_median_ms: f64,
    pub bridge_p99_ms: f64,
    /// `ours_median_ms / bridge_median_ms`: at most 1.5 is the goal.
    pub ratio: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Sorted ADD times (ms), and the pods made (namespace, container id).
type Timed = (Vec<f64>, Vec<(Netns, String)>);

fn time_adds(pods: usize, mut add: impl FnMut(&Netns, &str) -> Result<()>) -> Result<Timed> {
    let mut times = Vec::with_capacity(pods);
    let mut made = Vec::with_capacity(pods);
    for _ in 0..pods {
        let ns = Netns::new("b")?;
        let id = format!("c{}", unique_name(""));
        let start = Instant::now();
        add(&ns, &id)?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        made.push((ns, id));
    }
    times.sort_by(f64::total_cmp);
    Ok((times, made))
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

/// Run the benchmark with `pods` pods per plugin.
pub fn run_bench(pods: usize) -> Result<PodSetupReport> {
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
    let ours_conf = cluster.conflist("bench", "bench-net", "")?;
    let conf = ours_conf.to_string_lossy().into_owned();
    let (ours, made) = time_adds(pods, |ns, id| {
        cnirun(
            &bins,
            &bins.cni_dir,
            &["add", &conf, id, &ns.path().to_string_lossy()],
        )
    })?;
    for (ns, id) in &made {
        cnirun(
            &bins,
            &bins.cni_dir,
            &["del", &conf, id, &ns.path().to_string_lossy()],
        )?;
    }
    drop(made);

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
    let measured = time_adds(pods, |ns, id| {
        cnirun(
            &bins,
            std_path,
            &["add", &conf, id, &ns.path().to_string_lossy()],
        )
    });
    if let Ok((_, made)) = &measured {
        for (ns, id) in made {
            let _ = cnirun(
                &bins,
                std_path,
                &["del", &conf, id, &ns.path().to_string_lossy()],
            );
        }
    }
    let _ = run(&["ip", "link", "del", &bridge]);
    let (standard, _) = measured?;

    let ours_median = percentile(&ours, 0.5);
    let bridge_median = percentile(&standard, 0.5);
    Ok(PodSetupReport {
        pods,
        ours_median_ms: ours_median,
        ours_p99_ms: percentile(&ours, 0.99),
        bridge_median_ms: bridge_median,
        bridge_p99_ms: percentile(&standard, 0.99),
        ratio: if bridge_median > 0.0 {
            ours_median / bridge_median
        } else {
            0.0
        },
    })
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_of_sorted_samples() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
