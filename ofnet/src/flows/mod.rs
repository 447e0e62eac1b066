//! Flow builders shared by the bridge datapaths. Each returns flows as values, built through a
//! [`crate::pipeline::Table`] so they are checked against the pipeline; nothing here talks to
//! a switch.
//!
//! - this module: the input table, port classification (with optional VLAN push and DSCP
//!   marking), destination-group lookup, cookie categories.
//! - [`policy`]: policy rules to table-5 flows.

pub mod policy;

use crate::metadata;
use crate::model::{Bandwidth, Endpoint};
use crate::pipeline::{PipelineError, Table};
use crate::priority;
use ofctrl::{Flow, Meter};
use ofproto::action::Action;
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::oxm::{FieldId, Oxm};
use ofproto::port::OFPP_CONTROLLER;

/// Cookie categories: which kind of object a flow belongs to (visible in `dump-flows`).
pub mod category {
    pub const INPUT: u8 = 1;
    pub const LOCAL_ENDPOINT: u8 = 2;
    pub const REMOTE_ENDPOINT: u8 = 3;
    pub const UPLINK: u8 = 4;
    pub const VTEP: u8 = 5;
    pub const NETWORK: u8 = 6;
    pub const POLICY: u8 = 7;
    /// Service load balancing (object = hash of the service name).
    pub const SERVICE: u8 = 8;
}

/// A stable 40-bit cookie object for a string id (FNV-1a).
pub fn object_of(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h & ofctrl::Cookie::MAX_OBJECT
}

/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const NO_BUFFER: u16 = 0xffff;
/// Ethertypes.
pub const ETH_IPV4: u16 = 0x0800;
pub const ETH_IPV6: u16 = 0x86dd;
pub const ETH_ARP: u16 = 0x0806;
pub const ETH_8021Q: u16 = 0x8100;
/// `OFPVID_PRESENT`.
pub const VID_PRESENT: u16 = 0x1000;

/// Push an 802.1Q tag carrying `vlan`.
pub fn push_vlan(vlan: u16) -> [Action; 2] {
    [
        Action::PushVlan(ETH_8021Q),
        Action::set_field(Oxm::int(
            FieldId::VLAN_VID,
            u128::from(VID_PRESENT | vlan),
            None,
        )),
    ]
}

/// Set the tunnel id (the VNI) for output to a VTEP.
pub fn set_tun_id(vni: u32) -> Action {
    Action::set_field(Oxm::int(FieldId::TUNNEL_ID, u128::from(vni), None))
}

/// Input table: drop multicast sources (VXLAN only) and punt ARP requests in proxy mode.
pub fn input(
    table: Table,
    drop_multicast_src: bool,
    arp_proxy: bool,
) -> Result<Vec<Flow>, PipelineError> {
    let mut out = Vec::new();
    if drop_multicast_src {
        let mc = [1, 0, 0, 0, 0, 0];
        out.push(table.flow(priority::MATCH, Match::new().eth_src(mc, Some(mc)), vec![])?);
    }
    if arp_proxy {
        out.push(table.flow(
            priority::MATCH,
            Match::new().eth_type(ETH_ARP).arp_op(1),
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: OFPP_CONTROLLER.into(),
                max_len: NO_BUFFER,
            }])],
        )?);
    }
    Ok(out
        .into_iter()
        .map(|f| f.owned_by(category::INPUT, 0))
        .collect())
}

/// A local endpoint's bandwidth limit: the meter (its id is the endpoint's OpenFlow port, unique
/// on the bridge) and the input-table flow sending everything the port receives through it
/// before the rest of the pipeline. OVS's userspace datapath enforces meters, not the
/// interface's `ingress_policing_rate`.
pub fn meter_input(
    table: Table,
    port: u32,
    bw: Bandwidth,
    next: u8,
) -> Result<(Flow, Meter), PipelineError> {
    let flow = table
        .flow(
            priority::METER,
            Match::new().in_port(port),
            vec![Instruction::Meter(port), Instruction::GotoTable(next)],
        )?
        .owned_by(category::LOCAL_ENDPOINT, u64::from(port));
    Ok((flow, Meter::drop_above(port, bw.rate_kbps, bw.burst_kbit)))
}

/// How a local endpoint's packets are classified in table 1.
#[derive(Debug, Clone, Copy)]
pub struct PortClass {
    pub port: u32,
    pub vrf_id: u8,
    pub epg: u16,
    /// VLAN to push (VXLAN bridge); `None` when the access port already implies it.
    pub push_vlan: Option<u16>,
    pub dscp: u8,
    /// Where classified packets continue.
    pub next: u8,
}

/// Table-1 flows of a local endpoint: the port flow, and the IPv4/IPv6 DSCP-marking flows
/// above it when the endpoint has a DSCP.
pub fn port_class(table: Table, c: &PortClass) -> Result<Vec<Flow>, PipelineError> {
    let tail = |pre: Vec<Action>| -> Vec<Instruction> {
        let mut actions = pre;
        if let Some(v) = c.push_vlan {
            actions.extend(push_vlan(v));
        }
        let mut ins = Vec::new();
        if !actions.is_empty() {
            ins.push(Instruction::ApplyActions(actions));
        }
        ins.push(Instruction::WriteMetadata {
            metadata: metadata::vrf(c.vrf_id) | metadata::src_epg(c.epg),
            mask: metadata::PORT_MASK,
        });
        ins.push(Instruction::GotoTable(c.next));
        ins
    };
    let object = u64::from(c.port);
    let mut out = vec![
        table
            .flow(
                priority::PORT_VLAN,
                Match::new().in_port(c.port),
                tail(vec![]),
            )?
            .owned_by(category::LOCAL_ENDPOINT, object),
    ];
    if c.dscp != 0 {
        for eth in [ETH_IPV4, ETH_IPV6] {
            let mark =
                Action::set_field(Oxm::int(FieldId::IP_DSCP, u128::from(c.dscp & 0x3f), None));
            out.push(
                table
                    .flow(
                        priority::MATCH,
                        Match::new().in_port(c.port).eth_type(eth),
                        tail(vec![mark]),
                    )?
                    .owned_by(category::LOCAL_ENDPOINT, object),
            );
        }
    }
    Ok(out)
}

/// Table-4 flows of an endpoint (local or remote) in VRF `vrf_id`: its addresses, in that
/// VRF, get its group as destination group.
pub fn dst_group(
    table: Table,
    ep: &Endpoint,
    vrf_id: u8,
    next: u8,
) -> Result<Vec<Flow>, PipelineError> {
    let ins = vec![
        Instruction::WriteMetadata {
            metadata: metadata::dst_epg(ep.endpoint_group),
            mask: metadata::DST_EPG_MASK,
        },
        Instruction::GotoTable(next),
    ];
    let vrf = Some(metadata::VRF_MASK);
    let (cat, object) = if ep.is_local() {
        (category::LOCAL_ENDPOINT, u64::from(ep.port_no))
    } else {
        (category::REMOTE_ENDPOINT, object_of(&ep.endpoint_id))
    };
    let mut out = Vec::new();
    if let Some(a) = ep.ip_addr {
        let m = Match::new()
            .eth_type(ETH_IPV4)
            .metadata(metadata::vrf(vrf_id), vrf)
            .ipv4_dst(a, None);
        out.push(
            table
                .flow(priority::MATCH, m, ins.clone())?
                .owned_by(cat, object),
        );
    }
    if let Some(a) = ep.ipv6_addr {
        let m = Match::new()
            .eth_type(ETH_IPV6)
            .metadata(metadata::vrf(vrf_id), vrf)
            .ipv6_dst(a, None);
        out.push(table.flow(priority::MATCH, m, ins)?.owned_by(cat, object));
    }
    Ok(out)
}

/// A flow that just continues in `next` (uplink ingress skipping policy, for instance).
pub fn goto(table: Table, priority: u16, m: Match, next: u8) -> Result<Flow, PipelineError> {
    table.flow(priority, m, vec![Instruction::GotoTable(next)])
}
