//! Measurements for the closing note (ignored by default; run in release):
//!
//! `cargo test -p master --release --test integration bench -- --ignored --nocapture`
//!
//! * endpoint create throughput: 1,000 `/plugin/createEndpoint` calls through REST into a real etcd,
//!   sequential (one client) and with 32 in flight;
//! * netmaster RSS (the real binary, `/proc/<pid>/status` VmRSS) after 10,000 endpoints.

use std::time::{Duration, Instant};

use crate::common::*;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

async fn create_range(
    c: &master::client::Client,
    net: &str,
    range: std::ops::Range<usize>,
    in_flight: usize,
) -> Duration {
    use futures::StreamExt;
    let started = Instant::now();
    let reqs: Vec<_> = range
        .map(|i| endpoint_request(net, &format!("ctr{i}")))
        .collect();
    let mut results = futures::stream::iter(reqs.iter().map(|r| c.create_endpoint(r)))
        .buffer_unordered(in_flight);
    while let Some(r) = results.next().await {
        r.unwrap();
    }
    started.elapsed()
}

#[tokio::test]
#[ignore = "measurement; run explicitly in release"]
async fn bench_endpoint_throughput_and_rss() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let nm = Subprocess::spawn(&etcd.client_url(), 30);
    wait_ready(&nm.url, Duration::from_secs(20)).await;
    let c = nm.client();
    c.post(&network("default", "bench", "10.64.0.0/18"))
        .await
        .unwrap();
    let pid = nm.child.id();
    let rss_start = rss_kib(pid);

    let seq = create_range(&c, "bench", 0..1000, 1).await;
    println!(
        "sequential: 1000 endpoints in {seq:?} = {:.0} endpoints/s",
        1000.0 / seq.as_secs_f64()
    );
    let par = create_range(&c, "bench", 1000..2000, 32).await;
    println!(
        "32 in flight: 1000 endpoints in {par:?} = {:.0} endpoints/s",
        1000.0 / par.as_secs_f64()
    );
    let rest = create_range(&c, "bench", 2000..10_000, 32).await;
    println!(
        "next 8000 endpoints in {rest:?} = {:.0} endpoints/s",
        8000.0 / rest.as_secs_f64()
    );
    let info = c
        .inspect::<master::model::Network>("default:bench")
        .await
        .unwrap();
    assert_eq!(info["Oper"]["numEndpoints"], 10_000);
    let rss_end = rss_kib(pid);
    println!("netmaster RSS: {rss_start} KiB at start, {rss_end} KiB after 10000 endpoints");
}
