//! Multipart (stats) reply bodies: dispatch to the printer of each kind.

use std::fmt::Write as _;

use crate::multipart::{AggregateStats, Desc, MultipartReplyBody as Body};

/// Append the text after the header (and flags) of a multipart reply.
pub(super) fn body(out: &mut String, body: &Body) -> Result<(), &'static str> {
    match body {
        Body::Desc(desc) => description(out, desc),
        Body::Flow(entries) => {
            for entry in entries {
                let _ = write!(out, "\n{entry}");
            }
        }
        Body::Aggregate(aggregate) => aggregate_stats(out, aggregate),
        Body::Table(entries) => super::table::table_stats(out, entries),
        Body::PortStats(entries) => super::port::port_stats(out, entries)?,
        Body::Queue(entries) => super::queue::queue_stats(out, entries)?,
        Body::Group(entries) => super::group::group_stats(out, entries),
        Body::GroupDesc(entries) => super::group::group_desc(out, entries)?,
        Body::GroupFeatures(features) => super::group::group_features(out, features),
        Body::Meter(entries) => super::meter::meter_stats(out, entries),
        Body::MeterConfig(entries) => super::meter::meter_config(out, entries)?,
        Body::MeterFeatures(features) => super::meter::meter_features(out, features),
        Body::TableFeatures(tables) => super::table_features::table_features(out, tables)?,
        Body::PortDesc(ports) => {
            // OVS decodes every port before printing, and lists them in port-number order.
            if ports.iter().any(|p| !super::port::port_in_range(p.port_no)) {
                return Err("OFPBAC_BAD_OUT_PORT");
            }
            let mut ports: Vec<_> = ports.iter().collect();
            ports.sort_by_key(|port| port.port_no);
            for port in ports {
                out.push_str("\n ");
                super::port::port_desc(out, port)?;
            }
        }
        // Refused before the body by `super::decode_error`.
        Body::Experimenter(_) | Body::Unknown { .. } => {}
    }
    Ok(())
}

/// The switch description, one line per string.
fn description(out: &mut String, desc: &Desc) {
    let _ = write!(
        out,
        "\nManufacturer: {}\nHardware: {}\nSoftware: {}\nSerial Num: {}\nDP Description: {}",
        desc.mfr_desc, desc.hw_desc, desc.sw_desc, desc.serial_num, desc.dp_desc
    );
}

/// ` packet_count=7 byte_count=574 flow_count=6`.
fn aggregate_stats(out: &mut String, aggregate: &AggregateStats) {
    let _ = write!(
        out,
        " packet_count={} byte_count={} flow_count={}",
        aggregate.packet_count, aggregate.byte_count, aggregate.flow_count
    );
}
