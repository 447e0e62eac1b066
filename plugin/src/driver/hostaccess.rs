//! Bridge mode's host access: the host bridge (`contivHostBridge`).
//!
//! A bridge-mode network bridges pods at layer 2 and routes nowhere, so a pod on a network
//! without a gateway has no way to its host or beyond. Such a pod gets a second interface,
//! `host1`, on the host bridge (the reference's `hport<N>` design, which its netplugin never
//! finished): the pair `hport…` (host end, an OVS port of the host bridge) ↔ `host1` (pod
//! end), an address of the private subnet derived from the port's OpenFlow number
//! (`ofnet::HostAccessPort`), and a default route through the host's `contivh0` address
//! (`super::hostnat`). Services stay on the main interface (its on-link route for the service
//! subnet is more specific than the default route).
//!
//! The host reaches the pod at its private address; the pod reaches host services at the
//! host's private address (`172.19.255.254` by default) and, masqueraded, the outside. Pods
//! never reach each other through the host bridge (`ofnet::HostBridge`).
//!
//! Contract: [`Driver::add_host_access`] is the last step of an attach and undone with it;
//! [`Driver::remove_host_access`] is idempotent; a restart re-adopts the port as it is
//! ([`Driver::readopt_host_access`]), so host access keeps flowing.

use std::net::IpAddr;
use std::path::Path;

use ipnet::{IpNet, Ipv4Net};
use master::state::CfgNetworkState;
use ofnet::{BridgeKind, HostAccessPort};

use super::{Driver, HOST_BRIDGE, OFPORT_TIMEOUT, PodAttach};
use crate::error::{PluginError, Result};
use crate::netlink::{MacAddr, in_netns};
use crate::ovsdb::PortSpec;

/// The pod's interface on the host bridge.
pub const HOST_ACCESS_IFNAME: &str = "host1";

/// The host end of a pod's host-access pair: its endpoint's port name with `h` for the
/// leading `v` (`vport…` → `hport…`, the reference's name).
pub fn host_access_port(port_name: &str) -> String {
    format!("h{}", port_name.strip_prefix('v').unwrap_or(port_name))
}

impl Driver {
    /// Whether a pod on `net` gets a host-access interface: bridge mode, a network without a
    /// gateway (the reference's rule: nothing else gives the pod a way out), not an infra
    /// network, and the pod's namespace is ours to plumb (not Docker's handover).
    pub(super) fn wants_host_access(&self, net: &CfgNetworkState, pod: &PodAttach) -> bool {
        self.cfg.fwd_mode() == ofnet::FwdMode::Bridge
            && net.gateway.is_empty()
            && net.nw_type != "infra"
            && !pod.handover
    }

    /// Give the pod of endpoint port `port_name` (in namespace `netns`) its host-access
    /// interface, address, default route and flows. On error the caller removes what was
    /// made ([`Driver::remove_host_access`]).
    pub(super) async fn add_host_access(
        &self,
        port_name: &str,
        netns: &Path,
    ) -> Result<HostAccessPort> {
        let host_port = self
            .with_state(|s| s.host_port)
            .ok_or_else(|| PluginError::Invalid {
                field: "contivh0",
                problem: "the host bridge has no host port (see the start-up warning); pods on networks without a gateway cannot reach their host".into(),
            })?;
        let host_end = host_access_port(port_name);
        let (name, pod_netns, mtu) = (host_end.clone(), netns.to_path_buf(), self.host_mtu);
        self.host
            .run(move |nl| async move {
                nl.create_veth_into(&name, HOST_ACCESS_IFNAME, &pod_netns, mtu, None)
                    .await
            })
            .await?;
        let spec = PortSpec::access(host_end.as_str(), 0).endpoint_id(format!("host{port_name}"));
        self.ovsdb.ensure_port(HOST_BRIDGE, &spec).await?;
        let ofport = self.ovsdb.wait_ofport(&host_end, OFPORT_TIMEOUT).await?;
        let access =
            HostAccessPort::on(&host_port, ofport).ok_or_else(|| PluginError::Invalid {
                field: "pvtSubnet",
                problem: format!(
                    "{} has no address for host-access port {ofport}; use a larger private subnet",
                    host_port.subnet
                ),
            })?;
        let address = IpNet::V4(
            Ipv4Net::new(access.ip, host_port.subnet.prefix_len()).map_err(|e| {
                PluginError::Invalid {
                    field: "pvtSubnet",
                    problem: e.to_string(),
                }
            })?,
        );
        let (mac, gateway) = (MacAddr(access.mac.octets()), IpAddr::V4(host_port.ip));
        let offload_off = self.cfg.ovs_datapath == "netdev";
        let offload = in_netns(netns, move |nl| async move {
            nl.set_mac(HOST_ACCESS_IFNAME, mac).await?;
            nl.add_address(HOST_ACCESS_IFNAME, address).await?;
            nl.set_up(HOST_ACCESS_IFNAME).await?;
            nl.add_default_route(HOST_ACCESS_IFNAME, gateway).await?;
            Ok(offload_off
                .then(|| super::endpoint::disable_tx_offload(HOST_ACCESS_IFNAME))
                .flatten())
        })
        .await?;
        if let Some(problem) = offload {
            return Err(PluginError::Offload {
                ifname: HOST_ACCESS_IFNAME.into(),
                problem,
            });
        }
        self.host_bridge
            .add_host_access(access)
            .await
            .map_err(|e| PluginError::agent(BridgeKind::Host, e))?;
        Ok(access)
    }

    /// Remove a pod's host access: its flows (when its OpenFlow port is known), OVS port and
    /// pair. Nothing there is fine.
    pub(super) async fn remove_host_access(
        &self,
        port_name: &str,
        ofport: Option<u32>,
    ) -> Result<()> {
        if self.cfg.fwd_mode() != ofnet::FwdMode::Bridge {
            return Ok(());
        }
        if let Some(port) = ofport {
            self.host_bridge
                .remove_host_access(port)
                .await
                .map_err(|e| PluginError::agent(BridgeKind::Host, e))?;
        }
        let host_end = host_access_port(port_name);
        self.ovsdb.delete_port(&host_end).await?;
        self.host
            .run(move |nl| async move { nl.delete_link(&host_end).await })
            .await?;
        Ok(())
    }

    /// Start-up: a re-adopted endpoint's host-access port, if its pair and OVS port are still
    /// there: its OpenFlow port re-learnt and handed to the host bridge's agent, nothing
    /// re-created (the pod's `host1` keeps its address and traffic keeps flowing).
    pub(super) async fn readopt_host_access(
        &self,
        port_name: &str,
    ) -> Result<Option<HostAccessPort>> {
        if self.cfg.fwd_mode() != ofnet::FwdMode::Bridge {
            return Ok(None);
        }
        let host_end = host_access_port(port_name);
        if self.ovsdb.read(|c| c.port(&host_end).is_none()) {
            return Ok(None);
        }
        let probe = host_end.clone();
        let pair = self
            .host
            .run(move |nl| async move { nl.link(&probe).await })
            .await?;
        let Some(host_port) = self.with_state(|s| s.host_port) else {
            return Ok(None);
        };
        if pair.is_none() {
            self.remove_host_access(port_name, None).await?;
            return Ok(None);
        }
        let ofport = self.ovsdb.wait_ofport(&host_end, OFPORT_TIMEOUT).await?;
        let Some(access) = HostAccessPort::on(&host_port, ofport) else {
            return Ok(None);
        };
        self.host_bridge
            .add_host_access(access)
            .await
            .map_err(|e| PluginError::agent(BridgeKind::Host, e))?;
        Ok(Some(access))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_end_is_named_after_the_endpoint_port() {
        assert_eq!(host_access_port("vport0123abcde"), "hport0123abcde");
        assert!(host_access_port("vport0123abcde").len() <= 15);
    }
}
