//! Table mod and table statistics, and the "ditto" bookkeeping OVS uses when it lists tables
//! (shared with table features).

use std::fmt::Write as _;

use crate::multipart::TableStats;
use crate::table_mod::TableMod;

/// ` table_id=1`, or ` table_id: ALL_TABLES` for 0xff. OpenFlow 1.3 gives the config bits no
/// meaning (1.1/1.2 table-miss, 1.4 eviction), so OVS shows none.
pub(super) fn table_mod(out: &mut String, table_mod: &TableMod) {
    if table_mod.table_id == 0xff {
        out.push_str(" table_id: ALL_TABLES");
    } else {
        let _ = write!(out, " table_id={}", table_mod.table_id);
    }
}

/// Consecutive unnamed tables identical to the one before are not printed one by one: OVS
/// collects them and prints `table 3: ditto` or `tables 2...5: ditto` when the run ends.
#[derive(Default)]
pub(super) struct Ditto {
    run: Option<(u8, u8)>,
}

impl Ditto {
    /// Extend the run with `table`.
    pub(super) fn add(&mut self, table: u8) {
        self.run = Some(match self.run {
            Some((first, _)) => (first, table),
            None => (table, table),
        });
    }

    /// Print and forget the pending run, if any.
    pub(super) fn finish(&mut self, out: &mut String) {
        match self.run.take() {
            Some((first, last)) if first == last => {
                let _ = writeln!(out, "\n  table {first}: ditto");
            }
            Some((first, last)) => {
                let _ = writeln!(out, "\n  tables {first}...{last}: ditto");
            }
            None => {}
        }
    }
}

/// One block per table with its counters; tables whose counters equal the previous table's
/// are dittoed.
pub(super) fn table_stats(out: &mut String, entries: &[TableStats]) {
    let mut ditto = Ditto::default();
    let counters = |t: &TableStats| (t.active_count, t.lookup_count, t.matched_count);
    for (index, entry) in entries.iter().enumerate() {
        let same = index > 0 && counters(&entries[index - 1]) == counters(entry);
        if same {
            ditto.add(entry.table_id);
            continue;
        }
        ditto.finish(out);
        let _ = writeln!(
            out,
            "\n  table {}:\n    active={}, lookup={}, matched={}",
            entry.table_id, entry.active_count, entry.lookup_count, entry.matched_count
        );
    }
    ditto.finish(out);
}
