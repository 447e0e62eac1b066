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
use std::net::{Ipv4Addr, Ipv6Addr};

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
    /// Kubernetes NetworkPolicy and the stateful policy's shared flows (object: the
    /// conjunction id of a rule's `conj_id` flow, a hash of the match otherwise, 0 shared).
    pub const NETPOL: u8 = 9;
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

/// Input table: drop multicast sources (VXLAN only) and punt ARP requests and neighbour
/// solicitations (except for link-local targets) in proxy mode.
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
        let to_controller = || {
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: OFPP_CONTROLLER.into(),
                max_len: NO_BUFFER,
            }])]
        };
        out.push(table.flow(
            priority::MATCH,
            Match::new().eth_type(ETH_ARP).arp_op(1),
            to_controller(),
        )?);
        // Neighbour solicitations are answered like ARP requests, except for link-local
        // targets, which no agent knows: those follow the normal path.
        let ns = || {
            Match::new()
                .eth_type(ETH_IPV6)
                .ip_proto(PROTO_ICMPV6)
                .icmpv6_type(ND_NS)
        };
        out.push(table.flow(priority::MATCH, ns(), to_controller())?);
        out.push(table.flow(
            priority::ND_LINK_LOCAL,
            ns().with(Oxm::new(
                FieldId::IPV6_ND_TARGET,
                &LINK_LOCAL.0.octets(),
                Some(&LINK_LOCAL.1.octets()),
            )),
            vec![Instruction::GotoTable(table.next_table())],
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
    /// The endpoint's own addresses: anything else it sends is dropped (spoof guard).
    pub mac: [u8; 6],
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    pub vrf_id: u8,
    pub epg: u16,
    /// VLAN to push (VXLAN bridge); `None` when the access port already implies it.
    pub push_vlan: Option<u16>,
    pub dscp: u8,
    /// Where classified packets continue.
    pub next: u8,
}

/// ICMPv6 neighbour solicitation and advertisement.
pub const ND_NS: u8 = 135;
pub const ND_NA: u8 = 136;
/// IP protocol numbers the guard names.
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;

/// `fe80::/10`, the IPv6 link-local prefix.
pub const LINK_LOCAL: (Ipv6Addr, Ipv6Addr) = (
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
    Ipv6Addr::new(0xffc0, 0, 0, 0, 0, 0, 0, 0),
);

/// The modified EUI-64 link-local address a MAC gives (RFC 4291, appendix A): what the
/// kernel of a pod assigns to its interface by default.
pub fn eui64_link_local(mac: [u8; 6]) -> Ipv6Addr {
    let [a, b, c, d, e, f] = mac;
    let w = |hi: u8, lo: u8| u16::from_be_bytes([hi, lo]);
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        w(a ^ 0x02, b),
        w(c, 0xff),
        w(0xfe, d),
        w(e, f),
    )
}

/// Table-1 flows of a local endpoint: classification (VRF, source group, VLAN push, DSCP
/// marking) of what it may send, and the spoof guard that drops the rest.
///
/// | priority | match (all with `in_port`) | action |
/// |---|---|---|
/// | `GUARD_ND` | `dl_src` = own, NA for its own IPv6 or EUI-64 link-local address | classify |
/// | `GUARD_ND_DROP` | any other NA | drop |
/// | `MATCH` | `dl_src` = own and: IPv4 from its address; DHCP from 0.0.0.0; IPv6 from its address, from a link-local address or (NS only) from `::`; ARP with its MAC and address (or 0.0.0.0, a probe) as sender | classify |
/// | `GUARD_DROP` | any other IPv4, IPv6 or ARP | drop |
/// | `PORT_VLAN` | `dl_src` = own, any other ethertype | classify |
/// | `GUARD_PORT_DROP` | anything else (another source MAC) | drop |
pub fn port_class(table: Table, c: &PortClass) -> Result<Vec<Flow>, PipelineError> {
    let tail = |ip: bool| -> Vec<Instruction> {
        let mut actions = Vec::new();
        if ip && c.dscp != 0 {
            actions.push(Action::set_field(Oxm::int(
                FieldId::IP_DSCP,
                u128::from(c.dscp & 0x3f),
                None,
            )));
        }
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
    let port = Match::new().in_port(c.port);
    let own = port.clone().eth_src(c.mac, None);
    let mut rules: Vec<(u16, Match, Vec<Instruction>)> = Vec::new();
    // Neighbour advertisements may only claim the endpoint's own addresses.
    let na = |m: Match| {
        m.eth_type(ETH_IPV6)
            .ip_proto(PROTO_ICMPV6)
            .icmpv6_type(ND_NA)
    };
    let mut na_targets = vec![eui64_link_local(c.mac)];
    na_targets.extend(c.ipv6);
    for t in na_targets {
        rules.push((priority::GUARD_ND, na(own.clone()).nd_target(t), tail(true)));
    }
    rules.push((priority::GUARD_ND_DROP, na(port.clone()), vec![]));
    // Addresses.
    if let Some(a) = c.ipv4 {
        rules.push((
            priority::MATCH,
            own.clone().eth_type(ETH_IPV4).ipv4_src(a, None),
            tail(true),
        ));
    }
    rules.push((
        priority::MATCH,
        own.clone()
            .eth_type(ETH_IPV4)
            .ip_proto(PROTO_UDP)
            .ipv4_src(Ipv4Addr::UNSPECIFIED, None)
            .udp_src(68)
            .udp_dst(67),
        tail(true),
    ));
    if let Some(a) = c.ipv6 {
        rules.push((
            priority::MATCH,
            own.clone().eth_type(ETH_IPV6).ipv6_src(a, None),
            tail(true),
        ));
    }
    rules.push((
        priority::MATCH,
        own.clone()
            .eth_type(ETH_IPV6)
            .ipv6_src(LINK_LOCAL.0, Some(LINK_LOCAL.1)),
        tail(true),
    ));
    rules.push((
        priority::MATCH,
        own.clone()
            .eth_type(ETH_IPV6)
            .ip_proto(PROTO_ICMPV6)
            .ipv6_src(Ipv6Addr::UNSPECIFIED, None)
            .icmpv6_type(ND_NS),
        tail(true),
    ));
    let mut arp_senders = vec![Ipv4Addr::UNSPECIFIED];
    arp_senders.extend(c.ipv4);
    for spa in arp_senders {
        rules.push((
            priority::MATCH,
            own.clone()
                .eth_type(ETH_ARP)
                .arp_spa(spa, None)
                .arp_sha(c.mac),
            tail(false),
        ));
    }
    for eth in [ETH_IPV4, ETH_IPV6, ETH_ARP] {
        rules.push((priority::GUARD_DROP, port.clone().eth_type(eth), vec![]));
    }
    rules.push((priority::PORT_VLAN, own, tail(false)));
    rules.push((priority::GUARD_PORT_DROP, port, vec![]));
    let object = u64::from(c.port);
    rules
        .into_iter()
        .map(|(prio, m, ins)| {
            Ok(table
                .flow(prio, m, ins)?
                .owned_by(category::LOCAL_ENDPOINT, object))
        })
        .collect()
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
