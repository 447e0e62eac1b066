//! OFPT_FLOW_REMOVED.

use bytes::BytesMut;

use crate::macros::code_enum;
use crate::matches::Match;
use crate::wire::{DecodeError, fixed, u8p, u16p, u32p, u64p};

code_enum! {
    /// `ofp_flow_removed_reason`.
    pub enum FlowRemovedReason: u8 {
        IdleTimeout = 0 => "idle",
        HardTimeout = 1 => "hard",
        Delete = 2 => "delete",
        GroupDelete = 3 => "group_delete",
        MeterDelete = 4 => "meter_delete",
        Eviction = 5 => "eviction",
    }
}

/// OFPT_FLOW_REMOVED body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowRemoved {
    /// The flow's cookie.
    pub cookie: u64,
    /// The flow's priority.
    pub priority: u16,
    /// Why it was removed.
    pub reason: FlowRemovedReason,
    /// Its table.
    pub table_id: u8,
    /// Seconds it lived.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Its idle timeout.
    pub idle_timeout: u16,
    /// Its hard timeout.
    pub hard_timeout: u16,
    /// Packets it matched.
    pub packet_count: u64,
    /// Bytes it matched.
    pub byte_count: u64,
    /// Its match.
    pub matching: Match,
}

impl FlowRemoved {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<FlowRemoved, DecodeError> {
        let (
            rest,
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
        ) = fixed(
            i,
            24,
            "flow_removed",
            (u64p, u16p, u8p, u8p, u32p, u32p, u16p, u16p),
        )?;
        let (rest, (packet_count, byte_count)) = fixed(rest, 16, "flow_removed", (u64p, u64p))?;
        let (_, matching) = Match::parse(rest)?;
        Ok(FlowRemoved {
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
            matching,
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u64::to_be_bytes(self.cookie));
        out.extend_from_slice(&u16::to_be_bytes(self.priority));
        out.extend_from_slice(&[self.reason.code()]);
        out.extend_from_slice(&[self.table_id]);
        out.extend_from_slice(&u32::to_be_bytes(self.duration_sec));
        out.extend_from_slice(&u32::to_be_bytes(self.duration_nsec));
        out.extend_from_slice(&u16::to_be_bytes(self.idle_timeout));
        out.extend_from_slice(&u16::to_be_bytes(self.hard_timeout));
        out.extend_from_slice(&u64::to_be_bytes(self.packet_count));
        out.extend_from_slice(&u64::to_be_bytes(self.byte_count));
        self.matching.emit(out);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_round_trip() {
        let fr = FlowRemoved {
            cookie: 1,
            priority: 2,
            reason: FlowRemovedReason::Delete,
            table_id: 3,
            duration_sec: 4,
            duration_nsec: 5,
            idle_timeout: 6,
            hard_timeout: 7,
            packet_count: 8,
            byte_count: 9,
            matching: Match::new().in_port(1),
        };
        let mut out = BytesMut::new();
        fr.emit(&mut out);
        assert_eq!(out.len(), 40 + 16);
        assert_eq!(&out[8..12], &[0, 2, 2, 3]);
        assert_eq!(FlowRemoved::parse(&out).unwrap(), fr);
        assert!(FlowRemoved::parse(&out[..50]).unwrap_err().is_truncated());
    }
}
