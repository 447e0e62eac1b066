//! Host address reserves (`crate::endpoint::reserve`): topped up with a create, claimed by
//! their host only, taken when the network runs out, released when their host is gone; never
//! an address twice.

use std::collections::BTreeSet;

use super::*;
use crate::endpoint::reserve::{self, ReservedAddress};
use crate::endpoint::{EndpointResponse, NewEndpoint};
use crate::registry::ServiceInfo;

/// createEndpoint for `container` on `n1` from `host`, naming `address` (may be empty) and
/// asking for `reserve` addresses in reserve.
fn from_host(host: &str, container: &str, address: &str, reserve: u32) -> CreateEndpointRequest {
    let mut req = ep_req("default", "n1", "", container);
    req.ConfigEP.Host = host.into();
    req.ConfigEP.IPAddress = address.into();
    req.ReserveAddresses = reserve;
    req
}

/// A store with the default tenant and network `n1` on `subnet` (and `ipv6`).
async fn db_with_n1(subnet: &str, ipv6: Option<&str>) -> Db {
    let db = db();
    setup(&db).await;
    let mut n = net("default", "n1", "vxlan", subnet, 0);
    n.ipv6_subnet = ipv6.unwrap_or_default().into();
    add_net(&db, n).await.unwrap();
    db
}

async fn create(db: &Db, req: &CreateEndpointRequest) -> Result<EndpointResponse, Error> {
    let ne = NewEndpoint::parse(req)?;
    db.write(async |tx| endpoint::create_endpoint_in(tx, &ne).await)
        .await
}

fn v4s(reserve: &[ReservedAddress]) -> Vec<&str> {
    reserve.iter().map(|r| r.IPv4Address.as_str()).collect()
}

/// The addresses held in reserve on `n1`, by host.
async fn reserved(db: &Db) -> Vec<(String, String)> {
    let prefix = crate::state::reservations::prefix("n1.default");
    db.store()
        .list(&prefix)
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| {
            let held: crate::state::reservations::HostReservation =
                serde_json::from_slice(&kv.value).unwrap();
            (kv.key[prefix.len()..].to_string(), held.host)
        })
        .collect()
}

/// A dual-stack network's reserve: a create tops it up in the same transaction (an IPv6
/// address with each), a create naming a reserved address claims it (and its IPv6 one) and the
/// next create tops up again; another host cannot take it; inspect lists reserves apart from
/// allocated addresses; releaseAddress leaves them alone; the network deletes with them.
#[tokio::test]
async fn a_reserve_is_topped_up_with_a_create_and_claimed_by_its_host_only() {
    let db = db_with_n1("10.1.1.0/24", Some("2001:db8::/120")).await;

    let first = create(&db, &from_host("host1", "c1", "", 3)).await.unwrap();
    assert_eq!(first.EndpointConfig.ip_address, "10.1.1.1");
    let held = first.HostReserve.expect("a reserve was asked for");
    assert_eq!(v4s(&held), ["10.1.1.2", "10.1.1.3", "10.1.1.4"]);
    assert_eq!(held[0].IPv6Address, "2001:db8::2");
    // The create again (a retried ADD): the same endpoint, no reserve answered or taken.
    let again = create(&db, &from_host("host1", "c1", "", 3)).await.unwrap();
    assert_eq!(again.EndpointConfig, first.EndpointConfig);
    assert_eq!(again.HostReserve, None);
    assert_eq!(reserved(&db).await.len(), 3);

    // The host's next pod names a reserved address: it gets it with its IPv6 partner, and the
    // reserve is topped up again.
    let second = create(&db, &from_host("host1", "c2", "10.1.1.2", 3))
        .await
        .unwrap();
    assert_eq!(second.EndpointConfig.ip_address, "10.1.1.2");
    assert_eq!(second.EndpointConfig.ipv6_address, "2001:db8::2");
    assert_eq!(
        v4s(&second.HostReserve.unwrap()),
        ["10.1.1.3", "10.1.1.4", "10.1.1.5"]
    );

    // Another host cannot claim it, and its own allocation passes the reserve by.
    let err = create(&db, &from_host("host2", "x1", "10.1.1.3", 0))
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), 409);
    assert!(err.to_string().contains("reserve by host host1"), "{err}");
    let other = create(&db, &from_host("host2", "x2", "", 0)).await.unwrap();
    assert_eq!(other.EndpointConfig.ip_address, "10.1.1.6");
    assert_eq!(other.EndpointConfig.ipv6_address, "2001:db8::6");

    // allocAddress's release does not free a host's reserve.
    endpoint::release_address(
        &db,
        &AddressReleaseRequest {
            NetworkID: "n1.default".into(),
            IPv4Address: "10.1.1.3".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(reserved(&db).await.len(), 3);
    assert!(net_map(&db, "n1.default").await.test(3));

    let inspect = ops::inspect::<Network>(&db, "default:n1").await.unwrap();
    assert_eq!(
        inspect["Oper"]["allocatedIPAddresses"],
        "10.1.1.1-10.1.1.2, 10.1.1.6"
    );
    assert_eq!(inspect["Oper"]["allocatedAddressesCount"], 3);
    assert_eq!(
        inspect["Oper"]["hostReservedIPAddresses"],
        "10.1.1.3-10.1.1.5"
    );

    for c in ["c1", "c2", "x2"] {
        endpoint::delete_endpoint(&db, &del_req("default", "n1", c))
            .await
            .unwrap();
    }
    ops::delete::<Network>(&db, "default:n1").await.unwrap();
    assert!(reserved(&db).await.is_empty());
}

/// A /29 (six addresses) one host's reserve takes whole: another host's pod still gets one (out
/// of the reserve), the holder's claim of that one is refused, and asking without an address
/// it gets another. No address is ever handed out twice.
#[tokio::test]
async fn a_full_network_takes_from_a_reserve_and_never_hands_out_twice() {
    let db = db_with_n1("10.1.1.0/29", None).await;
    let first = create(&db, &from_host("host1", "a1", "", 16))
        .await
        .unwrap();
    let held = first.HostReserve.unwrap();
    assert_eq!(held.len(), 5, "the reserve stops where the network ends");
    let stolen = create(&db, &from_host("host2", "b1", "", 0)).await.unwrap();
    let taken = stolen.EndpointConfig.ip_address.clone();
    assert!(v4s(&held).contains(&taken.as_str()));
    let err = create(&db, &from_host("host1", "a2", &taken, 16))
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), 409, "{err}");
    let retried = create(&db, &from_host("host1", "a2", "", 16))
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
    for ip in [
        first.EndpointConfig.ip_address,
        taken,
        retried.EndpointConfig.ip_address,
    ] {
        assert!(seen.insert(ip.clone()), "{ip} handed out twice");
    }
    for (ip, _) in reserved(&db).await {
        assert!(seen.insert(ip.clone()), "{ip} reserved and handed out");
    }
    assert_eq!(seen.len(), 6);
    // The rest of the reserve goes the same way; then the usual exhaustion error.
    for c in ["b2", "b3", "b4"] {
        let ip = create(&db, &from_host("host2", c, "", 0))
            .await
            .unwrap()
            .EndpointConfig
            .ip_address;
        assert!(seen.remove(&ip), "{ip} was not in the reserve");
    }
    assert!(reserved(&db).await.is_empty());
    assert_eq!(
        status(create(&db, &from_host("host2", "b5", "", 0)).await),
        409
    );
}

/// The leader's sweep gives back the reserves of a host with no netplugin registered once it
/// was missing from two sweeps in a row (a restart in between keeps them), and leaves a live
/// host's alone.
#[tokio::test]
async fn a_gone_hosts_reserve_is_released_after_two_sweeps() {
    let db = db_with_n1("10.1.1.0/24", Some("2001:db8::/120")).await;
    let live = ServiceInfo {
        ServiceName: crate::registry::NETPLUGIN.into(),
        HostAddr: "192.0.2.1".into(),
        Port: 9002,
        Hostname: "host1".into(),
        ..Default::default()
    };
    db.store()
        .put(&live.key(), serde_json::to_vec(&live).unwrap())
        .await
        .unwrap();
    create(&db, &from_host("host1", "a1", "", 2)).await.unwrap();
    let gone = create(&db, &from_host("host2", "b1", "", 2)).await.unwrap();
    let gone_held = gone.HostReserve.unwrap();
    assert_eq!(reserved(&db).await.len(), 4);

    let mut absent = BTreeSet::new();
    assert_eq!(reserve::sweep(&db, &mut absent).await.unwrap(), 0);
    assert_eq!(absent, BTreeSet::from(["host2".to_string()]));
    assert_eq!(reserve::sweep(&db, &mut absent).await.unwrap(), 2);
    let left = reserved(&db).await;
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|(_, host)| host == "host1"));
    // The released addresses are free again in both maps.
    let map = net_map(&db, "n1.default").await;
    for r in &gone_held {
        let last: u64 = r.IPv4Address.rsplit('.').next().unwrap().parse().unwrap();
        assert!(!map.test(last), "{} still marked used", r.IPv4Address);
    }
    let mut st = net_state(&db, "n1.default").await;
    let used6 = db
        .read(async |tx| {
            let map6 = crate::state::addr_map6::Ipv6Map::network(&mut st)?;
            map6.expect("dual-stack").used(tx).await
        })
        .await
        .unwrap();
    for r in &gone_held {
        let host6 = u128::from(r.IPv6Address.parse::<std::net::Ipv6Addr>().unwrap()) & 0xff;
        assert!(
            !used6.contains(&host6),
            "{} still marked used",
            r.IPv6Address
        );
    }
    let next = create(&db, &from_host("host3", "c1", "", 0)).await.unwrap();
    assert_eq!(
        next.EndpointConfig.ip_address, gone_held[0].IPv4Address,
        "the first released address is the first free one again"
    );
    assert_eq!(reserve::sweep(&db, &mut absent).await.unwrap(), 0);
}

/// A deleted endpoint's address goes to its host's reserve, which keeps its lowest addresses
/// and frees the rest: the host's next pod gets the lowest address again, as the network's
/// first free one would be. Without a reserve size the address is freed as in Contiv.
#[tokio::test]
async fn a_delete_keeps_the_lowest_addresses_in_the_reserve() {
    let db = db_with_n1("10.1.1.0/24", None).await;
    create(&db, &from_host("host1", "c1", "", 2)).await.unwrap(); // .1; reserve .2 .3
    create(&db, &from_host("host1", "c2", "10.1.1.2", 2))
        .await
        .unwrap(); // reserve .3 .4
    let deleted = db
        .write(async |tx| endpoint::delete_endpoint_in(tx, "n1.default-c1", 2).await)
        .await
        .unwrap();
    assert_eq!(v4s(&deleted.HostReserve.unwrap()), ["10.1.1.1", "10.1.1.3"]);
    let map = net_map(&db, "n1.default").await;
    assert!(!map.test(4), ".4 beyond the reserve's size is freed");
    assert!(map.test(1) && map.test(3));
    let next = create(&db, &from_host("host1", "c3", "10.1.1.1", 2))
        .await
        .unwrap();
    assert_eq!(next.EndpointConfig.ip_address, "10.1.1.1");
    // No reserve size: freed.
    endpoint::delete_endpoint(&db, &del_req("default", "n1", "c2"))
        .await
        .unwrap();
    assert!(!net_map(&db, "n1.default").await.test(2));
}
