//! Rebuilds the compiled policy rules (`/contiv.io/state/policyRule/`) from the `EpgPolicy` records
//! (`/contiv.io/state/policy/`), which list every compiled rule. Run on each leader start (reference
//! §2.1 re-adds all EPG policy rules there), it finishes a change whose derived writes were cut short
//! by an outage (see `store::txn`): a rule an `EpgPolicy` lists but the store lacks, or holds with
//! other content, is written; a rule no `EpgPolicy` lists is deleted.
//!
//! The whole repair is one transaction through [`Db::write`]: it takes the local writer lock and its
//! guarded part checks that neither prefix changed since it was listed; the rewrites are derived
//! writes, so any number of them is split into limit-sized transactions. If an `EpgPolicy` record
//! cannot be decoded, nothing is deleted (its rules cannot be told from orphans).

use std::collections::BTreeMap;

use crate::error::Result;
use crate::state::{CfgPolicyRule, EpgPolicy};
use crate::store::keys::{self, category};
use crate::store::txn::{Db, decode};

/// What a repair changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repair {
    /// Compiled rules written (missing or different from their `EpgPolicy`).
    pub written: usize,
    /// Compiled rules deleted (listed by no `EpgPolicy`).
    pub deleted: usize,
    /// `EpgPolicy` records that could not be decoded (deletions were skipped).
    pub corrupt: usize,
}

/// Make `state/policyRule` match what the `EpgPolicy` records list.
pub async fn reconcile(db: &Db) -> Result<Repair> {
    let repair = db
        .write(async |tx| {
            let mut repair = Repair::default();
            let mut wanted: BTreeMap<String, CfgPolicyRule> = BTreeMap::new();
            for (key, bytes) in tx.list_raw(&keys::state_prefix(category::POLICY)).await? {
                match decode::<EpgPolicy>(&key, EpgPolicy::KIND, &bytes) {
                    Ok(ep) => {
                        for map in ep.RuleMaps.into_values() {
                            for (id, rule) in map.OfnetRules {
                                wanted.insert(
                                    CfgPolicyRule::key_for(&id),
                                    CfgPolicyRule { id, rule },
                                );
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "policy repair: skipping an undecodable EpgPolicy");
                        repair.corrupt += 1;
                    }
                }
            }
            let stored = tx
                .list_raw(&keys::state_prefix(category::POLICY_RULE))
                .await?;
            for (key, _) in &stored {
                if !wanted.contains_key(key) && repair.corrupt == 0 {
                    tx.delete_derived(key);
                    repair.deleted += 1;
                }
            }
            let stored: BTreeMap<String, Vec<u8>> = stored.into_iter().collect();
            for (key, rule) in &wanted {
                let same = stored.get(key).is_some_and(|bytes| {
                    decode::<CfgPolicyRule>(key, CfgPolicyRule::KIND, bytes)
                        .is_ok_and(|have| have == *rule)
                });
                if !same {
                    tx.put_derived(key, CfgPolicyRule::KIND, rule)?;
                    repair.written += 1;
                }
            }
            Ok::<_, crate::error::Error>(repair)
        })
        .await?;
    if repair != Repair::default() {
        tracing::info!(
            written = repair.written,
            deleted = repair.deleted,
            corrupt = repair.corrupt,
            "compiled policy rules repaired"
        );
    }
    Ok(repair)
}
