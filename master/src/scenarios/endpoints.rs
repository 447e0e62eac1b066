//! Endpoints: create/delete, allocAddress reservations, concurrency.

use super::*;

#[tokio::test]
async fn endpoint_create() {
    let db = db();
    setup(&db).await;
    let mut n = net("default", "n1", "vxlan", "20.1.1.0/24", 0);
    n.ipv6_subnet = "2001:db8::/120".into();
    add_net(&db, n).await.unwrap();
    add_epg(&db, epg("default", "g1", "n1")).await.unwrap();
    let ep = endpoint::create_endpoint(&db, &ep_req("default", "n1", "g1", "c1"))
        .await
        .unwrap();
    assert_eq!(ep.id, "n1.default-c1");
    assert_eq!(ep.ip_address, "20.1.1.1");
    assert_eq!(ep.mac_address, "02:02:14:01:01:01");
    assert_eq!(ep.ipv6_address, "2001:db8::1");
    assert_eq!(
        (ep.endpoint_group_id, ep.endpoint_group_key.as_str()),
        (1, "g1:default")
    );
    // Idempotent.
    assert_eq!(
        endpoint::create_endpoint(&db, &ep_req("default", "n1", "g1", "c1"))
            .await
            .unwrap(),
        ep
    );
    assert_eq!(net_state(&db, "n1.default").await.ep_count, 1);
    assert_eq!(epg_state(&db, "g1:default").await.ep_count, 1);
    // allocAddress then createEndpoint with that address claims it without a second allocation.
    let alloc = endpoint::alloc_address(
        &db,
        &AddressAllocRequest {
            NetworkID: "n1.default".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(alloc.IPv4Address, "20.1.1.2/24");
    let mut req = ep_req("default", "n1", "g1", "c2");
    req.ConfigEP.IPAddress = alloc.IPv4Address.clone();
    assert_eq!(
        endpoint::create_endpoint(&db, &req)
            .await
            .unwrap()
            .ip_address,
        "20.1.1.2"
    );
    assert_eq!(
        endpoint::create_endpoint(&db, &ep_req("default", "n1", "", "c3"))
            .await
            .unwrap()
            .ip_address,
        "20.1.1.3"
    );
    // By pool, and release.
    let by_pool = endpoint::alloc_address(
        &db,
        &AddressAllocRequest {
            AddressPool: "20.1.1.0/24".into(),
            PreferredIPv4Address: "20.1.1.100".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        (by_pool.NetworkID.as_str(), by_pool.IPv4Address.as_str()),
        ("n1.default", "20.1.1.100/24")
    );
    endpoint::release_address(
        &db,
        &AddressReleaseRequest {
            NetworkID: "n1.default".into(),
            IPv4Address: "20.1.1.100".into(),
        },
    )
    .await
    .unwrap();
    assert!(!net_map(&db, "n1.default").await.test(100));
    // Inspect by container id substring.
    let inspect = endpoint::inspect_endpoint(&db, "c2").await.unwrap();
    assert_eq!(inspect["Oper"]["ipAddress"][0], "20.1.1.2");
    assert_eq!(inspect["Oper"]["network"], "n1.default");
    assert_eq!(status(endpoint::inspect_endpoint(&db, "zzz").await), 404);
    // Network and EPG are kept alive by endpoints.
    assert_eq!(status(ops::delete::<Network>(&db, "default:n1").await), 409);
    let err = ops::delete::<EndpointGroup>(&db, "default:g1")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("active endpoints"), "{err}");
    // Unknown EPG / network.
    assert_eq!(
        status(endpoint::create_endpoint(&db, &ep_req("default", "n1", "nope", "c9")).await),
        404
    );
    assert_eq!(
        status(endpoint::create_endpoint(&db, &ep_req("default", "nope", "", "c9")).await),
        404
    );
    // Delete frees everything; cleanup by network removes the rest.
    let del = endpoint::delete_endpoint(&db, &del_req("default", "n1", "c1"))
        .await
        .unwrap();
    assert_eq!(del.ip_address, "20.1.1.1");
    assert_eq!(
        status(endpoint::delete_endpoint(&db, &del_req("default", "n1", "c1")).await),
        404
    );
    assert_eq!(
        endpoint::cleanup(&db, "default", "net", "n1")
            .await
            .unwrap()
            .len(),
        2
    );
    let st = net_state(&db, "n1.default").await;
    assert_eq!((st.ep_count, st.ep_addr_count), (0, 0));
    assert_eq!(net_map(&db, "n1.default").await.count(), 2);
    assert!(st.ipv6_alloc_map.is_empty());
    assert!(
        keys_under(&db, &keys::state_prefix(keys::category::EPS))
            .await
            .is_empty()
    );
    ops::delete::<EndpointGroup>(&db, "default:g1")
        .await
        .unwrap();
    ops::delete::<Network>(&db, "default:n1").await.unwrap();
}

#[tokio::test]
async fn concurrent_endpoint_creates_get_distinct_addresses() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vxlan", "10.1.0.0/24", 0))
        .await
        .unwrap();
    let reqs: Vec<CreateEndpointRequest> = (0..200)
        .map(|i| ep_req("default", "n1", "", &format!("c{i}")))
        .collect();
    let results =
        futures::future::join_all(reqs.iter().map(|r| endpoint::create_endpoint(&db, r))).await;
    let ok: Vec<CfgEndpointState> = results.into_iter().filter_map(Result::ok).collect();
    // 254 usable addresses: all 200 succeed, all distinct.
    assert_eq!(ok.len(), 200);
    let mut ips: Vec<&str> = ok.iter().map(|e| e.ip_address.as_str()).collect();
    ips.sort_unstable();
    ips.dedup();
    assert_eq!(ips.len(), 200);
    assert_eq!(net_state(&db, "n1.default").await.ep_count, 200);
}

#[tokio::test]
async fn preallocated_addresses_cannot_be_shared_or_freed_twice() {
    let db = db();
    setup(&db).await;
    let mut n = net("default", "n1", "vxlan", "10.1.1.0/24", 0);
    n.gateway = "10.1.1.254".into();
    add_net(&db, n).await.unwrap();
    let alloc = endpoint::alloc_address(
        &db,
        &AddressAllocRequest {
            NetworkID: "n1.default".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(alloc.IPv4Address, "10.1.1.1/24");
    let mut a = ep_req("default", "n1", "", "a");
    a.ConfigEP.IPAddress = "10.1.1.1".into();
    endpoint::create_endpoint(&db, &a).await.unwrap();
    // The same address for another container, the gateway, the network or broadcast address: refused.
    for taken in ["10.1.1.1", "10.1.1.254", "10.1.1.0", "10.1.1.255"] {
        let mut b = ep_req("default", "n1", "", "b");
        b.ConfigEP.IPAddress = taken.into();
        assert_eq!(
            status(endpoint::create_endpoint(&db, &b).await),
            409,
            "{taken}"
        );
    }
    // Docker's order: deleteEndpoint frees the address, a later releaseAddress must not free it
    // again once another endpoint holds it.
    endpoint::delete_endpoint(&db, &del_req("default", "n1", "a"))
        .await
        .unwrap();
    let c = endpoint::create_endpoint(&db, &ep_req("default", "n1", "", "c"))
        .await
        .unwrap();
    assert_eq!(c.ip_address, "10.1.1.1");
    endpoint::release_address(
        &db,
        &AddressReleaseRequest {
            NetworkID: "n1.default".into(),
            IPv4Address: alloc.IPv4Address,
        },
    )
    .await
    .unwrap();
    assert!(
        net_map(&db, "n1.default").await.test(1),
        "the live endpoint keeps its address"
    );
    assert_eq!(
        endpoint::create_endpoint(&db, &ep_req("default", "n1", "", "d"))
            .await
            .unwrap()
            .ip_address,
        "10.1.1.2"
    );
}

/// Upgrade: a network state of the previous layout (its whole map in `ipAllocMap`, reservations in
/// `ipReservations`) keeps every address it had used, whether the leader-start conversion runs
/// first or an allocation meets the old record first; a /12 with used addresses in every chunk
/// converts into 256 chunk keys, over etcd's 128 writes per transaction.
#[tokio::test]
async fn previous_address_map_layout_is_converted() {
    use crate::resources::Bitset;
    use crate::state::addr_map::{self, CHUNK_BITS};

    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "big", "vxlan", "10.16.0.0/12", 0))
        .await
        .unwrap();
    add_net(&db, net("default", "small", "vxlan", "10.32.1.0/24", 0))
        .await
        .unwrap();
    // Rewrite both states as the previous layout stored them.
    let legacy = async |id: &str, used: &[u64], reserved: &[&str]| {
        let mut st = net_state(&db, id).await;
        let subnet = st.subnet().unwrap();
        let mut map = subnet.new_alloc_map(None);
        for &i in used {
            map.set(i);
        }
        st.ip_alloc_map = map;
        st.ip_alloc_full = Bitset::default();
        st.ip_reservations = reserved.iter().map(|s| s.to_string()).collect();
        db.store()
            .put(
                &CfgNetworkState::key_for(id),
                serde_json::to_vec(&st).unwrap(),
            )
            .await
            .unwrap();
    };
    let big_used: Vec<u64> = (0..256).map(|c| c * CHUNK_BITS + 7).collect();
    legacy("big.default", &big_used, &["10.16.0.7"]).await;
    legacy("small.default", &[1, 2, 5], &["10.32.1.5"]).await;
    // The small network meets an allocation before any conversion: 3 and 4 are free, 5 reserved.
    let ip = |c: &str| {
        let r = ep_req("default", "small", "", c);
        let db = db.clone();
        async move { endpoint::create_endpoint(&db, &r).await.unwrap().ip_address }
    };
    assert_eq!(ip("s1").await, "10.32.1.3");
    assert_eq!(ip("s2").await, "10.32.1.4");
    assert_eq!(ip("s3").await, "10.32.1.6");
    let st = net_state(&db, "small.default").await;
    assert!(st.ip_alloc_map.is_empty(), "the map went into chunks");
    assert_eq!(st.ip_reservations.len(), 1, "still honoured where it was");
    let mut req = ep_req("default", "small", "", "s4");
    req.ConfigEP.IPAddress = "10.32.1.5".into();
    assert_eq!(
        endpoint::create_endpoint(&db, &req)
            .await
            .unwrap()
            .ip_address,
        "10.32.1.5",
        "the old reservation is claimed"
    );
    assert!(
        net_state(&db, "small.default")
            .await
            .ip_reservations
            .is_empty()
    );

    // Leader start converts the big one.
    assert_eq!(addr_map::convert_all(&db).await.unwrap(), 1);
    let st = net_state(&db, "big.default").await;
    assert!(st.ip_alloc_map.is_empty() && st.ip_reservations.is_empty());
    let chunks = keys_under(&db, &addr_map::network_prefix("big.default")).await;
    assert_eq!(chunks.len(), 256);
    let map = net_map(&db, "big.default").await;
    for &i in &big_used {
        assert!(map.test(i), "host {i} stays used");
    }
    assert_eq!(
        map.count(),
        256 + 2,
        "network, broadcast and the used hosts"
    );
    assert_eq!(
        keys_under(&db, &crate::state::reservations::prefix("big.default")).await,
        vec!["/contiv.io/state/ipReservations/big.default/10.16.0.7".to_string()]
    );
    assert_eq!(addr_map::convert_all(&db).await.unwrap(), 0, "nothing left");
    // Releasing the converted reservation frees it; the next allocation takes 10.16.0.1.
    endpoint::release_address(
        &db,
        &AddressReleaseRequest {
            NetworkID: "big.default".into(),
            IPv4Address: "10.16.0.7/12".into(),
        },
    )
    .await
    .unwrap();
    assert!(!net_map(&db, "big.default").await.test(7));
    let e = endpoint::create_endpoint(&db, &ep_req("default", "big", "", "b1"))
        .await
        .unwrap();
    assert_eq!(e.ip_address, "10.16.0.1");
}

#[tokio::test]
async fn ipv6_allocations_write_small_records_and_the_previous_layout_is_converted() {
    use crate::state::addr_map::convert_all;
    use crate::state::addr_map6::network_prefix;

    let db = db();
    setup(&db).await;
    let mut n = net("default", "v6", "vxlan", "20.2.0.0/16", 0);
    n.ipv6_subnet = "2001:db8::/64".into();
    n.ipv6_gateway = "2001:db8::1".into();
    add_net(&db, n).await.unwrap();
    assert!(
        keys_under(&db, &network_prefix("v6.default"))
            .await
            .is_empty(),
        "a new network stores no IPv6 chunk"
    );
    // 20 endpoints: host ids 2..=21 (the gateway is 1); then, from a cursor near the end of the
    // first chunk, 10 more: 4091..=4100, across two chunks.
    let create = async |i: usize| {
        endpoint::create_endpoint(&db, &ep_req("default", "v6", "", &format!("c{i}")))
            .await
            .unwrap()
            .ipv6_address
    };
    let v6 = |host: u128| std::net::Ipv6Addr::from(0x2001_0db8_u128 << 96 | host).to_string();
    for i in 0..20 {
        assert_eq!(create(i).await, v6(i as u128 + 2));
    }
    let mut st = net_state(&db, "v6.default").await;
    st.ipv6_last_host = "4090".into();
    db.store()
        .put(
            &CfgNetworkState::key_for("v6.default"),
            serde_json::to_vec(&st).unwrap(),
        )
        .await
        .unwrap();
    for i in 20..30 {
        assert_eq!(create(i).await, v6(i as u128 + 4071));
    }
    let key = CfgNetworkState::key_for("v6.default");
    let record = db.store().get(&key).await.unwrap().unwrap().value;
    assert!(record.len() < 1024, "network record {} bytes", record.len());
    let chunks = keys_under(&db, &network_prefix("v6.default")).await;
    assert_eq!(chunks.len(), 2, "{chunks:?}");
    for c in &chunks {
        let v = db.store().get(c).await.unwrap().unwrap().value;
        assert!(v.len() < 1024, "chunk {c}: {} bytes", v.len());
    }
    // A freed address is not handed out again before the cursor wraps (Contiv's order); a
    // preferred one is checked against the chunk.
    let del = |c: &str| del_req("default", "v6", c);
    endpoint::delete_endpoint(&db, &del("c10")).await.unwrap();
    let next = endpoint::create_endpoint(&db, &ep_req("default", "v6", "", "d1"))
        .await
        .unwrap();
    assert_eq!(
        next.ipv6_address, "2001:db8::1005",
        "host 4101, after the cursor"
    );
    let mut req = ep_req("default", "v6", "", "d2");
    req.ConfigEP.IPv6Address = "2001:db8::5".into();
    assert_eq!(status(endpoint::create_endpoint(&db, &req).await), 409);
    req.ConfigEP.IPv6Address = "2001:db8::c".into();
    assert_eq!(
        endpoint::create_endpoint(&db, &req)
            .await
            .unwrap()
            .ipv6_address,
        "2001:db8::c"
    );
    req.ConfigEP.Container = "d3".into();
    req.ConfigEP.IPv6Address = "2001:db8::1".into();
    assert_eq!(
        status(endpoint::create_endpoint(&db, &req).await),
        409,
        "the gateway is never handed out"
    );

    // The previous layout: every host id in the record. Converted by the first allocation...
    let mut legacy = net("default", "old", "vxlan", "20.3.0.0/16", 0);
    legacy.ipv6_subnet = "2001:db9::/64".into();
    add_net(&db, legacy).await.unwrap();
    let old_key = CfgNetworkState::key_for("old.default");
    let write_legacy = async |hosts: &[&str], last: &str| {
        let mut st = net_state(&db, "old.default").await;
        st.ipv6_alloc_map = hosts.iter().map(|h| (h.to_string(), true)).collect();
        st.ipv6_last_host = last.into();
        db.store()
            .put(&old_key, serde_json::to_vec(&st).unwrap())
            .await
            .unwrap();
    };
    write_legacy(&["1", "2", "3", "9000"], "3").await;
    let ep = endpoint::create_endpoint(&db, &ep_req("default", "old", "", "o1"))
        .await
        .unwrap();
    assert_eq!(ep.ipv6_address, "2001:db9::4");
    assert!(
        net_state(&db, "old.default")
            .await
            .ipv6_alloc_map
            .is_empty()
    );
    assert_eq!(
        keys_under(&db, &network_prefix("old.default")).await.len(),
        2
    );
    let mut req = ep_req("default", "old", "", "o2");
    req.ConfigEP.IPv6Address = "2001:db9::2328".into(); // host 9000
    assert_eq!(status(endpoint::create_endpoint(&db, &req).await), 409);
    // ... or at leader start.
    write_legacy(&["7", "70000"], "7").await;
    assert_eq!(convert_all(&db).await.unwrap(), 1);
    assert!(
        net_state(&db, "old.default")
            .await
            .ipv6_alloc_map
            .is_empty()
    );
    let chunks = keys_under(&db, &network_prefix("old.default")).await;
    assert_eq!(
        chunks,
        vec![
            format!("{}0", network_prefix("old.default")),
            format!("{}17", network_prefix("old.default")),
        ],
        "stale chunks of the first conversion are gone"
    );
    assert_eq!(
        endpoint::create_endpoint(&db, &ep_req("default", "old", "", "o3"))
            .await
            .unwrap()
            .ipv6_address,
        "2001:db9::8"
    );
    // Deleting the network deletes its chunks.
    for c in ["o1", "o3"] {
        let mut d = del(c);
        d.NetworkName = "old".into();
        endpoint::delete_endpoint(&db, &d).await.unwrap();
    }
    ops::delete::<Network>(&db, "default:old").await.unwrap();
    assert!(
        keys_under(&db, &network_prefix("old.default"))
            .await
            .is_empty()
    );
}
