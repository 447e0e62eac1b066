//! Service load balancing in the switch: state, and the rules that change it.
//!
//! A service is a name, a virtual IP (VIP) with ports, and a set of provider addresses; the
//! spec and the providers arrive separately and in any order, and both are remembered. Every
//! *new connection* to a VIP port is balanced by the switch itself: an OpenFlow `select` group
//! per service port (one bucket per provider, hashed over the connection's 5-tuple) commits it
//! to conntrack with a destination NAT to the chosen provider ([`flows`]); every later packet
//! of the connection, and every reply, is translated by conntrack. No packet of a service goes
//! to the controller, and no flow exists per client: the flows of a service are a function of
//! its spec and providers only.
//!
//! Contract: this module holds plain values; it never talks to a switch. [`Services`] lives in
//! the agent's settings, so a refused update rolls it back with the rest.
//!
//! - [`flows`]: the conntrack entry flows, the per-service groups and flows.
//! - [`stats`]: the `/svcstats` shape, filled from flow statistics.
//! - [`inspect`]: the `SvcProxy` part of the agent export.
//! - [`reject`]: the TCP reset or ICMP unreachable answering a service port without providers.

pub mod flows;
pub mod inspect;
pub mod reject;
pub mod stats;

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Transport protocol of a service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ServiceProtocol {
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "UDP")]
    Udp,
}

impl ServiceProtocol {
    /// The IP protocol number (`nw_proto`).
    pub fn ip_proto(self) -> u8 {
        match self {
            ServiceProtocol::Tcp => 6,
            ServiceProtocol::Udp => 17,
        }
    }

    /// `"TCP"` or `"UDP"`, as the reference writes it.
    pub fn name(self) -> &'static str {
        match self {
            ServiceProtocol::Tcp => "TCP",
            ServiceProtocol::Udp => "UDP",
        }
    }

    pub fn from_ip_proto(proto: u8) -> Option<ServiceProtocol> {
        match proto {
            6 => Some(ServiceProtocol::Tcp),
            17 => Some(ServiceProtocol::Udp),
            _ => None,
        }
    }
}

/// One port of a service: clients connect to `svc_port` on the VIP, providers listen on
/// `prov_port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServicePort {
    #[serde(rename = "Protocol")]
    pub protocol: ServiceProtocol,
    #[serde(rename = "SvcPort")]
    pub svc_port: u16,
    #[serde(rename = "ProvPort")]
    pub prov_port: u16,
}

/// A service's address and ports (the reference's `ServiceSpec`), with an optional second,
/// IPv6 VIP for a dual-stack service (a Kubernetes Service's IPv6 `clusterIPs` entry): its
/// ports are the same, and its connections are balanced over the IPv6 addresses of the same
/// providers (each provider is named by its IPv4 address; its IPv6 address is the endpoint
/// DB's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceSpec {
    #[serde(rename = "IpAddress")]
    pub vip: Ipv4Addr,
    /// The IPv6 VIP of a dual-stack service.
    #[serde(
        rename = "Ipv6Address",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub vip6: Option<Ipv6Addr>,
    #[serde(rename = "Ports")]
    pub ports: Vec<ServicePort>,
    /// Session affinity by client address (Kubernetes `sessionAffinity: ClientIP`): a client's
    /// new connections to a port go to the provider its previous one went to, until it has
    /// made no new connection for this many seconds. `None`: every connection is balanced.
    #[serde(
        rename = "SessionAffinityTimeout",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub affinity_timeout: Option<u16>,
}

impl ServiceSpec {
    /// The protocols the ports use, each once.
    pub fn protocols(&self) -> BTreeSet<ServiceProtocol> {
        self.ports.iter().map(|p| p.protocol).collect()
    }

    /// The port a client reaches as `protocol`/`svc_port`.
    pub fn port(&self, protocol: ServiceProtocol, svc_port: u16) -> Option<&ServicePort> {
        self.ports
            .iter()
            .find(|p| p.protocol == protocol && p.svc_port == svc_port)
    }

    /// The VIPs: the IPv4 one, then the IPv6 one when the service is dual-stack.
    pub fn vips(&self) -> Vec<IpAddr> {
        std::iter::once(IpAddr::V4(self.vip))
            .chain(self.vip6.map(IpAddr::V6))
            .collect()
    }

    /// The ARP proxy's answer for the VIP: `02:02:<vip bytes>`.
    pub fn vip_mac(&self) -> [u8; 6] {
        vip_mac(self.vip)
    }
}

/// `02:02:<vip bytes>`: the MAC the ARP proxy answers for a service VIP.
pub fn vip_mac(vip: Ipv4Addr) -> [u8; 6] {
    let [a, b, c, d] = vip.octets();
    [2, 2, a, b, c, d]
}

/// A refused service change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    #[error("service {service}: VIP {vip} already belongs to service {other}")]
    VipInUse {
        service: String,
        vip: IpAddr,
        other: String,
    },
    #[error("service {service}: {vip6} is not a unicast IPv6 address a VIP can be")]
    BadIpv6Vip { service: String, vip6: Ipv6Addr },
    #[error("service {service}: port {protocol:?}/{svc_port} is listed twice")]
    DuplicatePort {
        service: String,
        protocol: ServiceProtocol,
        svc_port: u16,
    },
    #[error("service {service}: a session affinity timeout of 0 seconds would never hold")]
    ZeroAffinityTimeout { service: String },
    #[error("service {service}: {ports} ports, at most 256 are supported")]
    TooManyPorts { service: String, ports: usize },
    #[error("service {service}: port {protocol:?}/{svc_port}: port 0 is not a port")]
    ZeroPort {
        service: String,
        protocol: ServiceProtocol,
        svc_port: u16,
    },
}

/// Most ports one service may have: each port is one group, numbered inside the service's
/// block of group ids.
pub const MAX_PORTS: usize = 256;

/// One service: what is known of it so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Service {
    pub spec: Option<ServiceSpec>,
    pub providers: BTreeSet<Ipv4Addr>,
    /// The service's block of group ids (see [`flows::group_id`]), given when the service is
    /// first seen and kept until it is removed.
    pub index: u32,
}

impl Service {
    /// The spec, when the service has one: its VIP is then answered and balanced (or rejected
    /// when it has no provider).
    pub fn active_spec(&self) -> Option<&ServiceSpec> {
        self.spec.as_ref()
    }

    /// The providers the groups balance over: every provider but the VIP itself (its traffic
    /// would be the VIP's again).
    pub fn usable_providers(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        let vip = self.spec.as_ref().map(|s| s.vip);
        self.providers
            .iter()
            .copied()
            .filter(move |p| Some(*p) != vip)
    }

    /// Whether `ip` is one of [`Self::usable_providers`].
    pub fn is_usable_provider(&self, ip: Ipv4Addr) -> bool {
        self.providers.contains(&ip) && self.spec.as_ref().is_none_or(|s| s.vip != ip)
    }
}

/// Every service of a bridge, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Services {
    by_name: BTreeMap<String, Service>,
}

impl Services {
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Service)> {
        self.by_name.iter()
    }

    pub fn get(&self, name: &str) -> Option<&Service> {
        self.by_name.get(name)
    }

    /// Service `name` and its spec, when it has one.
    pub fn active(&self, name: &str) -> Option<(&Service, &ServiceSpec)> {
        let svc = self.by_name.get(name)?;
        Some((svc, svc.active_spec()?))
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Whether any service has a spec (then the conntrack entry flows are needed).
    pub fn any_active(&self) -> bool {
        self.by_name.values().any(|s| s.spec.is_some())
    }

    /// Whether any service with a spec is dual-stack (then IPv6 packets are looked up in
    /// conntrack too).
    pub fn any_ipv6(&self) -> bool {
        self.by_name
            .values()
            .any(|s| s.spec.as_ref().is_some_and(|x| x.vip6.is_some()))
    }

    /// The service whose VIP is `vip`.
    pub fn by_vip(&self, vip: Ipv4Addr) -> Option<(&String, &Service)> {
        self.by_name
            .iter()
            .find(|(_, s)| s.active_spec().is_some_and(|spec| spec.vip == vip))
    }

    /// Whether `ip` is the VIP of a service (the ARP proxy answers for it).
    pub fn is_vip(&self, ip: Ipv4Addr) -> bool {
        self.by_vip(ip).is_some()
    }

    /// The spec of the service whose IPv6 VIP is `vip6` (the ND proxy answers for it with
    /// the MAC of the service's IPv4 VIP).
    pub fn by_vip6(&self, vip6: Ipv6Addr) -> Option<&ServiceSpec> {
        self.by_name
            .values()
            .filter_map(Service::active_spec)
            .find(|spec| spec.vip6 == Some(vip6))
    }

    /// The service `name`, created with the lowest free group block when new.
    fn entry(&mut self, name: &str) -> &mut Service {
        if !self.by_name.contains_key(name) {
            let used: BTreeSet<u32> = self.by_name.values().map(|s| s.index).collect();
            let index = (0..).find(|i| !used.contains(i)).unwrap_or_default();
            self.by_name.insert(
                name.to_string(),
                Service {
                    index,
                    ..Service::default()
                },
            );
        }
        self.by_name.entry(name.to_string()).or_default()
    }

    /// Add or replace a service's spec; connections already open keep their provider.
    /// Refused: a VIP another service has, a port listed twice, port 0, too many ports.
    pub fn set_spec(&mut self, name: &str, spec: ServiceSpec) -> Result<(), ServiceError> {
        if let Some(v6) = spec.vip6
            && (v6.is_unspecified() || v6.is_loopback() || v6.is_multicast())
        {
            return Err(ServiceError::BadIpv6Vip {
                service: name.to_string(),
                vip6: v6,
            });
        }
        let vips = spec.vips();
        for (other, s) in self.by_name.iter().filter(|(n, _)| n.as_str() != name) {
            if let Some(vip) = s
                .spec
                .as_ref()
                .and_then(|x| x.vips().into_iter().find(|v| vips.contains(v)))
            {
                return Err(ServiceError::VipInUse {
                    service: name.to_string(),
                    vip,
                    other: other.clone(),
                });
            }
        }
        if spec.affinity_timeout == Some(0) {
            return Err(ServiceError::ZeroAffinityTimeout {
                service: name.to_string(),
            });
        }
        if spec.ports.len() > MAX_PORTS {
            return Err(ServiceError::TooManyPorts {
                service: name.to_string(),
                ports: spec.ports.len(),
            });
        }
        let mut seen = BTreeSet::new();
        for p in &spec.ports {
            if p.svc_port == 0 || p.prov_port == 0 {
                return Err(ServiceError::ZeroPort {
                    service: name.to_string(),
                    protocol: p.protocol,
                    svc_port: p.svc_port,
                });
            }
            if !seen.insert((p.protocol, p.svc_port)) {
                return Err(ServiceError::DuplicatePort {
                    service: name.to_string(),
                    protocol: p.protocol,
                    svc_port: p.svc_port,
                });
            }
        }
        self.entry(name).spec = Some(spec);
        Ok(())
    }

    /// Set a service's providers (the spec may come later). A provider that left gets no new
    /// connection, and the ones it had end (their packets are dropped); the others' connections
    /// are untouched.
    pub fn set_providers(&mut self, name: &str, providers: impl IntoIterator<Item = Ipv4Addr>) {
        let providers: BTreeSet<Ipv4Addr> = providers.into_iter().collect();
        if providers.is_empty() && !self.by_name.contains_key(name) {
            return;
        }
        let s = self.entry(name);
        s.providers = providers;
        if s.spec.is_none() && s.providers.is_empty() {
            self.by_name.remove(name);
        }
    }

    /// Put service `name` back as it was (`None`: absent), undoing a refused change.
    pub fn put_back(&mut self, name: &str, previous: Option<Service>) {
        match previous {
            Some(s) => self.by_name.insert(name.to_string(), s),
            None => self.by_name.remove(name),
        };
    }

    /// Forget a service: spec and providers. Unknown names are fine (`false`).
    pub fn remove(&mut self, name: &str) -> bool {
        self.by_name.remove(name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIP: Ipv4Addr = Ipv4Addr::new(10, 254, 0, 10);
    const P1: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 11);
    const P2: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 12);

    fn spec() -> ServiceSpec {
        ServiceSpec {
            affinity_timeout: None,
            vip6: None,
            vip: VIP,
            ports: vec![ServicePort {
                protocol: ServiceProtocol::Tcp,
                svc_port: 80,
                prov_port: 8080,
            }],
        }
    }

    #[test]
    fn providers_before_the_spec_are_remembered_and_activate_it() {
        let mut s = Services::default();
        s.set_providers("web", [P1]);
        assert!(!s.is_vip(VIP));
        assert!(!s.any_active());
        s.set_spec("web", spec()).unwrap();
        assert!(s.is_vip(VIP));
        assert_eq!(
            s.get("web").unwrap().usable_providers().collect::<Vec<_>>(),
            vec![P1]
        );
    }

    #[test]
    fn a_service_without_providers_keeps_its_vip_and_the_vip_is_never_a_provider() {
        let mut s = Services::default();
        s.set_spec("web", spec()).unwrap();
        s.set_providers("web", [P1, VIP]);
        assert_eq!(
            s.get("web").unwrap().usable_providers().collect::<Vec<_>>(),
            vec![P1]
        );
        s.set_providers("web", []);
        assert!(
            s.is_vip(VIP),
            "no providers: the VIP is still answered (and rejects)"
        );
        assert!(s.remove("web"));
        assert!(!s.remove("web"), "unknown name: nothing to do");
        s.set_providers("gone", []);
        assert!(
            s.is_empty(),
            "no providers for an unknown service: nothing recorded"
        );
    }

    #[test]
    fn group_blocks_are_given_once_and_reused_after_removal() {
        let mut s = Services::default();
        s.set_spec("a", spec()).unwrap();
        let mut other = spec();
        other.vip = Ipv4Addr::new(10, 254, 0, 11);
        s.set_spec("b", other.clone()).unwrap();
        assert_eq!(
            (s.get("a").unwrap().index, s.get("b").unwrap().index),
            (0, 1)
        );
        s.set_providers("a", [P1, P2]);
        assert_eq!(s.get("a").unwrap().index, 0, "kept across changes");
        s.remove("a");
        let mut third = spec();
        third.vip = Ipv4Addr::new(10, 254, 0, 12);
        s.set_spec("c", third).unwrap();
        assert_eq!(s.get("c").unwrap().index, 0, "the freed block");
    }

    #[test]
    fn bad_specs_are_refused_and_change_nothing() {
        let mut s = Services::default();
        s.set_spec("web", spec()).unwrap();
        assert!(matches!(
            s.set_spec("other", spec()),
            Err(ServiceError::VipInUse { .. })
        ));
        let mut twice = spec();
        twice.ports.push(twice.ports[0]);
        assert!(matches!(
            s.set_spec("web", twice),
            Err(ServiceError::DuplicatePort { svc_port: 80, .. })
        ));
        let mut zero = spec();
        zero.ports[0].prov_port = 0;
        assert!(matches!(
            s.set_spec("web", zero),
            Err(ServiceError::ZeroPort { .. })
        ));
        let mut many = spec();
        many.ports = (1..=257)
            .map(|n| ServicePort {
                protocol: ServiceProtocol::Tcp,
                svc_port: n,
                prov_port: n,
            })
            .collect();
        assert!(matches!(
            s.set_spec("web", many),
            Err(ServiceError::TooManyPorts { ports: 257, .. })
        ));
        assert_eq!(s.get("web").unwrap().spec, Some(spec()));
        assert!(s.get("other").is_none());
    }

    #[test]
    fn spec_json_uses_the_reference_names() {
        let v = serde_json::to_value(spec()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"IpAddress": "10.254.0.10",
                "Ports": [{"Protocol": "TCP", "SvcPort": 80, "ProvPort": 8080}]})
        );
    }
}
