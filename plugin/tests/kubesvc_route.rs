//! The pod's service-subnet route (`kubesvc::route`) in a real network namespace, checked
//! with `ip -j route`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use plugin::netlink::in_netns;
use serde_json::Value;
use testbed::Netns;

/// `10.254.0.0/16` on-link (scope link, no gateway) on the link, and adding it again (a
/// retried ADD) succeeds and leaves one route; a missing link is an error naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_subnet_route_is_on_link_and_idempotent() {
    testbed::require!(Root, Ip);
    let pod = Netns::new("svcrt").unwrap();
    pod.exec(&[
        "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "peer0",
    ])
    .unwrap();
    for link in ["eth0", "peer0"] {
        pod.exec(&["ip", "link", "set", link, "up"]).unwrap();
    }
    let subnet: ipnet::Ipv4Net = "10.254.0.0/16".parse().unwrap();
    for _ in 0..2 {
        in_netns(&pod.path(), move |nl| async move {
            nl.add_onlink_route("eth0", subnet).await
        })
        .await
        .unwrap();
    }
    let out = pod.exec(&["ip", "-j", "-4", "route", "show"]).unwrap();
    let routes: Vec<Value> = serde_json::from_str(&out).unwrap();
    let ours: Vec<&Value> = routes
        .iter()
        .filter(|r| r["dst"] == "10.254.0.0/16")
        .collect();
    assert_eq!(ours.len(), 1, "{out}");
    assert_eq!(ours[0]["dev"], "eth0", "{out}");
    assert_eq!(ours[0]["scope"], "link", "{out}");
    assert!(ours[0].get("gateway").is_none(), "{out}");

    let err = in_netns(&pod.path(), move |nl| async move {
        nl.add_onlink_route("eth9", subnet).await
    })
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("eth9"), "{err}");
}
