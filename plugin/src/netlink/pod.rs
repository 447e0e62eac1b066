//! Plumbing a pod's interface: a veth pair whose host end goes to OVS and whose other end
//! becomes `CNI_IFNAME` inside the pod's namespace, with addresses, default routes and MTU.
//!
//! [`Netlink::plumb_pod`] runs on the host namespace's connection and either completes or
//! leaves nothing behind (the pair is deleted on any failure). [`Netlink::unplumb_pod`] and
//! [`pod_interface`] are safe to call for a pod that is already gone.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;

use super::error::NetlinkError;
use super::link::{Link, Netlink};
use super::mac::MacAddr;
use super::netns::in_netns;

/// What a pod's interface should look like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodInterfaceSpec {
    /// The pod's namespace (`CNI_NETNS`).
    pub netns: PathBuf,
    /// The host end of the pair, added to OVS (`vvport<N>`).
    pub host_name: String,
    /// The pod end's name (`CNI_IFNAME`); it is created under this name inside the pod
    /// namespace, so no temporary name or rename is needed.
    pub ifname: String,
    /// MTU of both ends.
    pub mtu: u32,
    /// MAC of the pod end; the kernel picks one when `None`.
    pub mac: Option<MacAddr>,
    /// Addresses of the pod end, with prefix length.
    pub addresses: Vec<IpNet>,
    /// One default route per gateway (IPv4 and/or IPv6).
    pub gateways: Vec<IpAddr>,
}

/// The plumbed interface, as a CNI result needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodInterface {
    /// The pod end inside the pod namespace.
    pub pod: Link,
    /// The host end.
    pub host: Link,
}

/// What [`pod_interface`] finds inside a pod namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodInterfaceState {
    pub link: Link,
    pub addresses: Vec<IpNet>,
    /// Default routes `(gateway, link index)`.
    pub default_routes: Vec<(IpAddr, u32)>,
}

impl Netlink {
    /// Create and configure the pod's interface (see [`PodInterfaceSpec`]). A leftover host
    /// end with the same name (from an interrupted attempt) is replaced; an existing
    /// `ifname` inside the pod fails the call (the pod is not ours to change).
    pub async fn plumb_pod(&self, spec: &PodInterfaceSpec) -> Result<PodInterface, NetlinkError> {
        // The pod end is born in the pod namespace under its final name.
        self.create_veth_into(
            &spec.host_name,
            &spec.ifname,
            &spec.netns,
            spec.mtu,
            spec.mac,
        )
        .await?;
        match self.configure_pair(spec).await {
            Ok(done) => Ok(done),
            Err(e) => {
                // Deleting the host end removes the pod end too, wherever it is by now.
                if let Err(cleanup) = self.delete_link(&spec.host_name).await {
                    tracing::warn!(link = %spec.host_name, error = %cleanup, "cleanup after a failed plumb");
                }
                Err(e)
            }
        }
    }

    async fn configure_pair(&self, spec: &PodInterfaceSpec) -> Result<PodInterface, NetlinkError> {
        self.set_up(&spec.host_name).await?;
        let inside = spec.clone();
        let pod = in_netns(&spec.netns, move |nl| async move {
            for address in &inside.addresses {
                nl.add_address(&inside.ifname, *address).await?;
            }
            nl.set_up(&inside.ifname).await?;
            for gateway in &inside.gateways {
                nl.add_default_route(&inside.ifname, *gateway).await?;
            }
            nl.require_link(&inside.ifname).await
        })
        .await?;
        let host = self.require_link(&spec.host_name).await?;
        Ok(PodInterface { pod, host })
    }

    /// Remove the pod's interface: `ifname` inside `netns` (if the namespace still exists)
    /// and the host end `host_name`. Returns true if anything was deleted.
    pub async fn unplumb_pod(
        &self,
        netns: Option<&Path>,
        ifname: &str,
        host_name: &str,
    ) -> Result<bool, NetlinkError> {
        let mut deleted = false;
        if let Some(ns) = netns.filter(|p| p.exists()) {
            let ifname = ifname.to_owned();
            deleted |= in_netns(ns, move |nl| async move { nl.delete_link(&ifname).await }).await?;
        }
        deleted |= self.delete_link(host_name).await?;
        Ok(deleted)
    }
}

/// The interface `ifname` in the pod namespace at `netns`, or `None` if it (or the namespace)
/// does not exist.
pub async fn pod_interface(
    netns: &Path,
    ifname: &str,
) -> Result<Option<PodInterfaceState>, NetlinkError> {
    if !netns.exists() {
        return Ok(None);
    }
    let ifname = ifname.to_owned();
    in_netns(netns, move |nl| async move {
        let Some(link) = nl.link(&ifname).await? else {
            return Ok(None);
        };
        let addresses = nl.addresses(&ifname).await?;
        let default_routes = nl
            .default_routes()
            .await?
            .into_iter()
            .filter(|(_, index)| *index == link.index)
            .collect();
        Ok(Some(PodInterfaceState {
            link,
            addresses,
            default_routes,
        }))
    })
    .await
}
