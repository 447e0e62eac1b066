//! State survives a netmaster restart: objects, config state and the address map.

use std::time::Duration;

use master::model::{EndpointGroup, Network, Policy, Rule};

use crate::common::*;

#[tokio::test]
async fn state_survives_netmaster_restart() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let mut nm = InProcess::start(&etcd.client_url(), 3).await;
    let c = nm.client();
    c.post(&network("default", "n1", "10.1.1.0/24"))
        .await
        .unwrap();
    c.post(&Policy {
        policy_name: "p1".into(),
        tenant_name: "default".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let rule = Rule {
        rule_id: "1".into(),
        tenant_name: "default".into(),
        policy_name: "p1".into(),
        direction: "in".into(),
        protocol: "tcp".into(),
        port: 80,
        action: "allow".into(),
        ..Default::default()
    };
    c.post(&rule).await.unwrap();
    let g = EndpointGroup {
        group_name: "g1".into(),
        tenant_name: "default".into(),
        network_name: "n1".into(),
        policies: vec!["p1".into()],
        ..Default::default()
    };
    c.post(&g).await.unwrap();
    let ep1 = c
        .create_endpoint(&endpoint_request("n1", "c1"))
        .await
        .unwrap();
    nm.stop();

    let nm2 = InProcess::start(&etcd.client_url(), 3).await;
    let c = nm2.client();
    assert_eq!(
        c.get::<Network>("default:n1").await.unwrap().subnet,
        "10.1.1.0/24"
    );
    assert_eq!(
        c.get::<EndpointGroup>("default:g1").await.unwrap().policies,
        vec!["p1".to_string()]
    );
    assert_eq!(c.list::<Rule>().await.unwrap().len(), 1);
    // The address map persisted: the next endpoint gets the next address; re-creating is idempotent.
    assert_eq!(
        c.create_endpoint(&endpoint_request("n1", "c1"))
            .await
            .unwrap(),
        ep1
    );
    assert_eq!(
        c.create_endpoint(&endpoint_request("n1", "c2"))
            .await
            .unwrap()
            .ip_address,
        "10.1.1.2"
    );
    // The EPG id pool persisted: a new group does not reuse id 1.
    let g2 = EndpointGroup {
        group_name: "g2".into(),
        tenant_name: "default".into(),
        network_name: "n1".into(),
        ..Default::default()
    };
    c.post(&g2).await.unwrap();
    let inspect = c.inspect::<Network>("default:n1").await.unwrap();
    assert_eq!(inspect["Oper"]["numEndpoints"], 2);
    let store = master::store::EtcdStore::connect(&[etcd.client_url()])
        .await
        .unwrap();
    use master::store::StateStore;
    let g2_state = store
        .get("/contiv.io/state/endpointGroups/g2:default")
        .await
        .unwrap()
        .unwrap();
    let g2_state: serde_json::Value = serde_json::from_slice(&g2_state.value).unwrap();
    assert_eq!(g2_state["endpointGroupId"], 2);
    tokio::time::sleep(Duration::from_millis(10)).await;
}
