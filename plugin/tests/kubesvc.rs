//! The Kubernetes Service/Endpoints watcher against a handcrafted API server on 127.0.0.1
//! (real HTTP, lists and chunked watch streams whose events the test sends over time), with a
//! recording sink in place of the driver: what the agents would be told, in order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fake_kube;

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_kube::{FakeKube, TOKEN, endpoints, service};
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

/// List, then ADDED/MODIFIED/DELETED applied in order; a closed stream and a 410 ERROR each
/// lead to a re-list that catches changes no event announced (an add and a delete).
#[tokio::test(flavor = "current_thread")]
async fn watcher_follows_lists_events_and_relists() {
    let api = FakeKube::start();
    // Before netplugin starts: one balanced service, one headless, one malformed.
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
    api.put(
        "services",
        json!({"metadata": {"name": "broken", "namespace": "shop"},
               "spec": {"clusterIP": "10.254.0.66", "ports": [{"port": "eighty"}]}}),
    );
    api.put(
        "endpoints",
        endpoints(
            "shop",
            "web",
            &["10.1.0.2"],
            json!([{"name": "http", "port": 8080}]),
        ),
    );
    let client = client_of(&api);
    let sink = Arc::new(Recorder::default());
    let opts = backoff_ms(20, 200);
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let watcher = tokio::task::spawn_local(kubesvc::run(client, sink.clone(), opts));
            let web = "k8s:shop/web".to_string();
            let web_spec = spec([10, 254, 0, 10], &[(TCP, 80, 8080)]);

            // The lists: the service appears with its provider once both lists are in (an
            // apply before the endpoints list arrives has no providers yet).
            let deadline = Instant::now() + Duration::from_secs(5);
            while sink.calls().last()
                != Some(&Call::Apply(web.clone(), web_spec.clone(), ips(&[[10, 1, 0, 2]])))
            {
                assert!(Instant::now() < deadline, "{:#?}", sink.calls());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(
                sink.calls().iter().all(|c| match c {
                    Call::Apply(n, ..) => n == &web,
                    Call::Remove(_) => false,
                }),
                "headless or malformed services were applied: {:#?}",
                sink.calls()
            );
            watching(&api, "services").await;
            watching(&api, "endpoints").await;
            // Watches start at the list's version.
            let requests = api.requests();
            assert!(
                requests
                    .iter()
                    .any(|r| r.starts_with("/api/v1/services?watch=1&resourceVersion=")
                        && !r.ends_with('=')),
                "{requests:?}"
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
                "endpoints",
                endpoints(
                    "shop",
                    "web",
                    &["10.1.0.3", "10.1.0.2"],
                    json!([{"name": "http", "port": 8080}]),
                ),
            );
            let calls = sink.wait_calls(base + 1, "endpoints MODIFIED").await;
            assert_eq!(
                calls[base],
                Call::Apply(web.clone(), web_spec.clone(), both.clone())
            );
            api.send_line("endpoints", "this is not JSON");
            // The named targetPort resolves through the Endpoints' ports.
            api.put(
                "services",
                service(
                    "shop",
                    "web",
                    "10.254.0.10",
                    json!([{"name": "http", "port": 80, "targetPort": "http"},
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
            // After the garbage line, the endpoints stream still works.
            api.put(
                "endpoints",
                endpoints(
                    "shop",
                    "web",
                    &["10.1.0.3", "10.1.0.2"],
                    json!([{"name": "http", "port": 9090},
                           {"name": "dns", "port": 53, "protocol": "UDP"}]),
                ),
            );
            let calls = sink.wait_calls(base + 3, "endpoints MODIFIED again").await;
            assert_eq!(
                calls[base + 2],
                Call::Apply(
                    web.clone(),
                    spec([10, 254, 0, 10], &[(TCP, 80, 9090), (UDP, 53, 53)]),
                    both.clone()
                )
            );
            // An event split over two chunks, then two events in one chunk.
            let event = |ips: &[&str]| {
                json!({"type": "MODIFIED", "object": endpoints(
                    "shop",
                    "web",
                    ips,
                    json!([{"name": "http", "port": 9090},
                           {"name": "dns", "port": 53, "protocol": "UDP"}]),
                )})
                .to_string()
            };
            let split = event(&["10.1.0.4"]);
            let (head, tail) = split.split_at(split.len() / 2);
            api.send_chunk("endpoints", head);
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(sink.calls().len(), base + 3, "half an event was applied");
            api.send_chunk("endpoints", &format!("{tail}\n"));
            let calls = sink.wait_calls(base + 4, "an event split over two chunks").await;
            let ports = spec([10, 254, 0, 10], &[(TCP, 80, 9090), (UDP, 53, 53)]);
            assert_eq!(
                calls[base + 3],
                Call::Apply(web.clone(), ports.clone(), ips(&[[10, 1, 0, 4]]))
            );
            api.send_chunk(
                "endpoints",
                &format!("{}\n{}\n", event(&["10.1.0.5"]), event(&["10.1.0.3", "10.1.0.2"])),
            );
            let calls = sink.wait_calls(base + 5, "two events in one chunk").await;
            assert_eq!(
                calls[base + 3..],
                [
                    Call::Apply(web.clone(), ports.clone(), ips(&[[10, 1, 0, 4]])),
                    Call::Apply(web.clone(), ports.clone(), ips(&[[10, 1, 0, 5]])),
                    Call::Apply(web.clone(), ports.clone(), both.clone()),
                ]
            );
            let base = base + 3;

            api.delete("services", "shop", "web");
            let calls = sink.wait_calls(base + 4, "service DELETED").await;
            assert_eq!(calls[base + 3], Call::Remove(web.clone()));
            // Its Endpoints going later changes nothing.
            api.delete("endpoints", "shop", "web");

            // A closed stream: the re-list finds a service no event announced.
            let lists = api.lists("services");
            api.put_silently(
                "services",
                service("shop", "api", "10.254.0.20", json!([{"port": 443}])),
            );
            api.close_watches("services");
            let calls = sink.wait_calls(base + 5, "re-list after close").await;
            assert_eq!(
                calls[base + 4],
                Call::Apply(
                    "k8s:shop/api".into(),
                    spec([10, 254, 0, 20], &[(TCP, 443, 443)]),
                    vec![]
                )
            );
            assert!(api.lists("services") > lists);
            watching(&api, "services").await;

            // 410 Gone: the re-list notices a delete no event announced.
            api.delete_silently("services", "shop", "api");
            api.send_line(
                "services",
                r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (50)","reason":"Expired","code":410}}"#,
            );
            let calls = sink.wait_calls(base + 6, "re-list after 410").await;
            assert_eq!(calls[base + 5], Call::Remove("k8s:shop/api".into()));

            // Nothing else happened: no spurious re-applies of unchanged services.
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(sink.calls().len(), base + 6, "{:#?}", sink.calls());
            watcher.abort();
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
            let watcher = tokio::task::spawn_local(kubesvc::run(client, sink.clone(), opts));
            tokio::time::sleep(Duration::from_millis(600)).await;
            assert!(sink.calls().is_empty(), "{:#?}", sink.calls());
            let lists = api.lists("services");
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
            json!([{"port": 80, "targetPort": 8080}]),
        ),
    );
    api.put(
        "endpoints",
        endpoints("shop", "web", &["10.1.0.2"], json!([{"port": 8080}])),
    );
    let client = client_of(&api);
    let sink = Arc::new(Recorder::default());
    let opts = backoff_ms(20, 200);
    let mut watcher = Watcher::new(client, sink.clone(), opts);
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
            watching(&api, "endpoints").await;
            assert_eq!((api.lists("services"), api.lists("endpoints")), (1, 1));
            api.put(
                "endpoints",
                endpoints("shop", "web", &["10.1.0.4"], json!([{"port": 8080}])),
            );
            let calls = sink.wait_calls(2, "endpoints MODIFIED after priming").await;
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
    let mut watcher = Watcher::new(down, sink.clone(), opts);
    assert_eq!(watcher.prime(Duration::from_secs(2)).await, 0);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(sink.calls().is_empty());
}

/// A refused apply (e.g. a VIP a netctl service has) is not taken for done: the next list
/// applies the service again.
#[tokio::test(flavor = "current_thread")]
async fn a_refused_service_is_applied_again_at_the_next_list() {
    let api = FakeKube::start();
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
            let task = tokio::task::spawn_local(kubesvc::run(client, sink.clone(), opts));
            watching(&api, "services").await;
            watching(&api, "endpoints").await;
            let deadline = Instant::now() + Duration::from_secs(5);
            while *sink.refuse.lock().unwrap() > 0 {
                assert!(Instant::now() < deadline, "the service was never applied");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Refused: nothing recorded, and nothing retried while nothing changes.
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(sink.calls().is_empty(), "{:#?}", sink.calls());
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
