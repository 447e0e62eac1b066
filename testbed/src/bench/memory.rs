//! `testbed bench memory` (issue 17): the resident memory of netplugin and netmaster on one
//! host carrying `pods` pods, a policy of `rules` rules attached to the pods' group, and
//! `services` services selecting the pods. Everything goes through the real paths: pods through
//! libcni (`cnirun` → `contivk8s` → netplugin), rules and services through netmaster's REST
//! API (netctl for services), flows confirmed in `ovs-ofctl dump-flows` before measuring.
//!
//! RSS is `VmRSS` of `/proc/<pid>/status`, taken after the state settled; `RssAnon` (heap and
//! stacks, without the mapped binary) and the thread count are reported beside it. netplugin
//! starts with its binary out of the page cache, as after a reboot (see [`evict_from_page_cache`]).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::scale::{Conn, FLOWS_PER_RULE, port_flows, post_many, rule};
use crate::demo::{Binaries, Cluster, CniPod};

/// The numbers of one run; printed as one JSON line.
#[derive(Debug, serde::Serialize)]
pub struct MemoryReport {
    pub pods: usize,
    pub rules: usize,
    pub services: usize,
    /// Goal: at most 25 MB.
    pub netplugin_rss_mib: f64,
    pub netplugin_rss_anon_mib: f64,
    pub netplugin_threads: u64,
    pub netmaster_rss_mib: f64,
    pub netmaster_rss_anon_mib: f64,
    pub netmaster_threads: u64,
    /// netplugin right after start (no pods, rules or services), for the growth.
    pub netplugin_idle_rss_mib: f64,
    /// Which build of netplugin was measured (see [`code_layout`]).
    pub netplugin_code_layout: &'static str,
    /// Flows on the VXLAN bridge at the end.
    pub flows: usize,
}

/// A `/proc/<pid>/status` field in kB (or a count, for `Threads`).
pub fn proc_status(pid: Option<u32>, field: &str) -> f64 {
    pid.and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .unwrap_or(0.0)
}

/// Drop `path`'s pages from the page cache, so that a daemon started from it reads its code on
/// demand, as on a host that just booted. How a binary's pages came into the cache decides how
/// much of it the kernel maps around each page executed (large folios are mapped whole): the
/// same netplugin measured 25.5 MiB started this way and 40.8 MiB right after BOLT had written
/// the file (docs/performance.md, "Memory"), so without this a figure says more about the last
/// program that wrote or read the binary than about netplugin.
pub fn evict_from_page_cache(path: &std::path::Path) -> Result<()> {
    use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    // Dirty pages (a binary just written) stay in the cache until they are on disk.
    file.sync_all()
        .with_context(|| format!("syncing {}", path.display()))?;
    posix_fadvise(&file, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED)
        .with_context(|| format!("evicting {} from the page cache", path.display()))?;
    Ok(())
}

/// How the code of the binary at `path` is laid out: `"profile"` when LLVM BOLT laid it out by a
/// profile (`scripts/optimize-netplugin.sh`, the build for hosts; BOLT leaves its
/// `.note.bolt_info` section), `"compiler"` for the compiler's own order (a plain `cargo build`),
/// `"unknown"` when binutils' `readelf` cannot tell. Reported beside the figures: the two builds
/// of the same commit differ by 9 MiB.
pub fn code_layout(path: &std::path::Path) -> &'static str {
    match std::process::Command::new("readelf")
        .args(["--section-headers", "--wide"])
        .arg(path)
        .output()
    {
        Ok(out) if out.status.success() => {
            if String::from_utf8_lossy(&out.stdout).contains(".note.bolt_info") {
                "profile"
            } else {
                "compiler"
            }
        }
        _ => "unknown",
    }
}

fn mib(kib: f64) -> f64 {
    (kib / 1024.0 * 10.0).round() / 10.0
}

const BASE_PORT: u32 = 30_000;

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !done()? {
        if Instant::now() > deadline {
            bail!("{what} not reached within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Run the benchmark.
pub fn run(pods: usize, rules: usize, services: usize) -> Result<MemoryReport> {
    let bins = Binaries::build(true).context("building netmaster, netplugin and contivk8s")?;
    let layout = code_layout(&bins.netplugin);
    evict_from_page_cache(&bins.netplugin)?;
    let c = Cluster::start(bins)?;
    // Let start-up finish (first reconcile of both bridges) before the idle reading.
    std::thread::sleep(Duration::from_secs(1));
    let idle = proc_status(c.pids().1, "VmRSS");
    let addr = c
        .netmaster_url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut conn = Conn::open(&addr)?;
    conn.post(
        "/api/v1/networks/default:mem/",
        &json!({"tenantName": "default", "networkName": "mem", "encap": "vxlan",
                "subnet": "10.79.0.0/16", "gateway": "10.79.0.1"}),
    )?;
    conn.post(
        "/api/v1/policys/default:pm/",
        &json!({"tenantName": "default", "policyName": "pm"}),
    )?;
    conn.post(
        "/api/v1/endpointGroups/default:web/",
        &json!({"tenantName": "default", "groupName": "web", "networkName": "mem",
                "policies": ["pm"]}),
    )?;
    super::create_services(&c, "mem", "app=web", services)?;
    let conf = c.conflist_with_labels("mem", "mem", "web", &[("app", "web")])?;
    let mut made: Vec<CniPod> = Vec::with_capacity(pods);
    for i in 0..pods {
        made.push(
            c.add_pod(&conf)
                .map_err(|e| anyhow::anyhow!("pod {i}: {e}"))?,
        );
    }
    let port = |i: usize| BASE_PORT + u32::try_from(i).unwrap_or(0);
    post_many(&addr, rules, 16, &|i| rule("pm", i, port(i)))?;
    wait_for(
        "every rule's flows in OVS",
        Duration::from_secs(300),
        || Ok(port_flows(&c, BASE_PORT)? >= FLOWS_PER_RULE * rules),
    )?;
    // Let the last watch events, bundles and GARPs finish before reading.
    std::thread::sleep(Duration::from_secs(2));
    let (nm, np) = c.pids();
    let flows = c
        .ovs
        .ofctl(&["dump-flows", crate::demo::BRIDGE])?
        .lines()
        .filter(|l| l.contains("table="))
        .count();
    let report = MemoryReport {
        pods,
        rules,
        services,
        netplugin_rss_mib: mib(proc_status(np, "VmRSS")),
        netplugin_rss_anon_mib: mib(proc_status(np, "RssAnon")),
        netplugin_threads: proc_status(np, "Threads") as u64,
        netmaster_rss_mib: mib(proc_status(nm, "VmRSS")),
        netmaster_rss_anon_mib: mib(proc_status(nm, "RssAnon")),
        netmaster_threads: proc_status(nm, "Threads") as u64,
        netplugin_idle_rss_mib: mib(idle),
        netplugin_code_layout: layout,
        flows,
    };
    for pod in &made {
        let _ = c.del_pod(pod);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::proc_status;

    #[test]
    fn reads_fields_of_our_own_status() {
        let me = Some(std::process::id());
        assert!(proc_status(me, "VmRSS") > 0.0);
        assert!(proc_status(me, "Threads") >= 1.0);
        assert_eq!(proc_status(me, "NoSuchField"), 0.0);
        assert_eq!(proc_status(None, "VmRSS"), 0.0);
    }

    #[test]
    fn a_plain_build_is_laid_out_by_the_compiler() {
        let exe = std::env::current_exe().unwrap();
        assert_eq!(super::code_layout(&exe), "compiler");
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("not-elf");
        std::fs::write(&text, "#!/bin/sh\n").unwrap();
        assert_eq!(super::code_layout(&text), "unknown");
    }

    #[test]
    fn an_evicted_file_is_read_again() {
        use std::io::Write;
        // util-linux's fincore: how many bytes of the file the page cache holds.
        fn cached_bytes(path: &std::path::Path) -> u64 {
            let out = std::process::Command::new("fincore")
                .args(["--bytes", "--noheadings", "--output", "RES"])
                .arg(path)
                .output()
                .expect("fincore (util-linux-extra) runs");
            assert!(out.status.success(), "fincore: {out:?}");
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        }
        crate::require!(Fincore);
        // Beside the test binary: where binaries live (a tmpfs /tmp keeps its pages).
        let exe = std::env::current_exe().unwrap();
        let dir = tempfile::tempdir_in(exe.parent().unwrap()).unwrap();
        let fs = nix::sys::statfs::statfs(dir.path()).unwrap();
        if fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC {
            eprintln!("SKIPPED: the build directory is on tmpfs, whose pages cannot be evicted");
            return;
        }
        let path = dir.path().join("binary");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        drop(f);
        assert!(
            cached_bytes(&path) > 0,
            "a file just written is in the cache"
        );
        super::evict_from_page_cache(&path).unwrap();
        assert_eq!(cached_bytes(&path), 0, "evicted");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            vec![7u8; 1 << 20],
            "and whole"
        );
    }
}
