//! Property tests: for every message type, `decode(encode(m)) == m`, and decoding arbitrary or
//! mutated bytes never panics.
//!
//! The strategies generate only values whose encoding is canonical (for example an opaque
//! Nicira action uses a subtype this crate does not model, a note is padded to its 8-byte
//! boundary), since the codec keeps such values byte for byte.

#![allow(clippy::unwrap_used)]

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::Bytes;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use ofproto::action::nicira::{
    Conjunction, Controller2, Ct, CtZone, Learn, LearnDst, LearnSpec, LearnSrc, Nat, NatRange,
    NxmHeader, Sample, Subfield,
};
use ofproto::async_config::AsyncConfig;
use ofproto::bundle::{BundleAdd, BundleControl, BundleCtrlType};
use ofproto::config::SwitchConfig;
use ofproto::error::{ErrorKind, ErrorMsg};
use ofproto::features::FeaturesReply;
use ofproto::flow_mod::FlowModCommand;
use ofproto::flow_removed::{FlowRemoved, FlowRemovedReason};
use ofproto::group::{GroupModCommand, GroupType};
use ofproto::hello::{Hello, HelloElem};
use ofproto::meter::{MeterBand, MeterMod, MeterModCommand};
use ofproto::multipart::{
    AggregateStats, Desc, ExperimenterBody, FeatureId, FlowStats, FlowStatsRequest, GroupDesc,
    GroupFeatures, GroupStats, MeterConfig, MeterFeatures, MeterStats, MultipartReply,
    MultipartReplyBody, MultipartRequest, MultipartRequestBody, PortStats, QueueStats,
    TableFeatureProp, TableFeatures, TableStats,
};
use ofproto::nicira_msg::{PacketIn2, TlvMap, TlvTableMod, TlvTableReply};
use ofproto::oxm::{CLASS_EXPERIMENTER, CLASS_NXM0, CLASS_NXM1, FieldId, Oxm};
use ofproto::packet_in::{PacketIn, PacketInReason};
use ofproto::packet_out::PacketOut;
use ofproto::port::{Port, PortMod, PortNo, PortReason, PortStatus};
use ofproto::queue::{PacketQueue, QueueGetConfigReply, QueueProp};
use ofproto::role::{ControllerRole, Role};
use ofproto::table_mod::TableMod;
use ofproto::{Action, Bucket, FlowMod, GroupMod, Instruction, Match, Message};

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

/// Bytes whose length is `rem` modulo 8, at most `max` long.
fn bytes_mod8(rem: usize, max: usize) -> impl Strategy<Value = Bytes> {
    (0..=max / 8)
        .prop_flat_map(move |k| vec(any::<u8>(), k * 8 + rem))
        .prop_map(Bytes::from)
}

fn name(max: usize) -> impl Strategy<Value = ofproto::FixedStr> {
    // Any bytes but NUL (the padding): the fields need not be UTF-8.
    vec(1u8..=255, 0..=max).prop_map(ofproto::FixedStr::from)
}

fn field() -> impl Strategy<Value = (FieldId, usize)> {
    prop_oneof![
        (0u8..=39).prop_filter_map("known basic", |f| FieldId::basic(f)
            .info()
            .map(|i| (FieldId::basic(f), usize::from(i.len)))),
        (0u8..16).prop_map(|n| (ofproto::nxm::reg(n), 4)),
        (0u8..8).prop_map(|n| (ofproto::nxm::xreg(n), 8)),
        Just((ofproto::nxm::CT_LABEL, 16)),
        Just((ofproto::nxm::CT_STATE, 4)),
        Just((ofproto::nxm::TCP_FLAGS, 2)),
        (0u8..18).prop_map(|f| (
            FieldId::new(CLASS_NXM0, f),
            usize::from(FieldId::new(CLASS_NXM0, f).info().map_or(4, |i| i.len))
        )),
        (any::<u16>(), 0u8..128, 0usize..40)
            .prop_filter("not experimenter", |(c, _, _)| *c != CLASS_EXPERIMENTER)
            .prop_map(|(c, f, l)| (FieldId::new(c, f), l)),
        (any::<u32>(), 0u8..128, 0usize..20).prop_map(|(e, f, l)| (FieldId::experimenter(e, f), l)),
    ]
}

fn oxm() -> impl Strategy<Value = Oxm> {
    (field(), any::<bool>()).prop_flat_map(|((id, len), masked)| {
        (vec(any::<u8>(), len), vec(any::<u8>(), len))
            .prop_map(move |(v, m)| Oxm::new(id, &v, masked.then_some(m.as_slice())))
    })
}

fn matching() -> impl Strategy<Value = Match> {
    vec(oxm(), 0..6).prop_map(|fields| Match { fields })
}

fn nxm_header() -> impl Strategy<Value = NxmHeader> {
    prop_oneof![
        (0u8..16).prop_map(|n| NxmHeader::of(ofproto::nxm::reg(n))),
        Just(NxmHeader::of(FieldId::ETH_SRC)),
        Just(NxmHeader::of(FieldId::new(CLASS_NXM1, 16))),
        (1u32..).prop_map(NxmHeader),
    ]
}

/// A subfield whose offset and width fit the `ofs_nbits` encoding.
fn packed_subfield() -> impl Strategy<Value = Subfield> {
    (nxm_header(), 0u16..1024, 1u16..=64).prop_map(|(field, ofs, n_bits)| Subfield {
        field,
        ofs,
        n_bits,
    })
}

fn subfield() -> impl Strategy<Value = Subfield> {
    (nxm_header(), any::<u16>(), any::<u16>()).prop_map(|(field, ofs, n_bits)| Subfield {
        field,
        ofs,
        n_bits,
    })
}

fn nat() -> impl Strategy<Value = Nat> {
    (
        any::<u16>(),
        option::of(any::<u32>().prop_map(Ipv4Addr::from)),
        option::of(any::<u32>().prop_map(Ipv4Addr::from)),
        option::of(any::<u128>().prop_map(Ipv6Addr::from)),
        option::of(any::<u128>().prop_map(Ipv6Addr::from)),
        option::of(any::<u16>()),
        option::of(any::<u16>()),
    )
        .prop_map(
            |(flags, ipv4_min, ipv4_max, ipv6_min, ipv6_max, proto_min, proto_max)| Nat {
                flags,
                range: NatRange {
                    ipv4_min,
                    ipv4_max,
                    ipv6_min,
                    ipv6_max,
                    proto_min,
                    proto_max,
                },
            },
        )
}

fn learn_spec() -> impl Strategy<Value = LearnSpec> {
    (
        1u16..0x400,
        any::<bool>(),
        nxm_header(),
        any::<u16>(),
        0u8..3,
        nxm_header(),
        any::<u16>(),
    )
        .prop_flat_map(|(n_bits, imm, sf, so, dk, df, dofs)| {
            let n = 2 * usize::from(n_bits).div_ceil(16);
            vec(any::<u8>(), n).prop_map(move |v| LearnSpec {
                n_bits,
                src: if imm {
                    LearnSrc::Imm(Bytes::from(v))
                } else {
                    LearnSrc::Field { field: sf, ofs: so }
                },
                dst: match dk {
                    0 => LearnDst::Match {
                        field: df,
                        ofs: dofs,
                    },
                    1 => LearnDst::Load {
                        field: df,
                        ofs: dofs,
                    },
                    _ => LearnDst::Output,
                },
            })
        })
}

/// Actions allowed anywhere, including inside `ct`.
fn leaf_action() -> impl Strategy<Value = Action> {
    let standard = prop_oneof![
        (any::<u32>(), any::<u16>()).prop_map(|(p, m)| Action::Output {
            port: PortNo(p),
            max_len: m
        }),
        Just(Action::CopyTtlOut),
        Just(Action::CopyTtlIn),
        any::<u8>().prop_map(Action::SetMplsTtl),
        Just(Action::DecMplsTtl),
        any::<u16>().prop_map(Action::PushVlan),
        Just(Action::PopVlan),
        any::<u16>().prop_map(Action::PushMpls),
        any::<u16>().prop_map(Action::PopMpls),
        any::<u32>().prop_map(Action::SetQueue),
        any::<u32>().prop_map(Action::Group),
        any::<u8>().prop_map(Action::SetNwTtl),
        Just(Action::DecNwTtl),
        oxm().prop_map(Action::SetField),
        any::<u16>().prop_map(Action::PushPbb),
        Just(Action::PopPbb),
        (28u16..0xffff, bytes_mod8(4, 24)).prop_map(|(kind, data)| Action::Unknown { kind, data }),
    ];
    let nicira = prop_oneof![
        (any::<u16>(), option::of(any::<u8>()), any::<bool>()).prop_map(|(in_port, table, ct)| {
            Action::Resubmit {
                in_port,
                table: if ct { Some(table.unwrap_or(0)) } else { table },
                ct,
            }
        }),
        (packed_subfield(), any::<u64>()).prop_map(|(dst, value)| Action::RegLoad { dst, value }),
        oxm().prop_map(Action::RegLoad2),
        (subfield(), subfield()).prop_map(|(src, mut dst)| {
            dst.n_bits = src.n_bits;
            Action::RegMove { src, dst }
        }),
        (packed_subfield(), any::<u16>())
            .prop_map(|(src, max_len)| Action::OutputReg { src, max_len }),
        Just(Action::CtClear),
        nat().prop_map(Action::Nat),
        (any::<u32>(), any::<u8>(), any::<u8>()).prop_map(|(id, clause, n_clauses)| {
            Action::Conjunction(Conjunction {
                id,
                clause,
                n_clauses,
            })
        }),
        bytes_mod8(6, 24).prop_map(Action::Note),
        Just(Action::DecTtl),
        vec(any::<u16>(), 0..6).prop_map(Action::DecTtlCntIds),
        (any::<u16>(), any::<u16>(), any::<u8>()).prop_map(|(max_len, controller_id, reason)| {
            Action::Controller {
                max_len,
                controller_id,
                reason,
            }
        }),
        vec((any::<u16>(), bytes(12)), 0..4)
            .prop_map(|props| Action::Controller2(Controller2 { props })),
        (any::<u16>(), any::<u16>()).prop_map(|(idle, hard)| Action::FinTimeout { idle, hard }),
        any::<u32>().prop_map(Action::SetTunnel),
        any::<u64>().prop_map(Action::SetTunnel64),
        Just(Action::PopQueue),
        Just(Action::Exit),
        (any::<u16>(), any::<u32>())
            .prop_map(|(port, max_len)| Action::OutputTrunc { port, max_len }),
        (
            any::<bool>(),
            any::<u16>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u16>(),
            any::<u8>()
        )
            .prop_map(
                |(v2, probability, collector_set_id, obs_domain_id, obs_point_id, port, dir)| {
                    Action::Sample(Sample {
                        subtype: if v2 { 38 } else { 29 },
                        probability,
                        collector_set_id,
                        obs_domain_id,
                        obs_point_id,
                        sampling_port: if v2 { port } else { 0 },
                        direction: if v2 { dir } else { 0 },
                    })
                }
            ),
        (any::<(u16, u16, u16, u16, u32)>(), packed_subfield()).prop_map(
            |((fields, basis, algorithm, max_link, arg), dst)| {
                Action::Multipath(ofproto::action::Multipath {
                    fields,
                    basis,
                    algorithm,
                    max_link,
                    arg,
                    dst,
                })
            }
        ),
        (
            any::<(u16, u16, u16, u32)>(),
            option::of(packed_subfield()),
            vec(any::<u16>(), 0..5)
        )
            .prop_map(|((algorithm, fields, basis, member_type), dst, members)| {
                Action::Bundle(ofproto::action::Bundle {
                    algorithm,
                    fields,
                    basis,
                    member_type,
                    dst,
                    members,
                })
            }),
        (any::<u16>(), nxm_header(), any::<u16>()).prop_map(|(pkt_len, field, ofs)| {
            Action::CheckPktLarger {
                pkt_len,
                dst: Subfield {
                    field,
                    ofs,
                    n_bits: 1,
                },
            }
        }),
        subfield().prop_map(Action::StackPush),
        subfield().prop_map(Action::StackPop),
        (100u16..200, bytes_mod8(6, 24)).prop_map(|(st, rest)| {
            let mut data = st.to_be_bytes().to_vec();
            data.extend_from_slice(&rest);
            Action::Experimenter {
                experimenter: ofproto::action::NX_EXPERIMENTER,
                data: Bytes::from(data),
            }
        }),
        (
            any::<u32>().prop_filter("not nicira", |e| *e != ofproto::action::NX_EXPERIMENTER),
            bytes_mod8(0, 24)
        )
            .prop_map(|(experimenter, data)| Action::Experimenter { experimenter, data }),
    ];
    prop_oneof![standard, nicira]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => leaf_action(),
        1 => vec(leaf_action(), 0..3).prop_map(Action::Clone),
        1 => (any::<u16>(), prop_oneof![any::<u16>().prop_map(CtZone::Imm), packed_subfield().prop_map(CtZone::Field)], any::<u8>(), any::<u16>(), vec(leaf_action(), 0..3))
            .prop_map(|(flags, zone, recirc_table, alg, actions)| Action::Ct(Ct { flags, zone, recirc_table, alg, actions })),
        1 => (
            (any::<u16>(), any::<u16>(), any::<u16>(), any::<u64>(), any::<u16>(), any::<u8>(), any::<u16>(), any::<u16>()),
            vec(learn_spec(), 0..4),
            any::<u32>(),
            option::of((nxm_header(), any::<u16>())),
        )
            .prop_map(|((idle_timeout, hard_timeout, priority, cookie, flags, table_id, fin_idle_timeout, fin_hard_timeout), specs, limit, result)| {
                // NX_LEARN_F_WRITE_RESULT goes with result_dst; both select learn2.
                let result_dst = result.map(|(field, ofs)| Subfield { field, ofs, n_bits: 1 });
                let flags = if result_dst.is_some() { flags | 4 } else { flags & !4 };
                Action::Learn(Learn { idle_timeout, hard_timeout, priority, cookie, flags, table_id, fin_idle_timeout, fin_hard_timeout, specs, limit, result_dst })
            }),
    ]
}

fn actions() -> impl Strategy<Value = Vec<Action>> {
    vec(action(), 0..5)
}

fn instruction() -> impl Strategy<Value = Instruction> {
    prop_oneof![
        any::<u8>().prop_map(Instruction::GotoTable),
        (any::<u64>(), any::<u64>())
            .prop_map(|(metadata, mask)| Instruction::WriteMetadata { metadata, mask }),
        actions().prop_map(Instruction::WriteActions),
        actions().prop_map(Instruction::ApplyActions),
        Just(Instruction::ClearActions),
        any::<u32>().prop_map(Instruction::Meter),
        (any::<u32>(), bytes_mod8(0, 16))
            .prop_map(|(experimenter, data)| Instruction::Experimenter { experimenter, data }),
        (7u16..0xffff, bytes_mod8(4, 16))
            .prop_map(|(kind, data)| Instruction::Unknown { kind, data }),
    ]
}

fn flow_mod() -> impl Strategy<Value = FlowMod> {
    (
        (
            any::<u64>(),
            any::<u64>(),
            any::<u8>(),
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
        ),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u16>()),
        matching(),
        vec(instruction(), 0..4),
    )
        .prop_map(
            |(
                (cookie, cookie_mask, table_id, cmd, idle_timeout, hard_timeout, priority),
                (buffer_id, out_port, out_group, flags),
                matching,
                instructions,
            )| FlowMod {
                cookie,
                cookie_mask,
                table_id,
                command: FlowModCommand::from(cmd),
                idle_timeout,
                hard_timeout,
                priority,
                buffer_id,
                out_port,
                out_group,
                flags,
                matching,
                instructions,
            },
        )
}

fn bucket() -> impl Strategy<Value = Bucket> {
    (any::<u16>(), any::<u32>(), any::<u32>(), actions()).prop_map(
        |(weight, watch_port, watch_group, actions)| Bucket {
            weight,
            watch_port,
            watch_group,
            actions,
        },
    )
}

fn port() -> impl Strategy<Value = Port> {
    (any::<u32>(), any::<[u8; 6]>(), name(15), any::<[u32; 8]>()).prop_map(
        |(port_no, hw_addr, name, w)| Port {
            port_no,
            hw_addr,
            name,
            config: w[0],
            state: w[1],
            curr: w[2],
            advertised: w[3],
            supported: w[4],
            peer: w[5],
            curr_speed: w[6],
            max_speed: w[7],
        },
    )
}

fn band() -> impl Strategy<Value = MeterBand> {
    prop_oneof![
        (any::<u32>(), any::<u32>())
            .prop_map(|(rate, burst_size)| MeterBand::Drop { rate, burst_size }),
        (any::<u32>(), any::<u32>(), any::<u8>()).prop_map(|(rate, burst_size, prec_level)| {
            MeterBand::DscpRemark {
                rate,
                burst_size,
                prec_level,
            }
        }),
        (3u16.., any::<u32>(), any::<u32>(), vec(any::<u8>(), 4..12)).prop_map(
            |(kind, rate, burst_size, d)| MeterBand::Other {
                kind,
                rate,
                burst_size,
                data: Bytes::from(d)
            }
        ),
    ]
}

fn flow_stats_request() -> impl Strategy<Value = FlowStatsRequest> {
    (
        any::<u8>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        matching(),
    )
        .prop_map(
            |(table_id, out_port, out_group, cookie, cookie_mask, matching)| FlowStatsRequest {
                table_id,
                out_port,
                out_group,
                cookie,
                cookie_mask,
                matching,
            },
        )
}

fn feature_ids() -> impl Strategy<Value = Vec<FeatureId>> {
    vec(
        (any::<u16>(), bytes(8)).prop_map(|(kind, data)| FeatureId { kind, data }),
        0..4,
    )
}

fn table_features() -> impl Strategy<Value = TableFeatures> {
    let prop = prop_oneof![
        (any::<bool>(), feature_ids())
            .prop_map(|(miss, ids)| TableFeatureProp::Instructions { miss, ids }),
        (any::<bool>(), vec(any::<u8>(), 0..10))
            .prop_map(|(miss, tables)| TableFeatureProp::NextTables { miss, tables }),
        (any::<bool>(), any::<bool>(), feature_ids())
            .prop_map(|(write, miss, ids)| TableFeatureProp::Actions { write, miss, ids }),
        (
            prop::sample::select(vec![8u16, 10, 12, 13, 14, 15]),
            vec(any::<u32>(), 0..6)
        )
            .prop_map(|(kind, headers)| TableFeatureProp::Oxms { kind, headers }),
        (
            prop::sample::select(vec![9u16, 11, 16, 0xfffe, 0xffff]),
            bytes(12)
        )
            .prop_map(|(kind, data)| TableFeatureProp::Other { kind, data }),
    ];
    (
        any::<u8>(),
        name(31),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        vec(prop, 0..4),
    )
        .prop_map(
            |(table_id, name, metadata_match, metadata_write, config, max_entries, properties)| {
                TableFeatures {
                    table_id,
                    name,
                    metadata_match,
                    metadata_write,
                    config,
                    max_entries,
                    properties,
                }
            },
        )
}

fn experimenter_body() -> impl Strategy<Value = ExperimenterBody> {
    (any::<u32>(), any::<u32>(), bytes(16)).prop_map(|(experimenter, exp_type, data)| {
        ExperimenterBody {
            experimenter,
            exp_type,
            data,
        }
    })
}

fn multipart_request() -> impl Strategy<Value = MultipartRequest> {
    use MultipartRequestBody as B;
    let body = prop_oneof![
        Just(B::Desc),
        flow_stats_request().prop_map(B::Flow),
        flow_stats_request().prop_map(B::Aggregate),
        Just(B::Table),
        any::<u32>().prop_map(|port_no| B::PortStats { port_no }),
        (any::<u32>(), any::<u32>()).prop_map(|(port_no, queue_id)| B::Queue { port_no, queue_id }),
        any::<u32>().prop_map(|group_id| B::Group { group_id }),
        Just(B::GroupDesc),
        Just(B::GroupFeatures),
        any::<u32>().prop_map(|meter_id| B::Meter { meter_id }),
        any::<u32>().prop_map(|meter_id| B::MeterConfig { meter_id }),
        Just(B::MeterFeatures),
        vec(table_features(), 0..2).prop_map(B::TableFeatures),
        Just(B::PortDesc),
        experimenter_body().prop_map(B::Experimenter),
        (14u16..0xffff, bytes(16)).prop_map(|(kind, data)| B::Unknown { kind, data }),
    ];
    (any::<u16>(), body).prop_map(|(flags, body)| MultipartRequest { flags, body })
}

fn multipart_reply() -> impl Strategy<Value = MultipartReply> {
    use MultipartReplyBody as B;
    let flow_stats = (
        any::<(u8, u32, u32, u16, u16, u16, u16)>(),
        any::<(u64, u64, u64)>(),
        matching(),
        vec(instruction(), 0..3),
    )
        .prop_map(
            |(
                (
                    table_id,
                    duration_sec,
                    duration_nsec,
                    priority,
                    idle_timeout,
                    hard_timeout,
                    flags,
                ),
                (cookie, packet_count, byte_count),
                matching,
                instructions,
            )| FlowStats {
                table_id,
                duration_sec,
                duration_nsec,
                priority,
                idle_timeout,
                hard_timeout,
                flags,
                cookie,
                packet_count,
                byte_count,
                matching,
                instructions,
            },
        );
    let body = prop_oneof![
        (name(255), name(255), name(255), name(31), name(255)).prop_map(|(a, b, c, d, e)| B::Desc(
            Desc {
                mfr_desc: a,
                hw_desc: b,
                sw_desc: c,
                serial_num: d,
                dp_desc: e
            }
        )),
        vec(flow_stats, 0..4).prop_map(B::Flow),
        any::<(u64, u64, u32)>().prop_map(|(packet_count, byte_count, flow_count)| B::Aggregate(
            AggregateStats {
                packet_count,
                byte_count,
                flow_count
            }
        )),
        vec(
            any::<(u8, u32, u64, u64)>().prop_map(
                |(table_id, active_count, lookup_count, matched_count)| TableStats {
                    table_id,
                    active_count,
                    lookup_count,
                    matched_count
                }
            ),
            0..4
        )
        .prop_map(B::Table),
        vec(
            any::<(u32, [u64; 12], u32, u32)>().prop_map(
                |(port_no, counters, duration_sec, duration_nsec)| PortStats {
                    port_no,
                    counters,
                    duration_sec,
                    duration_nsec
                }
            ),
            0..3
        )
        .prop_map(B::PortStats),
        vec(
            any::<(u32, u32, u64, u64, u64, u32, u32)>().prop_map(
                |(
                    port_no,
                    queue_id,
                    tx_bytes,
                    tx_packets,
                    tx_errors,
                    duration_sec,
                    duration_nsec,
                )| QueueStats {
                    port_no,
                    queue_id,
                    tx_bytes,
                    tx_packets,
                    tx_errors,
                    duration_sec,
                    duration_nsec
                }
            ),
            0..3
        )
        .prop_map(B::Queue),
        vec(
            (
                any::<(u32, u32, u64, u64, u32, u32)>(),
                vec(any::<(u64, u64)>(), 0..3)
            )
                .prop_map(
                    |(
                        (
                            group_id,
                            ref_count,
                            packet_count,
                            byte_count,
                            duration_sec,
                            duration_nsec,
                        ),
                        bucket_stats,
                    )| GroupStats {
                        group_id,
                        ref_count,
                        packet_count,
                        byte_count,
                        duration_sec,
                        duration_nsec,
                        bucket_stats
                    }
                ),
            0..3
        )
        .prop_map(B::Group),
        vec(
            (any::<u8>(), any::<u32>(), vec(bucket(), 0..3)).prop_map(|(t, group_id, buckets)| {
                GroupDesc {
                    group_type: GroupType::from(t),
                    group_id,
                    buckets,
                }
            }),
            0..3
        )
        .prop_map(B::GroupDesc),
        any::<(u32, u32, [u32; 4], [u32; 4])>().prop_map(
            |(types, capabilities, max_groups, actions)| B::GroupFeatures(GroupFeatures {
                types,
                capabilities,
                max_groups,
                actions
            })
        ),
        vec(
            (
                any::<(u32, u32, u64, u64, u32, u32)>(),
                vec(any::<(u64, u64)>(), 0..3)
            )
                .prop_map(
                    |(
                        (
                            meter_id,
                            flow_count,
                            packet_in_count,
                            byte_in_count,
                            duration_sec,
                            duration_nsec,
                        ),
                        band_stats,
                    )| MeterStats {
                        meter_id,
                        flow_count,
                        packet_in_count,
                        byte_in_count,
                        duration_sec,
                        duration_nsec,
                        band_stats
                    }
                ),
            0..3
        )
        .prop_map(B::Meter),
        vec(
            (any::<u16>(), any::<u32>(), vec(band(), 0..3)).prop_map(|(flags, meter_id, bands)| {
                MeterConfig {
                    flags,
                    meter_id,
                    bands,
                }
            }),
            0..3
        )
        .prop_map(B::MeterConfig),
        any::<(u32, u32, u32, u8, u8)>().prop_map(
            |(max_meter, band_types, capabilities, max_bands, max_color)| B::MeterFeatures(
                MeterFeatures {
                    max_meter,
                    band_types,
                    capabilities,
                    max_bands,
                    max_color
                }
            )
        ),
        vec(table_features(), 0..2).prop_map(B::TableFeatures),
        vec(port(), 0..3).prop_map(B::PortDesc),
        experimenter_body().prop_map(B::Experimenter),
        (14u16..0xffff, bytes(16)).prop_map(|(kind, data)| B::Unknown { kind, data }),
    ];
    (any::<u16>(), body).prop_map(|(flags, body)| MultipartReply { flags, body })
}

fn simple_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        Just(Message::BarrierRequest),
        Just(Message::FeaturesRequest),
        flow_mod().prop_map(Message::FlowMod),
        (any::<u16>(), any::<u8>(), any::<u32>(), vec(bucket(), 0..3)).prop_map(
            |(c, t, group_id, buckets)| Message::GroupMod(GroupMod {
                command: GroupModCommand::from(c),
                group_type: GroupType::from(t),
                group_id,
                buckets
            })
        ),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    let a = prop_oneof![
        vec(
            prop_oneof![
                vec(any::<u32>(), 0..3).prop_map(HelloElem::VersionBitmap),
                (2u16.., bytes(12)).prop_map(|(kind, data)| HelloElem::Unknown { kind, data })
            ],
            0..3
        )
        .prop_map(|elements| Message::Hello(Hello { elements })),
        (0u16..0xffff, any::<u16>(), bytes(32)).prop_map(|(err_type, code, data)| Message::Error(
            ErrorMsg {
                kind: ErrorKind::Standard { err_type, code },
                data
            }
        )),
        (any::<u16>(), any::<u32>(), bytes(32)).prop_map(|(exp_type, experimenter, data)| {
            Message::Error(ErrorMsg {
                kind: ErrorKind::Experimenter {
                    exp_type,
                    experimenter,
                },
                data,
            })
        }),
        bytes(32).prop_map(Message::EchoRequest),
        bytes(32).prop_map(Message::EchoReply),
        (
            any::<u32>().prop_filter("modelled experimenters", |e| *e != 0x2320
                && *e != 0x4f4e_4600),
            any::<u32>(),
            bytes(32)
        )
            .prop_map(|(experimenter, exp_type, data)| Message::Experimenter {
                experimenter,
                exp_type,
                data
            }),
        Just(Message::FeaturesRequest),
        any::<(u64, u32, u8, u8, u32, u32)>().prop_map(
            |(datapath_id, n_buffers, n_tables, auxiliary_id, capabilities, reserved)| {
                Message::FeaturesReply(FeaturesReply {
                    datapath_id,
                    n_buffers,
                    n_tables,
                    auxiliary_id,
                    capabilities,
                    reserved,
                })
            }
        ),
        Just(Message::GetConfigRequest),
        any::<(u16, u16)>().prop_map(|(flags, miss_send_len)| Message::GetConfigReply(
            SwitchConfig {
                flags,
                miss_send_len
            }
        )),
        any::<(u16, u16)>().prop_map(|(flags, miss_send_len)| Message::SetConfig(SwitchConfig {
            flags,
            miss_send_len
        })),
        (any::<(u32, u16, u8, u8, u64)>(), matching(), bytes(64)).prop_map(
            |((buffer_id, total_len, reason, table_id, cookie), matching, data)| Message::PacketIn(
                PacketIn {
                    buffer_id,
                    total_len,
                    reason: PacketInReason::from(reason),
                    table_id,
                    cookie,
                    matching,
                    data
                }
            )
        ),
        (
            any::<(u64, u16, u8, u8, u32, u32, u16, u16)>(),
            any::<(u64, u64)>(),
            matching()
        )
            .prop_map(
                |(
                    (
                        cookie,
                        priority,
                        reason,
                        table_id,
                        duration_sec,
                        duration_nsec,
                        idle_timeout,
                        hard_timeout,
                    ),
                    (packet_count, byte_count),
                    matching,
                )| Message::FlowRemoved(FlowRemoved {
                    cookie,
                    priority,
                    reason: FlowRemovedReason::from(reason),
                    table_id,
                    duration_sec,
                    duration_nsec,
                    idle_timeout,
                    hard_timeout,
                    packet_count,
                    byte_count,
                    matching
                })
            ),
        (any::<u8>(), port()).prop_map(|(r, desc)| Message::PortStatus(PortStatus {
            reason: PortReason::from(r),
            desc
        })),
    ];
    let b = prop_oneof![
        (any::<u32>(), any::<u32>(), actions(), bytes(64)).prop_map(
            |(buffer_id, in_port, actions, data)| Message::PacketOut(PacketOut {
                buffer_id,
                in_port: PortNo(in_port),
                actions,
                data
            })
        ),
        flow_mod().prop_map(Message::FlowMod),
        (any::<u16>(), any::<u8>(), any::<u32>(), vec(bucket(), 0..3)).prop_map(
            |(c, t, group_id, buckets)| Message::GroupMod(GroupMod {
                command: GroupModCommand::from(c),
                group_type: GroupType::from(t),
                group_id,
                buckets
            })
        ),
        (any::<u32>(), any::<[u8; 6]>(), any::<(u32, u32, u32)>()).prop_map(
            |(port_no, hw_addr, (config, mask, advertise))| Message::PortMod(PortMod {
                port_no,
                hw_addr,
                config,
                mask,
                advertise
            })
        ),
        any::<(u8, u32)>()
            .prop_map(|(table_id, config)| Message::TableMod(TableMod { table_id, config })),
        multipart_request().prop_map(Message::MultipartRequest),
        multipart_reply().prop_map(Message::MultipartReply),
        Just(Message::BarrierRequest),
        Just(Message::BarrierReply),
        any::<u32>().prop_map(Message::QueueGetConfigRequest),
        (
            any::<u32>(),
            vec(
                (
                    any::<u32>(),
                    any::<u32>(),
                    vec(
                        prop_oneof![
                            any::<u16>().prop_map(QueueProp::MinRate),
                            any::<u16>().prop_map(QueueProp::MaxRate),
                            (3u16.., bytes(12))
                                .prop_map(|(kind, data)| QueueProp::Other { kind, data })
                        ],
                        0..3
                    )
                )
                    .prop_map(|(queue_id, port, properties)| PacketQueue {
                        queue_id,
                        port,
                        properties
                    }),
                0..3
            )
        )
            .prop_map(
                |(port, queues)| Message::QueueGetConfigReply(QueueGetConfigReply { port, queues })
            ),
        any::<(u32, u64)>().prop_map(|(r, generation_id)| Message::RoleRequest(Role {
            role: ControllerRole::from(r),
            generation_id
        })),
        any::<(u32, u64)>().prop_map(|(r, generation_id)| Message::RoleReply(Role {
            role: ControllerRole::from(r),
            generation_id
        })),
        Just(Message::GetAsyncRequest),
    ];
    let async_cfg = any::<([u32; 2], [u32; 2], [u32; 2])>().prop_map(
        |(packet_in_mask, port_status_mask, flow_removed_mask)| AsyncConfig {
            packet_in_mask,
            port_status_mask,
            flow_removed_mask,
        },
    );
    let tlv_map =
        any::<(u16, u8, u8, u16)>().prop_map(|(option_class, option_type, option_len, index)| {
            TlvMap {
                option_class,
                option_type,
                option_len,
                index,
            }
        });
    let c = prop_oneof![
        async_cfg.clone().prop_map(Message::GetAsyncReply),
        async_cfg.clone().prop_map(Message::SetAsync),
        (any::<u16>(), any::<u16>(), any::<u32>(), vec(band(), 0..3)).prop_map(
            |(c, flags, meter_id, bands)| Message::MeterMod(MeterMod {
                command: MeterModCommand::from(c),
                flags,
                meter_id,
                bands
            })
        ),
        (any::<u32>(), any::<u16>(), any::<u16>(), bytes(16)).prop_map(
            |(bundle_id, t, flags, properties)| Message::BundleControl(BundleControl {
                bundle_id,
                ctrl_type: BundleCtrlType::from(t),
                flags,
                properties
            })
        ),
        (
            any::<u32>(),
            any::<u16>(),
            any::<u32>(),
            simple_message(),
            bytes(16)
        )
            .prop_map(|(bundle_id, flags, xid, m, properties)| Message::BundleAdd(
                BundleAdd {
                    bundle_id,
                    flags,
                    xid,
                    message: Box::new(m),
                    properties
                }
            )),
        vec((any::<u16>(), bytes(24)), 0..4)
            .prop_map(|props| Message::PacketIn2(PacketIn2 { props })),
        async_cfg.prop_map(Message::NxSetAsyncConfig),
        any::<u16>().prop_map(Message::SetControllerId),
        (any::<u16>(), vec(tlv_map.clone(), 0..3)).prop_map(|(command, mappings)| {
            Message::TlvTableMod(TlvTableMod { command, mappings })
        }),
        Just(Message::TlvTableRequest),
        any::<u32>().prop_map(Message::NxRoleRequest),
        any::<u32>().prop_map(Message::NxRoleReply),
        any::<u8>().prop_map(Message::FlowModTableId),
        any::<u32>().prop_map(Message::SetPacketInFormat),
        Just(Message::FlowAge),
        any::<u16>().prop_map(Message::CtFlushZone),
        (any::<u32>(), any::<u16>(), vec(tlv_map, 0..3)).prop_map(
            |(max_option_space, max_fields, mappings)| Message::TlvTableReply(TlvTableReply {
                max_option_space,
                max_fields,
                mappings
            })
        ),
        (30u8.., bytes(32)).prop_map(|(msg_type, body)| Message::Unknown { msg_type, body }),
    ];
    prop_oneof![a, b, c]
}

proptest! {
    // OFPROTO_PROPTEST_CASES raises the case count for long runs (default 2000).
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("OFPROTO_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
    ))]

    #[test]
    fn decode_inverts_encode(m in message(), xid in any::<u32>()) {
        let bytes = m.encode_to_vec(xid);
        prop_assume!(bytes.len() <= 65535);
        let (x, back) = Message::decode(&bytes).map_err(|e| TestCaseError::fail(format!("{e} for {m:?}")))?;
        prop_assert_eq!(x, xid);
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(back.encode_to_vec(xid), bytes);
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(body in vec(any::<u8>(), 0..512), t in 0u8..40) {
        let mut bytes = vec![4, t, 0, 0, 0, 0, 0, 1];
        bytes.extend_from_slice(&body);
        let len = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&len.to_be_bytes());
        let _ = Message::decode(&bytes);
    }

    #[test]
    fn decoding_mutated_messages_never_panics(m in message(), flips in vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<usize>()) {
        let mut bytes = m.encode_to_vec(7);
        for (at, v) in flips {
            let n = bytes.len();
            bytes[at % n] = v;
        }
        bytes[0] = 4;
        let keep = 8 + cut % (bytes.len() - 7);
        bytes.truncate(keep);
        let len = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&len.to_be_bytes());
        let _ = Message::decode(&bytes);
    }
}
