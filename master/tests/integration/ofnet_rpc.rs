//! netmaster's ofnet master on Contiv's wire, spoken by hand (JSON-RPC 1.0 lines over TCP, not
//! through `ofnet::rpc`): found through `netmaster.rpc` in the registry, agents register and
//! receive existing and new endpoints and the rules created through REST, bad input gets an
//! error answer on a connection that stays usable, `/debug/ofnet` shows the state, and a
//! follower runs no master. The master's endpoints follow etcd (REST-created endpoints reach
//! the agents, a host gone when the term started is withdrawn after the grace period) and only
//! registered netplugin hosts may connect.

use std::sync::Arc;
use std::time::Duration;

use master::model::{EndpointGroup, Policy, Rule};
use master::registry;
use master::registry::ServiceInfo;
use master::store::{EtcdStore, StateStore};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::common::*;

/// A hand-written agent: answers `true` to everything and reports `(method, argument)`.
async fn fake_agent() -> (u16, mpsc::UnboundedReceiver<(String, Value)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let req: Value = serde_json::from_str(&line).unwrap();
                    let method = req["method"].as_str().unwrap().to_string();
                    assert_eq!(req["params"].as_array().map(Vec::len), Some(1), "{line}");
                    let _ = tx.send((method, req["params"][0].clone()));
                    let answer = json!({"id": req["id"], "result": true, "error": null});
                    let mut bytes = serde_json::to_vec(&answer).unwrap();
                    bytes.push(b'\n');
                    if write.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, rx)
}

/// One hand-written connection to the master.
struct Conn {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    write: tokio::net::tcp::OwnedWriteHalf,
    id: u64,
}

impl Conn {
    async fn open(addr: &str) -> Conn {
        let (read, write) = TcpStream::connect(addr).await.unwrap().into_split();
        Conn {
            lines: BufReader::new(read).lines(),
            write,
            id: 0,
        }
    }

    async fn raw(&mut self, text: &str) -> Value {
        self.write.write_all(text.as_bytes()).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("an answer")
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    }

    async fn call(&mut self, method: &str, arg: Value) -> Value {
        self.id += 1;
        let text = json!({"method": method, "params": [arg], "id": self.id}).to_string();
        let answer = self.raw(&text).await;
        assert_eq!(answer["id"], self.id, "{answer}");
        answer
    }
}

fn endpoint(ip: &str, originator: &str) -> Value {
    json!({
        "EndpointID": format!("{ip}:default"), "EndpointType": 2, "EndpointGroup": 0,
        "IpAddr": ip, "IpMask": "255.255.255.255", "Ipv6Addr": null, "Ipv6Mask": null,
        "Vrf": "default", "MacAddrStr": "02:02:0a:01:01:05", "Vlan": 2, "Vni": 5000,
        "EndpointGroupVlan": 0, "OriginatorIp": originator, "OriginatorMac": "",
        "Timestamp": "2026-01-01T00:00:00.000000001Z"
    })
}

/// Wait for a call `method` on `agent` whose argument satisfies `check`.
async fn receives(
    agent: &mut mpsc::UnboundedReceiver<(String, Value)>,
    method: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let wait = async {
        loop {
            let (m, arg) = agent.recv().await.unwrap();
            if m == method && check(&arg) {
                return arg;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("{method} never arrived"))
}

/// Register `name` (`netplugin` or `netplugin.vtep`) for a host, as its netplugin does; the
/// registration lasts until the token is cancelled.
fn register_host(
    store: &Arc<dyn StateStore>,
    name: &str,
    addr: &str,
    port: u16,
    hostname: &str,
) -> tokio_util::sync::CancellationToken {
    let cancel = tokio_util::sync::CancellationToken::new();
    let info = ServiceInfo {
        ServiceName: name.into(),
        TTL: 3,
        HostAddr: addr.into(),
        Port: port,
        Hostname: hostname.into(),
        ..Default::default()
    };
    let _ = registry::register(store.clone(), info, cancel.clone());
    cancel
}

async fn rpc_address(store: &EtcdStore) -> Option<String> {
    let found = registry::list(store, registry::NETMASTER_RPC).await.ok()?;
    found.first().map(|i| format!("{}:{}", i.HostAddr, i.Port))
}

#[tokio::test]
async fn hand_written_agents_speak_jsonrpc_with_the_leaders_ofnet_master() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let netmaster = InProcess::start(&etcd.client_url(), 5).await;
    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();
    let rpc = eventually("netmaster.rpc registered", Duration::from_secs(10), || {
        rpc_address(&store)
    })
    .await;
    // The agents' host is a registered netplugin host (the master serves no one else).
    let shared: Arc<dyn StateStore> = Arc::new(store.clone());
    let _host = register_host(&shared, registry::NETPLUGIN, "127.0.0.1", 9002, "h1");
    let mut a = eventually("the agents' host admitted", Duration::from_secs(10), || {
        admitted(&rpc)
    })
    .await;

    // Agent A registers and announces an endpoint.
    let (port_a, mut agent_a) = fake_agent().await;
    let node_a = json!({"HostAddr": "127.0.0.1", "HostPort": port_a});
    let answer = a.call("OfnetMaster.RegisterNode", node_a).await;
    assert_eq!(answer, json!({"id": 1, "result": true, "error": null}));
    let ep_a = endpoint("10.1.1.5", "192.0.2.1");
    assert_eq!(
        a.call("OfnetMaster.EndpointAdd", ep_a.clone()).await["result"],
        true
    );

    // Bad input: an error answer naming the problem, and the connection stays usable.
    let bad = a.raw(r#"{"method":"OfnetMaster.EndpointAdd",nope}"#).await;
    assert!(
        bad["error"].as_str().unwrap().contains("malformed JSON"),
        "{bad}"
    );
    let bad = a.call("OfnetMaster.Nope", json!(1)).await;
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .contains("unknown method OfnetMaster.Nope"),
        "{bad}"
    );
    let bad = a
        .call("OfnetMaster.EndpointAdd", json!({"EndpointID": 5}))
        .await;
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .contains("bad params for OfnetMaster.EndpointAdd"),
        "{bad}"
    );
    assert_eq!(
        a.call("OfnetMaster.EndpointAdd", ep_a.clone()).await["error"],
        Value::Null
    );

    // Agent B registers: it receives the existing endpoint, then a new one.
    let (port_b, mut agent_b) = fake_agent().await;
    let mut b = Conn::open(&rpc).await;
    let node_b = json!({"HostAddr": "127.0.0.1", "HostPort": port_b});
    assert_eq!(
        b.call("OfnetMaster.RegisterNode", node_b).await["result"],
        true
    );
    let got = receives(&mut agent_b, "OfnetAgent.EndpointAdd", |e| {
        e["IpAddr"] == "10.1.1.5"
    })
    .await;
    assert_eq!(
        got, ep_a,
        "the endpoint arrives with the reference's field names"
    );
    let ep_new = endpoint("10.1.1.6", "192.0.2.1");
    a.call("OfnetMaster.EndpointAdd", ep_new).await;
    receives(&mut agent_b, "OfnetAgent.EndpointAdd", |e| {
        e["IpAddr"] == "10.1.1.6"
    })
    .await;

    // A rule created through REST reaches every agent as PolicyAgent.AddRule.
    let client = netmaster.client();
    client
        .post(&network("default", "n1", "10.1.1.0/24"))
        .await
        .unwrap();
    client
        .post(&Policy {
            policy_name: "p1".into(),
            tenant_name: "default".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    client
        .post(&Rule {
            key: "default:p1:r1".into(),
            rule_id: "r1".into(),
            tenant_name: "default".into(),
            policy_name: "p1".into(),
            direction: "in".into(),
            protocol: "tcp".into(),
            port: 8080,
            priority: 1,
            action: "deny".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    client
        .post(&EndpointGroup {
            group_name: "g1".into(),
            tenant_name: "default".into(),
            network_name: "n1".into(),
            policies: vec!["p1".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    for agent in [&mut agent_a, &mut agent_b] {
        let rule = receives(agent, "PolicyAgent.AddRule", |r| r["DstPort"] == 8080).await;
        assert_eq!(rule["Action"], "deny", "{rule}");
        assert_eq!(rule["IpProtocol"], 6, "{rule}");
    }

    // `/debug/ofnet`: agents, endpoints with their originator, rules.
    let (status, body) = testbed::demo::http(
        "GET",
        netmaster.url.trim_start_matches("http://"),
        "/debug/ofnet",
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let state: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(state["AgentDb"].as_object().unwrap().len(), 2, "{state}");
    assert_eq!(
        state["AgentDb"][format!("127.0.0.1:{port_a}")],
        json!({"HostAddr": "127.0.0.1", "HostPort": port_a})
    );
    assert_eq!(
        state["EndpointDb"]["10.1.1.5:default"]["OriginatorIp"],
        "192.0.2.1"
    );
    assert_eq!(state["EndpointDb"].as_object().unwrap().len(), 2, "{state}");
    assert!(
        !state["PolicyDb"].as_object().unwrap().is_empty(),
        "{state}"
    );
    assert!(state["AgentStats"][format!("127.0.0.1:{port_b}")]["LastHeard"].is_string());

    // An endpoint deleted by its agent is withdrawn from the others.
    a.call("OfnetMaster.EndpointDel", ep_a).await;
    receives(&mut agent_b, "OfnetAgent.EndpointDel", |e| {
        e["IpAddr"] == "10.1.1.5"
    })
    .await;
}

#[tokio::test]
async fn a_follower_runs_no_ofnet_master_and_proxies_debug_ofnet() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let leader = InProcess::start(&etcd.client_url(), 5).await;
    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();
    let rpc = eventually("netmaster.rpc registered", Duration::from_secs(10), || {
        rpc_address(&store)
    })
    .await;
    let follower = Subprocess::spawn(&etcd.client_url(), 5);
    eventually("the follower serves", Duration::from_secs(20), || async {
        let info = follower.client().info().await.ok()?;
        (info["current-state"] == "follower").then_some(())
    })
    .await;
    // Still exactly one master registered: the leader's.
    let masters = registry::list(&store, registry::NETMASTER_RPC)
        .await
        .unwrap();
    assert_eq!(masters.len(), 1, "{masters:?}");
    assert_eq!(format!("{}:{}", masters[0].HostAddr, masters[0].Port), rpc);
    let via_follower = testbed::demo::http("GET", &follower.addr, "/debug/ofnet").unwrap();
    let direct = testbed::demo::http(
        "GET",
        leader.url.trim_start_matches("http://"),
        "/debug/ofnet",
    )
    .unwrap();
    assert_eq!(via_follower.0, 200, "{}", via_follower.1);
    let (v, d): (Value, Value) = (
        serde_json::from_str(&via_follower.1).unwrap(),
        serde_json::from_str(&direct.1).unwrap(),
    );
    assert_eq!(v["MyPort"], d["MyPort"]);
}

/// A connection to the master that gets an answer (the host is admitted), else `None`.
async fn admitted(rpc: &str) -> Option<Conn> {
    let mut conn = Conn::open(rpc).await;
    let probe = json!({"method": "OfnetMaster.Probe", "params": [1], "id": 0}).to_string();
    conn.write.write_all(probe.as_bytes()).await.ok()?;
    conn.write.write_all(b"\n").await.ok()?;
    let line = tokio::time::timeout(Duration::from_secs(2), conn.lines.next_line())
        .await
        .ok()?
        .ok()??;
    line.contains("unknown method").then_some(conn)
}

/// Connect to `rpc` from the local address `from`.
async fn connect_from(from: &str, rpc: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(rpc.parse().unwrap()).await.unwrap()
}

/// Only hosts registered as `netplugin`/`netplugin.vtep` may speak to the master: with only
/// 127.0.0.1 registered, a connection from 127.0.0.2 is closed unanswered; once 127.0.0.2
/// registers, it is served; the master listens on the control address, not every address.
#[tokio::test]
async fn only_registered_netplugin_hosts_may_connect_to_the_master() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let netmaster = InProcess::start(&etcd.client_url(), 5).await;
    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();
    let rpc = eventually("netmaster.rpc registered", Duration::from_secs(10), || {
        rpc_address(&store)
    })
    .await;
    assert!(rpc.starts_with("127.0.0.1:"), "{rpc}");
    let shared: Arc<dyn StateStore> = Arc::new(store.clone());
    let _one = register_host(&shared, registry::NETPLUGIN_VTEP, "127.0.0.1", 4789, "h1");
    eventually("127.0.0.1 admitted", Duration::from_secs(10), || {
        admitted(&rpc)
    })
    .await;

    let request = json!({"method": "OfnetMaster.RegisterNode",
        "params": [{"HostAddr": "127.0.0.2", "HostPort": 9002}], "id": 1});
    let mut stranger = connect_from("127.0.0.2", &rpc).await;
    let _ = stranger.write_all(format!("{request}\n").as_bytes()).await;
    let mut answer = String::new();
    let read = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read_to_string(&mut stranger, &mut answer),
    )
    .await
    .expect("the master closes a stranger's connection");
    assert!(
        answer.is_empty(),
        "a stranger was answered: {answer} ({read:?})"
    );
    // It did not register either.
    let state = master_state(&netmaster.url);
    assert_eq!(
        state["AgentDb"].as_object().map(|a| a.len()),
        Some(0),
        "{state}"
    );
    // The master is not reachable on other local addresses than its control address.
    let port = rpc.rsplit_once(':').unwrap().1;
    assert!(
        TcpStream::connect(format!("127.0.0.2:{port}"))
            .await
            .is_err(),
        "the master listens beyond its control address"
    );

    // Registered, the same address is served.
    let _two = register_host(&shared, registry::NETPLUGIN, "127.0.0.2", 9002, "h2");
    eventually("127.0.0.2 admitted", Duration::from_secs(10), || async {
        let mut conn = connect_from("127.0.0.2", &rpc).await;
        conn.write_all(format!("{request}\n").as_bytes())
            .await
            .ok()?;
        let mut line = String::new();
        let mut reader = BufReader::new(conn);
        tokio::time::timeout(Duration::from_secs(2), reader.read_line(&mut line))
            .await
            .ok()?
            .ok()?;
        line.contains("\"result\":true").then_some(())
    })
    .await;
}

fn master_state(url: &str) -> Value {
    let (status, body) =
        testbed::demo::http("GET", url.trim_start_matches("http://"), "/debug/ofnet").unwrap();
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The master's endpoints follow etcd: an endpoint created through REST (`/plugin/createEndpoint`
/// on a registered host) reaches the agents of the other hosts with its host's VTEP as
/// originator, never its own host's agent; the same endpoint announced by its agent is not
/// relayed again; deleted through REST it is withdrawn. An endpoint record of a host that has
/// no registration (gone before this master started) is withdrawn after the grace period.
#[tokio::test]
async fn endpoints_follow_etcd_and_a_departed_hosts_are_withdrawn_after_the_grace() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();
    let shared: Arc<dyn StateStore> = Arc::new(store.clone());
    let mut cfg = config(&etcd.client_url(), testbed::free_port().unwrap(), 5);
    cfg.ofnet_grace = Duration::from_secs(3);
    let netmaster = InProcess::start_with(cfg).await;
    let client = netmaster.client();
    client
        .post(&network("default", "wide", "10.7.0.0/24"))
        .await
        .unwrap();
    let net_key = master::state::CfgNetworkState::key_for("wide.default");
    let net: master::state::CfgNetworkState =
        serde_json::from_slice(&store.get(&net_key).await.unwrap().unwrap().value).unwrap();
    // A record of a host that is gone: no registration.
    let gone = json!({"id": "wide.default-old", "netID": "wide.default", "ipAddress": "10.7.0.200",
        "macAddress": "02:02:0a:07:00:c8", "homingHost": "gone", "vtepIP": "192.0.2.9"});
    store
        .put(
            "/contiv.io/oper/eps/wide.default-old",
            gone.to_string().into_bytes(),
        )
        .await
        .unwrap();
    let rpc = eventually("netmaster.rpc registered", Duration::from_secs(10), || {
        rpc_address(&store)
    })
    .await;
    let _h1 = register_host(&shared, registry::NETPLUGIN_VTEP, "192.0.2.1", 4789, "h1");
    let _h2 = register_host(&shared, registry::NETPLUGIN_VTEP, "127.0.0.1", 4789, "h2");
    let mut conn = eventually("the agents' host admitted", Duration::from_secs(10), || {
        admitted(&rpc)
    })
    .await;
    let (port_b, mut agent_b) = fake_agent().await;
    let node_b = json!({"HostAddr": "127.0.0.1", "HostPort": port_b});
    assert_eq!(
        conn.call("OfnetMaster.RegisterNode", node_b).await["result"],
        true
    );
    // The departed host's endpoint was known (from etcd) and is withdrawn after the grace.
    let old = receives(&mut agent_b, "OfnetAgent.EndpointAdd", |e| {
        e["IpAddr"] == "10.7.0.200"
    })
    .await;
    assert_eq!(old["OriginatorIp"], "192.0.2.9", "{old}");
    let withdrawn = receives(&mut agent_b, "OfnetAgent.EndpointDel", |e| {
        e["IpAddr"] == "10.7.0.200"
    })
    .await;
    assert_eq!(withdrawn["OriginatorIp"], "192.0.2.9");
    let state = master_state(&netmaster.url);
    assert!(
        state["EndpointDb"].get("10.7.0.200:default").is_none(),
        "{state}"
    );

    // Through REST, on host h1 (VTEP 192.0.2.1).
    let mut req = endpoint_request("wide", "c1");
    req.ConfigEP.Host = "h1".into();
    let created = client.create_endpoint(&req).await.unwrap();
    let ep = receives(&mut agent_b, "OfnetAgent.EndpointAdd", |e| {
        e["IpAddr"] == created.ip_address.as_str()
    })
    .await;
    assert_eq!(ep["OriginatorIp"], "192.0.2.1", "{ep}");
    assert_eq!(ep["Vni"], net.ext_pkt_tag, "{ep}");
    assert_eq!(ep["Vlan"], net.pkt_tag, "{ep}");
    assert_eq!(ep["MacAddrStr"], created.mac_address.as_str(), "{ep}");
    assert_eq!(ep["EndpointID"], format!("{}:default", created.ip_address));
    // Its agent announces the same endpoint: one endpoint, nothing relayed again.
    let mut announced = ep.clone();
    announced["Timestamp"] = json!("2026-01-01T00:00:00.000000001Z");
    assert_eq!(
        conn.call("OfnetMaster.EndpointAdd", announced).await["result"],
        true
    );
    let mut req2 = endpoint_request("wide", "c2");
    req2.ConfigEP.Host = "h1".into();
    let second = client.create_endpoint(&req2).await.unwrap();
    let next = receives(&mut agent_b, "OfnetAgent.EndpointAdd", |_| true).await;
    assert_eq!(
        next["IpAddr"],
        second.ip_address.as_str(),
        "relayed twice: {next}"
    );
    let state = master_state(&netmaster.url);
    assert_eq!(
        state["EndpointDb"][format!("{}:default", created.ip_address)]["OriginatorIp"],
        "192.0.2.1",
        "{state}"
    );

    // Deleted through REST: withdrawn.
    client
        .delete_endpoint(&master::endpoint::DeleteEndpointRequest {
            TenantName: "default".into(),
            NetworkName: "wide".into(),
            EndpointID: "c1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    receives(&mut agent_b, "OfnetAgent.EndpointDel", |e| {
        e["IpAddr"] == created.ip_address.as_str()
    })
    .await;
}
