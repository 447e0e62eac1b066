//! Open connections through a VIP survive provider churn, an agent restart and an
//! ovs-vswitchd restart: a connection's provider is in its conntrack entry, not in any flow
//! the agent owns, and the service's flows are a function of the service alone.
//!
//! Setup (userspace OVS, VLAN and VXLAN bridges): client c1 opens a TCP connection to VIP:80
//! with providers A (10.1.1.12) and B (10.1.1.11). Then a provider D (an address without a
//! pod) joins and leaves; the agent restarts the way netplugin does it (old connection
//! closed, a new agent replays networks, endpoints, the service and its providers, then
//! listens); ovs-vswitchd is killed and started again. After each step the same connection
//! still gets its provider's answers; after the restarts the bridge holds exactly the agent's
//! service flows (back within 2 s of the switch reconnecting) and new connections are
//! balanced over A and B.
#![allow(clippy::unwrap_used)]

mod common;

use common::services::{
    Connection, Server, VLAN, attach, ip, service_flows_of_agent, service_flows_on_bridge, spec,
    tally, tools_missing,
};
use common::{init_tracing, settle, wait_synced};
use ofnet::{AgentConfig, AgentHandle, BridgeKind, LocalEndpoint, Network};
use std::time::{Duration, Instant};

/// What netplugin replays into a fresh agent: the network, the endpoints, the service.
async fn replay(
    agent: &AgentHandle,
    kind: BridgeKind,
    endpoints: &[LocalEndpoint],
    providers: &[u8],
) {
    agent
        .add_network(Network {
            vlan: VLAN,
            vni: if kind == BridgeKind::Vxlan { 5000 } else { 0 },
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    for ep in endpoints {
        agent.add_local_endpoint(ep.clone()).await.unwrap();
    }
    agent.add_service("web", spec()).await.unwrap();
    agent
        .set_service_providers("web", providers.iter().map(|p| ip(*p)).collect())
        .await
        .unwrap();
}

async fn scenario(kind: BridgeKind) {
    init_tracing();
    let common::Host {
        listener,
        agent: first,
        mut ovs,
        netns: _netns,
    } = common::Host::start(AgentConfig::new(kind, "br0")).await;
    // Reconnect fast: the default backoff would make the test wait up to 8 s.
    ovs.vsctl(&[
        "set",
        "controller",
        "br0",
        "max_backoff=1000",
        "inactivity_probe=0",
    ])
    .unwrap();
    replay(&first, kind, &[], &[11, 12]).await;
    let (c1, c1_ep) = attach(&ovs, &first, kind, 2).await;
    let (a, a_ep) = attach(&ovs, &first, kind, 12).await;
    let (b, b_ep) = attach(&ovs, &first, kind, 11).await;
    let _a = Server::start(a.netns().name(), "a");
    let _b = Server::start(b.netns().name(), "b");
    let c1 = c1.netns().name();

    let (conn, provider) = Connection::open(c1, 80).await;
    assert!(provider == "a" || provider == "b", "{provider:?}");
    let (conn, answer) = conn.say("before").await;
    assert_eq!(answer, provider);

    // Provider churn around it.
    for providers in [vec![ip(11), ip(12), ip(13)], vec![ip(11), ip(12)]] {
        first.set_service_providers("web", providers).await.unwrap();
    }
    let (conn, answer) = conn.say("after churn").await;
    assert_eq!(answer, provider, "provider churn touched the connection");
    let generation = first.bridge().status().await.unwrap().generation;

    // The agent restarts: the old one goes away (OVS keeps the flows in secure mode), the new
    // one replays the state, then listens.
    drop(listener);
    first.bridge().switch().await.unwrap().close();
    drop(first);
    let second = AgentHandle::start(AgentConfig::new(kind, "br0"));
    replay(&second, kind, &[c1_ep, a_ep, b_ep], &[11, 12]).await;
    let _listener = second
        .listen_unix(&ovs.run_dir().join("br0.ctl.sock"))
        .await
        .unwrap();
    wait_synced(&second).await;
    assert!(second.bridge().status().await.unwrap().generation > generation);
    settle(&ovs);
    let (conn, answer) = conn.say("after the agent restart").await;
    assert_eq!(
        answer, provider,
        "the agent restart moved or reset the connection"
    );
    let flows = service_flows_on_bridge(&ovs).await;
    assert_eq!(flows, service_flows_of_agent(&second).await);

    // ovs-vswitchd restarts; the flows come back from the agent's desired state.
    let before = service_flows_on_bridge(&ovs).await;
    let reconciles = second.bridge().status().await.unwrap().reconciles;
    ovs.kill_vswitchd();
    ovs.restart().unwrap();
    let started = Instant::now();
    let mut connected = None;
    loop {
        let status = second.bridge().status().await.unwrap();
        if connected.is_none() && status.reconciles > reconciles {
            connected = Some(Instant::now());
        }
        if status.synced
            && status.reconciles > reconciles
            && service_flows_on_bridge(&ovs).await == before
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "service flows not restored: {status:?}"
        );
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    let back = connected.map_or(Duration::ZERO, |c| c.elapsed());
    eprintln!(
        "{kind:?}: service flows back {:.0} ms after the restarted switch reconnected ({:.0} ms after the restart)",
        back.as_secs_f64() * 1000.0,
        started.elapsed().as_secs_f64() * 1000.0
    );
    assert!(back <= Duration::from_secs(2), "{back:?}");
    settle(&ovs);
    let (_conn, answer) = conn.say("after the ovs-vswitchd restart").await;
    assert_eq!(
        answer, provider,
        "the switch restart moved or reset the connection"
    );

    // New connections are balanced over both providers.
    let spread = tally(c1, "tcp", 80, 30).await;
    assert!(
        spread.contains_key("a") && spread.contains_key("b"),
        "{spread:?}"
    );
}

#[actix_rt::test]
async fn vlan_bridge_connections_survive_churn_and_restarts() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    scenario(BridgeKind::Vlan).await;
}

#[actix_rt::test]
async fn vxlan_bridge_connections_survive_churn_and_restarts() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    scenario(BridgeKind::Vxlan).await;
}
