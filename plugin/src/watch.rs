//! Replay and watch of the cluster state netplugin follows (reference §4.1 steps 4 and 6):
//! networks (`state/nets`), endpoint groups (`state/endpointGroups`), the global config
//! (`master/config`), endpoints' oper state (`oper/eps`, for other hosts' endpoints: replayed
//! at start only, never followed; the ofnet master relays changes, see `crate::ofnet_rpc`),
//! compiled policy rules (`state/policyRule`) and service load balancers (`state/serviceLB`,
//! `state/serviceProvider`).
//!
//! Contract: [`replay`] applies the current content of each prefix and returns the revision
//! it read at; [`follow`] then watches from the next revision, so no change is missed. A
//! broken watch is re-established by listing again (every apply is idempotent); a delete
//! that happened while the watch was down is not seen (it is picked up at the next start).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use master::state::{BgpState, CfgNetworkState, EndpointGroupState, GlobConfig};
use master::store::{WatchEvent, keys};

use crate::driver::Driver;
use crate::driver::policy::PolicyEvent;
use crate::driver::service::ServiceEvent;
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
    /// Compiled policy rules and the attachments that make them count (`state/policy/` and
    /// `state/policyRule/`, one prefix, so their order is the store's).
    PolicyRules,
    /// Service load balancers and their providers (`state/serviceLB/` and
    /// `state/serviceProvider/`, one prefix).
    Services,
    /// Bgp objects (`state/bgp/`): this host's drives its BGP speaker (routing mode).
    Bgp,
}

impl Topic {
    /// In replay order: endpoints need their networks, services their providers' endpoints.
    pub const ALL: [Topic; 7] = [
        Topic::Networks,
        Topic::Groups,
        Topic::Global,
        Topic::Endpoints,
        Topic::PolicyRules,
        Topic::Services,
        Topic::Bgp,
    ];

    /// What is watched after the replay: everything but endpoints, which the ofnet master
    /// relays.
    pub const FOLLOWED: [Topic; 6] = [
        Topic::Networks,
        Topic::Groups,
        Topic::Global,
        Topic::PolicyRules,
        Topic::Services,
        Topic::Bgp,
    ];

    pub fn prefix(self) -> String {
        match self {
            Topic::Networks => keys::state_prefix(keys::category::NETS),
            Topic::Groups => keys::state_prefix(keys::category::EPGS),
            Topic::Global => GlobConfig::key(),
            Topic::Endpoints => OperEndpointState::prefix(),
            Topic::PolicyRules => keys::state_prefix(keys::category::POLICY)
                .trim_end_matches('/')
                .to_string(),
            Topic::Services => format!("{}service", keys::STATE),
            Topic::Bgp => keys::state_prefix(keys::category::BGP),
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
        Topic::PolicyRules => {
            let event = PolicyEvent::Put {
                key: key.to_string(),
                value: value.to_vec(),
            };
            driver.apply_policy(vec![event], false).await
        }
        Topic::Bgp => match serde_json::from_slice::<BgpState>(value) {
            Ok(bgp) if bgp.hostname == driver.cfg.host => driver.apply_bgp(Some(&bgp)).await,
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::warn!(%key, error = %e, "Bgp state does not parse");
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
        Topic::Services => {
            let event = ServiceEvent::Put {
                key: key.to_string(),
                value: value.to_vec(),
            };
            driver.apply_service_events(vec![event]).await;
            Ok(())
        }
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
        Topic::Bgp => {
            if id == driver.cfg.host
                && let Err(e) = driver.apply_bgp(None).await
            {
                tracing::warn!(error = %e, "removing this host's BGP");
            }
        }
        Topic::PolicyRules => {
            let event = PolicyEvent::Delete {
                key: key.to_string(),
            };
            if let Err(e) = driver.apply_policy(vec![event], false).await {
                tracing::warn!(rule = %id, error = %e, "removing a policy rule");
            }
        }
        // Read once at start only: changes come from the ofnet master (`crate::ofnet_rpc`).
        Topic::Endpoints => {}
        Topic::Services => {
            let event = ServiceEvent::Delete {
                key: key.to_string(),
            };
            driver.apply_service_events(vec![event]).await;
        }
    }
}

/// Most watch events handled as one batch.
const BATCH: usize = 16_384;

async fn apply_policy_batch(driver: &Driver, events: Vec<PolicyEvent>) {
    if events.is_empty() {
        return;
    }
    if let Err(e) = driver.apply_policy(events, false).await {
        tracing::warn!(error = %e, "applying policy rules failed");
    }
}

/// Apply the current state of `topic`; returns the revision it was read at.
pub async fn replay(driver: &Driver, topic: Topic) -> Result<i64> {
    let listing = master::store::list_all(driver.store.as_ref(), &topic.prefix()).await?;
    if topic == Topic::PolicyRules {
        let events = listing
            .entries
            .into_iter()
            .map(|kv| PolicyEvent::Put {
                key: kv.key,
                value: kv.value,
            })
            .collect();
        if let Err(e) = driver.apply_policy(events, true).await {
            tracing::warn!(error = %e, "applying the policy rules failed");
        }
        return Ok(listing.revision);
    }
    if topic == Topic::Services {
        let events = listing
            .entries
            .into_iter()
            .map(|kv| ServiceEvent::Put {
                key: kv.key,
                value: kv.value,
            })
            .collect();
        driver.apply_service_events(events).await;
        return Ok(listing.revision);
    }
    for kv in &listing.entries {
        apply_put(driver, topic, &kv.key, &kv.value).await;
    }
    Ok(listing.revision)
}

/// The next item of `stream` and every item already waiting behind it, at most `max`; `None`
/// when the stream has ended. Unlike `ready_chunks`, which keeps a buffer with room for `max`
/// items between bursts (per watch, for the daemon's life), the batch is only as large as the
/// burst.
async fn next_batch<S: futures::stream::FusedStream + Unpin>(
    stream: &mut S,
    max: usize,
) -> Option<Vec<S::Item>> {
    let first = stream.next().await?;
    let mut batch = vec![first];
    while batch.len() < max {
        match futures::FutureExt::now_or_never(stream.next()) {
            Some(Some(item)) => batch.push(item),
            // Ended (the next call says so) or nothing more waiting.
            Some(None) | None => break,
        }
    }
    Some(batch)
}

/// Follow `topic` from `revision + 1` forever (run it as a task).
pub async fn follow(driver: Arc<Driver>, topic: Topic, mut revision: i64) {
    loop {
        match driver.store.watch(topic.prefix(), revision + 1).await {
            Ok(events) => {
                // Events already waiting are taken together: policy rules go to the agents
                // as one change per batch (a 10,000-rule attach is a few bundles, not 10,000).
                let mut events = events.fuse();
                'watch: while let Some(batch) = next_batch(&mut events, BATCH).await {
                    let mut policy = Vec::new();
                    let mut services = Vec::new();
                    for event in batch {
                        match event {
                            Ok(WatchEvent::Put { kv }) => {
                                revision = revision.max(kv.mod_revision);
                                if topic == Topic::PolicyRules {
                                    policy.push(PolicyEvent::Put {
                                        key: kv.key,
                                        value: kv.value,
                                    });
                                } else if topic == Topic::Services {
                                    services.push(ServiceEvent::Put {
                                        key: kv.key,
                                        value: kv.value,
                                    });
                                } else {
                                    apply_put(&driver, topic, &kv.key, &kv.value).await;
                                }
                            }
                            Ok(WatchEvent::Delete { key, revision: r }) => {
                                revision = revision.max(r);
                                if topic == Topic::PolicyRules {
                                    policy.push(PolicyEvent::Delete { key });
                                } else if topic == Topic::Services {
                                    services.push(ServiceEvent::Delete { key });
                                } else {
                                    apply_delete(&driver, topic, &key).await;
                                }
                            }
                            Err(e) => {
                                tracing::warn!(?topic, error = %e, "watch broke");
                                apply_policy_batch(&driver, policy).await;
                                driver.apply_service_events(services).await;
                                break 'watch;
                            }
                        }
                    }
                    apply_policy_batch(&driver, policy).await;
                    if !services.is_empty() {
                        driver.apply_service_events(services).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_is_what_is_waiting_up_to_the_limit() {
        let mut ready = futures::stream::iter(0..10).fuse();
        assert_eq!(next_batch(&mut ready, 4).await, Some(vec![0, 1, 2, 3]));
        assert_eq!(next_batch(&mut ready, 100).await, Some((4..10).collect()));
        assert_eq!(next_batch(&mut ready, 100).await, None, "ended");

        // Only what has arrived: the batch does not wait for more.
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut arriving = rx.fuse();
        for i in 0..3 {
            tx.unbounded_send(i).unwrap();
        }
        let batch = next_batch(&mut arriving, 100).await.unwrap();
        assert_eq!(batch, vec![0, 1, 2]);
        assert!(batch.capacity() < 100, "sized by the burst, not the limit");
        tx.unbounded_send(3).unwrap();
        drop(tx);
        assert_eq!(next_batch(&mut arriving, 100).await, Some(vec![3]));
        assert_eq!(next_batch(&mut arriving, 100).await, None);
    }
}
