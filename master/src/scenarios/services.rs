//! Service load balancers: providers and preferred VIPs.

use super::*;

fn svc(name: &str, selectors: &[&str], ports: &[&str], ip: &str) -> ServiceLb {
    ServiceLb {
        service_name: name.into(),
        tenant_name: "default".into(),
        network_name: "n1".into(),
        ip_address: ip.into(),
        selectors: selectors.iter().map(|s| s.to_string()).collect(),
        ports: ports.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

async fn svc_state(db: &Db, id: &str) -> CfgServiceLbState {
    serde_json::from_slice(
        &db.store()
            .get(&CfgServiceLbState::key_for(id))
            .await
            .unwrap()
            .unwrap()
            .value,
    )
    .unwrap()
}

#[tokio::test]
async fn service_provider_update() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vxlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    add_net(&db, net("default", "svcnet", "vxlan", "20.1.1.0/24", 0))
        .await
        .unwrap();
    let mut s = svc(
        "s1",
        &["app=web", "tier=fe"],
        &["80:8080:TCP", "643:7070:udp"],
        "",
    );
    s.network_name = "svcnet".into();
    ops::upsert(&db, "default:s1", s.clone()).await.unwrap();
    let st = svc_state(&db, "s1:default").await;
    assert_eq!(st.ipaddress, "20.1.1.1");
    assert_eq!(st.ports, ["80:8080:TCP", "643:7070:UDP"]);
    assert!(st.providers.is_empty());
    let ep = endpoint::create_endpoint(&db, &ep_req("default", "n1", "", "c1"))
        .await
        .unwrap();
    let start = UpdateEndpointRequest {
        IPAddress: ep.ip_address.clone(),
        ContainerID: "c1".into(),
        Labels: [
            ("app".to_string(), "web".to_string()),
            ("tier".to_string(), "fe".to_string()),
        ]
        .into(),
        Tenant: "default".into(),
        Network: "n1".into(),
        Event: "start".into(),
        EndpointID: "c1".into(),
        EPCommonName: "web-1".into(),
    };
    assert_eq!(
        endpoint::update_endpoint(&db, &start)
            .await
            .unwrap()
            .IPAddress,
        "10.1.1.1"
    );
    let st = svc_state(&db, "s1:default").await;
    assert_eq!(
        st.providers.keys().collect::<Vec<_>>(),
        ["10.1.1.1:default"]
    );
    let prov: serde_json::Value = serde_json::from_slice(
        &db.store()
            .get(&keys::state("provider", "s1:default"))
            .await
            .unwrap()
            .unwrap()
            .value,
    )
    .unwrap();
    assert_eq!(prov["Providers"], serde_json::json!(["10.1.1.1"]));
    // A service added after the provider finds it too.
    let mut s2 = svc("s2", &["app=web"], &["80:8080:TCP"], "");
    s2.network_name = "svcnet".into();
    ops::upsert(&db, "default:s2", s2).await.unwrap();
    assert_eq!(svc_state(&db, "s2:default").await.providers.len(), 1);
    let inspect = ops::inspect::<ServiceLb>(&db, "default:s2").await.unwrap();
    assert_eq!(inspect["Oper"]["numProviders"], 1);
    assert_eq!(inspect["Oper"]["providers"][0]["containerName"], "web-1");
    // die removes it; so does deleting the endpoint.
    endpoint::update_endpoint(
        &db,
        &UpdateEndpointRequest {
            Event: "die".into(),
            ..start.clone()
        },
    )
    .await
    .unwrap();
    assert!(svc_state(&db, "s1:default").await.providers.is_empty());
    endpoint::update_endpoint(&db, &start).await.unwrap();
    endpoint::delete_endpoint(
        &db,
        &DeleteEndpointRequest {
            TenantName: "default".into(),
            NetworkName: "n1".into(),
            EndpointID: "c1".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(svc_state(&db, "s2:default").await.providers.is_empty());
    // Port and selector validation covers every entry.
    let bad = svc("s3", &["app=web"], &["80:8080:TCP", "90:9090"], "");
    assert_eq!(status(ops::upsert(&db, "default:s3", bad).await), 400);
    assert_eq!(
        status(ops::upsert(&db, "default:s3", svc("s3", &[], &["80:8080:TCP"], "")).await),
        400
    );
    assert_eq!(
        status(
            ops::upsert(
                &db,
                "default:s3",
                svc("s3", &["a=b=c"], &["80:8080:TCP"], "")
            )
            .await
        ),
        400
    );
    // Services keep their network alive.
    assert_eq!(
        status(ops::delete::<Network>(&db, "default:svcnet").await),
        409
    );
}

#[tokio::test]
async fn service_preferred_ip() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vxlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    ops::upsert(
        &db,
        "default:s1",
        svc("s1", &["app=web"], &["80:8080:TCP"], "10.1.1.50"),
    )
    .await
    .unwrap();
    assert_eq!(svc_state(&db, "s1:default").await.ipaddress, "10.1.1.50");
    assert_eq!(
        status(
            ops::upsert(
                &db,
                "default:s2",
                svc("s2", &["app=db"], &["80:8080:TCP"], "10.1.1.50")
            )
            .await
        ),
        409
    );
    // Changing only the ports keeps the VIP; changing the preferred IP moves it.
    ops::upsert(
        &db,
        "default:s1",
        svc("s1", &["app=web"], &["81:8081:TCP"], "10.1.1.50"),
    )
    .await
    .unwrap();
    assert_eq!(svc_state(&db, "s1:default").await.ipaddress, "10.1.1.50");
    ops::upsert(
        &db,
        "default:s1",
        svc("s1", &["app=web"], &["81:8081:TCP"], "10.1.1.60"),
    )
    .await
    .unwrap();
    assert_eq!(svc_state(&db, "s1:default").await.ipaddress, "10.1.1.60");
    ops::upsert(
        &db,
        "default:s2",
        svc("s2", &["app=db"], &["80:8080:TCP"], "10.1.1.50"),
    )
    .await
    .unwrap();
    ops::delete::<ServiceLb>(&db, "default:s1").await.unwrap();
    assert!(!net_state(&db, "n1.default").await.ip_alloc_map.test(60));
    let services = keys_under(&db, &keys::state_prefix(keys::category::PROVIDER)).await;
    assert_eq!(services.len(), 1);
}
