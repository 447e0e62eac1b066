//! Global settings: tag range changes, forwarding mode, private subnet, ACI gateway, BGP.

use super::*;

#[tokio::test]
async fn dynamic_global_vlan_range() {
    let db = db();
    setup(&db).await;
    for (i, tag) in [10, 11, 300].into_iter().enumerate() {
        add_net(
            &db,
            net(
                "default",
                &format!("n{i}"),
                "vlan",
                &format!("10.1.{i}.0/24"),
                tag,
            ),
        )
        .await
        .unwrap();
    }
    let mut g = ops::get::<Global>(&db, "global").await.unwrap();
    g.vlans = "9-301".into();
    ops::upsert(&db, "global", g.clone()).await.unwrap();
    // 10 is in use, 302 is outside the new range.
    assert_eq!(
        status(add_net(&db, net("default", "x", "vlan", "10.9.1.0/24", 10)).await),
        409
    );
    assert_eq!(
        status(add_net(&db, net("default", "x", "vlan", "10.9.1.0/24", 302)).await),
        409
    );
    for rejected in ["50-301", "1-200"] {
        g.vlans = rejected.into();
        let err = ops::upsert(&db, "global", g.clone()).await.unwrap_err();
        assert_eq!(err.http_status(), 409, "{rejected}");
        assert!(
            err.to_string().contains("existing vlans 10-11, 300"),
            "{err}"
        );
    }
    g.vlans = "1-800".into();
    ops::upsert(&db, "global", g.clone()).await.unwrap();
    add_net(&db, net("default", "x", "vlan", "10.9.1.0/24", 302))
        .await
        .unwrap();
    assert_eq!(
        ops::get::<Global>(&db, "global").await.unwrap().vlans,
        "1-800"
    );
}

#[tokio::test]
async fn dynamic_global_vxlan_range() {
    let db = db();
    setup(&db).await;
    for (i, tag) in [1000, 1500, 2500].into_iter().enumerate() {
        add_net(
            &db,
            net(
                "default",
                &format!("n{i}"),
                "vxlan",
                &format!("10.1.{i}.0/24"),
                tag,
            ),
        )
        .await
        .unwrap();
    }
    let mut g = ops::get::<Global>(&db, "global").await.unwrap();
    g.vxlans = "1000-2500".into();
    ops::upsert(&db, "global", g.clone()).await.unwrap();
    for rejected in ["2000-10000", "1000-2000"] {
        g.vxlans = rejected.into();
        assert_eq!(
            status(ops::upsert(&db, "global", g.clone()).await),
            409,
            "{rejected}"
        );
    }
    // The pool keeps its offset semantics: a VNI at or below the start is out of range.
    assert_eq!(
        status(add_net(&db, net("default", "x", "vxlan", "10.9.1.0/24", 999)).await),
        409
    );
    let n = add_net(&db, net("default", "x", "vxlan", "10.9.1.0/24", 0))
        .await
        .unwrap();
    assert_eq!(net_state(&db, &n.state_id()).await.ext_pkt_tag, 1001);
    // Local VLANs of the four VXLAN networks are distinct.
    let mut locals = Vec::new();
    for id in ["n0.default", "n1.default", "n2.default", "x.default"] {
        locals.push(net_state(&db, id).await.pkt_tag);
    }
    locals.sort_unstable();
    locals.dedup();
    assert_eq!(locals.len(), 4);
}

#[tokio::test]
async fn global_setting_fwd_mode() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    let mut g = ops::get::<Global>(&db, "global").await.unwrap();
    g.fwd_mode = "routing".into();
    let err = ops::upsert(&db, "global", g.clone()).await.unwrap_err();
    assert_eq!(err.http_status(), 409);
    assert!(
        err.to_string().contains("existing 1 vlans and 0 vxlans"),
        "{err}"
    );
    ops::delete::<Network>(&db, "default:n1").await.unwrap();
    ops::upsert(&db, "global", g.clone()).await.unwrap();
    let cfg = db
        .store()
        .get(keys::MASTER_GLOBAL_CONFIG)
        .await
        .unwrap()
        .unwrap();
    let cfg: serde_json::Value = serde_json::from_slice(&cfg.value).unwrap();
    assert_eq!(cfg["fwd-mode"], "routing");
    assert_eq!(cfg["pvt-subnet"], "172.19.0.0/16");
    // Leaving routing mode while BGP peers are configured is refused.
    let bgp = Bgp {
        hostname: "h1".into(),
        routerip: "50.1.1.2/24".into(),
        as_: "65002".into(),
        neighbor_as: "500".into(),
        neighbor: "50.1.1.200".into(),
        ..Default::default()
    };
    ops::upsert(&db, "h1", bgp).await.unwrap();
    g.fwd_mode = "bridge".into();
    assert!(
        ops::upsert(&db, "global", g.clone())
            .await
            .unwrap_err()
            .to_string()
            .contains("Bgp")
    );
    ops::delete::<Bgp>(&db, "h1").await.unwrap();
    ops::upsert(&db, "global", g).await.unwrap();
}

#[tokio::test]
async fn global_setting_subnet_and_validation() {
    let db = db();
    setup(&db).await;
    let mut g = ops::get::<Global>(&db, "global").await.unwrap();
    g.pvt_subnet = "172.20.0.0/24".into();
    assert_eq!(status(ops::upsert(&db, "global", g.clone()).await), 400);
    g.pvt_subnet = "172.20.0.0/16".into();
    ops::upsert(&db, "global", g.clone()).await.unwrap();
    add_net(&db, net("default", "n1", "vlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    g.pvt_subnet = "172.21.0.0/16".into();
    assert_eq!(status(ops::upsert(&db, "global", g.clone()).await), 409);
    g.pvt_subnet = "172.20.0.0/16".into();
    for (field, bad) in [
        ("vlans", "1-5000"),
        ("vlans", "10"),
        ("vxlans", "1-20000"),
        ("arpMode", "sometimes"),
        ("fwdMode", "hub"),
    ] {
        let mut b = g.clone();
        match field {
            "vlans" => b.vlans = bad.into(),
            "vxlans" => b.vxlans = bad.into(),
            "arpMode" => b.arp_mode = bad.into(),
            _ => b.fwd_mode = bad.into(),
        }
        let err = ops::upsert(&db, "global", b).await.unwrap_err();
        assert_eq!(err.http_status(), 400, "{field}={bad}");
        assert!(err.to_string().contains(field), "{err}");
    }
    let mut named = g.clone();
    named.name = "other".into();
    assert_eq!(status(ops::upsert(&db, "other", named).await), 400);
    // ARP mode changes freely.
    g.arp_mode = "flood".into();
    ops::upsert(&db, "global", g).await.unwrap();
    // Global cannot be deleted while networks exist.
    assert_eq!(status(ops::delete::<Global>(&db, "global").await), 409);
}

#[tokio::test]
async fn aci_gw_setting() {
    let db = db();
    let gw = AciGw {
        name: "aciGw".into(),
        enforce_policies: "yes".into(),
        include_common_tenant: "no".into(),
        node_bindings: "topology/pod-1/node-101,topology/pod-1/node-102".into(),
        path_bindings: "topology/pod-1/paths-101/pathep-[eth1/14]".into(),
        physical_domain: "allvlans".into(),
        ..Default::default()
    };
    ops::upsert(&db, "aciGw", gw.clone()).await.unwrap();
    let mut bad = gw.clone();
    bad.enforce_policies = "maybe".into();
    assert_eq!(status(ops::upsert(&db, "aciGw", bad).await), 400);
    let mut bad = gw.clone();
    bad.node_bindings = "topology/pod-1/node-".into();
    assert_eq!(status(ops::upsert(&db, "aciGw", bad).await), 400);
    let mut bad = gw;
    bad.path_bindings = "pod-1".into();
    assert_eq!(status(ops::upsert(&db, "aciGw", bad).await), 400);
}

#[tokio::test]
async fn bgp() {
    let db = db();
    setup(&db).await;
    let b = Bgp {
        hostname: "host1".into(),
        routerip: "50.1.1.2/24".into(),
        as_: "65002".into(),
        neighbor_as: "500".into(),
        neighbor: "50.1.1.200".into(),
        ..Default::default()
    };
    ops::upsert(&db, "host1", b.clone()).await.unwrap();
    let st: serde_json::Value = serde_json::from_slice(
        &db.store()
            .get(&keys::state("bgp", "host1"))
            .await
            .unwrap()
            .unwrap()
            .value,
    )
    .unwrap();
    assert_eq!(st["router-ip"], "50.1.1.2/24");
    assert_eq!(st["neighbor-as"], "500");
    let mut changed = b.clone();
    changed.neighbor = "50.1.1.201".into();
    ops::upsert(&db, "host1", changed).await.unwrap();
    let mut bad = b.clone();
    bad.routerip = "50.1.1.2".into();
    assert_eq!(status(ops::upsert(&db, "host1", bad).await), 400);
    // Each bad field is refused with a 400 naming it, and nothing is stored.
    type Spoil = fn(&mut Bgp);
    let cases: [(&str, Spoil); 8] = [
        ("as", |b| b.as_ = "sixty".into()),
        ("as", |b| b.as_ = "0".into()),
        ("as", |b| b.as_ = "4294967296".into()),
        ("as", |b| b.as_ = String::new()),
        ("neighbor-as", |b| b.neighbor_as = String::new()),
        ("routerip", |b| b.routerip = "50.1.1.0/24".into()),
        ("neighbor", |b| b.neighbor = "50.1.1.2".into()),
        ("neighbor", |b| b.neighbor = "50.1.1".into()),
    ];
    for (field, spoil) in cases {
        let mut bad = b.clone();
        bad.hostname = "host2".into();
        spoil(&mut bad);
        let err = ops::upsert(&db, "host2", bad.clone()).await.unwrap_err();
        assert_eq!(err.http_status(), 400, "{bad:?}");
        assert!(err.to_string().contains(field), "{field}: {err}");
        assert!(
            db.store()
                .get(&keys::state("bgp", "host2"))
                .await
                .unwrap()
                .is_none()
        );
    }
    ops::delete::<Bgp>(&db, "host1").await.unwrap();
    assert!(
        db.store()
            .get(&keys::state("bgp", "host1"))
            .await
            .unwrap()
            .is_none()
    );
    // Refused in ACI mode.
    let mut g = ops::get::<Global>(&db, "global").await.unwrap();
    g.network_infra_type = "aci".into();
    ops::upsert(&db, "global", g).await.unwrap();
    assert_eq!(status(ops::upsert(&db, "host1", b).await), 409);
}
