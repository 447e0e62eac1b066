//! Endpoints of other hosts on VXLAN networks, as Contiv distributed them: each netplugin's
//! VXLAN agent announces its local endpoints to the ofnet master (`OfnetMaster.EndpointAdd`),
//! which relays them to every other agent (`OfnetAgent.EndpointAdd`); they arrive here through
//! [`crate::ofnet_rpc`]. There is no per-host watch of every endpoint's oper state: etcd is
//! read once at start (the durable record, so a restart re-installs remote endpoints before the
//! switch reconnects and keeps their traffic), then the master is the one source of changes.
//!
//! Contract: for a remote endpoint on a VXLAN network, the VTEP port towards its host exists
//! (`vxif<address digits>`, created on the first endpoint from that host, removed with the
//! last) and the agent knows the endpoint; endpoints of VLAN networks (the uplink carries them)
//! and of networks this host does not know are ignored. Applying the same endpoint twice
//! changes nothing (a master failover re-announces everything: no flow churn). At start, VTEP
//! ports no replayed endpoint needs (their hosts' last endpoints went while netplugin was
//! down) are deleted.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ofnet::model::ENDPOINT_INTERNAL;
use ofnet::{BridgeKind, Endpoint, MacAddr};

use super::{Driver, OFPORT_TIMEOUT, VXLAN_BRIDGE, bridge_kind};
use crate::error::{PluginError, Result};
use crate::oper::OperEndpointState;
use crate::ovsdb::{PortSpec, vtep_port_name};

/// How [`vtep_port_name`] names every VTEP port (`vxif<address digits>`).
const VTEP_PORT_PREFIX: &str = "vxif";

/// What this host installed for one remote endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteEndpoint {
    /// The agent's endpoint id (`<ip>:<tenant>`).
    pub agent_id: String,
    pub vtep: Ipv4Addr,
    /// Its IPv6 address, if it has one (classified like the IPv4 one on this host).
    pub ipv6: Option<Ipv6Addr>,
}

/// VTEPs towards other hosts: OpenFlow port and how many remote endpoints use it.
#[derive(Debug, Default)]
pub struct Vteps {
    pub ports: BTreeMap<Ipv4Addr, (u32, usize)>,
}

impl Driver {
    fn is_remote(&self, oper: &OperEndpointState) -> bool {
        oper.homing_host != self.cfg.host
            && !oper.vtep_ip.is_empty()
            && oper.vtep_ip != self.cfg.vtep_ip.to_string()
    }

    /// An oper record read at start: install it if it is another host's VXLAN endpoint.
    pub async fn add_remote(&self, oper: &OperEndpointState) -> Result<bool> {
        if !self.is_remote(oper) {
            return Ok(false);
        }
        let Some(net) = self.known_network(&oper.net_id) else {
            return Ok(false);
        };
        if bridge_kind(&net.pkt_tag_type) != BridgeKind::Vxlan {
            return Ok(false);
        }
        let invalid = |field: &'static str, text: &str| PluginError::Invalid {
            field,
            problem: format!("{text:?} of remote endpoint {}", oper.id),
        };
        let vtep: Ipv4Addr = oper
            .vtep_ip
            .parse()
            .map_err(|_| invalid("vtepIP", &oper.vtep_ip))?;
        let ip: Ipv4Addr = oper
            .ip_address
            .parse()
            .map_err(|_| invalid("ipAddress", &oper.ip_address))?;
        let mac: MacAddr = oper
            .mac_address
            .parse()
            .map_err(|_| invalid("macAddress", &oper.mac_address))?;
        // `ipv6Address` may carry the prefix length (`fd00::5/64`).
        let ipv6: Option<Ipv6Addr> = match oper.ipv6_address.split('/').next() {
            None | Some("") => None,
            Some(a) => Some(
                a.parse()
                    .map_err(|_| invalid("ipv6Address", &oper.ipv6_address))?,
            ),
        };
        let endpoint = Endpoint {
            endpoint_id: Endpoint::id_for(IpAddr::V4(ip), &net.tenant),
            endpoint_type: ENDPOINT_INTERNAL,
            endpoint_group: u16::try_from(oper.endpoint_group_id).unwrap_or(0),
            ip_addr: Some(ip),
            ip_mask: Some(Ipv4Addr::BROADCAST),
            ipv6_addr: ipv6,
            ipv6_mask: ipv6.map(|_| Ipv6Addr::from(u128::MAX)),
            vrf: net.tenant.clone(),
            mac,
            vlan: u16::try_from(net.pkt_tag).unwrap_or(0),
            vni: net.ext_pkt_tag,
            endpoint_group_vlan: 0,
            originator_ip: Some(vtep),
            originator_mac: String::new(),
            timestamp: String::new(),
            port_no: 0,
            dscp: 0,
            bandwidth: None,
        };
        self.add_remote_endpoint(endpoint).await
    }

    /// An endpoint relayed by the master (`OfnetAgent.EndpointAdd`), or read at start: install
    /// it when it is another host's endpoint on a VXLAN network this host knows.
    pub async fn add_remote_endpoint(&self, endpoint: Endpoint) -> Result<bool> {
        let Some(vtep) = endpoint.originator_ip else {
            return Ok(false);
        };
        if vtep == self.cfg.vtep_ip {
            return Ok(false);
        }
        let on_vxlan = self.with_state(|s| {
            s.networks.values().any(|(cfg, net)| {
                bridge_kind(&cfg.pkt_tag_type) == BridgeKind::Vxlan
                    && net.vni == endpoint.vni
                    && net.vrf == endpoint.vrf
            })
        });
        if !on_vxlan {
            return Ok(false);
        }
        let wanted = RemoteEndpoint {
            agent_id: endpoint.endpoint_id.clone(),
            vtep,
            ipv6: endpoint.ipv6_addr,
        };
        let before = self.with_state(|s| s.remote.get(&wanted.agent_id).cloned());
        if before.as_ref() == Some(&wanted) {
            return Ok(true);
        }
        self.use_vtep(vtep).await?;
        if let Err(e) = self
            .agent(BridgeKind::Vxlan)
            .add_remote_endpoint(endpoint)
            .await
        {
            self.release_vtep(vtep).await?;
            return Err(PluginError::agent(BridgeKind::Vxlan, e));
        }
        self.with_state(|s| s.remote.insert(wanted.agent_id.clone(), wanted));
        if let Some(moved) = before {
            // The address moved to another host: the old VTEP loses a user.
            self.release_vtep(moved.vtep).await?;
        }
        Ok(true)
    }

    /// A remote endpoint was withdrawn (`OfnetAgent.EndpointDel`): forget it, and its VTEP with
    /// the last one. Unknown ids are fine.
    pub async fn remove_remote(&self, agent_id: &str) -> Result<()> {
        let Some(remote) = self.with_state(|s| s.remote.remove(agent_id)) else {
            return Ok(());
        };
        match self
            .agent(BridgeKind::Vxlan)
            .remove_remote_endpoint(remote.agent_id.clone())
            .await
        {
            Ok(()) | Err(ofnet::AgentError::EndpointDb(_)) => {}
            Err(e) => return Err(PluginError::agent(BridgeKind::Vxlan, e)),
        }
        self.release_vtep(remote.vtep).await
    }

    /// Count one more endpoint behind `vtep`, creating its port on first use.
    async fn use_vtep(&self, vtep: Ipv4Addr) -> Result<()> {
        let known = self.with_state(|s| {
            s.vteps
                .ports
                .get_mut(&vtep)
                .map(|(_, users)| *users += 1)
                .is_some()
        });
        if known {
            return Ok(());
        }
        let spec = PortSpec::vtep(IpAddr::V4(vtep), Some(IpAddr::V4(self.cfg.vtep_ip)));
        self.ovsdb.ensure_port(VXLAN_BRIDGE, &spec).await?;
        let port = self
            .ovsdb
            .wait_ofport(&vtep_port_name(IpAddr::V4(vtep)), OFPORT_TIMEOUT)
            .await?;
        self.agent(BridgeKind::Vxlan)
            .add_vtep(vtep, port)
            .await
            .map_err(|e| PluginError::agent(BridgeKind::Vxlan, e))?;
        self.with_state(|s| {
            let entry = s.vteps.ports.entry(vtep).or_insert((port, 0));
            entry.1 += 1;
        });
        Ok(())
    }

    /// Delete the VTEP ports no remote endpoint needs: ports towards hosts whose last endpoint
    /// went away while this netplugin was down. Run after the oper state is replayed (and before
    /// the watches run), so every VTEP still in use is known. Returns the ports deleted.
    pub async fn sweep_vteps(&self) -> Result<Vec<String>> {
        let wanted: Vec<String> = self.with_state(|s| {
            s.vteps
                .ports
                .keys()
                .map(|vtep| vtep_port_name(IpAddr::V4(*vtep)))
                .collect()
        });
        let stale: Vec<String> = self.ovsdb.read(|c| {
            c.ports_of_bridge(VXLAN_BRIDGE)
                .into_iter()
                .map(|p| p.name)
                .filter(|name| name.starts_with(VTEP_PORT_PREFIX) && !wanted.contains(name))
                .collect()
        });
        for name in &stale {
            self.ovsdb.delete_port(name).await?;
        }
        Ok(stale)
    }

    async fn release_vtep(&self, vtep: Ipv4Addr) -> Result<()> {
        let last = self.with_state(|s| match s.vteps.ports.get_mut(&vtep) {
            Some((_, users)) if *users > 1 => {
                *users -= 1;
                false
            }
            Some(_) => {
                s.vteps.ports.remove(&vtep);
                true
            }
            None => false,
        });
        if !last {
            return Ok(());
        }
        match self.agent(BridgeKind::Vxlan).remove_vtep(vtep).await {
            Ok(()) | Err(ofnet::AgentError::NoVtep(_)) => {}
            Err(e) => return Err(PluginError::agent(BridgeKind::Vxlan, e)),
        }
        self.ovsdb
            .delete_port(&vtep_port_name(IpAddr::V4(vtep)))
            .await?;
        Ok(())
    }
}
