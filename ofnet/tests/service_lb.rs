//! Service load balancing in the switch, on a real Open vSwitch (userspace datapath), VLAN and
//! VXLAN bridges: clients and providers are local endpoints (pods); providers answer TCP and
//! UDP with their own name (a small python3 server in their namespace), clients reach the
//! service on its VIP.
//!
//! What is checked:
//! - one client, 300 new TCP connections and 300 UDP requests (new source ports) over 3
//!   providers: each provider gets 20–47% of each (a hash per connection, not a choice per
//!   client); no packet reaches the controller;
//! - the bridge holds exactly the service flows the agent computed, and one select group per
//!   TCP service port with a bucket per provider; `/svcstats` counts per provider both ways;
//! - a service without providers rejects: TCP gets a reset, UDP a port unreachable (refused at
//!   once, not a timeout); a provider added is used at once;
//! - scale-out under load (a new connection every 20 ms): the new provider serves within 1 s of
//!   its ADD; a removed provider gets no new connection after 1 s and its open connections end,
//!   while connections to the providers that stay are untouched and none fails;
//! - removing the service leaves no service flow or group.
#![allow(clippy::unwrap_used)]

mod common;

use common::services::{
    Connection, Probe, Server, VIP, VLAN, attach, groups_on_bridge, ip, now,
    service_flows_of_agent, service_flows_on_bridge, spec, tally, tally_within, tools_missing,
};
use common::{init_tracing, revalidators_paused, settle};
use ofnet::{AgentConfig, AgentHandle, BridgeKind, Network};
use testbed::{Ovs, Pod};

async fn network(agent: &AgentHandle, kind: BridgeKind) {
    agent
        .add_network(Network {
            vlan: VLAN,
            vni: if kind == BridgeKind::Vxlan { 5000 } else { 0 },
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
}

/// Pods: a client (10.1.1.2) and providers `p<n>` at 10.1.1.1<n>, each running its server.
async fn pods(
    ovs: &Ovs,
    agent: &AgentHandle,
    kind: BridgeKind,
    providers: u8,
) -> (Pod, Vec<(Pod, Server)>) {
    let (client, _) = attach(ovs, agent, kind, 2).await;
    let mut out = Vec::new();
    for n in 1..=providers {
        let (pod, _) = attach(ovs, agent, kind, 10 + n).await;
        let server = Server::start(pod.netns().name(), &format!("p{n}"));
        out.push((pod, server));
    }
    (client, out)
}

async fn balance(kind: BridgeKind) {
    init_tracing();
    let h = common::Host::start(AgentConfig::new(kind, "br0")).await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    network(agent, kind).await;
    let (client, _providers) = pods(ovs, agent, kind, 3).await;
    let c = client.netns().name();
    agent
        .set_service_providers("web", vec![ip(11), ip(12), ip(13)])
        .await
        .unwrap();
    assert!(service_flows_on_bridge(ovs).await.is_empty(), "no spec yet");
    agent.add_service("web", spec()).await.unwrap();
    settle(ovs);

    // The bridge holds what the agent computed: conntrack entry ×2, and per port a balance
    // flow and per provider a forward and a reply flow (UDP: and a commit per hash value),
    // and the service's two drops.
    let on_bridge = service_flows_on_bridge(ovs).await;
    assert_eq!(on_bridge, service_flows_of_agent(agent).await);
    // Hairpin: 4 shared flows, and one per local endpoint (the client and the three
    // providers), whatever the services.
    assert_eq!(
        on_bridge.len(),
        2 + (1 + 3 * 2) + (1 + 3 * 3) + 2 + 4 + 4,
        "{on_bridge:#?}"
    );
    let groups = groups_on_bridge(ovs);
    assert_eq!(groups.len(), 1, "the TCP port's: {groups:#?}");
    for g in &groups {
        assert!(g.contains("type=select"), "{g}");
        assert_eq!(g.matches("bucket=").count(), 3, "{g}");
    }

    // 300 new connections from one client: spread by connection.
    let tcp = tally(c, "tcp", 80, 300).await;
    eprintln!("{kind:?}: 300 TCP connections from one client: {tcp:?}");
    for p in ["p1", "p2", "p3"] {
        let n = tcp.get(p).copied().unwrap_or_default();
        assert!((60..=141).contains(&n), "{p} got {n} of 300: {tcp:?}");
    }
    assert_eq!(tcp.values().sum::<u32>(), 300);
    // 300 UDP "connections" (each from a new socket, so a new source port): spread too (the
    // multipath hash includes UDP ports, which the select group's hash leaves out).
    let udp = tally(c, "udp", 53, 300).await;
    eprintln!("{kind:?}: 300 UDP requests from one client: {udp:?}");
    for p in ["p1", "p2", "p3"] {
        let n = udp.get(p).copied().unwrap_or_default();
        assert!((60..=141).contains(&n), "{p} got {n} of 300: {udp:?}");
    }
    assert_eq!(udp.values().sum::<u32>(), 300, "{udp:?}");

    // No service packet went to the controller.
    let export = serde_json::to_value(agent.inspect().await.unwrap()).unwrap();
    assert!(
        export["Stats"]["SvcRejectRcvd"].is_null(),
        "{}",
        export["Stats"]
    );

    // Statistics: per provider, both directions. OVS folds datapath counters into its
    // OpenFlow flows asynchronously (revalidators), so read until they caught up.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let stats = agent.service_stats().await.unwrap();
        let tcp_stats = &stats.0[VIP].svc_stats["10.254.0.10:80/TCP"];
        let short: Vec<String> = [ip(11), ip(12), ip(13)]
            .iter()
            .filter_map(|p| {
                let s = &tcp_stats.prov_stats[&p.to_string()].stats;
                (s.packets_out < 60 || s.packets_in < 60).then(|| format!("{p}: {s:?}"))
            })
            .collect();
        if short.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{short:?}");
        let _ = ovs.appctl(&["revalidator/wait"]);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // Removing the service removes every flow and group.
    agent.remove_service("web").await.unwrap();
    settle(ovs);
    assert!(service_flows_on_bridge(ovs).await.is_empty());
    assert!(groups_on_bridge(ovs).is_empty());
}

#[actix_rt::test]
async fn vlan_bridge_balances_each_connection_over_the_providers() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    balance(BridgeKind::Vlan).await;
}

#[actix_rt::test]
async fn vxlan_bridge_balances_each_connection_over_the_providers() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    balance(BridgeKind::Vxlan).await;
}

/// No providers: refused at once (TCP reset, ICMP port unreachable), then a provider serves.
#[actix_rt::test]
async fn a_service_without_providers_rejects_and_a_new_provider_serves_at_once() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    init_tracing();
    let kind = BridgeKind::Vxlan;
    let h = common::Host::start(AgentConfig::new(kind, "br0")).await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    network(agent, kind).await;
    let (client, _providers) = pods(ovs, agent, kind, 1).await;
    let c = client.netns().name();
    agent.add_service("web", spec()).await.unwrap();
    settle(ovs);
    let tcp = tally_within(c, "tcp", VIP, 80, 3, 5.0).await;
    assert_eq!(tcp.get("refused"), Some(&3), "{tcp:?}");
    let udp = tally_within(c, "udp", VIP, 53, 3, 5.0).await;
    assert_eq!(udp.get("refused"), Some(&3), "{udp:?}");
    let export = serde_json::to_value(agent.inspect().await.unwrap()).unwrap();
    assert_eq!(export["Stats"]["SvcRejectSent"], 6, "{}", export["Stats"]);

    agent
        .set_service_providers("web", vec![ip(11)])
        .await
        .unwrap();
    assert_eq!(tally(c, "tcp", 80, 1).await.get("p1"), Some(&1));
    assert_eq!(tally(c, "udp", 53, 1).await.get("p1"), Some(&1));
}

/// Scale out and in under load; open connections to providers that stay are untouched, those
/// to a removed provider end.
#[actix_rt::test]
async fn providers_added_and_removed_under_load() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    init_tracing();
    let kind = BridgeKind::Vlan;
    let h = common::Host::start(AgentConfig::new(kind, "br0")).await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    network(agent, kind).await;
    let (client, _providers) = pods(ovs, agent, kind, 3).await;
    let c = client.netns().name();
    agent.add_service("web", spec()).await.unwrap();
    agent
        .set_service_providers("web", vec![ip(11), ip(12)])
        .await
        .unwrap();
    settle(ovs);

    // Long-lived connections, on p1 and p2.
    let mut open = Vec::new();
    for _ in 0..8 {
        let (conn, greeting) = Connection::open(c, 80).await;
        assert!(greeting == "p1" || greeting == "p2", "{greeting:?}");
        open.push((conn, greeting));
    }
    assert!(
        open.iter().any(|(_, g)| g == "p1") && open.iter().any(|(_, g)| g == "p2"),
        "all 8 connections on one provider"
    );

    // A new connection every 20 ms for about 4 s; p3 joins after 1 s, p1 leaves after 2.5 s.
    let load = Probe::start(c, "tcp", 80, 160, 0.02);
    actix_rt::time::sleep(std::time::Duration::from_millis(1000)).await;
    agent
        .set_service_providers("web", vec![ip(11), ip(12), ip(13)])
        .await
        .unwrap();
    let added = now();
    actix_rt::time::sleep(std::time::Duration::from_millis(1500)).await;
    agent
        .set_service_providers("web", vec![ip(12), ip(13)])
        .await
        .unwrap();
    let removed = now();
    let attempts = load.finish().await;
    assert!(attempts.len() >= 150, "{}", attempts.len());

    let first_p3 = attempts
        .iter()
        .find(|(_, a)| a == "p3")
        .map(|(t, _)| *t)
        .unwrap();
    eprintln!(
        "new provider's first connection {:.0} ms after its ADD",
        (first_p3 - added) * 1000.0
    );
    assert!(
        first_p3 - added <= 1.0,
        "p3 first served {first_p3} (added {added})"
    );
    let late_p1: Vec<_> = attempts
        .iter()
        .filter(|(t, a)| a == "p1" && *t > removed + 1.0)
        .collect();
    assert!(
        late_p1.is_empty(),
        "p1 served after its removal: {late_p1:?}"
    );
    // Every connection succeeds, but one racing p1's removal.
    let failed: Vec<_> = attempts
        .iter()
        .filter(|(_, a)| !a.starts_with('p'))
        .collect();
    assert!(failed.len() <= 1, "failed connections: {failed:?}");

    // Open connections: p2's still answer, p1's ended.
    for (conn, provider) in open {
        let (_, answer) = conn.say("still there?").await;
        if provider == "p2" {
            assert_eq!(
                answer, "p2",
                "a connection to a provider that stays was touched"
            );
        } else {
            assert!(
                !answer.starts_with('p'),
                "a connection to the removed provider still works: {answer:?}"
            );
        }
    }
}

/// VXLAN, provider on the other host: host A's switch balances its client onto a remote
/// endpoint of host B (its MAC sends the packet through the tunnel); the answer comes back
/// through A's VTEP ingress, whose conntrack lookup in table 6 restores the VIP.
#[actix_rt::test]
async fn vxlan_client_reaches_a_provider_on_another_host() {
    testbed::require!(Root, Ovs, Ping);
    if tools_missing(module_path!()) {
        return;
    }
    init_tracing();
    let (a, b) = common::vxlan_hosts::two_hosts().await;
    for (h, vlan) in [(&a, 2), (&b, 3)] {
        h.agent
            .add_network(Network {
                vlan,
                vni: 5000,
                gateway: None,
                vrf: "t1".into(),
            })
            .await
            .unwrap();
    }
    let client = a.pod(ip(2), 2).await;
    let provider = b.pod(ip(21), 3).await;
    for pod in [&client, &provider] {
        common::disable_tx_offload(pod);
    }
    client
        .exec(&["ip", "route", "add", "10.254.0.0/16", "dev", "eth0"])
        .unwrap();
    common::vxlan_hosts::exchange(&a, &b).await;
    let _server = Server::start(provider.netns().name(), "remote");

    a.agent.add_service("web", spec()).await.unwrap();
    a.agent
        .set_service_providers("web", vec![ip(21)])
        .await
        .unwrap();
    settle(&a.ovs);
    let c = client.netns().name();
    assert_eq!(tally(c, "udp", 53, 3).await.get("remote"), Some(&3), "UDP");
    assert_eq!(tally(c, "tcp", 80, 3).await.get("remote"), Some(&3), "TCP");
    let flows = service_flows_on_bridge(&a.ovs).await;
    assert!(
        flows.iter().any(|l| l.contains("ct_mark=0xa010115,ct_nw_dst=10.254.0.10,ct_nw_proto=6,ct_tp_dst=80,ip actions=set_field:02:02:0a:01:01:15->eth_dst,goto_table:4")),
        "{flows:#?}"
    );
}

/// Session affinity by client address (Kubernetes `sessionAffinity: ClientIP`): all of one
/// client's new connections go to one provider, learned in the switch; when that provider
/// leaves, the client is balanced again and sticks to its new provider.
#[actix_rt::test]
async fn session_affinity_keeps_a_client_on_one_provider() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    init_tracing();
    let kind = BridgeKind::Vxlan;
    let h = common::Host::start(AgentConfig::new(kind, "br0")).await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    network(agent, kind).await;
    let (client, _providers) = pods(ovs, agent, kind, 3).await;
    let c = client.netns().name();
    let mut sticky = spec();
    sticky.affinity_timeout = Some(30);
    agent.add_service("web", sticky).await.unwrap();
    agent
        .set_service_providers("web", vec![ip(11), ip(12), ip(13)])
        .await
        .unwrap();
    settle(ovs);
    // OVS's revalidators refresh cached datapath flows after a flow table change (a learned
    // entry is one) when they next run. Paused, a cached affinity miss would stay stale for the
    // whole count, so the count shows whether each new connection is translated afresh (the
    // design) rather than whether the revalidators happened to run between two connections.
    let first = revalidators_paused(ovs, tally(c, "tcp", 80, 300)).await;
    eprintln!("300 TCP connections with session affinity: {first:?}");
    assert_eq!(first.len(), 1, "{first:?}");
    let (chosen, n) = first.iter().next().unwrap();
    assert_eq!(*n, 300);
    // The learned entry is in table 2 with the service's idle timeout.
    let learned: Vec<String> = ovs
        .ofctl(&["dump-flows", "br0", "table=2"])
        .unwrap()
        .lines()
        .filter(|l| l.contains("idle_timeout=30"))
        .map(String::from)
        .collect();
    assert_eq!(learned.len(), 1, "{learned:#?}");

    // The chosen provider leaves: balanced again, then sticky again.
    let left: Vec<_> = [11u8, 12, 13]
        .into_iter()
        .filter(|n| format!("p{}", n - 10) != *chosen)
        .map(ip)
        .collect();
    agent.set_service_providers("web", left).await.unwrap();
    settle(ovs);
    let second = revalidators_paused(ovs, tally(c, "tcp", 80, 50)).await;
    assert_eq!(second.len(), 1, "{second:?}");
    assert!(!second.contains_key(chosen), "{second:?}");
}

/// Hairpin: a pod that is the only provider of a service reaches the service (TCP and UDP),
/// on both bridges; a client pod still reaches it too.
async fn hairpin(kind: BridgeKind) {
    init_tracing();
    let h = common::Host::start(AgentConfig::new(kind, "br0")).await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    network(agent, kind).await;
    let (client, providers) = pods(ovs, agent, kind, 1).await;
    agent
        .set_service_providers("web", vec![ip(11)])
        .await
        .unwrap();
    agent.add_service("web", spec()).await.unwrap();
    settle(ovs);
    let on_bridge = service_flows_on_bridge(ovs).await;
    assert_eq!(on_bridge, service_flows_of_agent(agent).await);
    let own = providers[0].0.netns().name();
    let tcp = tally(own, "tcp", 80, 20).await;
    assert_eq!(
        tcp.get("p1"),
        Some(&20),
        "{kind:?}: the provider reaches itself: {tcp:?}"
    );
    let udp = tally(own, "udp", 53, 20).await;
    assert_eq!(udp.get("p1"), Some(&20), "{kind:?}: {udp:?}");
    let tcp = tally(client.netns().name(), "tcp", 80, 10).await;
    assert_eq!(
        tcp.get("p1"),
        Some(&10),
        "{kind:?}: other clients too: {tcp:?}"
    );
}

#[actix_rt::test]
async fn a_pod_reaches_a_service_that_selects_itself() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    for kind in [BridgeKind::Vxlan, BridgeKind::Vlan] {
        hairpin(kind).await;
    }
}
