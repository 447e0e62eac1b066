//! Asynchronous-message configuration: OFPT_GET_ASYNC_REPLY, OFPT_SET_ASYNC and
//! NXT_SET_ASYNC_CONFIG, which carry the same masks.

use std::fmt::Write as _;

use crate::async_config::AsyncConfig;

use super::text::known_bit_names;

/// Packet-in reasons OpenFlow 1.3 defines.
const PACKET_IN_REASONS: &[(u32, &str)] = &[(1, "no_match"), (2, "action"), (4, "invalid_ttl")];

/// Port-status reasons.
const PORT_STATUS_REASONS: &[(u32, &str)] = &[(1, "add"), (2, "delete"), (4, "modify")];

/// Flow-removed reasons, with the ones OVS adds (meter delete, eviction).
const FLOW_REMOVED_REASONS: &[(u32, &str)] = &[
    (1, "idle"),
    (2, "hard"),
    (4, "delete"),
    (8, "group_delete"),
    (16, "meter_delete"),
    (32, "eviction"),
];

/// A block per role (`primary`, then `secondary`), one line per asynchronous message type;
/// the types OpenFlow 1.3 cannot configure show `(off)`.
pub(super) fn async_config(out: &mut String, config: &AsyncConfig) {
    for (index, role) in ["primary", "secondary"].iter().enumerate() {
        let _ = writeln!(out, "\n {role}:");
        for (label, mask, names) in [
            ("PACKET_IN", config.packet_in_mask[index], PACKET_IN_REASONS),
            (
                "PORT_STATUS",
                config.port_status_mask[index],
                PORT_STATUS_REASONS,
            ),
            (
                "FLOW_REMOVED",
                config.flow_removed_mask[index],
                FLOW_REMOVED_REASONS,
            ),
            ("ROLE_STATUS", 0, &[]),
            ("TABLE_STATUS", 0, &[]),
            ("REQUESTFORWARD", 0, &[]),
        ] {
            let reasons = known_bit_names(mask, names);
            let reasons = if reasons.is_empty() {
                "(off)".to_string()
            } else {
                reasons
            };
            let _ = writeln!(out, "{label:>16}: {reasons}");
        }
    }
}
