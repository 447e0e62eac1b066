//! The objects the agent API speaks in: networks, endpoints, policy rules, and their JSON
//! shapes.
//!
//! Contract: the serialized field names are the reference's (`EndpointID`, `MacAddrStr`,
//! `SrcEndpointGroup`, ...), so inspect output and, later, the master↔agent RPC look like
//! Contiv's. Values are typed (addresses, MACs, actions); parsing a string form reports the
//! field and the offending text.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Largest endpoint-group id: EPG ids live in 15 metadata bits.
pub const MAX_EPG: u16 = 0x7fff;
/// Largest 802.1Q VLAN id usable for a network.
pub const MAX_VLAN: u16 = 4094;
/// Largest VXLAN network identifier (24 bits).
pub const MAX_VNI: u32 = 0xff_ffff;

/// An Ethernet address, written `02:02:0a:01:01:02`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub fn octets(self) -> [u8; 6] {
        self.0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// A MAC address string that is not six `:`-separated hex bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address {0:?}: expected six hex bytes separated by ':'")]
pub struct BadMac(pub String);

impl FromStr for MacAddr {
    type Err = BadMac;

    fn from_str(s: &str) -> Result<MacAddr, BadMac> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts.next().ok_or_else(|| BadMac(s.to_string()))?;
            if part.is_empty() || part.len() > 2 {
                return Err(BadMac(s.to_string()));
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| BadMac(s.to_string()))?;
        }
        if parts.next().is_some() {
            return Err(BadMac(s.to_string()));
        }
        Ok(MacAddr(out))
    }
}

impl Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MacAddr, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Which datapath a bridge runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BridgeKind {
    /// VLAN networks: access ports, a trunk uplink, OVS `NORMAL` switching at the end.
    Vlan,
    /// VXLAN networks: local VLANs, VTEP ports, explicit MAC table and flood groups.
    Vxlan,
    /// The host bridge: the host's port and each pod's host-access port (`host1`), so pods
    /// and their host reach each other, but pods never each other.
    Host,
}

impl BridgeKind {
    /// The name the reference uses (`DpName`).
    pub fn name(self) -> &'static str {
        match self {
            BridgeKind::Vlan => "vlan",
            BridgeKind::Vxlan => "vxlan",
            BridgeKind::Host => "host",
        }
    }
}

/// How a bridge forwards between endpoints (the global `fwdMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FwdMode {
    /// Layer 2: endpoints reach each other by their MACs.
    #[default]
    Bridge,
    /// Layer 3: every endpoint is answered with the router MAC and packets are routed by
    /// destination address (`vrouter` for VXLAN networks, `vlrouter` for VLAN networks).
    Routing,
}

impl FwdMode {
    /// The reference's name (`FwdMode` in inspect, the global `fwdMode`).
    pub fn name(self) -> &'static str {
        match self {
            FwdMode::Bridge => "bridge",
            FwdMode::Routing => "routing",
        }
    }
}

/// The MAC the routing datapaths answer ARP with and route from (the reference's router MAC):
/// the same on every host, so a pod keeps its neighbour entries wherever its peers are.
pub const ROUTER_MAC: MacAddr = MacAddr([0x00, 0x00, 0x11, 0x11, 0x11, 0x11]);

/// How ARP requests are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArpMode {
    /// Requests go to the controller, which answers for known endpoints.
    #[default]
    Proxy,
    /// Requests follow the ordinary flood path.
    Flood,
}

/// A network as the agent needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// The VLAN the network uses on this bridge (the packet tag on a VLAN bridge, the local
    /// VLAN on a VXLAN bridge).
    pub vlan: u16,
    /// The VXLAN network identifier (0 on a VLAN bridge).
    pub vni: u32,
    /// The gateway address, if the network has one (kept for inspect and the routing
    /// datapaths; the bridge datapaths leave gateway traffic to the physical network).
    pub gateway: Option<Ipv4Addr>,
    /// The VRF (tenant name).
    pub vrf: String,
}

/// What the host daemon knows about an endpoint it plumbed on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEndpoint {
    /// The OpenFlow port of the endpoint's OVS port.
    pub port_no: u32,
    pub mac: MacAddr,
    /// The network's VLAN.
    pub vlan: u16,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    /// Endpoint-group id (0: none).
    pub epg: u16,
    /// The endpoint group's own VLAN (0: none), used to tag GARPs.
    pub epg_vlan: u16,
    /// DSCP to mark the endpoint's IP packets with (0: leave them alone).
    pub dscp: u8,
    /// What the endpoint may send (`None`: no limit).
    pub bandwidth: Option<Bandwidth>,
}

/// A limit on what a local endpoint sends: a meter dropping what exceeds the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bandwidth {
    /// kbit/s.
    pub rate_kbps: u32,
    /// How far above the rate a burst may go, in kbit.
    pub burst_kbit: u32,
}

/// An endpoint, local or remote, in the reference's `OfnetEndpoint` shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Endpoint {
    /// `<ip>:<vrf>`.
    #[serde(rename = "EndpointID")]
    pub endpoint_id: String,
    /// Reference bit flags (`1<<1` internal, ...).
    pub endpoint_type: u32,
    pub endpoint_group: u16,
    pub ip_addr: Option<Ipv4Addr>,
    pub ip_mask: Option<Ipv4Addr>,
    pub ipv6_addr: Option<Ipv6Addr>,
    pub ipv6_mask: Option<Ipv6Addr>,
    pub vrf: String,
    #[serde(rename = "MacAddrStr")]
    pub mac: MacAddr,
    pub vlan: u16,
    pub vni: u32,
    pub endpoint_group_vlan: u16,
    /// The VTEP (host) address of the agent that owns the endpoint.
    pub originator_ip: Option<Ipv4Addr>,
    pub originator_mac: String,
    pub timestamp: String,
    /// OpenFlow port on this bridge; 0 for remote endpoints. Not serialized (host-local).
    #[serde(skip)]
    pub port_no: u32,
    /// Not serialized (host-local).
    #[serde(skip)]
    pub dscp: u8,
    /// Not serialized (host-local).
    #[serde(skip)]
    pub bandwidth: Option<Bandwidth>,
}

/// `EndpointType` bit of an ordinary (internal) endpoint.
pub const ENDPOINT_INTERNAL: u32 = 1 << 1;

impl Endpoint {
    /// The reference's endpoint id: the address (IPv4, else IPv6) and the VRF.
    pub fn id_for(ip: IpAddr, vrf: &str) -> String {
        format!("{ip}:{vrf}")
    }

    /// True for an endpoint plumbed on this host.
    pub fn is_local(&self) -> bool {
        self.port_no != 0
    }
}

/// An agent or master RPC endpoint (`OfnetNode`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Node {
    pub host_addr: String,
    pub host_port: u16,
}

impl Node {
    /// `host:port`, the key the reference uses.
    pub fn key(&self) -> String {
        format!("{}:{}", self.host_addr, self.host_port)
    }

    pub fn socket_addr(&self) -> Option<std::net::SocketAddr> {
        let ip: IpAddr = self.host_addr.parse().ok()?;
        Some(std::net::SocketAddr::new(ip, self.host_port))
    }
}

/// What a policy rule does to the packets it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    Allow,
    Deny,
}

/// A directional policy rule in the reference's `OfnetPolicyRule` shape. Empty strings and
/// zeros mean "any".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PolicyRule {
    pub rule_id: String,
    /// 0..=65525; the flow priority is `10 + priority`.
    pub priority: u16,
    pub src_endpoint_group: u16,
    pub dst_endpoint_group: u16,
    /// An address or a CIDR.
    pub src_ip_addr: String,
    pub dst_ip_addr: String,
    /// 0: any; 6 and 17 allow ports.
    pub ip_protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
    /// `syn`, `syn,ack`, `ack`, `syn,!ack`, `!syn,ack`, or empty.
    pub tcp_flags: String,
    pub action: RuleAction,
}

impl PolicyRule {
    /// A rule matching everything with this id, priority and action; narrow it with the
    /// fields.
    pub fn new(rule_id: impl Into<String>, priority: u16, action: RuleAction) -> PolicyRule {
        PolicyRule {
            rule_id: rule_id.into(),
            priority,
            src_endpoint_group: 0,
            dst_endpoint_group: 0,
            src_ip_addr: String::new(),
            dst_ip_addr: String::new(),
            ip_protocol: 0,
            src_port: 0,
            dst_port: 0,
            tcp_flags: String::new(),
            action,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_round_trips_and_rejects_garbage() {
        let m: MacAddr = "02:02:0a:01:01:02".parse().unwrap();
        assert_eq!(m.0, [2, 2, 10, 1, 1, 2]);
        assert_eq!(m.to_string(), "02:02:0a:01:01:02");
        for bad in [
            "",
            "02:02:0a:01:01",
            "02:02:0a:01:01:02:03",
            "zz:02:0a:01:01:02",
            "002:2:0a:1:1:2",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn endpoint_json_uses_reference_names() {
        let ep = Endpoint {
            endpoint_id: "10.1.1.2:t1".into(),
            endpoint_type: ENDPOINT_INTERNAL,
            endpoint_group: 5,
            ip_addr: Some(Ipv4Addr::new(10, 1, 1, 2)),
            ip_mask: Some(Ipv4Addr::BROADCAST),
            ipv6_addr: None,
            ipv6_mask: None,
            vrf: "t1".into(),
            mac: MacAddr([2, 2, 10, 1, 1, 2]),
            vlan: 10,
            vni: 0,
            endpoint_group_vlan: 0,
            originator_ip: Some(Ipv4Addr::new(192, 168, 2, 10)),
            originator_mac: String::new(),
            timestamp: String::new(),
            port_no: 3,
            dscp: 0,
            bandwidth: None,
        };
        let v = serde_json::to_value(&ep).unwrap();
        assert_eq!(v["EndpointID"], "10.1.1.2:t1");
        assert_eq!(v["MacAddrStr"], "02:02:0a:01:01:02");
        assert_eq!(v["IpAddr"], "10.1.1.2");
        assert_eq!(v["Ipv6Addr"], serde_json::Value::Null);
        assert_eq!(v["EndpointGroupVlan"], 0);
        assert!(v.get("PortNo").is_none(), "host-local fields stay out");
        let back: Endpoint = serde_json::from_value(v).unwrap();
        assert_eq!(back.mac, ep.mac);
    }

    #[test]
    fn rule_json_uses_reference_names() {
        let mut r = PolicyRule::new("r1", 100, RuleAction::Allow);
        r.dst_port = 8000;
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["RuleId"], "r1");
        assert_eq!(v["DstPort"], 8000);
        assert_eq!(v["Action"], "allow");
        assert_eq!(v["SrcEndpointGroup"], 0);
    }
}
