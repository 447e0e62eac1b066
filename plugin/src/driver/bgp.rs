//! This host's Bgp object (routing mode, reference §5.10): the router port `inb01` on the VLAN
//! bridge carrying the router address (the BGP session runs over it, through the uplink), the
//! VLAN agent's router port, and the speaker ([`crate::bgp`]).
//!
//! Contract: [`Driver::apply_bgp`] is idempotent (the watch and the replay may both deliver the
//! object; an unchanged one changes nothing); `None` undoes it (speaker stopped, learned routes
//! removed, port deleted). A Bgp object in bridge mode, or without a VLAN uplink, is refused
//! with the reason and nothing is created.

use std::collections::BTreeSet;
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
                let next_hops = bgp.configure(Some(config.clone())).await?;
                self.learn_next_hops(config.router, next_hops).await;
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

    /// Hand the VLAN agent the MACs of `next_hops` (on the router port's subnet) from the
    /// host's neighbour table, asking the kernel to resolve those it lacks. At a restart the
    /// agent knows the learned routes before the switch connects but not their next hops'
    /// MACs (it learns them from ARP on the uplink, once connected): without this its first
    /// flow table would lack every learned route until ARP answered, and traffic to other
    /// hosts would stop for that long. The kernel can resolve them meanwhile: the previous
    /// flows still carry the router port's ARP to the uplink and back.
    async fn learn_next_hops(&self, router: Ipv4Net, next_hops: BTreeSet<Ipv4Addr>) {
        let wanted: Vec<Ipv4Addr> = next_hops
            .into_iter()
            .filter(|nh| router.contains(nh) && *nh != router.addr())
            .collect();
        if wanted.is_empty() {
            return;
        }
        let resolved = self
            .host
            .run(move |_| async move { Ok(resolve_neighbors(&wanted)) })
            .await;
        let vlan = self.agent(BridgeKind::Vlan);
        for (ip, mac) in resolved.unwrap_or_default() {
            if let Err(e) = vlan.learn_neighbor(ip, ofnet::MacAddr(mac)).await {
                tracing::warn!(%ip, error = %e, "next hop from the host's neighbour table");
            }
        }
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

/// The MACs of `ips` on the router port in the calling thread's network namespace: read from
/// its ARP table; a missing one is asked for (a datagram to its discard port makes the kernel
/// ARP for it) and waited for up to 300 ms in all.
fn resolve_neighbors(ips: &[Ipv4Addr]) -> Vec<(Ipv4Addr, [u8; 6])> {
    let read = || {
        std::fs::read_to_string("/proc/thread-self/net/arp")
            .map(|t| arp_entries(&t, ROUTER_PORT))
            .unwrap_or_default()
    };
    let mut found = read();
    let missing = |found: &[(Ipv4Addr, [u8; 6])]| -> Vec<Ipv4Addr> {
        ips.iter()
            .copied()
            .filter(|ip| !found.iter().any(|(f, _)| f == ip))
            .collect()
    };
    if !missing(&found).is_empty() {
        if let Ok(socket) = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)) {
            for ip in missing(&found) {
                let _ = socket.send_to(&[0], (ip, 9));
            }
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(300);
        while !missing(&found).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            found = read();
        }
    }
    found.retain(|(ip, _)| ips.contains(ip));
    found
}

/// Complete entries (flag 0x2) of a `/proc/net/arp` table on `device`.
fn arp_entries(table: &str, device: &str) -> Vec<(Ipv4Addr, [u8; 6])> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [ip, _, flags, mac, _, dev] = f.as_slice() else {
                return None;
            };
            let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok()?;
            if *dev != device || flags & 0x2 == 0 {
                return None;
            }
            let ip: Ipv4Addr = ip.parse().ok()?;
            let octets: Vec<u8> = mac
                .split(':')
                .map(|h| u8::from_str_radix(h, 16))
                .collect::<std::result::Result<_, _>>()
                .ok()?;
            Some((ip, <[u8; 6]>::try_from(octets).ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_arp_entries_of_the_router_port_are_read() {
        let table = "IP address       HW type     Flags       HW address            Mask     Device
50.1.1.200       0x1         0x2         02:00:00:00:00:c8     *        inb01
50.1.1.3         0x1         0x0         00:00:00:00:00:00     *        inb01
10.0.0.1         0x1         0x2         02:00:00:00:00:01     *        eth0
";
        assert_eq!(
            arp_entries(table, "inb01"),
            vec![(Ipv4Addr::new(50, 1, 1, 200), [2, 0, 0, 0, 0, 0xc8])]
        );
    }

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
