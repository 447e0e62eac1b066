//! netplugin with authentication on (real etcd, netmaster with --token-file, OVS, libcni):
//! a pod ADD works because netplugin sends its token to `/plugin/*`; the CNI socket is root-only;
//! the debug listener serves reads to anyone and reclaims an endpoint only for an admin token;
//! garbage on the CNI socket and the debug listener changes nothing and crashes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::*;
use testbed::demo::{
    AUTH_ADMIN_TOKEN, AUTH_PLUGIN_TOKEN, Cluster, ClusterOptions, http, http_auth,
};

/// Send `bytes` on a unix socket, close our side, and read what comes back.
fn unix_exchange(path: &std::path::Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn tcp_exchange(addr: &str, bytes: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn pod_add_with_tokens_on_and_the_debug_listener_guards_reclaim() {
    testbed::require!(Root, Ovs, Etcd, Ip, Ping);
    let mut c = Cluster::start_with(
        binaries(),
        ClusterOptions {
            auth: true,
            ..ClusterOptions::default()
        },
    )
    .expect("starting the cluster with tokens on");
    // netmaster refuses callers without a token (so what follows used them).
    let (status, body) = http(
        "GET",
        c.netmaster_url.trim_start_matches("http://"),
        "/api/v1/networks/",
    )
    .unwrap();
    assert_eq!(status, 401, "{body}");
    create_network(&c, "authnet", "vxlan", "10.61.0.0/24", "10.61.0.1");
    let conf = c.conflist("auth", "authnet", "").unwrap();
    // The ADD allocates an address and creates the endpoint through /plugin/* with
    // netplugin's token.
    let a = c.add_pod(&conf).unwrap();
    let b = c.add_pod(&conf).unwrap();
    assert!(reaches(&a, &b.ip));

    // The CNI socket is root's only.
    let mode = std::fs::metadata(&c.cni_socket)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "CNI socket mode {mode:o}");

    // Debug reads are open; reclaim needs the admin token.
    let eps = local_endpoints(&c);
    let (id, _) = eps
        .iter()
        .find(|(_, e)| e["oper"]["containerId"] == a.container_id.as_str())
        .expect("pod a's endpoint");
    let reclaim = format!("/debug/reclaimEndpoint/{id}");
    let (status, body) = http("DELETE", &c.debug_addr, &reclaim).unwrap();
    assert_eq!(status, 401, "{body}");
    assert!(
        body.contains("--debug-token-file") && body.contains("none was sent"),
        "{body}"
    );
    let (status, body) =
        http_auth("DELETE", &c.debug_addr, &reclaim, Some(AUTH_PLUGIN_TOKEN)).unwrap();
    assert_eq!(
        status, 401,
        "netmaster's plugin token is not a debug token: {body}"
    );
    let (status, body) = http("POST", &c.debug_addr, "/inspect/driver").unwrap();
    assert_eq!(status, 401, "{body}");
    assert!(
        local_endpoints(&c).contains_key(id),
        "a refused reclaim removed the endpoint"
    );
    assert!(reaches(&a, &b.ip), "a refused reclaim broke the pod");
    let (status, body) =
        http_auth("DELETE", &c.debug_addr, &reclaim, Some(AUTH_ADMIN_TOKEN)).unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(!local_endpoints(&c).contains_key(id));

    // Garbage and truncated requests on the CNI socket and the debug listener: refused,
    // nothing created, the daemon still serves.
    let before = local_endpoints(&c).len();
    let mut noise = Vec::new();
    let mut x: u32 = 0x2545_f491;
    for _ in 0..8192 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise.push(x as u8);
    }
    let add = br#"{"args":{"K8S_POD_NAMESPACE":"default","K8S_POD_NAME":"x""#;
    let cases: Vec<Vec<u8>> = vec![
        noise.clone(),
        b"POST /ContivCNI.AddPod HTTP/1.1\r\nContent-Len".to_vec(),
        [
            b"POST /ContivCNI.AddPod HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n".to_vec(),
            add.to_vec(),
        ]
        .concat(),
        [
            format!("POST /ContivCNI.AddPod HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", add.len()).into_bytes(),
            add.to_vec(),
        ]
        .concat(),
        b"POST /ContivCNI.AddPod HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n".to_vec(),
        b"POST /ContivCNI.AddPod HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n".to_vec(),
    ];
    for case in &cases {
        let reply = unix_exchange(&c.cni_socket, case);
        assert!(
            reply.is_empty() || reply.starts_with("HTTP/1.1 4"),
            "CNI socket answered garbage with {reply:.300}"
        );
        let reply = tcp_exchange(&c.debug_addr, case);
        assert!(
            reply.is_empty() || reply.starts_with("HTTP/1.1 4"),
            "debug listener answered garbage with {reply:.300}"
        );
    }
    assert_eq!(
        local_endpoints(&c).len(),
        before,
        "garbage created an endpoint"
    );
    let (_, pid) = c.pids();
    assert!(
        pid.is_some_and(testbed::pid_alive),
        "netplugin died on garbage"
    );
    let d = c.add_pod(&conf).unwrap();
    assert!(reaches(&d, &b.ip));
    assert!(
        c.netplugin_log().contains("malformed request refused"),
        "garbage was not logged"
    );
    let lines = c
        .netplugin_log()
        .matches("malformed request refused")
        .count();
    assert!(
        lines <= 2,
        "garbage logged {lines} times; one per peer per minute expected"
    );
    c.del_pod(&d).unwrap();
    c.del_pod(&b).unwrap();
    c.stop_netplugin();
}

/// A JSON-RPC call to the agent's port from `from` (a loopback source address): the answer
/// line, or `None` when the connection was closed unanswered.
fn agent_call_from(from: &str, agent: std::net::SocketAddr) -> Option<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        let mut stream = socket.connect(agent).await.unwrap();
        let request = r#"{"method":"OfnetAgent.NoSuchMethod","params":[{}],"id":1}"#;
        let _ = stream.write_all(request.as_bytes()).await;
        let mut buf = vec![0u8; 4096];
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await;
        match read {
            Ok(Ok(n)) if n > 0 => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
            _ => None,
        }
    })
}

/// The agent's RPC port serves only ofnet masters: a connection from 127.0.0.2 (no
/// `netmaster.rpc` registered there) is closed unanswered and logged; the master's address
/// (127.0.0.1 in the testbed) gets answers, an error for an unknown method included.
#[test]
fn the_agent_rpc_port_serves_only_registered_ofnet_masters() {
    testbed::require!(Root, Ovs, Etcd, Ip);
    let c = cluster();
    let (status, body) = http("GET", &c.debug_addr, "/inspect/driver").unwrap();
    assert_eq!(status, 200, "{body}");
    let driver: serde_json::Value = serde_json::from_str(&body).unwrap();
    let port = u16::try_from(driver["vxlan"]["MyPort"].as_u64().unwrap()).unwrap();
    let agent: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();

    assert_eq!(
        agent_call_from("127.0.0.2", agent),
        None,
        "an address with no ofnet master got an answer"
    );
    let answer = agent_call_from("127.0.0.1", agent).expect("the master's address is served");
    assert!(answer.contains("NoSuchMethod"), "{answer}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !c
        .netplugin_log()
        .contains("ofnet agent RPC connection refused")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the refusal was not logged:\n{}",
            c.netplugin_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Logged once a minute per address, not once per connection.
    assert_eq!(agent_call_from("127.0.0.2", agent), None);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        c.netplugin_log()
            .matches("ofnet agent RPC connection refused")
            .count(),
        1
    );
}
