//! The flows and groups of services, as values built through the pipeline's tables 3
//! (`service_dnat`) and 6 (`service_snat`).
//!
//! Conntrack zone: the VRF id, read from the metadata bits table 1 writes
//! (`zone=OXM_OF_METADATA[32..47]`), so two tenants with the same addresses never share a
//! connection entry.
//!
//! Shared by every service (present while any service has a spec):
//! - table 3 and table 6, priority [`priority::SERVICE_CT`]: `ip,ct_state=-trk` →
//!   `ct(table=<same>,zone=VRF,nat)`: every IPv4 packet is looked up in conntrack once, and a
//!   packet of a connection that was NATted gets its translation (to the provider for the
//!   client's packets, back to the VIP for the replies). Table 3 sees endpoint traffic, table 6
//!   what arrives from a VTEP or an uplink (replies of a provider on another host).
//!
//! Per service port (`i` is its index in the spec; `G` = [`group_id`]):
//! - balance (table 3, [`priority::MATCH`]): `ct_state=+new+trk,<proto>,nw_dst=<vip>,
//!   tp_dst=<svc_port>` → `group:G`, or, with no provider, the reject ([`REJECT_COOKIE_OBJECT`]
//!   sends it to the controller, which answers with a TCP reset or an ICMP port unreachable);
//! - group `G`, `select` (OVS hashes the 5-tuple): one bucket per provider,
//!   `ct(commit,table=3,zone=VRF,nat(dst=<provider>:<prov_port>),exec(set_field:<provider>->ct_mark))`:
//!   the connection is committed with its provider, whose address is also its `ct_mark`;
//! - forward, per provider (table 3, `MATCH`): `ct_state=-rpl-inv+trk,ct_mark=<provider>,
//!   ct_nw_dst=<vip>,ct_nw_proto,ct_tp_dst=<svc_port>,ip` → `eth_dst` of the provider (when the
//!   endpoint DB knows it), continue in 4: every client packet of a connection to a current
//!   provider, the first one included (it comes back from the group's recirculation);
//! - reply, per provider (table 6, `MATCH`): the same with `+rpl`, continue in 9 (it only
//!   counts the replies per provider for `/svcstats`).
//!
//! Per service (table 3, [`priority::SERVICE_DROP`]): `ct_state=-rpl-inv+trk,ct_nw_dst=<vip>,ip`
//! and `ct_state=+trk,ip,nw_dst=<vip>` → drop: packets of connections whose provider left (so
//! they end, while the other providers' connections are untouched), to ports the service does
//! not have, and invalid ones.
//!
//! Every flow and group carries cookie category [`category::SERVICE`]; a service's with the
//! service name's hash, the shared ones with object 0.

use super::{ServicePort, ServiceProtocol, ServiceSpec};
use crate::flows::{ETH_IPV4, NO_BUFFER, category, object_of};
use crate::pipeline::{PipelineError, Table};
use crate::priority;
use ofctrl::{Flow, Group};
use ofproto::action::nicira::{CT_COMMIT, NAT_DST};
use ofproto::action::{Action, Ct, CtZone, Nat, NatRange, NxmHeader, Subfield};
use ofproto::group::{Bucket, GroupType};
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::nxm;
use ofproto::oxm::{FieldId, Oxm};
use ofproto::port::OFPP_CONTROLLER;
use std::net::Ipv4Addr;

/// `ct_state` bits.
pub mod ct {
    pub const NEW: u32 = 0x01;
    pub const EST: u32 = 0x02;
    pub const RPL: u32 = 0x08;
    pub const INV: u32 = 0x10;
    pub const TRK: u32 = 0x20;
    pub const DNAT: u32 = 0x80;
}

/// First id of the service groups (above every flood group id).
pub const GROUP_BASE: u32 = 0x4000_0000;

/// The cookie object of the reject flows (service ports without providers): the agent answers
/// the packets these flows send up.
pub const REJECT_COOKIE_OBJECT: u64 = 0xfe_ffff_ffff;

/// The group of port `port` (index in the spec) of the service with group block `index`.
pub fn group_id(index: u32, port: usize) -> u32 {
    GROUP_BASE | ((index & 0x3f_ffff) << 8) | (port as u32 & 0xff)
}

/// The conntrack zone: the VRF id bits of the metadata.
pub fn zone() -> CtZone {
    CtZone::Field(Subfield {
        field: NxmHeader::of(FieldId::METADATA),
        ofs: 32,
        n_bits: 16,
    })
}

/// The conntrack entry flow of `table` (see the module documentation).
pub fn conntrack_entry(table: Table) -> Result<Flow, PipelineError> {
    let lookup = Action::Ct(Ct {
        flags: 0,
        zone: zone(),
        recirc_table: table.id(),
        alg: 0,
        actions: vec![Action::Nat(Nat::default())],
    });
    Ok(table
        .flow(
            priority::SERVICE_CT,
            Match::new().ct_state(0, Some(ct::TRK)).eth_type(ETH_IPV4),
            vec![Instruction::ApplyActions(vec![lookup])],
        )?
        .owned_by(category::SERVICE, 0))
}

fn port_oxm(proto: ServiceProtocol, port: u16) -> Oxm {
    let field = match proto {
        ServiceProtocol::Tcp => FieldId::TCP_DST,
        ServiceProtocol::Udp => FieldId::UDP_DST,
    };
    Oxm::int(field, u128::from(port), None)
}

/// The connection of a client to `port` of `vip` that conntrack committed with `provider`.
fn connection(vip: Ipv4Addr, port: &ServicePort, provider: Ipv4Addr, reply: bool) -> Match {
    Match::new()
        .ct_state(
            if reply { ct::TRK | ct::RPL } else { ct::TRK },
            Some(ct::TRK | ct::RPL | ct::INV),
        )
        .ct_mark(u32::from(provider), None)
        .with(Oxm::int(nxm::CT_NW_DST, u128::from(u32::from(vip)), None))
        .with(Oxm::int(
            nxm::CT_NW_PROTO,
            u128::from(port.protocol.ip_proto()),
            None,
        ))
        .with(Oxm::int(nxm::CT_TP_DST, u128::from(port.svc_port), None))
        .eth_type(ETH_IPV4)
}

/// The bucket that sends a new connection to `provider`.
pub fn bucket(dnat: Table, port: &ServicePort, provider: Ipv4Addr) -> Bucket {
    let commit = Action::Ct(Ct {
        flags: CT_COMMIT,
        zone: zone(),
        recirc_table: dnat.id(),
        alg: 0,
        actions: vec![
            Action::Nat(Nat {
                flags: NAT_DST,
                range: NatRange {
                    ipv4_min: Some(provider),
                    proto_min: Some(port.prov_port),
                    ..NatRange::default()
                },
            }),
            Action::set_field(Oxm::int(
                nxm::CT_MARK,
                u128::from(u32::from(provider)),
                None,
            )),
        ],
    });
    Bucket {
        weight: 1,
        ..Bucket::new(vec![commit])
    }
}

/// One service's flows and groups: its spec, its group block, and its providers with their MAC
/// when the endpoint DB knows it.
#[derive(Debug, Clone, Copy)]
pub struct ServiceFlows<'a> {
    pub name: &'a str,
    pub spec: &'a ServiceSpec,
    pub index: u32,
    pub providers: &'a [(Ipv4Addr, Option<[u8; 6]>)],
}

impl ServiceFlows<'_> {
    /// The flows and groups (see the module documentation); `dnat_next` and `snat_next` are
    /// where the forward and reply flows continue.
    pub fn build(
        &self,
        dnat: Table,
        dnat_next: u8,
        snat: Table,
        snat_next: u8,
    ) -> Result<(Vec<Flow>, Vec<Group>), PipelineError> {
        let object = object_of(self.name);
        let vip = self.spec.vip;
        let mut flows = Vec::new();
        let mut groups = Vec::new();
        for (i, port) in self.spec.ports.iter().enumerate() {
            let new_conn = Match::new()
                .ct_state(ct::NEW | ct::TRK, Some(ct::NEW | ct::TRK))
                .eth_type(ETH_IPV4)
                .ipv4_dst(vip, None)
                .ip_proto(port.protocol.ip_proto())
                .with(port_oxm(port.protocol, port.svc_port));
            if self.providers.is_empty() {
                let up = Action::Output {
                    port: OFPP_CONTROLLER.into(),
                    max_len: NO_BUFFER,
                };
                flows.push(
                    dnat.flow(
                        priority::MATCH,
                        new_conn,
                        vec![Instruction::ApplyActions(vec![up])],
                    )?
                    .owned_by(category::SERVICE, REJECT_COOKIE_OBJECT),
                );
                continue;
            }
            let gid = group_id(self.index, i);
            groups.push(Group {
                id: gid,
                group_type: GroupType::Select,
                buckets: self
                    .providers
                    .iter()
                    .map(|(p, _)| bucket(dnat, port, *p))
                    .collect(),
            });
            flows.push(
                dnat.flow(
                    priority::MATCH,
                    new_conn,
                    vec![Instruction::ApplyActions(vec![Action::Group(gid)])],
                )?
                .owned_by(category::SERVICE, object),
            );
            for (p, mac) in self.providers {
                let mut to_provider = Vec::new();
                if let Some(mac) = mac {
                    to_provider.push(Instruction::ApplyActions(vec![Action::set_field(
                        Oxm::new(FieldId::ETH_DST, mac, None),
                    )]));
                }
                to_provider.push(Instruction::GotoTable(dnat_next));
                flows.push(
                    dnat.flow(
                        priority::MATCH,
                        connection(vip, port, *p, false),
                        to_provider,
                    )?
                    .owned_by(category::SERVICE, object),
                );
                flows.push(
                    snat.flow(
                        priority::MATCH,
                        connection(vip, port, *p, true),
                        vec![Instruction::GotoTable(snat_next)],
                    )?
                    .owned_by(category::SERVICE, object),
                );
            }
        }
        let stale = Match::new()
            .ct_state(ct::TRK, Some(ct::TRK | ct::RPL | ct::INV))
            .with(Oxm::int(nxm::CT_NW_DST, u128::from(u32::from(vip)), None))
            .eth_type(ETH_IPV4);
        let to_vip = Match::new()
            .ct_state(ct::TRK, Some(ct::TRK))
            .eth_type(ETH_IPV4)
            .ipv4_dst(vip, None);
        for m in [stale, to_vip] {
            flows.push(
                dnat.flow(priority::SERVICE_DROP, m, Vec::new())?
                    .owned_by(category::SERVICE, object),
            );
        }
        Ok((flows, groups))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::web_spec as spec;
    use crate::pipeline::{VLAN_PIPELINE, VXLAN_PIPELINE, id};
    use crate::text;

    const P1: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 11);

    #[test]
    fn entry_flows_look_every_ipv4_packet_up_in_the_vrf_zone() {
        for (t, n) in [(id::SERVICE_DNAT, 3), (id::SERVICE_SNAT, 6)] {
            let f = conntrack_entry(VLAN_PIPELINE.table(t).unwrap()).unwrap();
            assert_eq!(
                text::flow(&f),
                format!(
                    "table={n}, priority=200,ct_state=-trk,ip actions=ct(table={n},zone=OXM_OF_METADATA[32..47],nat)"
                )
            );
        }
    }

    #[test]
    fn one_group_per_port_forward_and_reply_flows_per_provider() {
        for p in [&VLAN_PIPELINE, &VXLAN_PIPELINE] {
            let s = spec();
            let providers = [
                (P1, Some([2, 2, 10, 1, 1, 11])),
                (Ipv4Addr::new(10, 1, 1, 12), None),
            ];
            let (flows, groups) = ServiceFlows {
                name: "web",
                spec: &s,
                index: 1,
                providers: &providers,
            }
            .build(
                p.table(id::SERVICE_DNAT).unwrap(),
                id::DST_GROUP,
                p.table(id::SERVICE_SNAT).unwrap(),
                id::MAC_DEST,
            )
            .unwrap();
            assert!(flows.iter().all(|f| f.category == category::SERVICE));
            let lines = text::flows(&flows);
            assert_eq!(lines.len(), 2 + 2 * 2 * 2 + 2, "{lines:#?}");
            assert!(lines.contains(&"table=3, priority=100,ct_state=+new+trk,tcp,nw_dst=10.254.0.10,tp_dst=80 actions=group:1073742080".to_string()), "{lines:#?}");
            assert!(lines.contains(&"table=3, priority=100,ct_state=-rpl-inv+trk,ct_mark=0xa01010b,ct_nw_dst=10.254.0.10,ct_nw_proto=6,ct_tp_dst=80,ip actions=set_field:02:02:0a:01:01:0b->eth_dst,goto_table:4".to_string()), "{lines:#?}");
            assert!(lines.contains(&"table=3, priority=100,ct_state=-rpl-inv+trk,ct_mark=0xa01010c,ct_nw_dst=10.254.0.10,ct_nw_proto=17,ct_tp_dst=53,ip actions=goto_table:4".to_string()), "unknown MAC: eth_dst left alone: {lines:#?}");
            assert!(lines.contains(&"table=6, priority=100,ct_state=+rpl-inv+trk,ct_mark=0xa01010b,ct_nw_dst=10.254.0.10,ct_nw_proto=6,ct_tp_dst=80,ip actions=goto_table:9".to_string()), "{lines:#?}");
            assert!(lines.contains(&"table=3, priority=10,ct_state=-rpl-inv+trk,ct_nw_dst=10.254.0.10,ip actions=drop".to_string()), "{lines:#?}");
            assert_eq!(groups.len(), 2);
            assert_eq!(groups[1].id, group_id(1, 1));
            assert_eq!(
                text::group(&groups[0]),
                "group_id=1073742080,type=select,bucket=weight:1,actions=ct(commit,table=3,zone=OXM_OF_METADATA[32..47],nat(dst=10.1.1.11:8080),exec(set_field:0xa01010b->ct_mark)),bucket=weight:1,actions=ct(commit,table=3,zone=OXM_OF_METADATA[32..47],nat(dst=10.1.1.12:8080),exec(set_field:0xa01010c->ct_mark))"
            );
        }
    }

    #[test]
    fn a_port_without_providers_rejects_through_the_controller() {
        let s = spec();
        let (flows, groups) = ServiceFlows {
            name: "web",
            spec: &s,
            index: 0,
            providers: &[],
        }
        .build(
            VLAN_PIPELINE.table(id::SERVICE_DNAT).unwrap(),
            id::DST_GROUP,
            VLAN_PIPELINE.table(id::SERVICE_SNAT).unwrap(),
            id::MAC_DEST,
        )
        .unwrap();
        assert!(groups.is_empty());
        let lines = text::flows(&flows);
        assert!(lines.contains(&"table=3, priority=100,ct_state=+new+trk,udp,nw_dst=10.254.0.10,tp_dst=53 actions=CONTROLLER:65535".to_string()), "{lines:#?}");
        assert_eq!(lines.len(), 4, "{lines:#?}");
    }

    #[test]
    fn group_ids_do_not_meet_flood_groups_or_each_other() {
        assert!(group_id(0, 0) > crate::datapath::vxlan::flood_chunk_group(0x1fff, 255));
        assert_ne!(group_id(1, 0), group_id(0, 1));
        assert_eq!(group_id(2, 3), 0x4000_0203);
    }
}
