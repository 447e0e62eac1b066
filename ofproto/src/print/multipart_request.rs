//! Multipart (stats) request bodies: the selector each request carries.

use std::fmt::Write as _;

use crate::multipart::MultipartRequestBody as Body;

use super::text::{group_text, meter_text, port_text};

/// Append the text after the header (and flags) of a multipart request.
pub(super) fn body(out: &mut String, body: &Body) -> Result<(), &'static str> {
    match body {
        Body::Desc | Body::Table | Body::GroupFeatures | Body::MeterFeatures => {}
        Body::PortDesc => out.push_str(" port=ANY"),
        Body::GroupDesc => out.push_str(" group_id=ALL"),
        Body::Flow(request) | Body::Aggregate(request) => {
            super::flow::flow_stats_request(out, request);
        }
        Body::PortStats { port_no } | Body::Queue { port_no, .. }
            if !super::port::port_in_range(*port_no) =>
        {
            return Err("OFPBAC_BAD_OUT_PORT");
        }
        Body::PortStats { port_no } => {
            let _ = write!(out, " port_no={}", port_text(*port_no));
        }
        Body::Queue { port_no, queue_id } => {
            let _ = write!(
                out,
                " port={} queue={}",
                port_text(*port_no),
                super::queue::queue_text(*queue_id)
            );
        }
        Body::Group { group_id } => {
            let _ = write!(out, " group_id={}", group_text(*group_id));
        }
        Body::Meter { meter_id } | Body::MeterConfig { meter_id } => {
            let _ = write!(out, " meter={}", meter_text(*meter_id));
        }
        Body::TableFeatures(tables) => super::table_features::table_features(out, tables)?,
        // Refused before the body by `super::decode_error`.
        Body::Experimenter(_) | Body::Unknown { .. } => {}
    }
    Ok(())
}
