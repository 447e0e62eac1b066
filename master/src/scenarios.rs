//! Behaviour tests of the object model against the in-memory store, one per scenario of Contiv's
//! objApi suite (reference §9.3), written from the documented behaviour.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::endpoint::{
    self, AddressAllocRequest, AddressReleaseRequest, ConfigEp, CreateEndpointRequest,
    DeleteEndpointRequest, UpdateEndpointRequest,
};
use crate::error::Error;
use crate::model::*;
use crate::state::{
    CfgEndpointState, CfgNetworkState, CfgPolicyRule, CfgServiceLbState, EndpointGroupState,
    EpgPolicy,
};
use crate::store::txn::Db;
use crate::store::{MemoryStore, keys};

fn db() -> Db {
    Db::new(Arc::new(MemoryStore::new()))
}

fn status<T: std::fmt::Debug>(r: Result<T, Error>) -> u16 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.http_status(),
    }
}

async fn setup(db: &Db) {
    ops::upsert(db, "global", Global::defaults("bridge", "default"))
        .await
        .unwrap();
    ops::upsert(db, "default", Tenant::named("default"))
        .await
        .unwrap();
}

fn net(tenant: &str, name: &str, encap: &str, subnet: &str, tag: i64) -> Network {
    Network {
        network_name: name.into(),
        tenant_name: tenant.into(),
        encap: encap.into(),
        subnet: subnet.into(),
        pkt_tag: tag,
        ..Default::default()
    }
}

async fn add_net(db: &Db, n: Network) -> Result<Network, Error> {
    let key = format!("{}:{}", n.tenant_name, n.network_name);
    ops::upsert(db, &key, n).await
}

fn epg(tenant: &str, name: &str, network: &str) -> EndpointGroup {
    EndpointGroup {
        group_name: name.into(),
        tenant_name: tenant.into(),
        network_name: network.into(),
        ..Default::default()
    }
}

async fn add_epg(db: &Db, g: EndpointGroup) -> Result<EndpointGroup, Error> {
    let key = format!("{}:{}", g.tenant_name, g.group_name);
    ops::upsert(db, &key, g).await
}

async fn net_state(db: &Db, id: &str) -> CfgNetworkState {
    let kv = db
        .store()
        .get(&CfgNetworkState::key_for(id))
        .await
        .unwrap()
        .unwrap();
    serde_json::from_slice(&kv.value).unwrap()
}

async fn epg_state(db: &Db, id: &str) -> EndpointGroupState {
    let kv = db
        .store()
        .get(&EndpointGroupState::key_for(id))
        .await
        .unwrap()
        .unwrap();
    serde_json::from_slice(&kv.value).unwrap()
}

async fn keys_under(db: &Db, prefix: &str) -> Vec<String> {
    db.store()
        .list(prefix)
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| kv.key)
        .collect()
}

fn ep_req(tenant: &str, network: &str, group: &str, container: &str) -> CreateEndpointRequest {
    CreateEndpointRequest {
        TenantName: tenant.into(),
        NetworkName: network.into(),
        ServiceName: group.into(),
        EndpointID: container.into(),
        ConfigEP: ConfigEp {
            Container: container.into(),
            Host: "host1".into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

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
    assert_eq!(
        st.ip_alloc_map.encode(),
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

async fn policy_setup(db: &Db) {
    setup(db).await;
    add_net(db, net("default", "n1", "vxlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    ops::upsert(
        db,
        "default:p1",
        Policy {
            policy_name: "p1".into(),
            tenant_name: "default".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
}

fn rule(id: &str, direction: &str, protocol: &str, port: i64, action: &str, priority: i64) -> Rule {
    Rule {
        rule_id: id.into(),
        tenant_name: "default".into(),
        policy_name: "p1".into(),
        direction: direction.into(),
        protocol: protocol.into(),
        port,
        action: action.into(),
        priority,
        ..Default::default()
    }
}

async fn add_rule(db: &Db, r: Rule) -> Result<Rule, Error> {
    let key = format!("{}:{}:{}", r.tenant_name, r.policy_name, r.rule_id);
    ops::upsert(db, &key, r).await
}

#[tokio::test]
async fn policy_rules() {
    let db = db();
    policy_setup(&db).await;
    add_rule(&db, rule("1", "in", "tcp", 0, "deny", 1))
        .await
        .unwrap();
    add_rule(&db, rule("2", "in", "tcp", 8000, "allow", 100))
        .await
        .unwrap();
    // Priority 0 becomes 1; rules are immutable; bad fields name themselves.
    let r = add_rule(&db, rule("3", "out", "udp", 53, "allow", 0))
        .await
        .unwrap();
    assert_eq!(r.priority, 1);
    assert_eq!(
        status(add_rule(&db, rule("3", "out", "udp", 54, "allow", 1)).await),
        409
    );
    for (bad, field) in [
        (rule("4", "both", "tcp", 1, "allow", 1), "direction"),
        (rule("4", "in", "sctp", 1, "allow", 1), "protocol"),
        (rule("4", "in", "tcp", 70000, "allow", 1), "port"),
        (rule("4", "in", "tcp", 1, "permit", 1), "action"),
        (rule("4", "in", "tcp", 1, "allow", 101), "priority"),
    ] {
        let err = add_rule(&db, bad).await.unwrap_err();
        assert_eq!(err.http_status(), 400);
        assert!(err.to_string().contains(field), "{err}");
    }
    let mut to_on_in = rule("4", "in", "tcp", 1, "allow", 1);
    to_on_in.to_endpoint_group = "g".into();
    assert_eq!(status(add_rule(&db, to_on_in).await), 400);
    let mut from_on_out = rule("4", "out", "tcp", 1, "allow", 1);
    from_on_out.from_network = "n1".into();
    assert_eq!(status(add_rule(&db, from_on_out).await), 400);
    let mut both = rule("4", "in", "tcp", 1, "allow", 1);
    both.from_network = "n1".into();
    both.from_ip_address = "10.1.1.1".into();
    assert_eq!(status(add_rule(&db, both).await), 400);
    let mut missing_group = rule("4", "in", "tcp", 1, "allow", 1);
    missing_group.from_endpoint_group = "nope".into();
    assert_eq!(status(add_rule(&db, missing_group).await), 404);
    let mut no_policy = rule("4", "in", "tcp", 1, "allow", 1);
    no_policy.policy_name = "p9".into();
    assert_eq!(status(add_rule(&db, no_policy).await), 404);
    let p = ops::get::<Policy>(&db, "default:p1").await.unwrap();
    assert_eq!(p.link_sets.rules.len(), 3);
    // Deleting the policy deletes its rules.
    ops::delete::<Policy>(&db, "default:p1").await.unwrap();
    assert!(
        keys_under(&db, &keys::model_prefix("rule"))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn epg_policies() {
    let db = db();
    policy_setup(&db).await;
    add_rule(&db, rule("1", "in", "tcp", 0, "deny", 1))
        .await
        .unwrap();
    add_rule(&db, rule("2", "in", "tcp", 8000, "allow", 100))
        .await
        .unwrap();
    let mut g = epg("default", "g1", "n1");
    g.policies = vec!["p1".into()];
    add_epg(&db, g.clone()).await.unwrap();
    let id = epg_state(&db, "g1:default").await.endpoint_group_id;
    assert_eq!(id, 1);
    let ep_key = EpgPolicy::key_for("default:g1:default:p1");
    let ep: EpgPolicy =
        serde_json::from_slice(&db.store().get(&ep_key).await.unwrap().unwrap().value).unwrap();
    assert_eq!(ep.EndpointGroupID, 1);
    assert_eq!(ep.RuleMaps.len(), 2);
    let rules = keys_under(&db, &keys::state_prefix(keys::category::POLICY_RULE)).await;
    let names: Vec<&str> = rules
        .iter()
        .map(|k| k.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "default:g1:default:p1:default:p1:1:inRx",
            "default:g1:default:p1:default:p1:2:inRx",
            "default:g1:default:p1:default:p1:2:inTx",
        ]
    );
    let deny: CfgPolicyRule =
        serde_json::from_slice(&db.store().get(&rules[0]).await.unwrap().unwrap().value).unwrap();
    assert_eq!(
        (
            deny.rule.DstEndpointGroup,
            deny.rule.IpProtocol,
            deny.rule.TcpFlags.as_str(),
            deny.rule.Action.as_str()
        ),
        (1, 6, "syn,!ack", "deny")
    );
    let raw: serde_json::Value =
        serde_json::from_slice(&db.store().get(&rules[1]).await.unwrap().unwrap().value).unwrap();
    assert_eq!(raw["Priority"], 100);
    assert_eq!(raw["DstPort"], 8000);
    // A rule added later is compiled into the attached EPG; deleting it removes it.
    let mut from_group = rule("3", "in", "tcp", 8001, "allow", 50);
    from_group.from_endpoint_group = "g1".into();
    add_rule(&db, from_group).await.unwrap();
    assert_eq!(
        keys_under(&db, &keys::state_prefix(keys::category::POLICY_RULE))
            .await
            .len(),
        5
    );
    ops::delete::<Rule>(&db, "default:p1:3").await.unwrap();
    assert_eq!(
        keys_under(&db, &keys::state_prefix(keys::category::POLICY_RULE))
            .await
            .len(),
        3
    );
    // A used policy cannot be deleted; detaching it removes its compiled rules.
    assert_eq!(status(ops::delete::<Policy>(&db, "default:p1").await), 409);
    g.policies.clear();
    add_epg(&db, g.clone()).await.unwrap();
    assert!(
        keys_under(&db, &keys::state_prefix(keys::category::POLICY_RULE))
            .await
            .is_empty()
    );
    assert!(db.store().get(&ep_key).await.unwrap().is_none());
    ops::delete::<Policy>(&db, "default:p1").await.unwrap();
    // Unknown policy.
    g.policies = vec!["p1".into()];
    let err = add_epg(&db, g).await.unwrap_err();
    assert_eq!(err.http_status(), 404);
    assert!(err.to_string().contains("Policy p1 not found"), "{err}");
}

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
        endpoint::delete_endpoint(
            &db,
            &DeleteEndpointRequest {
                TenantName: "default".into(),
                NetworkName: "n1".into(),
                EndpointID: c.into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    }
    ops::delete::<EndpointGroup>(&db, "default:g1")
        .await
        .unwrap();
    // The pool is free in the network map again (10.1.0.4 stays used).
    let st = net_state(&db, "n1.default").await;
    assert!(!st.ip_alloc_map.test(1) && !st.ip_alloc_map.test(3) && st.ip_alloc_map.test(4));
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
    let mut bad = b.clone();
    bad.as_ = "sixty".into();
    assert_eq!(status(ops::upsert(&db, "host1", bad).await), 400);
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

#[tokio::test]
async fn endpoint_create() {
    let db = db();
    setup(&db).await;
    let mut n = net("default", "n1", "vxlan", "20.1.1.0/24", 0);
    n.ipv6_subnet = "2001:db8::/120".into();
    add_net(&db, n).await.unwrap();
    add_epg(&db, epg("default", "g1", "n1")).await.unwrap();
    let ep = endpoint::create_endpoint(&db, &ep_req("default", "n1", "g1", "c1"))
        .await
        .unwrap();
    assert_eq!(ep.id, "n1.default-c1");
    assert_eq!(ep.ip_address, "20.1.1.1");
    assert_eq!(ep.mac_address, "02:02:14:01:01:01");
    assert_eq!(ep.ipv6_address, "2001:db8::1");
    assert_eq!(
        (ep.endpoint_group_id, ep.endpoint_group_key.as_str()),
        (1, "g1:default")
    );
    // Idempotent.
    assert_eq!(
        endpoint::create_endpoint(&db, &ep_req("default", "n1", "g1", "c1"))
            .await
            .unwrap(),
        ep
    );
    assert_eq!(net_state(&db, "n1.default").await.ep_count, 1);
    assert_eq!(epg_state(&db, "g1:default").await.ep_count, 1);
    // allocAddress then createEndpoint with that address claims it without a second allocation.
    let alloc = endpoint::alloc_address(
        &db,
        &AddressAllocRequest {
            NetworkID: "n1.default".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(alloc.IPv4Address, "20.1.1.2/24");
    let mut req = ep_req("default", "n1", "g1", "c2");
    req.ConfigEP.IPAddress = alloc.IPv4Address.clone();
    assert_eq!(
        endpoint::create_endpoint(&db, &req)
            .await
            .unwrap()
            .ip_address,
        "20.1.1.2"
    );
    assert_eq!(
        endpoint::create_endpoint(&db, &ep_req("default", "n1", "", "c3"))
            .await
            .unwrap()
            .ip_address,
        "20.1.1.3"
    );
    // By pool, and release.
    let by_pool = endpoint::alloc_address(
        &db,
        &AddressAllocRequest {
            AddressPool: "20.1.1.0/24".into(),
            PreferredIPv4Address: "20.1.1.100".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        (by_pool.NetworkID.as_str(), by_pool.IPv4Address.as_str()),
        ("n1.default", "20.1.1.100/24")
    );
    endpoint::release_address(
        &db,
        &AddressReleaseRequest {
            NetworkID: "n1.default".into(),
            IPv4Address: "20.1.1.100".into(),
        },
    )
    .await
    .unwrap();
    assert!(!net_state(&db, "n1.default").await.ip_alloc_map.test(100));
    // Inspect by container id substring.
    let inspect = endpoint::inspect_endpoint(&db, "c2").await.unwrap();
    assert_eq!(inspect["Oper"]["ipAddress"][0], "20.1.1.2");
    assert_eq!(inspect["Oper"]["network"], "n1.default");
    assert_eq!(status(endpoint::inspect_endpoint(&db, "zzz").await), 404);
    // Network and EPG are kept alive by endpoints.
    assert_eq!(status(ops::delete::<Network>(&db, "default:n1").await), 409);
    let err = ops::delete::<EndpointGroup>(&db, "default:g1")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("active endpoints"), "{err}");
    // Unknown EPG / network.
    assert_eq!(
        status(endpoint::create_endpoint(&db, &ep_req("default", "n1", "nope", "c9")).await),
        404
    );
    assert_eq!(
        status(endpoint::create_endpoint(&db, &ep_req("default", "nope", "", "c9")).await),
        404
    );
    // Delete frees everything; cleanup by network removes the rest.
    let del = endpoint::delete_endpoint(
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
    assert_eq!(del.ip_address, "20.1.1.1");
    assert_eq!(
        status(
            endpoint::delete_endpoint(
                &db,
                &DeleteEndpointRequest {
                    TenantName: "default".into(),
                    NetworkName: "n1".into(),
                    EndpointID: "c1".into(),
                    ..Default::default()
                }
            )
            .await
        ),
        404
    );
    assert_eq!(
        endpoint::cleanup(&db, "default", "net", "n1")
            .await
            .unwrap()
            .len(),
        2
    );
    let st = net_state(&db, "n1.default").await;
    assert_eq!((st.ep_count, st.ep_addr_count), (0, 0));
    assert_eq!(st.ip_alloc_map.count(), 2);
    assert!(st.ipv6_alloc_map.is_empty());
    assert!(
        keys_under(&db, &keys::state_prefix(keys::category::EPS))
            .await
            .is_empty()
    );
    ops::delete::<EndpointGroup>(&db, "default:g1")
        .await
        .unwrap();
    ops::delete::<Network>(&db, "default:n1").await.unwrap();
}

#[tokio::test]
async fn concurrent_endpoint_creates_get_distinct_addresses() {
    let db = db();
    setup(&db).await;
    add_net(&db, net("default", "n1", "vxlan", "10.1.0.0/24", 0))
        .await
        .unwrap();
    let reqs: Vec<CreateEndpointRequest> = (0..200)
        .map(|i| ep_req("default", "n1", "", &format!("c{i}")))
        .collect();
    let results =
        futures::future::join_all(reqs.iter().map(|r| endpoint::create_endpoint(&db, r))).await;
    let ok: Vec<CfgEndpointState> = results.into_iter().filter_map(Result::ok).collect();
    // 254 usable addresses: all 200 succeed, all distinct.
    assert_eq!(ok.len(), 200);
    let mut ips: Vec<&str> = ok.iter().map(|e| e.ip_address.as_str()).collect();
    ips.sort_unstable();
    ips.dedup();
    assert_eq!(ips.len(), 200);
    assert_eq!(net_state(&db, "n1.default").await.ep_count, 200);
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

#[tokio::test]
async fn preallocated_addresses_cannot_be_shared_or_freed_twice() {
    let db = db();
    setup(&db).await;
    let mut n = net("default", "n1", "vxlan", "10.1.1.0/24", 0);
    n.gateway = "10.1.1.254".into();
    add_net(&db, n).await.unwrap();
    let alloc = endpoint::alloc_address(
        &db,
        &AddressAllocRequest {
            NetworkID: "n1.default".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(alloc.IPv4Address, "10.1.1.1/24");
    let mut a = ep_req("default", "n1", "", "a");
    a.ConfigEP.IPAddress = "10.1.1.1".into();
    endpoint::create_endpoint(&db, &a).await.unwrap();
    // The same address for another container, the gateway, the network or broadcast address: refused.
    for taken in ["10.1.1.1", "10.1.1.254", "10.1.1.0", "10.1.1.255"] {
        let mut b = ep_req("default", "n1", "", "b");
        b.ConfigEP.IPAddress = taken.into();
        assert_eq!(
            status(endpoint::create_endpoint(&db, &b).await),
            409,
            "{taken}"
        );
    }
    // Docker's order: deleteEndpoint frees the address, a later releaseAddress must not free it
    // again once another endpoint holds it.
    endpoint::delete_endpoint(
        &db,
        &DeleteEndpointRequest {
            TenantName: "default".into(),
            NetworkName: "n1".into(),
            EndpointID: "a".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let c = endpoint::create_endpoint(&db, &ep_req("default", "n1", "", "c"))
        .await
        .unwrap();
    assert_eq!(c.ip_address, "10.1.1.1");
    endpoint::release_address(
        &db,
        &AddressReleaseRequest {
            NetworkID: "n1.default".into(),
            IPv4Address: alloc.IPv4Address,
        },
    )
    .await
    .unwrap();
    assert!(
        net_state(&db, "n1.default").await.ip_alloc_map.test(1),
        "the live endpoint keeps its address"
    );
    assert_eq!(
        endpoint::create_endpoint(&db, &ep_req("default", "n1", "", "d"))
            .await
            .unwrap()
            .ip_address,
        "10.1.1.2"
    );
}
