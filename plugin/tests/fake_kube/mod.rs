//! A handcrafted Kubernetes API server on 127.0.0.1 (a real one cannot run here), over real
//! HTTP/1.1 on its own thread and runtime, behaving as a real one does towards a client such as
//! `kube::runtime`'s watcher:
//!
//! - Resources: `pods`, `services`, `namespaces` (`/api/v1`), `endpointslices`
//!   (`/apis/discovery.k8s.io/v1`), `networkpolicies` (`/apis/networking.k8s.io/v1`); all
//!   namespaces (`/<prefix>/<plural>`) or one (`/<prefix>/namespaces/<ns>/<plural>`), and GET of
//!   one object.
//! - One `resourceVersion` counter for everything (as etcd's revision); every change is an
//!   event in the resource's history, and objects carry the version of their last change.
//! - Lists: `metadata.resourceVersion` of the list, `limit` and `continue` (pages of one
//!   snapshot, so a paged list is consistent).
//! - Watches (`watch=true`, or `1`): from `resourceVersion=N` the events after N are replayed
//!   from the history, then live ones follow, one JSON object per line over a chunked
//!   response; `0` or none starts with the current objects as ADDED. A version older than the
//!   history ([`FakeKube::compact`]) gets an `ERROR` event with a 410 `Expired` Status and the
//!   watch ends, as a real server does. `allowWatchBookmarks=true` watches get `BOOKMARK`
//!   events with the current version (every [`FakeKube::set_bookmark_interval`], 1 s by
//!   default). `timeoutSeconds` ends the watch.
//! - A bearer token is required ([`TOKEN`] unless [`FakeKube::set_token`]); errors are
//!   `Status` objects. Label and field selectors are refused (400): nothing here uses them.
//!
//! The test changes the state with [`FakeKube::put`] and [`FakeKube::delete`], and can make
//! the server misbehave on purpose: close watches, hold new watches back, answer lists slowly,
//! or send raw lines (garbage).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

pub const TOKEN: &str = "watch-token";

/// A resource the server has: its plural, kind, apiVersion, and URL prefix.
struct Kind {
    plural: &'static str,
    kind: &'static str,
    api_version: &'static str,
    prefix: &'static str,
    namespaced: bool,
}

const KINDS: [Kind; 5] = [
    Kind {
        plural: "pods",
        kind: "Pod",
        api_version: "v1",
        prefix: "/api/v1",
        namespaced: true,
    },
    Kind {
        plural: "services",
        kind: "Service",
        api_version: "v1",
        prefix: "/api/v1",
        namespaced: true,
    },
    Kind {
        plural: "namespaces",
        kind: "Namespace",
        api_version: "v1",
        prefix: "/api/v1",
        namespaced: false,
    },
    Kind {
        plural: "endpointslices",
        kind: "EndpointSlice",
        api_version: "discovery.k8s.io/v1",
        prefix: "/apis/discovery.k8s.io/v1",
        namespaced: true,
    },
    Kind {
        plural: "networkpolicies",
        kind: "NetworkPolicy",
        api_version: "networking.k8s.io/v1",
        prefix: "/apis/networking.k8s.io/v1",
        namespaced: true,
    },
];

fn kind_of(plural: &str) -> &'static Kind {
    KINDS
        .iter()
        .find(|k| k.plural == plural)
        .unwrap_or_else(|| panic!("the fake API server has no resource {plural}"))
}

/// What an open watch stream is told to do.
enum Cmd {
    /// One line, newline added, as one chunk.
    Line(String),
    /// Bytes as one chunk, as they are (part of a line, several lines).
    Chunk(String),
    Close,
}

/// One change in a resource's history.
struct Event {
    version: u64,
    line: String,
    namespace: String,
}

struct Watch {
    tx: mpsc::UnboundedSender<Cmd>,
    /// Only this namespace's objects (`None`: all).
    namespace: Option<String>,
    bookmarks: bool,
}

#[derive(Default)]
struct State {
    version: u64,
    /// Events at or below this version are forgotten: older watches get 410.
    compacted: u64,
    /// By resource, then `ns/name` (`name` for cluster-scoped ones).
    objects: BTreeMap<&'static str, BTreeMap<String, Value>>,
    history: BTreeMap<&'static str, VecDeque<Event>>,
    watches: BTreeMap<&'static str, Vec<Watch>>,
    /// Snapshots of paged lists, by continue token.
    pages: BTreeMap<String, (u64, Vec<Value>)>,
    next_page: u64,
    /// Every request line's target (path and query), in order.
    requests: Vec<String>,
    /// Authorization headers seen.
    auth: Vec<Option<String>>,
    /// The bearer token accepted; [`TOKEN`] unless a test changes it.
    token: String,
    /// How long a list takes to answer (a slow API server).
    list_delay: Duration,
    /// New watches wait while this is set.
    hold_watches: bool,
    bookmark_interval: Duration,
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

/// `ns/name`, or `name` for a cluster-scoped kind.
fn key_of(kind: &Kind, object: &Value) -> String {
    let name = object["metadata"]["name"]
        .as_str()
        .expect("an object needs metadata.name");
    if kind.namespaced {
        format!("{}/{name}", namespace_of(object))
    } else {
        name.to_string()
    }
}

fn namespace_of(object: &Value) -> String {
    object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string()
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

impl State {
    fn broadcast(&mut self, plural: &'static str, namespace: &str, cmd: impl Fn() -> Cmd) {
        self.watches.entry(plural).or_default().retain(|w| {
            if w.namespace.as_deref().is_some_and(|n| n != namespace) {
                return !w.tx.is_closed();
            }
            w.tx.send(cmd()).is_ok()
        });
    }
}

impl FakeKube {
    /// Cluster options for netplugins in kubernetes mode that talk to this server: its URL and
    /// token in a §7.4 config file written to `dir` (which must outlive the netplugins).
    pub fn cluster_options(&self, dir: &std::path::Path) -> testbed::demo::ClusterOptions {
        let kube_config = dir.join("contiv.json");
        std::fs::write(
            &kube_config,
            json!({"K8S_API_SERVER": self.url, "K8S_TOKEN": TOKEN}).to_string(),
        )
        .unwrap();
        testbed::demo::ClusterOptions {
            netplugin_mode: Some("kubernetes".into()),
            kube_config: Some(kube_config),
            ..testbed::demo::ClusterOptions::default()
        }
    }

    pub fn start() -> FakeKube {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", std_listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            token: TOKEN.into(),
            bookmark_interval: Duration::from_secs(1),
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
                        let Ok((conn, _)) = listener.accept().await else {
                            continue;
                        };
                        tokio::spawn(respond(conn, shared.clone()));
                    }
                };
                let bookmarks = async {
                    loop {
                        let every = shared.lock().unwrap().bookmark_interval;
                        tokio::time::sleep(every).await;
                        send_bookmarks(&shared);
                    }
                };
                tokio::select! {
                    _ = serve => {}
                    _ = bookmarks => {}
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

    /// Send bookmarks this often.
    pub fn set_bookmark_interval(&self, every: Duration) {
        self.state.lock().unwrap().bookmark_interval = every;
    }

    /// While `hold` is set, new watch requests get no answer (they wait).
    pub fn hold_watches(&self, hold: bool) {
        self.state.lock().unwrap().hold_watches = hold;
    }

    fn change(&self, plural: &str, object: Value, delete: bool) -> u64 {
        let kind = kind_of(plural);
        let mut s = self.state.lock().unwrap();
        s.version += 1;
        let version = s.version;
        let mut object = object;
        object["kind"] = json!(kind.kind);
        object["apiVersion"] = json!(kind.api_version);
        if kind.namespaced && object["metadata"]["namespace"].is_null() {
            object["metadata"]["namespace"] = json!("default");
        }
        let key = key_of(kind, &object);
        let objects = s.objects.entry(kind.plural).or_default();
        let previous = objects.get(&key).cloned();
        let event_type = match (&previous, delete) {
            (None, true) => return version,
            (Some(_), true) => "DELETED",
            (Some(_), false) => "MODIFIED",
            (None, false) => "ADDED",
        };
        if delete {
            // A DELETED event carries the object as it was, at the deletion's version.
            object = previous.unwrap_or(object);
            objects.remove(&key);
        } else {
            let uid = previous
                .as_ref()
                .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_string))
                .unwrap_or_else(|| format!("uid-{version}"));
            object["metadata"]["uid"] = json!(uid);
        }
        object["metadata"]["resourceVersion"] = json!(version.to_string());
        if !delete {
            s.objects
                .entry(kind.plural)
                .or_default()
                .insert(key, object.clone());
        }
        let namespace = namespace_of(&object);
        let line = json!({"type": event_type, "object": object}).to_string();
        s.history.entry(kind.plural).or_default().push_back(Event {
            version,
            line: line.clone(),
            namespace: namespace.clone(),
        });
        s.broadcast(kind.plural, &namespace, || Cmd::Line(line.clone()));
        version
    }

    /// Add or replace an object; open watches get ADDED or MODIFIED. Returns its version.
    pub fn put(&self, resource: &str, object: Value) -> u64 {
        self.change(resource, object, false)
    }

    /// Delete an object (unknown: nothing happens); open watches get DELETED.
    pub fn delete(&self, resource: &str, namespace: &str, name: &str) -> u64 {
        let object = json!({"metadata": {"name": name, "namespace": namespace}});
        self.change(resource, object, true)
    }

    /// The object as the server has it now.
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let kind = kind_of(resource);
        let key = if kind.namespaced {
            format!("{namespace}/{name}")
        } else {
            name.to_string()
        };
        self.state
            .lock()
            .unwrap()
            .objects
            .get(kind.plural)
            .and_then(|m| m.get(&key))
            .cloned()
    }

    /// Forget the history: a watch resumed from an older version gets 410 Gone.
    pub fn compact(&self) {
        let mut s = self.state.lock().unwrap();
        s.compacted = s.version;
        s.history.clear();
    }

    /// The current resourceVersion.
    pub fn version(&self) -> u64 {
        self.state.lock().unwrap().version
    }

    /// Send a raw line to every open watch of `resource`.
    pub fn send_line(&self, resource: &str, line: &str) {
        let kind = kind_of(resource);
        let mut s = self.state.lock().unwrap();
        for w in s.watches.entry(kind.plural).or_default() {
            let _ = w.tx.send(Cmd::Line(line.to_string()));
        }
    }

    /// Send `data` as one chunk, unchanged, to every open watch of `resource`: a real server
    /// splits and joins events across chunks as it likes.
    pub fn send_chunk(&self, resource: &str, data: &str) {
        let kind = kind_of(resource);
        let mut s = self.state.lock().unwrap();
        for w in s.watches.entry(kind.plural).or_default() {
            let _ = w.tx.send(Cmd::Chunk(data.to_string()));
        }
    }

    /// End every open watch of `resource` (the chunked response completes).
    pub fn close_watches(&self, resource: &str) {
        let kind = kind_of(resource);
        let mut s = self.state.lock().unwrap();
        for w in s.watches.remove(kind.plural).unwrap_or_default() {
            let _ = w.tx.send(Cmd::Close);
        }
    }

    /// How many watches of `resource` are open.
    pub fn open_watches(&self, resource: &str) -> usize {
        let kind = kind_of(resource);
        let mut s = self.state.lock().unwrap();
        let list = s.watches.entry(kind.plural).or_default();
        list.retain(|w| !w.tx.is_closed());
        list.len()
    }

    /// Request targets so far.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn auth_headers(&self) -> Vec<Option<String>> {
        self.state.lock().unwrap().auth.clone()
    }

    /// How many lists (first pages) of `resource` in all namespaces were served.
    pub fn lists(&self, resource: &str) -> usize {
        let kind = kind_of(resource);
        let path = format!("{}/{}", kind.prefix, kind.plural);
        self.requests()
            .iter()
            .filter(|r| {
                let (p, q) = r.split_once('?').unwrap_or((r, ""));
                p == path && !is_watch(q) && !q.contains("continue=")
            })
            .count()
    }

    /// Watch requests of `resource`, with their query.
    pub fn watch_requests(&self, resource: &str) -> Vec<String> {
        let kind = kind_of(resource);
        let path = format!("{}/{}?", kind.prefix, kind.plural);
        self.requests()
            .into_iter()
            .filter(|r| r.starts_with(&path) && is_watch(r.split_once('?').unwrap_or_default().1))
            .collect()
    }

    /// Wait until `resource` has an open watch (the client is following it).
    pub fn wait_watching(&self, resource: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.open_watches(resource) == 0 {
            assert!(Instant::now() < deadline, "nobody watches {resource}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn send_bookmarks(state: &Mutex<State>) {
    let mut s = state.lock().unwrap();
    let version = s.version.to_string();
    for kind in &KINDS {
        let line = json!({"type": "BOOKMARK", "object": {
            "kind": kind.kind, "apiVersion": kind.api_version,
            "metadata": {"resourceVersion": version}
        }})
        .to_string();
        for w in s.watches.entry(kind.plural).or_default() {
            if w.bookmarks {
                let _ = w.tx.send(Cmd::Line(line.clone()));
            }
        }
    }
}

fn is_watch(query: &str) -> bool {
    query
        .split('&')
        .any(|q| q == "watch=true" || q == "watch=1")
}

/// What a request gets: a complete reply, or a watch stream.
enum Answer {
    /// Status line and body, sent after the delay.
    Reply(&'static str, String, Duration),
    /// A watch: the events to send first, whether it ends after them (410), its timeout,
    /// and where live events arrive.
    Watch {
        first: Vec<String>,
        end: bool,
        timeout: Option<Duration>,
        rx: mpsc::UnboundedReceiver<Cmd>,
    },
    /// Watches are held: ask again later.
    Hold,
}

fn reply(code: u16, reason: &str, message: &str) -> Answer {
    let line = match code {
        400 => "400 Bad Request",
        401 => "401 Unauthorized",
        404 => "404 Not Found",
        405 => "405 Method Not Allowed",
        _ => "500 Internal Server Error",
    };
    Answer::Reply(
        line,
        status(code, reason, message).to_string(),
        Duration::ZERO,
    )
}

/// Which resource (and namespace, and object) a path names.
fn route(path: &str) -> Option<(&'static Kind, Option<String>, Option<String>)> {
    for kind in &KINDS {
        let Some(rest) = path.strip_prefix(kind.prefix) else {
            continue;
        };
        let parts: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
        match parts[..] {
            [plural] if plural == kind.plural => return Some((kind, None, None)),
            // GET of a namespace: /api/v1/namespaces/<name>
            ["namespaces", name] if kind.plural == "namespaces" => {
                return Some((kind, None, Some(name.to_string())));
            }
            ["namespaces", ns, plural] if plural == kind.plural && kind.namespaced => {
                return Some((kind, Some(ns.to_string()), None));
            }
            ["namespaces", ns, plural, name] if plural == kind.plural && kind.namespaced => {
                return Some((kind, Some(ns.to_string()), Some(name.to_string())));
            }
            _ => {}
        }
    }
    None
}

fn query_map(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|q| !q.is_empty())
        .map(|q| {
            let (k, v) = q.split_once('=').unwrap_or((q, ""));
            (k.to_string(), v.replace("%2F", "/").replace("%2f", "/"))
        })
        .collect()
}

fn answer(state: &Mutex<State>, method: &str, target: &str, auth: Option<String>) -> Answer {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut s = state.lock().unwrap();
    if auth.as_deref() != Some(&format!("Bearer {}", s.token)) {
        s.requests.push(target.to_string());
        s.auth.push(auth);
        return reply(401, "Unauthorized", "Unauthorized");
    }
    let q = query_map(query);
    if is_watch(query) && s.hold_watches {
        return Answer::Hold;
    }
    s.requests.push(target.to_string());
    s.auth.push(auth);
    if method != "GET" {
        return reply(405, "MethodNotAllowed", "this test server only reads");
    }
    let Some((kind, namespace, name)) = route(path) else {
        return reply(
            404,
            "NotFound",
            &format!("the server could not find {path}"),
        );
    };
    if q.contains_key("labelSelector") || q.contains_key("fieldSelector") {
        return reply(
            400,
            "BadRequest",
            "selectors are not supported by this test server",
        );
    }
    let objects = s.objects.get(kind.plural).cloned().unwrap_or_default();
    if let Some(name) = name {
        let key = match &namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.clone(),
        };
        return match objects.get(&key) {
            Some(object) => Answer::Reply("200 OK", object.to_string(), Duration::ZERO),
            None => reply(
                404,
                "NotFound",
                &format!("{} \"{name}\" not found", kind.plural),
            ),
        };
    }
    let in_scope = |object: &Value| {
        namespace
            .as_ref()
            .is_none_or(|ns| &namespace_of(object) == ns)
    };
    if !is_watch(query) {
        let (version, mut items) = match q.get("continue") {
            Some(token) => match s.pages.remove(token) {
                Some(page) => page,
                None => {
                    return Answer::Reply(
                        "410 Gone",
                        status(410, "Expired", "the continue token is no longer valid").to_string(),
                        Duration::ZERO,
                    );
                }
            },
            None => (
                s.version,
                objects.values().filter(|o| in_scope(o)).cloned().collect(),
            ),
        };
        let limit = q
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        let mut metadata = json!({"resourceVersion": version.to_string()});
        if let Some(limit) = limit
            && items.len() > limit
        {
            let rest = items.split_off(limit);
            s.next_page += 1;
            let token = format!("page-{}", s.next_page);
            s.pages.insert(token.clone(), (version, rest));
            metadata["continue"] = json!(token);
        }
        let body = json!({
            "kind": format!("{}List", kind.kind),
            "apiVersion": kind.api_version,
            "metadata": metadata,
            "items": items,
        });
        return Answer::Reply("200 OK", body.to_string(), s.list_delay);
    }
    // A watch.
    let from = q.get("resourceVersion").cloned().unwrap_or_default();
    let mut first = Vec::new();
    let mut end = false;
    if from.is_empty() || from == "0" {
        for object in objects.values().filter(|o| in_scope(o)) {
            first.push(json!({"type": "ADDED", "object": object}).to_string());
        }
    } else {
        let Ok(from) = from.parse::<u64>() else {
            return reply(400, "BadRequest", &format!("resourceVersion {from:?}"));
        };
        if from < s.compacted {
            let expired = status(
                410,
                "Expired",
                &format!("too old resource version: {from} ({})", s.compacted),
            );
            first.push(json!({"type": "ERROR", "object": expired}).to_string());
            end = true;
        } else {
            for e in s.history.get(kind.plural).into_iter().flatten() {
                if e.version > from && namespace.as_ref().is_none_or(|ns| *ns == e.namespace) {
                    first.push(e.line.clone());
                }
            }
        }
    }
    let (tx, rx) = mpsc::unbounded_channel();
    if !end {
        s.watches.entry(kind.plural).or_default().push(Watch {
            tx,
            namespace,
            bookmarks: q.get("allowWatchBookmarks").map(String::as_str) == Some("true"),
        });
    }
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    Answer::Watch {
        first,
        end,
        timeout,
        rx,
    }
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
    let mut request_line = lines.next().unwrap_or_default().split_whitespace();
    let method = request_line.next().unwrap_or_default().to_string();
    let target = request_line.next().unwrap_or_default().to_string();
    let auth = lines.find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("authorization")
            .then(|| v.trim().to_string())
    });
    let answer = loop {
        match answer(&state, &method, &target, auth.clone()) {
            Answer::Hold => tokio::time::sleep(Duration::from_millis(20)).await,
            other => break other,
        }
    };
    let (first, end, timeout, mut rx) = match answer {
        Answer::Reply(status_line, body, delay) => {
            tokio::time::sleep(delay).await;
            let text = format!(
                "HTTP/1.1 {status_line}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(text.as_bytes()).await;
            return;
        }
        Answer::Watch {
            first,
            end,
            timeout,
            rx,
        } => (first, end, timeout, rx),
        Answer::Hold => return,
    };
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if conn.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for line in first {
        if write_chunk(&mut conn, &format!("{line}\n")).await.is_err() {
            return;
        }
    }
    if !end {
        let deadline = tokio::time::Instant::now() + timeout.unwrap_or(Duration::from_secs(3600));
        loop {
            let cmd = match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(cmd)) => cmd,
                Ok(None) | Err(_) => break,
            };
            let sent = match cmd {
                Cmd::Line(line) | Cmd::Chunk(line) if line.is_empty() => Ok(()),
                Cmd::Line(line) => write_chunk(&mut conn, &format!("{line}\n")).await,
                Cmd::Chunk(data) => write_chunk(&mut conn, &data).await,
                Cmd::Close => break,
            };
            if sent.is_err() {
                return;
            }
        }
    }
    let _ = conn.write_all(b"0\r\n\r\n").await;
    let _ = conn.shutdown().await;
}

/// A Service object.
pub fn service(namespace: &str, name: &str, cluster_ip: &str, ports: Value) -> Value {
    json!({
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip],
                 "ports": ports}
    })
}

/// A ready endpoint on `node`.
pub fn endpoint(ip: &str, node: &str) -> Value {
    json!({"addresses": [ip], "nodeName": node,
           "conditions": {"ready": true, "serving": true, "terminating": false}})
}

/// An IPv4 EndpointSlice `name` of service `service` with these endpoints and ports.
pub fn endpoint_slice(
    namespace: &str,
    service: &str,
    name: &str,
    endpoints: Value,
    ports: Value,
) -> Value {
    json!({
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"kubernetes.io/service-name": service,
                                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    })
}

/// A Namespace with labels (and `kubernetes.io/metadata.name`, as the API server adds).
pub fn namespace(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut l: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.insert("kubernetes.io/metadata.name".into(), name.into());
    json!({"metadata": {"name": name, "labels": l}})
}

/// A Pod scheduled on `node`, one container with these `(name, port, protocol)` ports; `ip`
/// empty until its network is set up (then kubelet reports it in `status.podIP`).
pub fn pod(
    namespace: &str,
    name: &str,
    labels: &[(&str, &str)],
    node: &str,
    ports: &[(&str, u16, &str)],
    ip: &str,
) -> Value {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p, proto)| json!({"name": n, "containerPort": p, "protocol": proto}))
        .collect();
    let mut pod = json!({
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "agnhost", "ports": ports}]},
        "status": {"phase": "Pending"},
    });
    if !ip.is_empty() {
        pod["status"] = json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]});
    }
    pod
}
