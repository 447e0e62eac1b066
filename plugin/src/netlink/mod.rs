//! Netlink plumbing with `rtnetlink` (no `ip`/`nsenter` subprocesses): veth pairs, MTU, MAC,
//! moving links into pod namespaces, renaming, addresses, default routes, link up, queries.
//!
//! Layout:
//! - [`link`]: [`Netlink`], one rtnetlink connection bound to one namespace, and its link
//!   operations.
//! - [`addr`]: addresses and routes (more `impl Netlink`).
//! - [`netns`]: [`in_netns`], running a job inside another namespace on a dedicated thread.
//! - [`ethtool`]: interface features (transmit checksum offload) over generic netlink.
//! - [`pod`]: the pod interface as a whole (plumb, unplumb, inspect).
//! - [`mac`], [`error`]: [`MacAddr`] and [`NetlinkError`].
//!
//! Contract: no tokio worker thread ever changes namespace; deletes and lookups of missing
//! links succeed (`false` / `None`); a failed [`Netlink::plumb_pod`] leaves no link behind.

pub mod addr;
pub mod error;
pub mod ethtool;
pub mod link;
pub mod mac;
pub mod netns;
pub mod pod;

pub use error::NetlinkError;
pub use link::{Link, MAX_IFNAME_LEN, Netlink};
pub use mac::MacAddr;
pub use netns::in_netns;
pub use pod::{PodInterface, PodInterfaceSpec, PodInterfaceState, pod_interface};
