//! The etcd sandbox against a real client: put/get, watch, and data surviving a restart.

use etcd_client::{Client, EventType};
use std::time::Duration;
use testbed::{Etcd, pid_alive};

async fn client(etcd: &Etcd) -> Client {
    Client::connect([etcd.endpoint()], None)
        .await
        .expect("connect to the sandbox etcd")
}

#[tokio::test]
async fn put_get_watch_and_restart_keeps_data() {
    testbed::require!(Etcd);
    let mut etcd = Etcd::start().unwrap();
    let mut c = client(&etcd).await;

    c.put("/contiv.io/state/nets/a.default", "{\"id\":\"a\"}", None)
        .await
        .unwrap();
    let got = c
        .get("/contiv.io/state/nets/a.default", None)
        .await
        .unwrap();
    assert_eq!(got.kvs()[0].value_str().unwrap(), "{\"id\":\"a\"}");

    // A watch sees a later write.
    let mut stream = c
        .watch(
            "/contiv.io/state/",
            Some(etcd_client::WatchOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    c.put("/contiv.io/state/nets/b.default", "b", None)
        .await
        .unwrap();
    // The first response only confirms the watch was created; read until an event arrives.
    let event = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let resp = stream.message().await.unwrap().expect("stream open");
            if let Some(e) = resp.events().first() {
                break e.clone();
            }
        }
    })
    .await
    .expect("watch event within 10 s");
    assert_eq!(event.event_type(), EventType::Put);
    assert_eq!(
        event.kv().unwrap().key_str().unwrap(),
        "/contiv.io/state/nets/b.default"
    );
    drop(stream);

    // Stop: the server is gone and the client cannot read.
    let pid = etcd.pid().unwrap();
    etcd.stop();
    assert!(!pid_alive(pid), "etcd pid {pid} still alive after stop");
    let mut offline = Client::connect(
        [etcd.endpoint()],
        Some(etcd_client::ConnectOptions::new().with_timeout(Duration::from_millis(500))),
    )
    .await;
    if let Ok(c) = offline.as_mut() {
        assert!(
            c.get("/contiv.io/state/nets/a.default", None)
                .await
                .is_err()
        );
    }

    // Start again on the same data: both keys are there.
    etcd.start_again().unwrap();
    let mut c = client(&etcd).await;
    let all = c
        .get(
            "/contiv.io/state/nets/",
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    let keys: Vec<_> = all.kvs().iter().map(|kv| kv.key_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "/contiv.io/state/nets/a.default",
            "/contiv.io/state/nets/b.default"
        ]
    );
}

#[tokio::test]
async fn two_sandboxes_are_independent_and_drop_stops_the_process() {
    testbed::require!(Etcd);
    let a = Etcd::start().unwrap();
    let b = Etcd::start().unwrap();
    assert_ne!(a.client_url(), b.client_url());
    client(&a).await.put("k", "in-a", None).await.unwrap();
    let in_b = client(&b).await.get("k", None).await.unwrap();
    assert!(
        in_b.kvs().is_empty(),
        "a write to one sandbox leaked into the other"
    );

    let (pid, dir) = (a.pid().unwrap(), a.data_dir());
    drop(a);
    assert!(!pid_alive(pid), "etcd pid {pid} survived drop");
    assert!(!dir.exists(), "data dir {} survived drop", dir.display());
}
