//! The Kubernetes Service/EndpointSlice watcher (`kube::runtime` underneath) against a
//! handcrafted API server on 127.0.0.1 (real HTTP, lists and chunked watch streams resumed
//! from a resourceVersion, bookmarks, 410 Gone), with a recording sink in place of the
//! driver: what the agents would be told, in order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fake_kube;

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_kube::{FakeKube, TOKEN, endpoint, endpoint_slice, service};
use ofnet::{ServicePort, ServiceProtocol, ServiceSpec};
use plugin::kubeapi::{KubeClient, KubeConfig};
use plugin::kubesvc::{self, ServiceSink, WatchOptions, Watcher};
use serde_json::json;

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Apply(String, ServiceSpec, Vec<Ipv4Addr>),
    Remove(String),
}

#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<Call>>,
    /// Refuse this many applies first (as an agent refuses a VIP another service has).
    refuse: Mutex<usize>,
}

impl ServiceSink for Recorder {
    async fn apply(
        &self,
        name: &str,
        spec: &ServiceSpec,
        providers: &[Ipv4Addr],
    ) -> plugin::error::Result<()> {
        let mut refuse = self.refuse.lock().unwrap();
        if *refuse > 0 {
            *refuse -= 1;
            return Err(plugin::PluginError::Invalid {
                field: "VIP",
                problem: format!("refused {name}"),
            });
        }
        self.calls.lock().unwrap().push(Call::Apply(
            name.to_string(),
            spec.clone(),
            providers.to_vec(),
        ));
        Ok(())
    }

    async fn remove(&self, name: &str) -> plugin::error::Result<()> {
        self.calls
            .lock()
            .unwrap()
            .push(Call::Remove(name.to_string()));
        Ok(())
    }
}

impl Recorder {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// Wait (yielding to the watcher) until `count` calls were made; returns them.
    async fn wait_calls(&self, count: usize, what: &str) -> Vec<Call> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let calls = self.calls();
            if calls.len() >= count {
                return calls;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {} calls, wanted {count}: {calls:#?}",
                calls.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn spec(vip: [u8; 4], ports: &[(ServiceProtocol, u16, u16)]) -> ServiceSpec {
    ServiceSpec {
        affinity_timeout: None,
        vip6: None,
        vip: Ipv4Addr::from(vip),
        ports: ports
            .iter()
            .map(|&(protocol, svc_port, prov_port)| ServicePort {
                protocol,
                svc_port,
                prov_port,
            })
            .collect(),
    }
}

fn ips(list: &[[u8; 4]]) -> Vec<Ipv4Addr> {
    list.iter().map(|a| Ipv4Addr::from(*a)).collect()
}

const TCP: ServiceProtocol = ServiceProtocol::Tcp;
const UDP: ServiceProtocol = ServiceProtocol::Udp;

/// A client of the fake API server with the token it accepts by default.
fn client_of(api: &FakeKube) -> KubeClient {
    KubeClient::new(&KubeConfig {
        api_server: api.url.clone(),
        token: TOKEN.into(),
        ..KubeConfig::default()
    })
    .unwrap()
}

/// Watch options with a short back-off, so the tests do not wait.
fn backoff_ms(min: u64, max: u64) -> WatchOptions {
    WatchOptions {
        min_backoff: Duration::from_millis(min),
        max_backoff: Duration::from_millis(max),
    }
}

/// Wait for a watch on the server without blocking the watcher's runtime.
async fn watching(api: &FakeKube, resource: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while api.open_watches(resource) == 0 {
        assert!(Instant::now() < deadline, "nobody watches {resource}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

const NODE: &str = "node-a";

/// The slice of service `shop/web` holding these ready endpoints, port `http` → `port`.
fn web_slice(name: &str, ips: &[&str], port: u16) -> serde_json::Value {
    let endpoints: Vec<serde_json::Value> = ips.iter().map(|ip| endpoint(ip, NODE)).collect();
    endpoint_slice(
        "shop",
        "web",
        name,
        json!(endpoints),
        json!([{"name": "http", "port": port, "protocol": "TCP"}]),
    )
}

/// Wait until the last call is `want`.
async fn last_call_is(sink: &Recorder, want: &Call) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while sink.calls().last() != Some(want) {
        assert!(
            Instant::now() < deadline,
            "wanted last {want:#?}\ngot {:#?}",
            sink.calls()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// List, then ADDED/MODIFIED/DELETED applied in order, as `kube`'s watcher reads them from a
/// server that behaves as a real one: watches start at the list's resourceVersion with
/// bookmarks asked for, a garbage line and events split across chunks are survived, a closed
/// watch is resumed from the last version and gets the events it missed from the server's
/// history without a re-list, and a version the server no longer has (410 Gone) leads to a
/// re-list that applies an add and a delete no watch announced.
#[tokio::test(flavor = "current_thread")]
async fn watcher_follows_lists_events_resumes_and_relists_after_410() {
    let api = FakeKube::start();
    // Before netplugin starts: one balanced service and one headless.
    api.put(
        "services",
        service(
            "shop",
            "web",
            "10.254.0.10",
            json!([{"name": "http", "port": 80, "targetPort": 8080}]),
        ),
    );
    api.put(
        "services",
        service("shop", "db", "None", json!([{"port": 5432}])),
    );
    api.put("endpointslices", web_slice("web-1", &["10.1.0.2"], 8080));
    let client = client_of(&api);
    let sink = Arc::new(Recorder::default());
    let opts = backoff_ms(20, 200);
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let watcher =
                tokio::task::spawn_local(kubesvc::run(client, sink.clone(), NODE.into(), opts));
            let web = "k8s:shop/web".to_string();
            let web_spec = spec([10, 254, 0, 10], &[(TCP, 80, 8080)]);

            // The lists: the service appears with its provider once both lists are in (an
            // apply before the slices' list arrives has no providers yet).
            last_call_is(
                &sink,
                &Call::Apply(web.clone(), web_spec.clone(), ips(&[[10, 1, 0, 2]])),
            )
            .await;
            assert!(
                sink.calls().iter().all(|c| match c {
                    Call::Apply(n, ..) => n == &web,
                    Call::Remove(_) => false,
                }),
                "a headless service was applied: {:#?}",
                sink.calls()
            );
            watching(&api, "services").await;
            watching(&api, "endpointslices").await;
            // Watches start at the list's version and ask for bookmarks.
            let watches = api.watch_requests("services");
            assert!(
                watches.iter().all(|r| r.contains("resourceVersion=")
                    && !r.contains("resourceVersion=&")
                    && r.contains("allowWatchBookmarks=true")),
                "{watches:?}"
            );
            assert!(
                api.auth_headers()
                    .iter()
                    .all(|a| a.as_deref() == Some(format!("Bearer {TOKEN}").as_str())),
                "a request without the token"
            );

            // Events, in order (each waits for the previous: the two resources are two
            // streams, and nothing orders one against the other).
            let base = sink.calls().len();
            let both = ips(&[[10, 1, 0, 2], [10, 1, 0, 3]]);
            api.put(
                "endpointslices",
                web_slice("web-1", &["10.1.0.3", "10.1.0.2"], 8080),
            );
            let calls = sink.wait_calls(base + 1, "slice MODIFIED").await;
            assert_eq!(
                calls[base],
                Call::Apply(web.clone(), web_spec.clone(), both.clone())
            );
            api.send_line("endpointslices", "this is not JSON");
            // The named targetPort resolves through the slice's ports.
            api.put(
                "services",
                service(
                    "shop",
                    "web",
                    "10.254.0.10",
                    json!([{"name": "http", "port": 80, "targetPort": "web"},
                           {"name": "dns", "protocol": "UDP", "port": 53}]),
                ),
            );
            let calls = sink.wait_calls(base + 2, "service MODIFIED").await;
            assert_eq!(
                calls[base + 1],
                Call::Apply(
                    web.clone(),
                    spec([10, 254, 0, 10], &[(TCP, 80, 8080), (UDP, 53, 53)]),
                    both.clone()
                )
            );
            // After the garbage line, the slices' stream still works.
            api.put(
                "endpointslices",
                web_slice("web-1", &["10.1.0.3", "10.1.0.2"], 9090),
            );
            let calls = sink.wait_calls(base + 3, "slice MODIFIED again").await;
            let ports = spec([10, 254, 0, 10], &[(TCP, 80, 9090), (UDP, 53, 53)]);
            assert_eq!(
                calls[base + 2],
                Call::Apply(web.clone(), ports.clone(), both.clone())
            );
            // An event split over two chunks, then two events in one chunk (sent raw: the
            // versions must be new ones, beyond anything the server has handed out).
            let mut version = api.version() + 100;
            let mut event = |ips: &[&str]| {
                version += 1;
                let mut object = web_slice("web-1", ips, 9090);
                object["kind"] = json!("EndpointSlice");
                object["apiVersion"] = json!("discovery.k8s.io/v1");
                object["metadata"]["resourceVersion"] = json!(version.to_string());
                json!({"type": "MODIFIED", "object": object}).to_string()
            };
            let split = event(&["10.1.0.4"]);
            let (head, tail) = split.split_at(split.len() / 2);
            api.send_chunk("endpointslices", head);
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(sink.calls().len(), base + 3, "half an event was applied");
            api.send_chunk("endpointslices", &format!("{tail}\n"));
            let calls = sink
                .wait_calls(base + 4, "an event split over two chunks")
                .await;
            assert_eq!(
                calls[base + 3],
                Call::Apply(web.clone(), ports.clone(), ips(&[[10, 1, 0, 4]]))
            );
            api.send_chunk(
                "endpointslices",
                &format!(
                    "{}\n{}\n",
                    event(&["10.1.0.5"]),
                    event(&["10.1.0.3", "10.1.0.2"])
                ),
            );
            let calls = sink.wait_calls(base + 6, "two events in one chunk").await;
            assert_eq!(
                calls[base + 4..],
                [
                    Call::Apply(web.clone(), ports.clone(), ips(&[[10, 1, 0, 5]])),
                    Call::Apply(web.clone(), ports.clone(), both.clone()),
                ]
            );
            let base = base + 6;

            api.delete("services", "shop", "web");
            let calls = sink.wait_calls(base + 1, "service DELETED").await;
            assert_eq!(calls[base], Call::Remove(web.clone()));
            // Its slice going later changes nothing.
            api.delete("endpointslices", "shop", "web-1");

            // A closed watch is resumed from the last version seen: the changes made while
            // it was away come from the server's history, without a list.
            let lists = api.lists("services");
            api.hold_watches(true);
            api.close_watches("services");
            api.put(
                "services",
                service("shop", "api", "10.254.0.20", json!([{"port": 443}])),
            );
            api.hold_watches(false);
            let calls = sink.wait_calls(base + 2, "resumed watch").await;
            assert_eq!(
                calls[base + 1],
                Call::Apply(
                    "k8s:shop/api".into(),
                    spec([10, 254, 0, 20], &[(TCP, 443, 443)]),
                    vec![]
                )
            );
            assert_eq!(
                api.lists("services"),
                lists,
                "resumed by a list, not a watch"
            );
            watching(&api, "services").await;

            // The history is gone while the watch is away (410 Gone): a re-list notices a
            // delete and an add.
            api.hold_watches(true);
            api.close_watches("services");
            api.delete("services", "shop", "api");
            api.put(
                "services",
                service("shop", "cart", "10.254.0.30", json!([{"port": 8000}])),
            );
            api.compact();
            api.hold_watches(false);
            let calls = sink.wait_calls(base + 4, "re-list after 410").await;
            let mut tail = calls[base + 2..].to_vec();
            tail.sort_by_key(|c| format!("{c:?}"));
            assert_eq!(
                tail,
                [
                    Call::Apply(
                        "k8s:shop/cart".into(),
                        spec([10, 254, 0, 30], &[(TCP, 8000, 8000)]),
                        vec![]
                    ),
                    Call::Remove("k8s:shop/api".into()),
                ]
            );
            assert!(api.lists("services") > lists, "no re-list after 410");

            // Nothing else happened: no spurious re-applies of unchanged services.
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(sink.calls().len(), base + 4, "{:#?}", sink.calls());
            watcher.abort();
        })
        .await;
}

/// Bookmarks keep a quiet watch's version fresh: after the server's bookmarks, a watch that is
/// closed resumes from the version they carried, not from the old one (so it would not be
/// told 410 when the history before it is gone).
#[tokio::test(flavor = "current_thread")]
async fn a_quiet_watch_resumes_from_its_last_bookmark() {
    let api = FakeKube::start();
    api.set_bookmark_interval(Duration::from_millis(50));
    api.put(
        "services",
        service("shop", "web", "10.254.0.10", json!([{"port": 80}])),
    );
    let client = client_of(&api);
    let sink = Arc::new(Recorder::default());
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let task = tokio::task::spawn_local(kubesvc::run(
                client,
                sink.clone(),
                NODE.into(),
                backoff_ms(20, 200),
            ));
            watching(&api, "services").await;
            sink.wait_calls(1, "the list").await;
            // Other resources move the version on; services see only bookmarks.
            let mut last = 0;
            for i in 0..5 {
                last = api.put(
                    "endpointslices",
                    web_slice(&format!("other-{i}"), &["10.1.0.9"], 80),
                );
            }
            // Many bookmarks' worth (every 50 ms), with margin for a loaded machine.
            tokio::time::sleep(Duration::from_millis(1000)).await;
            api.compact();
            api.close_watches("services");
            let deadline = Instant::now() + Duration::from_secs(5);
            while api.watch_requests("services").len() < 2 {
                assert!(Instant::now() < deadline, "the watch was not resumed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let resumed = api.watch_requests("services")[1].clone();
            assert!(
                resumed.contains(&format!("resourceVersion={last}&"))
                    || resumed.ends_with(&format!("resourceVersion={last}")),
                "resumed at {resumed}, the last bookmark was at {last}"
            );
            assert_eq!(
                api.lists("services"),
                1,
                "a bookmarked watch needs no re-list"
            );
            task.abort();
        })
        .await;
}

/// An API server that refuses us (401) at first: the watcher backs off (no busy loop), and
/// once the server accepts the token it lists and applies, without a restart.
#[tokio::test(flavor = "current_thread")]
async fn watcher_backs_off_and_recovers_when_the_api_server_refuses() {
    let api = FakeKube::start();
    api.set_token("another-token");
    api.put(
        "services",
        service("shop", "web", "10.254.0.10", json!([{"port": 80}])),
    );
    let client = client_of(&api);
    let sink = Arc::new(Recorder::default());
    let opts = backoff_ms(10, 80);
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let watcher =
                tokio::task::spawn_local(kubesvc::run(client, sink.clone(), NODE.into(), opts));
            tokio::time::sleep(Duration::from_millis(600)).await;
            assert!(sink.calls().is_empty(), "{:#?}", sink.calls());
            let lists = api
                .requests()
                .iter()
                .filter(|r| r.starts_with("/api/v1/services?") && !r.contains("watch"))
                .count();
            // 10 ms doubling to 80 ms: about 10 attempts in 600 ms, not 60.
            assert!((3..=15).contains(&lists), "{lists} lists in 600 ms");
            api.set_token(TOKEN);
            let calls = sink.wait_calls(1, "after the token was accepted").await;
            assert_eq!(
                calls[0],
                Call::Apply(
                    "k8s:shop/web".into(),
                    spec([10, 254, 0, 10], &[(TCP, 80, 80)]),
                    vec![]
                )
            );
            watcher.abort();
        })
        .await;
}

/// Priming (what the daemon does before the switches connect) applies both lists, each
/// service once with its providers; `run` then watches from the lists' version without
/// listing again. An unreachable API server makes `prime` give up within its limit.
#[tokio::test(flavor = "current_thread")]
async fn prime_applies_the_lists_then_run_watches_from_them() {
    let api = FakeKube::start();
    api.put(
        "services",
        service(
            "shop",
            "web",
            "10.254.0.10",
            json!([{"name": "http", "port": 80, "targetPort": 8080}]),
        ),
    );
    api.put("endpointslices", web_slice("web-1", &["10.1.0.2"], 8080));
    let client = client_of(&api);
    let sink = Arc::new(Recorder::default());
    let opts = backoff_ms(20, 200);
    let mut watcher = Watcher::new(&client, sink.clone(), NODE, opts);
    assert_eq!(watcher.prime(Duration::from_secs(5)).await, 2);
    let web = "k8s:shop/web".to_string();
    let web_spec = spec([10, 254, 0, 10], &[(TCP, 80, 8080)]);
    assert_eq!(
        sink.calls(),
        [Call::Apply(
            web.clone(),
            web_spec.clone(),
            ips(&[[10, 1, 0, 2]])
        )]
    );
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let task = tokio::task::spawn_local(watcher.run());
            watching(&api, "services").await;
            watching(&api, "endpointslices").await;
            assert_eq!((api.lists("services"), api.lists("endpointslices")), (1, 1));
            api.put("endpointslices", web_slice("web-1", &["10.1.0.4"], 8080));
            let calls = sink.wait_calls(2, "slice MODIFIED after priming").await;
            assert_eq!(
                calls[1],
                Call::Apply(web.clone(), web_spec.clone(), ips(&[[10, 1, 0, 4]]))
            );
            task.abort();
        })
        .await;

    // Nobody listens on port 1: refused at once, nothing applied.
    let down = KubeClient::new(&KubeConfig {
        api_server: "http://127.0.0.1:1".into(),
        token: TOKEN.into(),
        ..KubeConfig::default()
    })
    .unwrap();
    let sink = Arc::new(Recorder::default());
    let started = Instant::now();
    let mut watcher = Watcher::new(&down, sink.clone(), NODE, opts);
    assert_eq!(watcher.prime(Duration::from_secs(2)).await, 0);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(sink.calls().is_empty());
}

/// A service's endpoints spread over several EndpointSlices: the providers are the ready
/// endpoints of all of them (on this node only with `internalTrafficPolicy: Local`); a slice
/// deleted takes its endpoints away, and a not-ready endpoint is no provider.
#[tokio::test(flavor = "current_thread")]
async fn providers_are_the_ready_endpoints_of_every_slice_of_the_service() {
    let api = FakeKube::start();
    api.put(
        "services",
        service(
            "shop",
            "web",
            "10.254.0.10",
            json!([{"name": "http", "port": 80, "targetPort": "web"}]),
        ),
    );
    api.put("endpointslices", web_slice("web-1", &["10.1.0.2"], 8080));
    let mut other_node = web_slice("web-2", &["10.1.0.3"], 8080);
    other_node["endpoints"][0]["nodeName"] = json!("node-b");
    api.put("endpointslices", other_node.clone());
    // Another service's slice is not ours.
    api.put(
        "endpointslices",
        endpoint_slice(
            "shop",
            "db",
            "db-1",
            json!([endpoint("10.1.0.9", NODE)]),
            json!([]),
        ),
    );
    let client = client_of(&api);
    let sink = Arc::new(Recorder::default());
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let task = tokio::task::spawn_local(kubesvc::run(
                client,
                sink.clone(),
                NODE.into(),
                backoff_ms(20, 200),
            ));
            let web = "k8s:shop/web".to_string();
            let web_spec = spec([10, 254, 0, 10], &[(TCP, 80, 8080)]);
            last_call_is(
                &sink,
                &Call::Apply(
                    web.clone(),
                    web_spec.clone(),
                    ips(&[[10, 1, 0, 2], [10, 1, 0, 3]]),
                ),
            )
            .await;
            // Not ready: out.
            let mut not_ready = other_node.clone();
            not_ready["endpoints"][0]["conditions"] =
                json!({"ready": false, "serving": false, "terminating": false});
            api.put("endpointslices", not_ready);
            last_call_is(
                &sink,
                &Call::Apply(web.clone(), web_spec.clone(), ips(&[[10, 1, 0, 2]])),
            )
            .await;
            api.put("endpointslices", other_node.clone());
            last_call_is(
                &sink,
                &Call::Apply(
                    web.clone(),
                    web_spec.clone(),
                    ips(&[[10, 1, 0, 2], [10, 1, 0, 3]]),
                ),
            )
            .await;
            // Local: only this node's endpoint.
            let mut local_svc = service(
                "shop",
                "web",
                "10.254.0.10",
                json!([{"name": "http", "port": 80, "targetPort": "web"}]),
            );
            local_svc["spec"]["internalTrafficPolicy"] = json!("Local");
            api.put("services", local_svc);
            last_call_is(
                &sink,
                &Call::Apply(web.clone(), web_spec.clone(), ips(&[[10, 1, 0, 2]])),
            )
            .await;
            // The only local slice goes: no provider, so new connections are refused (the
            // named port has no number then; any will do).
            api.delete("endpointslices", "shop", "web-1");
            last_call_is(
                &sink,
                &Call::Apply(
                    web.clone(),
                    spec([10, 254, 0, 10], &[(TCP, 80, 80)]),
                    vec![],
                ),
            )
            .await;
            task.abort();
        })
        .await;
}

/// A refused apply (e.g. a VIP a netctl service has) is not taken for done: the next list
/// applies the service again.
#[tokio::test(flavor = "current_thread")]
async fn a_refused_service_is_applied_again_at_the_next_list() {
    let api = FakeKube::start();
    // No bookmark moves the watch's version past the compaction below.
    api.set_bookmark_interval(Duration::from_secs(3600));
    api.put(
        "services",
        service("shop", "web", "10.254.0.10", json!([{"port": 80}])),
    );
    let client = client_of(&api);
    let sink = Arc::new(Recorder {
        refuse: Mutex::new(1),
        ..Recorder::default()
    });
    let opts = backoff_ms(20, 200);
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let task =
                tokio::task::spawn_local(kubesvc::run(client, sink.clone(), NODE.into(), opts));
            watching(&api, "services").await;
            watching(&api, "endpointslices").await;
            let deadline = Instant::now() + Duration::from_secs(5);
            while *sink.refuse.lock().unwrap() > 0 {
                assert!(Instant::now() < deadline, "the service was never applied");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Refused: nothing recorded, and nothing retried while nothing changes.
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(sink.calls().is_empty(), "{:#?}", sink.calls());
            // A re-list: the watch's version is gone (compacted after a later change).
            api.put("namespaces", fake_kube::namespace("shop", &[]));
            api.compact();
            api.close_watches("services");
            let calls = sink.wait_calls(1, "re-list after a refusal").await;
            assert_eq!(
                calls,
                [Call::Apply(
                    "k8s:shop/web".into(),
                    spec([10, 254, 0, 10], &[(TCP, 80, 80)]),
                    vec![]
                )]
            );
            task.abort();
        })
        .await;
}
