//! Multipart reply entries: description, flow/aggregate/table/port/queue/group/meter statistics,
//! group descriptions and features, meter configuration and features.

use bytes::BytesMut;

use crate::fixed_str::FixedStr;
use crate::group::{Bucket, GroupType, emit_buckets, parse_buckets};
use crate::instruction::{Instruction, emit_instructions, parse_instructions};
use crate::matches::Match;
use crate::meter::{MeterBand, parse_bands};
use crate::wire::{
    DecodeError, PResult, fixed, patch_len, put_zeros, take, take_tlv, u8p, u16p, u32p, u64p,
};

/// Parse a list of entries filling all of `i`.
pub(crate) fn parse_all<'a, T>(
    i: &'a [u8],
    p: impl Fn(&'a [u8]) -> PResult<'a, T>,
) -> Result<Vec<T>, DecodeError> {
    parse_all_with_capacity(i, 0, p)
}

/// Parse entries that start with their own 16-bit length (flow stats, group stats, ...),
/// sizing the vector from a walk over those lengths first: a reply holds hundreds of entries.
/// Lengths below `min_len` (the entry's fixed part) stop the count, so the capacity never
/// exceeds `input length / min_len`.
pub(crate) fn parse_all_len16<'a, T>(
    i: &'a [u8],
    min_len: usize,
    p: impl Fn(&'a [u8]) -> PResult<'a, T>,
) -> Result<Vec<T>, DecodeError> {
    let (mut n, mut rest) = (0, i);
    while let Some(len) = rest
        .first_chunk::<2>()
        .map(|b| usize::from(u16::from_be_bytes(*b)))
    {
        if len < min_len.max(1) {
            break;
        }
        n += 1;
        rest = rest.get(len..).unwrap_or(&[]);
    }
    parse_all_with_capacity(i, n, p)
}

fn parse_all_with_capacity<'a, T>(
    mut i: &'a [u8],
    capacity: usize,
    p: impl Fn(&'a [u8]) -> PResult<'a, T>,
) -> Result<Vec<T>, DecodeError> {
    let mut v = Vec::with_capacity(capacity);
    while !i.is_empty() {
        let (r, t) = p(i)?;
        v.push(t);
        i = r;
    }
    Ok(v)
}

/// OFPMP_DESC reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Desc {
    /// Manufacturer.
    pub mfr_desc: FixedStr,
    /// Hardware.
    pub hw_desc: FixedStr,
    /// Software.
    pub sw_desc: FixedStr,
    /// Serial number.
    pub serial_num: FixedStr,
    /// Datapath description.
    pub dp_desc: FixedStr,
}

impl Desc {
    /// Parse.
    pub fn parse(i: &[u8]) -> Result<Desc, DecodeError> {
        let (_, b) = take(i, 1056, "desc reply")?;
        Ok(Desc {
            mfr_desc: FixedStr::parse_field(&b[..256]),
            hw_desc: FixedStr::parse_field(&b[256..512]),
            sw_desc: FixedStr::parse_field(&b[512..768]),
            serial_num: FixedStr::parse_field(&b[768..800]),
            dp_desc: FixedStr::parse_field(&b[800..1056]),
        })
    }

    /// Emit.
    pub fn emit(&self, out: &mut BytesMut) {
        self.mfr_desc.emit_field(out, 256);
        self.hw_desc.emit_field(out, 256);
        self.sw_desc.emit_field(out, 256);
        self.serial_num.emit_field(out, 32);
        self.dp_desc.emit_field(out, 256);
    }
}

/// One `ofp_flow_stats` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowStats {
    /// Table.
    pub table_id: u8,
    /// Seconds alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond that.
    pub duration_nsec: u32,
    /// Priority.
    pub priority: u16,
    /// Idle timeout.
    pub idle_timeout: u16,
    /// Hard timeout.
    pub hard_timeout: u16,
    /// `OFPFF_*` flags.
    pub flags: u16,
    /// Cookie.
    pub cookie: u64,
    /// Packets matched.
    pub packet_count: u64,
    /// Bytes matched.
    pub byte_count: u64,
    /// Match.
    pub matching: Match,
    /// Instructions.
    pub instructions: Vec<Instruction>,
}

impl FlowStats {
    /// Parse one entry.
    pub fn parse(i: &[u8]) -> PResult<'_, FlowStats> {
        let (_, len) = fixed(i, 2, "flow_stats", u16p)?;
        let (rest, b) = take_tlv(i, usize::from(len), 56, "flow_stats")?;
        let (
            r,
            (
                _,
                table_id,
                _pad,
                duration_sec,
                duration_nsec,
                priority,
                idle_timeout,
                hard_timeout,
                flags,
            ),
        ) = fixed(
            b,
            20,
            "flow_stats",
            (u16p, u8p, u8p, u32p, u32p, u16p, u16p, u16p, u16p),
        )?;
        let (r, (_pad, cookie, packet_count, byte_count)) =
            fixed(r, 28, "flow_stats", (u32p, u64p, u64p, u64p))?;
        let (r, matching) = Match::parse(r)?;
        Ok((
            rest,
            FlowStats {
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
                instructions: parse_instructions(r)?,
            },
        ))
    }

    /// Emit one entry.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        out.extend_from_slice(&u16::to_be_bytes(0));
        out.extend_from_slice(&[self.table_id]);
        out.extend_from_slice(&[0]);
        out.extend_from_slice(&u32::to_be_bytes(self.duration_sec));
        out.extend_from_slice(&u32::to_be_bytes(self.duration_nsec));
        out.extend_from_slice(&u16::to_be_bytes(self.priority));
        out.extend_from_slice(&u16::to_be_bytes(self.idle_timeout));
        out.extend_from_slice(&u16::to_be_bytes(self.hard_timeout));
        out.extend_from_slice(&u16::to_be_bytes(self.flags));
        out.extend_from_slice(&u32::to_be_bytes(0));
        out.extend_from_slice(&u64::to_be_bytes(self.cookie));
        out.extend_from_slice(&u64::to_be_bytes(self.packet_count));
        out.extend_from_slice(&u64::to_be_bytes(self.byte_count));
        self.matching.emit(out);
        emit_instructions(&self.instructions, out);
        patch_len(out, start, start);
    }
}

/// OFPMP_AGGREGATE reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AggregateStats {
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// Flows.
    pub flow_count: u32,
}

impl AggregateStats {
    /// Parse.
    pub fn parse(i: &[u8]) -> Result<AggregateStats, DecodeError> {
        let (_, (packet_count, byte_count, flow_count)) =
            fixed(i, 24, "aggregate reply", (u64p, u64p, u32p))?;
        Ok(AggregateStats {
            packet_count,
            byte_count,
            flow_count,
        })
    }

    /// Emit.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u64::to_be_bytes(self.packet_count));
        out.extend_from_slice(&u64::to_be_bytes(self.byte_count));
        out.extend_from_slice(&u32::to_be_bytes(self.flow_count));
        out.extend_from_slice(&u32::to_be_bytes(0));
    }
}

/// One `ofp_table_stats` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TableStats {
    /// Table.
    pub table_id: u8,
    /// Active entries.
    pub active_count: u32,
    /// Packets looked up.
    pub lookup_count: u64,
    /// Packets that hit.
    pub matched_count: u64,
}

impl TableStats {
    /// Parse one entry.
    pub fn parse(i: &[u8]) -> PResult<'_, TableStats> {
        let (r, (table_id, _a, _b, active_count, lookup_count, matched_count)) =
            fixed(i, 24, "table_stats", (u8p, u8p, u16p, u32p, u64p, u64p))?;
        Ok((
            r,
            TableStats {
                table_id,
                active_count,
                lookup_count,
                matched_count,
            },
        ))
    }

    /// Emit one entry.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&[self.table_id]);
        put_zeros(out, 3);
        out.extend_from_slice(&u32::to_be_bytes(self.active_count));
        out.extend_from_slice(&u64::to_be_bytes(self.lookup_count));
        out.extend_from_slice(&u64::to_be_bytes(self.matched_count));
    }
}

/// One `ofp_port_stats` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortStats {
    /// Port.
    pub port_no: u32,
    /// rx_packets, tx_packets, rx_bytes, tx_bytes, rx_dropped, tx_dropped, rx_errors,
    /// tx_errors, rx_frame_err, rx_over_err, rx_crc_err, collisions — in that order.
    pub counters: [u64; 12],
    /// Seconds the port has been up.
    pub duration_sec: u32,
    /// Nanoseconds beyond that.
    pub duration_nsec: u32,
}

impl PortStats {
    /// Parse one entry.
    pub fn parse(i: &[u8]) -> PResult<'_, PortStats> {
        let (rest, b) = take(i, 112, "port_stats")?;
        let (mut r, (port_no, _pad)) = fixed(b, 8, "port_stats", (u32p, u32p))?;
        let mut counters = [0u64; 12];
        for c in &mut counters {
            let (r2, v) = fixed(r, 8, "port_stats", u64p)?;
            *c = v;
            r = r2;
        }
        let (_, (duration_sec, duration_nsec)) = fixed(r, 8, "port_stats", (u32p, u32p))?;
        Ok((
            rest,
            PortStats {
                port_no,
                counters,
                duration_sec,
                duration_nsec,
            },
        ))
    }

    /// Emit one entry.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.port_no));
        out.extend_from_slice(&u32::to_be_bytes(0));
        for c in self.counters {
            out.extend_from_slice(&u64::to_be_bytes(c));
        }
        out.extend_from_slice(&u32::to_be_bytes(self.duration_sec));
        out.extend_from_slice(&u32::to_be_bytes(self.duration_nsec));
    }
}

/// One `ofp_queue_stats` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QueueStats {
    /// Port.
    pub port_no: u32,
    /// Queue.
    pub queue_id: u32,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets dropped for overrun.
    pub tx_errors: u64,
    /// Seconds the queue has existed.
    pub duration_sec: u32,
    /// Nanoseconds beyond that.
    pub duration_nsec: u32,
}

impl QueueStats {
    /// Parse one entry.
    pub fn parse(i: &[u8]) -> PResult<'_, QueueStats> {
        let (r, (port_no, queue_id, tx_bytes, tx_packets, tx_errors, duration_sec, duration_nsec)) =
            fixed(
                i,
                40,
                "queue_stats",
                (u32p, u32p, u64p, u64p, u64p, u32p, u32p),
            )?;
        Ok((
            r,
            QueueStats {
                port_no,
                queue_id,
                tx_bytes,
                tx_packets,
                tx_errors,
                duration_sec,
                duration_nsec,
            },
        ))
    }

    /// Emit one entry.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.port_no));
        out.extend_from_slice(&u32::to_be_bytes(self.queue_id));
        out.extend_from_slice(&u64::to_be_bytes(self.tx_bytes));
        out.extend_from_slice(&u64::to_be_bytes(self.tx_packets));
        out.extend_from_slice(&u64::to_be_bytes(self.tx_errors));
        out.extend_from_slice(&u32::to_be_bytes(self.duration_sec));
        out.extend_from_slice(&u32::to_be_bytes(self.duration_nsec));
    }
}

/// One `ofp_group_stats` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GroupStats {
    /// Group.
    pub group_id: u32,
    /// Flows or groups forwarding to it.
    pub ref_count: u32,
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// Seconds alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond that.
    pub duration_nsec: u32,
    /// Per bucket (packet_count, byte_count).
    pub bucket_stats: Vec<(u64, u64)>,
}

impl GroupStats {
    /// Parse one entry.
    pub fn parse(i: &[u8]) -> PResult<'_, GroupStats> {
        let (_, len) = fixed(i, 2, "group_stats", u16p)?;
        let (rest, b) = take_tlv(i, usize::from(len), 40, "group_stats")?;
        let (
            mut r,
            (
                _,
                _,
                group_id,
                ref_count,
                _pad,
                packet_count,
                byte_count,
                duration_sec,
                duration_nsec,
            ),
        ) = fixed(
            b,
            40,
            "group_stats",
            (u16p, u16p, u32p, u32p, u32p, u64p, u64p, u32p, u32p),
        )?;
        let mut bucket_stats = Vec::new();
        while !r.is_empty() {
            let (r2, s) = fixed(r, 16, "bucket_counter", (u64p, u64p))?;
            bucket_stats.push(s);
            r = r2;
        }
        Ok((
            rest,
            GroupStats {
                group_id,
                ref_count,
                packet_count,
                byte_count,
                duration_sec,
                duration_nsec,
                bucket_stats,
            },
        ))
    }

    /// Emit one entry.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        out.extend_from_slice(&u32::to_be_bytes(0));
        out.extend_from_slice(&u32::to_be_bytes(self.group_id));
        out.extend_from_slice(&u32::to_be_bytes(self.ref_count));
        out.extend_from_slice(&u32::to_be_bytes(0));
        out.extend_from_slice(&u64::to_be_bytes(self.packet_count));
        out.extend_from_slice(&u64::to_be_bytes(self.byte_count));
        out.extend_from_slice(&u32::to_be_bytes(self.duration_sec));
        out.extend_from_slice(&u32::to_be_bytes(self.duration_nsec));
        for (p, b) in &self.bucket_stats {
            out.extend_from_slice(&u64::to_be_bytes(*p));
            out.extend_from_slice(&u64::to_be_bytes(*b));
        }
        patch_len(out, start, start);
    }
}

/// One `ofp_group_desc` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupDesc {
    /// Group type.
    pub group_type: GroupType,
    /// Group.
    pub group_id: u32,
    /// Buckets.
    pub buckets: Vec<Bucket>,
}

impl GroupDesc {
    /// Parse one entry.
    pub fn parse(i: &[u8]) -> PResult<'_, GroupDesc> {
        let (_, len) = fixed(i, 2, "group_desc", u16p)?;
        let (rest, b) = take_tlv(i, usize::from(len), 8, "group_desc")?;
        let (r, (_, group_type, _pad, group_id)) =
            fixed(b, 8, "group_desc", (u16p, u8p, u8p, u32p))?;
        Ok((
            rest,
            GroupDesc {
                group_type: GroupType::from(group_type),
                group_id,
                buckets: parse_buckets(r)?,
            },
        ))
    }

    /// Emit one entry.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        out.extend_from_slice(&u16::to_be_bytes(0));
        out.extend_from_slice(&[self.group_type.code()]);
        out.extend_from_slice(&[0]);
        out.extend_from_slice(&u32::to_be_bytes(self.group_id));
        emit_buckets(&self.buckets, out);
        patch_len(out, start, start);
    }
}

/// OFPMP_GROUP_FEATURES reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GroupFeatures {
    /// Bitmap of supported group types.
    pub types: u32,
    /// `OFPGFC_*` bits.
    pub capabilities: u32,
    /// Maximum groups per type.
    pub max_groups: [u32; 4],
    /// Supported actions per type (bitmap of `OFPAT_*`).
    pub actions: [u32; 4],
}

impl GroupFeatures {
    /// Parse.
    pub fn parse(i: &[u8]) -> Result<GroupFeatures, DecodeError> {
        let (_, b) = take(i, 40, "group_features")?;
        let w = |n: usize| u32::from_be_bytes([b[4 * n], b[4 * n + 1], b[4 * n + 2], b[4 * n + 3]]);
        Ok(GroupFeatures {
            types: w(0),
            capabilities: w(1),
            max_groups: [w(2), w(3), w(4), w(5)],
            actions: [w(6), w(7), w(8), w(9)],
        })
    }

    /// Emit.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.types));
        out.extend_from_slice(&u32::to_be_bytes(self.capabilities));
        for v in self.max_groups.iter().chain(&self.actions) {
            out.extend_from_slice(&u32::to_be_bytes(*v));
        }
    }
}

/// One `ofp_meter_stats` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct MeterStats {
    /// Meter.
    pub meter_id: u32,
    /// Flows using it.
    pub flow_count: u32,
    /// Packets in.
    pub packet_in_count: u64,
    /// Bytes in.
    pub byte_in_count: u64,
    /// Seconds alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond that.
    pub duration_nsec: u32,
    /// Per band (packet_band_count, byte_band_count).
    pub band_stats: Vec<(u64, u64)>,
}

impl MeterStats {
    /// Parse one entry.
    pub fn parse(i: &[u8]) -> PResult<'_, MeterStats> {
        let (_, (meter_id, len)) = fixed(i, 6, "meter_stats", (u32p, u16p))?;
        let (rest, b) = take_tlv(i, usize::from(len), 40, "meter_stats")?;
        let (mut r, (flow_count, packet_in_count, byte_in_count, duration_sec, duration_nsec)) =
            fixed(&b[12..], 28, "meter_stats", (u32p, u64p, u64p, u32p, u32p))?;
        let mut band_stats = Vec::new();
        while !r.is_empty() {
            let (r2, s) = fixed(r, 16, "meter_band_stats", (u64p, u64p))?;
            band_stats.push(s);
            r = r2;
        }
        Ok((
            rest,
            MeterStats {
                meter_id,
                flow_count,
                packet_in_count,
                byte_in_count,
                duration_sec,
                duration_nsec,
                band_stats,
            },
        ))
    }

    /// Emit one entry.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        out.extend_from_slice(&u32::to_be_bytes(self.meter_id));
        out.extend_from_slice(&u16::to_be_bytes(0));
        put_zeros(out, 6);
        out.extend_from_slice(&u32::to_be_bytes(self.flow_count));
        out.extend_from_slice(&u64::to_be_bytes(self.packet_in_count));
        out.extend_from_slice(&u64::to_be_bytes(self.byte_in_count));
        out.extend_from_slice(&u32::to_be_bytes(self.duration_sec));
        out.extend_from_slice(&u32::to_be_bytes(self.duration_nsec));
        for (p, b) in &self.band_stats {
            out.extend_from_slice(&u64::to_be_bytes(*p));
            out.extend_from_slice(&u64::to_be_bytes(*b));
        }
        patch_len(out, start + 4, start);
    }
}

/// One `ofp_meter_config` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterConfig {
    /// `OFPMF_*` bits.
    pub flags: u16,
    /// Meter.
    pub meter_id: u32,
    /// Bands.
    pub bands: Vec<MeterBand>,
}

impl MeterConfig {
    /// Parse one entry.
    pub fn parse(i: &[u8]) -> PResult<'_, MeterConfig> {
        let (_, len) = fixed(i, 2, "meter_config", u16p)?;
        let (rest, b) = take_tlv(i, usize::from(len), 8, "meter_config")?;
        let (r, (_, flags, meter_id)) = fixed(b, 8, "meter_config", (u16p, u16p, u32p))?;
        Ok((
            rest,
            MeterConfig {
                flags,
                meter_id,
                bands: parse_bands(r)?,
            },
        ))
    }

    /// Emit one entry.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        out.extend_from_slice(&u16::to_be_bytes(0));
        out.extend_from_slice(&u16::to_be_bytes(self.flags));
        out.extend_from_slice(&u32::to_be_bytes(self.meter_id));
        for b in &self.bands {
            b.emit(out);
        }
        patch_len(out, start, start);
    }
}

/// OFPMP_METER_FEATURES reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MeterFeatures {
    /// Maximum meters.
    pub max_meter: u32,
    /// Bitmap of supported band types.
    pub band_types: u32,
    /// `OFPMF_*` bits supported.
    pub capabilities: u32,
    /// Maximum bands per meter.
    pub max_bands: u8,
    /// Maximum color value.
    pub max_color: u8,
}

impl MeterFeatures {
    /// Parse.
    pub fn parse(i: &[u8]) -> Result<MeterFeatures, DecodeError> {
        let (_, (max_meter, band_types, capabilities, max_bands, max_color)) =
            fixed(i, 16, "meter_features", (u32p, u32p, u32p, u8p, u8p))?;
        Ok(MeterFeatures {
            max_meter,
            band_types,
            capabilities,
            max_bands,
            max_color,
        })
    }

    /// Emit.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.max_meter));
        out.extend_from_slice(&u32::to_be_bytes(self.band_types));
        out.extend_from_slice(&u32::to_be_bytes(self.capabilities));
        out.extend_from_slice(&[self.max_bands]);
        out.extend_from_slice(&[self.max_color]);
        out.extend_from_slice(&u16::to_be_bytes(0));
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::action::Action;
    use crate::port::PortNo;

    /// table 0, 358.11521396s, priority 65535, cookie 0, match in_port=1, apply output:2.
    static FLOW_STATS_BYTES: [u8; 88] = [
        0x00, 0x58, 0x00, 0x00, 0x00, 0x00, 0x01, 0x66, 0x06, 0xde, 0x06,
        0x88, // len, table, duration
        0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, // prio, idle, hard, flags, pad
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0,
        0xee, // cookie, packets, bytes
        0x00, 0x01, 0x00, 0x0c, 0x80, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0, 0, 0,
        0, // match
        0x00, 0x04, 0x00, 0x18, 0, 0, 0, 0, // apply_actions
        0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, // output:2
    ];

    #[test]
    fn test_flow_stats_parse_emit() {
        let (rest, fs) = FlowStats::parse(&FLOW_STATS_BYTES).unwrap();
        assert!(rest.is_empty());
        assert_eq!(
            (fs.duration_sec, fs.duration_nsec, fs.priority),
            (358, 115_213_960, 0xffff)
        );
        assert_eq!((fs.packet_count, fs.byte_count), (3, 0xee));
        assert_eq!(fs.matching, Match::new().in_port(1));
        assert_eq!(
            fs.instructions,
            vec![Instruction::ApplyActions(vec![Action::output(PortNo(2))])]
        );
        let mut out = BytesMut::new();
        fs.emit(&mut out);
        assert_eq!(&out[..], &FLOW_STATS_BYTES[..]);
        assert_eq!(
            fs.to_string(),
            " cookie=0x0, duration=358.11521396s, table=0, n_packets=3, n_bytes=238, \
             priority=65535,in_port=1 actions=output:2"
        );
    }

    #[test]
    fn malformed_flow_stats() {
        assert!(
            FlowStats::parse(&FLOW_STATS_BYTES[..60])
                .unwrap_err()
                .is_truncated()
        );
        let mut short = FLOW_STATS_BYTES;
        short[1] = 0x10; // shorter than the fixed part
        assert!(matches!(
            FlowStats::parse(&short),
            Err(DecodeError::BadLength { .. })
        ));
    }

    #[test]
    fn desc_strings_round_trip() {
        let d = Desc {
            mfr_desc: "Nicira, Inc.".into(),
            hw_desc: "Open vSwitch".into(),
            sw_desc: "3.1.0".into(),
            serial_num: "None".into(),
            dp_desc: "br0".into(),
        };
        let mut out = BytesMut::new();
        d.emit(&mut out);
        assert_eq!(out.len(), 1056);
        assert_eq!(Desc::parse(&out).unwrap(), d);
    }
}
