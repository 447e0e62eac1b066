//! Service statistics in netplugin's `GET /svcstats` shape, filled from the flow statistics of
//! tables 3 (DNAT: client → provider) and 6 (SNAT: provider → client) and the clients' port
//! counters.
//!
//! Shape (reference field names): `{ "<client ip>": {EndpointIP, VrfName, PortStats,
//! SvcStats: { "<vip>:<svc port>/<TCP|UDP>": {ServiceIP, ServiceVRF, Protocol, SvcPort,
//! ProvPort, SvcStats, ProvStats: { "<provider ip>": {ProviderIP, ServiceIP, ServiceVrf,
//! PacketsIn, BytesIn, PacketsOut, BytesOut} }}}}}`. Directions are the client's: `Out` is what
//! the client sent (DNAT flow, port receive counters), `In` what it got (SNAT flow, port
//! transmit counters). The reference keyed `SvcStats` by the VIP alone, so a service with two
//! ports showed one; here every port has its own entry.

use super::{ServiceProtocol, Services};
use crate::epdb::EndpointTable;
use ofproto::matches::Match;
use ofproto::multipart::{FlowStats, PortStats};
use ofproto::oxm::FieldId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

/// Packet and byte counters, both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatapathStats {
    #[serde(rename = "PacketsIn")]
    pub packets_in: u64,
    #[serde(rename = "BytesIn")]
    pub bytes_in: u64,
    #[serde(rename = "PacketsOut")]
    pub packets_out: u64,
    #[serde(rename = "BytesOut")]
    pub bytes_out: u64,
}

impl DatapathStats {
    fn add(&mut self, o: &DatapathStats) {
        self.packets_in += o.packets_in;
        self.bytes_in += o.bytes_in;
        self.packets_out += o.packets_out;
        self.bytes_out += o.bytes_out;
    }
}

/// One provider's share of a client's traffic to a service port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderStats {
    #[serde(rename = "ProviderIP")]
    pub provider_ip: String,
    #[serde(rename = "ServiceIP")]
    pub service_ip: String,
    #[serde(rename = "ServiceVrf")]
    pub service_vrf: String,
    #[serde(flatten)]
    pub stats: DatapathStats,
}

/// A client's traffic to one service port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientServiceStats {
    #[serde(rename = "ServiceIP")]
    pub service_ip: String,
    #[serde(rename = "ServiceVRF")]
    pub service_vrf: String,
    #[serde(rename = "Protocol")]
    pub protocol: String,
    #[serde(rename = "SvcPort")]
    pub svc_port: String,
    #[serde(rename = "ProvPort")]
    pub prov_port: String,
    /// Sum over the providers.
    #[serde(rename = "SvcStats")]
    pub svc_stats: DatapathStats,
    #[serde(rename = "ProvStats")]
    pub prov_stats: BTreeMap<String, ProviderStats>,
}

/// One client endpoint's service traffic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointServiceStats {
    #[serde(rename = "EndpointIP")]
    pub endpoint_ip: String,
    #[serde(rename = "VrfName")]
    pub vrf_name: String,
    /// The endpoint's OpenFlow port counters (all its traffic, not only services').
    #[serde(rename = "PortStats")]
    pub port_stats: DatapathStats,
    #[serde(rename = "SvcStats")]
    pub svc_stats: BTreeMap<String, ClientServiceStats>,
}

/// The `/svcstats` body: by client address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ServiceStats(pub BTreeMap<String, EndpointServiceStats>);

impl ServiceStats {
    /// Add another bridge's statistics (netplugin merges its two bridges). A client never
    /// appears on both; if it did, its service entries are united.
    pub fn merge(&mut self, other: ServiceStats) {
        for (ip, ep) in other.0 {
            match self.0.get_mut(&ip) {
                Some(have) => have.svc_stats.extend(ep.svc_stats),
                None => {
                    self.0.insert(ip, ep);
                }
            }
        }
    }
}

/// The key of a service port in `SvcStats`.
pub fn port_key(vip: Ipv4Addr, protocol: ServiceProtocol, svc_port: u16) -> String {
    format!("{vip}:{svc_port}/{}", protocol.name())
}

/// (source, destination, IP protocol, transport port) of a flow match; the port is the
/// destination port for DNAT flows and the source port for SNAT flows.
type FlowId = (Ipv4Addr, Ipv4Addr, u8, u16);

fn flow_id(m: &Match, dst_port: bool) -> Option<FlowId> {
    let src = m.get(FieldId::IPV4_SRC)?.ipv4()?;
    let dst = m.get(FieldId::IPV4_DST)?.ipv4()?;
    let proto = m.get(FieldId::IP_PROTO)?.value_u128() as u8;
    let field = match (proto, dst_port) {
        (6, true) => FieldId::TCP_DST,
        (6, false) => FieldId::TCP_SRC,
        (_, true) => FieldId::UDP_DST,
        (_, false) => FieldId::UDP_SRC,
    };
    let port = m.get(field)?.value_u128() as u16;
    Some((src, dst, proto, port))
}

fn counters(entries: &[FlowStats], dst_port: bool) -> HashMap<FlowId, (u64, u64)> {
    entries
        .iter()
        .filter_map(|f| {
            Some((
                flow_id(&f.matching, dst_port)?,
                (f.packet_count, f.byte_count),
            ))
        })
        .collect()
}

/// Fill the shape for every client assignment of `services`; `dnat` and `snat` are the flow
/// statistics of tables 3 and 6, `ports` the port counters (empty when no switch answered:
/// every counter is then 0).
pub fn collect(
    services: &Services,
    endpoints: &EndpointTable,
    dnat: &[FlowStats],
    snat: &[FlowStats],
    ports: &[PortStats],
) -> ServiceStats {
    let dnat = counters(dnat, true);
    let snat = counters(snat, false);
    let mut out = ServiceStats::default();
    for (_, svc) in services.iter() {
        let Some(spec) = svc.active_spec() else {
            continue;
        };
        for (client, a) in &svc.clients {
            let ep = out.0.entry(client.to_string()).or_insert_with(|| {
                let port = endpoints
                    .find((*client).into(), &a.vrf)
                    .map(|e| e.port_no)
                    .and_then(|p| ports.iter().find(|s| s.port_no == p));
                EndpointServiceStats {
                    endpoint_ip: client.to_string(),
                    vrf_name: a.vrf.clone(),
                    port_stats: port.map_or_else(DatapathStats::default, |s| DatapathStats {
                        packets_out: s.counters[0],
                        packets_in: s.counters[1],
                        bytes_out: s.counters[2],
                        bytes_in: s.counters[3],
                    }),
                    svc_stats: BTreeMap::new(),
                }
            });
            for port in &spec.ports {
                let proto = port.protocol.ip_proto();
                let (po, bo) = dnat
                    .get(&(*client, spec.vip, proto, port.svc_port))
                    .copied()
                    .unwrap_or_default();
                let (pi, bi) = snat
                    .get(&(a.provider, *client, proto, port.prov_port))
                    .copied()
                    .unwrap_or_default();
                let stats = DatapathStats {
                    packets_in: pi,
                    bytes_in: bi,
                    packets_out: po,
                    bytes_out: bo,
                };
                let entry = ep
                    .svc_stats
                    .entry(port_key(spec.vip, port.protocol, port.svc_port))
                    .or_insert_with(|| ClientServiceStats {
                        service_ip: spec.vip.to_string(),
                        service_vrf: a.vrf.clone(),
                        protocol: port.protocol.name().to_string(),
                        svc_port: port.svc_port.to_string(),
                        prov_port: port.prov_port.to_string(),
                        ..ClientServiceStats::default()
                    });
                entry.svc_stats.add(&stats);
                entry.prov_stats.insert(
                    a.provider.to_string(),
                    ProviderStats {
                        provider_ip: a.provider.to_string(),
                        service_ip: spec.vip.to_string(),
                        service_vrf: a.vrf.clone(),
                        stats,
                    },
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fixtures::{VIP, endpoints, web_spec};

    const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 2);
    const PROVIDER: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 11);

    fn flow(table_id: u8, m: Match, packets: u64) -> FlowStats {
        FlowStats {
            table_id,
            duration_sec: 0,
            duration_nsec: 0,
            priority: 100,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            cookie: 0,
            packet_count: packets,
            byte_count: packets * 100,
            matching: m,
            instructions: Vec::new(),
        }
    }

    #[test]
    fn dnat_counts_are_the_clients_out_snat_counts_its_in_per_port() {
        let t = endpoints(2, &[(3, CLIENT)]);
        let mut s = Services::default();
        s.set_spec("web", web_spec()).unwrap();
        s.set_providers("web", [PROVIDER]);
        s.assign("web", CLIENT, "t1");
        let dnat = vec![flow(
            3,
            Match::new()
                .eth_type(0x0800)
                .ipv4_src(CLIENT, None)
                .ipv4_dst(VIP, None)
                .ip_proto(6)
                .tcp_dst(80),
            5,
        )];
        let snat = vec![flow(
            6,
            Match::new()
                .eth_type(0x0800)
                .ipv4_src(PROVIDER, None)
                .ipv4_dst(CLIENT, None)
                .ip_proto(6)
                .tcp_src(8080),
            4,
        )];
        let ports = vec![PortStats {
            port_no: 3,
            counters: [7, 6, 700, 600, 0, 0, 0, 0, 0, 0, 0, 0],
            duration_sec: 0,
            duration_nsec: 0,
        }];
        let stats = collect(&s, &t, &dnat, &snat, &ports);
        let ep = &stats.0["10.1.1.2"];
        assert_eq!(
            ep.port_stats,
            DatapathStats {
                packets_in: 6,
                bytes_in: 600,
                packets_out: 7,
                bytes_out: 700
            }
        );
        let tcp = &ep.svc_stats["10.254.0.10:80/TCP"];
        let want = DatapathStats {
            packets_in: 4,
            bytes_in: 400,
            packets_out: 5,
            bytes_out: 500,
        };
        assert_eq!(tcp.svc_stats, want);
        assert_eq!(tcp.prov_stats["10.1.1.11"].stats, want);
        assert_eq!(
            ep.svc_stats["10.254.0.10:53/UDP"].svc_stats,
            DatapathStats::default(),
            "a port without traffic has zero counters"
        );
        let json = serde_json::to_value(&stats).unwrap();
        let prov = &json["10.1.1.2"]["SvcStats"]["10.254.0.10:80/TCP"]["ProvStats"]["10.1.1.11"];
        assert_eq!(
            prov,
            &serde_json::json!({"ProviderIP": "10.1.1.11", "ServiceIP": "10.254.0.10",
                "ServiceVrf": "t1", "PacketsIn": 4, "BytesIn": 400, "PacketsOut": 5,
                "BytesOut": 500})
        );
        assert_eq!(
            json["10.1.1.2"]["SvcStats"]["10.254.0.10:80/TCP"]["SvcPort"],
            "80"
        );

        let mut merged = ServiceStats::default();
        merged.merge(stats.clone());
        merged.merge(ServiceStats::default());
        assert_eq!(merged, stats);
    }
}
