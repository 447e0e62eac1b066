//! Service load balancers (reference §4.1: the `state/serviceLB` watch, §5.7): netmaster keeps
//! one `CfgServiceLBState` per service with its VIP, its `svcPort:provPort:protocol` ports and
//! the provider endpoints its selectors match; netplugin hands each to both agents (clients and
//! providers may sit on either bridge), which balance new clients over the providers.
//!
//! Kubernetes services ([`crate::kubesvc`]) arrive already mapped, through
//! [`Driver::install_service`], under names (`k8s:<namespace>/<name>`) that never collide
//! with netctl's ids (`<service>:<tenant>`).
//!
//! Contract: applying a service is idempotent (spec and providers are replaced as a whole);
//! removing an unknown service succeeds; a state record that cannot be a service (no VIP yet, a
//! malformed port or address) is refused with an error naming the field and the service, and
//! nothing of it is applied.

use std::net::Ipv4Addr;

use master::state::CfgServiceLbState;
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

impl Driver {
    /// Install (or replace) a netctl service and its providers on both bridges.
    pub async fn apply_service(&self, state: &CfgServiceLbState) -> Result<()> {
        let (spec, providers) = agent_service(state)?;
        self.install_service(&state.id, &spec, &providers).await
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
}
