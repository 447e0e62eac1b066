//! Real sandboxes for tests, demos and benchmarks.
//!
//! Nothing here is a stand-in: every sandbox starts the real program and stops exactly the
//! processes it started, by pid, when it is dropped.
//!
//! Layout:
//! - [`require`]: what a test needs from the machine (root, Open vSwitch, etcd, ...); skips with
//!   a printed reason locally and fails loudly under `CI=true`.
//! - [`Etcd`]: Debian's `etcd` on free loopback ports with a temporary data directory.
//! - [`Ovs`]: a private `ovsdb-server` + `ovs-vswitchd` pair (own run dir, database, sockets),
//!   optionally inside a network namespace, with the userspace `netdev` or the `dummy` datapath.
//! - [`Netns`]: a named network namespace, deleted on drop.
//! - [`Pod`]: a network namespace wired to an OVS bridge by a veth pair, with an address.
//! - [`cleanup`]: finds what a killed test run left behind (processes, namespaces, links) by the
//!   `tb` naming prefix and removes it.
//!
//! Every name (namespace, interface, temporary directory) carries the process id and a counter,
//! so sandboxes from tests running in parallel never collide.

pub mod bench;
pub mod chaos;
pub mod cleanup;
mod command;
pub mod demo;
mod error;
mod etcd;
pub mod garbage;
mod names;
mod netns;
mod ovs;
mod pod;
mod process;
pub mod require;
mod silence;

pub use command::run;
pub use error::Error;
pub use etcd::{Etcd, EtcdOptions, EtcdTls};
pub use names::{SandboxDir, free_port, temp_dir, unique_name};
pub use netns::Netns;
pub use ovs::{Datapath, DumpedFlow, Ovs, OvsOptions};
pub use pod::{PingStats, Pod, PodOptions};
pub use process::pid_alive;
pub use require::Need;
pub use silence::SilencedPort;

/// Result type of every sandbox operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;
