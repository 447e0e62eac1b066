//! How the agent scales with the number of endpoints. Every update recomputes the complete
//! flow set and sends the difference, so the cost per update grows with the table. Run with
//! `cargo test -p ofnet --release --test scale -- --ignored --nocapture`; prints the numbers.
//! One check runs always: updates sent at once share switch transactions.
#![allow(clippy::unwrap_used)]

mod common;

use common::{connect, init_tracing};
use ofnet::datapath::{Datapath, HeldPart, Owner, Settings, Topology};
use ofnet::epdb::{EndpointOp, EndpointTable};
use ofnet::{AgentConfig, AgentHandle, BridgeKind, LocalEndpoint, MacAddr, Network, VxlanBridge};
use std::net::Ipv4Addr;
use std::time::Instant;
use testbed::{Ovs, OvsOptions};

const NETWORKS: u32 = 4;

fn network(n: u32) -> Network {
    Network {
        vlan: 2 + n as u16,
        vni: 5000 + n,
        gateway: None,
        vrf: "t1".into(),
    }
}

/// Endpoint `n`, spread round-robin over the networks.
fn endpoint(n: u32) -> LocalEndpoint {
    let [_, _, hi, lo] = n.to_be_bytes();
    LocalEndpoint {
        port_no: n + 1,
        mac: MacAddr([2, 2, 10, 1, hi, lo]),
        vlan: network(n % NETWORKS).vlan,
        ipv4: Some(Ipv4Addr::new(10, 1, hi, lo)),
        ipv6: None,
        epg: 0,
        epg_vlan: 0,
        dscp: 0,
        bandwidth: None,
    }
}

#[test]
#[ignore = "measurement, not a check; run explicitly"]
fn desired_state_computation() {
    for total in [1000u32, 5000] {
        let mut t = EndpointTable::new();
        for n in 0..NETWORKS {
            t.apply(EndpointOp::AddNetwork(network(n))).unwrap();
        }
        for n in 0..total {
            t.apply(EndpointOp::AddLocal {
                endpoint: endpoint(n),
                originator: None,
            })
            .unwrap();
        }
        let s = Settings::default();
        let topo = Topology {
            endpoints: &t,
            settings: &s,
        };
        let start = Instant::now();
        let d = VxlanBridge.desired(&topo).unwrap();
        let full = start.elapsed();
        // What one endpoint add costs: its own part and its network's (the flood groups).
        let rounds = 100;
        let start = Instant::now();
        for n in 0..rounds {
            let ep = endpoint(n);
            let updates: Vec<(Owner, HeldPart)> =
                [Owner::LocalEndpoint(ep.port_no), Owner::Network(ep.vlan)]
                    .into_iter()
                    .map(|o| (o.clone(), VxlanBridge.part(&topo, &o).unwrap().into()))
                    .collect();
            assert!(d.plan(&updates).unwrap().is_empty());
        }
        println!(
            "{total} endpoints, {} flows: from scratch {full:?}, one endpoint's owners {:?}",
            d.flow_count(),
            start.elapsed() / rounds
        );
    }
}

/// A VXLAN agent driving bridge `br0` of a dummy-datapath OVS, with the [`NETWORKS`] networks.
async fn vxlan_agent_with_networks() -> (Ovs, AgentHandle, ofctrl::Listener) {
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    ovs.add_bridge("br0").unwrap();
    let agent = AgentHandle::start(AgentConfig::new(BridgeKind::Vxlan, "br0"));
    let listener = connect(&ovs, "br0", &agent).await;
    for n in 0..NETWORKS {
        agent.add_network(network(n)).await.unwrap();
    }
    (ovs, agent, listener)
}

/// The agent's counter `name` (0 if it never counted).
async fn stat(agent: &AgentHandle, name: &str) -> u64 {
    let export = agent.inspect().await.unwrap();
    export.stats.get(name).copied().unwrap_or(0)
}

/// Forty endpoint adds sent at once go to the switch in a few transactions (group commit), and
/// each keeps its own answer: the two the endpoint DB refuses (a port that holds another
/// endpoint, a VLAN without a network) fail alone with their reason, every other endpoint's
/// flows are in OVS when its add answers, and a removal and an add on the same port sent
/// together apply in the order sent.
#[actix_rt::test]
async fn updates_sent_at_once_share_transactions_and_keep_their_own_answers() {
    testbed::require!(Root, Ovs);
    init_tracing();
    let (ovs, agent, _listener) = vxlan_agent_with_networks().await;
    let before = stat(&agent, "UpdateBatches").await;
    let mut eps: Vec<LocalEndpoint> = (0..40).map(endpoint).collect();
    let taken = LocalEndpoint {
        mac: MacAddr([2, 2, 10, 9, 9, 1]),
        ipv4: Some(Ipv4Addr::new(10, 9, 9, 1)),
        ..endpoint(0)
    };
    let nowhere = LocalEndpoint {
        vlan: 999,
        ..endpoint(99)
    };
    eps.insert(5, taken.clone());
    eps.insert(20, nowhere.clone());
    let answers =
        futures::future::join_all(eps.iter().map(|e| agent.add_local_endpoint(e.clone()))).await;
    let batches = stat(&agent, "UpdateBatches").await - before;
    eprintln!("42 adds sent at once: {batches} switch transactions");
    let flows = ovs.ofctl(&["dump-flows", "br0"]).unwrap();
    for (ep, answer) in eps.iter().zip(&answers) {
        if ep.mac == taken.mac || ep.vlan == nowhere.vlan {
            let e = answer
                .as_ref()
                .expect_err("a refused endpoint was accepted");
            let text = e.to_string();
            assert!(
                text.contains("port 1 already holds") || text.contains("no network on VLAN 999"),
                "{text}"
            );
            assert!(!flows.contains(&ep.mac.to_string()), "{}", ep.mac);
        } else {
            answer.as_ref().unwrap();
            assert!(
                flows.contains(&ep.mac.to_string()),
                "no flow for {}",
                ep.mac
            );
        }
    }
    assert!(
        (1..=10).contains(&batches),
        "40 adds sent at once took {batches} switch transactions"
    );

    // Remove port 3 and put another endpoint on it, sent together.
    let again = LocalEndpoint {
        mac: MacAddr([2, 2, 10, 8, 8, 3]),
        ipv4: Some(Ipv4Addr::new(10, 8, 8, 3)),
        ..endpoint(2)
    };
    let (removed, added) = futures::join!(
        agent.remove_local_endpoint(endpoint(2).port_no),
        agent.add_local_endpoint(again.clone())
    );
    removed.unwrap();
    added.unwrap();
    let flows = ovs.ofctl(&["dump-flows", "br0"]).unwrap();
    assert!(!flows.contains(&endpoint(2).mac.to_string()));
    assert!(flows.contains(&again.mac.to_string()));

    // One the switch refuses (a meter of rate 0) among others sent at once: the batch is put
    // back and its updates run one at a time, so that one fails alone.
    let refused = LocalEndpoint {
        bandwidth: Some(ofnet::Bandwidth {
            rate_kbps: 0,
            burst_kbit: 0,
        }),
        ..endpoint(50)
    };
    let others: Vec<LocalEndpoint> = (51..55).map(endpoint).collect();
    let (bad, good) = futures::join!(
        agent.add_local_endpoint(refused.clone()),
        futures::future::join_all(others.iter().map(|e| agent.add_local_endpoint(e.clone())))
    );
    assert!(bad.is_err());
    let flows = ovs.ofctl(&["dump-flows", "br0"]).unwrap();
    assert!(!flows.contains(&refused.mac.to_string()), "{flows}");
    for (ep, answer) in others.iter().zip(good) {
        answer.unwrap();
        assert!(
            flows.contains(&ep.mac.to_string()),
            "no flow for {}",
            ep.mac
        );
    }
}

#[actix_rt::test]
#[ignore = "measurement, not a check; run explicitly"]
async fn endpoint_adds_against_a_real_bridge() {
    testbed::require!(Root, Ovs);
    init_tracing();
    let (ovs, agent, _listener) = vxlan_agent_with_networks().await;
    let total = 2000;
    let mut last = Instant::now();
    let start = last;
    for n in 0..total {
        agent.add_local_endpoint(endpoint(n)).await.unwrap();
        if (n + 1) % 500 == 0 {
            println!(
                "endpoints {:5}: {:?} per add (confirmed by OVS)",
                n + 1,
                last.elapsed() / 500
            );
            last = Instant::now();
        }
    }
    println!("{total} endpoint adds: {:?} total", start.elapsed());
    let flows = ovs.dump_flows("br0").unwrap().len();
    println!("flows on the bridge: {flows}");
    assert!(flows >= 3 * total as usize);
}

#[actix_rt::test]
#[ignore = "measurement, not a check; run explicitly"]
async fn endpoint_relay_through_the_master() {
    use ofnet::{MasterHandle, Node};
    init_tracing();
    let master = MasterHandle::start("127.0.0.1:0".parse().unwrap(), None)
        .await
        .unwrap();
    let mut agents = Vec::new();
    for last in [1u8, 2] {
        let ip = Ipv4Addr::new(127, 0, 0, last);
        let mut config = AgentConfig::new(BridgeKind::Vxlan, "br0");
        config.local_ip = Some(ip);
        let agent = AgentHandle::start(config);
        let rpc = agent.serve_rpc((ip, 0).into()).await.unwrap();
        for n in 0..NETWORKS {
            agent.add_network(network(n)).await.unwrap();
        }
        master
            .add_node(Node {
                host_addr: ip.to_string(),
                host_port: rpc.local_addr().port(),
            })
            .await
            .unwrap();
        agents.push((agent, rpc));
    }
    let total = 1000;
    let start = Instant::now();
    for n in 0..total {
        agents[0].0.add_local_endpoint(endpoint(n)).await.unwrap();
    }
    let added = start.elapsed();
    loop {
        let known = agents[1].0.inspect().await.unwrap().endpoint_db.len();
        if known == total as usize {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "{known} relayed"
        );
        actix_rt::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    println!(
        "{total} endpoints added on agent A in {added:?}; all known to agent B after {:?} (no switch connected)",
        start.elapsed()
    );
}

#[actix_rt::test]
#[ignore = "measurement, not a check; run explicitly"]
async fn one_network_larger_than_a_flood_group() {
    testbed::require!(Root, Ovs);
    init_tracing();
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    ovs.add_bridge("br0").unwrap();
    let agent = AgentHandle::start(AgentConfig::new(BridgeKind::Vxlan, "br0"));
    let _listener = connect(&ovs, "br0", &agent).await;
    agent.add_network(network(0)).await.unwrap();
    let total = 2500;
    let start = Instant::now();
    for n in 0..total {
        let mut ep = endpoint(n);
        ep.vlan = network(0).vlan;
        agent.add_local_endpoint(ep).await.unwrap();
    }
    println!(
        "{total} endpoints in one network: {:?} per add",
        start.elapsed() / total
    );
    let groups = ovs.dump_groups("br0").unwrap();
    let buckets: usize = groups.iter().map(|g| g.matches("bucket=").count()).sum();
    println!("{} groups, {buckets} buckets on the bridge", groups.len());
    assert_eq!(buckets, 2 * total as usize, "every port in both floods");
}
