//! The host's port toward pods, `contivh0` (reference §4.2 "Host NAT port", §5.5 vrouter
//! tables 8 and 2): an internal port whose host side holds the last address of the private
//! subnet (`pvtSubnet`, default 172.19.0.0/16: `172.19.255.254/16`, MAC `02:02:ac:13:ff:fe`).
//!
//! - Routing mode: a port of the VXLAN bridge. The vrouter datapath sends what pods address to
//!   the host (or beyond) out of it from each pod's private address, and takes the host's
//!   packets to those addresses back to the pods (`ofnet::HostNatPort`).
//! - Bridge mode: a port of the host bridge, where pods that need the host have a second
//!   interface of their own (`super::hostaccess`).
//!
//! In both, one iptables rule masquerades the private subnet for what the host forwards
//! elsewhere, so pods reach the outside through their host.

use std::net::Ipv4Addr;

use ipnet::{IpNet, Ipv4Net};
use ofnet::{BridgeKind, HostNatPort};

use super::{Driver, HOST_BRIDGE, OFPORT_TIMEOUT, VXLAN_BRIDGE};
use crate::error::{PluginError, Result};
use crate::ovsdb::PortSpec;

/// The host NAT port's name (and, with `host` before it, its endpoint id).
pub const HOST_NAT_PORT: &str = "contivh0";

/// The host's address and MAC on the host NAT port for a private subnet: the subnet's address
/// plus 0xfffe (the reference derives both from port number 0xfffe).
pub fn host_nat_address(subnet: Ipv4Net) -> (Ipv4Addr, [u8; 6]) {
    let ip = Ipv4Addr::from(u32::from(subnet.network()) | 0xfffe);
    let [a, b, c, d] = ip.octets();
    (ip, [0x02, 0x02, a, b, c, d])
}

impl Driver {
    /// Plumb `contivh0` for `pvt_subnet` (the global `pvtSubnet`) and hand it to the VXLAN
    /// router (routing mode) or the host bridge; idempotent (a changed subnet replaces the
    /// port's address). In bridge mode a failure costs only host access, so it is logged.
    pub async fn plumb_host_nat(&self, pvt_subnet: &str) -> Result<()> {
        let (bridge, kind) = match self.cfg.fwd_mode() {
            ofnet::FwdMode::Routing => (VXLAN_BRIDGE, BridgeKind::Vxlan),
            ofnet::FwdMode::Bridge => (HOST_BRIDGE, BridgeKind::Host),
        };
        match self.plumb_host_port(bridge, kind, pvt_subnet).await {
            Err(e) if kind == BridgeKind::Host => {
                tracing::warn!(
                    error = %e,
                    "pods on networks without a gateway get no host access (interface host1)"
                );
                Ok(())
            }
            other => other,
        }
    }

    async fn plumb_host_port(
        &self,
        bridge: &str,
        kind: BridgeKind,
        pvt_subnet: &str,
    ) -> Result<()> {
        let subnet: Ipv4Net = pvt_subnet.parse().map_err(|_| PluginError::Invalid {
            field: "pvtSubnet",
            problem: format!("{pvt_subnet:?} is not an IPv4 subnet"),
        })?;
        let subnet = subnet.trunc();
        let (ip, mac) = host_nat_address(subnet);
        self.ovsdb
            .ensure_port(
                bridge,
                &PortSpec::internal(HOST_NAT_PORT, 2).endpoint_id(format!("host{HOST_NAT_PORT}")),
            )
            .await?;
        let ofport = self
            .ovsdb
            .wait_ofport(HOST_NAT_PORT, OFPORT_TIMEOUT)
            .await?;
        let address =
            IpNet::V4(
                Ipv4Net::new(ip, subnet.prefix_len()).map_err(|e| PluginError::Invalid {
                    field: "pvtSubnet",
                    problem: e.to_string(),
                })?,
            );
        let offload_off = self.cfg.ovs_datapath == "netdev";
        let masquerade = subnet.to_string();
        let (offload, nat_problem) = self
            .host
            .run(move |nl| async move {
                nl.set_mac(HOST_NAT_PORT, crate::netlink::MacAddr(mac))
                    .await?;
                let have = nl.addresses(HOST_NAT_PORT).await?;
                for old in have.iter().filter(|a| a.addr().is_ipv4() && **a != address) {
                    nl.delete_address(HOST_NAT_PORT, *old).await?;
                }
                if !have.contains(&address) {
                    nl.add_address(HOST_NAT_PORT, address).await?;
                }
                nl.set_up(HOST_NAT_PORT).await?;
                // This thread is in the host namespace, so ethtool and iptables are too. The
                // userspace datapath does not complete checksums the kernel left to hardware.
                let offload = offload_off
                    .then(|| super::endpoint::disable_tx_offload(HOST_NAT_PORT))
                    .flatten();
                let nat = ensure_forwarding().and_then(|()| ensure_masquerade(&masquerade));
                Ok((offload, nat.err()))
            })
            .await?;
        if let Some(problem) = offload {
            return Err(PluginError::Offload {
                ifname: HOST_NAT_PORT.into(),
                problem,
            });
        }
        if let Some(problem) = nat_problem {
            // The host still reaches pods and pods the host; only the way out is missing.
            tracing::warn!(
                "pods will not reach beyond this host: cannot add the MASQUERADE rule for {subnet}: {problem}"
            );
        }
        let port = HostNatPort {
            port: ofport,
            ip,
            mac: ofnet::MacAddr(mac),
            subnet,
        };
        self.agent(kind)
            .set_host_nat(Some(port))
            .await
            .map_err(|e| PluginError::agent(kind, e))?;
        self.with_state(|s| s.host_port = Some(port));
        tracing::info!(
            "host access: {HOST_NAT_PORT} {ip}/{} on {bridge} (port {ofport}); each pod is reachable from the host at {subnet} plus its port number",
            subnet.prefix_len()
        );
        Ok(())
    }
}

/// The host forwards what pods send beyond it (`net.ipv4.ip_forward`, as any router or
/// container runtime needs); set in the calling thread's network namespace.
fn ensure_forwarding() -> std::result::Result<(), String> {
    const KNOB: &str = "/proc/sys/net/ipv4/ip_forward";
    match std::fs::read_to_string(KNOB) {
        Ok(v) if v.trim() == "1" => Ok(()),
        _ => {
            tracing::info!("turning on IPv4 forwarding ({KNOB}) so pods reach beyond this host");
            std::fs::write(KNOB, "1").map_err(|e| format!("{KNOB}: {e}"))
        }
    }
}

/// `iptables -t nat -A POSTROUTING -s <subnet> ! -o contivh0 -j MASQUERADE`, unless present
/// (`-C`). Runs in the calling thread's network namespace.
fn ensure_masquerade(subnet: &str) -> std::result::Result<(), String> {
    let rule = [
        "POSTROUTING",
        "-s",
        subnet,
        "!",
        "-o",
        HOST_NAT_PORT,
        "-j",
        "MASQUERADE",
    ];
    let iptables = |op: &str| {
        std::process::Command::new("iptables")
            .args(["-w", "5", "-t", "nat", op])
            .args(rule)
            .output()
    };
    match iptables("-C") {
        Ok(out) if out.status.success() => return Ok(()),
        Ok(_) => {}
        Err(e) => return Err(format!("iptables: {e}")),
    }
    match iptables("-A") {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Err(format!("iptables: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_takes_the_reference_address_and_mac() {
        let (ip, mac) =
            host_nat_address("172.19.0.0/16".parse().unwrap_or_else(|_| unreachable!()));
        assert_eq!(ip, Ipv4Addr::new(172, 19, 255, 254));
        assert_eq!(mac, [0x02, 0x02, 0xac, 0x13, 0xff, 0xfe]);
    }
}
