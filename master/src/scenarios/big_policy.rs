//! A policy larger than etcd's transaction limit, on the memory store (which enforces the limit):
//! attach commits; a follow-up lost to an outage answers 503, asks for a repair, and the repair
//! restores every compiled rule.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;
use crate::store::StateStore;
use crate::store::failing::FailFollowUps;

const RULES: usize = 150;

async fn big_policy(db: &Db) {
    setup(db).await;
    add_net(db, net("default", "n1", "vxlan", "10.1.1.0/24", 0))
        .await
        .unwrap();
    let p = Policy {
        policy_name: "p1".into(),
        tenant_name: "default".into(),
        ..Default::default()
    };
    ops::upsert(db, "default:p1", p).await.unwrap();
    for i in 0..RULES {
        let r = Rule {
            rule_id: i.to_string(),
            tenant_name: "default".into(),
            policy_name: "p1".into(),
            direction: "in".into(),
            protocol: "tcp".into(),
            port: 1000 + i64::try_from(i).unwrap(),
            action: "allow".into(),
            ..Default::default()
        };
        ops::upsert(db, &format!("default:p1:{i}"), r)
            .await
            .unwrap();
    }
}

fn group(policies: &[&str]) -> EndpointGroup {
    EndpointGroup {
        group_name: "g1".into(),
        tenant_name: "default".into(),
        network_name: "n1".into(),
        policies: policies.iter().map(|p| p.to_string()).collect(),
        ..Default::default()
    }
}

async fn compiled(store: &dyn StateStore) -> usize {
    store
        .list(&keys::state_prefix(keys::category::POLICY_RULE))
        .await
        .unwrap()
        .entries
        .len()
}

/// The attachment record: present, small, and without the previous layout's embedded rules.
async fn attachment(store: &dyn StateStore) -> Option<usize> {
    let kv = store
        .get(&EpgPolicy::key_for("default:g1:default:p1"))
        .await
        .unwrap()?;
    let ep: EpgPolicy = serde_json::from_slice(&kv.value).unwrap();
    assert!(ep.RuleMaps.is_empty());
    Some(kv.value.len())
}

#[tokio::test]
async fn attach_and_detach_beyond_the_transaction_limit() {
    let db = db();
    big_policy(&db).await;
    ops::upsert(&db, "default:g1", group(&["p1"]))
        .await
        .unwrap();
    assert_eq!(compiled(db.store()).await, 2 * RULES);
    let size = attachment(db.store()).await.unwrap();
    assert!(size < 200, "{size}");
    // Adding a rule writes its two compiled records and leaves the attachment alone.
    let before = db
        .store()
        .get(&EpgPolicy::key_for("default:g1:default:p1"))
        .await
        .unwrap()
        .unwrap();
    let r = Rule {
        rule_id: "new".into(),
        tenant_name: "default".into(),
        policy_name: "p1".into(),
        direction: "out".into(),
        protocol: "udp".into(),
        port: 53,
        action: "allow".into(),
        ..Default::default()
    };
    ops::upsert(&db, "default:p1:new", r).await.unwrap();
    let after = db
        .store()
        .get(&EpgPolicy::key_for("default:g1:default:p1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before.mod_revision, after.mod_revision);
    assert_eq!(compiled(db.store()).await, 2 * RULES + 2);
    ops::delete::<Rule>(&db, "default:p1:new").await.unwrap();
    assert_eq!(compiled(db.store()).await, 2 * RULES);
    ops::upsert(&db, "default:g1", group(&[])).await.unwrap();
    assert_eq!(compiled(db.store()).await, 0);
    assert_eq!(attachment(db.store()).await, None);
}

#[tokio::test]
async fn attach_cut_short_leaves_nothing_attached_and_the_repair_clears_orphans() {
    let store = FailFollowUps::new();
    store.fail.store(false, Ordering::SeqCst);
    let db = Db::new(Arc::new(store.clone()));
    big_policy(&db).await;
    ops::upsert(&db, "default:g1", group(&[])).await.unwrap();

    // The compiled rules that do not fit the guarded transaction go first; they cannot be
    // written, so neither is the attachment (nor the group's new policy list).
    store.fail.store(true, Ordering::SeqCst);
    let err = ops::upsert(&db, "default:g1", group(&["p1"]))
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), 503);
    assert_eq!(attachment(&store).await, None);
    let g = ops::get::<EndpointGroup>(&db, "default:g1").await.unwrap();
    assert!(g.policies.is_empty());
    tokio::time::timeout(Duration::from_secs(1), db.repair_wanted())
        .await
        .unwrap();

    // A netmaster killed between its pre-writes and its commit leaves compiled rules without an
    // attachment: the repair deletes them.
    store.fail.store(false, Ordering::SeqCst);
    for i in 0..40 {
        let id = format!("default:g1:default:p1:default:p1:{i}:inRx");
        store
            .inner
            .put(&CfgPolicyRule::key_for(&id), b"{}".to_vec())
            .await
            .unwrap();
    }
    let repair = crate::policy::repair::reconcile(&db).await.unwrap();
    assert_eq!((repair.written, repair.deleted), (0, 40));
    assert_eq!(compiled(&store).await, 0);
}

#[tokio::test]
async fn detach_cut_short_answers_503_and_is_repaired() {
    let store = FailFollowUps::new();
    store.fail.store(false, Ordering::SeqCst);
    let db = Db::new(Arc::new(store.clone()));
    big_policy(&db).await;
    ops::upsert(&db, "default:g1", group(&["p1"]))
        .await
        .unwrap();
    assert_eq!(compiled(&store).await, 2 * RULES);

    store.fail.store(true, Ordering::SeqCst);
    let err = ops::upsert(&db, "default:g1", group(&[]))
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), 503);
    assert!(err.to_string().contains("repairs them"), "{err}");
    assert!(err.to_string().contains("policyRule"), "{err}");
    // The attachment went first; only part of its compiled rules went with it.
    assert_eq!(attachment(&store).await, None);
    let left = compiled(&store).await;
    assert!(left > 0 && left < 2 * RULES, "{left}");
    tokio::time::timeout(Duration::from_secs(1), db.repair_wanted())
        .await
        .unwrap();

    store.fail.store(false, Ordering::SeqCst);
    let repair = crate::policy::repair::reconcile(&db).await.unwrap();
    assert_eq!((repair.written, repair.deleted), (0, left));
    assert_eq!(compiled(&store).await, 0);
}

#[tokio::test]
async fn leader_repairs_a_cut_short_detach_once_the_store_answers() {
    let store = FailFollowUps::new();
    store.fail.store(false, Ordering::SeqCst);
    let db = Db::new(Arc::new(store.clone()));
    big_policy(&db).await;
    ops::upsert(&db, "default:g1", group(&["p1"]))
        .await
        .unwrap();
    let role = crate::leader::RoleView::fixed(crate::leader::LeaderState {
        is_leader: true,
        leader: None,
    });
    let config = crate::daemon::Config::new("http://127.0.0.1:1", "test", "vlan", "bridge");
    let duties = crate::daemon::leader_duties(db.clone(), config, role, Vec::new());
    let body = async {
        // Let the leader start (defaults, repair of an already consistent store) finish.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(compiled(&store).await, 2 * RULES);
        store.fail.store(true, Ordering::SeqCst);
        let err = ops::upsert(&db, "default:g1", group(&[]))
            .await
            .unwrap_err();
        assert_eq!(err.http_status(), 503);
        assert!(compiled(&store).await > 0);
        store.fail.store(false, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while compiled(&store).await > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "compiled rules not repaired in time"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        () = duties => panic!("leader duties ended while leading"),
        () = body => {}
    }
    assert_eq!(attachment(&store).await, None);
}

/// State of the previous layout: the `EpgPolicy` embeds every rule and compiled rule. The repair
/// that runs when netmaster becomes leader rewrites it as the small record and keeps (or
/// recompiles) exactly the compiled rules the model gives.
#[tokio::test]
async fn previous_layout_is_converted_at_leader_start() {
    use crate::state::policy::RuleMap;
    let db = db();
    big_policy(&db).await;
    ops::upsert(&db, "default:g1", group(&["p1"]))
        .await
        .unwrap();
    let store = db.store();
    let id = "default:g1:default:p1";
    let mut old: EpgPolicy = serde_json::from_slice(
        &store
            .get(&EpgPolicy::key_for(id))
            .await
            .unwrap()
            .unwrap()
            .value,
    )
    .unwrap();
    let compiled_now = store
        .list(&EpgPolicy::rules_prefix(id))
        .await
        .unwrap()
        .entries;
    for (i, kv) in compiled_now.iter().enumerate() {
        let c: CfgPolicyRule = serde_json::from_slice(&kv.value).unwrap();
        let rule_key = c.id.rsplit_once(':').unwrap().0[id.len() + 1..].to_string();
        let map = old
            .RuleMaps
            .entry(rule_key.clone())
            .or_insert_with(|| RuleMap {
                Rule: Rule {
                    key: rule_key.clone(),
                    ..Default::default()
                },
                OfnetRules: Default::default(),
            });
        map.OfnetRules.insert(c.id.clone(), c.rule.clone());
        // Half of the compiled records are missing, as a cut-short old-layout write left them.
        if i % 2 == 0 {
            store.delete(&kv.key).await.unwrap();
        }
    }
    let old_bytes = serde_json::to_vec(&old).unwrap();
    assert!(old_bytes.len() > 50_000, "{}", old_bytes.len());
    store.put(&EpgPolicy::key_for(id), old_bytes).await.unwrap();

    let repair = crate::policy::repair::reconcile(&db).await.unwrap();
    assert_eq!(repair.converted, 1);
    assert_eq!((repair.written, repair.deleted), (RULES, 0));
    let size = attachment(store).await.unwrap();
    assert!(size < 200, "{size}");
    let after = store
        .list(&EpgPolicy::rules_prefix(id))
        .await
        .unwrap()
        .entries;
    assert_eq!(
        after
            .iter()
            .map(|kv| (&kv.key, &kv.value))
            .collect::<Vec<_>>(),
        compiled_now
            .iter()
            .map(|kv| (&kv.key, &kv.value))
            .collect::<Vec<_>>()
    );
    // A second run finds nothing to do.
    let again = crate::policy::repair::reconcile(&db).await.unwrap();
    assert_eq!(again, crate::policy::repair::Repair::default());
}

/// A policy of more rules than a transaction holds can be deleted (its rules follow it), and
/// rule objects a cut-short delete left behind are removed by the repair.
#[tokio::test]
async fn deleting_a_big_policy_takes_its_rules() {
    let store = FailFollowUps::new();
    store.fail.store(false, Ordering::SeqCst);
    let db = Db::new(Arc::new(store.clone()));
    big_policy(&db).await;
    let rules = || async {
        store
            .inner
            .list(&keys::model_prefix("rule"))
            .await
            .unwrap()
            .entries
            .len()
    };
    assert_eq!(rules().await, RULES);
    store.fail.store(true, Ordering::SeqCst);
    let err = ops::delete::<Policy>(&db, "default:p1").await.unwrap_err();
    assert_eq!(err.http_status(), 503);
    assert!(ops::get::<Policy>(&db, "default:p1").await.is_err());
    let left = rules().await;
    assert!(left > 0 && left < RULES, "{left}");
    store.fail.store(false, Ordering::SeqCst);
    let repair = crate::policy::repair::reconcile(&db).await.unwrap();
    assert_eq!(repair.orphan_rules, left);
    assert_eq!(rules().await, 0);

    big_policy_again(&db).await;
    assert_eq!(rules().await, RULES);
    ops::delete::<Policy>(&db, "default:p1").await.unwrap();
    assert_eq!(rules().await, 0);
}

async fn big_policy_again(db: &Db) {
    let p = Policy {
        policy_name: "p1".into(),
        tenant_name: "default".into(),
        ..Default::default()
    };
    ops::upsert(db, "default:p1", p).await.unwrap();
    for i in 0..RULES {
        let r = Rule {
            rule_id: i.to_string(),
            tenant_name: "default".into(),
            policy_name: "p1".into(),
            direction: "in".into(),
            protocol: "tcp".into(),
            port: 1000 + i64::try_from(i).unwrap(),
            action: "allow".into(),
            ..Default::default()
        };
        ops::upsert(db, &format!("default:p1:{i}"), r)
            .await
            .unwrap();
    }
}
