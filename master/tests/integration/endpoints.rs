//! 500 concurrent `/plugin/createEndpoint` calls on one /22: distinct addresses, and after deleting
//! half the network's bitmap holds exactly the live endpoints.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use master::endpoint::DeleteEndpointRequest;
use master::state::CfgNetworkState;
use master::store::{EtcdStore, StateStore};

use crate::common::*;

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
    let in_map: BTreeSet<Ipv4Addr> = state
        .ip_alloc_map
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

/// Two writers that share nothing but etcd (as two netmasters would, e.g. around a leader change):
/// the revision guards alone keep their allocations apart.
#[tokio::test]
async fn two_writers_on_one_etcd_never_share_an_address() {
    use std::sync::Arc;

    use master::endpoint::create_endpoint;
    use master::model::{Global, Network, Tenant, ops};
    use master::store::txn::Db;

    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let a = Db::new(Arc::new(
        EtcdStore::connect(&[etcd.client_url()]).await.unwrap(),
    ));
    let b = Db::new(Arc::new(
        EtcdStore::connect(&[etcd.client_url()]).await.unwrap(),
    ));
    ops::upsert(&a, "global", Global::defaults("bridge", "default"))
        .await
        .unwrap();
    ops::upsert(&a, "default", Tenant::named("default"))
        .await
        .unwrap();
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
    assert_eq!((state.ep_count, state.ip_alloc_map.count()), (120, 122));
}
