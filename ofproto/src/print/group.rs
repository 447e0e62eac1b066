//! Groups: group statistics, group descriptions and group features. Group mods print through
//! their `Display` impl in [`crate::format`].

use std::fmt::Write as _;

use crate::group::{Bucket, GroupMod, GroupModCommand, GroupType, OFPG_ANY};
use crate::multipart::{GroupDesc, GroupFeatures, GroupStats};
use crate::port::OFPP_ANY;

use super::text::{action_bitmap, duration};

/// The checks OVS makes on a group's buckets as it decodes them: watch ports it can hold,
/// weights only for select groups, watches only for select and fast-failover groups (where
/// each bucket needs one), exactly one bucket in an indirect group being added or modified.
fn check_buckets(
    group_type: GroupType,
    buckets: &[Bucket],
    command: GroupModCommand,
) -> Result<(), &'static str> {
    if buckets
        .iter()
        .any(|b| !super::port::port_in_range(b.watch_port))
    {
        return Err("OFPGMFC_BAD_WATCH");
    }
    let watches = |b: &Bucket| b.watch_port != OFPP_ANY || b.watch_group != OFPG_ANY;
    match group_type {
        GroupType::Select => {}
        GroupType::All | GroupType::Indirect => {
            if buckets.iter().any(|b| b.weight != 0) {
                return Err("OFPGMFC_INVALID_GROUP");
            }
            if buckets.iter().any(watches) {
                return Err("OFPGMFC_WATCH_UNSUPPORTED");
            }
            if group_type == GroupType::Indirect
                && command != GroupModCommand::Delete
                && buckets.len() != 1
            {
                return Err("OFPGMFC_INVALID_GROUP");
            }
        }
        GroupType::FastFailover => {
            if buckets.iter().any(|b| b.weight != 0 || !watches(b)) {
                return Err("OFPGMFC_INVALID_GROUP");
            }
        }
        GroupType::Unknown(_) => return Err("OFPGMFC_BAD_TYPE"),
    }
    Ok(())
}

/// The group mod on its own line (its `Display` text); OVS refuses unknown commands and types
/// and the buckets [`check_buckets`] rejects.
pub(super) fn group_mod(out: &mut String, group_mod: &GroupMod) -> Result<(), &'static str> {
    if let GroupType::Unknown(_) = group_mod.group_type {
        return Err("OFPGMFC_BAD_TYPE");
    }
    if let GroupModCommand::Unknown(_) = group_mod.command {
        return Err("OFPGMFC_BAD_COMMAND");
    }
    check_buckets(group_mod.group_type, &group_mod.buckets, group_mod.command)?;
    let _ = write!(out, "\n {group_mod}");
    Ok(())
}

/// One line per group: ` group_id=1,duration=5s,ref_count=2,packet_count=...,bucket0:...`.
pub(super) fn group_stats(out: &mut String, entries: &[GroupStats]) {
    for entry in entries {
        let _ = write!(out, "\n group_id={}", entry.group_id);
        if entry.duration_sec != u32::MAX {
            let _ = write!(
                out,
                ",duration={}",
                duration(entry.duration_sec, entry.duration_nsec)
            );
        }
        let _ = write!(
            out,
            ",ref_count={},packet_count={},byte_count={}",
            entry.ref_count, entry.packet_count, entry.byte_count
        );
        for (index, (packets, bytes)) in entry.bucket_stats.iter().enumerate() {
            let _ = write!(
                out,
                ",bucket{index}:packet_count={packets},byte_count={bytes}"
            );
        }
    }
}

/// One line per group, `group_id=1,type=all,bucket=...`: the text of a group mod without its
/// command.
pub(super) fn group_desc(out: &mut String, entries: &[GroupDesc]) -> Result<(), &'static str> {
    for entry in entries {
        // OVS checks a description's watch ports, not the rules a group mod must follow.
        if entry
            .buckets
            .iter()
            .any(|b| !super::port::port_in_range(b.watch_port))
        {
            return Err("OFPGMFC_BAD_WATCH");
        }
        let as_mod = GroupMod {
            command: GroupModCommand::Add,
            group_type: entry.group_type,
            group_id: entry.group_id,
            buckets: entry.buckets.clone(),
        };
        let text = as_mod.to_string();
        let prefix = format!("{} ", GroupModCommand::Add);
        let text = text.strip_prefix(&prefix).unwrap_or(&text);
        // A group mod with an unknown type is refused; a description just says so.
        let text = match entry.group_type {
            GroupType::Unknown(code) => text.replacen(&format!(",type={code}"), ",type=unknown", 1),
            _ => text.to_string(),
        };
        let _ = write!(out, "\n {text}");
    }
    Ok(())
}

/// The group types OVS lists in group features, by type bit.
const GROUP_TYPES: [&str; 4] = ["all", "select", "indirect", "fast failover"];

/// ` Group table:` with the type and capability bitmaps, then each supported type's limits.
pub(super) fn group_features(out: &mut String, features: &GroupFeatures) {
    let _ = write!(
        out,
        "\n Group table:\n    Types:  0x{:x}\n    Capabilities:  0x{:x}",
        features.types, features.capabilities
    );
    for (index, name) in GROUP_TYPES.iter().enumerate() {
        if features.types & (1 << index) == 0 {
            continue;
        }
        let _ = write!(
            out,
            "\n    {name} group:\n       max_groups=0x{:x}\n       actions: {}",
            features.max_groups[index],
            action_bitmap(u64::from(features.actions[index]))
        );
    }
}
