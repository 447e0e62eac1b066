//! Meters: meter mod, meter statistics, meter configuration and meter features.

use std::fmt::Write as _;

use crate::meter::{MeterBand, MeterMod, MeterModCommand};
use crate::multipart::{MeterConfig, MeterFeatures, MeterStats};

use super::text::{bit_names, duration, meter_text};

/// `OFPMF_*` flag bits and their names.
const METER_FLAGS: &[(u16, &str)] = &[(1, "kbps"), (2, "pktps"), (4, "burst"), (8, "stats")];

/// `OFPMF_BURST`: band burst sizes are meaningful (and printed) only with it.
const OFPMF_BURST: u16 = 4;

/// `meter=1 kbps burst bands=` and one `type=... rate=...` line per band. OVS refuses bands of
/// types it does not implement (experimenter and unknown ones).
fn meter_text_and_bands(
    out: &mut String,
    meter_id: u32,
    flags: u16,
    bands: &[MeterBand],
) -> Result<(), &'static str> {
    // OVS decodes the whole entry before printing any of it.
    let bands = bands
        .iter()
        .map(ovs_band)
        .collect::<Option<Vec<_>>>()
        .ok_or("OFPMMFC_BAD_BAND")?;
    let _ = write!(out, "meter={} ", meter_text(meter_id));
    for (bit, name) in METER_FLAGS {
        if flags & bit != 0 {
            let _ = write!(out, "{name} ");
        }
    }
    let unknown = METER_FLAGS.iter().fold(flags, |rest, (bit, _)| rest & !bit);
    if unknown != 0 {
        let _ = write!(out, "flags:{unknown:#x} ");
    }
    out.push_str("bands=");
    for band in bands {
        let _ = write!(out, "\ntype={} rate={}", band.kind, band.rate);
        if flags & OFPMF_BURST != 0 {
            let _ = write!(out, " burst_size={}", band.burst_size);
        }
        if let Some(prec_level) = band.prec_level {
            let _ = write!(out, " prec_level={prec_level}");
        }
    }
    Ok(())
}

/// A band as OVS sees it.
struct Band {
    kind: &'static str,
    rate: u32,
    burst_size: u32,
    prec_level: Option<u8>,
}

/// The band OVS decodes, or `None` for a type it refuses. OVS ignores the padding, so a drop
/// or DSCP-remark band with non-zero padding (kept opaque by the codec) is still one.
fn ovs_band(band: &MeterBand) -> Option<Band> {
    Some(match *band {
        MeterBand::Drop { rate, burst_size } => Band {
            kind: "drop",
            rate,
            burst_size,
            prec_level: None,
        },
        MeterBand::DscpRemark {
            rate,
            burst_size,
            prec_level,
        } => Band {
            kind: "dscp_remark",
            rate,
            burst_size,
            prec_level: Some(prec_level),
        },
        MeterBand::Other {
            kind: kind @ (1 | 2),
            rate,
            burst_size,
            ref data,
        } if data.len() == 4 => Band {
            kind: if kind == 1 { "drop" } else { "dscp_remark" },
            rate,
            burst_size,
            prec_level: (kind == 2).then_some(data[0]),
        },
        MeterBand::Other { .. } => return None,
    })
}

/// ` ADD meter=1 kbps burst bands=` and the bands; OVS refuses unknown commands.
pub(super) fn meter_mod(out: &mut String, meter_mod: &MeterMod) -> Result<(), &'static str> {
    let command = match meter_mod.command {
        MeterModCommand::Add => "ADD",
        MeterModCommand::Modify => "MOD",
        MeterModCommand::Delete => "DEL",
        MeterModCommand::Unknown(_) => return Err("OFPMMFC_BAD_COMMAND"),
    };
    // A delete names only the meter: OVS does not look at its flags and bands.
    let (flags, bands) = match meter_mod.command {
        MeterModCommand::Delete => (0, &[][..]),
        _ => (meter_mod.flags, &meter_mod.bands[..]),
    };
    // A meter counts kilobits or packets, not both.
    if flags & 3 == 3 {
        return Err("OFPMMFC_BAD_FLAGS");
    }
    let mut body = String::new();
    meter_text_and_bands(&mut body, meter_mod.meter_id, flags, bands)?;
    let _ = write!(out, " {command} {body}");
    Ok(())
}

/// One block per meter: its counters and one line per band, blocks separated by blank lines.
pub(super) fn meter_stats(out: &mut String, entries: &[MeterStats]) {
    for entry in entries {
        let _ = writeln!(
            out,
            "\nmeter:{} flow_count:{} packet_in_count:{} byte_in_count:{} duration:{} bands:",
            meter_text(entry.meter_id),
            entry.flow_count,
            entry.packet_in_count,
            entry.byte_in_count,
            duration(entry.duration_sec, entry.duration_nsec)
        );
        for (index, (packets, bytes)) in entry.band_stats.iter().enumerate() {
            let _ = writeln!(out, "{index}: packet_count:{packets} byte_count:{bytes}");
        }
    }
}

/// One block per meter, as in a meter mod without the command.
pub(super) fn meter_config(out: &mut String, entries: &[MeterConfig]) -> Result<(), &'static str> {
    for entry in entries {
        let mut text = String::new();
        meter_text_and_bands(&mut text, entry.meter_id, entry.flags, &entry.bands)?;
        let _ = writeln!(out, "\n{text}");
    }
    Ok(())
}

/// `max_meter:... max_bands:... max_color:...`, the band types and the capabilities.
pub(super) fn meter_features(out: &mut String, features: &MeterFeatures) {
    let band_types = bit_names(
        features.band_types,
        &[(1 << 1, "drop"), (1 << 2, "dscp_remark")],
        " ",
    );
    let capabilities = bit_names(
        features.capabilities,
        &[(1, "kbps"), (2, "pktps"), (4, "burst"), (8, "stats")],
        " ",
    );
    let _ = write!(
        out,
        "\nmax_meter:{} max_bands:{} max_color:{}\nband_types: {band_types}\n\
         capabilities: {capabilities}",
        features.max_meter, features.max_bands, features.max_color
    );
}
