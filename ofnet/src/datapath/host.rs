//! The host bridge datapath (`host`).
//!
//! Bridge mode has no router between pods and their host, so each pod that needs the host
//! gets a second interface (`host1`) on a bridge of its own: the host bridge. Its ports are
//! the host's port ([`HostNatPort`], `contivh0`: the last address of the private subnet) and
//! one host-access port per pod ([`HostAccessPort`]: an address of the private subnet derived
//! from its OpenFlow port, so none is allocated or stored).
//!
//! What the flows allow, and nothing else:
//! - a pod's IPv4 and ARP from its own MAC and private address (table 0: the spoof guard)
//!   to the host port's MAC, and its ARP requests for the host's address (table 9);
//! - the host's IPv4 and ARP to a pod's MAC, and its ARP requests for a pod's private
//!   address, out that pod's port.
//!
//! Pods do not reach each other here: table 9 has no flow from one pod port to another, and
//! a pod's packet the host routes back toward another pod's private address is dropped in
//! table 0 (its source is a private address that is not the host's). The reference's host
//! bridge sent everything through `NORMAL`, which let pods ARP for and reach each other.

use super::{Datapath, DatapathError, HostNatPort, Owner, PacketOut, Part, Topology};
use crate::flows::{self, ETH_ARP, ETH_IPV4, category};
use crate::model::{BridgeKind, Endpoint, MacAddr};
use crate::pipeline::{HOST_PIPELINE, Pipeline, id};
use crate::priority;
use ofctrl::Flow;
use ofproto::action::Action;
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use std::net::Ipv4Addr;

/// A pod's port on the host bridge: its OpenFlow port, and the private address and MAC the
/// pod's end of it (`host1`) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostAccessPort {
    pub port: u32,
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
}

impl HostAccessPort {
    /// The host-access port on OpenFlow port `port` of the host bridge whose host port is
    /// `host`: the private address `host` gives that port number, and the MAC derived from
    /// it as the reference derives it (`02:02:` and the address); `None` when the private
    /// subnet has no room for the port number.
    pub fn on(host: &HostNatPort, port: u32) -> Option<HostAccessPort> {
        let ip = host.private_ip(port)?;
        let [a, b, c, d] = ip.octets();
        Some(HostAccessPort {
            port,
            ip,
            mac: MacAddr([0x02, 0x02, a, b, c, d]),
        })
    }
}

/// See the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostBridge;

const BROADCAST: [u8; 6] = [0xff; 6];
const ARP_REQUEST: u16 = 1;

fn output(port: u32) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(vec![Action::output(port)])]
}

/// `m` narrowed to a broadcast ARP request for `ip`.
fn arp_request_for(m: Match, ip: Ipv4Addr) -> Match {
    m.eth_dst(BROADCAST, None)
        .eth_type(ETH_ARP)
        .arp_op(ARP_REQUEST)
        .arp_tpa(ip, None)
}

impl HostBridge {
    /// The host port's flows: its IPv4 (but from another private address) and ARP into
    /// table 9, and what pods send to it out of it.
    fn host_part(&self, host: &HostNatPort) -> Result<Vec<Flow>, DatapathError> {
        let p = self.pipeline();
        let (t0, t9) = (p.table(id::INPUT)?, p.table(id::MAC_DEST)?);
        let from_host = || Match::new().in_port(host.port);
        let object = u64::from(host.port);
        let flows = vec![
            flows::goto(
                t0,
                priority::MATCH,
                from_host().eth_type(ETH_IPV4).ipv4_src(host.ip, None),
                id::MAC_DEST,
            )?,
            // The host forwards what it receives; a pod's packet routed back toward another
            // pod's private address keeps that pod's source, and stops here.
            t0.flow(
                priority::HOST_PEER_DROP,
                from_host()
                    .eth_type(ETH_IPV4)
                    .ipv4_src(host.subnet.network(), Some(host.subnet.netmask())),
                Vec::new(),
            )?,
            // Replies from beyond the host (de-masqueraded) come from any other address.
            flows::goto(
                t0,
                priority::HOST_PORT,
                from_host().eth_type(ETH_IPV4),
                id::MAC_DEST,
            )?,
            flows::goto(
                t0,
                priority::HOST_PORT,
                from_host().eth_type(ETH_ARP),
                id::MAC_DEST,
            )?,
            t9.flow(
                priority::MATCH,
                Match::new().eth_dst(host.mac.octets(), None),
                output(host.port),
            )?,
            t9.flow(
                priority::MATCH,
                arp_request_for(Match::new(), host.ip),
                output(host.port),
            )?,
        ];
        Ok(flows
            .into_iter()
            .map(|f| f.owned_by(category::UPLINK, object))
            .collect())
    }

    /// A pod's flows: its own IPv4 and ARP admitted (table 0); the host's frames to its MAC
    /// and ARP requests for its address out its port (table 9).
    fn access_part(
        &self,
        host: &HostNatPort,
        pod: &HostAccessPort,
    ) -> Result<Vec<Flow>, DatapathError> {
        let p = self.pipeline();
        let (t0, t9) = (p.table(id::INPUT)?, p.table(id::MAC_DEST)?);
        let from_pod = || {
            Match::new()
                .in_port(pod.port)
                .eth_src(pod.mac.octets(), None)
        };
        let from_host = || Match::new().in_port(host.port);
        let object = u64::from(pod.port);
        let flows = vec![
            flows::goto(
                t0,
                priority::MATCH,
                from_pod().eth_type(ETH_IPV4).ipv4_src(pod.ip, None),
                id::MAC_DEST,
            )?,
            flows::goto(
                t0,
                priority::MATCH,
                from_pod()
                    .eth_type(ETH_ARP)
                    .arp_spa(pod.ip, None)
                    .arp_sha(pod.mac.octets()),
                id::MAC_DEST,
            )?,
            t9.flow(
                priority::MATCH,
                from_host().eth_dst(pod.mac.octets(), None),
                output(pod.port),
            )?,
            t9.flow(
                priority::MATCH,
                arp_request_for(from_host(), pod.ip),
                output(pod.port),
            )?,
        ];
        Ok(flows
            .into_iter()
            .map(|f| f.owned_by(category::LOCAL_ENDPOINT, object))
            .collect())
    }
}

impl Datapath for HostBridge {
    fn kind(&self) -> BridgeKind {
        BridgeKind::Host
    }

    fn pipeline(&self) -> &'static Pipeline {
        &HOST_PIPELINE
    }

    fn owners(&self, topo: &Topology<'_>) -> Vec<Owner> {
        if topo.settings.host_nat.is_none() {
            return Vec::new();
        }
        let mut out = vec![Owner::HostNat];
        out.extend(
            topo.settings
                .host_access
                .keys()
                .map(|p| Owner::HostAccess(*p)),
        );
        out
    }

    fn part(&self, topo: &Topology<'_>, owner: &Owner) -> Result<Part, DatapathError> {
        let Some(host) = &topo.settings.host_nat else {
            return Ok(Part::default());
        };
        let flows = match owner {
            Owner::HostNat => self.host_part(host)?,
            Owner::HostAccess(port) => match topo.settings.host_access.get(port) {
                Some(pod) => self.access_part(host, pod)?,
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        Ok(Part {
            flows,
            ..Part::default()
        })
    }

    fn forward_arp(&self, _: &Topology<'_>, _: &Endpoint, _: &[u8]) -> Vec<PacketOut> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::Settings;
    use crate::epdb::EndpointTable;

    fn host() -> HostNatPort {
        HostNatPort {
            port: 1,
            ip: Ipv4Addr::new(172, 19, 255, 254),
            mac: MacAddr([0x02, 0x02, 0xac, 0x13, 0xff, 0xfe]),
            subnet: "172.19.0.0/16".parse().unwrap_or_else(|_| unreachable!()),
        }
    }

    #[test]
    fn a_pod_port_takes_the_private_address_and_mac_of_its_port_number() {
        let pod = HostAccessPort::on(&host(), 0x0203).unwrap();
        assert_eq!(pod.ip, Ipv4Addr::new(172, 19, 2, 3));
        assert_eq!(pod.mac, MacAddr([0x02, 0x02, 0xac, 0x13, 0x02, 0x03]));
        assert_eq!(HostAccessPort::on(&host(), 0xfffe), None);
        assert_eq!(HostAccessPort::on(&host(), 0x10000), None);
    }

    #[test]
    fn golden_flow_table() {
        let endpoints = EndpointTable::default();
        let mut settings = Settings {
            host_nat: Some(host()),
            ..Settings::default()
        };
        for port in [2, 3] {
            let pod = HostAccessPort::on(&host(), port).unwrap();
            settings.host_access.insert(port, pod);
        }
        let topo = Topology {
            endpoints: &endpoints,
            settings: &settings,
        };
        let lines = HostBridge.desired(&topo).unwrap().flow_lines();
        let expected = [
            "table=0, priority=100,ip,in_port=1,nw_src=172.19.255.254 actions=goto_table:9",
            "table=0, priority=90,ip,in_port=1,nw_src=172.19.0.0/16 actions=drop",
            "table=0, priority=80,arp,in_port=1 actions=goto_table:9",
            "table=0, priority=80,ip,in_port=1 actions=goto_table:9",
            "table=0, priority=100,arp,in_port=2,dl_src=02:02:ac:13:00:02,arp_spa=172.19.0.2,arp_sha=02:02:ac:13:00:02 actions=goto_table:9",
            "table=0, priority=100,ip,in_port=2,dl_src=02:02:ac:13:00:02,nw_src=172.19.0.2 actions=goto_table:9",
            "table=0, priority=100,arp,in_port=3,dl_src=02:02:ac:13:00:03,arp_spa=172.19.0.3,arp_sha=02:02:ac:13:00:03 actions=goto_table:9",
            "table=0, priority=100,ip,in_port=3,dl_src=02:02:ac:13:00:03,nw_src=172.19.0.3 actions=goto_table:9",
            "table=9, priority=100,arp,dl_dst=ff:ff:ff:ff:ff:ff,arp_tpa=172.19.255.254,arp_op=1 actions=output:1",
            "table=9, priority=100,arp,in_port=1,dl_dst=ff:ff:ff:ff:ff:ff,arp_tpa=172.19.0.2,arp_op=1 actions=output:2",
            "table=9, priority=100,dl_dst=02:02:ac:13:ff:fe actions=output:1",
            "table=9, priority=100,in_port=1,dl_dst=02:02:ac:13:00:02 actions=output:2",
        ];
        for line in expected {
            assert!(lines.iter().any(|l| l == line), "{line} not in\n{lines:#?}");
        }
        // Nothing in table 9 goes from one pod's port to another's.
        for l in lines.iter().filter(|l| l.contains("table=9")) {
            let to_host = l.ends_with("actions=output:1");
            let from_host = l.contains("in_port=1,");
            assert!(to_host || from_host, "{l}");
        }
        assert_eq!(lines.len(), 8 + 2 + 4, "{lines:#?}");
    }

    #[test]
    fn without_the_host_port_nothing_is_installed() {
        let endpoints = EndpointTable::default();
        let mut settings = Settings::default();
        settings.host_access.insert(
            2,
            HostAccessPort {
                port: 2,
                ip: Ipv4Addr::new(172, 19, 0, 2),
                mac: MacAddr([2, 2, 0xac, 0x13, 0, 2]),
            },
        );
        let topo = Topology {
            endpoints: &endpoints,
            settings: &settings,
        };
        assert_eq!(HostBridge.desired(&topo).unwrap().flow_count(), 0);
    }
}
