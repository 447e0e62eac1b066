//! Service statistics in netplugin's `GET /svcstats` shape, filled from the flow statistics of
//! the per-provider forward flows of table 3 (client → provider) and reply flows of table 6
//! (provider → client), see [`super::flows`].
//!
//! Shape (reference field names): `{ "<client ip>": {EndpointIP, VrfName, PortStats,
//! SvcStats: { "<vip>:<svc port>/<TCP|UDP>": {ServiceIP, ServiceVRF, Protocol, SvcPort,
//! ProvPort, SvcStats, ProvStats: { "<provider ip>": {ProviderIP, ServiceIP, ServiceVrf,
//! PacketsIn, BytesIn, PacketsOut, BytesOut} }}}}}`. Directions are the client's: `Out` is what
//! the clients sent (forward flow), `In` what they got (reply flow). The reference keyed the
//! top level by client address, as its balancing bound each client to one provider; connections
//! are now balanced in the switch without any per-client state, so the top level is keyed by
//! the service's VIP (`EndpointIP` is the VIP, `PortStats` zero) and sums all clients. The
//! reference keyed `SvcStats` by the VIP alone, so a service with two ports showed one; here
//! every port has its own entry.

use super::{ServiceProtocol, Services};
use ofproto::matches::Match;
use ofproto::multipart::FlowStats;
use ofproto::nxm;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

/// The key of a service port in `SvcStats`: `10.254.0.10:80/TCP`, `[fd00::10]:80/TCP`.
pub fn port_key(vip: impl Into<IpAddr>, protocol: ServiceProtocol, svc_port: u16) -> String {
    let at = std::net::SocketAddr::new(vip.into(), svc_port);
    format!("{at}/{}", protocol.name())
}

/// (provider, VIP, IP protocol, service port) of a forward or reply flow's match.
type FlowId = (Ipv4Addr, IpAddr, u8, u16);

fn flow_id(m: &Match) -> Option<FlowId> {
    let provider = Ipv4Addr::from(m.get(nxm::CT_MARK)?.value_u128() as u32);
    let vip = match m.get(nxm::CT_NW_DST) {
        Some(v4) => IpAddr::V4(Ipv4Addr::from(v4.value_u128() as u32)),
        None => IpAddr::V6(Ipv6Addr::from(m.get(nxm::CT_IPV6_DST)?.value_u128())),
    };
    let proto = m.get(nxm::CT_NW_PROTO)?.value_u128() as u8;
    let port = m.get(nxm::CT_TP_DST)?.value_u128() as u16;
    Some((provider, vip, proto, port))
}

fn counters(entries: &[FlowStats]) -> HashMap<FlowId, (u64, u64)> {
    entries
        .iter()
        .filter_map(|f| Some((flow_id(&f.matching)?, (f.packet_count, f.byte_count))))
        .collect()
}

/// Fill the shape for every service of `services`, one entry per VIP (both of a dual-stack
/// service) summing all clients;
/// `dnat` and `snat` are the flow statistics of tables 3 (forward flows: what clients sent to
/// a provider) and 6 (reply flows: what a provider sent back), empty when no switch answered
/// (every counter is then 0).
pub fn collect(services: &Services, dnat: &[FlowStats], snat: &[FlowStats]) -> ServiceStats {
    let dnat = counters(dnat);
    let snat = counters(snat);
    let mut out = ServiceStats::default();
    for (_, svc) in services.iter() {
        let Some(spec) = svc.active_spec() else {
            continue;
        };
        for vip_ip in spec.vips() {
            let vip = vip_ip.to_string();
            let ep = out
                .0
                .entry(vip.clone())
                .or_insert_with(|| EndpointServiceStats {
                    endpoint_ip: vip.clone(),
                    ..EndpointServiceStats::default()
                });
            for port in &spec.ports {
                let proto = port.protocol.ip_proto();
                let entry = ep
                    .svc_stats
                    .entry(port_key(vip_ip, port.protocol, port.svc_port))
                    .or_insert_with(|| ClientServiceStats {
                        service_ip: vip.clone(),
                        protocol: port.protocol.name().to_string(),
                        svc_port: port.svc_port.to_string(),
                        prov_port: port.prov_port.to_string(),
                        ..ClientServiceStats::default()
                    });
                for provider in &svc.providers {
                    let id = (*provider, vip_ip, proto, port.svc_port);
                    let (po, bo) = dnat.get(&id).copied().unwrap_or_default();
                    let (pi, bi) = snat.get(&id).copied().unwrap_or_default();
                    let stats = DatapathStats {
                        packets_in: pi,
                        bytes_in: bi,
                        packets_out: po,
                        bytes_out: bo,
                    };
                    entry.svc_stats.add(&stats);
                    entry.prov_stats.insert(
                        provider.to_string(),
                        ProviderStats {
                            provider_ip: provider.to_string(),
                            service_ip: vip.clone(),
                            stats,
                            ..ProviderStats::default()
                        },
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fixtures::{VIP, web_spec};
    use crate::service::flows::ct;
    use ofproto::oxm::Oxm;

    const PROVIDER: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 11);

    fn flow(table_id: u8, reply: bool, packets: u64) -> FlowStats {
        let m = Match::new()
            .ct_state(
                if reply { ct::TRK | ct::RPL } else { ct::TRK },
                Some(ct::TRK | ct::RPL | ct::INV),
            )
            .ct_mark(u32::from(PROVIDER), None)
            .with(Oxm::int(nxm::CT_NW_DST, u128::from(u32::from(VIP)), None))
            .with(Oxm::int(nxm::CT_NW_PROTO, 6, None))
            .with(Oxm::int(nxm::CT_TP_DST, 80, None))
            .eth_type(0x0800);
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
    fn forward_counts_are_out_reply_counts_are_in_per_provider_and_port() {
        let mut s = Services::default();
        s.set_spec("web", web_spec()).unwrap();
        s.set_providers("web", [PROVIDER]);
        let stats = collect(&s, &[flow(3, false, 5)], &[flow(6, true, 4)]);
        let ep = &stats.0["10.254.0.10"];
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
        let prov = &json["10.254.0.10"]["SvcStats"]["10.254.0.10:80/TCP"]["ProvStats"]["10.1.1.11"];
        assert_eq!(
            prov,
            &serde_json::json!({"ProviderIP": "10.1.1.11", "ServiceIP": "10.254.0.10",
                "ServiceVrf": "", "PacketsIn": 4, "BytesIn": 400, "PacketsOut": 5,
                "BytesOut": 500})
        );
        let mut merged = ServiceStats::default();
        merged.merge(stats.clone());
        merged.merge(ServiceStats::default());
        assert_eq!(merged, stats);
    }
}
