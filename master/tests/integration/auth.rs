//! netmaster's REST API with TLS and bearer tokens (the real binaries): who is refused with which
//! body, what each role may do, netctl's --token/--cacert, a follower proxying with the caller's
//! credentials to a TLS leader, bad files at start, and garbage on the listener.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use master::client::{Client, ClientError};
use master::model::Tenant;

use crate::common::eventually;

const ADMIN: &str = "admin-token-5f0c8e1a9b2d";
const READ: &str = "read-token-77a1c3e5f902";
const PLUGIN: &str = "plugin-token-0d9e8f7a6b5c";

struct Pki {
    _dir: tempfile::TempDir,
    tls: testbed::EtcdTls,
    tokens: PathBuf,
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let tls = testbed::EtcdTls::generate(dir.path()).unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("# role per token\n{ADMIN} admin\n{READ} read\n{PLUGIN} plugin\n"),
    )
    .unwrap();
    Pki {
        _dir: dir,
        tls,
        tokens,
    }
}

/// A netmaster process; killed on drop.
struct Netmaster {
    addr: String,
    child: Child,
}

impl Drop for Netmaster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(etcd: &str, extra: &[&str]) -> Netmaster {
    let port = testbed::free_port().unwrap();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_netmaster"))
        .args(["--mode", "test", "--netmode", "vlan", "--fwdmode", "bridge"])
        .args([
            "--etcd",
            etcd,
            "--listen-url",
            &addr,
            "--control-url",
            &addr,
        ])
        .args(["--lock-ttl", "3", "--ofnet-port", "0"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Netmaster { addr, child }
}

fn tls_args(p: &Pki) -> Vec<String> {
    vec![
        "--tls-cert".into(),
        p.tls.server_cert().display().to_string(),
        "--tls-key".into(),
        p.tls.server_key().display().to_string(),
        "--tls-cacert".into(),
        p.tls.ca.display().to_string(),
    ]
}

fn client(url: &str, token: Option<&str>, ca: Option<&Path>) -> Client {
    Client::with_auth(url, token, ca).unwrap()
}

async fn wait_leader(c: &Client) {
    eventually("netmaster leads", Duration::from_secs(20), || async {
        let info = c.info().await.ok()?;
        (info["current-state"] == "leader" && c.get::<Tenant>("default").await.is_ok())
            .then_some(())
    })
    .await;
}

fn netctl(url: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_netctl"));
    cmd.args(["--netmaster", url]).args(args);
    cmd.env_remove("NETCTL_TOKEN").env_remove("NETCTL_CACERT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn api_error(e: ClientError) -> (u16, String) {
    match e {
        ClientError::Api { status, message } => (status, message),
        other => panic!("expected an API refusal, got {other}"),
    }
}

#[tokio::test]
async fn tokens_refuse_strangers_and_roles_limit_writes_over_tls() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let p = pki();
    let mut args = tls_args(&p);
    args.extend(["--token-file".into(), p.tokens.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let nm = spawn(&etcd.client_url(), &args);
    let url = format!("https://{}", nm.addr);
    let ca = p.tls.ca.as_path();
    let admin = client(&url, Some(ADMIN), Some(ca));
    wait_leader(&admin).await;

    // No token, an unknown token: 401 saying what is missing.
    let (status, body) = api_error(client(&url, None, Some(ca)).info().await.unwrap_err());
    assert_eq!(status, 401);
    assert!(
        body.contains("no bearer token") && body.contains("--token"),
        "{body}"
    );
    let (status, body) = api_error(
        client(&url, Some("not-a-token-0123456789"), Some(ca))
            .list::<Tenant>()
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 401);
    assert!(body.contains("unknown token"), "{body}");

    // read may GET but not POST or DELETE (403 naming the role); admin may.
    let reader = client(&url, Some(READ), Some(ca));
    assert!(reader.get::<Tenant>("default").await.is_ok());
    let (status, body) = api_error(reader.post(&Tenant::named("blue")).await.unwrap_err());
    assert_eq!(status, 403);
    assert!(
        body.contains("role is read") && body.contains("needs an admin token"),
        "{body}"
    );
    let (status, _) = api_error(reader.delete::<Tenant>("default").await.unwrap_err());
    assert_eq!(status, 403);
    assert!(
        reader.get::<Tenant>("blue").await.is_err(),
        "a refused write left a tenant"
    );
    admin.post(&Tenant::named("blue")).await.unwrap();
    assert!(reader.get::<Tenant>("blue").await.is_ok());
    // netplugin's role: /plugin/* yes, objects no.
    let plugin = client(&url, Some(PLUGIN), Some(ca));
    let (status, _) = api_error(plugin.post(&Tenant::named("red")).await.unwrap_err());
    assert_eq!(status, 403);

    // netctl: --cacert and --token (Go spelling too), $NETCTL_TOKEN, and refusals.
    let ca_text = ca.display().to_string();
    let (code, _, err) = netctl(
        &url,
        &["--cacert", &ca_text, "tenant", "create", "green"],
        &[],
    );
    assert_eq!(code, 3, "no token: refused by the server: {err}");
    assert!(err.contains("no bearer token"), "{err}");
    let (code, _, err) = netctl(
        &url,
        &[
            "-cacert", &ca_text, "-token", ADMIN, "tenant", "create", "green",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = netctl(
        &url,
        &["tenant", "ls"],
        &[("NETCTL_TOKEN", READ), ("NETCTL_CACERT", &ca_text)],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("green") && out.contains("blue"), "{out}");
    let (code, _, err) = netctl(
        &url,
        &["--cacert", &ca_text, "tenant", "rm", "green"],
        &[("NETCTL_TOKEN", READ)],
    );
    assert_eq!(code, 3);
    assert!(err.contains("role is read"), "{err}");
    // A CA that did not sign the server's certificate: the connection is refused.
    let wrong = p.tls.wrong_ca.display().to_string();
    let (code, _, err) = netctl(
        &url,
        &["--cacert", &wrong, "--token", ADMIN, "tenant", "ls"],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    // https without any CA: told to give one.
    let (code, _, err) = netctl(&url, &["--token", ADMIN, "tenant", "ls"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--cacert"), "{err}");
    // Plain HTTP to the TLS port gets no API answer.
    let plain = client(&format!("http://{}", nm.addr), Some(ADMIN), None);
    assert!(plain.info().await.is_err());
}

#[tokio::test]
async fn follower_proxies_with_the_callers_token_to_a_tls_leader() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let p = pki();
    let mut leader_args = tls_args(&p);
    leader_args.extend(["--token-file".into(), p.tokens.display().to_string()]);
    let leader_args: Vec<&str> = leader_args.iter().map(String::as_str).collect();
    let leader = spawn(&etcd.client_url(), &leader_args);
    let ca = p.tls.ca.as_path();
    let leader_url = format!("https://{}", leader.addr);
    wait_leader(&client(&leader_url, Some(ADMIN), Some(ca))).await;
    // The follower has no token file of its own: whatever is refused, the leader refused, so
    // what is accepted proves the caller's token went along.
    let follower_args = tls_args(&p);
    let follower_args: Vec<&str> = follower_args.iter().map(String::as_str).collect();
    let follower = spawn(&etcd.client_url(), &follower_args);
    let url = format!("https://{}", follower.addr);
    let probe = client(&url, Some(READ), Some(ca));
    eventually(
        "the follower knows the leader",
        Duration::from_secs(20),
        || async {
            let info = probe.info().await.ok()?;
            (info["current-state"] == "follower").then_some(())
        },
    )
    .await;

    let (status, body) = api_error(
        client(&url, None, Some(ca))
            .post(&Tenant::named("via-follower"))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("no bearer token"), "{body}");
    let (status, body) = api_error(
        client(&url, Some(READ), Some(ca))
            .post(&Tenant::named("via-follower"))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 403, "{body}");
    client(&url, Some(ADMIN), Some(ca))
        .post(&Tenant::named("via-follower"))
        .await
        .unwrap();
    let stored = client(&leader_url, Some(READ), Some(ca))
        .get::<Tenant>("via-follower")
        .await
        .unwrap();
    assert_eq!(stored.tenant_name, "via-follower");
}

#[test]
fn unusable_security_files_stop_netmaster_at_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "-----BEGIN NOTHING-----\n").unwrap();
    let bad_tokens = dir.path().join("tokens");
    std::fs::write(&bad_tokens, "admin-token-5f0c8e1a9b2d superuser\n").unwrap();
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_netmaster"));
        cmd.args(["--mode", "test", "--netmode", "vlan", "--fwdmode", "bridge"])
            // Nothing listens there: the files must be refused before etcd is tried.
            .args([
                "--etcd",
                "http://127.0.0.1:1",
                "--listen-url",
                "127.0.0.1:0",
            ])
            .args(extra);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--token-file", "/nonexistent/contiv-tokens"], &[]);
    assert_eq!(code, 22, "{err}");
    assert!(
        err.contains("--token-file /nonexistent/contiv-tokens: cannot read"),
        "{err}"
    );
    let (code, err) = run(
        &[],
        &[("CONTIV_NETMASTER_TOKEN_FILE", bad_tokens.to_str().unwrap())],
    );
    assert_eq!(code, 22, "{err}");
    assert!(err.contains("unknown role \"superuser\""), "{err}");
    let junk = junk.display().to_string();
    let (code, err) = run(&["--tls-cert", &junk, "--tls-key", &junk], &[]);
    assert_eq!(code, 22, "{err}");
    assert!(err.contains(&format!("--tls-cert {junk}")), "{err}");
    let (code, err) = run(&["--tls-key", &junk], &[]);
    assert_eq!(code, 22, "{err}");
    assert!(err.contains("--tls-key needs --tls-cert"), "{err}");
}

/// Write `bytes` to the listener and return whatever comes back before it closes (or 2 s).
fn raw_exchange(addr: &str, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn garbage_on_the_rest_listener_is_refused_and_changes_nothing() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let p = pki();
    let nm = spawn(
        &etcd.client_url(),
        &["--token-file", p.tokens.to_str().unwrap()],
    );
    let url = format!("http://{}", nm.addr);
    let admin = client(&url, Some(ADMIN), None);
    wait_leader(&admin).await;
    let before = admin.list::<Tenant>().await.unwrap().len();

    let mut noise = Vec::new();
    let mut x: u32 = 0x9e37_79b9;
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise.push(x as u8);
    }
    let auth = format!("Authorization: Bearer {ADMIN}\r\n");
    let cases: Vec<Vec<u8>> = vec![
        noise.clone(),
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
        b"POST /api/v1/tenants/t1/ HTTP/1.1\r\nContent-Le".to_vec(),
        format!(
            "POST /api/v1/tenants/t2/ HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{{\"tenantName\":\"t2\""
        )
        .into_bytes(),
        format!(
            "POST /api/v1/tenants/t3/ HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: 9\r\n\r\n{{garbage}}"
        )
        .into_bytes(),
        format!("GET /api/v1/tenants/ HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(100_000)).into_bytes(),
        b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n".to_vec(),
    ];
    for case in &cases {
        let reply = raw_exchange(&nm.addr, case);
        assert!(
            reply.is_empty() || reply.starts_with("HTTP/1.1 4"),
            "garbage got {reply:.200}"
        );
    }
    // Still serving, and nothing was created.
    assert!(admin.info().await.is_ok());
    let tenants = admin.list::<Tenant>().await.unwrap();
    assert_eq!(tenants.len(), before, "{tenants:?}");
    assert!(nm_alive(&nm));
}

fn nm_alive(nm: &Netmaster) -> bool {
    testbed::pid_alive(nm.child.id())
}
