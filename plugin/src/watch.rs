//! Replay and watch of the cluster state netplugin follows (reference §4.1 steps 4 and 6):
//! networks (`state/nets`), endpoint groups (`state/endpointGroups`), the global config
//! (`master/config`), endpoints' oper state (`oper/eps`, for other hosts' endpoints: replayed
//! at start only, never followed; the ofnet master relays changes, see `crate::ofnet_rpc`),
//! compiled policy rules (`state/policyRule`) and service load balancers (`state/serviceLB`).
//!
//! Contract: [`replay`] applies the current content of each prefix and returns the revision
//! it read at; [`follow`] then watches from the next revision, so no change is missed. A
//! broken watch is re-established by listing again (every apply is idempotent); a delete
//! that happened while the watch was down is not seen (it is picked up at the next start).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use master::state::{
    CfgNetworkState, CfgPolicyRule, CfgServiceLbState, EndpointGroupState, GlobConfig,
};
use master::store::{WatchEvent, keys};

use crate::driver::Driver;
use crate::error::Result;
use crate::oper::OperEndpointState;

/// The prefixes followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    Networks,
    Groups,
    Global,
    /// Endpoints' oper state: other hosts' endpoints at start (this host's are re-adopted by
    /// [`Driver::reconcile`]). Not followed: see [`Topic::FOLLOWED`].
    Endpoints,
    /// Compiled policy rules.
    PolicyRules,
    /// Service load balancers: VIP, ports and providers.
    Services,
}

impl Topic {
    /// In replay order: endpoints need their networks, services their providers' endpoints.
    pub const ALL: [Topic; 6] = [
        Topic::Networks,
        Topic::Groups,
        Topic::Global,
        Topic::Endpoints,
        Topic::PolicyRules,
        Topic::Services,
    ];

    /// What is watched after the replay: everything but endpoints, which the ofnet master
    /// relays.
    pub const FOLLOWED: [Topic; 5] = [
        Topic::Networks,
        Topic::Groups,
        Topic::Global,
        Topic::PolicyRules,
        Topic::Services,
    ];

    pub fn prefix(self) -> String {
        match self {
            Topic::Networks => keys::state_prefix(keys::category::NETS),
            Topic::Groups => keys::state_prefix(keys::category::EPGS),
            Topic::Global => GlobConfig::key(),
            Topic::Endpoints => OperEndpointState::prefix(),
            Topic::PolicyRules => keys::state_prefix(keys::category::POLICY_RULE),
            Topic::Services => keys::state_prefix(keys::category::SERVICE_LB),
        }
    }
}

async fn apply_put(driver: &Driver, topic: Topic, key: &str, value: &[u8]) {
    let outcome = match topic {
        Topic::Networks => match serde_json::from_slice::<CfgNetworkState>(value) {
            Ok(net) => match driver.ensure_network(&net).await {
                Ok(()) if net.nw_type == "infra" => driver.ensure_infra(&net).await.map(|_| ()),
                other => other,
            },
            Err(e) => {
                tracing::warn!(%key, error = %e, "network state does not parse");
                Ok(())
            }
        },
        Topic::Groups => match serde_json::from_slice::<EndpointGroupState>(value) {
            Ok(group) => driver.update_group(&group).await,
            Err(e) => {
                tracing::warn!(%key, error = %e, "endpoint group state does not parse");
                Ok(())
            }
        },
        Topic::Global => match serde_json::from_slice::<GlobConfig>(value) {
            Ok(global) => driver.update_global(&global).await,
            Err(e) => {
                tracing::warn!(%key, error = %e, "global config does not parse");
                Ok(())
            }
        },
        Topic::PolicyRules => match serde_json::from_slice::<CfgPolicyRule>(value) {
            Ok(rule) => driver.apply_rule(&rule.rule).await,
            Err(e) => {
                tracing::warn!(%key, error = %e, "policy rule does not parse");
                Ok(())
            }
        },
        Topic::Endpoints => match serde_json::from_slice::<OperEndpointState>(value) {
            Ok(oper) => driver.add_remote(&oper).await.map(|_| ()),
            Err(e) => {
                tracing::warn!(%key, error = %e, "endpoint oper state does not parse");
                Ok(())
            }
        },
        // netmaster writes a service before it has a VIP only transiently; a record that is
        // not (yet) a service is reported and skipped, the next write brings it in.
        Topic::Services => match serde_json::from_slice::<CfgServiceLbState>(value) {
            Ok(service) => driver.apply_service(&service).await,
            Err(e) => {
                tracing::warn!(%key, error = %e, "service state does not parse");
                Ok(())
            }
        },
    };
    if let Err(e) = outcome {
        tracing::warn!(%key, error = %e, "applying a state change failed");
    }
}

async fn apply_delete(driver: &Driver, topic: Topic, key: &str) {
    let id = key.rsplit('/').next().unwrap_or_default();
    match topic {
        Topic::Networks => {
            if let Err(e) = driver.remove_network(id).await {
                tracing::warn!(network = %id, error = %e, "removing a deleted network");
            }
        }
        Topic::Groups => driver.remove_group(id),
        Topic::Global => {}
        Topic::PolicyRules => {
            if let Err(e) = driver.remove_rule(id).await {
                tracing::warn!(rule = %id, error = %e, "removing a policy rule");
            }
        }
        // Read once at start only: changes come from the ofnet master (`crate::ofnet_rpc`).
        Topic::Endpoints => {}
        Topic::Services => {
            if let Err(e) = driver.remove_service(id).await {
                tracing::warn!(service = %id, error = %e, "removing a service");
            }
        }
    }
}

/// Apply the current state of `topic`; returns the revision it was read at.
pub async fn replay(driver: &Driver, topic: Topic) -> Result<i64> {
    let listing = driver.store.list(&topic.prefix()).await?;
    for kv in &listing.entries {
        apply_put(driver, topic, &kv.key, &kv.value).await;
    }
    Ok(listing.revision)
}

/// Follow `topic` from `revision + 1` forever (run it as a task).
pub async fn follow(driver: Arc<Driver>, topic: Topic, mut revision: i64) {
    loop {
        match driver.store.watch(topic.prefix(), revision + 1).await {
            Ok(mut events) => {
                while let Some(event) = events.next().await {
                    match event {
                        Ok(WatchEvent::Put { kv }) => {
                            revision = revision.max(kv.mod_revision);
                            apply_put(&driver, topic, &kv.key, &kv.value).await;
                        }
                        Ok(WatchEvent::Delete { key, revision: r }) => {
                            revision = revision.max(r);
                            apply_delete(&driver, topic, &key).await;
                        }
                        Err(e) => {
                            tracing::warn!(?topic, error = %e, "watch broke");
                            break;
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(?topic, error = %e, "cannot watch"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        match replay(&driver, topic).await {
            Ok(r) => revision = r,
            Err(e) => tracing::warn!(?topic, error = %e, "re-listing after a broken watch"),
        }
    }
}
