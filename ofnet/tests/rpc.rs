//! The master↔agent RPC over real TCP: agents register with a master, their local endpoints
//! reach the other agents as remote endpoints (and go away with them), rules fan out to every
//! agent. No switch is needed: agents record flows until one connects.
#![allow(clippy::unwrap_used)]

mod common;

use common::init_tracing;
use ofnet::inspect::AgentExport;
use ofnet::rpc::RpcServer;
use ofnet::{
    AgentConfig, AgentHandle, BridgeKind, LocalEndpoint, MacAddr, MasterHandle, Network, Node,
    PolicyRule, RuleAction,
};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

async fn agent(ip: Ipv4Addr, vlan: u16) -> (AgentHandle, RpcServer, Node) {
    let mut config = AgentConfig::new(BridgeKind::Vxlan, "br0");
    config.local_ip = Some(ip);
    let agent = AgentHandle::start(config);
    let server = agent.serve_rpc((ip, 0).into()).await.unwrap();
    agent
        .add_network(Network {
            vlan,
            vni: 5000,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    let node = Node {
        host_addr: ip.to_string(),
        host_port: server.local_addr().port(),
    };
    (agent, server, node)
}

fn endpoint(last: u8, vlan: u16) -> LocalEndpoint {
    LocalEndpoint {
        port_no: u32::from(last),
        mac: MacAddr([2, 2, 10, 1, 1, last]),
        vlan,
        ipv4: Some(Ipv4Addr::new(10, 1, 1, last)),
        ipv6: None,
        epg: 0,
        epg_vlan: 0,
        dscp: 0,
        bandwidth: None,
    }
}

/// Wait until `check` holds for the agent's inspect output.
async fn eventually(agent: &AgentHandle, what: &str, check: impl Fn(&AgentExport) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let export = agent.inspect().await.unwrap();
        if check(&export) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {export:#?}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_rt::test]
async fn endpoints_and_rules_travel_through_the_master() {
    init_tracing();
    let master = MasterHandle::start("127.0.0.1:0".parse().unwrap(), None)
        .await
        .unwrap();
    let master_addr = master.local_addr();
    let (a, _a_rpc, a_node) = agent(Ipv4Addr::new(127, 0, 0, 1), 2).await;
    let (b, _b_rpc, b_node) = agent(Ipv4Addr::new(127, 0, 0, 2), 3).await;

    // A has an endpoint before it knows the master: registration announces it.
    a.add_local_endpoint(endpoint(2, 2)).await.unwrap();
    master.add_node(a_node).await.unwrap();
    master.add_node(b_node).await.unwrap();
    eventually(&b, "B learns A's endpoint at registration", |e| {
        e.endpoint_db.get("10.1.1.2:t1").is_some_and(|ep| {
            ep.originator_ip == Some(Ipv4Addr::new(127, 0, 0, 1)) && ep.port_no == 0
        })
    })
    .await;
    eventually(&a, "A lists its master", |e| e.master_db.len() == 1).await;

    // Later changes are relayed, and nobody gets its own endpoints back.
    b.add_local_endpoint(endpoint(3, 3)).await.unwrap();
    eventually(&a, "A learns B's new endpoint", |e| {
        e.endpoint_db.contains_key("10.1.1.3:t1")
    })
    .await;
    a.remove_local_endpoint(2).await.unwrap();
    eventually(&b, "B forgets A's removed endpoint", |e| {
        !e.endpoint_db.contains_key("10.1.1.2:t1")
    })
    .await;
    let m = master.inspect().await.unwrap();
    assert_eq!(m.agent_db.len(), 2);
    assert_eq!(m.endpoint_db.keys().collect::<Vec<_>>(), ["10.1.1.3:t1"]);
    assert_eq!(
        b.inspect().await.unwrap().stats.get("EndpointAddSent"),
        Some(&1)
    );

    // Rules reach every agent, and their removal too.
    let mut rule = PolicyRule::new("t1:web:in:1", 1, RuleAction::Deny);
    rule.dst_endpoint_group = 5;
    rule.ip_protocol = 6;
    master.add_rule(rule).await.unwrap();
    for (agent, name) in [(&a, "A"), (&b, "B")] {
        eventually(agent, &format!("{name} has the rule"), |e| {
            e.datapath.policy_agent.rules.contains_key("t1:web:in:1")
        })
        .await;
    }
    assert!(master.del_rule("t1:web:in:1").await.unwrap());
    for (agent, name) in [(&a, "A"), (&b, "B")] {
        eventually(agent, &format!("{name} dropped the rule"), |e| {
            e.datapath.policy_agent.rules.is_empty()
        })
        .await;
    }

    // The master restarts empty: each agent's next call re-registers it and re-announces its
    // endpoints first, and the master passes them on to the others.
    drop(master);
    actix_rt::time::sleep(Duration::from_millis(50)).await;
    let master = MasterHandle::start(master_addr, None).await.unwrap();
    a.add_local_endpoint(endpoint(4, 2)).await.unwrap();
    b.add_local_endpoint(endpoint(5, 3)).await.unwrap();
    eventually(&b, "B learns A's endpoint through the new master", |e| {
        e.endpoint_db.contains_key("10.1.1.4:t1")
    })
    .await;
    eventually(&a, "A learns B's endpoints through the new master", |e| {
        e.endpoint_db.contains_key("10.1.1.5:t1") && e.endpoint_db.contains_key("10.1.1.3:t1")
    })
    .await;
    let m = master.inspect().await.unwrap();
    assert_eq!(m.agent_db.len(), 2, "{m:#?}");
    assert_eq!(
        m.endpoint_db.keys().collect::<Vec<_>>(),
        ["10.1.1.3:t1", "10.1.1.4:t1", "10.1.1.5:t1"]
    );
}

/// A hand-written agent that answers `true` at once and counts `OfnetAgent.EndpointAdd`s.
async fn counting_agent() -> (u16, std::rc::Rc<std::cell::Cell<usize>>) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = std::rc::Rc::new(std::cell::Cell::new(0));
    let seen = count.clone();
    actix_rt::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            actix_rt::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let req: serde_json::Value = serde_json::from_str(&line).unwrap();
                    if req["method"] == "OfnetAgent.EndpointAdd" {
                        seen.set(seen.get() + 1);
                    }
                    let answer =
                        serde_json::json!({"id": req["id"], "result": true, "error": null});
                    let mut bytes = serde_json::to_vec(&answer).unwrap();
                    bytes.push(b'\n');
                    if write.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, count)
}

/// An agent that accepts the master's connection and never reads: its queue fills, it is
/// dropped and re-synced, and a healthy agent keeps getting every endpoint meanwhile.
#[actix_rt::test]
async fn an_agent_that_stops_reading_is_dropped_and_does_not_stall_the_others() {
    init_tracing();
    let master = MasterHandle::start("127.0.0.1:0".parse().unwrap(), None)
        .await
        .unwrap();
    // The stuck agent: accepts, holds the connections, never reads them.
    let stuck = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stuck_port = stuck.local_addr().unwrap().port();
    let _held = actix_rt::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = stuck.accept().await {
            held.push(s);
        }
    });
    let (healthy_port, healthy) = counting_agent().await;
    let origin = ofnet::rpc::Peer::new(master.local_addr());
    let stuck_node = Node {
        host_addr: "127.0.0.1".into(),
        host_port: stuck_port,
    };
    for port in [stuck_port, healthy_port] {
        let node = Node {
            host_addr: "127.0.0.1".into(),
            host_port: port,
        };
        let _: bool = origin
            .call("OfnetMaster.RegisterNode", &node)
            .await
            .unwrap();
    }
    // More endpoints than a peer's queue holds (the stuck agent's first call never gets an
    // answer, so nothing drains its queue).
    let total = ofnet::rpc::PEER_QUEUE + 200;
    for n in 0..total {
        let ip = format!("10.2.{}.{}", n / 250, n % 250 + 1);
        let ep = serde_json::json!({
            "EndpointID": format!("{ip}:t1"), "EndpointType": 2, "EndpointGroup": 0,
            "IpAddr": ip, "IpMask": "255.255.255.255", "Ipv6Addr": null, "Ipv6Mask": null,
            "Vrf": "t1", "MacAddrStr": "02:02:0a:02:00:01", "Vlan": 3, "Vni": 5000,
            "EndpointGroupVlan": 0, "OriginatorIp": "192.0.2.7", "OriginatorMac": "",
            "Timestamp": ""
        });
        let _: bool = origin.call("OfnetMaster.EndpointAdd", &ep).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = master.inspect().await.unwrap();
        let resyncs = m.agent_stats[&stuck_node.key()].resyncs;
        if resyncs >= 1 && healthy.get() == total {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "stuck agent resyncs {resyncs}, the healthy one got {} of {total}",
            healthy.get()
        );
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
}
