//! Nicira extension messages: NXT_PACKET_IN2 and the TLV (Geneve option) table messages.
//! NXT_SET_ASYNC_CONFIG prints like OFPT_SET_ASYNC; NXT_SET_CONTROLLER_ID is one number.

use std::fmt::Write as _;

use crate::nicira_msg::{
    NXPINT_BUFFER_ID, NXPINT_COOKIE, NXPINT_FULL_LEN, NXPINT_REASON, NXPINT_TABLE_ID, PacketIn2,
    TlvMap, TlvTableMod, TlvTableReply,
};
use crate::packet_in::PacketInReason;
use crate::{FieldId, Match};

/// Big-endian u32 from a property's first four bytes.
fn be32(value: &[u8]) -> Option<u32> {
    value
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
}

/// ` table_id=3 cookie=0x1234 total_len=100 in_port=5 (via action) data_len=42 buffer=...`,
/// the userdata, then the packet's flow. OVS refuses a packet-in2 without a packet.
/// NXT_ROLE_REQUEST/REPLY: ` role=equal|primary|secondary`; OVS refuses other roles.
pub(super) fn role(out: &mut String, role: u32) -> Result<(), &'static str> {
    use crate::nicira_msg::{NX_ROLE_OTHER, NX_ROLE_PRIMARY, NX_ROLE_SECONDARY};
    let name = match role {
        NX_ROLE_OTHER => "equal",
        NX_ROLE_PRIMARY => "primary",
        NX_ROLE_SECONDARY => "secondary",
        _ => return Err("OFPRRFC_BAD_ROLE"),
    };
    let _ = write!(out, " role={name}");
    Ok(())
}

/// NXT_SET_PACKET_IN_FORMAT: ` format=standard|nxt_packet_in|nxt_packet_in2`; OVS refuses
/// other formats.
pub(super) fn packet_in_format(out: &mut String, format: u32) -> Result<(), &'static str> {
    use crate::nicira_msg::{NXPIF_NXT_PACKET_IN, NXPIF_NXT_PACKET_IN2, NXPIF_STANDARD};
    let name = match format {
        NXPIF_STANDARD => "standard",
        NXPIF_NXT_PACKET_IN => "nxt_packet_in",
        NXPIF_NXT_PACKET_IN2 => "nxt_packet_in2",
        _ => return Err("OFPBRC_EPERM"),
    };
    let _ = write!(out, " format={name}");
    Ok(())
}

pub(super) fn packet_in2(out: &mut String, packet_in: &PacketIn2) -> Result<(), &'static str> {
    let prop = |kind: u16| {
        packet_in
            .props
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, v)| v)
    };
    // OVS checks the size of each fixed-size property.
    for (kind, value) in &packet_in.props {
        let fits = match *kind {
            NXPINT_FULL_LEN | NXPINT_BUFFER_ID => value.len() == 4,
            // The cookie follows 4 bytes of padding.
            NXPINT_COOKIE => value.len() == 12,
            // One-byte properties are read from their first byte.
            NXPINT_TABLE_ID | NXPINT_REASON => !value.is_empty(),
            _ => true,
        };
        if !fits {
            return Err("OFPBPC_BAD_LEN");
        }
    }
    let data = &packet_in.packet().ok_or("OFPBRC_BAD_LEN")?[..];
    if let Some(table_id) = packet_in.table_id().filter(|t| *t != 0) {
        let _ = write!(out, " table_id={table_id}");
    }
    if let Some(cookie) = packet_in.cookie().filter(|c| *c != u64::MAX) {
        let _ = write!(out, " cookie={cookie:#x}");
    }
    let total_len = prop(NXPINT_FULL_LEN)
        .and_then(|v| be32(v))
        .unwrap_or(u32::try_from(data.len()).unwrap_or(u32::MAX));
    let matching = packet_in
        .metadata()
        .map(|m| crate::format::format_match(&pipeline_fields(&m), None))
        .unwrap_or_default();
    let reason = PacketInReason::from(packet_in.reason().unwrap_or(0));
    let _ = write!(
        out,
        " total_len={total_len} {matching} (via {reason}) data_len={}",
        data.len()
    );
    let buffer_id = prop(NXPINT_BUFFER_ID)
        .and_then(|v| be32(v))
        .unwrap_or(u32::MAX);
    super::packet::buffer(out, buffer_id);
    if let Some(userdata) = packet_in.userdata() {
        let dotted: Vec<String> = userdata.iter().map(|b| format!("{b:02x}")).collect();
        let _ = write!(out, "\n userdata={}", dotted.join("."));
    }
    out.push('\n');
    out.push_str(&super::packet::packet_flow_text(data));
    Ok(())
}

/// The fields of `metadata` OVS keeps in a packet-in2: pipeline state (ports, metadata,
/// registers, tunnel, marks, connection tracking), not packet headers.
fn pipeline_fields(metadata: &Match) -> Match {
    use crate::oxm::{CLASS_BASIC, CLASS_NXM0, CLASS_NXM1, CLASS_PKT_REGS};
    let keep = |id: &FieldId| match id.class {
        CLASS_BASIC => matches!(id.field, 0 | 2 | 38),
        CLASS_NXM0 => id.field == 0,
        CLASS_NXM1 => matches!(id.field, 0..=16 | 31..=33 | 36 | 38..=127),
        CLASS_PKT_REGS => true,
        _ => false,
    };
    metadata
        .fields
        .iter()
        .filter(|field| keep(&field.field))
        .fold(Match::new(), |m, field| m.with(field.clone()))
}

/// C's `%#x` right-aligned in `width`: no `0x` for zero.
fn alt_hex(value: u16, width: usize) -> String {
    let text = if value == 0 {
        "0".to_string()
    } else {
        format!("{value:#x}")
    };
    format!("{text:>width$}")
}

/// The mapping table: a heading and one row per mapping.
fn mappings(out: &mut String, maps: &[TlvMap]) {
    out.push_str("\n  class  type  length  match field");
    out.push_str("\n ------  ----  ------  --------------");
    for map in maps {
        let _ = write!(
            out,
            "\n {}  {}  {:>6}  tun_metadata{}",
            alt_hex(map.option_class, 6),
            alt_hex(u16::from(map.option_type), 4),
            map.option_len,
            map.index
        );
    }
}

/// ` ADD mapping table:` and the mappings, or ` CLEAR`.
pub(super) fn tlv_table_mod(out: &mut String, table_mod: &TlvTableMod) -> Result<(), &'static str> {
    let command = match table_mod.command {
        0 => "ADD",
        1 => "DEL",
        2 => {
            check_mappings(&table_mod.mappings)?;
            out.push_str("\n CLEAR");
            return Ok(());
        }
        _ => return Err("NXTTMFC_BAD_COMMAND"),
    };
    check_mappings(&table_mod.mappings)?;
    let _ = write!(out, "\n {command} mapping table:");
    mappings(out, &table_mod.mappings);
    Ok(())
}

/// OVS's limits on a mapping: options of whole 4-byte words up to 124 bytes, 64 fields.
fn check_mappings(maps: &[TlvMap]) -> Result<(), &'static str> {
    for map in maps {
        if map.option_len % 4 != 0 || map.option_len > 124 {
            return Err("NXTTMFC_BAD_OPT_LEN");
        }
        if map.index >= 64 {
            return Err("NXTTMFC_BAD_FIELD_IDX");
        }
    }
    Ok(())
}

/// The limits, the option space in use, and the mappings.
pub(super) fn tlv_table_reply(out: &mut String, reply: &TlvTableReply) -> Result<(), &'static str> {
    check_mappings(&reply.mappings)?;
    let allocated: u32 = reply.mappings.iter().map(|m| u32::from(m.option_len)).sum();
    let _ = write!(
        out,
        "\n max option space={} max fields={}\n allocated option space={allocated}\n\n \
         mapping table:",
        reply.max_option_space, reply.max_fields
    );
    mappings(out, &reply.mappings);
    Ok(())
}
