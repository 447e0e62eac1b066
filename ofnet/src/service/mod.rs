//! Service load balancing (the reference's service proxy): state and the rules that change it.
//!
//! A service is a name, a virtual IP (VIP) with ports, and a list of provider addresses; the
//! spec and the providers arrive separately and in any order, and both are remembered. A
//! service with both is *active*: its VIP is watched (table 3 sends the first packet of every
//! client to the controller) and answered by the ARP proxy. On such a packet the agent picks the
//! provider with the fewest clients ([`balancer`]) and records the *assignment* client →
//! provider; the assignment's DNAT and SNAT flows ([`flows`]) are a function of it, so they
//! follow the same owner/desired-state path as every other ofnet flow. Affinity is per client
//! address: an assignment lasts until its provider leaves the list, the service goes, or the
//! client endpoint goes ([`Services::prune`]), and survives an agent restart ([`adopt`]).
//!
//! Contract: this module holds plain values; it never talks to a switch. [`Services`] lives in
//! the agent's settings, so a refused update rolls it back with the rest.
//!
//! - [`balancer`]: the provider choice.
//! - [`adopt`]: assignments read back from the switch's DNAT flows when a restarted agent
//!   connects, so clients keep their providers across an agent restart.
//! - [`flows`]: watch, DNAT and SNAT flows, and the re-injection of a first packet.
//! - [`packet`]: what the agent reads from a punted packet.
//! - [`stats`]: the `/svcstats` shape, filled from flow statistics.
//! - [`inspect`]: the `SvcProxy` part of the agent export.

pub mod adopt;
pub mod balancer;
pub mod flows;
pub mod inspect;
pub mod packet;
pub mod stats;

use crate::epdb::EndpointTable;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

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

/// A service's address and ports (the reference's `ServiceSpec`, IPv4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceSpec {
    #[serde(rename = "IpAddress")]
    pub vip: Ipv4Addr,
    #[serde(rename = "Ports")]
    pub ports: Vec<ServicePort>,
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
        vip: Ipv4Addr,
        other: String,
    },
    #[error("service {service}: port {protocol:?}/{svc_port} is listed twice")]
    DuplicatePort {
        service: String,
        protocol: ServiceProtocol,
        svc_port: u16,
    },
    #[error("service {service}: port {protocol:?}/{svc_port}: port 0 is not a port")]
    ZeroPort {
        service: String,
        protocol: ServiceProtocol,
        svc_port: u16,
    },
}

/// Which provider serves a client, and in which VRF the client (and so the provider, for its
/// MAC) is looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub provider: Ipv4Addr,
    pub vrf: String,
}

/// One service: what is known of it so far, and its clients.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Service {
    pub spec: Option<ServiceSpec>,
    pub providers: BTreeSet<Ipv4Addr>,
    /// By client address.
    pub clients: BTreeMap<Ipv4Addr, Assignment>,
}

impl Service {
    /// The spec, when the service has providers too (then its VIP is watched and answered).
    pub fn active_spec(&self) -> Option<&ServiceSpec> {
        self.spec.as_ref().filter(|_| !self.providers.is_empty())
    }

    /// Clients per provider (every provider listed, with 0 when it has none).
    pub fn load(&self) -> BTreeMap<Ipv4Addr, usize> {
        let mut load: BTreeMap<Ipv4Addr, usize> = self.providers.iter().map(|p| (*p, 0)).collect();
        for a in self.clients.values() {
            if let Some(n) = load.get_mut(&a.provider) {
                *n += 1;
            }
        }
        load
    }

    /// Drop assignments the current spec and providers no longer allow.
    fn drop_stale_clients(&mut self) {
        if self.active_spec().is_none() {
            self.clients.clear();
            return;
        }
        let providers = &self.providers;
        self.clients.retain(|_, a| providers.contains(&a.provider));
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

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The active service whose VIP is `vip`.
    pub fn by_vip(&self, vip: Ipv4Addr) -> Option<(&String, &Service)> {
        self.by_name
            .iter()
            .find(|(_, s)| s.active_spec().is_some_and(|spec| spec.vip == vip))
    }

    /// Whether `ip` is the VIP of an active service (the ARP proxy answers for it).
    pub fn is_vip(&self, ip: Ipv4Addr) -> bool {
        self.by_vip(ip).is_some()
    }

    /// Add or replace a service's spec. Clients keep their providers; their flows follow the
    /// new ports. Refused: a VIP another service has, a port listed twice, port 0.
    pub fn set_spec(&mut self, name: &str, spec: ServiceSpec) -> Result<(), ServiceError> {
        if let Some((other, _)) = self
            .by_name
            .iter()
            .find(|(n, s)| n.as_str() != name && s.spec.as_ref().is_some_and(|x| x.vip == spec.vip))
        {
            return Err(ServiceError::VipInUse {
                service: name.to_string(),
                vip: spec.vip,
                other: other.clone(),
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
        let s = self.by_name.entry(name.to_string()).or_default();
        s.spec = Some(spec);
        s.drop_stale_clients();
        Ok(())
    }

    /// Set a service's providers (the spec may come later). Clients of a provider that left
    /// lose their assignment and are balanced again on their next packet.
    pub fn set_providers(&mut self, name: &str, providers: impl IntoIterator<Item = Ipv4Addr>) {
        let s = self.by_name.entry(name.to_string()).or_default();
        s.providers = providers.into_iter().collect();
        s.drop_stale_clients();
        if s.spec.is_none() && s.providers.is_empty() {
            self.by_name.remove(name);
        }
    }

    /// Forget a service: spec, providers and clients. Unknown names are fine (`false`).
    pub fn remove(&mut self, name: &str) -> bool {
        self.by_name.remove(name).is_some()
    }

    /// Give `client` (in `vrf`) a provider of service `name` unless it has one; returns the
    /// provider, or `None` when the service is not active.
    pub fn assign(&mut self, name: &str, client: Ipv4Addr, vrf: &str) -> Option<Ipv4Addr> {
        let s = self.by_name.get_mut(name)?;
        s.active_spec()?;
        if let Some(a) = s.clients.get(&client) {
            return Some(a.provider);
        }
        let vip = s.spec.as_ref().map(|x| x.vip);
        let provider = balancer::fewest_clients(&s.load(), vip)?;
        s.clients.insert(
            client,
            Assignment {
                provider,
                vrf: vrf.to_string(),
            },
        );
        Some(provider)
    }

    /// Record an assignment found on the switch ([`adopt::adoptable`]) unless the service is
    /// not active, the provider is not one of its providers, or the client has one already;
    /// returns whether it was recorded. It then counts for the balancer like any other.
    pub fn adopt(&mut self, name: &str, client: Ipv4Addr, assignment: Assignment) -> bool {
        let Some(s) = self.by_name.get_mut(name) else {
            return false;
        };
        if s.active_spec().is_none()
            || !s.providers.contains(&assignment.provider)
            || s.clients.contains_key(&client)
        {
            return false;
        }
        s.clients.insert(client, assignment);
        true
    }

    /// Drop the assignments of clients that are no longer local endpoints here.
    pub fn prune(&mut self, endpoints: &EndpointTable) {
        for s in self.by_name.values_mut() {
            s.clients.retain(|client, a| {
                endpoints
                    .find((*client).into(), &a.vrf)
                    .is_some_and(|e| e.is_local())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIP: Ipv4Addr = Ipv4Addr::new(10, 254, 0, 10);
    const P1: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 11);
    const P2: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 12);
    const C1: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 2);
    const C2: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 3);
    const C3: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 4);

    fn spec() -> ServiceSpec {
        ServiceSpec {
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
        assert_eq!(s.assign("web", C1, "t"), None, "no spec yet");
        s.set_spec("web", spec()).unwrap();
        assert!(s.is_vip(VIP));
        assert_eq!(s.assign("web", C1, "t"), Some(P1));
    }

    #[test]
    fn clients_spread_over_providers_and_stick() {
        let mut s = Services::default();
        s.set_spec("web", spec()).unwrap();
        s.set_providers("web", [P1, P2]);
        let a = s.assign("web", C1, "t").unwrap();
        let b = s.assign("web", C2, "t").unwrap();
        assert_ne!(a, b, "second client goes to the other provider");
        assert_eq!(s.assign("web", C1, "t"), Some(a), "affinity per client");
        // Removing C1's provider drops C1 only; it is balanced again on its next packet.
        let keep = if a == P1 { P2 } else { P1 };
        s.set_providers("web", [keep]);
        let svc = s.get("web").unwrap();
        assert!(!svc.clients.contains_key(&C1));
        assert_eq!(svc.clients.get(&C2).map(|x| x.provider), Some(keep));
        assert_eq!(s.assign("web", C1, "t"), Some(keep));
        assert_eq!(s.assign("web", C3, "t"), Some(keep));
    }

    #[test]
    fn no_providers_or_no_spec_means_no_clients() {
        let mut s = Services::default();
        s.set_spec("web", spec()).unwrap();
        s.set_providers("web", [P1]);
        s.assign("web", C1, "t");
        s.set_providers("web", []);
        assert!(s.get("web").unwrap().clients.is_empty());
        assert!(!s.is_vip(VIP), "no providers: VIP not watched nor answered");
        assert!(s.remove("web"));
        assert!(!s.remove("web"), "unknown name: nothing to do");
        assert!(s.is_empty());
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
