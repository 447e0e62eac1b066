//! Policies and rules, and their compilation into EPGs.

use super::*;

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
    assert!(ep.RuleMaps.is_empty());
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
async fn in_rule_to_ip_must_be_an_endpoint_of_the_only_group() {
    let db = db();
    policy_setup(&db).await;
    let mut r = rule("k8s", "in", "tcp", 80, "allow", 1);
    r.to_ip_address = "10.1.1.1".into();
    // No group uses the policy yet.
    assert_eq!(status(add_rule(&db, r.clone()).await), 400);
    let mut g = epg("default", "g1", "n1");
    g.policies = vec!["p1".into()];
    add_epg(&db, g).await.unwrap();
    // The address is not an endpoint of the group yet.
    assert_eq!(status(add_rule(&db, r.clone()).await), 400);
    endpoint::create_endpoint(&db, &ep_req("default", "n1", "g1", "pod1"))
        .await
        .unwrap();
    add_rule(&db, r).await.unwrap();
    let compiled = keys_under(&db, &keys::state_prefix(keys::category::POLICY_RULE)).await;
    assert_eq!(compiled.len(), 2, "{compiled:?}");
}
