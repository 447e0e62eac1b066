//! One Kubernetes resource followed with `kube::runtime`'s watcher: the initial list, watches
//! resumed from the last `resourceVersion` (bookmarks keep it fresh), a re-list after `410
//! Gone`, and a back-off between failed attempts. Consumers ([`crate::kubesvc`],
//! [`crate::kubenetpol`]) get a stream of [`Change`]s.
//!
//! Contract of [`follow`]:
//! - A (re-)list arrives as one [`Change::Listed`] holding every object: it replaces what the
//!   consumer had, so an object deleted while no watch was open disappears then.
//! - Between lists, [`Change::Applied`] (added or modified) and [`Change::Deleted`], in the
//!   order the API server sent them.
//! - Failures (unreachable, 401, malformed objects) are logged once per kind of failure until
//!   the watch works again, and retried after a back-off doubling from
//!   [`WatchOptions::min_backoff`] to [`WatchOptions::max_backoff`]. The stream never ends.

use std::fmt::Debug;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

use crate::kubeapi::KubeClient;

/// Timing of retries after errors.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// The first pause after a failure; it doubles with each failure in a row.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// Doubling from `min` to `max`; a success resets it. (Not `kube`'s `StreamBackoff`: that
/// resets on every item, and a watcher that fails to list still yields its `Init` marker
/// first, so a refused list would be retried at the shortest pause forever.)
struct Doubling {
    opts: WatchOptions,
    next: Duration,
}

impl Doubling {
    fn next(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(self.opts.max_backoff);
        now
    }

    fn reset(&mut self) {
        self.next = self.opts.min_backoff;
    }
}

/// What changed in one resource.
#[derive(Debug, Clone)]
pub enum Change<K> {
    /// A complete list: every object there is now.
    Listed(Vec<K>),
    /// An object was added or modified: it as it is now.
    Applied(K),
    /// An object was deleted: it as it was last.
    Deleted(K),
}

/// Logs a failure once per kind until the next success.
struct Failures {
    resource: String,
    last: Option<&'static str>,
}

impl Failures {
    fn failed(&mut self, error: &watcher::Error) {
        let kind = match error {
            watcher::Error::InitialListFailed(_) => "list failed",
            watcher::Error::WatchStartFailed(_) => "watch refused",
            watcher::Error::WatchError(status) if status.code == 410 => {
                // Not a failure: the version is too old, and the watcher lists again.
                tracing::info!(
                    resource = %self.resource,
                    "watch version too old (410 Gone); listing again"
                );
                return;
            }
            watcher::Error::WatchError(_) => "watch error event",
            watcher::Error::WatchFailed(_) => "watch broke",
            watcher::Error::NoResourceVersion => "no resourceVersion",
        };
        if self.last == Some(kind) {
            tracing::debug!(resource = %self.resource, failure = kind, error = %error, "again");
        } else {
            tracing::warn!(
                resource = %self.resource,
                failure = kind,
                error = %error,
                "Kubernetes watch failed; retrying with back-off"
            );
            self.last = Some(kind);
        }
    }

    fn succeeded(&mut self) {
        if self.last.take().is_some() {
            tracing::info!(resource = %self.resource, "Kubernetes watch works again");
        }
    }
}

/// Follow every object of `K` in all namespaces (see the module contract).
pub fn follow<K>(
    client: &KubeClient,
    opts: WatchOptions,
) -> impl Stream<Item = Change<K>> + Send + use<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let api: kube::Api<K> = kube::Api::all(client.client());
    let events = watcher(api, watcher::Config::default());
    let mut backoff = Doubling {
        opts,
        next: opts.min_backoff,
    };
    let mut failures = Failures {
        resource: K::plural(&()).into_owned(),
        last: None,
    };
    let mut listing: Option<Vec<K>> = None;
    events
        .then(move |event| {
            // Logged at once; the watcher is not polled again until the pause is over.
            let pause = match &event {
                Err(e) => {
                    failures.failed(e);
                    Some(backoff.next())
                }
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
                Ok(_) => {
                    failures.succeeded();
                    backoff.reset();
                    None
                }
            };
            async move {
                if let Some(pause) = pause {
                    tokio::time::sleep(pause).await;
                }
                event
            }
        })
        .filter_map(move |event| {
            let change = match event {
                Err(_) => None,
                Ok(watcher::Event::Init) => {
                    listing = Some(Vec::new());
                    None
                }
                Ok(watcher::Event::InitApply(obj)) => {
                    listing.get_or_insert_with(Vec::new).push(obj);
                    None
                }
                Ok(watcher::Event::InitDone) => {
                    Some(Change::Listed(listing.take().unwrap_or_default()))
                }
                Ok(watcher::Event::Apply(obj)) => Some(Change::Applied(obj)),
                Ok(watcher::Event::Delete(obj)) => Some(Change::Deleted(obj)),
            };
            futures::future::ready(change)
        })
}
