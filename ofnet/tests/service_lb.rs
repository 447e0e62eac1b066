//! Service load balancing on a real Open vSwitch (userspace datapath), VLAN and VXLAN bridges:
//! two clients and two providers as local endpoints; providers answer TCP and UDP with their
//! own name (a small python3 server in their namespace), clients reach the service on its VIP.
//!
//! What is checked: the VIP answers ARP with `02:02:<vip>`; a client reaches VIP:80/tcp and
//! VIP:53/udp and gets a provider's answer (the first packet is not lost: one attempt, no
//! retries beyond TCP's own); the second client gets the other provider (fewest clients); both
//! ports of a client go to the same provider (affinity per client); the watch flows and the
//! DNAT/SNAT flows are on the bridge exactly as the agent computed them; statistics count the
//! traffic; removing a provider moves its client to the other one; a client endpoint going
//! away takes its flows; removing the service leaves no service flow and the VIP unreachable.
#![allow(clippy::unwrap_used)]

mod common;

use common::services::{
    Server, VIP, VLAN, ask, ask_timed, attach, ip, service_flows_of_agent, service_flows_on_bridge,
    spec, tools_missing,
};
use common::{blocking, init_tracing, settle};
use ofnet::{AgentConfig, BridgeKind, Network};
use std::process::Command;

async fn scenario(kind: BridgeKind) {
    init_tracing();
    let h = common::Host::start(AgentConfig::new(kind, "br0")).await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    agent
        .add_network(Network {
            vlan: VLAN,
            vni: if kind == BridgeKind::Vxlan { 5000 } else { 0 },
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    let (c1, _) = attach(ovs, agent, kind, 2).await;
    let (c2, c2_ep) = attach(ovs, agent, kind, 3).await;
    let (p1, _) = attach(ovs, agent, kind, 11).await;
    let (p2, _) = attach(ovs, agent, kind, 12).await;
    let _s1 = Server::start(p1.netns().name(), "p1");
    let _s2 = Server::start(p2.netns().name(), "p2");
    let (c1, c2) = (c1.netns().name(), c2.netns().name());

    // Providers first, spec later: both are remembered; only then is the VIP watched.
    agent
        .set_service_providers("web", vec![ip(11), ip(12)])
        .await
        .unwrap();
    assert!(service_flows_on_bridge(ovs).await.is_empty());
    agent.add_service("web", spec()).await.unwrap();
    settle(ovs);
    assert_eq!(
        service_flows_on_bridge(ovs).await,
        vec![
            "table=3, priority=10,tcp,nw_dst=10.254.0.10 actions=CONTROLLER:65535",
            "table=3, priority=10,udp,nw_dst=10.254.0.10 actions=CONTROLLER:65535",
        ],
        "watch flows"
    );

    // First client: TCP and UDP reach the same provider; first packets are not lost.
    let first = ask(c1, "tcp", 80).await;
    assert!(first == "p1" || first == "p2", "c1 tcp got {first:?}");
    assert_eq!(ask(c1, "udp", 53).await, first, "affinity per client");
    // Second client: the other provider. Its first UDP request goes through the controller
    // (punt, provider choice, flows confirmed, re-injection), the next ones through the flows.
    let (second, via_controller) = ask_timed(c2, "udp", 53).await;
    let other = if first == "p1" { "p2" } else { "p1" };
    assert_eq!(second, other, "fewest clients");
    let (again, via_flows) = ask_timed(c2, "udp", 53).await;
    assert_eq!(again, other);
    eprintln!(
        "{kind:?}: UDP request/answer through the controller {via_controller:.2} ms, through the flows {via_flows:.2} ms"
    );
    assert_eq!(ask(c2, "tcp", 80).await, other);

    // The VIP was answered by the ARP proxy.
    let neigh = c1_neigh(c1).await;
    assert!(
        neigh.contains("02:02:0a:fe:00:0a"),
        "neighbour entry: {neigh}"
    );

    // The bridge holds exactly what the agent computed: 2 watch + 2 clients × 2 ports × 2.
    let on_bridge = service_flows_on_bridge(ovs).await;
    assert_eq!(on_bridge, service_flows_of_agent(agent).await);
    assert_eq!(on_bridge.len(), 10, "{on_bridge:#?}");
    let first_ip = if first == "p1" { ip(11) } else { ip(12) };
    assert!(
        on_bridge.iter().any(|l| l.contains(&format!(
            "table=3, priority=100,tcp,nw_src=10.1.1.2,nw_dst=10.254.0.10,tp_dst=80 actions=set_field:{first_ip}->ip_dst,set_field:8080->tcp_dst,set_field:02:02:0a:01:01:{:02x}->eth_dst,goto_table:4",
            first_ip.octets()[3]
        ))),
        "{on_bridge:#?}"
    );

    // Statistics: both clients, the TCP port of c1 counted both ways on its provider.
    let stats = agent.service_stats().await.unwrap();
    let s1 = &stats.0["10.1.1.2"];
    assert_eq!(s1.vrf_name, "t1");
    let tcp = &s1.svc_stats["10.254.0.10:80/TCP"];
    assert_eq!(
        (tcp.svc_port.as_str(), tcp.prov_port.as_str()),
        ("80", "8080")
    );
    let prov = &tcp.prov_stats[&first_ip.to_string()];
    assert!(
        prov.stats.packets_out >= 2 && prov.stats.packets_in >= 2,
        "{prov:?}"
    );
    assert!(stats.0.contains_key("10.1.1.3"));
    let json = serde_json::to_value(&stats).unwrap();
    assert!(json["10.1.1.2"]["SvcStats"]["10.254.0.10:53/UDP"]["ProvStats"]
        [first_ip.to_string()]["PacketsIn"]
        .as_u64()
        .is_some_and(|n| n >= 1));

    // The first client's provider leaves: it moves to the remaining one.
    agent
        .set_service_providers("web", vec![if first == "p1" { ip(12) } else { ip(11) }])
        .await
        .unwrap();
    settle(ovs);
    assert_eq!(ask(c1, "tcp", 80).await, other, "rebalanced");
    assert_eq!(service_flows_on_bridge(ovs).await.len(), 10);

    // A client endpoint going away takes its flows.
    agent.remove_local_endpoint(c2_ep.port_no).await.unwrap();
    let left = service_flows_on_bridge(ovs).await;
    assert!(
        !left.iter().any(|l| l.contains("10.1.1.3")),
        "c2's flows stay: {left:#?}"
    );
    assert_eq!(left.len(), 6);

    // Removing the service removes everything; the VIP is unreachable; again is fine.
    agent.remove_service("web").await.unwrap();
    settle(ovs);
    assert!(service_flows_on_bridge(ovs).await.is_empty());
    assert_eq!(ask(c1, "tcp", 80).await, "", "VIP unreachable");
    agent.remove_service("web").await.unwrap();
    assert!(agent.service_stats().await.unwrap().0.is_empty());
}

async fn c1_neigh(ns: &str) -> String {
    let ns = ns.to_string();
    blocking(move || {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns, "ip", "neigh", "show", VIP])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
    .await
}

#[actix_rt::test]
async fn vlan_bridge_balances_tcp_and_udp_clients_over_providers() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    scenario(BridgeKind::Vlan).await;
}

#[actix_rt::test]
async fn vxlan_bridge_balances_tcp_and_udp_clients_over_providers() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    scenario(BridgeKind::Vxlan).await;
}

/// VXLAN, provider on the other host: host A's agent balances its client onto a remote
/// endpoint of host B. The DNAT flow's `eth_dst` (B's endpoint MAC) sends the packet through
/// the tunnel; the answer comes back through A's VTEP ingress, which continues in table 6 where
/// the SNAT flow restores the VIP.
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
    assert_eq!(ask(c, "udp", 53).await, "remote", "first packet, UDP");
    assert_eq!(ask(c, "tcp", 80).await, "remote", "TCP");
    let flows = service_flows_on_bridge(&a.ovs).await;
    assert!(
        flows.iter().any(|l| l.contains("tp_dst=80 actions=set_field:10.1.1.21->ip_dst,set_field:8080->tcp_dst,set_field:02:02:0a:01:01:15->eth_dst,goto_table:4")),
        "{flows:#?}"
    );
}
