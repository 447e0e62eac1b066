//! `ovs-ofctl ofp-print` text for every OpenFlow 1.3 [`Message`] this crate decodes.
//!
//! Contract: [`render`] (for a decoded message) and [`render_bytes`] (for the bytes as received)
//! return what `ovs-ofctl ofp-print` (Open vSwitch 3.1) prints for the same bytes, without the
//! final newline: a header line such as `OFPT_FLOW_MOD (OF1.3) (xid=0x2):` followed by the body.
//! Where OVS refuses a message that this codec accepts (an unknown message or multipart type, an
//! unknown experimenter, a value outside what OVS supports), the text is OVS's
//! `***decode error: ...***` line and a hex dump of the message, placed where OVS puts them.
//! Rendering never panics; messages nested in errors and bundle adds are printed at most
//! [`MAX_NESTING`] levels deep, deeper ones are hex-dumped.
//!
//! Layout, one concern per file as in OVS's `lib/ofp-print.c` family: `session` (hello, echo,
//! error, features, config, role, bundles), `packet` (packet-in/out and the payload's flow),
//! `flow` (flow removed, flow-stats requests), `port` (port descriptions, status, mod, stats),
//! `queue`, `table`, `table_features` (with `fields`, OVS's field names), `group`, `meter`,
//! `async_config`, `nicira`, the multipart dispatchers `multipart_request` and
//! `multipart_reply`, and `text` (shared spellings). Matches, actions, instructions, flow mods,
//! group mods and flow stats come from the `Display` impls in [`crate::format`].

mod async_config;
mod fields;
mod flow;
mod group;
mod meter;
mod multipart_reply;
mod multipart_request;
mod nicira;
mod packet;
mod port;
mod queue;
mod session;
mod table;
mod table_features;
mod text;

use std::fmt::Write as _;

use crate::multipart::MultipartType;
use crate::port::OFPP_ANY;
use crate::queue::QueueGetConfigReply;
use crate::{DecodeError, Message};

/// How deep messages embedded in errors and bundle adds are decoded and printed; deeper ones
/// are hex-dumped, so hostile nesting cannot exhaust the stack.
pub const MAX_NESTING: usize = 8;

/// The whole `ovs-ofctl ofp-print` text of `message` sent with transaction id `xid`: header
/// line and body, no trailing newline. Where OVS hex-dumps the message (decode errors), the
/// dump is of the message re-encoded; [`render_bytes`] dumps the bytes as received.
pub fn render(xid: u32, message: &Message) -> String {
    let mut out = String::new();
    render_into(&mut out, xid, message, None, 0);
    out
}

/// Decode one whole message and render it like [`render`], hex-dumping `bytes` themselves
/// where OVS dumps the message (re-encoding would normalize padding and reserved fields).
pub fn render_bytes(bytes: &[u8]) -> Result<String, DecodeError> {
    let mut out = String::new();
    if excess_bytes(&mut out, bytes) {
        while out.ends_with('\n') {
            out.pop();
        }
        return Ok(out);
    }
    let (xid, message) = Message::decode(bytes)?;
    render_into(&mut out, xid, &message, Some(bytes), 0);
    Ok(out)
}

/// Append the rendering of a message nested `depth` levels inside others; `raw` is its wire
/// form when known.
pub(crate) fn render_into(
    out: &mut String,
    xid: u32,
    message: &Message,
    raw: Option<&[u8]>,
    depth: usize,
) {
    let dump = |out: &mut String| match raw {
        Some(bytes) => text::hex_dump(out, bytes),
        None => text::hex_dump(out, &message.encode_to_vec(xid)),
    };
    if let Some(error) = decode_error(message) {
        // OVS rejects these while decoding the header: no header line, just the error.
        let _ = writeln!(out, "***decode error: {error}***");
        dump(out);
    } else {
        let _ = write!(out, "{} (OF1.3) (xid={xid:#x}):", message_name(message));
        let header_end = out.len();
        if let Err(error) = render_body(out, xid, message, raw, depth) {
            // OVS stops where its decoder fails and reports the error: right after the header
            // if nothing followed it, else on a line of its own.
            if out.len() == header_end {
                out.push(' ');
            } else if !out.ends_with('\n') {
                out.push('\n');
            }
            let _ = writeln!(out, "***decode error: {error}***");
            dump(out);
        }
    }
    while out.ends_with('\n') {
        out.pop();
    }
}

/// OVS's note on bytes past the length in the header (`(***only uses 8 bytes out of 12***)`)
/// and a dump of them all, if there are such bytes.
pub(crate) fn excess_bytes(out: &mut String, bytes: &[u8]) -> bool {
    let Ok((_, header)) = crate::header::Header::parse(bytes) else {
        return false;
    };
    let used = usize::from(header.length);
    if used >= bytes.len() {
        return false;
    }
    let _ = writeln!(out, "(***only uses {used} bytes out of {}***)", bytes.len());
    text::hex_dump(out, bytes);
    true
}

/// The error OVS reports for a message it cannot even name, if this is one.
fn decode_error(message: &Message) -> Option<&'static str> {
    use crate::multipart::{MultipartReplyBody as Reply, MultipartRequestBody as Request};
    match message {
        Message::Unknown { .. } => Some("OFPBRC_BAD_TYPE"),
        Message::Experimenter { experimenter, .. } => Some(experimenter_error(*experimenter)),
        Message::MultipartRequest(request) => match &request.body {
            Request::Unknown { .. } => Some("OFPBRC_BAD_STAT"),
            Request::Experimenter(body) => Some(experimenter_error(body.experimenter)),
            _ => None,
        },
        Message::MultipartReply(reply) => match &reply.body {
            Reply::Unknown { .. } => Some("OFPBRC_BAD_STAT"),
            Reply::Experimenter(body) => Some(experimenter_error(body.experimenter)),
            _ => None,
        },
        _ => None,
    }
}

/// OVS knows the Nicira and ONF experimenters (and refuses subtypes this codec does not
/// model); any other experimenter is unknown to it.
fn experimenter_error(experimenter: u32) -> &'static str {
    match experimenter {
        crate::nicira_msg::NX_VENDOR_ID | crate::oxm::ONF_EXPERIMENTER => "OFPBRC_BAD_SUBTYPE",
        _ => "OFPBRC_BAD_VENDOR",
    }
}

/// The name `ovs-ofctl` gives a message, e.g. `OFPT_FLOW_MOD` or `OFPST_FLOW reply`.
pub fn message_name(message: &Message) -> String {
    match message {
        Message::MultipartRequest(request) => format!("{} request", stats_name(request.kind())),
        Message::MultipartReply(reply) => format!("{} reply", stats_name(reply.kind())),
        Message::BundleControl(_) => "ONFT_BUNDLE_CONTROL".into(),
        Message::BundleAdd(_) => "ONFT_BUNDLE_ADD_MESSAGE".into(),
        Message::PacketIn2(_) => "NXT_PACKET_IN2".into(),
        Message::NxSetAsyncConfig(_) => "NXT_SET_ASYNC_CONFIG".into(),
        Message::SetControllerId(_) => "NXT_SET_CONTROLLER_ID".into(),
        Message::TlvTableMod(_) => "NXT_TLV_TABLE_MOD".into(),
        Message::TlvTableRequest => "NXT_TLV_TABLE_REQUEST".into(),
        Message::TlvTableReply(_) => "NXT_TLV_TABLE_REPLY".into(),
        Message::NxRoleRequest(_) => "NXT_ROLE_REQUEST".into(),
        Message::NxRoleReply(_) => "NXT_ROLE_REPLY".into(),
        Message::FlowModTableId(_) => "NXT_FLOW_MOD_TABLE_ID".into(),
        Message::SetPacketInFormat(_) => "NXT_SET_PACKET_IN_FORMAT".into(),
        Message::FlowAge => "NXT_FLOW_AGE".into(),
        Message::CtFlushZone(_) => "NXT_CT_FLUSH_ZONE".into(),
        other => match other.msg_type().name() {
            Some(name) => name.to_string(),
            None => format!("OFPT_UNKNOWN_{}", other.msg_type().code()),
        },
    }
}

/// `OFPST_*` name of a multipart type (OVS calls port stats `OFPST_PORT`).
fn stats_name(kind: MultipartType) -> String {
    match kind {
        MultipartType::PortStats => "OFPST_PORT".into(),
        other => match other.name() {
            Some(name) => name.replacen("OFPMP_", "OFPST_", 1),
            None => format!("OFPST_{}", other.code()),
        },
    }
}

/// Append the multipart flags as OVS prints them after the header (` flags=[more]`), if any.
fn multipart_flags(out: &mut String, flags: u16) {
    if flags == 0 {
        return;
    }
    out.push_str(" flags=");
    if flags & crate::multipart::MULTIPART_MORE != 0 {
        out.push_str("[more]");
    }
    let unknown = flags & !crate::multipart::MULTIPART_MORE;
    if unknown != 0 {
        let _ = write!(out, "[***unknown flags {unknown:#06x}***]");
    }
}

/// Append the text after the header line's colon; `Err` names the error OVS reports for a
/// message it decodes only partly (an unknown meter band, a port out of its range...).
fn render_body(
    out: &mut String,
    xid: u32,
    message: &Message,
    raw: Option<&[u8]>,
    depth: usize,
) -> Result<(), &'static str> {
    match message {
        Message::Hello(hello) => session::hello(out, xid, hello, raw),
        Message::EchoRequest(payload) | Message::EchoReply(payload) => {
            session::echo(out, payload);
        }
        Message::Error(error) => session::error(out, error, depth)?,
        Message::FeaturesRequest
        | Message::GetConfigRequest
        | Message::BarrierRequest
        | Message::BarrierReply
        | Message::GetAsyncRequest
        | Message::TlvTableRequest
        | Message::FlowAge => {}
        Message::GetConfigReply(config) => session::switch_config(out, config),
        Message::SetConfig(config) => {
            // OVS checks the flags of the request only.
            if config.flags & !3 != 0 {
                return Err("OFPSCFC_BAD_FLAGS");
            }
            session::switch_config(out, config);
        }
        Message::RoleRequest(role) => session::role(out, role, false)?,
        Message::RoleReply(role) => session::role(out, role, true)?,
        Message::FeaturesReply(features) => session::features_reply(out, features),
        Message::BundleControl(control) => session::bundle_control(out, control),
        Message::BundleAdd(add) => {
            if add.xid != xid {
                return Err("OFPBFC_MSG_BAD_XID");
            }
            session::bundle_add(out, add);
            if depth < MAX_NESTING {
                render_into(out, add.xid, &add.message, None, depth + 1);
            } else {
                text::hex_dump(out, &add.message.encode_to_vec(add.xid));
            }
        }
        Message::FlowMod(flow_mod) => {
            let _ = write!(out, " {flow_mod}");
        }
        Message::GroupMod(group_mod) => group::group_mod(out, group_mod)?,
        Message::MeterMod(meter_mod) => meter::meter_mod(out, meter_mod)?,
        Message::PacketIn(packet_in) => packet::packet_in(out, packet_in),
        Message::PacketOut(packet_out) => packet::packet_out(out, packet_out),
        Message::PortStatus(status) => port::port_status(out, status)?,
        Message::PortMod(port_mod) => port::port_mod(out, port_mod)?,
        Message::TableMod(table_mod) => table::table_mod(out, table_mod),
        Message::FlowRemoved(removed) => flow::flow_removed(out, removed),
        Message::MultipartRequest(request) => {
            multipart_flags(out, request.flags);
            multipart_request::body(out, &request.body)?;
        }
        Message::MultipartReply(reply) => {
            multipart_flags(out, reply.flags);
            multipart_reply::body(out, &reply.body)?;
        }
        // A reply's port is checked as each queue is decoded: not at all without queues.
        Message::QueueGetConfigRequest(port)
        | Message::QueueGetConfigReply(QueueGetConfigReply { port, .. })
            if !port::port_in_range(*port)
                && !matches!(message, Message::QueueGetConfigReply(r) if r.queues.is_empty()) =>
        {
            return Err("OFPBAC_BAD_OUT_PORT");
        }
        // A request names a physical port or ANY, not another reserved port.
        Message::QueueGetConfigRequest(port) if *port >= 0xff00 && *port != OFPP_ANY => {
            return Err("OFPQOFC_BAD_PORT");
        }
        Message::QueueGetConfigRequest(port) => {
            let _ = write!(out, " port={}", text::port_text(*port));
        }
        Message::QueueGetConfigReply(reply) => queue::config_reply(out, reply),
        Message::GetAsyncReply(config)
        | Message::SetAsync(config)
        | Message::NxSetAsyncConfig(config) => async_config::async_config(out, config),
        Message::PacketIn2(packet_in) => nicira::packet_in2(out, packet_in)?,
        Message::SetControllerId(id) => {
            let _ = write!(out, " id={id}");
        }
        Message::TlvTableMod(table_mod) => nicira::tlv_table_mod(out, table_mod)?,
        Message::NxRoleRequest(role) | Message::NxRoleReply(role) => nicira::role(out, *role)?,
        Message::FlowModTableId(set) => {
            out.push_str(if *set != 0 { " enable" } else { " disable" });
        }
        Message::SetPacketInFormat(format) => nicira::packet_in_format(out, *format)?,
        Message::CtFlushZone(zone) => {
            let _ = write!(out, " zone_id={zone}");
        }
        Message::TlvTableReply(reply) => nicira::tlv_table_reply(out, reply)?,
        // Printed by `render_into` as decode errors.
        Message::Experimenter { .. } | Message::Unknown { .. } => {}
    }
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn header_line_names_the_message_and_xid() {
        assert_eq!(
            render(0xff, &Message::BarrierRequest),
            "OFPT_BARRIER_REQUEST (OF1.3) (xid=0xff):"
        );
    }

    #[test]
    fn unknown_message_types_print_ovs_decode_error() {
        let message = Message::Unknown {
            msg_type: 99,
            body: bytes::Bytes::new(),
        };
        assert_eq!(
            render(0, &message),
            "***decode error: OFPBRC_BAD_TYPE***\n\
             00000000  04 63 00 08 00 00 00 00-                        |.c......        |"
        );
    }
}
