//! This host's Bgp object (routing mode, reference §5.10): the router port `inb01` on the VLAN
//! bridge carrying the router address (the BGP session runs over it, through the uplink), the
//! VLAN agent's router port, and the speaker ([`crate::bgp`]).
//!
//! Contract: [`Driver::apply_bgp`] is idempotent (the watch and the replay may both deliver the
//! object; an unchanged one changes nothing); `None` undoes it (speaker stopped, learned routes
//! removed, port deleted). A Bgp object in bridge mode, or without a VLAN uplink, is refused
//! with the reason and nothing is created.

use std::net::Ipv4Addr;

use ipnet::{IpNet, Ipv4Net};
use master::state::BgpState;
use ofnet::{BridgeKind, RouterPort};

use super::{Driver, OFPORT_TIMEOUT};
use crate::bgp::SpeakerConfig;
use crate::config::VLAN_BRIDGE;
use crate::error::{PluginError, Result};
use crate::ovsdb::PortSpec;

/// The router port's name (the reference's).
pub const ROUTER_PORT: &str = "inb01";

/// The speaker configuration a Bgp object asks for; every field checked, named when wrong.
pub fn speaker_config(state: &BgpState) -> Result<SpeakerConfig> {
    let invalid = |field: &'static str, problem: String| PluginError::Invalid { field, problem };
    let router: Ipv4Net = state.router_ip.parse().map_err(|_| {
        invalid(
            "router-ip",
            format!(
                "{:?} of host {} must be IPv4/len",
                state.router_ip, state.hostname
            ),
        )
    })?;
    let asn = |field: &'static str, v: &str| -> Result<u32> {
        v.parse::<u32>()
            .ok()
            .filter(|n| *n != 0)
            .ok_or_else(|| invalid(field, format!("{v:?} must be an AS number 1-4294967295")))
    };
    let neighbor = if state.neighbor.is_empty() {
        None
    } else {
        Some(state.neighbor.parse::<Ipv4Addr>().map_err(|_| {
            invalid(
                "neighbor",
                format!("{:?} must be an IPv4 address", state.neighbor),
            )
        })?)
    };
    Ok(SpeakerConfig {
        router,
        local_as: asn("as", &state.as_)?,
        neighbor_as: if neighbor.is_some() {
            asn("neighbor-as", &state.neighbor_as)?
        } else {
            0
        },
        neighbor,
    })
}

impl Driver {
    /// Apply this host's Bgp object (`None`: it was deleted). See the module documentation.
    pub async fn apply_bgp(&self, state: Option<&BgpState>) -> Result<()> {
        let Some(bgp) = self.bgp.clone() else {
            if state.is_some() {
                return Err(PluginError::Invalid {
                    field: "Bgp",
                    problem: format!(
                        "host {} runs --fwdmode {}: BGP needs routing mode",
                        self.cfg.host, self.cfg.fwdmode
                    ),
                });
            }
            return Ok(());
        };
        let wanted = state.map(speaker_config).transpose()?;
        if self.with_state(|s| s.bgp == wanted) {
            return Ok(());
        }
        let vlan = self.agent(BridgeKind::Vlan);
        match &wanted {
            Some(config) => {
                if self.cfg.vlan_uplinks.is_empty() {
                    return Err(PluginError::Invalid {
                        field: "vlan-uplinks",
                        problem:
                            "BGP peers through the VLAN uplink; start netplugin with --vlan-uplinks"
                                .into(),
                    });
                }
                let port = self.plumb_router_port(config.router).await?;
                vlan.set_router(Some(port))
                    .await
                    .map_err(|e| PluginError::agent(BridgeKind::Vlan, e))?;
                bgp.configure(Some(config.clone())).await?;
            }
            None => {
                bgp.configure(None).await?;
                vlan.set_router(None)
                    .await
                    .map_err(|e| PluginError::agent(BridgeKind::Vlan, e))?;
                self.ovsdb.delete_port(ROUTER_PORT).await?;
            }
        }
        self.with_state(|s| s.bgp = wanted);
        Ok(())
    }

    /// `inb01`: an internal port of the VLAN bridge with the router address.
    async fn plumb_router_port(&self, router: Ipv4Net) -> Result<RouterPort> {
        self.ovsdb
            .ensure_port(
                VLAN_BRIDGE,
                &PortSpec::internal(ROUTER_PORT, 0).endpoint_id(ROUTER_PORT),
            )
            .await?;
        let ofport = self.ovsdb.wait_ofport(ROUTER_PORT, OFPORT_TIMEOUT).await?;
        let address = IpNet::V4(router);
        // The userspace datapath does not complete checksums the kernel left to hardware:
        // the BGP session's TCP needs them computed (as pods' do).
        let offload_off = self.cfg.ovs_datapath == "netdev";
        let (mac, offload) = self
            .host
            .run(move |nl| async move {
                let have = nl.addresses(ROUTER_PORT).await?;
                if !have.contains(&address) {
                    nl.add_address(ROUTER_PORT, address).await?;
                }
                nl.set_up(ROUTER_PORT).await?;
                // This thread is in the host namespace, so ethtool is too.
                let offload = offload_off
                    .then(|| super::endpoint::disable_tx_offload(ROUTER_PORT))
                    .flatten();
                Ok((nl.require_link(ROUTER_PORT).await?.mac, offload))
            })
            .await?;
        if let Some(problem) = offload {
            return Err(PluginError::Offload {
                ifname: ROUTER_PORT.into(),
                problem,
            });
        }
        let mac = mac.ok_or_else(|| PluginError::Invalid {
            field: "router port",
            problem: format!("{ROUTER_PORT} has no MAC address"),
        })?;
        Ok(RouterPort {
            port: ofport,
            ip: router.addr(),
            mac: ofnet::MacAddr(mac.0),
        })
    }

    /// A local endpoint of the VLAN bridge appeared or went: announce or withdraw it (routing
    /// mode).
    pub fn bgp_local(&self, kind: BridgeKind, ip: Option<Ipv4Addr>, present: bool) {
        if let (Some(bgp), BridgeKind::Vlan, Some(ip)) = (&self.bgp, kind, ip) {
            bgp.local(ip, present);
        }
    }

    /// `/inspect/bgp`.
    pub async fn inspect_bgp(&self) -> Result<serde_json::Value> {
        let Some(bgp) = &self.bgp else {
            return Err(PluginError::Invalid {
                field: "fwdmode",
                problem: format!(
                    "BGP runs in routing mode only; this netplugin runs --fwdmode {}",
                    self.cfg.fwdmode
                ),
            });
        };
        Ok(bgp.inspect().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(router: &str, as_: &str, nas: &str, n: &str) -> BgpState {
        BgpState {
            id: "h".into(),
            hostname: "h".into(),
            router_ip: router.into(),
            as_: as_.into(),
            neighbor_as: nas.into(),
            neighbor: n.into(),
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let ok = speaker_config(&state("50.1.1.2/24", "65001", "65000", "50.1.1.200")).unwrap();
        assert_eq!(ok.local_as, 65001);
        assert_eq!(ok.neighbor, Some(Ipv4Addr::new(50, 1, 1, 200)));
        for (s, field) in [
            (state("50.1.1.2", "1", "2", ""), "router-ip"),
            (state("50.1.1.2/24", "0", "2", ""), "as"),
            (state("50.1.1.2/24", "x", "2", ""), "as"),
            (state("50.1.1.2/24", "1", "", "50.1.1.200"), "neighbor-as"),
            (state("50.1.1.2/24", "1", "2", "50.1.1"), "neighbor"),
        ] {
            let e = speaker_config(&s).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
    }
}
