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
