//! `testbed bench netpol`: Kubernetes NetworkPolicy realization in the switch, measured on a
//! real Open vSwitch driven by an `ofnet` agent, as one JSON line. Each time runs from the
//! agent API call until OVS confirmed the bundle (the call returns then); the flow counts are
//! read back from `ovs-ofctl dump-flows` (cookie category 9).
//!
//! 1. **Big policy**: one policy applying to one pod, one ingress rule with 1,000 peer pods ×
//!    10 TCP ports (conjunction: about 1,010 flows, not 10,000).
//! 2. **10,000 rules**: 1,000 policies (one pod each) × 10 ingress rules (5 peers out of a
//!    pool of 1,000 pods, 1 port each), applied with one `replace_network_policies` call (one
//!    bundle).
//! 3. **Pods joining**: 100 pods join, one after the other, the peer set of a policy that
//!    selects a namespace of 1,000 pods (a `namespaceSelector`), each an upsert of the policy:
//!    per-pod p50/p99/max.

use super::services::{agent_on, network, percentile, rss_mib};
use crate::{Ovs, OvsOptions};
use anyhow::{Context, Result, bail, ensure};
use ofnet::netpol::{Peer, Port, Protocol, Rule};
use ofnet::{AgentHandle, NetworkPolicy};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

/// The numbers of one run; printed as one JSON line.
#[derive(Debug, serde::Serialize)]
pub struct NetpolReport {
    pub big_peers: usize,
    pub big_ports: usize,
    /// NetworkPolicy flows on the switch for the big policy.
    pub big_flows: usize,
    pub big_realize_ms: f64,
    pub rules: usize,
    pub rules_policies: usize,
    pub rules_flows: usize,
    /// Goal: ≤ 1,000 ms.
    pub rules_realize_ms: f64,
    pub joining_pods: usize,
    pub join_p50_ms: f64,
    pub join_p99_ms: f64,
    pub join_max_ms: f64,
    pub vswitchd_rss_mib: f64,
    pub agent_rss_mib: f64,
}

fn pod(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 1, 0, 0)) + n))
}

fn netpol_flows(ovs: &Ovs) -> Result<usize> {
    let out = ovs.ofctl(&[
        "dump-flows",
        "br0",
        "cookie=0x0000090000000000/0x0000ff0000000000",
    ])?;
    Ok(out.lines().filter(|l| l.starts_with(' ')).count())
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

async fn big_policy(agent: &AgentHandle, ovs: &Ovs) -> Result<(usize, f64)> {
    let mut p = NetworkPolicy::new("bench/big", "t1", vec![pod(60_000)]);
    p.ingress = Some(vec![Rule {
        peers: vec![Peer::Pods((0..1000).map(pod).collect())],
        ports: (0..10)
            .map(|i| Port::one(Protocol::Tcp, 8000 + i))
            .collect(),
        applied_to: None,
    }]);
    let t = Instant::now();
    agent.upsert_network_policy(p).await?;
    let realize = ms(t);
    let flows = netpol_flows(ovs)?;
    agent.delete_network_policy("bench/big").await?;
    Ok((flows, realize))
}

async fn many_rules(agent: &AgentHandle, ovs: &Ovs) -> Result<(usize, usize, f64)> {
    let policies: Vec<NetworkPolicy> = (0..1000u32)
        .map(|i| {
            let mut p = NetworkPolicy::new(format!("bench/p{i}"), "t1", vec![pod(20_000 + i)]);
            p.ingress = Some(
                (0..10u32)
                    .map(|r| Rule {
                        peers: vec![Peer::Pods(
                            (0..5)
                                .map(|k| pod((i * 7 + r * 13 + k * 101) % 1000))
                                .collect(),
                        )],
                        ports: vec![Port::one(Protocol::Tcp, 1000 + r as u16)],
                        applied_to: None,
                    })
                    .collect(),
            );
            p
        })
        .collect();
    let n = policies.len();
    let t = Instant::now();
    let refused = agent.replace_network_policies(policies).await?;
    let realize = ms(t);
    ensure!(refused.is_empty(), "refused: {refused:?}");
    let flows = netpol_flows(ovs)?;
    agent.replace_network_policies(Vec::new()).await?;
    Ok((n, flows, realize))
}

async fn joining(agent: &AgentHandle, pods: usize) -> Result<Vec<f64>> {
    let mut members: Vec<IpAddr> = (0..1000).map(pod).collect();
    let policy = |members: &[IpAddr]| {
        let mut p = NetworkPolicy::new("bench/ns", "t1", vec![pod(40_000)]);
        p.ingress = Some(vec![Rule {
            peers: vec![Peer::Pods(members.to_vec())],
            ports: vec![Port::one(Protocol::Tcp, 80)],
            applied_to: None,
        }]);
        p
    };
    agent.upsert_network_policy(policy(&members)).await?;
    let mut times = Vec::new();
    for n in 0..pods as u32 {
        members.push(pod(30_000 + n));
        let t = Instant::now();
        agent.upsert_network_policy(policy(&members)).await?;
        times.push(ms(t));
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// Run the three parts (root, Open vSwitch).
pub fn run_bench(pods: usize) -> Result<NetpolReport> {
    if let Err(why) = crate::require::check(&[crate::Need::Root, crate::Need::Ovs]) {
        bail!("cannot run the netpol benchmark: {why}");
    }
    let system = actix_rt::System::new();
    system.block_on(async move {
        let ovs = Ovs::start(OvsOptions::dummy())?;
        ovs.add_bridge("br0")?;
        let (agent, _listener) = agent_on(&ovs).await?;
        network(&agent).await?;
        let (big_flows, big_realize_ms) = big_policy(&agent, &ovs).await?;
        let (rules_policies, rules_flows, rules_realize_ms) = many_rules(&agent, &ovs).await?;
        let joins = joining(&agent, pods).await?;
        let vswitchd = ovs
            .pids()
            .into_iter()
            .find(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim() == "ovs-vswitchd")
            })
            .context("no ovs-vswitchd pid")?;
        Ok(NetpolReport {
            big_peers: 1000,
            big_ports: 10,
            big_flows,
            big_realize_ms,
            rules: rules_policies * 10,
            rules_policies,
            rules_flows,
            rules_realize_ms,
            joining_pods: pods,
            join_p50_ms: percentile(&joins, 0.5),
            join_p99_ms: percentile(&joins, 0.99),
            join_max_ms: joins.last().copied().unwrap_or_default(),
            vswitchd_rss_mib: rss_mib(vswitchd)?,
            agent_rss_mib: rss_mib(std::process::id())?,
        })
    })
}
