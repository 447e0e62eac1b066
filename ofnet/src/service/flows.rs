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
//!   a UDP port, and any port of a service with session affinity, is balanced instead by a
//!   `multipath` hash over addresses and ports and a commit flow per provider index (see
//!   [`AFFINITY_PROVIDER`] and [`HASHED_PROVIDER`]);
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
use crate::flows::{ETH_IPV4, ETH_IPV6, NO_BUFFER, category, object_of};
use crate::metadata;
use crate::pipeline::{PipelineError, Table};
use crate::priority;
use ofctrl::{Flow, Group};
use ofproto::action::nicira::{CT_COMMIT, NAT_DST, NAT_SRC};
use ofproto::action::nicira::{Learn, Multipath};
use ofproto::action::{Action, Ct, CtZone, Nat, NatRange, NxmHeader, Subfield};
use ofproto::action::{LearnDst, LearnSpec, LearnSrc};
use ofproto::group::{Bucket, GroupType};
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::nxm;
use ofproto::oxm::{FieldId, Oxm};
use ofproto::port::{OFPP_CONTROLLER, OFPP_IN_PORT};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

/// The bit that sets the IPv6 groups of a dual-stack service apart from its IPv4 ones.
pub const GROUP_IPV6: u32 = 0x8000_0000;

/// The group of port `port` (index in the spec) of the service with group block `index`.
pub fn group_id(index: u32, port: usize) -> u32 {
    GROUP_BASE | ((index & 0x3f_ffff) << 8) | (port as u32 & 0xff)
}

/// Register 3, hairpin (a pod reaching a service that selects it): bit 0 a reply to a VIP was
/// looked up in the hairpin zone, bit 1 then in the VRF's zone, bit 2 a packet was SNATed in
/// the hairpin zone; bits 16–31 the hairpin zone, `0x100 | VRF id`, while a lookup runs.
pub const HAIRPIN: FieldId = nxm::reg(3);
const HAIRPIN_LOOKED_UP: u32 = 0x1;
const HAIRPIN_VRF_LOOKED_UP: u32 = 0x2;
const HAIRPIN_SNATTED: u32 = 0x4;

fn hairpin_bit(bit: u32) -> Action {
    Action::RegLoad {
        dst: Subfield {
            field: NxmHeader::of(HAIRPIN),
            ofs: bit.trailing_zeros() as u16,
            n_bits: 1,
        },
        value: 1,
    }
}

/// `reg3` = `value/mask` (hairpin bits).
fn hairpin_is(value: u32, mask: u32) -> Oxm {
    Oxm::int(HAIRPIN, u128::from(value), Some(u128::from(mask)))
}

/// The actions writing the hairpin zone (`0x100 | VRF id`) into `reg3[16..31]`.
fn hairpin_zone_setup() -> [Action; 2] {
    [
        Action::RegMove {
            src: Subfield {
                field: NxmHeader::of(FieldId::METADATA),
                ofs: 32,
                n_bits: 8,
            },
            dst: Subfield {
                field: NxmHeader::of(HAIRPIN),
                ofs: 16,
                n_bits: 8,
            },
        },
        Action::RegLoad {
            dst: Subfield {
                field: NxmHeader::of(HAIRPIN),
                ofs: 24,
                n_bits: 8,
            },
            value: 1,
        },
    ]
}

/// The hairpin conntrack zone: `reg3[16..31]`.
fn hairpin_zone() -> CtZone {
    CtZone::Field(Subfield {
        field: NxmHeader::of(HAIRPIN),
        ofs: 16,
        n_bits: 16,
    })
}

/// The address a provider's own connection to a service it provides comes from (the
/// connection is SNATed to it in the hairpin zone), and where the provider's replies go: never
/// an endpoint's (IPv4 link-local); netplugin makes it a static neighbour of every pod (at
/// [`hairpin_mac`]), so the replies reach the switch whatever the pod's routes. One address for
/// every service makes the hairpin flow one per local endpoint, not one per service port and
/// local provider.
pub const HAIRPIN_SOURCE: Ipv4Addr = Ipv4Addr::new(169, 254, 42, 1);
/// [`HAIRPIN_SOURCE`] for a dual-stack service's IPv6 VIP (a unique local address).
pub const HAIRPIN_SOURCE6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x6861, 0x6972, 0x7069, 0, 0, 0, 1);

/// The source MAC of the packets the hairpin flows send back to a provider.
pub fn hairpin_mac() -> [u8; 6] {
    super::vip_mac(HAIRPIN_SOURCE)
}

/// The hairpin source of `family` (the family of `ip`).
fn hairpin_source_for(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(HAIRPIN_SOURCE),
        IpAddr::V6(_) => IpAddr::V6(HAIRPIN_SOURCE6),
    }
}

/// The shared hairpin flows of `dnat` (present while any service has a spec), per family: a
/// provider's reply to the hairpin source is looked up in the hairpin zone (which undoes the
/// SNAT), then in the VRF's zone (which undoes the DNAT, so it comes from the VIP) and sent back
/// out of its own port, to the MAC it came from; and a packet SNATed in the hairpin zone
/// ([`hairpin_snat`]) goes back out of its own port.
/// `pop_vlan`: the bridge carries its network's local VLAN inside the pipeline (VXLAN), so a
/// packet sent straight back out of an endpoint port loses it first.
pub fn hairpin_shared(dnat: Table, ipv6: bool, pop_vlan: bool) -> Result<Vec<Flow>, PipelineError> {
    let mut out = Vec::new();
    let families: &[IpAddr] = if ipv6 {
        &[IpAddr::V4(HAIRPIN_SOURCE), IpAddr::V6(HAIRPIN_SOURCE6)]
    } else {
        &[IpAddr::V4(HAIRPIN_SOURCE)]
    };
    for &source in families {
        let [mv, ld] = hairpin_zone_setup();
        let lookup = vec![
            hairpin_bit(HAIRPIN_LOOKED_UP),
            mv,
            ld,
            Action::Ct(Ct {
                flags: 0,
                zone: hairpin_zone(),
                recirc_table: dnat.id(),
                alg: 0,
                actions: vec![Action::Nat(Nat::default())],
            }),
        ];
        out.push(
            dnat.flow(
                priority::HAIRPIN_LOOKUP,
                dst_is(Match::new().ct_state(0, Some(ct::TRK)), source),
                vec![Instruction::ApplyActions(lookup)],
            )?
            .owned_by(category::SERVICE, 0),
        );
        let vrf_lookup = Action::Ct(Ct {
            flags: 0,
            zone: zone(),
            recirc_table: dnat.id(),
            alg: 0,
            actions: vec![Action::Nat(Nat::default())],
        });
        out.push(
            dnat.flow(
                priority::HAIRPIN_VRF_LOOKUP,
                Match::new()
                    .with(hairpin_is(
                        HAIRPIN_LOOKED_UP,
                        HAIRPIN_LOOKED_UP | HAIRPIN_VRF_LOOKED_UP,
                    ))
                    .eth_type(eth_type_of(source)),
                vec![Instruction::ApplyActions(vec![
                    hairpin_bit(HAIRPIN_VRF_LOOKED_UP),
                    vrf_lookup,
                ])],
            )?
            .owned_by(category::SERVICE, 0),
        );
        // The reply, translated both ways: back to the MAC it came from.
        let to_sender = vec![
            Action::RegMove {
                src: Subfield {
                    field: NxmHeader::of(FieldId::ETH_SRC),
                    ofs: 0,
                    n_bits: 48,
                },
                dst: Subfield {
                    field: NxmHeader::of(FieldId::ETH_DST),
                    ofs: 0,
                    n_bits: 48,
                },
            },
            Action::set_field(Oxm::new(FieldId::ETH_SRC, &hairpin_mac(), None)),
        ];
        out.push(
            dnat.flow(
                priority::HAIRPIN_OUT,
                tagged(
                    Match::new()
                        .ct_state(ct::TRK | ct::RPL, Some(ct::TRK | ct::RPL | ct::INV))
                        .with(hairpin_is(
                            HAIRPIN_LOOKED_UP | HAIRPIN_VRF_LOOKED_UP,
                            HAIRPIN_LOOKED_UP | HAIRPIN_VRF_LOOKED_UP | HAIRPIN_SNATTED,
                        ))
                        .eth_type(eth_type_of(source)),
                    pop_vlan,
                ),
                vec![Instruction::ApplyActions(back_out(to_sender, pop_vlan))],
            )?
            .owned_by(category::SERVICE, 0),
        );
    }
    out.push(
        dnat.flow(
            priority::HAIRPIN_OUT,
            tagged(
                Match::new().with(hairpin_is(HAIRPIN_SNATTED, HAIRPIN_SNATTED)),
                pop_vlan,
            ),
            vec![Instruction::ApplyActions(back_out(Vec::new(), pop_vlan))],
        )?
        .owned_by(category::SERVICE, 0),
    );
    Ok(out)
}

/// The hairpin flow of a local endpoint in VRF `vrf_id` with address `addr` and MAC `mac`
/// (present while any service has a spec): a packet from it to itself can only be its own
/// connection to a service that balanced it to itself (DNATed in the VRF's zone); it is SNATed
/// to the hairpin source in the hairpin zone (a pod drops a packet from its own address) and
/// sent back out of its port by the shared flow. One per endpoint and family, whatever the
/// services: the provider sees the connection come from [`HAIRPIN_SOURCE`] (or
/// [`HAIRPIN_SOURCE6`]). Above the forward and affinity learn flows
/// ([`priority::HAIRPIN_SNAT`]); policy tables are not crossed (the pod talks to itself).
pub fn hairpin_snat(
    dnat: Table,
    vrf_id: u8,
    addr: IpAddr,
    mac: [u8; 6],
) -> Result<Flow, PipelineError> {
    let snat_to = match hairpin_source_for(addr) {
        IpAddr::V4(a) => NatRange {
            ipv4_min: Some(a),
            ..NatRange::default()
        },
        IpAddr::V6(a) => NatRange {
            ipv6_min: Some(a),
            ..NatRange::default()
        },
    };
    let [mv, ld] = hairpin_zone_setup();
    let actions = vec![
        Action::set_field(Oxm::new(FieldId::ETH_SRC, &hairpin_mac(), None)),
        Action::set_field(Oxm::new(FieldId::ETH_DST, &mac, None)),
        hairpin_bit(HAIRPIN_SNATTED),
        mv,
        ld,
        Action::Ct(Ct {
            flags: CT_COMMIT,
            zone: hairpin_zone(),
            recirc_table: dnat.id(),
            alg: 0,
            actions: vec![Action::Nat(Nat {
                flags: NAT_SRC,
                range: snat_to,
            })],
        }),
    ];
    // In its VRF: two tenants' endpoints on one bridge may have the same address.
    let m = src_is(
        dst_is(
            Match::new()
                .ct_state(ct::TRK, Some(ct::TRK | ct::RPL | ct::INV))
                .metadata(metadata::vrf(vrf_id), Some(metadata::VRF_MASK)),
            addr,
        ),
        addr,
    );
    Ok(dnat
        .flow(
            priority::HAIRPIN_SNAT,
            m,
            vec![Instruction::ApplyActions(actions)],
        )?
        .owned_by(category::SERVICE, 0))
}

/// With `pop_vlan`, `m` also requires the pipeline's VLAN (`pop_vlan` needs one).
fn tagged(m: Match, pop_vlan: bool) -> Match {
    if pop_vlan {
        m.with(Oxm::int(FieldId::VLAN_VID, 0x1000, Some(0x1000)))
    } else {
        m
    }
}

/// `actions`, then out of the ingress port (without the pipeline's VLAN when `pop_vlan`).
fn back_out(mut actions: Vec<Action>, pop_vlan: bool) -> Vec<Action> {
    if pop_vlan {
        actions.push(Action::PopVlan);
    }
    actions.push(Action::output(OFPP_IN_PORT));
    actions
}

/// `match` with the source address `ip`.
fn src_is(m: Match, ip: IpAddr) -> Match {
    match ip {
        IpAddr::V4(a) => m.ipv4_src(a, None),
        IpAddr::V6(a) => m.ipv6_src(a, None),
    }
}

/// The Ethernet type of an address's family.
fn eth_type_of(ip: IpAddr) -> u16 {
    match ip {
        IpAddr::V4(_) => ETH_IPV4,
        IpAddr::V6(_) => ETH_IPV6,
    }
}

/// `match` with the destination address `ip` (and its family's Ethernet type).
fn dst_is(m: Match, ip: IpAddr) -> Match {
    match ip {
        IpAddr::V4(a) => m.eth_type(ETH_IPV4).ipv4_dst(a, None),
        IpAddr::V6(a) => m.eth_type(ETH_IPV6).ipv6_dst(a, None),
    }
}

/// The conntrack original-direction destination `ip` (`ct_nw_dst` or `ct_ipv6_dst`).
fn ct_dst_oxm(ip: IpAddr) -> Oxm {
    match ip {
        IpAddr::V4(a) => Oxm::int(nxm::CT_NW_DST, u128::from(u32::from(a)), None),
        IpAddr::V6(a) => Oxm::int(nxm::CT_IPV6_DST, u128::from(a), None),
    }
}

/// The conntrack zone: the VRF id bits of the metadata.
pub fn zone() -> CtZone {
    CtZone::Field(Subfield {
        field: NxmHeader::of(FieldId::METADATA),
        ofs: 32,
        n_bits: 16,
    })
}

/// The conntrack entry flow of `table` (see the module documentation), for IPv4.
pub fn conntrack_entry(table: Table) -> Result<Flow, PipelineError> {
    conntrack_entry_for(table, ETH_IPV4)
}

/// The conntrack entry flow of `table` for `eth_type` (IPv4, or IPv6 while a dual-stack
/// service exists).
pub fn conntrack_entry_for(table: Table, eth_type: u16) -> Result<Flow, PipelineError> {
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
            Match::new().ct_state(0, Some(ct::TRK)).eth_type(eth_type),
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

/// The connection of a client to `port` of `vip` that conntrack committed with `provider`
/// (named by its IPv4 address, the connection's `ct_mark`, whatever the VIP's family).
fn connection(vip: IpAddr, port: &ServicePort, provider: Ipv4Addr, reply: bool) -> Match {
    connection_in(
        vip,
        port,
        provider,
        if reply { ct::TRK | ct::RPL } else { ct::TRK },
        ct::TRK | ct::RPL | ct::INV,
    )
}

/// [`connection`] in a given `ct_state`.
fn connection_in(
    vip: IpAddr,
    port: &ServicePort,
    provider: Ipv4Addr,
    state: u32,
    mask: u32,
) -> Match {
    Match::new()
        .ct_state(state, Some(mask))
        .ct_mark(u32::from(provider), None)
        .with(ct_dst_oxm(vip))
        .with(Oxm::int(
            nxm::CT_NW_PROTO,
            u128::from(port.protocol.ip_proto()),
            None,
        ))
        .with(Oxm::int(nxm::CT_TP_DST, u128::from(port.svc_port), None))
        .eth_type(eth_type_of(vip))
}

/// Register 0: the provider a client's affinity entry names (table 2 loads it).
///
/// Session affinity (a spec with `affinity_timeout`): the balance flow of each port becomes an
/// affinity lookup (`reg1=0/0x1` → mark looked up, `resubmit(,2)`, `resubmit(,3)`); back in
/// table 3, a client whose entry names a current provider is committed to it (per provider,
/// `MATCH`), any other goes through the group ([`priority::SERVICE_REBALANCE`]); the first
/// packet of every connection then records (or refreshes) the client's entry in table 2 with a
/// `learn` in a flow above the forward flow ([`priority::SERVICE_LEARN`]). (Open vSwitch does
/// not run a `learn` inside a select group's bucket, hence the separate flow.)
pub const AFFINITY_PROVIDER: FieldId = nxm::reg(0);
/// Register 1, bit 0: the affinity table was consulted for this packet.
pub const AFFINITY_LOOKED_UP: FieldId = nxm::reg(1);
/// Register 2: bits 0–15 the index of the provider the multipath hash of a UDP or affinity port
/// chose, bit 16 set once it did.
pub const HASHED_PROVIDER: FieldId = nxm::reg(2);
const HASHED_BIT: u32 = 1 << 16;
/// `NX_HASH_FIELDS_SYMMETRIC_L3L4_UDP`: addresses, protocol and TCP, SCTP *and UDP* ports.
const HASH_L3L4_UDP: u16 = 3;
/// `NX_MP_ALG_MODULO_N`.
const MODULO_N: u16 = 0;

/// Commit a new connection to `provider` (DNAT to `to`, its address in the VIP's family, and
/// its port; `ct_mark` = its IPv4 address) and come back to `dnat`.
fn commit(dnat: Table, port: &ServicePort, provider: Ipv4Addr, to: IpAddr) -> Action {
    let (ipv4_min, ipv6_min) = match to {
        IpAddr::V4(a) => (Some(a), None),
        IpAddr::V6(a) => (None, Some(a)),
    };
    Action::Ct(Ct {
        flags: CT_COMMIT,
        zone: zone(),
        recirc_table: dnat.id(),
        alg: 0,
        actions: vec![
            Action::Nat(Nat {
                flags: NAT_DST,
                range: NatRange {
                    ipv4_min,
                    ipv6_min,
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
    })
}

fn imm(value: u32, n_bits: u16) -> LearnSrc {
    let bytes = value.to_be_bytes();
    let len = 2 * usize::from(n_bits.div_ceil(16));
    LearnSrc::Imm(bytes::Bytes::copy_from_slice(&bytes[4 - len..]))
}

/// An IPv6 address as a 128-bit learn immediate.
fn imm6(value: Ipv6Addr) -> LearnSrc {
    LearnSrc::Imm(bytes::Bytes::copy_from_slice(&value.octets()))
}

fn learn_match(field: FieldId, ofs: u16, n_bits: u16, src: LearnSrc) -> LearnSpec {
    LearnSpec {
        n_bits,
        src,
        dst: LearnDst::Match {
            field: NxmHeader::of(field),
            ofs,
        },
    }
}

fn from_packet(field: FieldId, ofs: u16, n_bits: u16) -> LearnSpec {
    learn_match(
        field,
        ofs,
        n_bits,
        LearnSrc::Field {
            field: NxmHeader::of(field),
            ofs,
        },
    )
}

/// The affinity entry a bucket learns into table `affinity`: this client (in its VRF), to this
/// VIP port, loads `provider` into [`AFFINITY_PROVIDER`]; it goes after `timeout` idle seconds.
fn learn_affinity(
    affinity: u8,
    vip: IpAddr,
    port: &ServicePort,
    provider: Ipv4Addr,
    timeout: u16,
) -> Action {
    let tp_dst = match port.protocol {
        ServiceProtocol::Tcp => FieldId::TCP_DST,
        ServiceProtocol::Udp => FieldId::UDP_DST,
    };
    let (client, to_vip) = match vip {
        IpAddr::V4(v) => (
            from_packet(FieldId::IPV4_SRC, 0, 32),
            learn_match(FieldId::IPV4_DST, 0, 32, imm(u32::from(v), 32)),
        ),
        IpAddr::V6(v) => (
            from_packet(FieldId::IPV6_SRC, 0, 128),
            learn_match(FieldId::IPV6_DST, 0, 128, imm6(v)),
        ),
    };
    Action::Learn(Learn {
        idle_timeout: timeout,
        priority: priority::MATCH,
        table_id: affinity,
        specs: vec![
            learn_match(
                FieldId::ETH_TYPE,
                0,
                16,
                imm(u32::from(eth_type_of(vip)), 16),
            ),
            learn_match(
                FieldId::IP_PROTO,
                0,
                8,
                imm(u32::from(port.protocol.ip_proto()), 8),
            ),
            client,
            to_vip,
            learn_match(tp_dst, 0, 16, imm(u32::from(port.svc_port), 16)),
            from_packet(FieldId::METADATA, 32, 8),
            LearnSpec {
                n_bits: 32,
                src: imm(u32::from(provider), 32),
                dst: LearnDst::Load {
                    field: NxmHeader::of(AFFINITY_PROVIDER),
                    ofs: 0,
                },
            },
        ],
        ..Learn::default()
    })
}

/// The bucket that sends a new connection to `provider` at `to` (its address in the VIP's
/// family).
pub fn bucket(dnat: Table, port: &ServicePort, provider: Ipv4Addr, to: IpAddr) -> Bucket {
    Bucket {
        weight: 1,
        ..Bucket::new(vec![commit(dnat, port, provider, to)])
    }
}

/// A provider as the flows see it: its IPv4 address (its name, and its connections'
/// `ct_mark`), and what the endpoint DB knows of it: its MAC and IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provider {
    pub ip: Ipv4Addr,
    pub mac: Option<[u8; 6]>,
    pub ipv6: Option<Ipv6Addr>,
}

impl Provider {
    /// Its address in the family of `vip`, when it has one.
    fn address_for(&self, vip: IpAddr) -> Option<IpAddr> {
        match vip {
            IpAddr::V4(_) => Some(IpAddr::V4(self.ip)),
            IpAddr::V6(_) => self.ipv6.map(IpAddr::V6),
        }
    }
}

/// One service's flows and groups: its spec, its group block, and its providers.
#[derive(Debug, Clone, Copy)]
pub struct ServiceFlows<'a> {
    pub name: &'a str,
    pub spec: &'a ServiceSpec,
    pub index: u32,
    pub providers: &'a [Provider],
    /// The session affinity table, when the pipeline has one.
    pub affinity_table: Option<u8>,
}

/// The tables a service's flows live in and continue to: `dnat` and where its forward flows
/// go next, `snat` and where its reply flows go next.
#[derive(Debug, Clone, Copy)]
pub struct ServiceTables {
    pub dnat: Table,
    pub dnat_next: u8,
    pub snat: Table,
    pub snat_next: u8,
}

impl ServiceFlows<'_> {
    /// Every flow and group of the service (see the module documentation): [`Self::build_service`]
    /// and [`Self::build_provider`] of each provider. A dual-stack service gets the same flows
    /// and groups for its IPv6 VIP, over the providers whose IPv6 address is known.
    pub fn build(&self, tables: ServiceTables) -> Result<(Vec<Flow>, Vec<Group>), PipelineError> {
        let (mut flows, groups) = self.build_service(tables)?;
        for p in self.providers {
            flows.extend(self.build_provider(p, tables)?);
        }
        Ok((flows, groups))
    }

    /// The flows and groups that depend on the whole set of providers: per port the balance
    /// (or reject) flow, the select group, the hashed commit flows (one per provider index)
    /// and the affinity lookup; per VIP the drops. A provider that comes or goes changes
    /// these and its own [`Self::build_provider`] flows, not the other providers'.
    pub fn build_service(
        &self,
        tables: ServiceTables,
    ) -> Result<(Vec<Flow>, Vec<Group>), PipelineError> {
        let mut flows = Vec::new();
        let mut groups = Vec::new();
        for vip in self.spec.vips() {
            self.service_family(vip, tables, &mut flows, &mut groups)?;
        }
        Ok((flows, groups))
    }

    /// The flows of one provider `p` of the service (whatever [`Self::providers`] holds), for
    /// each VIP it has an address in the family of: per port, the forward and reply flows of
    /// its connections, with session affinity the learn flow and the commit of a client whose
    /// entry names it, and, when it is local and its MAC known, the three hairpin flows.
    pub fn build_provider(
        &self,
        p: &Provider,
        tables: ServiceTables,
    ) -> Result<Vec<Flow>, PipelineError> {
        let mut flows = Vec::new();
        for vip in self.spec.vips() {
            if let Some(to) = p.address_for(vip) {
                self.provider_family(vip, p, to, tables, &mut flows)?;
            }
        }
        Ok(flows)
    }

    /// Session affinity of this service: the affinity table and the entries' idle timeout.
    fn affinity(&self) -> Option<(u8, u16)> {
        self.spec
            .affinity_timeout
            .zip(self.affinity_table)
            .map(|(t, a)| (a, t))
    }

    /// Whether `port` is balanced by a hash the switch computes while it translates, with a
    /// commit flow per provider index, rather than by a select group.
    ///
    /// UDP: OVS's select groups leave UDP ports out of their hash (userspace datapath). With
    /// session affinity, TCP too: the group hashes in the datapath (`dp_hash`), so the cached
    /// datapath flow of an affinity *miss* does not match on the client's source port: the
    /// client's next connection would reuse it, skip the entry the first one just learned (the
    /// cache is refreshed only when the revalidators next run) and be balanced anew. Multipath
    /// reads the ports while the switch translates, so each new connection's miss is translated
    /// afresh and sees the entry.
    fn hashed_in_switch(&self, port: &ServicePort) -> bool {
        port.protocol == ServiceProtocol::Udp || self.affinity().is_some()
    }

    /// The first packet of a new connection to `port` of `vip`, as the balance flows match it
    /// (after the hash, for a hashed port: not yet hashed).
    fn new_connection(&self, vip: IpAddr, port: &ServicePort) -> Match {
        let m = first_packet(vip, port);
        if self.hashed_in_switch(port) {
            m.with(Oxm::int(HASHED_PROVIDER, 0, Some(u128::from(HASHED_BIT))))
        } else {
            m
        }
    }

    /// A flow committing the new connections `m` selects to provider `p` at `to`.
    fn commit_to(
        &self,
        dnat: Table,
        port: &ServicePort,
        m: Match,
        p: &Provider,
        to: IpAddr,
    ) -> Result<Flow, PipelineError> {
        Ok(dnat
            .flow(
                priority::MATCH,
                m,
                vec![Instruction::ApplyActions(vec![commit(
                    dnat, port, p.ip, to,
                )])],
            )?
            .owned_by(category::SERVICE, object_of(self.name)))
    }

    /// [`Self::build_service`] for one VIP.
    fn service_family(
        &self,
        vip: IpAddr,
        ServiceTables { dnat, .. }: ServiceTables,
        flows: &mut Vec<Flow>,
        groups: &mut Vec<Group>,
    ) -> Result<(), PipelineError> {
        let object = object_of(self.name);
        let family_bit = if vip.is_ipv6() { GROUP_IPV6 } else { 0 };
        // The providers reachable in the VIP's family, with the address the NAT writes.
        let providers: Vec<(Provider, IpAddr)> = self
            .providers
            .iter()
            .filter_map(|p| p.address_for(vip).map(|a| (*p, a)))
            .collect();
        let affinity = self.affinity();
        for (i, port) in self.spec.ports.iter().enumerate() {
            if providers.is_empty() {
                let up = Action::Output {
                    port: OFPP_CONTROLLER.into(),
                    max_len: NO_BUFFER,
                };
                flows.push(
                    dnat.flow(
                        priority::MATCH,
                        first_packet(vip, port),
                        vec![Instruction::ApplyActions(vec![up])],
                    )?
                    .owned_by(category::SERVICE, REJECT_COOKIE_OBJECT),
                );
                continue;
            }
            let new_conn = self.new_connection(vip, port);
            let gid = group_id(self.index, i) | family_bit;
            let balance = if self.hashed_in_switch(port) {
                // A multipath hash over addresses and ports picks a provider index, and a flow
                // per index commits to that provider.
                for (k, (p, to)) in providers.iter().enumerate() {
                    let m = first_packet(vip, port).with(Oxm::int(
                        HASHED_PROVIDER,
                        u128::from(HASHED_BIT) | k as u128,
                        Some(u128::from(HASHED_BIT | 0xffff)),
                    ));
                    flows.push(self.commit_to(dnat, port, m, p, *to)?);
                }
                vec![Instruction::ApplyActions(vec![
                    Action::Multipath(Multipath {
                        fields: HASH_L3L4_UDP,
                        basis: 0,
                        algorithm: MODULO_N,
                        max_link: (providers.len() - 1) as u16,
                        arg: 0,
                        dst: Subfield {
                            field: NxmHeader::of(HASHED_PROVIDER),
                            ofs: 0,
                            n_bits: 16,
                        },
                    }),
                    Action::RegLoad {
                        dst: Subfield {
                            field: NxmHeader::of(HASHED_PROVIDER),
                            ofs: 16,
                            n_bits: 1,
                        },
                        value: 1,
                    },
                    Action::Resubmit {
                        in_port: OFPP_IN_PORT as u16,
                        table: Some(dnat.id()),
                        ct: false,
                    },
                ])]
            } else {
                groups.push(Group {
                    id: gid,
                    group_type: GroupType::Select,
                    buckets: providers
                        .iter()
                        .map(|(p, to)| bucket(dnat, port, p.ip, *to))
                        .collect(),
                });
                vec![Instruction::ApplyActions(vec![Action::Group(gid)])]
            };
            match affinity {
                None => flows.push(
                    dnat.flow(priority::MATCH, new_conn, balance)?
                        .owned_by(category::SERVICE, object),
                ),
                Some((table, _)) => {
                    // Look the client up in the affinity table, then come back: to its
                    // recorded provider if it is still one (that provider's flow), else through
                    // the hash (the learn flow then records the new choice).
                    let lookup = vec![
                        Action::RegLoad {
                            dst: Subfield {
                                field: NxmHeader::of(AFFINITY_LOOKED_UP),
                                ofs: 0,
                                n_bits: 1,
                            },
                            value: 1,
                        },
                        Action::Resubmit {
                            in_port: OFPP_IN_PORT as u16,
                            table: Some(table),
                            ct: false,
                        },
                        Action::Resubmit {
                            in_port: OFPP_IN_PORT as u16,
                            table: Some(dnat.id()),
                            ct: false,
                        },
                    ];
                    flows.push(
                        dnat.flow(
                            priority::MATCH,
                            new_conn.clone().with(looked_up(0)),
                            vec![Instruction::ApplyActions(lookup)],
                        )?
                        .owned_by(category::SERVICE, object),
                    );
                    flows.push(
                        dnat.flow(
                            priority::SERVICE_REBALANCE,
                            new_conn.with(looked_up(1)),
                            balance,
                        )?
                        .owned_by(category::SERVICE, object),
                    );
                }
            }
        }
        let stale = Match::new()
            .ct_state(ct::TRK, Some(ct::TRK | ct::RPL | ct::INV))
            .with(ct_dst_oxm(vip))
            .eth_type(eth_type_of(vip));
        let to_vip = dst_is(Match::new().ct_state(ct::TRK, Some(ct::TRK)), vip);
        for m in [stale, to_vip] {
            flows.push(
                dnat.flow(priority::SERVICE_DROP, m, Vec::new())?
                    .owned_by(category::SERVICE, object),
            );
        }
        Ok(())
    }

    /// [`Self::build_provider`] for one VIP, which `p` has the address `to` in the family of.
    fn provider_family(
        &self,
        vip: IpAddr,
        p: &Provider,
        to: IpAddr,
        ServiceTables {
            dnat,
            dnat_next,
            snat,
            snat_next,
        }: ServiceTables,
        flows: &mut Vec<Flow>,
    ) -> Result<(), PipelineError> {
        let object = object_of(self.name);
        let affinity = self.affinity();
        for port in &self.spec.ports {
            if let Some((table, timeout)) = affinity {
                // A client whose affinity entry names this provider is committed to it.
                let m = self
                    .new_connection(vip, port)
                    .with(looked_up(1))
                    .with(Oxm::int(
                        AFFINITY_PROVIDER,
                        u128::from(u32::from(p.ip)),
                        None,
                    ));
                flows.push(self.commit_to(dnat, port, m, p, to)?);
                // The first packet of a connection records the client's choice.
                let mut first = vec![learn_affinity(table, vip, port, p.ip, timeout)];
                if let Some(mac) = &p.mac {
                    first.push(Action::set_field(Oxm::new(FieldId::ETH_DST, mac, None)));
                }
                flows.push(
                    dnat.flow(
                        priority::SERVICE_LEARN,
                        connection_in(
                            vip,
                            port,
                            p.ip,
                            ct::NEW | ct::TRK,
                            ct::NEW | ct::TRK | ct::RPL | ct::INV,
                        ),
                        vec![
                            Instruction::ApplyActions(first),
                            Instruction::GotoTable(dnat_next),
                        ],
                    )?
                    .owned_by(category::SERVICE, object),
                );
            }
            let mut to_provider = Vec::new();
            if let Some(mac) = &p.mac {
                to_provider.push(Instruction::ApplyActions(vec![Action::set_field(
                    Oxm::new(FieldId::ETH_DST, mac, None),
                )]));
            }
            to_provider.push(Instruction::GotoTable(dnat_next));
            flows.push(
                dnat.flow(
                    priority::MATCH,
                    connection(vip, port, p.ip, false),
                    to_provider,
                )?
                .owned_by(category::SERVICE, object),
            );
            flows.push(
                snat.flow(
                    priority::MATCH,
                    connection(vip, port, p.ip, true),
                    vec![Instruction::GotoTable(snat_next)],
                )?
                .owned_by(category::SERVICE, object),
            );
        }
        Ok(())
    }
}

/// The first packet of a new connection to `port` of `vip`.
fn first_packet(vip: IpAddr, port: &ServicePort) -> Match {
    dst_is(
        Match::new().ct_state(ct::NEW | ct::TRK, Some(ct::NEW | ct::TRK)),
        vip,
    )
    .ip_proto(port.protocol.ip_proto())
    .with(port_oxm(port.protocol, port.svc_port))
}

/// `reg1` bit 0 = `v`: whether the affinity table was consulted.
fn looked_up(v: u32) -> Oxm {
    Oxm::int(AFFINITY_LOOKED_UP, u128::from(v), Some(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::web_spec as spec;
    use crate::pipeline::{VLAN_PIPELINE, VXLAN_PIPELINE, id};
    use crate::text;

    const P1: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 11);

    /// The service `web`'s flows and groups in pipeline `p`, as an agent with the session
    /// affinity table builds them.
    fn build(
        s: &ServiceSpec,
        index: u32,
        providers: &[Provider],
        p: &'static crate::pipeline::Pipeline,
    ) -> (Vec<Flow>, Vec<Group>) {
        ServiceFlows {
            name: "web",
            spec: s,
            index,
            providers,
            affinity_table: Some(id::SERVICE_AFFINITY),
        }
        .build(ServiceTables {
            dnat: p.table(id::SERVICE_DNAT).unwrap(),
            dnat_next: id::DST_GROUP,
            snat: p.table(id::SERVICE_SNAT).unwrap(),
            snat_next: id::MAC_DEST,
        })
        .unwrap()
    }

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
                Provider {
                    ip: P1,
                    mac: Some([2, 2, 10, 1, 1, 11]),
                    ipv6: None,
                },
                Provider {
                    ip: Ipv4Addr::new(10, 1, 1, 12),
                    mac: None,
                    ipv6: None,
                },
            ];
            let (flows, groups) = build(&s, 1, &providers, p);
            assert!(flows.iter().all(|f| f.category == category::SERVICE));
            let lines = text::flows(&flows);
            // TCP: balance + 2 × (forward, reply); UDP: balance + 2 × (commit, forward,
            // reply); 2 drops. (Hairpin flows are the endpoints' and shared, not a service's.)
            assert_eq!(lines.len(), 1 + 2 * 2 + 1 + 2 * 3 + 2, "{lines:#?}");
            assert!(lines.contains(&"table=3, priority=100,ct_state=+new+trk,udp,reg2=0/0x10000,nw_dst=10.254.0.10,tp_dst=53 actions=multipath(symmetric_l3l4+udp,0,modulo_n,2,0,NXM_NX_REG2[0..15]),load:0x1->NXM_NX_REG2[16],resubmit(,3)".to_string()), "UDP: hashed with its ports: {lines:#?}");
            assert!(lines.contains(&"table=3, priority=100,ct_state=+new+trk,udp,reg2=0x10001/0x1ffff,nw_dst=10.254.0.10,tp_dst=53 actions=ct(commit,table=3,zone=OXM_OF_METADATA[32..47],nat(dst=10.1.1.12:5353),exec(set_field:0xa01010c->ct_mark))".to_string()), "{lines:#?}");
            assert!(lines.contains(&"table=3, priority=100,ct_state=+new+trk,tcp,nw_dst=10.254.0.10,tp_dst=80 actions=group:1073742080".to_string()), "{lines:#?}");
            assert!(lines.contains(&"table=3, priority=100,ct_state=-rpl-inv+trk,ct_mark=0xa01010b,ct_nw_dst=10.254.0.10,ct_nw_proto=6,ct_tp_dst=80,ip actions=set_field:02:02:0a:01:01:0b->eth_dst,goto_table:4".to_string()), "{lines:#?}");
            assert!(lines.contains(&"table=3, priority=100,ct_state=-rpl-inv+trk,ct_mark=0xa01010c,ct_nw_dst=10.254.0.10,ct_nw_proto=17,ct_tp_dst=53,ip actions=goto_table:4".to_string()), "unknown MAC: eth_dst left alone: {lines:#?}");
            assert!(lines.contains(&"table=6, priority=100,ct_state=+rpl-inv+trk,ct_mark=0xa01010b,ct_nw_dst=10.254.0.10,ct_nw_proto=6,ct_tp_dst=80,ip actions=goto_table:9".to_string()), "{lines:#?}");
            assert!(lines.contains(&"table=3, priority=10,ct_state=-rpl-inv+trk,ct_nw_dst=10.254.0.10,ip actions=drop".to_string()), "{lines:#?}");
            assert_eq!(groups.len(), 1, "a group for the TCP port only");
            assert_eq!(groups[0].id, group_id(1, 0));
            assert_eq!(
                text::group(&groups[0]),
                "group_id=1073742080,type=select,bucket=weight:1,actions=ct(commit,table=3,zone=OXM_OF_METADATA[32..47],nat(dst=10.1.1.11:8080),exec(set_field:0xa01010b->ct_mark)),bucket=weight:1,actions=ct(commit,table=3,zone=OXM_OF_METADATA[32..47],nat(dst=10.1.1.12:8080),exec(set_field:0xa01010c->ct_mark))"
            );
        }
    }

    #[test]
    fn a_dual_stack_service_balances_its_ipv6_vip_over_the_providers_ipv6_addresses() {
        let mut s = spec();
        s.vip6 = Some("fd00:254::10".parse().unwrap());
        s.affinity_timeout = Some(30);
        let providers = [
            Provider {
                ip: P1,
                mac: None,
                ipv6: Some("fd00:1::11".parse().unwrap()),
            },
            Provider {
                ip: Ipv4Addr::new(10, 1, 1, 12),
                mac: None,
                ipv6: None,
            },
        ];
        let (flows, groups) = build(&s, 0, &providers, &VXLAN_PIPELINE);
        let lines = text::flows(&flows);
        for want in [
            "table=3, priority=50,ct_state=+new+trk,tcp6,reg1=0x1/0x1,reg2=0/0x10000,ipv6_dst=fd00:254::10,tp_dst=80 actions=multipath(symmetric_l3l4+udp,0,modulo_n,1,0,NXM_NX_REG2[0..15]),load:0x1->NXM_NX_REG2[16],resubmit(,3)",
            "table=3, priority=100,ct_state=+new+trk,tcp6,reg2=0x10000/0x1ffff,ipv6_dst=fd00:254::10,tp_dst=80 actions=ct(commit,table=3,zone=OXM_OF_METADATA[32..47],nat(dst=[fd00:1::11]:8080),exec(set_field:0xa01010b->ct_mark))",
            "table=3, priority=100,ct_state=-rpl-inv+trk,ct_mark=0xa01010b,ct_ipv6_dst=fd00:254::10,ct_nw_proto=6,ct_tp_dst=80,ipv6 actions=goto_table:4",
            "table=6, priority=100,ct_state=+rpl-inv+trk,ct_mark=0xa01010b,ct_ipv6_dst=fd00:254::10,ct_nw_proto=6,ct_tp_dst=80,ipv6 actions=goto_table:9",
            "table=3, priority=10,ct_state=-rpl-inv+trk,ct_ipv6_dst=fd00:254::10,ipv6 actions=drop",
            "table=3, priority=10,ct_state=+trk,ipv6,ipv6_dst=fd00:254::10 actions=drop",
            "table=3, priority=110,ct_state=+new-rpl-inv+trk,ct_mark=0xa01010b,ct_ipv6_dst=fd00:254::10,ct_nw_proto=6,ct_tp_dst=80,ipv6 actions=learn(table=2,idle_timeout=30,priority=100,eth_type=0x86dd,nw_proto=6,NXM_NX_IPV6_SRC[],ipv6_dst=fd00:254::10,tcp_dst=80,OXM_OF_METADATA[32..39],load:0xa01010b->NXM_NX_REG0[]),goto_table:4",
        ] {
            assert!(lines.contains(&want.to_string()), "{want}\n{lines:#?}");
        }
        assert!(
            !lines
                .iter()
                .any(|l| l.contains("ipv6") && l.contains("0xa01010c")),
            "a provider without an IPv6 address is not an IPv6 provider: {lines:#?}"
        );
        assert!(
            groups.is_empty(),
            "affinity ports hash in the switch: {groups:?}"
        );
        // Without affinity, TCP balances through a group of its own per family.
        s.affinity_timeout = None;
        let (_, groups) = build(&s, 0, &providers, &VXLAN_PIPELINE);
        let v6 = groups.iter().find(|g| g.id & GROUP_IPV6 != 0).unwrap();
        assert_eq!(
            text::group(v6),
            "group_id=3221225472,type=select,bucket=weight:1,actions=ct(commit,table=3,zone=OXM_OF_METADATA[32..47],nat(dst=[fd00:1::11]:8080),exec(set_field:0xa01010b->ct_mark))"
        );
    }

    #[test]
    fn hairpin_is_one_flow_per_endpoint_and_family_and_shared_flows() {
        let dnat = VXLAN_PIPELINE.table(id::SERVICE_DNAT).unwrap();
        let v4 = hairpin_snat(dnat, 1, IpAddr::V4(P1), [2, 2, 10, 1, 1, 11]).unwrap();
        assert_eq!(
            text::flow(&v4),
            "table=3, priority=120,ct_state=-rpl-inv+trk,ip,metadata=0x100000000/0xff00000000,nw_src=10.1.1.11,nw_dst=10.1.1.11 actions=set_field:02:02:a9:fe:2a:01->eth_src,set_field:02:02:0a:01:01:0b->eth_dst,load:0x1->NXM_NX_REG3[2],move:OXM_OF_METADATA[32..39]->NXM_NX_REG3[16..23],load:0x1->NXM_NX_REG3[24..31],ct(commit,table=3,zone=NXM_NX_REG3[16..31],nat(src=169.254.42.1))"
        );
        let v6 = hairpin_snat(dnat, 1, "fd00:1::11".parse().unwrap(), [2; 6]).unwrap();
        assert!(
            text::flow(&v6).contains("nat(src=fd00:6861:6972:7069::1)"),
            "{}",
            text::flow(&v6)
        );
        let lines = text::flows(&hairpin_shared(dnat, true, true).unwrap());
        for want in [
            "table=3, priority=205,ct_state=-trk,ip,nw_dst=169.254.42.1 actions=load:0x1->NXM_NX_REG3[0],move:OXM_OF_METADATA[32..39]->NXM_NX_REG3[16..23],load:0x1->NXM_NX_REG3[24..31],ct(table=3,zone=NXM_NX_REG3[16..31],nat)",
            "table=3, priority=205,ct_state=-trk,ipv6,ipv6_dst=fd00:6861:6972:7069::1 actions=load:0x1->NXM_NX_REG3[0],move:OXM_OF_METADATA[32..39]->NXM_NX_REG3[16..23],load:0x1->NXM_NX_REG3[24..31],ct(table=3,zone=NXM_NX_REG3[16..31],nat)",
            "table=3, priority=204,ip,reg3=0x1/0x3 actions=load:0x1->NXM_NX_REG3[1],ct(table=3,zone=OXM_OF_METADATA[32..47],nat)",
            "table=3, priority=210,ct_state=+rpl-inv+trk,ip,reg3=0x3/0x7,vlan_tci=0x1000/0x1000 actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:02:02:a9:fe:2a:01->eth_src,pop_vlan,IN_PORT",
            "table=3, priority=210,reg3=0x4/0x4,vlan_tci=0x1000/0x1000 actions=pop_vlan,IN_PORT",
        ] {
            assert!(lines.contains(&want.to_string()), "{want}\n{lines:#?}");
        }
        assert_eq!(lines.len(), 7, "{lines:#?}");
        // A service's own flows hold no hairpin flow, whatever its providers.
        let provider = Provider {
            ip: P1,
            mac: Some([2, 2, 10, 1, 1, 11]),
            ipv6: None,
        };
        let (flows, _) = build(&spec(), 0, &[provider], &VXLAN_PIPELINE);
        let hairpin = [
            priority::HAIRPIN_SNAT,
            priority::HAIRPIN_LOOKUP,
            priority::HAIRPIN_VRF_LOOKUP,
            priority::HAIRPIN_OUT,
        ];
        assert!(
            !flows.iter().any(|f| hairpin.contains(&f.key.priority)),
            "{:#?}",
            text::flows(&flows)
        );
    }

    #[test]
    fn a_port_without_providers_rejects_through_the_controller() {
        let s = spec();
        let (flows, groups) = build(&s, 0, &[], &VLAN_PIPELINE);
        assert!(groups.is_empty());
        let lines = text::flows(&flows);
        assert!(lines.contains(&"table=3, priority=100,ct_state=+new+trk,udp,nw_dst=10.254.0.10,tp_dst=53 actions=CONTROLLER:65535".to_string()), "{lines:#?}");
        assert_eq!(lines.len(), 4, "{lines:#?}");
    }

    #[test]
    fn with_affinity_new_connections_look_the_client_up_and_first_packets_learn() {
        let mut s = spec();
        s.ports.truncate(1);
        s.affinity_timeout = Some(30);
        let providers = [Provider {
            ip: P1,
            mac: None,
            ipv6: None,
        }];
        let (flows, groups) = build(&s, 0, &providers, &VLAN_PIPELINE);
        let lines = text::flows(&flows);
        for want in [
            "table=3, priority=100,ct_state=+new+trk,tcp,reg1=0/0x1,reg2=0/0x10000,nw_dst=10.254.0.10,tp_dst=80 actions=load:0x1->NXM_NX_REG1[0],resubmit(,2),resubmit(,3)",
            "table=3, priority=100,ct_state=+new+trk,tcp,reg0=0xa01010b,reg1=0x1/0x1,reg2=0/0x10000,nw_dst=10.254.0.10,tp_dst=80 actions=ct(commit,table=3,zone=OXM_OF_METADATA[32..47],nat(dst=10.1.1.11:8080),exec(set_field:0xa01010b->ct_mark))",
            // A miss is balanced by a hash that reads the client's port while the switch
            // translates, not by a select group: see `build_family`.
            "table=3, priority=50,ct_state=+new+trk,tcp,reg1=0x1/0x1,reg2=0/0x10000,nw_dst=10.254.0.10,tp_dst=80 actions=multipath(symmetric_l3l4+udp,0,modulo_n,1,0,NXM_NX_REG2[0..15]),load:0x1->NXM_NX_REG2[16],resubmit(,3)",
            "table=3, priority=100,ct_state=+new+trk,tcp,reg2=0x10000/0x1ffff,nw_dst=10.254.0.10,tp_dst=80 actions=ct(commit,table=3,zone=OXM_OF_METADATA[32..47],nat(dst=10.1.1.11:8080),exec(set_field:0xa01010b->ct_mark))",
        ] {
            assert!(lines.contains(&want.to_string()), "{want}\n{lines:#?}");
        }
        assert!(groups.is_empty(), "{groups:?}");
        let learn = "table=3, priority=110,ct_state=+new-rpl-inv+trk,ct_mark=0xa01010b,ct_nw_dst=10.254.0.10,ct_nw_proto=6,ct_tp_dst=80,ip actions=learn(table=2,idle_timeout=30,priority=100,eth_type=0x800,nw_proto=6,NXM_OF_IP_SRC[],ip_dst=10.254.0.10,tcp_dst=80,OXM_OF_METADATA[32..39],load:0xa01010b->NXM_NX_REG0[]),goto_table:4";
        assert!(lines.contains(&learn.to_string()), "{lines:#?}");
    }

    #[test]
    fn group_ids_do_not_meet_flood_groups_or_each_other() {
        assert!(group_id(0, 0) > crate::datapath::vxlan::flood_chunk_group(0x1fff, 255));
        assert_ne!(group_id(1, 0), group_id(0, 1));
        assert_eq!(group_id(2, 3), 0x4000_0203);
    }
}
