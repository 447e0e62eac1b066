//! The flows of a service, as values built through the pipeline's tables 3 and 6, and the
//! packet-out that re-injects a client's first packet.
//!
//! - watch (table 3, priority 10): per protocol in use, `ip,nw_dst=<vip>,nw_proto=6|17` → the
//!   controller (whole packet): the first packet of a client without an assignment;
//! - DNAT (table 3, priority 100), per assignment and service port:
//!   `nw_src=<client>,nw_dst=<vip>,nw_proto,tp_dst=<svc_port>` → `nw_dst=<provider>`,
//!   `tp_dst=<prov_port>`, `eth_dst=<provider MAC>` when the provider is a known endpoint in
//!   the client's VRF; continue in 4 (destination group of the provider, then policy);
//! - SNAT (table 6, priority 100), the reverse: `nw_src=<provider>,nw_dst=<client>,nw_proto,
//!   tp_src=<prov_port>` → `nw_src=<vip>`, `tp_src=<svc_port>`; continue in 9.
//!
//! Every flow carries cookie category [`category::SERVICE`] with the service name's hash.
//!
//! The first packet is re-injected with the DNAT rewrite applied *in the packet-out* and
//! `output:TABLE` from its original port: it then runs the pipeline with the provider as its
//! destination, so it can never match a watch flow again (no loop, whatever the flows on the
//! switch are at that moment), and it meets the same destination-group and policy flows as the
//! packets the DNAT flow rewrites.

use super::{Assignment, ServicePort, ServiceProtocol, ServiceSpec};
use crate::flows::{ETH_IPV4, NO_BUFFER, category, object_of};
use crate::pipeline::{PipelineError, Table};
use crate::priority;
use ofctrl::Flow;
use ofproto::action::Action;
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::oxm::{FieldId, Oxm};
use ofproto::port::{OFPP_CONTROLLER, OFPP_TABLE};
use std::net::Ipv4Addr;

/// The watch flows of an active service (table 3).
pub fn watch(table: Table, name: &str, spec: &ServiceSpec) -> Result<Vec<Flow>, PipelineError> {
    spec.protocols()
        .into_iter()
        .map(|proto| {
            let m = Match::new()
                .eth_type(ETH_IPV4)
                .ipv4_dst(spec.vip, None)
                .ip_proto(proto.ip_proto());
            let to_controller = Action::Output {
                port: OFPP_CONTROLLER.into(),
                max_len: NO_BUFFER,
            };
            Ok(table
                .flow(
                    priority::SERVICE_WATCH,
                    m,
                    vec![Instruction::ApplyActions(vec![to_controller])],
                )?
                .owned_by(category::SERVICE, object_of(name)))
        })
        .collect()
}

fn port_oxm(proto: ServiceProtocol, dst: bool, port: u16) -> Oxm {
    let field = match (proto, dst) {
        (ServiceProtocol::Tcp, true) => FieldId::TCP_DST,
        (ServiceProtocol::Tcp, false) => FieldId::TCP_SRC,
        (ServiceProtocol::Udp, true) => FieldId::UDP_DST,
        (ServiceProtocol::Udp, false) => FieldId::UDP_SRC,
    };
    Oxm::int(field, u128::from(port), None)
}

/// The rewrite client → provider of one service port: what the DNAT flow and the first
/// packet's packet-out apply.
pub fn dnat_actions(
    port: &ServicePort,
    provider: Ipv4Addr,
    provider_mac: Option<[u8; 6]>,
) -> Vec<Action> {
    let mut actions = vec![
        Action::set_field(Oxm::int(
            FieldId::IPV4_DST,
            u128::from(u32::from(provider)),
            None,
        )),
        Action::set_field(port_oxm(port.protocol, true, port.prov_port)),
    ];
    if let Some(mac) = provider_mac {
        actions.push(Action::set_field(Oxm::int(
            FieldId::ETH_DST,
            u128::from(u64::from_be_bytes([
                0, 0, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5],
            ])),
            None,
        )));
    }
    actions
}

/// What one client's assignment needs, per service port: the DNAT flow in `dnat` (continuing
/// in `dnat_next`) and the SNAT flow in `snat` (continuing in `snat_next`).
#[derive(Debug, Clone, Copy)]
pub struct ClientFlows<'a> {
    pub name: &'a str,
    pub spec: &'a ServiceSpec,
    pub client: Ipv4Addr,
    pub assignment: &'a Assignment,
    pub provider_mac: Option<[u8; 6]>,
}

impl ClientFlows<'_> {
    pub fn build(
        &self,
        dnat: Table,
        dnat_next: u8,
        snat: Table,
        snat_next: u8,
    ) -> Result<Vec<Flow>, PipelineError> {
        let object = object_of(self.name);
        let provider = self.assignment.provider;
        let mut out = Vec::with_capacity(self.spec.ports.len() * 2);
        for port in &self.spec.ports {
            let proto = port.protocol;
            let to_provider = Match::new()
                .eth_type(ETH_IPV4)
                .ipv4_src(self.client, None)
                .ipv4_dst(self.spec.vip, None)
                .ip_proto(proto.ip_proto())
                .with(port_oxm(proto, true, port.svc_port));
            out.push(
                dnat.flow(
                    priority::MATCH,
                    to_provider,
                    vec![
                        Instruction::ApplyActions(dnat_actions(port, provider, self.provider_mac)),
                        Instruction::GotoTable(dnat_next),
                    ],
                )?
                .owned_by(category::SERVICE, object),
            );
            let to_client = Match::new()
                .eth_type(ETH_IPV4)
                .ipv4_src(provider, None)
                .ipv4_dst(self.client, None)
                .ip_proto(proto.ip_proto())
                .with(port_oxm(proto, false, port.prov_port));
            let back = vec![
                Action::set_field(Oxm::int(
                    FieldId::IPV4_SRC,
                    u128::from(u32::from(self.spec.vip)),
                    None,
                )),
                Action::set_field(port_oxm(proto, false, port.svc_port)),
            ];
            out.push(
                snat.flow(
                    priority::MATCH,
                    to_client,
                    vec![
                        Instruction::ApplyActions(back),
                        Instruction::GotoTable(snat_next),
                    ],
                )?
                .owned_by(category::SERVICE, object),
            );
        }
        Ok(out)
    }
}

/// The packet-out actions re-injecting a client's first packet to `port` of the service: the
/// DNAT rewrite, then the pipeline from table 0 (see the module documentation).
pub fn reinject_actions(
    port: &ServicePort,
    provider: Ipv4Addr,
    provider_mac: Option<[u8; 6]>,
) -> Vec<Action> {
    let mut actions = dnat_actions(port, provider, provider_mac);
    actions.push(Action::output(OFPP_TABLE));
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{VLAN_PIPELINE, VXLAN_PIPELINE, id};
    use crate::text;

    use crate::fixtures::web_spec as spec;

    #[test]
    fn watch_flows_one_per_protocol() {
        let t = VLAN_PIPELINE.table(id::SERVICE_DNAT).unwrap();
        let mut s = spec();
        s.ports.push(ServicePort {
            protocol: ServiceProtocol::Tcp,
            svc_port: 443,
            prov_port: 8443,
        });
        let lines: Vec<String> = watch(t, "web", &s)
            .unwrap()
            .iter()
            .map(text::flow)
            .collect();
        assert_eq!(
            lines,
            vec![
                "table=3, priority=10,tcp,nw_dst=10.254.0.10 actions=CONTROLLER:65535",
                "table=3, priority=10,udp,nw_dst=10.254.0.10 actions=CONTROLLER:65535",
            ]
        );
    }

    #[test]
    fn client_flows_rewrite_both_ways_per_port() {
        for p in [&VLAN_PIPELINE, &VXLAN_PIPELINE] {
            let a = Assignment {
                provider: Ipv4Addr::new(10, 1, 1, 11),
                vrf: "t".into(),
            };
            let s = spec();
            let c = ClientFlows {
                name: "web",
                spec: &s,
                client: Ipv4Addr::new(10, 1, 1, 2),
                assignment: &a,
                provider_mac: Some([2, 2, 10, 1, 1, 11]),
            };
            let flows = c
                .build(
                    p.table(id::SERVICE_DNAT).unwrap(),
                    id::DST_GROUP,
                    p.table(id::SERVICE_SNAT).unwrap(),
                    id::MAC_DEST,
                )
                .unwrap();
            assert!(flows.iter().all(|f| f.category == category::SERVICE));
            let lines: Vec<String> = flows.iter().map(text::flow).collect();
            assert_eq!(
                lines,
                vec![
                    "table=3, priority=100,tcp,nw_src=10.1.1.2,nw_dst=10.254.0.10,tp_dst=80 actions=set_field:10.1.1.11->ip_dst,set_field:8080->tcp_dst,set_field:02:02:0a:01:01:0b->eth_dst,goto_table:4",
                    "table=6, priority=100,tcp,nw_src=10.1.1.11,nw_dst=10.1.1.2,tp_src=8080 actions=set_field:10.254.0.10->ip_src,set_field:80->tcp_src,goto_table:9",
                    "table=3, priority=100,udp,nw_src=10.1.1.2,nw_dst=10.254.0.10,tp_dst=53 actions=set_field:10.1.1.11->ip_dst,set_field:5353->udp_dst,set_field:02:02:0a:01:01:0b->eth_dst,goto_table:4",
                    "table=6, priority=100,udp,nw_src=10.1.1.11,nw_dst=10.1.1.2,tp_src=5353 actions=set_field:10.254.0.10->ip_src,set_field:53->udp_src,goto_table:9",
                ],
                "{}",
                p.name
            );
        }
    }

    #[test]
    fn unknown_provider_mac_leaves_eth_dst_alone_and_reinjection_ends_in_table() {
        let port = spec().ports[0];
        let actions = reinject_actions(&port, Ipv4Addr::new(10, 1, 1, 11), None);
        assert_eq!(actions.len(), 3);
        assert_eq!(actions.last(), Some(&Action::output(OFPP_TABLE)));
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::SetField(o) if o.field == FieldId::ETH_DST))
        );
    }
}
