//! Kubernetes NetworkPolicy (`networking.k8s.io/v1`) for this host's pods: every netplugin
//! follows the API's NetworkPolicies, Pods and Namespaces, resolves the policies that select
//! its own pods to addresses and port numbers, and hands them to its agents
//! ([`ofnet::netpol`]), which enforce them statefully in the switch. Why each agent computes
//! its own pods' policies (and not netmaster): `docs/networkpolicy.md`, "Control plane".
//!
//! Layout:
//! - [`selector`]: label selectors (pure).
//! - [`resolve`]: one policy to the datapath's policies for this host (pure, unit tested).
//! - [`controller`]: the actor that owns the objects and this host's pods, and applies every
//!   change to each agent as one transaction; [`PolicyHandle`] is how the CNI server and the
//!   daemon talk to it.
//!
//! Started by [`crate::daemon`] in `--mode kubernetes` when `--kube-config` names an API
//! server.

pub mod controller;
pub mod resolve;
pub mod selector;

pub use controller::{NetpolError, PolicyHandle, PolicySink, local_pods, start};
pub use resolve::{LocalPod, PodInfo};
