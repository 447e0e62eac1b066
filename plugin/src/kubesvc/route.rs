//! The route that makes cluster IPs reachable from a pod: `SVC_SUBNET` on-link on the pod's
//! interface. The pod then ARPs for a cluster IP itself, the agents' ARP proxy answers for
//! an active service's VIP, and the service flows DNAT to a provider. (Through the default
//! gateway it would not work in bridge mode: nothing routes there.)
//!
//! The same on-link routes, of either family, also carry the services' hairpin source to
//! every pod (`Netlink::add_static_neighbour`).
//!
//! Contract: adding a route that is already there succeeds (a pod with a second interface,
//! a retried ADD).

use ipnet::{IpNet, Ipv4Net};
use netlink_packet_route::route::{RouteMessage, RouteScope};
use rtnetlink::RouteMessageBuilder;

use crate::config::Config;
use crate::kubeapi;
use crate::netlink::{Netlink, NetlinkError};

/// The service subnet pods get an on-link route for: in `--mode kubernetes` only, the config
/// file's `SVC_SUBNET` (default `10.254.0.0/16`). Read once when the driver starts (the daemon
/// has already refused a broken file by then; should it fail anyway, the default is used).
pub fn pod_service_route(cfg: &Config) -> Option<Ipv4Net> {
    if cfg.mode != "kubernetes" {
        return None;
    }
    match kubeapi::service_subnet(&cfg.kube_config) {
        Ok(subnet) => Some(subnet),
        Err(e) => {
            tracing::warn!(error = %e, default = kubeapi::DEFAULT_SVC_SUBNET, "service subnet");
            kubeapi::DEFAULT_SVC_SUBNET.parse().ok()
        }
    }
}

/// `EEXIST`: the kernel's answer for a route that is already there.
const EEXIST: i32 = 17;
/// `ESRCH`: the kernel's answer for deleting a route that is not there.
const ESRCH: i32 = 3;

impl Netlink {
    /// The on-link (scope link) route `prefix` out of the link with index `index`.
    fn onlink_route(index: u32, prefix: IpNet) -> RouteMessage {
        match prefix {
            IpNet::V4(p) => RouteMessageBuilder::<std::net::Ipv4Addr>::new()
                .destination_prefix(p.network(), p.prefix_len())
                .output_interface(index)
                .scope(RouteScope::Link)
                .build(),
            IpNet::V6(p) => RouteMessageBuilder::<std::net::Ipv6Addr>::new()
                .destination_prefix(p.network(), p.prefix_len())
                .output_interface(index)
                .scope(RouteScope::Link)
                .build(),
        }
    }

    /// Add `prefix` as an on-link (scope link) route out of link `name`.
    pub async fn add_onlink_route(
        &self,
        name: &str,
        prefix: impl Into<IpNet>,
    ) -> Result<(), NetlinkError> {
        let link = self.require_link(name).await?;
        self.add_onlink_route_to(name, link.index, prefix.into())
            .await
    }

    /// [`Self::add_onlink_route`] out of link `name` whose index the caller has already.
    pub async fn add_onlink_route_to(
        &self,
        name: &str,
        index: u32,
        prefix: IpNet,
    ) -> Result<(), NetlinkError> {
        match self
            .handle
            .route()
            .add(Self::onlink_route(index, prefix))
            .execute()
            .await
            .map_err(NetlinkError::request(format!(
                "add route {prefix} dev {name} in {}",
                self.label()
            ))) {
            Err(e) if e.errno() == Some(EEXIST) => Ok(()),
            other => other,
        }
    }

    /// Remove the on-link route `prefix` out of link `name` (absent: nothing to do).
    pub async fn delete_onlink_route(
        &self,
        name: &str,
        prefix: impl Into<IpNet>,
    ) -> Result<(), NetlinkError> {
        let prefix = prefix.into();
        let link = self.require_link(name).await?;
        match self
            .handle
            .route()
            .del(Self::onlink_route(link.index, prefix))
            .execute()
            .await
            .map_err(NetlinkError::request(format!(
                "delete route {prefix} dev {name} in {}",
                self.label()
            ))) {
            Err(e) if e.errno() == Some(ESRCH) => Ok(()),
            other => other,
        }
    }
}
