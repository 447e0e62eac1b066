//! Flow removed, and the flow-stats/aggregate request body. Flow mods and flow-stats replies
//! print through their `Display` impls in [`crate::format`].

use std::fmt::Write as _;

use crate::flow_removed::FlowRemoved;
use crate::format::format_match;
use crate::multipart::FlowStatsRequest;
use crate::port::OFPP_ANY;

use super::text::{duration, port_text};

/// ` priority=...,match reason=idle table_id=... cookie:... duration... idle... pkts... bytes...`.
pub(super) fn flow_removed(out: &mut String, removed: &FlowRemoved) {
    let matching = format_match(&removed.matching, Some(removed.priority));
    let _ = write!(out, " {matching} reason={}", removed.reason);
    if removed.table_id != 0xff {
        let _ = write!(out, " table_id={}", removed.table_id);
    }
    if removed.cookie != 0 {
        let _ = write!(out, " cookie:{:#x}", removed.cookie);
    }
    let _ = write!(
        out,
        " duration{} idle{}",
        duration(removed.duration_sec, removed.duration_nsec),
        removed.idle_timeout
    );
    if removed.hard_timeout != 0 {
        let _ = write!(out, " hard{}", removed.hard_timeout);
    }
    let _ = write!(
        out,
        " pkts{} bytes{}",
        removed.packet_count, removed.byte_count
    );
}

/// ` table=1 out_port=2 in_port=5`: OVS leaves out the cookie and out_group selectors.
pub(super) fn flow_stats_request(out: &mut String, request: &FlowStatsRequest) {
    if request.table_id != 0xff {
        let _ = write!(out, " table={}", request.table_id);
    }
    if request.out_port != OFPP_ANY {
        let _ = write!(out, " out_port={}", port_text(request.out_port));
    }
    let matching = format_match(&request.matching, None);
    if !matching.is_empty() {
        let _ = write!(out, " {matching}");
    }
}
