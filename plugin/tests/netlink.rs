//! Netlink plumbing against real network namespaces (testbed::Netns), checked with `ip -j`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use plugin::netlink::{
    MacAddr, Netlink, NetlinkError, PodInterface, PodInterfaceSpec, in_netns, pod_interface,
};
use serde_json::Value;
use testbed::Netns;

fn spec(pod: &Path, n: u32) -> PodInterfaceSpec {
    PodInterfaceSpec {
        netns: pod.to_path_buf(),
        host_name: format!("vvport{n}"),
        ifname: "eth0".into(),
        mtu: 1450,
        mac: Some("02:02:0a:01:01:02".parse().unwrap()),
        addresses: vec![
            "10.1.1.2/24".parse().unwrap(),
            "fd00:1::2/64".parse().unwrap(),
        ],
        gateways: vec!["10.1.1.1".parse().unwrap(), "fd00:1::1".parse().unwrap()],
    }
}

/// `ip -j link` of a namespace, as (name, json) pairs.
fn links(ns: &Netns) -> Vec<(String, Value)> {
    let out = ns.exec(&["ip", "-j", "link", "show"]).unwrap();
    let parsed: Value = serde_json::from_str(&out).unwrap();
    parsed
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["ifname"].as_str().unwrap().to_string(), l.clone()))
        .collect()
}

fn link_names(ns: &Netns) -> Vec<String> {
    links(ns).into_iter().map(|(n, _)| n).collect()
}

async fn plumb(host: &Netns, spec: PodInterfaceSpec) -> Result<PodInterface, NetlinkError> {
    in_netns(
        &host.path(),
        move |nl| async move { nl.plumb_pod(&spec).await },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_interface_is_plumbed_checked_and_removed() {
    testbed::require!(Root, Ip);
    let host = Netns::new("host").unwrap();
    let pod = Netns::new("pod").unwrap();
    let done = plumb(&host, spec(&pod.path(), 1)).await.unwrap();

    // Inside the pod: eth0 with MAC, MTU, both addresses, up.
    let addr: Value =
        serde_json::from_str(&pod.exec(&["ip", "-j", "addr", "show", "eth0"]).unwrap()).unwrap();
    let eth0 = &addr[0];
    assert_eq!(eth0["address"], "02:02:0a:01:01:02");
    assert_eq!(eth0["mtu"], 1450);
    assert_eq!(eth0["ifindex"].as_u64().unwrap(), u64::from(done.pod.index));
    assert!(
        eth0["flags"]
            .as_array()
            .unwrap()
            .contains(&Value::from("UP"))
    );
    let addrs: Vec<String> = eth0["addr_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
        .collect();
    assert!(addrs.contains(&"10.1.1.2/24".to_string()), "{addrs:?}");
    assert!(addrs.contains(&"fd00:1::2/64".to_string()), "{addrs:?}");
    assert_eq!(done.pod.mac, Some("02:02:0a:01:01:02".parse().unwrap()));
    let routes4 = pod.exec(&["ip", "route"]).unwrap();
    assert!(
        routes4.contains("default via 10.1.1.1 dev eth0"),
        "{routes4}"
    );
    let routes6 = pod.exec(&["ip", "-6", "route"]).unwrap();
    assert!(
        routes6.contains("default via fd00:1::1 dev eth0"),
        "{routes6}"
    );
    let mut in_pod = link_names(&pod);
    in_pod.sort();
    assert_eq!(in_pod, vec!["eth0", "lo"]);

    // On the host: the OVS end, up, same MTU; the pod end is gone from here.
    let host_links = links(&host);
    let (_, vv) = host_links.iter().find(|(n, _)| n == "vvport1").unwrap();
    assert_eq!(vv["mtu"], 1450);
    assert!(vv["flags"].as_array().unwrap().contains(&Value::from("UP")));
    assert_eq!(vv["ifindex"].as_u64().unwrap(), u64::from(done.host.index));
    assert_eq!(host_links.len(), 2, "only lo and vvport1 on the host");

    // CHECK's view.
    let state = pod_interface(&pod.path(), "eth0").await.unwrap().unwrap();
    assert_eq!(state.link.index, done.pod.index);
    assert!(
        state
            .addresses
            .contains(&"10.1.1.2/24".parse::<IpNet>().unwrap())
    );
    assert!(
        state
            .default_routes
            .contains(&("10.1.1.1".parse::<IpAddr>().unwrap(), done.pod.index))
    );

    // DEL, twice.
    let pod_path = pod.path();
    let deleted = in_netns(&host.path(), move |nl| async move {
        let first = nl.unplumb_pod(Some(&pod_path), "eth0", "vvport1").await?;
        let second = nl.unplumb_pod(Some(&pod_path), "eth0", "vvport1").await?;
        Ok((first, second))
    })
    .await
    .unwrap();
    assert_eq!(deleted, (true, false));
    assert_eq!(link_names(&pod), vec!["lo".to_string()]);
    assert_eq!(link_names(&host), vec!["lo".to_string()]);
    assert!(pod_interface(&pod.path(), "eth0").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_plumb_leaves_nothing_behind() {
    testbed::require!(Root, Ip);
    let host = Netns::new("host").unwrap();
    let pod = Netns::new("pod").unwrap();

    // The pod namespace does not exist: fails when moving, before anything enters a pod.
    let err = plumb(&host, spec(Path::new("/var/run/netns/no-such-ns-4711"), 2))
        .await
        .unwrap_err();
    assert!(matches!(err, NetlinkError::Namespace { .. }), "{err}");
    assert_eq!(link_names(&host), vec!["lo".to_string()]);

    // eth0 already exists in the pod (this kernel has no dummy links; a veth does): the
    // kernel refuses to create the pair, and the pod's own eth0 is untouched.
    pod.exec(&[
        "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p",
    ])
    .unwrap();
    let err = plumb(&host, spec(&pod.path(), 3)).await.unwrap_err();
    assert_eq!(err.errno(), Some(17), "EEXIST expected: {err}");
    assert!(
        err.to_string().contains("create veth pair vvport3"),
        "{err}"
    );
    assert_eq!(link_names(&host), vec!["lo".to_string()]);
    let mut in_pod = link_names(&pod);
    in_pod.sort();
    assert_eq!(in_pod, vec!["eth0", "eth0p", "lo"]);

    // Failure after the pair exists (a gateway outside the pod's subnet cannot be routed):
    // both ends are removed.
    let other = Netns::new("pod").unwrap();
    let mut unroutable = spec(&other.path(), 4);
    unroutable.gateways = vec!["192.168.99.1".parse().unwrap()];
    let err = plumb(&host, unroutable).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("add default route via 192.168.99.1"),
        "{err}"
    );
    assert_eq!(link_names(&host), vec!["lo".to_string()]);
    assert_eq!(link_names(&other), vec!["lo".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_by_proc_path_and_caller_namespace_untouched() {
    testbed::require!(Root, Ip);
    let pod = Netns::new("pod").unwrap();
    pod.exec(&[
        "ip", "link", "add", "marker0", "type", "veth", "peer", "name", "marker1",
    ])
    .unwrap();
    let mut sleeper = std::process::Command::new("ip")
        .args(["netns", "exec", pod.name(), "sleep", "30"])
        .spawn()
        .unwrap();
    let proc_path = PathBuf::from(format!("/proc/{}/ns/net", sleeper.id()));
    // `ip netns exec` enters the namespace before exec'ing sleep; wait until it has.
    let target = std::fs::read_link(pod.path()).ok();
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    for _ in 0..200 {
        let now = std::fs::read_link(&proc_path).ok();
        if now.is_some() && now.as_ref() != Some(&own) && (target.is_none() || now == target) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let before = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
    let found = in_netns(&proc_path, |nl| async move { nl.link("marker0").await })
        .await
        .unwrap();
    assert!(found.is_some());
    let after = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
    assert_eq!(before, after, "the calling thread stays in its namespace");
    // The process's own namespace has no marker0.
    let here = Netlink::connect().unwrap();
    assert!(here.link("marker0").await.unwrap().is_none());
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[tokio::test]
async fn lookups_and_deletes_of_missing_links_succeed() {
    let nl = Netlink::connect().unwrap();
    let lo = nl.link("lo").await.unwrap().unwrap();
    assert_eq!(lo.index, 1);
    assert!(nl.link("nosuchlink0").await.unwrap().is_none());
    assert!(!nl.delete_link("nosuchlink0").await.unwrap());
    let err = nl.require_link("nosuchlink0").await.unwrap_err();
    assert!(
        matches!(&err, NetlinkError::LinkNotFound { name, .. } if name == "nosuchlink0"),
        "{err}"
    );
    let err = nl
        .rename("lo", "name-too-long-for-linux")
        .await
        .unwrap_err();
    assert!(matches!(err, NetlinkError::Invalid { .. }), "{err}");
    assert!("zz".parse::<MacAddr>().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_link_operations() {
    testbed::require!(Root, Ip);
    let a = Netns::new("la").unwrap();
    let b = Netns::new("lb").unwrap();
    let b_path = b.path();
    let mac: MacAddr = "02:00:00:00:00:0a".parse().unwrap();
    in_netns(&a.path(), move |nl| async move {
        nl.create_veth("left0", "right0").await?;
        nl.set_mtu("left0", 1400).await?;
        nl.set_mac("left0", mac).await?;
        nl.rename("left0", "left1").await?;
        nl.set_up("left1").await?;
        nl.move_to_netns("right0", &b_path).await?;
        let left = nl.require_link("left1").await?;
        assert_eq!((left.mtu, left.mac, left.up), (1400, Some(mac), true));
        assert!(nl.link("right0").await?.is_none(), "moved away");
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(link_names(&b).len(), 2);
    assert!(link_names(&b).contains(&"right0".to_string()));
    let a_links = links(&a);
    let (_, left) = a_links.iter().find(|(n, _)| n == "left1").unwrap();
    assert_eq!(left["address"], "02:00:00:00:00:0a");
    assert_eq!(left["mtu"], 1400);
}

/// A pod's veth as an attach makes it: one request makes the host end up and the pod end
/// (down) in the pod namespace; a leftover host end of an interrupted attempt (here its pod
/// end lives in a namespace gone stale) is replaced, and a pod interface of that name that
/// is not ours fails the call and is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_veth_is_made_up_in_one_request_and_replaces_a_leftover() {
    testbed::require!(Root, Ip);
    let host = Netns::new("vh").unwrap();
    let pod = Netns::new("vp").unwrap();
    let other = Netns::new("vo").unwrap();
    let (pod_path, other_path) = (pod.path(), other.path());
    in_netns(&host.path(), move |nl| async move {
        // The leftover: same host name, its pod end in another namespace.
        nl.create_veth_into("vvport7", "eth0", &other_path, 1500, None)
            .await?;
        nl.create_veth_into("vvport7", "eth0", &pod_path, 1450, None)
            .await?;
        let host_end = nl.require_link("vvport7").await?;
        assert_eq!((host_end.mtu, host_end.up), (1450, true));
        // The pod already has an eth0 that is not ours: an error, and it stays.
        let err = nl
            .create_veth_into("vvport8", "eth0", &pod_path, 1450, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("vvport8"), "{err}");
        Ok(())
    })
    .await
    .unwrap();
    let pod_links = links(&pod);
    let (_, eth0) = pod_links.iter().find(|(n, _)| n == "eth0").unwrap();
    assert_eq!(eth0["mtu"], 1450);
    assert!(
        !eth0["flags"].as_array().unwrap().iter().any(|f| f == "UP"),
        "the pod end waits for its addresses down: {eth0}"
    );
    assert!(
        !link_names(&other).contains(&"eth0".to_string()),
        "the leftover's pod end went with it"
    );
    assert!(!link_names(&host).contains(&"vvport8".to_string()));
}

/// `ethtool -k` of a link in a namespace: feature name → on.
fn features(ns: &Netns, ifname: &str) -> std::collections::BTreeMap<String, bool> {
    ns.exec(&["ethtool", "-k", ifname])
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (name, state) = l.trim().split_once(": ")?;
            Some((name.to_string(), state.starts_with("on")))
        })
        .collect()
}

/// Transmit checksum offload off over ethtool's generic netlink, from a thread inside the
/// pod namespace (as the pod side of an attach does): what `ethtool -K <if> tx off` does, and
/// only on that interface; an unknown interface is an error naming ENODEV.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tx_checksum_offload_is_turned_off_over_netlink() {
    testbed::require!(Root, Ip, Ethtool);
    let pod = Netns::new("pod").unwrap();
    pod.exec(&[
        "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth1",
    ])
    .unwrap();
    assert!(
        features(&pod, "eth0")["tx-checksum-ip-generic"],
        "veth starts with it on"
    );
    let done = in_netns(&pod.path(), |_nl| async {
        Ok(plugin::netlink::ethtool::disable_tx_checksum("eth0"))
    })
    .await
    .unwrap();
    done.unwrap();
    let after = features(&pod, "eth0");
    assert!(!after["tx-checksumming"], "{after:?}");
    assert!(!after["tx-checksum-ip-generic"], "{after:?}");
    assert!(
        features(&pod, "eth1")["tx-checksum-ip-generic"],
        "the peer is untouched"
    );
    let missing = in_netns(&pod.path(), |_nl| async {
        Ok(plugin::netlink::ethtool::disable_tx_checksum("nosuchif0"))
    })
    .await
    .unwrap();
    let err = missing.unwrap_err();
    assert_eq!(err.raw_os_error(), Some(19), "{err}");
}
