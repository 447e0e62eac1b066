//! Policy rules on a real VLAN bridge, with TCP connections (`nc`) between pods: a server
//! group denying new TCP connections except to port 8000, rules added and removed at run time,
//! and rules narrowed to a source group or a source CIDR.
#![allow(clippy::unwrap_used)]

mod common;

use common::{TcpServer, init_tracing, ofport, settle, tcp_connects};
use ofnet::{AgentHandle, LocalEndpoint, MacAddr, Network, PolicyRule, RuleAction};
use std::net::Ipv4Addr;
use testbed::{Ovs, Pod, PodOptions};

const SERVER_EPG: u16 = 5;

fn tcp_rule(id: &str, priority: u16, action: RuleAction) -> PolicyRule {
    let mut r = PolicyRule::new(id, priority, action);
    r.dst_endpoint_group = SERVER_EPG;
    r.ip_protocol = 6;
    r
}

/// The reference's `in` rule for a TCP port: the inbound half toward the group...
fn allow_port(id: &str, port: u16) -> PolicyRule {
    let mut r = tcp_rule(id, 100, RuleAction::Allow);
    r.dst_port = port;
    r
}

async fn attach(ovs: &Ovs, agent: &AgentHandle, last: u8, epg: u16) -> Pod {
    let mac = MacAddr([2, 2, 10, 1, 1, last]);
    let pod = Pod::attach(
        ovs,
        "br0",
        &PodOptions {
            ip: format!("10.1.1.{last}/24"),
            mac: Some(mac.to_string()),
            gateway: None,
            vlan: Some(10),
        },
    )
    .unwrap();
    common::disable_tx_offload(&pod);
    agent
        .add_local_endpoint(LocalEndpoint {
            port_no: ofport(ovs, pod.port_name()).await,
            mac,
            vlan: 10,
            ipv4: Some(Ipv4Addr::new(10, 1, 1, last)),
            ipv6: None,
            epg,
            epg_vlan: 0,
            dscp: 0,
            bandwidth: None,
        })
        .await
        .unwrap();
    pod
}

#[actix_rt::test]
async fn deny_tcp_allow_8000_rules_open_and_close_ports_and_narrow_sources() {
    testbed::require!(Root, Ovs, Netcat);
    if common::missing_tool(module_path!(), "ethtool", "ethtool") {
        return;
    }
    init_tracing();
    let h = common::Host::vlan().await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    agent
        .add_network(Network {
            vlan: 10,
            vni: 0,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    let server = attach(ovs, agent, 10, SERVER_EPG).await;
    let c1 = attach(ovs, agent, 11, 7).await;
    let c2 = attach(ovs, agent, 12, 8).await;
    let _s8000 = TcpServer::start(server.netns().name(), 8000);
    let _s8001 = TcpServer::start(server.netns().name(), 8001);
    let (c1, c2) = (c1.netns().name(), c2.netns().name());
    let srv = "10.1.1.10";

    // Default allow.
    assert!(
        tcp_connects(c1, srv, 8001).await,
        "no rules: everything open"
    );

    let mut deny = tcp_rule("deny-tcp", 1, RuleAction::Deny);
    deny.tcp_flags = "syn,!ack".into();
    agent.add_rule(deny).await.unwrap();
    settle(ovs);
    agent
        .add_rule(allow_port("allow-8000", 8000))
        .await
        .unwrap();
    settle(ovs);
    assert!(tcp_connects(c1, srv, 8000).await, "8000 allowed");
    assert!(!tcp_connects(c1, srv, 8001).await, "8001 denied");

    agent
        .add_rule(allow_port("allow-8001", 8001))
        .await
        .unwrap();
    settle(ovs);
    assert!(tcp_connects(c1, srv, 8001).await, "allow-8001 opens 8001");
    agent.remove_rule("allow-8001").await.unwrap();
    settle(ovs);
    assert!(
        !tcp_connects(c1, srv, 8001).await,
        "removing allow-8001 closes it again"
    );

    // Only group 7 may reach 8000.
    agent.remove_rule("allow-8000").await.unwrap();
    settle(ovs);
    let mut from_group = allow_port("allow-8000-from-7", 8000);
    from_group.src_endpoint_group = 7;
    agent.add_rule(from_group).await.unwrap();
    settle(ovs);
    assert!(tcp_connects(c1, srv, 8000).await, "group 7 admitted");
    assert!(!tcp_connects(c2, srv, 8000).await, "group 8 refused");

    // Only 10.1.1.12/32 may reach 8000.
    agent.remove_rule("allow-8000-from-7").await.unwrap();
    settle(ovs);
    let mut from_cidr = allow_port("allow-8000-from-cidr", 8000);
    from_cidr.src_ip_addr = "10.1.1.12/32".into();
    agent.add_rule(from_cidr).await.unwrap();
    settle(ovs);
    assert!(tcp_connects(c2, srv, 8000).await, "10.1.1.12 admitted");
    assert!(!tcp_connects(c1, srv, 8000).await, "10.1.1.11 refused");

    // The rules are in the inspect output; a different rule under an existing id is refused.
    let export = agent.inspect().await.unwrap();
    let ids: Vec<&String> = export.datapath.policy_agent.rules.keys().collect();
    assert_eq!(ids, ["allow-8000-from-cidr", "deny-tcp"]);
    let err = agent.add_rule(allow_port("deny-tcp", 9)).await.unwrap_err();
    assert!(matches!(err, ofnet::AgentError::RuleExists(_)), "{err}");
}

/// Contiv rules are stateful: the replies of a connection a rule allowed pass without a
/// mirrored rule, and a deny rule on the way back only stops connections the other side opens.
#[actix_rt::test]
async fn replies_pass_without_mirrored_rules() {
    testbed::require!(Root, Ovs, Netcat);
    if common::missing_tool(module_path!(), "ethtool", "ethtool") {
        return;
    }
    init_tracing();
    let h = common::Host::vlan().await;
    let (ovs, agent) = (&h.ovs, &h.agent);
    agent
        .add_network(Network {
            vlan: 10,
            vni: 0,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    let server = attach(ovs, agent, 10, SERVER_EPG).await;
    let client = attach(ovs, agent, 11, 7).await;
    let _s = TcpServer::start(server.netns().name(), 8000);
    let _c = TcpServer::start(client.netns().name(), 9000);
    // The server's group may send no TCP at all (no flags: every segment, SYN-ACKs too).
    let mut deny_out = PolicyRule::new("deny-out", 1, RuleAction::Deny);
    deny_out.src_endpoint_group = SERVER_EPG;
    deny_out.ip_protocol = 6;
    agent.add_rule(deny_out).await.unwrap();
    settle(ovs);
    let (srv, cli) = (server.netns().name(), client.netns().name());
    assert!(
        tcp_connects(cli, "10.1.1.10", 8000).await,
        "the server's replies pass: the connection is tracked"
    );
    assert!(
        !tcp_connects(srv, "10.1.1.11", 9000).await,
        "the server's own new connections are denied"
    );
    // The reply bypass is in table 5, above every rule.
    let flows = common::dumped_flows(ovs, "br0").await;
    assert!(
        flows
            .iter()
            .any(|f| f.starts_with("table=5, priority=65535,ct_state=+est+rpl+trk")),
        "{flows:#?}"
    );
}
