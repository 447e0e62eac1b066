//! Policies larger than etcd's 128-operation transaction limit: attach, rule add/remove and detach
//! through the REST API, the leader-start repair of `state/policyRule`, and the compare limit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use master::model::{EndpointGroup, Policy, Rule};
use master::policy::{Resolved, compile};
use master::state::{CfgPolicyRule, EpgPolicy};
use master::store::keys::{self, category};
use master::store::txn::{Db, Tx, run};
use master::store::{EtcdStore, KeyValue, MAX_TXN_OPS, Op, StateStore, StoreError};

use crate::common::*;

const RULES: usize = 150;
const EPG_POLICY: &str = "default:g1:default:p1";

/// Ported rule `i` (two compiled rules each): `in` for even `i`, `out` for odd, each with its own
/// port and peer address so every compiled record has distinct content.
fn rule(i: usize) -> Rule {
    let peer = format!("10.9.{}.{}/32", i / 200, i % 200 + 1);
    let inbound = i.is_multiple_of(2);
    Rule {
        key: format!("default:p1:{i}"),
        rule_id: i.to_string(),
        tenant_name: "default".into(),
        policy_name: "p1".into(),
        direction: if inbound { "in" } else { "out" }.into(),
        protocol: if i.is_multiple_of(3) { "udp" } else { "tcp" }.into(),
        port: 1000 + i64::try_from(i).unwrap(),
        priority: 1 + i64::try_from(i % 10).unwrap(),
        action: if i.is_multiple_of(5) { "deny" } else { "allow" }.into(),
        from_ip_address: if inbound { peer.clone() } else { String::new() },
        to_ip_address: if inbound { String::new() } else { peer },
        ..Default::default()
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

async fn compiled(store: &EtcdStore) -> BTreeMap<String, KeyValue> {
    store
        .list(&keys::state_prefix(category::POLICY_RULE))
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| (kv.key.clone(), kv))
        .collect()
}

async fn epg_policy(store: &EtcdStore) -> Option<EpgPolicy> {
    store
        .get(&EpgPolicy::key_for(EPG_POLICY))
        .await
        .unwrap()
        .map(|kv| serde_json::from_slice(&kv.value).unwrap())
}

/// What rule `i` compiles to for the group with id `epg_id`, by key.
fn expected(i: usize, epg_id: u32) -> BTreeMap<String, CfgPolicyRule> {
    let resolved = Resolved {
        epg_id,
        ..Default::default()
    };
    compile(EPG_POLICY, &rule(i), &resolved)
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                CfgPolicyRule::key_for(&r.RuleId),
                CfgPolicyRule {
                    id: r.RuleId.clone(),
                    rule: r,
                },
            )
        })
        .collect()
}

/// Every compiled key in etcd is exactly what `rules` compile to, and the EpgPolicy is small.
async fn assert_compiled(store: &EtcdStore, rules: &[usize]) {
    let ep = epg_policy(store).await.expect("EpgPolicy exists");
    assert!(ep.EndpointGroupID > 0);
    let mut want = BTreeMap::new();
    for &i in rules {
        want.extend(expected(i, ep.EndpointGroupID));
    }
    let have: BTreeMap<String, CfgPolicyRule> = compiled(store)
        .await
        .into_iter()
        .map(|(k, kv)| (k, serde_json::from_slice(&kv.value).unwrap()))
        .collect();
    assert_eq!(have.len(), want.len());
    assert_eq!(have, want);
    // The attachment is one small record; it embeds none of them.
    assert!(ep.RuleMaps.is_empty());
    let size = store
        .get(&EpgPolicy::key_for(EPG_POLICY))
        .await
        .unwrap()
        .unwrap()
        .value
        .len();
    assert!(size < 200, "{size}");
}

#[tokio::test]
async fn policy_of_150_ported_rules_attaches_updates_and_detaches() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let nm = InProcess::start(&etcd.client_url(), 3).await;
    let c = nm.client();
    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();
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
    for i in 0..RULES {
        c.post(&rule(i)).await.unwrap();
    }
    c.post(&group(&[])).await.unwrap();

    // Attach: 300 compiled rules in one REST call.
    let started = Instant::now();
    c.post(&group(&["p1"])).await.unwrap();
    let took = started.elapsed();
    println!("attach of a {RULES}-rule policy (300 compiled rules) took {took:?}");
    let all: Vec<usize> = (0..RULES).collect();
    assert_compiled(&store, &all).await;
    assert_eq!(compiled(&store).await.len(), 2 * RULES);
    let record = store
        .get(&EpgPolicy::key_for(EPG_POLICY))
        .await
        .unwrap()
        .unwrap();
    println!("its EpgPolicy record is {} bytes", record.value.len());

    // One more rule: exactly its two keys are written, every other key keeps its revision.
    let before = compiled(&store).await;
    c.post(&rule(RULES)).await.unwrap();
    let after = compiled(&store).await;
    let mut changed: Vec<&String> = after
        .iter()
        .filter(|(k, kv)| before.get(*k).map(|b| b.mod_revision) != Some(kv.mod_revision))
        .map(|(k, _)| k)
        .collect();
    changed.sort();
    let added: Vec<String> = expected(RULES, 1).into_keys().collect();
    assert_eq!(changed, added.iter().collect::<Vec<_>>());
    assert!(before.keys().all(|k| after.contains_key(k)));
    let with_new: Vec<usize> = (0..=RULES).collect();
    assert_compiled(&store, &with_new).await;

    // Remove one original rule: exactly its two keys go, the rest are untouched.
    c.delete::<Rule>("default:p1:7").await.unwrap();
    let after_delete = compiled(&store).await;
    let gone: Vec<&String> = after
        .keys()
        .filter(|k| !after_delete.contains_key(*k))
        .collect();
    let removed: Vec<String> = expected(7, 1).into_keys().collect();
    assert_eq!(gone, removed.iter().collect::<Vec<_>>());
    assert!(
        after_delete
            .iter()
            .all(|(k, kv)| after[k].mod_revision == kv.mod_revision)
    );
    let remaining: Vec<usize> = (0..=RULES).filter(|&i| i != 7).collect();
    assert_compiled(&store, &remaining).await;

    // Detach: every compiled rule and the EpgPolicy go.
    c.post(&group(&[])).await.unwrap();
    assert!(compiled(&store).await.is_empty());
    assert!(epg_policy(&store).await.is_none());

    // Attach again, then delete the group with the policy attached.
    c.post(&group(&["p1"])).await.unwrap();
    assert_eq!(compiled(&store).await.len(), 2 * remaining.len());
    c.delete::<EndpointGroup>("default:g1").await.unwrap();
    assert!(compiled(&store).await.is_empty());
    assert!(epg_policy(&store).await.is_none());
}

#[tokio::test]
async fn leader_start_repairs_compiled_policy_rules() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let mut nm = InProcess::start(&etcd.client_url(), 3).await;
    let c = nm.client();
    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();
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
    for i in 0..RULES {
        c.post(&rule(i)).await.unwrap();
    }
    c.post(&group(&["p1"])).await.unwrap();
    let all: Vec<usize> = (0..RULES).collect();
    assert_compiled(&store, &all).await;
    nm.stop();

    // An interrupted change: 140 compiled rules missing, one with other content, 3 orphans.
    let break_it = async || {
        let keys: Vec<String> = compiled(&store).await.into_keys().collect();
        for key in keys.iter().take(140) {
            assert!(store.delete(key).await.unwrap());
        }
        let mut stale: CfgPolicyRule =
            serde_json::from_slice(&store.get(&keys[200]).await.unwrap().unwrap().value).unwrap();
        stale.rule.Action = "deny".into();
        stale.rule.DstPort = 1;
        store
            .put(&keys[200], serde_json::to_vec(&stale).unwrap())
            .await
            .unwrap();
        for n in 0..3 {
            let id = format!("default:gone:default:p9:default:p9:{n}:inRx");
            store
                .put(
                    &CfgPolicyRule::key_for(&id),
                    serde_json::to_vec(&CfgPolicyRule {
                        id: id.clone(),
                        ..Default::default()
                    })
                    .unwrap(),
                )
                .await
                .unwrap();
        }
        assert_eq!(compiled(&store).await.len(), 2 * RULES - 140 + 3);
    };
    break_it().await;

    // The repair itself, as the leader start runs it.
    let db = Db::new(Arc::new(store.clone()));
    let repair = master::policy::repair::reconcile(&db).await.unwrap();
    assert_eq!(
        (repair.written, repair.deleted, repair.corrupt),
        (141, 3, 0)
    );
    assert_compiled(&store, &all).await;
    assert_eq!(
        master::policy::repair::reconcile(&db).await.unwrap(),
        master::policy::repair::Repair::default()
    );

    // And through a real leader start.
    break_it().await;
    let _nm = InProcess::start(&etcd.client_url(), 3).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while compiled(&store).await.len() != 2 * RULES && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_compiled(&store, &all).await;
}

#[tokio::test]
async fn transaction_limits_against_etcd() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let store = EtcdStore::connect(&[etcd.client_url()]).await.unwrap();

    // etcd itself refuses 129 writes with the message the memory store copies.
    let ops: Vec<Op> = (0..=MAX_TXN_OPS)
        .map(|i| Op::Delete {
            key: format!("/k/{i}"),
        })
        .collect();
    let err = store.txn(Vec::new(), ops).await.unwrap_err();
    assert!(
        err.to_string().contains(master::store::TOO_MANY_OPS),
        "{err}"
    );

    // A transaction reading 129 keys fails with our error, not etcd's, and writes nothing.
    let out: Result<(), StoreError> = run(&store, async |tx: &mut Tx<'_>| {
        for i in 0..=MAX_TXN_OPS {
            tx.get_raw(&format!("/r/{i:03}")).await?;
        }
        tx.put("/r/total", "total", &MAX_TXN_OPS)?;
        Ok(())
    })
    .await;
    let err = out.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::TooManyCompares {
                count: 129,
                limit: 128,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("129 compares"), "{err}");
    assert!(store.get("/r/total").await.unwrap().is_none());

    // 128 compares and 1 + 400 derived writes commit: the guarded transaction (1 + 127), then
    // follow-ups of 128, 128 and 17.
    let before = store.list("/").await.unwrap().revision;
    let out: Result<(), StoreError> = run(&store, async |tx: &mut Tx<'_>| {
        for i in 0..MAX_TXN_OPS {
            tx.get_raw(&format!("/r/{i:03}")).await?;
        }
        tx.put("/r/total", "total", &400)?;
        for i in 0..400 {
            tx.put_derived(&format!("/d/{i:03}"), "n", &i)?;
        }
        Ok(())
    })
    .await;
    out.unwrap();
    let listing = store.list("/d/").await.unwrap();
    assert_eq!(listing.entries.len(), 400);
    assert_eq!(listing.revision - before, 4);
}
