//! The host side of the kernel: the namespace where OVS's datapath sees interfaces (veth host
//! ends, uplinks, internal ports). By default netplugin's own; with `--host-netns` another one
//! (an emulated host whose OVS runs in a namespace while netplugin reaches etcd from outside).
//!
//! Contract: [`HostNet::run`] runs a netlink job in that namespace; tokio threads never change
//! namespace (jobs for another namespace run on their own thread, see [`crate::netlink`]).

use std::future::Future;
use std::path::PathBuf;

use crate::netlink::{Netlink, NetlinkError, in_netns};

#[derive(Debug, Clone, Default)]
pub struct HostNet {
    netns: Option<PathBuf>,
}

impl HostNet {
    pub fn new(netns: Option<PathBuf>) -> HostNet {
        HostNet { netns }
    }

    /// Run `job` with a netlink connection in the host namespace.
    pub async fn run<T, F, Fut>(&self, job: F) -> Result<T, NetlinkError>
    where
        F: FnOnce(Netlink) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, NetlinkError>>,
        T: Send + 'static,
    {
        match &self.netns {
            Some(path) => in_netns(path, job).await,
            None => job(Netlink::connect()?).await,
        }
    }
}
