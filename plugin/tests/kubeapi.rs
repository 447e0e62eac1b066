//! The Kubernetes label lookup (the `kube` client on our TLS stack) against a handcrafted API
//! server on 127.0.0.1 (a real Kubernetes API server cannot run here): a real HTTP
//! connection, the pod JSON an API server returns, the bearer token checked, 404 for unknown
//! pods.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cni::api::{LABEL_GROUP, LABEL_NETWORK, LABEL_TENANT, PodNetwork, PodRequest};
use plugin::PluginError;
use plugin::cniserver::pod_labels;
use plugin::kubeapi::{KubeClient, KubeConfig, KubeError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const TOKEN: &str = "s3cret-token";

/// A pod object as the API server returns it (trimmed, but with the real nesting).
const POD_JSON: &str = r#"{
  "kind": "Pod", "apiVersion": "v1",
  "metadata": {
    "name": "web-1", "namespace": "shop", "uid": "0b5c6f0e-1",
    "labels": {"app": "web", "io.contiv.network": "blue-net", "io.contiv.net-group": "web-epg"}
  },
  "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
  "status": {"phase": "Pending"}
}"#;

/// Each request's path and Authorization header.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// Serve until dropped; records each request's path and Authorization header.
struct FakeApiServer {
    url: String,
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn respond(mut conn: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin, seen: Seen) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut chunk).await.unwrap();
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let mut lines = head.lines();
    let path = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_string();
    let auth = lines.find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("authorization")
            .then(|| v.trim().to_string())
    });
    seen.lock().unwrap().push((path.clone(), auth.clone()));
    let (status, body) = if auth.as_deref() != Some(&format!("Bearer {TOKEN}")) {
        (
            "401 Unauthorized",
            r#"{"kind":"Status","code":401}"#.to_string(),
        )
    } else if path == "/api/v1/namespaces/shop/pods/web-1" {
        ("200 OK", POD_JSON.to_string())
    } else if path == "/api/v1/namespaces/shop/pods/bare" {
        (
            "200 OK",
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"bare","labels":["x"]}}"#
                .to_string(),
        )
    } else {
        (
            "404 Not Found",
            r#"{"kind":"Status","status":"Failure","reason":"NotFound","code":404}"#.to_string(),
        )
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(reply.as_bytes()).await.unwrap();
    let _ = conn.shutdown().await;
}

async fn fake_api_server() -> FakeApiServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let (conn, _) = listener.accept().await.unwrap();
            tokio::spawn(respond(conn, log.clone()));
        }
    });
    FakeApiServer { url, seen, task }
}

fn client(url: &str, token: &str) -> KubeClient {
    KubeClient::new(&KubeConfig {
        api_server: format!("{url}/"),
        token: token.into(),
        ..KubeConfig::default()
    })
    .unwrap()
}

fn request(ns: &str, name: &str, labels: &[(&str, &str)]) -> PodRequest {
    PodRequest {
        pod_namespace: ns.into(),
        pod_name: name.into(),
        container_id: "c1".into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        ..PodRequest::default()
    }
}

/// A CA and a server certificate for 127.0.0.1, made with the openssl CLI; `None` without it.
fn make_certs(dir: &std::path::Path) -> Option<()> {
    let run = |args: &[&str]| {
        std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|_| ())
    };
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").ok()?;
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509", "-days", "1", "-subj", "/CN=test-ca"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    run(&ca)?;
    let mut csr = vec!["req", "-subj", "/CN=127.0.0.1"];
    csr.extend(ec);
    csr.extend(["-keyout", "srv.key", "-out", "srv.csr"]);
    run(&csr)?;
    run(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "san.ext",
        "-out",
        "srv.pem",
    ])
}

#[tokio::test]
async fn https_api_is_verified_against_the_configured_ca() {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let dir = tempfile::tempdir().unwrap();
    if make_certs(dir.path()).is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "openssl CLI needed to make test certificates"
        );
        eprintln!("skipped: no openssl CLI to make test certificates");
        return;
    }
    let chain = CertificateDer::pem_file_iter(dir.path().join("srv.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.path().join("srv.key")).unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let (conn, _) = listener.accept().await.unwrap();
            // A client that rejects our certificate aborts the handshake: not an error here.
            if let Ok(tls) = acceptor.accept(conn).await {
                tokio::spawn(respond(tls, log.clone()));
            }
        }
    });
    let ca = dir.path().join("ca.pem").display().to_string();
    let kube = KubeClient::new(&KubeConfig {
        api_server: url.clone(),
        ca: ca.clone(),
        token: TOKEN.into(),
        ..KubeConfig::default()
    })
    .unwrap();
    let labels = kube.pod_labels("shop", "web-1").await.unwrap();
    assert_eq!(labels["io.contiv.network"], "blue-net");
    // A CA that did not sign the server's certificate: the connection is refused.
    let other = KubeClient::new(&KubeConfig {
        api_server: url.clone(),
        ca: dir.path().join("srv.pem").display().to_string(),
        token: TOKEN.into(),
        ..KubeConfig::default()
    })
    .unwrap();
    let err = other.pod_labels("shop", "web-1").await.unwrap_err();
    assert!(matches!(err, KubeError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains(&url), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 1);
    task.abort();
}

#[tokio::test]
async fn pod_labels_come_from_the_api_with_the_bearer_token() {
    let api = fake_api_server().await;
    let kube = client(&api.url, TOKEN);
    let labels = kube.pod_labels("shop", "web-1").await.unwrap();
    assert_eq!(labels["io.contiv.network"], "blue-net");
    assert_eq!(labels["app"], "web");
    let seen = api.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [(
            "/api/v1/namespaces/shop/pods/web-1".to_string(),
            Some(format!("Bearer {TOKEN}"))
        )]
    );
}

#[tokio::test]
async fn kubernetes_labels_override_the_cni_config_and_defaults_fill_the_rest() {
    let api = fake_api_server().await;
    let kube = client(&api.url, TOKEN);
    let pod = request(
        "shop",
        "web-1",
        &[(LABEL_TENANT, "acme"), (LABEL_NETWORK, "cni-net")],
    );
    let net = PodNetwork::from_labels(&pod_labels(Some(&kube), &pod).await.unwrap());
    assert_eq!(
        (
            net.tenant.as_str(),
            net.network.as_str(),
            net.group.as_str()
        ),
        ("acme", "blue-net", "web-epg")
    );
    // Without an API (or without a pod name) the request's labels and the defaults decide.
    let net = PodNetwork::from_labels(&pod_labels(None, &pod).await.unwrap());
    assert_eq!(
        (
            net.tenant.as_str(),
            net.network.as_str(),
            net.group.as_str()
        ),
        ("acme", "cni-net", "")
    );
    let anonymous = request("", "", &[(LABEL_GROUP, "g")]);
    let labels = pod_labels(Some(&kube), &anonymous).await.unwrap();
    assert_eq!(labels, anonymous.labels);
    assert_eq!(
        api.seen.lock().unwrap().len(),
        1,
        "no lookup without a pod name"
    );
}

#[tokio::test]
async fn unknown_pod_wrong_token_and_missing_metadata_are_clear_errors() {
    let api = fake_api_server().await;
    let kube = client(&api.url, TOKEN);
    let err = pod_labels(Some(&kube), &request("shop", "ghost", &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, PluginError::Kube(KubeError::PodNotFound { .. })),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("shop/ghost") && msg.contains(&api.url),
        "{msg}"
    );
    assert_eq!(err.cni_code(), 100);

    let err = client(&api.url, "wrong")
        .pod_labels("shop", "web-1")
        .await
        .unwrap_err();
    assert!(
        matches!(err, KubeError::Status { status: 401, .. }),
        "{err:?}"
    );

    let err = kube.pod_labels("shop", "bare").await.unwrap_err();
    assert!(
        matches!(err, KubeError::BadPod { .. }) && err.to_string().contains("shop/bare"),
        "{err}"
    );
}

#[tokio::test]
async fn unreachable_api_is_try_again_later_naming_server_and_pod() {
    // A port that was just free: nothing listens there.
    let url = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let kube = client(&url, TOKEN);
    let err = pod_labels(Some(&kube), &request("shop", "web-1", &[]))
        .await
        .unwrap_err();
    assert_eq!(err.cni_code(), 11);
    let msg = err.to_string();
    assert!(msg.contains(&url) && msg.contains("shop/web-1"), "{msg}");
}

#[test]
fn token_file_from_the_config_file_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let path = dir.path().join("contiv.json");
    std::fs::write(
        &path,
        format!(
            r#"{{"K8S_API_SERVER":"http://127.0.0.1:1","K8S_TOKEN":"{}","SVC_SUBNET":"10.96.0.0/12"}}"#,
            token.display()
        ),
    )
    .unwrap();
    let cfg = KubeConfig::load(&path).unwrap().unwrap();
    assert_eq!(cfg.svc_subnet, "10.96.0.0/12");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let api = fake_api_server().await;
        let kube = KubeClient::new(&KubeConfig {
            api_server: api.url.clone(),
            ..cfg
        })
        .unwrap();
        assert_eq!(
            kube.pod_labels("shop", "web-1").await.unwrap()["io.contiv.net-group"],
            "web-epg"
        );
    });
}
