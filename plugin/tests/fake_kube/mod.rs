//! A handcrafted Kubernetes API server on 127.0.0.1 (a real one cannot run here), over real
//! HTTP/1.1 on its own thread and runtime: pods (`GET /api/v1/namespaces/<ns>/pods/<name>`),
//! and `services` / `endpoints` as lists and as watches (`?watch=1&resourceVersion=<v>`: a
//! chunked response, one JSON event per line, sent when the test changes the state).
//!
//! The test sets the state with [`FakeKube::put`] / [`FakeKube::delete`] (an event goes to
//! every open watch of that resource) or their `_silently` forms (no event: only a re-list
//! sees it), closes watches, or sends raw lines (an `ERROR` 410, garbage).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

pub const TOKEN: &str = "watch-token";

/// What an open watch stream is told to do.
enum Cmd {
    /// One line, newline added, as one chunk.
    Line(String),
    /// Bytes as one chunk, as they are (part of a line, several lines).
    Chunk(String),
    Close,
}

#[derive(Default)]
struct State {
    version: u64,
    /// By resource ("services", "endpoints"), then `ns/name`.
    objects: BTreeMap<String, BTreeMap<String, Value>>,
    watches: BTreeMap<String, Vec<mpsc::UnboundedSender<Cmd>>>,
    /// Every request line's target (path and query), in order.
    requests: Vec<String>,
    /// Authorization headers seen.
    auth: Vec<Option<String>>,
    pod_labels: BTreeMap<String, String>,
    /// The bearer token accepted; [`TOKEN`] unless a test changes it.
    token: String,
    /// How long a list takes to answer (a slow API server).
    list_delay: Duration,
}

/// See the module documentation.
pub struct FakeKube {
    pub url: String,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn key_of(object: &Value) -> String {
    format!(
        "{}/{}",
        object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default"),
        object["metadata"]["name"].as_str().unwrap()
    )
}

impl FakeKube {
    pub fn start() -> FakeKube {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", std_listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            token: TOKEN.into(),
            ..State::default()
        }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shared = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                let serve = async {
                    loop {
                        let (conn, _) = listener.accept().await.unwrap();
                        tokio::spawn(respond(conn, shared.clone()));
                    }
                };
                tokio::select! {
                    _ = serve => {}
                    _ = stopped => {}
                }
            });
        });
        FakeKube {
            url,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Accept only this bearer token from now on.
    pub fn set_token(&self, token: &str) {
        self.state.lock().unwrap().token = token.into();
    }

    /// Answer lists only after `delay` from now on.
    pub fn set_list_delay(&self, delay: Duration) {
        self.state.lock().unwrap().list_delay = delay;
    }

    /// Labels of every pod the server is asked for.
    pub fn set_pod_labels(&self, labels: &[(&str, &str)]) {
        self.state.lock().unwrap().pod_labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    fn change(&self, resource: &str, object: Value, kind: Option<&str>, delete: bool) {
        let mut s = self.state.lock().unwrap();
        s.version += 1;
        let mut object = object;
        object["metadata"]["resourceVersion"] = json!(s.version.to_string());
        let key = key_of(&object);
        let existed = s
            .objects
            .get(resource)
            .is_some_and(|m| m.contains_key(&key));
        let objects = s.objects.entry(resource.to_string()).or_default();
        if delete {
            objects.remove(&key);
        } else {
            objects.insert(key, object.clone());
        }
        let event_type = match kind {
            Some(k) => k,
            None if delete => "DELETED",
            None if existed => "MODIFIED",
            None => "ADDED",
        };
        let line = json!({"type": event_type, "object": object}).to_string();
        s.watches
            .entry(resource.to_string())
            .or_default()
            .retain(|w| w.send(Cmd::Line(line.clone())).is_ok());
    }

    /// Add or replace an object; open watches get ADDED or MODIFIED.
    pub fn put(&self, resource: &str, object: Value) {
        self.change(resource, object, None, false);
    }

    /// Delete an object; open watches get DELETED.
    pub fn delete(&self, resource: &str, namespace: &str, name: &str) {
        let object = json!({"metadata": {"name": name, "namespace": namespace}});
        self.change(resource, object, None, true);
    }

    /// Change the state without telling the watches (only a list shows it).
    pub fn put_silently(&self, resource: &str, object: Value) {
        let mut s = self.state.lock().unwrap();
        s.version += 1;
        s.objects
            .entry(resource.to_string())
            .or_default()
            .insert(key_of(&object), object);
    }

    pub fn delete_silently(&self, resource: &str, namespace: &str, name: &str) {
        let mut s = self.state.lock().unwrap();
        s.version += 1;
        if let Some(m) = s.objects.get_mut(resource) {
            m.remove(&format!("{namespace}/{name}"));
        }
    }

    /// Send a raw line to every open watch of `resource`.
    pub fn send_line(&self, resource: &str, line: &str) {
        let mut s = self.state.lock().unwrap();
        s.watches
            .entry(resource.to_string())
            .or_default()
            .retain(|w| w.send(Cmd::Line(line.to_string())).is_ok());
    }

    /// Send `data` as one chunk, unchanged, to every open watch of `resource`: a real server
    /// splits and joins events across chunks as it likes.
    pub fn send_chunk(&self, resource: &str, data: &str) {
        let mut s = self.state.lock().unwrap();
        s.watches
            .entry(resource.to_string())
            .or_default()
            .retain(|w| w.send(Cmd::Chunk(data.to_string())).is_ok());
    }

    /// End every open watch of `resource` (the chunked response completes).
    pub fn close_watches(&self, resource: &str) {
        let mut s = self.state.lock().unwrap();
        for w in s.watches.remove(resource).unwrap_or_default() {
            let _ = w.send(Cmd::Close);
        }
    }

    /// How many watches of `resource` are open.
    pub fn open_watches(&self, resource: &str) -> usize {
        let mut s = self.state.lock().unwrap();
        let list = s.watches.entry(resource.to_string()).or_default();
        list.retain(|w| !w.is_closed());
        list.len()
    }

    /// Request targets so far.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn auth_headers(&self) -> Vec<Option<String>> {
        self.state.lock().unwrap().auth.clone()
    }

    /// How many lists of `resource` were served.
    pub fn lists(&self, resource: &str) -> usize {
        let path = format!("/api/v1/{resource}");
        self.requests().iter().filter(|r| **r == path).count()
    }

    /// Wait until `resource` has an open watch (the watcher is following it).
    pub fn wait_watching(&self, resource: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.open_watches(resource) == 0 {
            assert!(Instant::now() < deadline, "nobody watches {resource}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// What a request gets: a complete reply, or a watch stream fed by the test.
enum Answer {
    Reply(String),
    /// A list, answered after the delay.
    Slow(Duration, String),
    Watch(mpsc::UnboundedReceiver<Cmd>),
}

fn answer(state: &Mutex<State>, target: &str, auth: Option<String>) -> Answer {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let reply = |status: &str, body: String| {
        Answer::Reply(format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ))
    };
    let mut s = state.lock().unwrap();
    s.requests.push(target.to_string());
    s.auth.push(auth.clone());
    if auth.as_deref() != Some(&format!("Bearer {}", s.token)) {
        return reply("401 Unauthorized", r#"{"kind":"Status","code":401}"#.into());
    }
    let resource = path
        .strip_prefix("/api/v1/")
        .unwrap_or_default()
        .to_string();
    if let Some((namespace, name)) = resource
        .strip_prefix("namespaces/")
        .and_then(|r| r.split_once("/pods/"))
    {
        let body = json!({
            "kind": "Pod",
            "metadata": {"namespace": namespace, "name": name, "labels": s.pod_labels},
        });
        return reply("200 OK", body.to_string());
    }
    if resource != "services" && resource != "endpoints" {
        return reply("404 Not Found", r#"{"kind":"Status","code":404}"#.into());
    }
    if !query.split('&').any(|q| q == "watch=1") {
        let items: Vec<Value> = s
            .objects
            .get(&resource)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        let body = json!({
            "kind": "List",
            "metadata": {"resourceVersion": s.version.to_string()},
            "items": items,
        });
        let delay = s.list_delay;
        return match reply("200 OK", body.to_string()) {
            Answer::Reply(text) => Answer::Slow(delay, text),
            other => other,
        };
    }
    let (tx, rx) = mpsc::unbounded_channel();
    s.watches.entry(resource).or_default().push(tx);
    Answer::Watch(rx)
}

/// One chunk of a chunked response (never empty: that would end the response).
async fn write_chunk(conn: &mut tokio::net::TcpStream, data: &str) -> std::io::Result<()> {
    let framed = format!("{:x}\r\n{data}\r\n", data.len());
    conn.write_all(framed.as_bytes()).await
}

async fn respond(mut conn: tokio::net::TcpStream, state: Arc<Mutex<State>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let mut lines = head.lines();
    let target = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_string();
    let auth = lines.find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("authorization")
            .then(|| v.trim().to_string())
    });
    let mut rx = match answer(&state, &target, auth) {
        Answer::Reply(text) => {
            let _ = conn.write_all(text.as_bytes()).await;
            return;
        }
        Answer::Slow(delay, text) => {
            tokio::time::sleep(delay).await;
            let _ = conn.write_all(text.as_bytes()).await;
            return;
        }
        Answer::Watch(rx) => rx,
    };
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if conn.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Cmd::Line(line) | Cmd::Chunk(line) if line.is_empty() => {}
            Cmd::Line(line) => {
                if write_chunk(&mut conn, &format!("{line}\n")).await.is_err() {
                    return;
                }
            }
            Cmd::Chunk(data) => {
                if write_chunk(&mut conn, &data).await.is_err() {
                    return;
                }
            }
            Cmd::Close => break,
        }
    }
    let _ = conn.write_all(b"0\r\n\r\n").await;
    let _ = conn.shutdown().await;
}

/// A Service object.
pub fn service(namespace: &str, name: &str, cluster_ip: &str, ports: Value) -> Value {
    json!({
        "kind": "Service", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "ports": ports}
    })
}

/// An Endpoints object with one subset.
pub fn endpoints(namespace: &str, name: &str, ips: &[&str], ports: Value) -> Value {
    let addresses: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
    json!({
        "kind": "Endpoints", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace},
        "subsets": [{"addresses": addresses, "ports": ports}]
    })
}
