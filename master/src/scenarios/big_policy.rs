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

async fn listed(store: &dyn StateStore) -> usize {
    let kv = store
        .get(&EpgPolicy::key_for("default:g1:default:p1"))
        .await
        .unwrap()
        .unwrap();
    let ep: EpgPolicy = serde_json::from_slice(&kv.value).unwrap();
    ep.RuleMaps.values().map(|m| m.OfnetRules.len()).sum()
}

#[tokio::test]
async fn attach_and_detach_beyond_the_transaction_limit() {
    let db = db();
    big_policy(&db).await;
    ops::upsert(&db, "default:g1", group(&["p1"]))
        .await
        .unwrap();
    assert_eq!(compiled(db.store()).await, 2 * RULES);
    assert_eq!(listed(db.store()).await, 2 * RULES);
    ops::upsert(&db, "default:g1", group(&[])).await.unwrap();
    assert_eq!(compiled(db.store()).await, 0);
}

#[tokio::test]
async fn lost_follow_up_answers_503_and_is_repaired() {
    let store = FailFollowUps::new();
    store.fail.store(false, Ordering::SeqCst);
    let db = Db::new(Arc::new(store.clone()));
    big_policy(&db).await;
    ops::upsert(&db, "default:g1", group(&[])).await.unwrap();

    store.fail.store(true, Ordering::SeqCst);
    let err = ops::upsert(&db, "default:g1", group(&["p1"]))
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), 503);
    assert!(err.to_string().contains("repairs them"), "{err}");
    assert!(err.to_string().contains("policyRule"), "{err}");
    // The attachment itself is saved; only part of its compiled rules made it.
    assert_eq!(listed(&store).await, 2 * RULES);
    let partial = compiled(&store).await;
    assert!(partial > 0 && partial < 2 * RULES, "{partial}");
    // The failed write asked for a repair.
    tokio::time::timeout(Duration::from_secs(1), db.repair_wanted())
        .await
        .unwrap();

    store.fail.store(false, Ordering::SeqCst);
    let repair = crate::policy::repair::reconcile(&db).await.unwrap();
    assert_eq!(repair.written, 2 * RULES - partial);
    assert_eq!(repair.deleted, 0);
    assert_eq!(compiled(&store).await, 2 * RULES);
}

#[tokio::test]
async fn leader_repairs_a_cut_short_attach_once_the_store_answers() {
    let store = FailFollowUps::new();
    store.fail.store(false, Ordering::SeqCst);
    let db = Db::new(Arc::new(store.clone()));
    big_policy(&db).await;
    ops::upsert(&db, "default:g1", group(&[])).await.unwrap();
    let role = crate::leader::RoleView::fixed(crate::leader::LeaderState {
        is_leader: true,
        leader: None,
    });
    let config = crate::daemon::Config::new("http://127.0.0.1:1", "test", "vlan", "bridge");
    let duties = crate::daemon::leader_duties(db.clone(), config, role, Vec::new());
    let body = async {
        // Let the leader start (defaults, repair of an already consistent store) finish.
        tokio::time::sleep(Duration::from_millis(200)).await;
        store.fail.store(true, Ordering::SeqCst);
        let err = ops::upsert(&db, "default:g1", group(&["p1"]))
            .await
            .unwrap_err();
        assert_eq!(err.http_status(), 503);
        assert!(compiled(&store).await < 2 * RULES);
        store.fail.store(false, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while compiled(&store).await < 2 * RULES {
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
    assert_eq!(listed(&store).await, 2 * RULES);
}
