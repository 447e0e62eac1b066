//! 500 concurrent `/plugin/createEndpoint` calls on one /22: distinct addresses, and after deleting
//! half the network's bitmap holds exactly the live endpoints.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use master::endpoint::DeleteEndpointRequest;
use master::state::CfgNetworkState;
use master::store::{EtcdStore, StateStore};

use crate::common::*;

/// A network's whole address map, read back from its chunks in etcd.
async fn address_map(store: &EtcdStore, state: &CfgNetworkState) -> master::resources::Bitset {
    let db = master::store::txn::Db::new(std::sync::Arc::new(store.clone()));
    db.read(async |tx| master::state::addr_map::network_used(tx, state).await)
        .await
        .unwrap()
}

#[tokio::test]
async fn concurrent_endpoint_creates_on_a_slash22() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let nm = InProcess::start(&etcd.client_url(), 10).await;
    let c = nm.client();
    c.post(&network("default", "big", "10.8.0.0/22"))
        .await
        .unwrap();

    let reqs: Vec<_> = (0..500)
        .map(|i| endpoint_request("big", &format!("ctr{i}")))
        .collect();
    let created = futures::future::join_all(reqs.iter().map(|r| c.create_endpoint(r))).await;
    let eps: Vec<_> = created.into_iter().map(|r| r.unwrap()).collect();
    let ips: BTreeSet<&str> = eps.iter().map(|e| e.ip_address.as_str()).collect();
    assert_eq!(ips.len(), 500, "every endpoint has its own address");

    let dels: Vec<_> = (0..500)
        .step_by(2)
        .map(|i| DeleteEndpointRequest {
            TenantName: "default".into(),
            NetworkName: "big".into(),
            EndpointID: format!("ctr{i}"),
            ..Default::default()
        })
        .collect();
    for r in futures::future::join_all(dels.iter().map(|r| c.delete_endpoint(r))).await {
        r.unwrap();
    }
    let live: BTreeSet<Ipv4Addr> = eps
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, e)| e.ip_address.parse().unwrap())
        .collect();

    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();
    let kv = store
        .get(&CfgNetworkState::key_for("big.default"))
        .await
        .unwrap()
        .unwrap();
    let state: CfgNetworkState = serde_json::from_slice(&kv.value).unwrap();
    let subnet = state.subnet().unwrap();
    let in_map: BTreeSet<Ipv4Addr> = address_map(&store, &state)
        .await
        .ones()
        .filter(|&i| i != 0 && i != subnet.size() - 1)
        .map(|i| subnet.ip_at(i))
        .collect();
    assert_eq!(in_map, live);
    assert_eq!((state.ep_count, state.ep_addr_count), (250, 250));
    let eps_left = store
        .list("/contiv.io/state/eps/")
        .await
        .unwrap()
        .entries
        .len();
    assert_eq!(eps_left, 250);
}

/// Two writers that share nothing but `etcd`, with the global object and tenant `default`.
async fn two_writers(etcd: &testbed::Etcd) -> (master::store::txn::Db, master::store::txn::Db) {
    use master::model::{Global, Tenant, ops};
    use master::store::txn::Db;
    let writer = async || {
        Db::new(std::sync::Arc::new(
            EtcdStore::connect(&[etcd.client_url()]).await.unwrap(),
        ))
    };
    let (a, b) = (writer().await, writer().await);
    ops::upsert(&a, "global", Global::defaults("bridge", "default"))
        .await
        .unwrap();
    ops::upsert(&a, "default", Tenant::named("default"))
        .await
        .unwrap();
    (a, b)
}

/// Two writers that share nothing but etcd (as two netmasters would, e.g. around a leader change):
/// the revision guards alone keep their allocations apart.
#[tokio::test]
async fn two_writers_on_one_etcd_never_share_an_address() {
    use master::endpoint::create_endpoint;
    use master::model::{Network, ops};

    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let (a, b) = two_writers(&etcd).await;
    let net = Network {
        network_name: "n1".into(),
        tenant_name: "default".into(),
        encap: "vxlan".into(),
        subnet: "10.9.0.0/24".into(),
        ..Default::default()
    };
    ops::upsert(&b, "default:n1", net).await.unwrap();

    let reqs: Vec<_> = (0..120)
        .map(|i| endpoint_request("n1", &format!("c{i}")))
        .collect();
    let results = futures::future::join_all(reqs.iter().enumerate().map(|(i, r)| {
        let db = if i % 2 == 0 { a.clone() } else { b.clone() };
        async move { create_endpoint(&db, r).await }
    }))
    .await;
    let ips: BTreeSet<String> = results.into_iter().map(|r| r.unwrap().ip_address).collect();
    assert_eq!(ips.len(), 120);
    let kv = a
        .store()
        .get(&CfgNetworkState::key_for("n1.default"))
        .await
        .unwrap()
        .unwrap();
    let state: CfgNetworkState = serde_json::from_slice(&kv.value).unwrap();
    let used = a
        .read(async |tx| master::state::addr_map::network_used(tx, &state).await)
        .await
        .unwrap();
    assert_eq!((state.ep_count, used.count()), (120, 122));
}

/// The address map is kept in 4,096-address chunks: 400 allocations in flight at once (createEndpoint
/// and allocAddress mixed) on a range that straddles a chunk boundary and holds only 300 addresses.
/// Each address is handed out once, the 100 refused requests leak nothing, every value stays small,
/// and once everything is given back no chunk is left stored.
#[tokio::test]
async fn concurrent_allocations_across_map_chunks_are_unique_and_leak_nothing() {
    use master::endpoint::{AddressAllocRequest, AddressReleaseRequest};

    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let nm = InProcess::start(&etcd.client_url(), 10).await;
    let c = nm.client();
    // Hosts 3,946 ..= 4,245 of the /16: 150 in chunk 0, 150 in chunk 1.
    c.post(&network("default", "wide", "10.7.15.106-10.7.16.149/16"))
        .await
        .unwrap();

    let creates: Vec<_> = (0..200)
        .map(|i| endpoint_request("wide", &format!("w{i}")))
        .collect();
    let alloc = AddressAllocRequest {
        NetworkID: "wide.default".into(),
        ..Default::default()
    };
    let (created, allocated) = futures::future::join(
        futures::future::join_all(creates.iter().map(|r| c.create_endpoint(r))),
        futures::future::join_all((0..200).map(|_| c.alloc_address(&alloc))),
    )
    .await;
    let mut ips: Vec<Ipv4Addr> = Vec::new();
    let mut refused = 0;
    for r in &created {
        match r {
            Ok(ep) => ips.push(ep.ip_address.parse().unwrap()),
            Err(e) => {
                assert!(e.to_string().contains("address exhaustion"), "{e}");
                refused += 1;
            }
        }
    }
    let mut reserved = Vec::new();
    for r in &allocated {
        match r {
            Ok(a) => {
                let ip: Ipv4Addr = a.IPv4Address.split('/').next().unwrap().parse().unwrap();
                ips.push(ip);
                reserved.push(a.IPv4Address.clone());
            }
            Err(e) => {
                assert!(e.to_string().contains("address exhaustion"), "{e}");
                refused += 1;
            }
        }
    }
    let distinct: BTreeSet<Ipv4Addr> = ips.iter().copied().collect();
    assert_eq!((ips.len(), distinct.len(), refused), (300, 300, 100));
    let lo = u32::from(Ipv4Addr::new(10, 7, 15, 106));
    assert!(
        distinct
            .iter()
            .all(|ip| (lo..lo + 300).contains(&u32::from(*ip)))
    );

    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();
    let state_of = async |store: &EtcdStore| -> CfgNetworkState {
        let kv = store
            .get(&CfgNetworkState::key_for("wide.default"))
            .await
            .unwrap()
            .unwrap();
        serde_json::from_slice(&kv.value).unwrap()
    };
    let state = state_of(&store).await;
    assert_eq!(state.ep_addr_count, 300, "refused requests took nothing");
    let subnet = state.subnet().unwrap();
    let in_map: BTreeSet<Ipv4Addr> = address_map(&store, &state)
        .await
        .ones()
        .map(|i| subnet.ip_at(i))
        .filter(|ip| (lo..lo + 300).contains(&u32::from(*ip)))
        .collect();
    assert_eq!(in_map, distinct);
    let chunks = store
        .list(&master::state::addr_map::network_prefix("wide.default"))
        .await
        .unwrap()
        .entries;
    assert_eq!(chunks.len(), 2, "the two chunks the range touches");
    let largest = store
        .list("/contiv.io/")
        .await
        .unwrap()
        .entries
        .iter()
        .map(|kv| kv.value.len())
        .max()
        .unwrap();
    assert!(largest < 4096, "largest stored value {largest} bytes");

    // Give everything back: endpoints deleted, reservations released.
    let dels: Vec<_> = created
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|ep| DeleteEndpointRequest {
            TenantName: "default".into(),
            NetworkName: "wide".into(),
            EndpointID: ep.endpoint_id.clone(),
            ..Default::default()
        })
        .collect();
    let rels: Vec<_> = reserved
        .iter()
        .map(|ip| AddressReleaseRequest {
            NetworkID: "wide.default".into(),
            IPv4Address: ip.clone(),
        })
        .collect();
    let (d, r) = futures::future::join(
        futures::future::join_all(dels.iter().map(|r| c.delete_endpoint(r))),
        futures::future::join_all(rels.iter().map(|r| c.release_address(r))),
    )
    .await;
    d.into_iter().for_each(|r| {
        r.unwrap();
    });
    r.into_iter().for_each(|r| r.unwrap());
    let state = state_of(&store).await;
    assert_eq!((state.ep_count, state.ep_addr_count), (0, 0));
    for prefix in [
        master::state::addr_map::network_prefix("wide.default"),
        master::state::reservations::prefix("wide.default"),
    ] {
        let left = store.list(&prefix).await.unwrap().entries;
        assert!(left.is_empty(), "{prefix}: {} keys left", left.len());
    }
}

/// Two writers sharing only etcd create overlapping networks at once, 40 times over (a /16 and
/// a /24 inside it, from either side): exactly one of each pair lands, the other is refused by
/// name. Both also write the tag pool, whose guard serializes two creates on its own today; the
/// test holds the outcome whichever guard decides it.
#[tokio::test]
async fn overlapping_networks_created_at_once_by_two_writers_never_both_land() {
    use master::model::{Network, ops};

    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let (a, b) = two_writers(&etcd).await;
    let net = |name: &str, subnet: String| Network {
        network_name: name.into(),
        tenant_name: "default".into(),
        encap: "vxlan".into(),
        subnet,
        ..Default::default()
    };
    let mut landed = 0;
    for i in 0..40u32 {
        let (wide, narrow) = (
            net(&format!("w{i}"), format!("10.{}.0.0/16", 100 + i)),
            net(&format!("n{i}"), format!("10.{}.{}.0/24", 100 + i, i)),
        );
        // Alternate which writer takes which side.
        let (dw, dn) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let (kw, kn) = (format!("default:w{i}"), format!("default:n{i}"));
        let (rw, rn) = tokio::join!(ops::upsert(dw, &kw, wide), ops::upsert(dn, &kn, narrow));
        match (&rw, &rn) {
            (Ok(_), Err(e)) | (Err(e), Ok(_)) => {
                assert!(
                    e.to_string().contains("conflicts with subnet"),
                    "pair {i}: {e}"
                );
                landed += 1;
            }
            _ => panic!("pair {i}: both or neither landed: {rw:?} / {rn:?}"),
        }
    }
    assert_eq!(landed, 40);
}

/// The race the prefix-lengths record must not let through: the tenant's networks are all /24s
/// (its record says so), one writer creates a /16 (a length new to the tenant) while the other
/// creates a /24 inside it. The /24's create looks up containing networks only at lengths in the
/// record, so it is the record's guard that must make one of the two see the other.
#[tokio::test]
async fn a_network_at_a_new_prefix_length_and_one_inside_it_never_both_land() {
    use master::model::{Network, Tenant, ops};

    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let (a, b) = two_writers(&etcd).await;
    let net = |tenant: &str, name: &str, subnet: &str| Network {
        network_name: name.into(),
        tenant_name: tenant.into(),
        encap: "vxlan".into(),
        subnet: subnet.into(),
        ..Default::default()
    };
    let mut landed = 0;
    for i in 0..30u32 {
        let tenant = format!("t{i}");
        ops::upsert(&a, &tenant, Tenant::named(&tenant))
            .await
            .unwrap();
        // The tenant's record: /24 only.
        ops::upsert(
            &a,
            &format!("{tenant}:seed"),
            net(&tenant, "seed", "10.50.0.0/24"),
        )
        .await
        .unwrap();
        let wide = net(&tenant, "wide", "10.60.0.0/16");
        let narrow = net(&tenant, "narrow", &format!("10.60.{i}.0/24"));
        let (dw, dn) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let (kw, kn) = (format!("{tenant}:wide"), format!("{tenant}:narrow"));
        let (rw, rn) = tokio::join!(ops::upsert(dw, &kw, wide), ops::upsert(dn, &kn, narrow));
        match (&rw, &rn) {
            (Ok(_), Err(e)) | (Err(e), Ok(_)) => {
                assert!(
                    e.to_string().contains("conflicts with subnet"),
                    "tenant {tenant}: {e}"
                );
                landed += 1;
            }
            _ => panic!("tenant {tenant}: both or neither landed: {rw:?} / {rn:?}"),
        }
    }
    assert_eq!(landed, 30);
}
