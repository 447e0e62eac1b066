//! The service proxy's part of the agent export (`Datapath.SvcProxy`, reference §5.11):
//! `{Catalogue: {SvcMap: {name: ServiceSpec}, ProvMap: {name: {Providers: {ip: true}}}},
//! OperState: {vip: {Ports, ProvHdl: {provider: {ClientEPs: {client: true}}}}}, EpStats: {}}`.
//! Counters are not part of it (they are polled on demand by `AgentHandle::service_stats`), so
//! `EpStats` is always empty.

use super::{ServicePort, ServiceSpec, Services};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProviderSet {
    pub providers: BTreeMap<String, bool>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Catalogue {
    pub svc_map: BTreeMap<String, ServiceSpec>,
    pub prov_map: BTreeMap<String, ProviderSet>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ProviderClients {
    #[serde(rename = "ClientEPs")]
    pub client_eps: BTreeMap<String, bool>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct OperState {
    pub ports: Vec<ServicePort>,
    pub prov_hdl: BTreeMap<String, ProviderClients>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SvcProxyExport {
    pub catalogue: Catalogue,
    /// Active services, by VIP.
    pub oper_state: BTreeMap<String, OperState>,
    pub ep_stats: BTreeMap<String, serde_json::Value>,
}

/// The export of `services`.
pub fn export(services: &Services) -> SvcProxyExport {
    let mut out = SvcProxyExport::default();
    for (name, svc) in services.iter() {
        if let Some(spec) = &svc.spec {
            out.catalogue.svc_map.insert(name.clone(), spec.clone());
        }
        if !svc.providers.is_empty() {
            out.catalogue.prov_map.insert(
                name.clone(),
                ProviderSet {
                    providers: svc
                        .providers
                        .iter()
                        .map(|p| (p.to_string(), true))
                        .collect(),
                },
            );
        }
        let Some(spec) = svc.active_spec() else {
            continue;
        };
        // Connections are balanced in the switch: no client is bound to a provider, so every
        // provider's `ClientEPs` is empty.
        let prov_hdl: BTreeMap<String, ProviderClients> = svc
            .providers
            .iter()
            .map(|p| (p.to_string(), ProviderClients::default()))
            .collect();
        out.oper_state.insert(
            spec.vip.to_string(),
            OperState {
                ports: spec.ports.clone(),
                prov_hdl,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::ServiceProtocol;
    use std::net::Ipv4Addr;

    #[test]
    fn export_has_the_reference_keys() {
        let mut s = Services::default();
        s.set_spec(
            "web",
            ServiceSpec {
                affinity_timeout: None,
                vip6: None,
                vip: Ipv4Addr::new(10, 254, 0, 10),
                ports: vec![ServicePort {
                    protocol: ServiceProtocol::Udp,
                    svc_port: 53,
                    prov_port: 5353,
                }],
            },
        )
        .unwrap();
        s.set_providers("web", [Ipv4Addr::new(10, 1, 1, 11)]);
        s.set_providers("later", [Ipv4Addr::new(10, 1, 1, 12)]);
        let v = serde_json::to_value(export(&s)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "Catalogue": {
                    "SvcMap": {"web": {"IpAddress": "10.254.0.10",
                        "Ports": [{"Protocol": "UDP", "SvcPort": 53, "ProvPort": 5353}]}},
                    "ProvMap": {"later": {"Providers": {"10.1.1.12": true}},
                                "web": {"Providers": {"10.1.1.11": true}}}
                },
                "OperState": {"10.254.0.10": {
                    "Ports": [{"Protocol": "UDP", "SvcPort": 53, "ProvPort": 5353}],
                    "ProvHdl": {"10.1.1.11": {"ClientEPs": {}}}
                }},
                "EpStats": {}
            })
        );
    }
}
