//! OFPT_MULTIPART_REQUEST / OFPT_MULTIPART_REPLY: every OpenFlow 1.3 multipart type.
//!
//! Contract: the body is decoded by the multipart type in the header; an unknown type keeps its
//! bytes. A reply with `more` set is one part; joining parts is the caller's job (ofctrl).

pub mod stats;
pub mod table_features;

use bytes::{Bytes, BytesMut};

use crate::macros::code_enum;
use crate::matches::Match;
use crate::port::{OFPP_ANY, Port};
use crate::wire::{DecodeError, fixed, put_zeros, u8p, u16p, u32p, u64p};

pub use stats::{
    AggregateStats, Desc, FlowStats, GroupDesc, GroupFeatures, GroupStats, MeterConfig,
    MeterFeatures, MeterStats, PortStats, QueueStats, TableStats,
};
pub use table_features::{FeatureId, TableFeatureProp, TableFeatures};

use stats::{parse_all, parse_all_len16};

code_enum! {
    /// `ofp_multipart_type`.
    pub enum MultipartType: u16 {
        Desc = 0 => "OFPMP_DESC",
        Flow = 1 => "OFPMP_FLOW",
        Aggregate = 2 => "OFPMP_AGGREGATE",
        Table = 3 => "OFPMP_TABLE",
        PortStats = 4 => "OFPMP_PORT_STATS",
        Queue = 5 => "OFPMP_QUEUE",
        Group = 6 => "OFPMP_GROUP",
        GroupDesc = 7 => "OFPMP_GROUP_DESC",
        GroupFeatures = 8 => "OFPMP_GROUP_FEATURES",
        Meter = 9 => "OFPMP_METER",
        MeterConfig = 10 => "OFPMP_METER_CONFIG",
        MeterFeatures = 11 => "OFPMP_METER_FEATURES",
        TableFeatures = 12 => "OFPMP_TABLE_FEATURES",
        PortDesc = 13 => "OFPMP_PORT_DESC",
        Experimenter = 0xffff => "OFPMP_EXPERIMENTER",
    }
}

/// `OFPMPF_REQ_MORE` / `OFPMPF_REPLY_MORE`.
pub const MULTIPART_MORE: u16 = 1;

/// The request of OFPMP_FLOW and OFPMP_AGGREGATE.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowStatsRequest {
    /// Table (0xff = all).
    pub table_id: u8,
    /// Require output to this port (`OFPP_ANY` = any).
    pub out_port: u32,
    /// Require output to this group (`OFPG_ANY` = any).
    pub out_group: u32,
    /// Cookie bits to match.
    pub cookie: u64,
    /// Which cookie bits.
    pub cookie_mask: u64,
    /// Flows the match covers.
    pub matching: Match,
}

impl Default for FlowStatsRequest {
    fn default() -> Self {
        FlowStatsRequest {
            table_id: 0xff,
            out_port: OFPP_ANY,
            out_group: crate::group::OFPG_ANY,
            cookie: 0,
            cookie_mask: 0,
            matching: Match::new(),
        }
    }
}

impl FlowStatsRequest {
    fn parse(i: &[u8]) -> Result<FlowStatsRequest, DecodeError> {
        let (r, (table_id, _a, _b, out_port, out_group, _c, cookie, cookie_mask)) = fixed(
            i,
            32,
            "flow_stats_request",
            (u8p, u8p, u16p, u32p, u32p, u32p, u64p, u64p),
        )?;
        let (_, matching) = Match::parse(r)?;
        Ok(FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie,
            cookie_mask,
            matching,
        })
    }

    fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&[self.table_id]);
        put_zeros(out, 3);
        out.extend_from_slice(&u32::to_be_bytes(self.out_port));
        out.extend_from_slice(&u32::to_be_bytes(self.out_group));
        out.extend_from_slice(&u32::to_be_bytes(0));
        out.extend_from_slice(&u64::to_be_bytes(self.cookie));
        out.extend_from_slice(&u64::to_be_bytes(self.cookie_mask));
        self.matching.emit(out);
    }
}

/// An experimenter multipart body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExperimenterBody {
    /// Experimenter id.
    pub experimenter: u32,
    /// Experimenter-defined type.
    pub exp_type: u32,
    /// The rest.
    pub data: Bytes,
}

impl ExperimenterBody {
    fn parse(i: &[u8]) -> Result<ExperimenterBody, DecodeError> {
        let (data, (experimenter, exp_type)) = fixed(i, 8, "experimenter multipart", (u32p, u32p))?;
        Ok(ExperimenterBody {
            experimenter,
            exp_type,
            data: Bytes::copy_from_slice(data),
        })
    }

    fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.experimenter));
        out.extend_from_slice(&u32::to_be_bytes(self.exp_type));
        out.extend_from_slice(&self.data);
    }
}

/// A multipart request body, by type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultipartRequestBody {
    /// OFPMP_DESC.
    Desc,
    /// OFPMP_FLOW.
    Flow(FlowStatsRequest),
    /// OFPMP_AGGREGATE.
    Aggregate(FlowStatsRequest),
    /// OFPMP_TABLE.
    Table,
    /// OFPMP_PORT_STATS for one port or `OFPP_ANY`.
    PortStats {
        /// Port.
        port_no: u32,
    },
    /// OFPMP_QUEUE.
    Queue {
        /// Port (`OFPP_ANY` = all).
        port_no: u32,
        /// Queue (`OFPQ_ALL` = all).
        queue_id: u32,
    },
    /// OFPMP_GROUP.
    Group {
        /// Group (`OFPG_ALL` = all).
        group_id: u32,
    },
    /// OFPMP_GROUP_DESC.
    GroupDesc,
    /// OFPMP_GROUP_FEATURES.
    GroupFeatures,
    /// OFPMP_METER.
    Meter {
        /// Meter (`OFPM_ALL` = all).
        meter_id: u32,
    },
    /// OFPMP_METER_CONFIG.
    MeterConfig {
        /// Meter (`OFPM_ALL` = all).
        meter_id: u32,
    },
    /// OFPMP_METER_FEATURES.
    MeterFeatures,
    /// OFPMP_TABLE_FEATURES: empty to query, entries to set.
    TableFeatures(Vec<TableFeatures>),
    /// OFPMP_PORT_DESC.
    PortDesc,
    /// OFPMP_EXPERIMENTER.
    Experimenter(ExperimenterBody),
    /// A multipart type this crate does not know.
    Unknown {
        /// Multipart type.
        kind: u16,
        /// Body.
        data: Bytes,
    },
}

/// OFPT_MULTIPART_REQUEST.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultipartRequest {
    /// `OFPMPF_REQ_*` flags.
    pub flags: u16,
    /// The body.
    pub body: MultipartRequestBody,
}

impl MultipartRequest {
    /// A request with no flags.
    pub fn new(body: MultipartRequestBody) -> MultipartRequest {
        MultipartRequest { flags: 0, body }
    }

    /// The multipart type of the body.
    pub fn kind(&self) -> MultipartType {
        use MultipartRequestBody as B;
        MultipartType::from(match &self.body {
            B::Desc => 0,
            B::Flow(_) => 1,
            B::Aggregate(_) => 2,
            B::Table => 3,
            B::PortStats { .. } => 4,
            B::Queue { .. } => 5,
            B::Group { .. } => 6,
            B::GroupDesc => 7,
            B::GroupFeatures => 8,
            B::Meter { .. } => 9,
            B::MeterConfig { .. } => 10,
            B::MeterFeatures => 11,
            B::TableFeatures(_) => 12,
            B::PortDesc => 13,
            B::Experimenter(_) => 0xffff,
            B::Unknown { kind, .. } => *kind,
        })
    }

    /// Parse the message body (after the OpenFlow header).
    pub fn parse(i: &[u8]) -> Result<MultipartRequest, DecodeError> {
        use MultipartRequestBody as B;
        let (b, (kind, flags, _pad)) = fixed(i, 8, "multipart request", (u16p, u16p, u32p))?;
        let u32_of = |what| fixed(b, 4, what, u32p).map(|(_, v)| v);
        let body = match kind {
            0 => B::Desc,
            1 => B::Flow(FlowStatsRequest::parse(b)?),
            2 => B::Aggregate(FlowStatsRequest::parse(b)?),
            3 => B::Table,
            4 => B::PortStats {
                port_no: u32_of("port_stats request")?,
            },
            5 => {
                let (_, (port_no, queue_id)) = fixed(b, 8, "queue_stats request", (u32p, u32p))?;
                B::Queue { port_no, queue_id }
            }
            6 => B::Group {
                group_id: u32_of("group_stats request")?,
            },
            7 => B::GroupDesc,
            8 => B::GroupFeatures,
            9 => B::Meter {
                meter_id: u32_of("meter_stats request")?,
            },
            10 => B::MeterConfig {
                meter_id: u32_of("meter_config request")?,
            },
            11 => B::MeterFeatures,
            12 => B::TableFeatures(table_features::parse_table_features(b)?),
            13 => B::PortDesc,
            0xffff => B::Experimenter(ExperimenterBody::parse(b)?),
            _ => B::Unknown {
                kind,
                data: Bytes::copy_from_slice(b),
            },
        };
        Ok(MultipartRequest { flags, body })
    }

    /// Append the message body.
    pub fn emit(&self, out: &mut BytesMut) {
        use MultipartRequestBody as B;
        out.extend_from_slice(&u16::to_be_bytes(self.kind().code()));
        out.extend_from_slice(&u16::to_be_bytes(self.flags));
        out.extend_from_slice(&u32::to_be_bytes(0));
        match &self.body {
            B::Desc
            | B::Table
            | B::GroupDesc
            | B::GroupFeatures
            | B::MeterFeatures
            | B::PortDesc => {}
            B::Flow(r) | B::Aggregate(r) => r.emit(out),
            B::PortStats { port_no } => {
                out.extend_from_slice(&u32::to_be_bytes(*port_no));
                out.extend_from_slice(&u32::to_be_bytes(0));
            }
            B::Queue { port_no, queue_id } => {
                out.extend_from_slice(&u32::to_be_bytes(*port_no));
                out.extend_from_slice(&u32::to_be_bytes(*queue_id));
            }
            B::Group { group_id } => {
                out.extend_from_slice(&u32::to_be_bytes(*group_id));
                out.extend_from_slice(&u32::to_be_bytes(0));
            }
            B::Meter { meter_id } | B::MeterConfig { meter_id } => {
                out.extend_from_slice(&u32::to_be_bytes(*meter_id));
                out.extend_from_slice(&u32::to_be_bytes(0));
            }
            B::TableFeatures(t) => t.iter().for_each(|t| t.emit(out)),
            B::Experimenter(e) => e.emit(out),
            B::Unknown { data, .. } => out.extend_from_slice(data),
        }
    }
}

/// A multipart reply body, by type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultipartReplyBody {
    /// OFPMP_DESC.
    Desc(Desc),
    /// OFPMP_FLOW.
    Flow(Vec<FlowStats>),
    /// OFPMP_AGGREGATE.
    Aggregate(AggregateStats),
    /// OFPMP_TABLE.
    Table(Vec<TableStats>),
    /// OFPMP_PORT_STATS.
    PortStats(Vec<PortStats>),
    /// OFPMP_QUEUE.
    Queue(Vec<QueueStats>),
    /// OFPMP_GROUP.
    Group(Vec<GroupStats>),
    /// OFPMP_GROUP_DESC.
    GroupDesc(Vec<GroupDesc>),
    /// OFPMP_GROUP_FEATURES.
    GroupFeatures(GroupFeatures),
    /// OFPMP_METER.
    Meter(Vec<MeterStats>),
    /// OFPMP_METER_CONFIG.
    MeterConfig(Vec<MeterConfig>),
    /// OFPMP_METER_FEATURES.
    MeterFeatures(MeterFeatures),
    /// OFPMP_TABLE_FEATURES.
    TableFeatures(Vec<TableFeatures>),
    /// OFPMP_PORT_DESC.
    PortDesc(Vec<Port>),
    /// OFPMP_EXPERIMENTER.
    Experimenter(ExperimenterBody),
    /// A multipart type this crate does not know.
    Unknown {
        /// Multipart type.
        kind: u16,
        /// Body.
        data: Bytes,
    },
}

/// OFPT_MULTIPART_REPLY.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultipartReply {
    /// `OFPMPF_REPLY_MORE` when more parts follow.
    pub flags: u16,
    /// The body.
    pub body: MultipartReplyBody,
}

impl MultipartReply {
    /// Whether more parts follow.
    pub fn more(&self) -> bool {
        self.flags & MULTIPART_MORE != 0
    }

    /// The multipart type of the body.
    pub fn kind(&self) -> MultipartType {
        use MultipartReplyBody as B;
        MultipartType::from(match &self.body {
            B::Desc(_) => 0,
            B::Flow(_) => 1,
            B::Aggregate(_) => 2,
            B::Table(_) => 3,
            B::PortStats(_) => 4,
            B::Queue(_) => 5,
            B::Group(_) => 6,
            B::GroupDesc(_) => 7,
            B::GroupFeatures(_) => 8,
            B::Meter(_) => 9,
            B::MeterConfig(_) => 10,
            B::MeterFeatures(_) => 11,
            B::TableFeatures(_) => 12,
            B::PortDesc(_) => 13,
            B::Experimenter(_) => 0xffff,
            B::Unknown { kind, .. } => *kind,
        })
    }

    /// Parse the message body (after the OpenFlow header).
    pub fn parse(i: &[u8]) -> Result<MultipartReply, DecodeError> {
        use MultipartReplyBody as B;
        let (b, (kind, flags, _pad)) = fixed(i, 8, "multipart reply", (u16p, u16p, u32p))?;
        let body = match kind {
            0 => B::Desc(Desc::parse(b)?),
            1 => B::Flow(parse_all_len16(b, 56, FlowStats::parse)?),
            2 => B::Aggregate(AggregateStats::parse(b)?),
            3 => B::Table(parse_all(b, TableStats::parse)?),
            4 => B::PortStats(parse_all(b, PortStats::parse)?),
            5 => B::Queue(parse_all(b, QueueStats::parse)?),
            6 => B::Group(parse_all_len16(b, 40, GroupStats::parse)?),
            7 => B::GroupDesc(parse_all_len16(b, 8, GroupDesc::parse)?),
            8 => B::GroupFeatures(GroupFeatures::parse(b)?),
            9 => B::Meter(parse_all(b, MeterStats::parse)?),
            10 => B::MeterConfig(parse_all_len16(b, 8, MeterConfig::parse)?),
            11 => B::MeterFeatures(MeterFeatures::parse(b)?),
            12 => B::TableFeatures(table_features::parse_table_features(b)?),
            13 => B::PortDesc(parse_all(b, Port::parse)?),
            0xffff => B::Experimenter(ExperimenterBody::parse(b)?),
            _ => B::Unknown {
                kind,
                data: Bytes::copy_from_slice(b),
            },
        };
        Ok(MultipartReply { flags, body })
    }

    /// Append the message body.
    pub fn emit(&self, out: &mut BytesMut) {
        use MultipartReplyBody as B;
        out.extend_from_slice(&u16::to_be_bytes(self.kind().code()));
        out.extend_from_slice(&u16::to_be_bytes(self.flags));
        out.extend_from_slice(&u32::to_be_bytes(0));
        match &self.body {
            B::Desc(d) => d.emit(out),
            B::Flow(v) => v.iter().for_each(|e| e.emit(out)),
            B::Aggregate(a) => a.emit(out),
            B::Table(v) => v.iter().for_each(|e| e.emit(out)),
            B::PortStats(v) => v.iter().for_each(|e| e.emit(out)),
            B::Queue(v) => v.iter().for_each(|e| e.emit(out)),
            B::Group(v) => v.iter().for_each(|e| e.emit(out)),
            B::GroupDesc(v) => v.iter().for_each(|e| e.emit(out)),
            B::GroupFeatures(g) => g.emit(out),
            B::Meter(v) => v.iter().for_each(|e| e.emit(out)),
            B::MeterConfig(v) => v.iter().for_each(|e| e.emit(out)),
            B::MeterFeatures(m) => m.emit(out),
            B::TableFeatures(v) => v.iter().for_each(|e| e.emit(out)),
            B::PortDesc(v) => v.iter().for_each(|e| e.emit(out)),
            B::Experimenter(e) => e.emit(out),
            B::Unknown { data, .. } => out.extend_from_slice(data),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn port_desc_request_bytes() {
        let r = MultipartRequest::new(MultipartRequestBody::PortDesc);
        let mut out = BytesMut::new();
        r.emit(&mut out);
        assert_eq!(&out[..], &[0, 13, 0, 0, 0, 0, 0, 0]);
        assert_eq!(MultipartRequest::parse(&out).unwrap(), r);
    }

    #[test]
    fn flow_request_round_trip() {
        let r = MultipartRequest::new(MultipartRequestBody::Flow(FlowStatsRequest::default()));
        let mut out = BytesMut::new();
        r.emit(&mut out);
        assert_eq!(out.len(), 8 + 32 + 8);
        assert_eq!(MultipartRequest::parse(&out).unwrap(), r);
        assert!(
            MultipartRequest::parse(&out[..30])
                .unwrap_err()
                .is_truncated()
        );
    }

    #[test]
    fn unknown_kind_kept() {
        let body = [0, 77, 0, 1, 0, 0, 0, 0, 1, 2, 3];
        let r = MultipartReply::parse(&body).unwrap();
        assert!(r.more());
        assert_eq!(r.kind(), MultipartType::Unknown(77));
        let mut out = BytesMut::new();
        r.emit(&mut out);
        assert_eq!(&out[..], &body[..]);
    }
}
