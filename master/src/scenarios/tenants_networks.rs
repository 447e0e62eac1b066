//! Tenants and networks: add/delete, overlap, tags, ACI mode, address listings.

use super::*;

#[tokio::test]
async fn tenant_add_delete() {
    let db = db();
    setup(&db).await;
    let t = ops::upsert(&db, "t1", Tenant::named("t1")).await.unwrap();
    // Re-POSTing the identical object is a no-op success; a change is refused.
    assert_eq!(
        ops::upsert(&db, "t1", Tenant::named("t1")).await.unwrap(),
        t
    );
    let mut changed = Tenant::named("t1");
    changed.default_network = "n1".into();
    assert_eq!(status(ops::upsert(&db, "t1", changed).await), 409);
    // Key must match the name; names follow the NAME rule.
    assert_eq!(
        status(ops::upsert(&db, "t2", Tenant::named("t1")).await),
        400
    );
    assert_eq!(
        status(ops::upsert(&db, "bad_name", Tenant::named("bad_name")).await),
        400
    );
    add_net(&db, net("t1", "n1", "vlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    let err = ops::delete::<Tenant>(&db, "t1").await.unwrap_err();
    assert_eq!(err.http_status(), 409);
    assert!(err.to_string().contains("1 networks"), "{err}");
    ops::delete::<Network>(&db, "t1:n1").await.unwrap();
    ops::delete::<Tenant>(&db, "t1").await.unwrap();
    assert_eq!(status(ops::delete::<Tenant>(&db, "t1").await), 404);
    assert_eq!(status(ops::get::<Tenant>(&db, "t1").await), 404);
}

#[tokio::test]
async fn tenant_links_and_oper_counts() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vxlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    add_epg(&db, epg("default", "g1", "n1")).await.unwrap();
    let t = ops::get::<Tenant>(&db, "default").await.unwrap();
    assert!(t.link_sets.networks.contains_key("default:n1"));
    assert!(t.link_sets.endpoint_groups.contains_key("default:g1"));
    let json = serde_json::to_value(&t).unwrap();
    assert_eq!(
        json["link-sets"]["Networks"]["default:n1"],
        serde_json::json!({"type": "network", "key": "default:n1"})
    );
    let inspect = ops::inspect::<Tenant>(&db, "default").await.unwrap();
    assert_eq!(inspect["Oper"]["totalNetworks"], 1);
    assert_eq!(inspect["Oper"]["totalEPGs"], 1);
    assert_eq!(inspect["Oper"]["networks"][0]["networkName"], "n1");
    assert_eq!(inspect["Oper"]["networks"][0]["externalPktTag"], 1);
    assert_eq!(
        inspect["Oper"]["endpointGroups"][0]["groupTag"],
        "g1.default"
    );
    // A network re-POSTed without links is identical (links are server-maintained).
    let n = ops::get::<Network>(&db, "default:n1").await.unwrap();
    let mut bare = n.clone();
    bare.link_sets = Default::default();
    bare.links = Default::default();
    assert_eq!(ops::upsert(&db, "default:n1", bare).await.unwrap(), n);
}

#[tokio::test]
async fn overlapping_subnets() {
    let db = db();
    setup(&db).await;
    ops::upsert(&db, "t2", Tenant::named("t2")).await.unwrap();
    add_net(&db, net("default", "n1", "vxlan", "10.1.0.0/16", 0))
        .await
        .unwrap();
    let err = add_net(&db, net("default", "n2", "vxlan", "10.1.5.0/24", 0))
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), 409);
    assert!(
        err.to_string()
            .contains("network n1 conflicts with subnet 10.1.5.0/24"),
        "{err}"
    );
    add_net(&db, net("default", "n3", "vxlan", "10.2.0.0/16", 0))
        .await
        .unwrap();
    // Other tenants may reuse the range.
    add_net(&db, net("t2", "n1", "vxlan", "10.1.5.0/24", 0))
        .await
        .unwrap();
    // A larger subnet around an existing one is refused too (the index keys under it).
    let err = add_net(&db, net("default", "n4", "vxlan", "10.0.0.0/14", 0))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("network n1 conflicts"), "{err}");
    // Deleting a network frees its range.
    ops::delete::<Network>(&db, "default:n3").await.unwrap();
    add_net(&db, net("default", "n5", "vxlan", "10.2.1.0/24", 0))
        .await
        .unwrap();
}

/// Networks stored before the subnet index get their index key at leader start, so overlap
/// checks keep working after an upgrade.
#[tokio::test]
async fn networks_stored_before_the_subnet_index_are_indexed() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vxlan", "10.1.0.0/16", 0))
        .await
        .unwrap();
    let prefix = keys::state_prefix(keys::category::SUBNETS);
    for kv in db.store().list(&prefix).await.unwrap().entries {
        db.store().delete(&kv.key).await.unwrap();
    }
    assert_eq!(crate::model::network::index_subnets(&db).await.unwrap(), 1);
    assert_eq!(crate::model::network::index_subnets(&db).await.unwrap(), 0);
    let err = add_net(&db, net("default", "n2", "vxlan", "10.1.5.0/24", 0))
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), 409);
}

/// A tenant's record of prefix lengths in use: written with its first network, given the new
/// length by a network at another length, rebuilt at leader start for networks stored before it;
/// whichever way it came, a network inside or around an existing one is refused.
#[tokio::test]
async fn the_prefix_lengths_record_finds_containing_networks_at_every_length_in_use() {
    use crate::model::network::{PrefixLengths, prefix_lengths_key};
    let db = db();
    setup(&db).await;
    let lengths = async |db: &crate::store::txn::Db| -> Option<String> {
        let kv = db
            .store()
            .get(&prefix_lengths_key("default"))
            .await
            .unwrap()?;
        let l: PrefixLengths = serde_json::from_slice(&kv.value).unwrap();
        Some(serde_json::to_string(&l).unwrap())
    };
    assert_eq!(lengths(&db).await, None);
    add_net(&db, net("default", "a", "vxlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    assert_eq!(lengths(&db).await.as_deref(), Some("[24]"));
    add_net(&db, net("default", "b", "vxlan", "10.2.0.0/16", 0))
        .await
        .unwrap();
    assert_eq!(lengths(&db).await.as_deref(), Some("[16,24]"));
    // Inside b (a containing network at a length in the record) and around a (a network inside).
    for (name, subnet) in [
        ("c", "10.2.3.0/24"),
        ("d", "10.2.3.128/25"),
        ("e", "10.1.0.0/20"),
    ] {
        let err = add_net(&db, net("default", name, "vxlan", subnet, 0))
            .await
            .unwrap_err();
        assert_eq!(err.http_status(), 409, "{subnet}: {err}");
    }
    // The record lost (or written by no earlier version): rebuilt from the index at leader start,
    // and derived from the index keys by a create that finds none.
    db.store()
        .delete(&prefix_lengths_key("default"))
        .await
        .unwrap();
    let err = add_net(&db, net("default", "f", "vxlan", "10.2.9.0/24", 0))
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), 409, "{err}");
    db.store()
        .delete(&prefix_lengths_key("default"))
        .await
        .unwrap();
    crate::model::network::index_subnets(&db).await.unwrap();
    assert_eq!(lengths(&db).await.as_deref(), Some("[16,24]"));
    let err = add_net(&db, net("default", "g", "vxlan", "10.2.200.0/24", 0))
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), 409, "{err}");
    add_net(&db, net("default", "h", "vxlan", "10.3.0.0/24", 0))
        .await
        .unwrap();
}

#[tokio::test]
async fn network_add_delete() {
    let db = db();
    setup(&db).await;
    let mut n = net("default", "n1", "vxlan", "10.1.1.0/24", 0);
    n.gateway = "10.1.1.254".into();
    add_net(&db, n).await.unwrap();
    let st = net_state(&db, "n1.default").await;
    assert_eq!(
        (st.pkt_tag_type.as_str(), st.pkt_tag, st.ext_pkt_tag),
        ("vxlan", 1, 1)
    );
    // Contiv's fresh map (network, gateway and broadcast used), now kept in chunks: none stored.
    assert!(
        keys_under(&db, &crate::state::addr_map::network_prefix("n1.default"))
            .await
            .is_empty()
    );
    assert_eq!(
        net_map(&db, "n1.default").await.encode(),
        "AAAAAAAAAQAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAADAAAAAAAAAAA=="
    );
    assert_eq!(st.ip_addr_range, "10.1.1.1-10.1.1.254");
    assert_eq!(st.network_tag, "n1.default");
    assert_eq!(st.nw_type, "data");
    add_net(&db, net("default", "v1", "vlan", "20.1.1.0/24", 0))
        .await
        .unwrap();
    assert_eq!(net_state(&db, "v1.default").await.pkt_tag, 1);
    add_net(&db, net("default", "v2", "vlan", "20.1.2.0/24", 100))
        .await
        .unwrap();
    assert_eq!(
        status(add_net(&db, net("default", "v3", "vlan", "20.1.3.0/24", 100)).await),
        409
    );
    // Networks are immutable.
    let mut changed = net("default", "v2", "vlan", "20.1.2.0/24", 100);
    changed.gateway = "20.1.2.1".into();
    assert_eq!(status(add_net(&db, changed).await), 409);
    // Missing tenant, bad encap, missing subnet, gateway outside the subnet.
    assert_eq!(
        status(add_net(&db, net("nope", "x", "vlan", "30.1.1.0/24", 0)).await),
        404
    );
    assert_eq!(
        status(add_net(&db, net("default", "x", "gre", "30.1.1.0/24", 0)).await),
        400
    );
    assert_eq!(
        status(add_net(&db, net("default", "x", "vlan", "", 0)).await),
        400
    );
    let mut gw = net("default", "x", "vlan", "30.1.1.0/24", 0);
    gw.gateway = "30.1.2.1".into();
    assert_eq!(status(add_net(&db, gw).await), 400);
    // Delete frees the tags.
    ops::delete::<Network>(&db, "default:v2").await.unwrap();
    add_net(&db, net("default", "v3", "vlan", "20.1.3.0/24", 100))
        .await
        .unwrap();
    ops::delete::<Network>(&db, "default:n1").await.unwrap();
    assert!(
        db.store()
            .get(&CfgNetworkState::key_for("n1.default"))
            .await
            .unwrap()
            .is_none()
    );
    let inspect = ops::inspect::<Global>(&db, "global").await.unwrap();
    assert_eq!(inspect["Oper"]["vlansInUse"], "1, 100");
    assert_eq!(inspect["Oper"]["vxlansInUse"], "");
}

#[tokio::test]
async fn network_oper_lists_addresses() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    for c in ["c1", "c2", "c3"] {
        endpoint::create_endpoint(&db, &ep_req("default", "n1", "", c))
            .await
            .unwrap();
    }
    let inspect = ops::inspect::<Network>(&db, "default:n1").await.unwrap();
    assert_eq!(inspect["Oper"]["allocatedIPAddresses"], "10.1.1.1-10.1.1.3");
    assert_eq!(
        inspect["Oper"]["availableIPAddresses"],
        "10.1.1.4-10.1.1.254"
    );
    assert_eq!(inspect["Oper"]["numEndpoints"], 3);
    assert_eq!(inspect["Oper"]["allocatedAddressesCount"], 3);
    assert_eq!(inspect["Oper"]["endpoints"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn network_needs_global() {
    let db = db();
    ops::upsert(&db, "default", Tenant::named("default"))
        .await
        .unwrap();
    let err = add_net(&db, net("default", "n1", "vlan", "10.1.1.0/24", 0))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Global configuration is not ready"),
        "{err}"
    );
}

#[tokio::test]
async fn network_pkt_ranges() {
    let db = db();
    setup(&db).await;
    assert_eq!(
        status(add_net(&db, net("default", "a", "vlan", "10.1.1.0/24", 4095)).await),
        400
    );
    assert_eq!(
        status(add_net(&db, net("default", "a", "vxlan", "10.1.1.0/24", 16_777_217)).await),
        400
    );
    assert_eq!(
        status(add_net(&db, net("default", "a", "vxlan", "10.1.1.0/24", 20000)).await),
        409
    );
    assert_eq!(
        status(add_net(&db, net("default", "a", "vlan", "10.1.1.0/32", 0)).await),
        400
    );
    add_net(&db, net("default", "a", "vlan", "10.1.1.0/24", 4094))
        .await
        .unwrap();
    add_net(&db, net("default", "b", "vxlan", "10.1.2.0/24", 10000))
        .await
        .unwrap();
}

#[tokio::test]
async fn network_add_delete_aci_mode() {
    let db = db();
    ops::upsert(&db, "global", Global::defaults("bridge", "aci"))
        .await
        .unwrap();
    ops::upsert(&db, "default", Tenant::named("default"))
        .await
        .unwrap();
    add_net(&db, net("default", "n1", "vlan", "10.1.1.0/24", 10))
        .await
        .unwrap();
    add_epg(&db, epg("default", "g1", "n1")).await.unwrap();
    add_epg(&db, epg("default", "g2", "n1")).await.unwrap();
    // Each EPG has its own VLAN, distinct from the network's.
    let (a, b) = (
        epg_state(&db, "g1:default").await.pkt_tag,
        epg_state(&db, "g2:default").await.pkt_tag,
    );
    assert!(a != b && a != 10 && b != 10, "{a} {b}");
    let inspect = ops::inspect::<Global>(&db, "global").await.unwrap();
    assert_eq!(
        inspect["Oper"]["vlansInUse"],
        format!("{}-{}, 10", a.min(b), a.max(b))
    );
    // The fabric type cannot change under existing networks.
    let mut g = ops::get::<Global>(&db, "global").await.unwrap();
    g.network_infra_type = "default".into();
    assert_eq!(status(ops::upsert(&db, "global", g).await), 409);
    ops::delete::<EndpointGroup>(&db, "default:g1")
        .await
        .unwrap();
    ops::delete::<EndpointGroup>(&db, "default:g2")
        .await
        .unwrap();
    ops::delete::<Network>(&db, "default:n1").await.unwrap();
    let inspect = ops::inspect::<Global>(&db, "global").await.unwrap();
    assert_eq!(inspect["Oper"]["vlansInUse"], "");
}
