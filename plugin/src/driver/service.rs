//! Service load balancers (reference §4.1: the `state/serviceLB` watch, §5.7): netmaster keeps
//! one `CfgServiceLBState` per service with its VIP and its `svcPort:provPort:protocol` ports,
//! and one `state/serviceProvider/<service>/<IP>` key per provider endpoint its selectors match
//! (Contiv listed the providers in the service's record, which then grew with them). netplugin
//! joins the two ([`ServiceBook`]) and hands each service to both agents (clients and providers
//! may sit on either bridge), which balance new clients over the providers. The events of one
//! watch batch are applied per service once ([`Driver::apply_service_events`]), so a service
//! arriving with 1,000 providers is installed once, not 1,000 times.
//!
//! Kubernetes services ([`crate::kubesvc`]) arrive already mapped, through
//! [`Driver::install_service`], under names (`k8s:<namespace>/<name>`) that never collide
//! with netctl's ids (`<service>:<tenant>`).
//!
//! Contract: applying a service is idempotent (spec and providers are replaced as a whole);
//! removing an unknown service succeeds; a state record that cannot be a service (no VIP yet, a
//! malformed port or address) is refused with an error naming the field and the service, and
//! nothing of it is applied; a provider record without an IPv4 address is left out (logged),
//! the service's other providers stay.

use std::net::Ipv4Addr;

use std::collections::{BTreeMap, BTreeSet};

use master::state::CfgServiceLbState;
use master::state::service::{PROVIDER_CATEGORY, parse_provider_key};
use master::store::keys;
use ofnet::{BridgeKind, ServicePort, ServiceProtocol, ServiceSpec, ServiceStats};

use super::Driver;
use crate::error::{PluginError, Result};

/// A service's state as the agents' spec and provider list.
pub fn agent_service(state: &CfgServiceLbState) -> Result<(ServiceSpec, Vec<Ipv4Addr>)> {
    let invalid = |field: &'static str, value: &str| PluginError::Invalid {
        field,
        problem: format!("{value:?} of service {}", state.id),
    };
    let vip = state
        .ipaddress
        .parse::<Ipv4Addr>()
        .map_err(|_| invalid("ipAddress", &state.ipaddress))?;
    let ports = state
        .ports
        .iter()
        .map(|p| service_port(p).ok_or_else(|| invalid("ports", p)))
        .collect::<Result<Vec<_>>>()?;
    let mut providers = state
        .providers
        .values()
        .map(|p| {
            p.IPAddress
                .parse::<Ipv4Addr>()
                .map_err(|_| invalid("providers", &p.IPAddress))
        })
        .collect::<Result<Vec<_>>>()?;
    providers.sort();
    providers.dedup();
    let affinity_timeout = match state.sessionaffinitytimeout {
        0 => None,
        n => Some(u16::try_from(n).map_err(|_| {
            invalid(
                "sessionaffinitytimeout",
                &state.sessionaffinitytimeout.to_string(),
            )
        })?),
    };
    Ok((
        ServiceSpec {
            vip,
            ports,
            affinity_timeout,
            vip6: None,
        },
        providers,
    ))
}

/// `svcPort:provPort:protocol` (`80:8080:TCP`), as netmaster normalises it.
fn service_port(text: &str) -> Option<ServicePort> {
    let mut parts = text.split(':');
    let svc_port = parts.next()?.parse().ok()?;
    let prov_port = parts.next()?.parse().ok()?;
    let protocol = match parts.next()?.to_ascii_uppercase().as_str() {
        "TCP" => ServiceProtocol::Tcp,
        "UDP" => ServiceProtocol::Udp,
        _ => return None,
    };
    if parts.next().is_some() || svc_port == 0 || prov_port == 0 {
        return None;
    }
    Some(ServicePort {
        protocol,
        svc_port,
        prov_port,
    })
}

/// A change under `state/serviceLB/` or `state/serviceProvider/`.
#[derive(Debug, Clone)]
pub enum ServiceEvent {
    Put { key: String, value: Vec<u8> },
    Delete { key: String },
}

/// The services and providers seen in the store, by service id. Of a provider's record only
/// its address is kept (what the agents balance over): 20 services over 200 pods are 4,000
/// provider records, each with its labels, container and service names.
#[derive(Debug, Default)]
pub struct ServiceBook {
    services: BTreeMap<String, CfgServiceLbState>,
    /// Per service id, each provider key's address (by the key's last segment).
    providers: BTreeMap<String, BTreeMap<String, Ipv4Addr>>,
}

/// The part of a provider's record the book reads (serde skips the rest without allocating it).
#[derive(serde::Deserialize)]
struct ProviderAddress {
    #[serde(rename = "IPAddress")]
    ip: String,
}

/// A service as the book joins it: its record, and the addresses of its provider keys (`None`
/// while no key names one: a record of the previous layout then keeps its own list until the
/// leader converts it).
#[derive(Debug, Clone, PartialEq)]
pub struct JoinedService {
    pub state: CfgServiceLbState,
    pub providers: Option<Vec<Ipv4Addr>>,
}

impl JoinedService {
    /// The agents' spec and providers (see [`agent_service`]).
    pub fn agent_service(&self) -> Result<(ServiceSpec, Vec<Ipv4Addr>)> {
        let (spec, listed) = agent_service(&self.state)?;
        Ok((spec, self.providers.clone().unwrap_or(listed)))
    }
}

impl ServiceBook {
    /// Take one event; returns the service id it touches (`None` for a key that is neither).
    fn take(&mut self, event: ServiceEvent) -> Option<String> {
        let lb = keys::state_prefix(keys::category::SERVICE_LB);
        let prov = keys::state_prefix(PROVIDER_CATEGORY);
        let key = match &event {
            ServiceEvent::Put { key, .. } | ServiceEvent::Delete { key } => key.clone(),
        };
        if let Some(id) = key.strip_prefix(&lb) {
            match event {
                ServiceEvent::Put { value, .. } => {
                    match serde_json::from_slice::<CfgServiceLbState>(&value) {
                        Ok(state) => {
                            self.services.insert(id.to_string(), state);
                        }
                        Err(e) => {
                            // netmaster writes a service before it has a VIP only transiently; the
                            // next write brings it in.
                            tracing::warn!(%key, error = %e, "service state does not parse");
                            return None;
                        }
                    }
                }
                ServiceEvent::Delete { .. } => {
                    self.services.remove(id);
                }
            }
            return Some(id.to_string());
        }
        if key.starts_with(&prov) {
            let (id, ip) = parse_provider_key(&key)?;
            let (id, ip) = (id.to_string(), ip.to_string());
            match event {
                ServiceEvent::Put { value, .. } => {
                    let address = serde_json::from_slice::<ProviderAddress>(&value)
                        .map_err(|e| e.to_string())
                        .and_then(|p| {
                            p.ip.parse::<Ipv4Addr>()
                                .map_err(|_| format!("IPAddress {:?} is not an IPv4 address", p.ip))
                        });
                    match address {
                        Ok(address) => {
                            self.providers
                                .entry(id.clone())
                                .or_default()
                                .insert(ip, address);
                        }
                        Err(e) => {
                            // Only this provider is left out (also an address it had before);
                            // the service's others stay.
                            tracing::warn!(%key, error = %e, "service provider does not parse");
                            return self.forget_provider(&id, &ip).then_some(id);
                        }
                    }
                }
                ServiceEvent::Delete { .. } => {
                    self.forget_provider(&id, &ip);
                }
            }
            return Some(id);
        }
        None
    }

    /// Forget the provider key `ip` of service `id` (a service without provider keys left
    /// has no list); whether it had an address.
    fn forget_provider(&mut self, id: &str, ip: &str) -> bool {
        let Some(list) = self.providers.get_mut(id) else {
            return false;
        };
        let had = list.remove(ip).is_some();
        if list.is_empty() {
            self.providers.remove(id);
        }
        had
    }

    /// The service with its providers joined in; `None` once it is deleted.
    fn joined(&self, id: &str) -> Option<JoinedService> {
        Some(JoinedService {
            state: self.services.get(id)?.clone(),
            providers: self
                .providers
                .get(id)
                .map(|list| list.values().copied().collect()),
        })
    }
}

impl Driver {
    /// Apply service and provider changes: each service they touch is installed (or removed)
    /// once, with the providers known after all of them.
    pub async fn apply_service_events(&self, events: Vec<ServiceEvent>) {
        let (touched, joined) = self.with_state(|s| {
            let touched: BTreeSet<String> = events
                .into_iter()
                .filter_map(|e| s.services.take(e))
                .collect();
            let joined: Vec<(String, Option<JoinedService>)> = touched
                .iter()
                .map(|id| (id.clone(), s.services.joined(id)))
                .collect();
            (touched.len(), joined)
        });
        tracing::debug!(services = touched, "service changes");
        for (id, state) in joined {
            let outcome = match state {
                Some(service) => self.apply_service(&service).await,
                None => self.remove_service(&id).await,
            };
            if let Err(e) = outcome {
                tracing::warn!(service = %id, error = %e, "applying a service change failed");
            }
        }
    }

    /// Install (or replace) a netctl service and its providers on both bridges.
    pub async fn apply_service(&self, service: &JoinedService) -> Result<()> {
        let (spec, providers) = service.agent_service()?;
        self.install_service(&service.state.id, &spec, &providers)
            .await
    }

    /// Install (or replace) a service and its providers on both bridges under its agent name:
    /// a netctl service's `<service>:<tenant>` or a Kubernetes service's
    /// `k8s:<namespace>/<name>` (see [`crate::kubesvc`]).
    pub async fn install_service(
        &self,
        name: &str,
        spec: &ServiceSpec,
        providers: &[Ipv4Addr],
    ) -> Result<()> {
        for kind in [BridgeKind::Vxlan, BridgeKind::Vlan] {
            let agent = self.agent(kind);
            agent
                .add_service(name.to_string(), spec.clone())
                .await
                .map_err(|e| PluginError::agent(kind, e))?;
            agent
                .set_service_providers(name.to_string(), providers.to_vec())
                .await
                .map_err(|e| PluginError::agent(kind, e))?;
        }
        Ok(())
    }

    /// `/svcstats`: both bridges' service counters, merged by service VIP.
    pub async fn service_stats(&self) -> Result<ServiceStats> {
        let mut all = ServiceStats::default();
        for kind in [BridgeKind::Vxlan, BridgeKind::Vlan] {
            let stats = self
                .agent(kind)
                .service_stats()
                .await
                .map_err(|e| PluginError::agent(kind, e))?;
            all.merge(stats);
        }
        Ok(all)
    }

    /// Remove a service from both bridges.
    pub async fn remove_service(&self, id: &str) -> Result<()> {
        for kind in [BridgeKind::Vxlan, BridgeKind::Vlan] {
            self.agent(kind)
                .remove_service(id)
                .await
                .map_err(|e| PluginError::agent(kind, e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use master::state::Provider;

    use super::*;

    fn state(ip: &str, ports: &[&str], providers: &[&str]) -> CfgServiceLbState {
        CfgServiceLbState {
            id: "web:default".into(),
            servicename: "web".into(),
            tenantname: "default".into(),
            ipaddress: ip.into(),
            ports: ports.iter().map(|p| p.to_string()).collect(),
            providers: providers
                .iter()
                .map(|ip| {
                    (
                        format!("{ip}:default"),
                        Provider {
                            IPAddress: ip.to_string(),
                            ..Default::default()
                        },
                    )
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn service_state_maps_to_spec_and_providers() {
        let (spec, providers) = agent_service(&state(
            "20.1.1.1",
            &["80:8080:TCP", "643:7070:udp"],
            &["10.1.1.3", "10.1.1.2"],
        ))
        .unwrap();
        assert_eq!(spec.vip, Ipv4Addr::new(20, 1, 1, 1));
        assert_eq!(
            spec.ports,
            [
                ServicePort {
                    protocol: ServiceProtocol::Tcp,
                    svc_port: 80,
                    prov_port: 8080
                },
                ServicePort {
                    protocol: ServiceProtocol::Udp,
                    svc_port: 643,
                    prov_port: 7070
                }
            ]
        );
        assert_eq!(
            providers,
            [Ipv4Addr::new(10, 1, 1, 2), Ipv4Addr::new(10, 1, 1, 3)]
        );
        assert_eq!(spec.affinity_timeout, None, "no affinity by default");
    }

    #[test]
    fn a_session_affinity_timeout_reaches_the_spec() {
        let mut s = state("20.1.1.1", &["80:8080:TCP"], &[]);
        s.sessionaffinitytimeout = 60;
        assert_eq!(agent_service(&s).unwrap().0.affinity_timeout, Some(60));
        s.sessionaffinitytimeout = 70_000;
        assert!(
            agent_service(&s).is_err(),
            "more than an idle timeout holds"
        );
    }

    #[test]
    fn bad_records_name_the_field_and_the_service() {
        for (bad, field) in [
            (state("", &["80:8080:TCP"], &[]), "ipAddress"),
            (state("20.1.1.1", &["80:8080:SCTP"], &[]), "ports"),
            (state("20.1.1.1", &["80:0:TCP"], &[]), "ports"),
            (state("20.1.1.1", &["80:8080"], &[]), "ports"),
            (
                state("20.1.1.1", &["80:8080:TCP"], &["10.1.1"]),
                "providers",
            ),
        ] {
            let err = agent_service(&bad).unwrap_err().to_string();
            assert!(err.contains(field) && err.contains("web:default"), "{err}");
        }
    }

    /// Providers are their own keys: the book joins them to their service whatever order the
    /// events come in, drops a deleted one, and forgets a deleted service.
    #[test]
    fn book_joins_provider_keys_to_their_service() {
        let put = |key: &str, value: Vec<u8>| ServiceEvent::Put {
            key: key.to_string(),
            value,
        };
        let provider = |ip: &str| {
            serde_json::to_vec(&Provider {
                IPAddress: ip.to_string(),
                Tenant: "default".into(),
                ..Default::default()
            })
            .unwrap()
        };
        let p = "/contiv.io/state/serviceProvider/web:default/";
        let mut book = ServiceBook::default();
        // A provider written before its service (a big service's providers precede it).
        assert_eq!(
            book.take(put(&format!("{p}10.1.1.2"), provider("10.1.1.2"))),
            Some("web:default".into())
        );
        assert!(book.joined("web:default").is_none());
        let record = serde_json::to_vec(&state("20.1.1.1", &["80:8080:TCP"], &[])).unwrap();
        assert_eq!(
            book.take(put("/contiv.io/state/serviceLB/web:default", record)),
            Some("web:default".into())
        );
        book.take(put(&format!("{p}10.1.1.3"), provider("10.1.1.3")));
        let (_, ips) = book.joined("web:default").unwrap().agent_service().unwrap();
        assert_eq!(
            ips,
            [Ipv4Addr::new(10, 1, 1, 2), Ipv4Addr::new(10, 1, 1, 3)]
        );
        book.take(ServiceEvent::Delete {
            key: format!("{p}10.1.1.2"),
        });
        let (_, ips) = book.joined("web:default").unwrap().agent_service().unwrap();
        assert_eq!(ips, [Ipv4Addr::new(10, 1, 1, 3)]);
        // A provider record without an IPv4 address is left out; the others stay. One that
        // had an address loses it (the service is touched again).
        assert_eq!(
            book.take(put(&format!("{p}10.1.1.4"), provider("10.1.1"))),
            None
        );
        book.take(put(&format!("{p}10.1.1.5"), provider("10.1.1.5")));
        assert_eq!(
            book.take(put(&format!("{p}10.1.1.5"), provider("garbage"))),
            Some("web:default".into())
        );
        let (_, ips) = book.joined("web:default").unwrap().agent_service().unwrap();
        assert_eq!(ips, [Ipv4Addr::new(10, 1, 1, 3)]);
        // A record of the previous layout keeps its own list while no key names a provider.
        let legacy =
            serde_json::to_vec(&state("20.1.1.9", &["80:8080:TCP"], &["10.1.1.7"])).unwrap();
        book.take(put("/contiv.io/state/serviceLB/old:default", legacy));
        let (_, ips) = book.joined("old:default").unwrap().agent_service().unwrap();
        assert_eq!(ips, [Ipv4Addr::new(10, 1, 1, 7)]);
        book.take(ServiceEvent::Delete {
            key: "/contiv.io/state/serviceLB/web:default".into(),
        });
        assert!(book.joined("web:default").is_none());
        assert_eq!(book.take(put("/contiv.io/state/serviceX/y", vec![])), None);
    }
}
