//! Service clients keep their providers across an agent restart: the new agent adopts the
//! assignments the previous one left on the switch (its DNAT flows) instead of deleting them,
//! so an open TCP connection through the VIP keeps working.
//!
//! Setup (userspace OVS, VLAN and VXLAN bridges): client c1 opens a TCP connection to VIP:80
//! while provider A (10.1.1.12) is the only provider; client c2 then gets provider D
//! (10.1.1.13, an address without a pod); then B (10.1.1.11) joins. The agent restarts the way
//! netplugin does it (old connection closed, a new agent replays networks, endpoints, the
//! service and the providers A and B, then listens). A fresh balancer would give c1 B (no
//! clients, lowest address), which would reset c1's connection.
//!
//! Checked after the restart: the same connection still gets A's answers; c1's DNAT flow
//! still rewrites to A, under the new generation; c2's flows (provider D, dropped from the
//! replayed list) are gone; the bridge holds exactly the agent's service flows; the adopted
//! assignment counts (`SvcClientAdopted`, statistics, a new connection from c1 still goes to
//! A) and c2 is balanced again on its next packet.
#![allow(clippy::unwrap_used)]

mod common;

use common::services::{
    Connection, Server, VLAN, ask, attach, ip, service_flows_of_agent, service_flows_on_bridge,
    spec, tools_missing,
};
use common::{init_tracing, settle, wait_synced};
use ofnet::{AgentConfig, AgentHandle, BridgeKind, LocalEndpoint, Network};

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

/// The DNAT flow of `client` for VIP:80/tcp on the bridge, if any.
fn tcp_dnat_of(flows: &[String], client: u8) -> Option<String> {
    let prefix = format!(
        "table=3, priority=100,tcp,nw_src={},nw_dst=10.254.0.10,tp_dst=80 ",
        ip(client)
    );
    flows.iter().find(|l| l.starts_with(&prefix)).cloned()
}

async fn scenario(kind: BridgeKind) {
    init_tracing();
    let common::Host {
        listener,
        agent: first,
        ovs,
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
    replay(&first, kind, &[], &[12]).await;
    let (c1, c1_ep) = attach(&ovs, &first, kind, 2).await;
    let (c2, c2_ep) = attach(&ovs, &first, kind, 3).await;
    let (a, a_ep) = attach(&ovs, &first, kind, 12).await;
    let (b, b_ep) = attach(&ovs, &first, kind, 11).await;
    let _a = Server::start(a.netns().name(), "a");
    let _b = Server::start(b.netns().name(), "b");
    let (c1, c2) = (c1.netns().name(), c2.netns().name());

    // c1's connection is served by A, the only provider.
    let (conn, greeting) = Connection::open(c1, 80).await;
    assert_eq!(greeting, "a");
    let (conn, answer) = conn.say("before").await;
    assert_eq!(answer, "a");
    // c2 gets D (fewest clients); nothing answers there, the assignment is what matters.
    first
        .set_service_providers("web", vec![ip(12), ip(13)])
        .await
        .unwrap();
    assert_eq!(ask(c2, "udp", 53).await, "");
    let before = service_flows_on_bridge(&ovs).await;
    assert!(
        tcp_dnat_of(&before, 3).is_some_and(|l| l.contains("set_field:10.1.1.13->ip_dst")),
        "c2 not on D: {before:#?}"
    );
    first
        .set_service_providers("web", vec![ip(11), ip(12), ip(13)])
        .await
        .unwrap();
    let (conn, answer) = conn.say("still").await;
    assert_eq!(answer, "a", "B joining moves nobody");
    let generation = first.bridge().status().await.unwrap().generation;

    // The agent restarts: the old one goes away (OVS keeps the flows in secure mode), the new
    // one replays the state with D dropped from the providers, then listens.
    drop(listener);
    first.bridge().switch().await.unwrap().close();
    drop(first);
    let second = AgentHandle::start(AgentConfig::new(kind, "br0"));
    let endpoints = [c1_ep, c2_ep, a_ep, b_ep];
    replay(&second, kind, &endpoints, &[11, 12]).await;
    let _listener = second
        .listen_unix(&ovs.run_dir().join("br0.ctl.sock"))
        .await
        .unwrap();
    wait_synced(&second).await;
    assert!(second.bridge().status().await.unwrap().generation > generation);
    settle(&ovs);

    // The same TCP connection still reaches A.
    let (conn, answer) = conn.say("after the restart").await;
    assert_eq!(answer, "a", "c1's connection was moved or reset");
    let after = service_flows_on_bridge(&ovs).await;
    let dnat = tcp_dnat_of(&after, 2).unwrap_or_default();
    assert!(
        dnat.contains("actions=set_field:10.1.1.12->ip_dst,set_field:8080->tcp_dst,set_field:02:02:0a:01:01:0c->eth_dst"),
        "c1's DNAT flow does not point at A: {after:#?}"
    );
    // c2's assignment named a provider that is gone: not adopted, its flows deleted.
    assert!(
        !after
            .iter()
            .any(|l| l.contains("10.1.1.3,") || l.contains("10.1.1.13")),
        "c2's flows stayed: {after:#?}"
    );
    // The bridge holds what the agent computed: 2 watch + c1's 2 ports × 2.
    assert_eq!(after, service_flows_of_agent(&second).await);
    assert_eq!(after.len(), 6, "{after:#?}");
    let export = serde_json::to_value(second.inspect().await.unwrap()).unwrap();
    assert_eq!(
        export["Stats"]["SvcClientAdopted"], 1,
        "{}",
        export["Stats"]
    );
    let stats = second.service_stats().await.unwrap();
    assert!(
        stats.0["10.1.1.2"].svc_stats["10.254.0.10:80/TCP"]
            .prov_stats
            .contains_key("10.1.1.12"),
        "{stats:?}"
    );
    assert!(!stats.0.contains_key("10.1.1.3"));

    // The adopted assignment is a real one: a new connection from c1 goes to A too, and c2
    // is balanced again on its next packet (B: no clients).
    assert_eq!(ask(c1, "tcp", 80).await, "a");
    assert_eq!(ask(c2, "tcp", 80).await, "b");
    let (_conn, answer) = conn.say("at the end").await;
    assert_eq!(answer, "a");
}

#[actix_rt::test]
async fn vlan_bridge_clients_keep_their_providers_across_an_agent_restart() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    scenario(BridgeKind::Vlan).await;
}

#[actix_rt::test]
async fn vxlan_bridge_clients_keep_their_providers_across_an_agent_restart() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    scenario(BridgeKind::Vxlan).await;
}
