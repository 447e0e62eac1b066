//! Addresses and routes of a link.

use std::net::IpAddr;

use futures::TryStreamExt;
use ipnet::IpNet;
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use netlink_packet_route::route::{RouteAddress, RouteAttribute};
use rtnetlink::RouteMessageBuilder;

use super::error::NetlinkError;
use super::link::Netlink;

impl Netlink {
    /// Add `address` (with its prefix length) to link `name`. IPv6 addresses skip duplicate
    /// address detection, so they are usable at once: the IPAM in netmaster guarantees
    /// uniqueness.
    pub async fn add_address(&self, name: &str, address: IpNet) -> Result<(), NetlinkError> {
        let link = self.require_link(name).await?;
        let mut request =
            self.handle
                .address()
                .add(link.index, address.addr(), address.prefix_len());
        if address.addr().is_ipv6() {
            request
                .message_mut()
                .attributes
                .push(AddressAttribute::Flags(AddressFlags::Nodad));
        }
        request
            .execute()
            .await
            .map_err(NetlinkError::request(format!(
                "add address {address} to {name} in {}",
                self.label()
            )))
    }

    /// The kernel's address messages of link `name` (the dump filter is advisory: checked).
    async fn address_messages(&self, name: &str) -> Result<Vec<AddressMessage>, NetlinkError> {
        let link = self.require_link(name).await?;
        let messages: Vec<_> = self
            .handle
            .address()
            .get()
            .set_link_index_filter(link.index)
            .execute()
            .try_collect()
            .await
            .map_err(NetlinkError::request(format!(
                "list addresses of {name} in {}",
                self.label()
            )))?;
        Ok(messages
            .into_iter()
            .filter(|m| m.header.index == link.index)
            .collect())
    }

    /// Remove `address` from link `name` (absent: nothing to do).
    pub async fn delete_address(&self, name: &str, address: IpNet) -> Result<(), NetlinkError> {
        for m in self.address_messages(name).await?.into_iter().filter(|m| {
            m.header.prefix_len == address.prefix_len()
                && m.attributes
                    .iter()
                    .any(|a| matches!(a, AddressAttribute::Address(ip) if *ip == address.addr()))
        }) {
            self.handle
                .address()
                .del(m)
                .execute()
                .await
                .map_err(NetlinkError::request(format!(
                    "delete address {address} from {name} in {}",
                    self.label()
                )))?;
        }
        Ok(())
    }

    /// The addresses of link `name` (IPv4 and IPv6, including link-local).
    pub async fn addresses(&self, name: &str) -> Result<Vec<IpNet>, NetlinkError> {
        Ok(self
            .address_messages(name)
            .await?
            .iter()
            .filter_map(|m| {
                let addr = m.attributes.iter().find_map(|a| match a {
                    AddressAttribute::Address(ip) => Some(*ip),
                    _ => None,
                })?;
                IpNet::new(addr, m.header.prefix_len).ok()
            })
            .collect())
    }

    /// Add a default route via `gateway` out of link `name`.
    pub async fn add_default_route(&self, name: &str, gateway: IpAddr) -> Result<(), NetlinkError> {
        let link = self.require_link(name).await?;
        let message = match gateway {
            IpAddr::V4(gw) => RouteMessageBuilder::<std::net::Ipv4Addr>::new()
                .gateway(gw)
                .output_interface(link.index)
                .build(),
            IpAddr::V6(gw) => RouteMessageBuilder::<std::net::Ipv6Addr>::new()
                .gateway(gw)
                .output_interface(link.index)
                .build(),
        };
        self.handle
            .route()
            .add(message)
            .execute()
            .await
            .map_err(NetlinkError::request(format!(
                "add default route via {gateway} dev {name} in {}",
                self.label()
            )))
    }

    /// The default routes of the main table as `(gateway, output link index)`.
    pub async fn default_routes(&self) -> Result<Vec<(IpAddr, u32)>, NetlinkError> {
        let mut out = Vec::new();
        for request in [
            RouteMessageBuilder::<std::net::Ipv4Addr>::new().build(),
            RouteMessageBuilder::<std::net::Ipv6Addr>::new().build(),
        ] {
            let routes: Vec<_> = self
                .handle
                .route()
                .get(request)
                .execute()
                .try_collect()
                .await
                .map_err(NetlinkError::request(format!(
                    "list routes in {}",
                    self.label()
                )))?;
            for route in routes
                .iter()
                .filter(|r| r.header.destination_prefix_length == 0)
            {
                let mut gateway = None;
                let mut oif = None;
                for attr in &route.attributes {
                    match attr {
                        RouteAttribute::Gateway(RouteAddress::Inet(ip)) => {
                            gateway = Some(IpAddr::V4(*ip));
                        }
                        RouteAttribute::Gateway(RouteAddress::Inet6(ip)) => {
                            gateway = Some(IpAddr::V6(*ip));
                        }
                        RouteAttribute::Oif(index) => oif = Some(*index),
                        _ => {}
                    }
                }
                if let (Some(gw), Some(index)) = (gateway, oif) {
                    out.push((gw, index));
                }
            }
        }
        Ok(out)
    }

    /// Make `ip` a neighbour on link `name` at `mac`, whatever the link's subnets: a host route
    /// (scope link) out of the link and a permanent neighbour entry, so the kernel sends to it
    /// straight away, without a gateway or an ARP or neighbour solicitation. Already there:
    /// nothing to do (a retried ADD).
    pub async fn add_static_neighbour(
        &self,
        name: &str,
        ip: IpAddr,
        mac: [u8; 6],
    ) -> Result<(), NetlinkError> {
        let link = self.require_link(name).await?;
        self.add_onlink_route_to(name, link.index, IpNet::from(ip))
            .await?;
        self.handle
            .neighbours()
            .add(link.index, ip)
            .link_layer_address(&mac)
            .replace()
            .execute()
            .await
            .map_err(NetlinkError::request(format!(
                "add neighbour {ip} lladdr {} dev {name} in {}",
                super::MacAddr(mac),
                self.label()
            )))
    }
}
