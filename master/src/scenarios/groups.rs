//! Endpoint groups: updates, ids, IP pools, external contracts, app profiles, netprofiles.

use super::*;

#[tokio::test]
async fn epg_update_and_ids() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    add_net(&db, net("default", "n2", "vlan", "10.1.2.0/24", 0))
        .await
        .unwrap();
    add_epg(&db, epg("default", "g1", "n1")).await.unwrap();
    add_epg(&db, epg("default", "g2", "n1")).await.unwrap();
    assert_eq!(epg_state(&db, "g2:default").await.endpoint_group_id, 2);
    assert_eq!(epg_state(&db, "g2:default").await.pkt_tag, 1);
    assert_eq!(epg_state(&db, "g2:default").await.group_tag, "g2.default");
    let err = add_epg(&db, epg("default", "g1", "n2")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "Cannot change network association after epg is created."
    );
    let mut pooled = epg("default", "g1", "n1");
    pooled.ip_pool = "10.1.1.10-10.1.1.20".into();
    assert_eq!(
        add_epg(&db, pooled).await.unwrap_err().to_string(),
        "Cannot change IP pool after epg is created."
    );
    // Ids are persisted and reused after delete.
    ops::delete::<EndpointGroup>(&db, "default:g1")
        .await
        .unwrap();
    add_epg(&db, epg("default", "g3", "n1")).await.unwrap();
    assert_eq!(epg_state(&db, "g3:default").await.endpoint_group_id, 1);
    // An EPG may not share a network's key, and needs an existing network.
    assert_eq!(status(add_epg(&db, epg("default", "n2", "n1")).await), 409);
    assert_eq!(
        status(add_epg(&db, epg("default", "g9", "nope")).await),
        404
    );
}

#[tokio::test]
async fn epg_ip_pool() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vlan", "10.1.0.0/16", 0))
        .await
        .unwrap();
    let mut g = epg("default", "g1", "n1");
    g.ip_pool = "10.1.0.1-10.1.0.3".into();
    add_epg(&db, g.clone()).await.unwrap();
    // Pool reserved in the network map; another pool may not overlap; outside the subnet is invalid.
    let mut g2 = epg("default", "g2", "n1");
    g2.ip_pool = "10.1.0.3-10.1.0.5".into();
    assert_eq!(status(add_epg(&db, g2.clone()).await), 409);
    g2.ip_pool = "10.2.0.3-10.2.0.5".into();
    assert_eq!(status(add_epg(&db, g2).await), 400);
    let mut ips = Vec::new();
    for c in ["a", "b", "c"] {
        ips.push(
            endpoint::create_endpoint(&db, &ep_req("default", "n1", "g1", c))
                .await
                .unwrap()
                .ip_address,
        );
    }
    assert_eq!(ips, ["10.1.0.1", "10.1.0.2", "10.1.0.3"]);
    assert_eq!(
        status(endpoint::create_endpoint(&db, &ep_req("default", "n1", "g1", "d")).await),
        409
    );
    // Without the EPG, addresses come from the rest of the network.
    assert_eq!(
        endpoint::create_endpoint(&db, &ep_req("default", "n1", "", "e"))
            .await
            .unwrap()
            .ip_address,
        "10.1.0.4"
    );
    let inspect = ops::inspect::<EndpointGroup>(&db, "default:g1")
        .await
        .unwrap();
    assert_eq!(inspect["Oper"]["allocatedIPAddresses"], "10.1.0.1-10.1.0.3");
    assert_eq!(inspect["Oper"]["numEndpoints"], 3);
    assert_eq!(
        status(ops::delete::<EndpointGroup>(&db, "default:g1").await),
        409
    );
    for c in ["a", "b", "c"] {
        endpoint::delete_endpoint(&db, &del_req("default", "n1", c))
            .await
            .unwrap();
    }
    ops::delete::<EndpointGroup>(&db, "default:g1")
        .await
        .unwrap();
    // The pool is free in the network map again (10.1.0.4 stays used).
    let map = net_map(&db, "n1.default").await;
    assert!(!map.test(1) && !map.test(3) && map.test(4));
}

#[tokio::test]
async fn ext_contracts_groups() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    let ecg = ExtContractsGroup {
        contracts_group_name: "ext1".into(),
        tenant_name: "default".into(),
        contracts_type: "provided".into(),
        contracts: vec!["uni/tn-common/brc-default".into()],
        ..Default::default()
    };
    ops::upsert(&db, "default:ext1", ecg.clone()).await.unwrap();
    let mut bad = ecg.clone();
    bad.contracts_type = "offered".into();
    assert_eq!(status(ops::upsert(&db, "default:ext1", bad).await), 400);
    let mut changed = ecg.clone();
    changed.contracts.push("x".into());
    assert_eq!(status(ops::upsert(&db, "default:ext1", changed).await), 409);
    let mut g = epg("default", "g1", "n1");
    g.ext_contracts_grps = vec!["ext1".into()];
    add_epg(&db, g.clone()).await.unwrap();
    assert!(
        ops::get::<ExtContractsGroup>(&db, "default:ext1")
            .await
            .unwrap()
            .link_sets
            .endpoint_groups
            .contains_key("default:g1")
    );
    assert_eq!(
        status(ops::delete::<ExtContractsGroup>(&db, "default:ext1").await),
        409
    );
    g.ext_contracts_grps.clear();
    add_epg(&db, g.clone()).await.unwrap();
    ops::delete::<ExtContractsGroup>(&db, "default:ext1")
        .await
        .unwrap();
    g.ext_contracts_grps = vec!["ext1".into()];
    assert_eq!(status(add_epg(&db, g).await), 404);
}

#[tokio::test]
async fn app_profiles() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    add_epg(&db, epg("default", "g1", "n1")).await.unwrap();
    add_epg(&db, epg("default", "g2", "n1")).await.unwrap();
    let mut ap = AppProfile {
        app_profile_name: "ap1".into(),
        tenant_name: "default".into(),
        endpoint_groups: vec!["g1".into()],
        ..Default::default()
    };
    ops::upsert(&db, "default:ap1", ap.clone()).await.unwrap();
    assert_eq!(
        ops::get::<EndpointGroup>(&db, "default:g1")
            .await
            .unwrap()
            .links
            .app_profile
            .key,
        "default:ap1"
    );
    assert_eq!(
        status(ops::delete::<EndpointGroup>(&db, "default:g1").await),
        409
    );
    ap.endpoint_groups = vec!["g2".into()];
    ops::upsert(&db, "default:ap1", ap.clone()).await.unwrap();
    ops::delete::<EndpointGroup>(&db, "default:g1")
        .await
        .unwrap();
    ap.endpoint_groups = vec!["nope".into()];
    assert_eq!(status(ops::upsert(&db, "default:ap1", ap).await), 404);
    assert_eq!(status(ops::delete::<Tenant>(&db, "default").await), 409);
    ops::delete::<AppProfile>(&db, "default:ap1").await.unwrap();
    assert!(
        ops::get::<EndpointGroup>(&db, "default:g2")
            .await
            .unwrap()
            .links
            .app_profile
            .is_empty()
    );
}

fn np(tenant: &str, name: &str, bw: &str, dscp: i64, burst: i64) -> Netprofile {
    Netprofile {
        profile_name: name.into(),
        tenant_name: tenant.into(),
        bandwidth: bw.into(),
        dscp,
        burst,
        ..Default::default()
    }
}

#[tokio::test]
async fn netprofiles_and_updates() {
    let db = db();
    setup(&db).await;
    ops::upsert(&db, "t2", Tenant::named("t2")).await.unwrap();
    add_net(&db, net("default", "n1", "vlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    add_net(&db, net("t2", "n1", "vlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    ops::upsert(&db, "default:np1", np("default", "np1", "6Mbps", 6, 80))
        .await
        .unwrap();
    ops::upsert(&db, "t2:np1", np("t2", "np1", "10 kbps", 2, 0))
        .await
        .unwrap();
    assert_eq!(
        status(ops::upsert(&db, "default:np2", np("default", "np2", "6 tbps", 6, 80)).await),
        400
    );
    assert_eq!(
        status(ops::upsert(&db, "default:np2", np("default", "np2", "6Mbps", 64, 80)).await),
        400
    );
    assert_eq!(
        status(ops::upsert(&db, "default:np2", np("default", "np2", "6Mbps", 6, 1)).await),
        400
    );
    assert_eq!(
        status(ops::upsert(&db, "default:np2", np("default", "np2", "6Mbps", 6, 10487)).await),
        400
    );
    // EPG without profile, then with it (per tenant).
    add_epg(&db, epg("default", "g1", "n1")).await.unwrap();
    assert_eq!(epg_state(&db, "g1:default").await.dscp, 0);
    let mut g = epg("default", "g1", "n1");
    g.net_profile = "np1".into();
    add_epg(&db, g.clone()).await.unwrap();
    let st = epg_state(&db, "g1:default").await;
    assert_eq!((st.dscp, st.bandwidth.as_str(), st.burst), (6, "6Mbps", 80));
    let mut g2 = epg("t2", "g1", "n1");
    g2.net_profile = "np1".into();
    add_epg(&db, g2).await.unwrap();
    assert_eq!(epg_state(&db, "g1:t2").await.bandwidth, "10 kbps");
    // Updating the profile rewrites the EPG state.
    ops::upsert(&db, "default:np1", np("default", "np1", "16Mbps", 6, 270))
        .await
        .unwrap();
    let st = epg_state(&db, "g1:default").await;
    assert_eq!((st.bandwidth.as_str(), st.burst), ("16Mbps", 270));
    assert_eq!(epg_state(&db, "g1:t2").await.bandwidth, "10 kbps");
    // In use: no delete. Removing it from the EPG clears the values.
    assert_eq!(
        status(ops::delete::<Netprofile>(&db, "default:np1").await),
        409
    );
    g.net_profile.clear();
    add_epg(&db, g.clone()).await.unwrap();
    let st = epg_state(&db, "g1:default").await;
    assert_eq!((st.dscp, st.bandwidth.as_str(), st.burst), (0, "", 0));
    ops::delete::<Netprofile>(&db, "default:np1").await.unwrap();
    g.net_profile = "np1".into();
    assert_eq!(status(add_epg(&db, g).await), 404);
}
