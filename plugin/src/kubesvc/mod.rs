//! Kubernetes Services for pods (reference §7.5): the API server's `Service` and
//! `EndpointSlice` objects become load-balanced services on both ofnet agents, and pods get a
//! route to the service subnet so they reach cluster IPs.
//!
//! Layout:
//! - [`objects`]: the objects as read, and their mapping to a `ServiceSpec` and providers for
//!   this node (pure, unit tested).
//! - [`watcher`]: the reconciler that keeps a [`ServiceSink`] (the `Driver`) equal to both
//!   resources as [`crate::kubewatch`] follows them.
//! - [`route`]: the pod's on-link route for `SVC_SUBNET`.
//!
//! Started by [`crate::daemon`] in `--mode kubernetes` when `--kube-config` names an API
//! server.

pub mod objects;
pub mod route;
pub mod watcher;

pub use crate::kubewatch::WatchOptions;
pub use objects::{AgentService, ObjectKey};
pub use watcher::{ServiceSink, Watcher, run};
