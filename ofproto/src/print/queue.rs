//! Queues: the queue-config reply and queue statistics.

use std::fmt::Write as _;

use crate::multipart::QueueStats;
use crate::queue::{QueueGetConfigReply, QueueProp};

use super::text::{counter, duration, port_text};

/// A queue id: `ALL` for `OFPQ_ALL`.
pub(super) fn queue_text(queue_id: u32) -> String {
    match queue_id {
        0xffff_ffff => "ALL".into(),
        id => id.to_string(),
    }
}

/// ` min_rate:10.0%`: rates are tenths of a percent; above 1000 means disabled, and 0xffff (what
/// OVS stores for "not given") prints nothing.
fn rate(out: &mut String, name: &str, rate: u16) {
    match rate {
        0..=1000 => {
            let _ = write!(out, " {name}:{}.{}%", rate / 10, rate % 10);
        }
        0xffff => {}
        _ => {
            let _ = write!(out, " {name}:(disabled)");
        }
    }
}

/// ` port=1` and one `queue N: min_rate:... max_rate:...` line per queue. OpenFlow 1.3 gives
/// each queue the reply's port; OVS prints nothing for a reply without queues.
pub(super) fn config_reply(out: &mut String, reply: &QueueGetConfigReply) {
    if reply.queues.is_empty() {
        return;
    }
    let _ = write!(out, " port={}", port_text(reply.port));
    for queue in &reply.queues {
        let (mut min_rate, mut max_rate) = (0xffff, 0xffff);
        for property in &queue.properties {
            match property {
                QueueProp::MinRate(r) => min_rate = *r,
                QueueProp::MaxRate(r) => max_rate = *r,
                // The codec keeps a rate with non-zero padding opaque; OVS ignores the padding.
                QueueProp::Other {
                    kind: kind @ (1 | 2),
                    data,
                } if data.len() == 8 => {
                    let r = u16::from_be_bytes([data[0], data[1]]);
                    if *kind == 1 {
                        min_rate = r;
                    } else {
                        max_rate = r;
                    }
                }
                // OVS skips properties it does not know.
                QueueProp::Other { .. } => {}
            }
        }
        let _ = write!(out, "\nqueue {}:", queue.queue_id);
        rate(out, "min_rate", min_rate);
        rate(out, "max_rate", max_rate);
    }
}

/// ` 3 queues` and one line per queue.
/// OVS decodes the entries up to the first port it cannot hold, prints those, then the error.
pub(super) fn queue_stats(out: &mut String, entries: &[QueueStats]) -> Result<(), &'static str> {
    let good = entries
        .iter()
        .position(|e| !super::port::port_in_range(e.port_no))
        .unwrap_or(entries.len());
    let _ = write!(out, " {good} queues");
    for entry in &entries[..good] {
        let elapsed = if entry.duration_sec == u32::MAX {
            "?".to_string()
        } else {
            duration(entry.duration_sec, entry.duration_nsec)
        };
        let _ = write!(
            out,
            "\n  port {} queue {}: bytes={}, pkts={}, errors={}, duration={elapsed}",
            port_text(entry.port_no),
            queue_text(entry.queue_id),
            counter(entry.tx_bytes),
            counter(entry.tx_packets),
            counter(entry.tx_errors),
        );
    }
    if good < entries.len() {
        return Err("OFPBAC_BAD_OUT_PORT");
    }
    Ok(())
}
