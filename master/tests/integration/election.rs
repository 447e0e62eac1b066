//! Two real netmaster processes: exactly one leads, the follower proxies, and killing the leader
//! hands over within the lock TTL.

use std::process::Command;
use std::time::{Duration, Instant};

use master::model::Tenant;

use crate::common::*;

/// "leader", or "follower" once the follower knows who leads.
async fn state(s: &Subprocess) -> Option<String> {
    let info = s.client().info().await.ok()?;
    let state = info["current-state"].as_str()?;
    if state == "follower" && info["leader-ip"].as_str().unwrap_or("").is_empty() {
        return None;
    }
    Some(state.to_string())
}

#[tokio::test]
async fn two_netmasters_elect_one_leader_follower_proxies_and_takes_over() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    const TTL: u64 = 3;
    let a = Subprocess::spawn(&etcd.client_url(), TTL);
    let b = Subprocess::spawn(&etcd.client_url(), TTL);
    let (leader_is_a, _) = eventually(
        "one leader, one follower",
        Duration::from_secs(20),
        || async {
            match (state(&a).await?.as_str(), state(&b).await?.as_str()) {
                ("leader", "follower") => Some((true, ())),
                ("follower", "leader") => Some((false, ())),
                _ => None,
            }
        },
    )
    .await;
    let (mut leader, follower) = if leader_is_a { (a, b) } else { (b, a) };
    // The follower names the leader and proxies writes and reads to it.
    let info = follower.client().info().await.unwrap();
    assert_eq!(info["leader-ip"], leader.addr.as_str());
    eventually(
        "defaults created by the leader",
        Duration::from_secs(10),
        || async { leader.client().get::<Tenant>("default").await.ok() },
    )
    .await;
    follower
        .client()
        .post(&Tenant::named("via-follower"))
        .await
        .unwrap();
    assert!(leader.client().get::<Tenant>("via-follower").await.is_ok());
    let err = follower
        .client()
        .get::<Tenant>("missing")
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(404), "{err}");
    // The leader's message reaches the follower's status line too (Contiv's client prints it).
    let url = follower.url.clone();
    let (code, status, body) = tokio::task::spawn_blocking(move || {
        let wrong_key = r#"{"key":"x","tenantName":"y"}"#;
        crate::contiv_client::request(&url, "POST", "/api/v1/tenants/x/", wrong_key)
    })
    .await
    .unwrap();
    assert_eq!(code, 400, "{status} {body}");
    assert_eq!(status, format!("400 {}", body.trim()));
    // Both are registered.
    let masters = info["netmaster-nodes"].as_array().unwrap().len();
    assert!(masters >= 1);

    // Kill the leader: the follower takes over within the TTL (plus one poll).
    let killed = Instant::now();
    leader.kill();
    eventually(
        "follower becomes leader",
        Duration::from_secs(TTL + 5),
        || async { (state(&follower).await? == "leader").then_some(()) },
    )
    .await;
    let took = killed.elapsed();
    assert!(
        took <= Duration::from_secs(TTL + 2),
        "handover took {took:?}"
    );
    eprintln!("leader handover after kill took {took:?} (lock TTL {TTL}s)");
    assert!(
        follower
            .client()
            .get::<Tenant>("via-follower")
            .await
            .is_ok()
    );
    follower
        .client()
        .post(&Tenant::named("after-handover"))
        .await
        .unwrap();

    // A graceful stop (SIGTERM) releases the lock at once: a new follower takes over well before
    // the TTL would have expired, and the stopped netmaster exits 0.
    let mut leader = follower;
    let next = Subprocess::spawn(&etcd.client_url(), TTL);
    eventually(
        "new follower sees the leader",
        Duration::from_secs(20),
        || async { (state(&next).await? == "follower").then_some(()) },
    )
    .await;
    let stopped = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &leader.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    eventually(
        "next becomes leader",
        Duration::from_secs(TTL + 5),
        || async { (state(&next).await? == "leader").then_some(()) },
    )
    .await;
    let took = stopped.elapsed();
    assert!(
        took < Duration::from_secs(TTL),
        "graceful handover took {took:?}"
    );
    eprintln!("leader handover after SIGTERM took {took:?}");
    assert_eq!(leader.child.wait().unwrap().code(), Some(0));
    assert!(next.client().get::<Tenant>("after-handover").await.is_ok());
}
