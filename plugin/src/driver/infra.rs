//! Infra networks (reference §4.1): the host itself is an endpoint of each `nwType=infra`
//! network, through an OVS *internal* port named like the network that carries the host's
//! address (`EndpointID = Container = Host = <host label>`), with no veth.
//!
//! Contract: [`Driver::ensure_infra`] is idempotent (netmaster returns the existing endpoint,
//! an unchanged port is left alone, an address already present is kept), so replaying the
//! networks after a restart changes nothing; [`Driver::remove_infra`] undoes it.

use ipnet::IpNet;
use master::endpoint::{ConfigEp, CreateEndpointRequest, DeleteEndpointRequest};
use master::state::CfgNetworkState;
use ofnet::{BridgeKind, LocalEndpoint};

use super::{Driver, OFPORT_TIMEOUT, bridge_kind, bridge_name};
use crate::error::{PluginError, Result};
use crate::netlink::MAX_IFNAME_LEN;
use crate::ovsdb::PortSpec;

/// The infra network whose host port also carries the host's routes to the pods (reference:
/// the special name `contivh1`).
pub const HOST_ACCESS_INFRA: &str = "contivh1";

/// The host's endpoint on an infra network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfraEndpoint {
    pub port: String,
    pub ofport: u32,
    pub kind: BridgeKind,
    pub address: IpNet,
}

impl Driver {
    /// Make the host an endpoint of the infra network `net`.
    pub async fn ensure_infra(&self, net: &CfgNetworkState) -> Result<InfraEndpoint> {
        // netmaster rewrites the network's state on every endpoint; once is enough.
        if let Some(known) = self.with_state(|s| s.infra.get(&net.id).cloned()) {
            return Ok(known);
        }
        let port = net.network_name.clone();
        if port.is_empty() || port.len() > MAX_IFNAME_LEN {
            return Err(PluginError::Invalid {
                field: "networkName",
                problem: format!(
                    "infra network {:?} must be 1..={MAX_IFNAME_LEN} bytes to name its host port",
                    net.network_name
                ),
            });
        }
        let client = self.netmaster().await?;
        let ep = client
            .create_endpoint(&CreateEndpointRequest {
                TenantName: net.tenant.clone(),
                NetworkName: net.network_name.clone(),
                EndpointID: self.cfg.host.clone(),
                EPCommonName: self.cfg.host.clone(),
                ConfigEP: ConfigEp {
                    Container: self.cfg.host.clone(),
                    Host: self.cfg.host.clone(),
                    ..ConfigEp::default()
                },
                ..CreateEndpointRequest::default()
            })
            .await?;
        let kind = bridge_kind(&net.pkt_tag_type);
        let tag = u16::try_from(net.pkt_tag).unwrap_or(0);
        self.ovsdb
            .ensure_port(
                bridge_name(kind),
                &PortSpec::internal(port.clone(), tag).endpoint_id(ep.id.clone()),
            )
            .await?;
        let ofport = self.ovsdb.wait_ofport(&port, OFPORT_TIMEOUT).await?;
        let ip: std::net::Ipv4Addr = ep.ip_address.parse().map_err(|_| PluginError::Invalid {
            field: "ipAddress",
            problem: format!("{:?} of endpoint {}", ep.ip_address, ep.id),
        })?;
        let address = IpNet::new(ip.into(), net.subnet_len).map_err(|_| PluginError::Invalid {
            field: "subnetLen",
            problem: format!("{} of network {}", net.subnet_len, net.id),
        })?;
        let mac = super::endpoint::parse_mac(&ep.mac_address, &ep.id)?;
        let name = port.clone();
        self.host
            .run(move |nl| async move {
                // ovs-vswitchd creates the device; the monitor has seen its ofport, the kernel
                // has the link.
                nl.set_mac(&name, mac).await?;
                if !nl.addresses(&name).await?.contains(&address) {
                    nl.add_address(&name, address).await?;
                }
                nl.set_up(&name).await
            })
            .await?;
        self.agent(kind)
            .add_local_endpoint(LocalEndpoint {
                port_no: ofport,
                mac: ofnet::MacAddr(mac.0),
                vlan: tag,
                ipv4: Some(ip),
                ipv6: None,
                epg: 0,
                epg_vlan: 0,
                dscp: 0,
                bandwidth: None,
            })
            .await
            .map_err(|e| PluginError::agent(kind, e))?;
        let infra = InfraEndpoint {
            port,
            ofport,
            kind,
            address,
        };
        self.with_state(|s| s.infra.insert(net.id.clone(), infra.clone()));
        self.sync_host_routes().await?;
        Ok(infra)
    }

    /// Routing mode, with the `contivh1` infra network: the host reaches the pods of every
    /// VXLAN network of that tenant (its VRF) through `contivh1` — one on-link route per
    /// subnet, plus the Kubernetes service subnet so the host reaches cluster IPs — following
    /// networks as they come and go. Pods reach the host's services at its `contivh1` address
    /// (an endpoint of the VRF). In bridge mode nothing routes between networks, so no route is
    /// added (the reference added them anyway, and they led nowhere).
    pub async fn sync_host_routes(&self) -> Result<()> {
        if self.cfg.fwd_mode() != ofnet::FwdMode::Routing {
            return Ok(());
        }
        let (wanted, have) = self.with_state(|s| {
            let tenant = s
                .infra
                .iter()
                .find(|(_, i)| i.port == HOST_ACCESS_INFRA)
                .and_then(|(id, _)| s.networks.get(id))
                .map(|(cfg, _)| cfg.tenant.clone());
            let wanted: std::collections::BTreeSet<ipnet::Ipv4Net> = match &tenant {
                None => Default::default(),
                Some(tenant) => s
                    .networks
                    .values()
                    .map(|(cfg, _)| cfg)
                    .filter(|c| {
                        c.nw_type != "infra" && c.pkt_tag_type == "vxlan" && &c.tenant == tenant
                    })
                    .filter_map(|c| {
                        let ip: std::net::Ipv4Addr = c.subnet_ip.parse().ok()?;
                        Some(ipnet::Ipv4Net::new(ip, c.subnet_len).ok()?.trunc())
                    })
                    .chain(self.service_route)
                    .collect(),
            };
            (wanted, s.host_routes.clone())
        });
        if wanted == have {
            return Ok(());
        }
        let (add, del): (Vec<_>, Vec<_>) = (
            wanted.difference(&have).copied().collect(),
            have.difference(&wanted).copied().collect(),
        );
        let device_present = !wanted.is_empty();
        self.host
            .run(move |nl| async move {
                if device_present {
                    for subnet in &add {
                        nl.add_onlink_route(HOST_ACCESS_INFRA, *subnet).await?;
                    }
                }
                for subnet in &del {
                    // The port may be gone already, taking its routes with it.
                    if nl.link(HOST_ACCESS_INFRA).await?.is_some() {
                        nl.delete_onlink_route(HOST_ACCESS_INFRA, *subnet).await?;
                    }
                }
                Ok(())
            })
            .await?;
        tracing::info!(?wanted, "host routes through {HOST_ACCESS_INFRA}");
        self.with_state(|s| s.host_routes = wanted);
        Ok(())
    }

    /// The infra network `id` is gone: remove the host's endpoint (agent, port, netmaster).
    pub async fn remove_infra(&self, net: &CfgNetworkState) -> Result<()> {
        let Some(infra) = self.with_state(|s| s.infra.remove(&net.id)) else {
            return Ok(());
        };
        match self
            .agent(infra.kind)
            .remove_local_endpoint(infra.ofport)
            .await
        {
            Ok(()) | Err(ofnet::AgentError::EndpointDb(_)) => {}
            Err(e) => return Err(PluginError::agent(infra.kind, e)),
        }
        self.ovsdb.delete_port(&infra.port).await?;
        self.sync_host_routes().await?;
        let client = self.netmaster().await?;
        match client
            .delete_endpoint(&DeleteEndpointRequest {
                TenantName: net.tenant.clone(),
                NetworkName: net.network_name.clone(),
                EndpointID: self.cfg.host.clone(),
                ..DeleteEndpointRequest::default()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The host's infra endpoints, by network id.
    pub fn infra_endpoints(&self) -> Vec<(String, InfraEndpoint)> {
        self.with_state(|s| {
            s.infra
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
    }
}
