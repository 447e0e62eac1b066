//! Dual-stack services on a real Open vSwitch (userspace datapath, VXLAN bridge): dual-stack
//! pods (a client and two providers running a server on both families), a service with an IPv4
//! and an IPv6 VIP.
//!
//! What is checked:
//! - over IPv6, new TCP connections and UDP requests (new source ports) from one client are
//!   spread over both providers' IPv6 addresses; over IPv4 the same service answers too; the
//!   client finds the IPv6 VIP through the agent's ND proxy; no packet reaches the controller;
//! - the bridge holds exactly the flows the agent computed (the IPv6 conntrack lookups
//!   included), and a select group per family for the TCP port;
//! - a dual-stack service without providers refuses at once over IPv6 (TCP reset, ICMPv6 port
//!   unreachable);
//! - with session affinity, all of a client's IPv6 connections reach one provider.
#![allow(clippy::unwrap_used)]

mod common;

use common::services::{
    Server, groups_on_bridge, ip, service_flows_of_agent, service_flows_on_bridge, spec, tally_to,
    tally_within, tools_missing,
};
use common::{init_tracing, ofport, revalidators_paused, settle};
use ofnet::{AgentConfig, AgentHandle, BridgeKind, LocalEndpoint, MacAddr, Network};
use std::net::Ipv6Addr;
use testbed::{Ovs, Pod, PodOptions};

const VLAN: u16 = common::services::VLAN;
const VIP6: &str = "fd00:254::10";

fn ip6(last: u8) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, u16::from(last))
}

/// A dual-stack pod `10.1.1.<last>/24`, `fd00:1::<last>/64` on `br0`, reaching both VIPs
/// on-link, added to the agent as a dual-stack local endpoint.
async fn attach(ovs: &Ovs, agent: &AgentHandle, last: u8) -> Pod {
    let mac = MacAddr([2, 2, 10, 1, 1, last]);
    let pod = Pod::attach(
        ovs,
        "br0",
        &PodOptions {
            ip: format!("{}/24", ip(last)),
            mac: Some(mac.to_string()),
            gateway: None,
            vlan: None,
        },
    )
    .unwrap();
    common::disable_tx_offload(&pod);
    let v6 = format!("{}/64", ip6(last));
    pod.exec(&["ip", "-6", "addr", "add", &v6, "dev", "eth0", "nodad"])
        .unwrap();
    pod.exec(&["ip", "route", "add", "10.254.0.0/16", "dev", "eth0"])
        .unwrap();
    pod.exec(&["ip", "-6", "route", "add", "fd00:254::/64", "dev", "eth0"])
        .unwrap();
    common::services::hairpin_neighbour(&pod, true);
    agent
        .add_local_endpoint(LocalEndpoint {
            port_no: ofport(ovs, pod.port_name()).await,
            mac,
            vlan: VLAN,
            ipv4: Some(ip(last)),
            ipv6: Some(ip6(last)),
            epg: 0,
            epg_vlan: 0,
            dscp: 0,
            bandwidth: None,
        })
        .await
        .unwrap();
    pod
}

async fn host() -> common::Host {
    let h = common::Host::start(AgentConfig::new(BridgeKind::Vxlan, "br0")).await;
    h.agent
        .add_network(Network {
            vlan: VLAN,
            vni: 5000,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    h
}

fn dual_stack_spec() -> ofnet::ServiceSpec {
    let mut s = spec();
    s.vip6 = Some(VIP6.parse().unwrap());
    s
}

fn assert_spread(what: &str, got: &std::collections::BTreeMap<String, u32>, total: u32) {
    eprintln!("{what}: {got:?}");
    assert_eq!(got.values().sum::<u32>(), total, "{what}: {got:?}");
    for p in ["p1", "p2"] {
        let n = got.get(p).copied().unwrap_or_default();
        assert!(n * 4 >= total, "{what}: {p} got {n} of {total}: {got:?}");
    }
}

#[actix_rt::test]
async fn a_dual_stack_service_balances_over_ipv6_and_ipv4() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    init_tracing();
    let h = host().await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    let client = attach(ovs, agent, 2).await;
    let mut servers = Vec::new();
    let mut providers = Vec::new();
    for n in 1..=2u8 {
        let pod = attach(ovs, agent, 10 + n).await;
        servers.push(Server::start(pod.netns().name(), &format!("p{n}")));
        providers.push(pod);
    }
    let c = client.netns().name();
    agent
        .set_service_providers("web", vec![ip(11), ip(12)])
        .await
        .unwrap();
    agent.add_service("web", dual_stack_spec()).await.unwrap();
    settle(ovs);

    // IPv4 and IPv6 conntrack lookups in tables 3 and 6; shared hairpin flows (per family a
    // reply lookup in each zone and the reply's way out, and the SNATed packets' way out); per
    // family: TCP balance + 2 × (forward, reply), UDP balance + 2 × (commit, forward, reply),
    // 2 drops; and one hairpin flow per local endpoint (the client and the two providers) and
    // family, whatever the services.
    let on_bridge = service_flows_on_bridge(ovs).await;
    assert_eq!(on_bridge, service_flows_of_agent(agent).await);
    assert_eq!(
        on_bridge.len(),
        4 + (2 * 3 + 1) + 2 * (5 + 7 + 2) + 3 * 2,
        "{on_bridge:#?}"
    );
    assert!(
        on_bridge
            .iter()
            .any(|l| l.contains("ct_state=-trk,ipv6 actions=ct(table=3")),
        "{on_bridge:#?}"
    );
    let groups = groups_on_bridge(ovs);
    assert_eq!(groups.len(), 2, "{groups:#?}");
    assert!(
        groups
            .iter()
            .any(|g| g.contains("nat(dst=[fd00:1::b]:8080)") && g.contains("[fd00:1::c]:8080")),
        "the IPv6 group NATs to the providers' IPv6 addresses: {groups:#?}"
    );

    let tcp6 = tally_to(c, "tcp", VIP6, 80, 100).await;
    assert_spread("100 TCP connections over IPv6", &tcp6, 100);
    let udp6 = tally_to(c, "udp", VIP6, 53, 100).await;
    assert_spread("100 UDP requests over IPv6", &udp6, 100);
    let tcp4 = tally_to(c, "tcp", common::services::VIP, 80, 40).await;
    assert_spread("40 TCP connections over IPv4", &tcp4, 40);
    // Hairpin over IPv6: a provider reaching its own service's IPv6 VIP.
    let own = providers[0].netns().name();
    let hairpin = tally_to(own, "tcp", VIP6, 80, 20).await;
    assert_eq!(hairpin.values().sum::<u32>(), 20, "{hairpin:?}");
    assert!(
        hairpin.keys().all(|k| k.starts_with('p')),
        "hairpin over IPv6: {hairpin:?}"
    );

    let export = serde_json::to_value(agent.inspect().await.unwrap()).unwrap();
    assert!(
        export["Stats"]["SvcRejectRcvd"].is_null(),
        "{}",
        export["Stats"]
    );
    // The client resolved the IPv6 VIP through the ND proxy: at the IPv4 VIP's MAC.
    let neigh = client.exec(&["ip", "-6", "neigh", "show", VIP6]).unwrap();
    assert!(neigh.contains("02:02:0a:fe:00:0a"), "{neigh}");
    let stats = agent.service_stats().await.unwrap();
    assert!(
        stats.0[VIP6]
            .svc_stats
            .contains_key("[fd00:254::10]:80/TCP"),
        "{:?}",
        stats.0.keys()
    );

    // Without providers: refused at once over IPv6 too.
    agent.set_service_providers("web", vec![]).await.unwrap();
    settle(ovs);
    let tcp = tally_within(c, "tcp", VIP6, 80, 3, 5.0).await;
    assert_eq!(tcp.get("refused"), Some(&3), "{tcp:?}");
    let udp = tally_within(c, "udp", VIP6, 53, 3, 5.0).await;
    assert_eq!(udp.get("refused"), Some(&3), "{udp:?}");

    agent.remove_service("web").await.unwrap();
    settle(ovs);
    assert!(service_flows_on_bridge(ovs).await.is_empty());
    assert!(groups_on_bridge(ovs).is_empty());
}

#[actix_rt::test]
async fn ipv6_clients_keep_their_provider_with_session_affinity() {
    testbed::require!(Root, Ovs);
    if tools_missing(module_path!()) {
        return;
    }
    init_tracing();
    let h = host().await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    let client = attach(ovs, agent, 2).await;
    let mut servers = Vec::new();
    let mut providers = Vec::new();
    for n in 1..=2u8 {
        let pod = attach(ovs, agent, 10 + n).await;
        servers.push(Server::start(pod.netns().name(), &format!("p{n}")));
        providers.push(pod);
    }
    let mut s = dual_stack_spec();
    s.affinity_timeout = Some(60);
    agent.add_service("web", s).await.unwrap();
    agent
        .set_service_providers("web", vec![ip(11), ip(12)])
        .await
        .unwrap();
    settle(ovs);
    let c = client.netns().name();
    for proto in ["tcp", "udp"] {
        let port = if proto == "tcp" { 80 } else { 53 };
        // Paused revalidators: see `session_affinity_keeps_a_client_on_one_provider`.
        let got = revalidators_paused(ovs, tally_to(c, proto, VIP6, port, 50)).await;
        eprintln!("{proto} over IPv6 with affinity: {got:?}");
        assert_eq!(got.len(), 1, "{proto}: one provider for all: {got:?}");
        assert!(got.keys().all(|k| k.starts_with('p')), "{got:?}");
        assert_eq!(got.values().sum::<u32>(), 50);
    }
}
