//! Table features (OFPMP_TABLE_FEATURES request and reply bodies).
//!
//! OVS does not print the properties as sent: it folds them into bitmaps of what it supports
//! (instructions, actions, fields), drops what it does not know, and prints each table
//! relative to the one before: identical unnamed tables become "ditto", identical parts
//! "(same instructions)", "(same matching)"... This module rebuilds those bitmaps
//! ([`Summary`]) and reproduces the comparisons.

use std::fmt::Write as _;

use crate::multipart::{TableFeatureProp, TableFeatures};

use super::fields::{FIELD_NAMES, field_index};
use super::table::Ditto;
use super::text::action_bitmap;

/// A set of fields, one bit per entry of [`FIELD_NAMES`].
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct FieldSet([u64; 3]);

impl FieldSet {
    fn insert(&mut self, index: usize) {
        if let Some(word) = self.0.get_mut(index / 64) {
            *word |= 1 << (index % 64);
        }
    }

    fn contains(&self, index: usize) -> bool {
        self.0
            .get(index / 64)
            .is_some_and(|word| word & (1 << (index % 64)) != 0)
    }

    fn is_empty(&self) -> bool {
        self.0 == [0; 3]
    }

    fn and(self, other: FieldSet) -> FieldSet {
        FieldSet([0, 1, 2].map(|i| self.0[i] & other.0[i]))
    }

    fn without(self, other: FieldSet) -> FieldSet {
        FieldSet([0, 1, 2].map(|i| self.0[i] & !other.0[i]))
    }
}

/// OpenFlow instruction types OVS supports, in the order it lists them.
const INSTRUCTIONS: &[(u16, &str)] = &[
    (6, "meter"),
    (4, "apply_actions"),
    (5, "clear_actions"),
    (3, "write_actions"),
    (2, "write_metadata"),
    (1, "goto_table"),
];

/// What a table can do with write-actions or apply-actions.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct ActionFeatures {
    /// Bit `n`: OpenFlow action type `n` (only types below 64; others OVS does not support).
    actions: u64,
    set_fields: FieldSet,
}

impl ActionFeatures {
    fn is_empty(&self) -> bool {
        self.actions == 0 && self.set_fields.is_empty()
    }
}

/// The instruction features of the table-miss flow or of the other flows.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct InstructionFeatures {
    /// Bit `n`: table `n` is reachable with goto_table.
    next: [u64; 4],
    /// Bit `n`: instruction type `n`.
    instructions: u32,
    write: ActionFeatures,
    apply: ActionFeatures,
}

impl InstructionFeatures {
    fn is_empty(&self) -> bool {
        self.next == [0; 4]
            && self.instructions == 0
            && self.write.is_empty()
            && self.apply.is_empty()
    }

    fn has_next(&self, table: u8) -> bool {
        self.next[usize::from(table / 64)] & (1 << (table % 64)) != 0
    }

    /// Equality as OVS judges it between two tables' features: a table cannot go to itself or
    /// back, so table `n` reaching `n + 1` and table `n + 1` not reaching it is no difference.
    fn same_as(&self, table: u8, other: &InstructionFeatures, other_table: u8) -> bool {
        self.instructions == other.instructions
            && self.write == other.write
            && self.apply == other.apply
            && next_equal(self, table, other, other_table)
    }
}

fn next_equal(a: &InstructionFeatures, a_table: u8, b: &InstructionFeatures, b_table: u8) -> bool {
    if u16::from(b_table) == u16::from(a_table) + 1 && a.has_next(b_table) && !b.has_next(b_table) {
        let mut diff = [0u64; 4];
        for (index, word) in diff.iter_mut().enumerate() {
            *word = a.next[index] ^ b.next[index];
        }
        diff[usize::from(b_table / 64)] &= !(1 << (b_table % 64));
        diff == [0; 4]
    } else if u16::from(a_table) == u16::from(b_table) + 1 {
        next_equal(b, b_table, a, a_table)
    } else {
        a.next == b.next
    }
}

/// One table's features as OVS keeps them.
struct Summary<'a> {
    features: &'a TableFeatures,
    nonmiss: InstructionFeatures,
    miss: InstructionFeatures,
    matching: FieldSet,
    mask: FieldSet,
    wildcard: FieldSet,
}

impl Summary<'_> {
    fn same_as(&self, prev: &Summary<'_>) -> bool {
        let (table, prev_table) = (self.features.table_id, prev.features.table_id);
        self.features.metadata_match == prev.features.metadata_match
            && self.features.metadata_write == prev.features.metadata_write
            && self.features.max_entries == prev.features.max_entries
            && self.nonmiss.same_as(table, &prev.nonmiss, prev_table)
            && self.miss.same_as(table, &prev.miss, prev_table)
            && self.matching == prev.matching
    }
}

/// The fields named by a list of OXM headers, and those of them with the has-mask bit.
/// Headers OVS does not know (or with the wrong length) are skipped; an experimenter header is
/// followed by its experimenter id.
fn field_set(headers: &[u32]) -> (FieldSet, FieldSet) {
    let (mut fields, mut masked) = (FieldSet::default(), FieldSet::default());
    let mut iter = headers.iter();
    while let Some(&header) = iter.next() {
        let class = (header >> 16) as u16;
        let field = ((header >> 9) & 0x7f) as u8;
        let has_mask = header & 0x100 != 0;
        let mut len = header & 0xff;
        let mut experimenter = 0;
        if class == 0xffff {
            let Some(&id) = iter.next() else { break };
            experimenter = id;
            // The length covers the experimenter id too.
            len = len.saturating_sub(4);
        }
        if has_mask {
            if len % 2 != 0 {
                continue;
            }
            len /= 2;
        }
        let Ok(value_len) = u8::try_from(len) else {
            continue;
        };
        if let Some(index) = field_index(class, field, experimenter, value_len) {
            fields.insert(index);
            if has_mask {
                masked.insert(index);
            }
        }
    }
    (fields, masked)
}

/// The properties every table must carry (the table-miss ones default to these).
const REQUIRED: [u16; 8] = [0, 2, 4, 6, 8, 10, 12, 14];

/// Fold a table's properties into a [`Summary`], or the OVS error naming why it refuses them.
fn summarize(features: &TableFeatures) -> Result<Summary<'_>, &'static str> {
    let mut seen = 0u32;
    // Index 0: other flows, 1: table-miss; `None` until the property is seen.
    let mut next: [Option<[u64; 4]>; 2] = [None; 2];
    let mut instructions: [Option<u32>; 2] = [None; 2];
    let mut write_actions: [Option<u64>; 2] = [None; 2];
    let mut apply_actions: [Option<u64>; 2] = [None; 2];
    let mut write_fields: [Option<FieldSet>; 2] = [None; 2];
    let mut apply_fields: [Option<FieldSet>; 2] = [None; 2];
    let (mut matching, mut mask, mut wildcard) = Default::default();
    for property in &features.properties {
        match property {
            TableFeatureProp::Instructions { miss, ids } => {
                seen |= 1 << u8::from(*miss);
                let bits = ids
                    .iter()
                    .filter(|id| (1..=6).contains(&id.kind))
                    .fold(0, |bits, id| bits | 1 << id.kind);
                instructions[usize::from(*miss)] = Some(bits);
            }
            TableFeatureProp::NextTables { miss, tables } => {
                seen |= 1 << (2 + u8::from(*miss));
                let mut bits = [0u64; 4];
                for &table in tables {
                    if table == 0xff {
                        return Err("OFPBPC_BAD_VALUE");
                    }
                    bits[usize::from(table / 64)] |= 1 << (table % 64);
                }
                next[usize::from(*miss)] = Some(bits);
            }
            TableFeatureProp::Actions { write, miss, ids } => {
                let kind = if *write { 4 } else { 6 } + u8::from(*miss);
                seen |= 1 << kind;
                let bits = ids
                    .iter()
                    .filter(|id| id.kind < 64)
                    .fold(0, |bits, id| bits | 1 << id.kind);
                let slot = if *write {
                    &mut write_actions
                } else {
                    &mut apply_actions
                };
                slot[usize::from(*miss)] = Some(bits);
            }
            TableFeatureProp::Oxms { kind, headers } => {
                seen |= 1 << kind;
                let (fields, masked) = field_set(headers);
                match kind {
                    8 => (matching, mask) = (fields, masked),
                    10 => wildcard = fields,
                    12 | 13 => write_fields[usize::from(*kind == 13)] = Some(fields),
                    _ => apply_fields[usize::from(*kind == 15)] = Some(fields),
                }
            }
            TableFeatureProp::Other { kind, .. } => {
                if *kind < 32 {
                    seen |= 1 << kind;
                }
            }
        }
    }
    if REQUIRED.iter().any(|kind| seen & (1 << kind) == 0) {
        return Err("OFPTFFC_BAD_FEATURES");
    }
    let side = |miss: usize| InstructionFeatures {
        next: next[miss].or(next[0]).unwrap_or_default(),
        instructions: instructions[miss].or(instructions[0]).unwrap_or_default(),
        write: ActionFeatures {
            actions: write_actions[miss].or(write_actions[0]).unwrap_or_default(),
            set_fields: write_fields[miss].or(write_fields[0]).unwrap_or_default(),
        },
        apply: ActionFeatures {
            actions: apply_actions[miss].or(apply_actions[0]).unwrap_or_default(),
            set_fields: apply_fields[miss].or(apply_fields[0]).unwrap_or_default(),
        },
    };
    Ok(Summary {
        features,
        nonmiss: side(0),
        miss: side(1),
        matching,
        mask,
        wildcard,
    })
}

/// Field names as OVS lists them: in its field order, space-separated, compressed by
/// [`super::text::compress_names`].
fn field_names(set: FieldSet) -> String {
    let names: Vec<&str> = FIELD_NAMES
        .iter()
        .enumerate()
        .filter(|(index, _)| set.contains(*index))
        .map(|(_, name)| *name)
        .collect();
    super::text::compress_names(&names).join(" ")
}

fn action_features(out: &mut String, features: &ActionFeatures) {
    if features.actions != 0 {
        let _ = writeln!(out, "        actions: {}", action_bitmap(features.actions));
    }
    if !features.set_fields.is_empty() {
        let _ = writeln!(
            out,
            "        supported on Set-Field: {}",
            field_names(features.set_fields)
        );
    }
}

fn next_tables(out: &mut String, features: &InstructionFeatures) {
    let mut ranges = Vec::new();
    let mut table = 0u16;
    while table < 255 {
        if features.has_next(table as u8) {
            let start = table;
            while table + 1 < 255 && features.has_next((table + 1) as u8) {
                table += 1;
            }
            ranges.push(if start == table {
                start.to_string()
            } else {
                format!("{start}-{table}")
            });
        }
        table += 1;
    }
    let _ = writeln!(out, "      next tables: {}", ranges.join(","));
}

fn instruction_features(
    out: &mut String,
    features: &InstructionFeatures,
    prev: Option<&InstructionFeatures>,
) {
    if features.next != [0; 4] {
        next_tables(out, features);
    }
    if features.instructions != 0 {
        if prev.is_some_and(|p| p.instructions == features.instructions) {
            out.push_str("      (same instructions)\n");
        } else {
            let names: Vec<&str> = INSTRUCTIONS
                .iter()
                .filter(|(kind, _)| features.instructions & (1 << kind) != 0)
                .map(|(_, name)| *name)
                .collect();
            let _ = writeln!(out, "      instructions: {}", names.join(" "));
        }
    }
    let same_actions = prev.is_some_and(|p| p.write == features.write && p.apply == features.apply);
    if same_actions && !features.write.set_fields.is_empty() {
        out.push_str("      (same actions)\n");
    } else if features.write != features.apply {
        out.push_str("      Write-Actions features:\n");
        action_features(out, &features.write);
        out.push_str("      Apply-Actions features:\n");
        action_features(out, &features.apply);
    } else if !features.write.is_empty() {
        out.push_str("      Write-Actions and Apply-Actions features:\n");
        action_features(out, &features.write);
    }
}

/// Everything after `  table N:` for a table that is not a plain ditto.
fn table_body(out: &mut String, table: &Summary<'_>, prev: Option<&Summary<'_>>) {
    let features = table.features;
    if features.metadata_match != 0 || features.metadata_write != 0 {
        let hex = |v: u64| {
            if v == 0 {
                "0".to_string()
            } else {
                format!("{v:#x}")
            }
        };
        let _ = writeln!(
            out,
            "    metadata: match={} write={}",
            hex(features.metadata_match),
            hex(features.metadata_write)
        );
    }
    if features.max_entries != 0 {
        let _ = writeln!(out, "    max_entries={}", features.max_entries);
    }
    let id = features.table_id;
    let (prev_nonmiss, prev_miss) = (prev.map(|p| &p.nonmiss), prev.map(|p| &p.miss));
    let same_as_prev = prev.is_some_and(|p| {
        table.nonmiss.same_as(id, &p.nonmiss, p.features.table_id)
            && table.miss.same_as(id, &p.miss, p.features.table_id)
    });
    if same_as_prev {
        if !table.nonmiss.is_empty() {
            out.push_str("    (same instructions)\n");
        }
    } else if !table.nonmiss.same_as(id, &table.miss, id) {
        out.push_str("    instructions (other than table miss):\n");
        instruction_features(out, &table.nonmiss, prev_nonmiss);
        out.push_str("    instructions (table miss):\n");
        instruction_features(out, &table.miss, prev_miss);
    } else if !table.nonmiss.is_empty() {
        out.push_str("    instructions (table miss and others):\n");
        instruction_features(out, &table.nonmiss, prev_nonmiss);
    }
    if !table.matching.is_empty() {
        if prev.is_some_and(|p| p.matching == table.matching) {
            out.push_str("    (same matching)\n");
        } else {
            out.push_str("    matching:\n");
            let masked = table.matching.and(table.mask);
            let wildcard = table.matching.without(table.mask).and(table.wildcard);
            let exact = table.matching.without(table.mask).without(table.wildcard);
            for (set, label) in [
                (masked, "arbitrary mask"),
                (wildcard, "exact match or wildcard"),
                (exact, "must exact match"),
            ] {
                if !set.is_empty() {
                    let _ = writeln!(out, "      {label}: {}", field_names(set));
                }
            }
        }
    }
}

/// Print every table; on a table OVS refuses, the error OVS reports instead of the rest.
pub(super) fn table_features(
    out: &mut String,
    tables: &[TableFeatures],
) -> Result<(), &'static str> {
    let mut ditto = Ditto::default();
    let mut prev: Option<Summary<'_>> = None;
    for features in tables {
        let table = match summarize(features) {
            Ok(table) => table,
            Err(error) => {
                ditto.finish(out);
                return Err(error);
            }
        };
        let same = prev.as_ref().is_some_and(|p| table.same_as(p));
        let named = !features.name.is_empty();
        if same && !named {
            ditto.add(features.table_id);
        } else {
            ditto.finish(out);
            let _ = write!(out, "\n  table {}", features.table_id);
            if named {
                let _ = write!(out, " (\"{}\")", features.name);
            }
            out.push(':');
            if same {
                out.push_str(" ditto");
            } else {
                out.push('\n');
                table_body(out, &table, prev.as_ref());
            }
        }
        prev = Some(table);
    }
    ditto.finish(out);
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn headers_map_to_ovs_names() {
        let name = |class, field, experimenter, len| {
            field_index(class, field, experimenter, len).map(|i| FIELD_NAMES[i])
        };
        assert_eq!(name(0x8000, 4, 0, 6), Some("eth_src"));
        assert_eq!(name(0x0000, 2, 0, 6), Some("eth_src"));
        assert_eq!(name(0x0001, 40, 0, 12), Some("tun_metadata0"));
        assert_eq!(name(0x8000, 4, 0, 4), None);
    }
}
