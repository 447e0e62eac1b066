//! Service load balancers: providers and preferred VIPs.

use super::*;
use futures::TryFutureExt;

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

/// A service's stored record, with the providers joined in from their keys (as readers do).
pub(crate) async fn svc_state(db: &Db, id: &str) -> CfgServiceLbState {
    let stored: CfgServiceLbState = serde_json::from_slice(
        &db.store()
            .get(&CfgServiceLbState::key_for(id))
            .await
            .unwrap()
            .unwrap()
            .value,
    )
    .unwrap();
    assert!(stored.providers.is_empty(), "providers are their own keys");
    let mut all = [stored];
    db.read(async |tx| crate::model::service_lb::load_providers(tx, &mut all).await)
        .await
        .unwrap();
    let [joined] = all;
    joined
}

/// A store with the defaults and network `n1` (10.1.1.0/24) of the default tenant.
async fn db_with_n1() -> Db {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vxlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    db
}

/// createEndpoint for `container` on `n1` with the label `app=<app>`.
fn labelled(container: &str, app: &str) -> CreateEndpointRequest {
    CreateEndpointRequest {
        Labels: [("app".to_string(), app.to_string())].into(),
        ..ep_req("default", "n1", "", container)
    }
}

/// Providers follow each endpoint one key at a time: a pod created with labels, relabelled
/// (from one service's selector to another's) and deleted moves only its own provider keys,
/// and a service of another tenant is not touched. The repair puts back a key lost behind
/// netmaster's back and deletes one no endpoint or service stands behind.
#[tokio::test]
async fn providers_follow_each_endpoint_and_the_repair_corrects_leftovers() {
    let db = db_with_n1().await;
    ops::upsert(
        &db,
        "default:web",
        svc("web", &["app=web"], &["80:8080:TCP"], ""),
    )
    .await
    .unwrap();
    ops::upsert(
        &db,
        "default:db",
        svc("db", &["app=db"], &["5432:5432:TCP"], ""),
    )
    .await
    .unwrap();
    // Tenant t2 has a service with the same selector on a network of its own.
    ops::upsert(&db, "t2", Tenant::named("t2")).await.unwrap();
    add_net(&db, net("t2", "n1", "vxlan", "10.2.1.0/24", 0))
        .await
        .unwrap();
    let mut other = svc("web", &["app=web"], &["80:8080:TCP"], "");
    other.tenant_name = "t2".into();
    ops::upsert(&db, "t2:web", other).await.unwrap();
    let providers = async |id: &str| -> Vec<String> {
        svc_state(&db, id).await.providers.into_keys().collect()
    };
    let a = endpoint::create_endpoint(&db, &labelled("a", "web"))
        .await
        .unwrap();
    let b = endpoint::create_endpoint(&db, &labelled("b", "web"))
        .await
        .unwrap();
    let pa = format!("{}:default", a.ip_address);
    let pb = format!("{}:default", b.ip_address);
    assert_eq!(providers("web:default").await, [pa.clone(), pb.clone()]);
    assert!(providers("db:default").await.is_empty());
    assert!(
        providers("web:t2").await.is_empty(),
        "another tenant's service selects only its own tenant's pods"
    );
    // `a` becomes a database pod: its key moves from web to db, b's stays.
    let relabel = UpdateEndpointRequest {
        IPAddress: a.ip_address.clone(),
        ContainerID: "a".into(),
        Labels: [("app".to_string(), "db".to_string())].into(),
        Tenant: "default".into(),
        Network: "n1".into(),
        Event: "start".into(),
        EndpointID: "a".into(),
        EPCommonName: "a".into(),
    };
    endpoint::update_endpoint(&db, &relabel).await.unwrap();
    assert_eq!(providers("web:default").await, std::slice::from_ref(&pb));
    assert_eq!(providers("db:default").await, std::slice::from_ref(&pa));
    // Deleting b leaves web without providers and db as it was.
    endpoint::delete_endpoint(&db, &del_req("default", "n1", "b"))
        .await
        .unwrap();
    assert!(providers("web:default").await.is_empty());
    assert_eq!(providers("db:default").await, std::slice::from_ref(&pa));
    assert_eq!(
        service_lb::repair_providers(&db).await.unwrap(),
        0,
        "nothing to repair"
    );
    // Behind netmaster's back: a's key is lost, and a key of a service that is gone appears.
    let lost = crate::state::service::provider_key("db:default", &a.ip_address);
    let orphan = crate::state::service::provider_key("gone:default", "10.1.1.99");
    let stored = db.store().get(&lost).await.unwrap().unwrap().value;
    db.store().delete(&lost).await.unwrap();
    db.store().put(&orphan, stored).await.unwrap();
    assert!(providers("db:default").await.is_empty());
    assert_eq!(service_lb::repair_providers(&db).await.unwrap(), 2);
    assert_eq!(providers("db:default").await, [pa]);
    assert!(db.store().get(&orphan).await.unwrap().is_none());
    assert_eq!(service_lb::repair_providers(&db).await.unwrap(), 0);
}

#[tokio::test]
async fn service_provider_update() {
    let db = db_with_n1().await;
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
            .get("/contiv.io/state/serviceProvider/s1:default/10.1.1.1")
            .await
            .unwrap()
            .unwrap()
            .value,
    )
    .unwrap();
    assert_eq!(prov["IPAddress"], "10.1.1.1");
    assert_eq!(prov["EpIDKey"], "n1.default-c1");
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
    endpoint::delete_endpoint(&db, &del_req("default", "n1", "c1"))
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
    let db = db_with_n1().await;
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
    assert!(!net_map(&db, "n1.default").await.test(60));
    let services = keys_under(&db, &keys::state_prefix(keys::category::SERVICE_LB)).await;
    assert_eq!(services, ["/contiv.io/state/serviceLB/s2:default"]);
    assert!(
        keys_under(&db, &keys::state_prefix(keys::category::PROVIDER))
            .await
            .is_empty(),
        "no SvcProvider lists any more"
    );
}

/// Upgrade: a service of the previous layout (providers listed in its record, a `SvcProvider`
/// beside it) is rewritten at leader start as a small record plus one key per provider; readers
/// see the same providers before and after.
#[tokio::test]
async fn previous_provider_layout_is_converted() {
    use crate::state::{Provider, SvcProvider};

    let db = db_with_n1().await;
    ops::upsert(
        &db,
        "default:s1",
        svc("s1", &["app=web"], &["80:8080:TCP"], ""),
    )
    .await
    .unwrap();
    let mut ips = Vec::new();
    for c in ["c1", "c2", "c3"] {
        let ep = endpoint::create_endpoint(&db, &ep_req("default", "n1", "", c))
            .await
            .unwrap();
        endpoint::update_endpoint(
            &db,
            &UpdateEndpointRequest {
                IPAddress: ep.ip_address.clone(),
                Labels: [("app".to_string(), "web".to_string())].into(),
                Tenant: "default".into(),
                Network: "n1".into(),
                Event: "start".into(),
                EndpointID: c.into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        ips.push(ep.ip_address);
    }
    let joined = svc_state(&db, "s1:default").await;
    assert_eq!(joined.providers.len(), 3);
    // Store it as the previous layout did: providers in the record, no provider keys, a list.
    let store = db.store();
    store
        .put(
            &CfgServiceLbState::key_for("s1:default"),
            serde_json::to_vec(&joined).unwrap(),
        )
        .await
        .unwrap();
    for key in keys_under(&db, "/contiv.io/state/serviceProvider/").await {
        store.delete(&key).await.unwrap();
    }
    let list = SvcProvider {
        id: "s1:default".into(),
        ServiceName: "s1:default".into(),
        Providers: ips.clone(),
    };
    store
        .put(
            &SvcProvider::key_for("s1:default"),
            serde_json::to_vec(&list).unwrap(),
        )
        .await
        .unwrap();
    let inspect = ops::inspect::<ServiceLb>(&db, "default:s1").await.unwrap();
    assert_eq!(inspect["Oper"]["numProviders"], 3, "read before conversion");

    assert_eq!(service_lb::convert_all(&db).await.unwrap(), 1);
    assert_eq!(
        svc_state(&db, "s1:default").await.providers,
        joined.providers
    );
    let keys = keys_under(&db, "/contiv.io/state/serviceProvider/").await;
    let want: Vec<String> = ips
        .iter()
        .map(|ip| format!("/contiv.io/state/serviceProvider/s1:default/{ip}"))
        .collect();
    assert_eq!(keys, want);
    let one: Provider =
        serde_json::from_slice(&store.get(&want[0]).await.unwrap().unwrap().value).unwrap();
    assert_eq!(one.IPAddress, ips[0]);
    assert!(
        keys_under(&db, &keys::state_prefix(keys::category::PROVIDER))
            .await
            .is_empty()
    );
    assert_eq!(
        service_lb::convert_all(&db).await.unwrap(),
        0,
        "nothing left"
    );
}

/// createEndpoint with `Labels` records them with the endpoint and makes it a provider in the
/// same transaction (one call instead of createEndpoint + updateEndpoint), through the group
/// commit too; an existing endpoint takes new labels, and an empty `Labels` leaves them alone.
#[tokio::test]
async fn create_endpoint_with_labels_makes_a_provider_at_once() {
    let db = db_with_n1().await;
    add_net(&db, net("default", "svcnet", "vxlan", "20.1.1.0/24", 0))
        .await
        .unwrap();
    let mut s = svc("s1", &["app=web"], &["80:8080:TCP"], "");
    s.network_name = "svcnet".into();
    ops::upsert(&db, "default:s1", s).await.unwrap();
    let ep = endpoint::create_endpoint(&db, &labelled("c1", "web"))
        .await
        .unwrap();
    assert_eq!(ep.labels.get("app").map(String::as_str), Some("web"));
    let st = svc_state(&db, "s1:default").await;
    assert_eq!(
        st.providers.keys().collect::<Vec<_>>(),
        [&format!("{}:default", ep.ip_address)]
    );
    // Through the write batcher, two labelled endpoints in one transaction: both are providers.
    let writes = crate::batch::Writes::spawn(db.clone()).unwrap();
    let (web, db_app) = (labelled("c2", "web"), labelled("c3", "db"));
    let (a, b) = tokio::join!(
        crate::endpoint::batch::create(&writes, &web).map_ok(|r| r.EndpointConfig),
        crate::endpoint::batch::create(&writes, &db_app).map_ok(|r| r.EndpointConfig)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let providers = svc_state(&db, "s1:default").await.providers;
    assert!(providers.contains_key(&format!("{}:default", a.ip_address)));
    assert!(!providers.contains_key(&format!("{}:default", b.ip_address)));
    // Re-created with other labels: the same endpoint and address, the new labels.
    let again = endpoint::create_endpoint(&db, &labelled("c3", "web"))
        .await
        .unwrap();
    assert_eq!(again.ip_address, b.ip_address);
    assert_eq!(svc_state(&db, "s1:default").await.providers.len(), 3);
    // Without labels, an existing endpoint keeps its own.
    let plain = endpoint::create_endpoint(&db, &ep_req("default", "n1", "", "c3"))
        .await
        .unwrap();
    assert_eq!(plain.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(svc_state(&db, "s1:default").await.providers.len(), 3);
}
