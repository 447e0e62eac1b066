//! Connection-level messages: hello, echo, error, features reply, switch config, role and the
//! ONF bundle messages.

use std::fmt::Write as _;

use crate::bundle::{BUNDLE_ATOMIC, BUNDLE_ORDERED, BundleAdd, BundleControl};
use crate::config::SwitchConfig;
use crate::error::{ErrorKind, ErrorMsg};
use crate::features::FeaturesReply;
use crate::header::Header;
use crate::hello::{Hello, HelloElem};
use crate::role::{ControllerRole, Role};
use crate::{DecodeError, Message};

use super::text::{bit_names, hex_dump, known_bit_names};

/// ` version bitmap: 0x01, 0x04` on its own line; then, if the hello holds anything OVS does
/// not understand (an unknown element, a bitmap without a version), ` unknown data in hello:`
/// and a dump of the whole message.
pub(super) fn hello(out: &mut String, xid: u32, hello: &Hello, raw: Option<&[u8]>) {
    let mut unknown = false;
    let mut bitmap = None;
    for element in &hello.elements {
        match element {
            // OVS reads the first word only: versions 1 to 31.
            HelloElem::VersionBitmap(words) => match words.first().map(|w| w & !1) {
                Some(word) if word != 0 => bitmap = Some(word),
                _ => unknown = true,
            },
            HelloElem::Unknown { .. } => unknown = true,
        }
    }
    // Without a usable bitmap, a 1.3 hello offers every version up to 1.3.
    let bitmap = bitmap.unwrap_or(0b1_1110);
    let versions: Vec<String> = (1..32)
        .filter(|version| bitmap & (1 << version) != 0)
        .map(|version| format!("{version:#04x}"))
        .collect();
    let _ = write!(out, "\n version bitmap: {}", versions.join(", "));
    if unknown {
        out.push_str("\n unknown data in hello:\n");
        match raw {
            Some(bytes) => hex_dump(out, bytes),
            None => hex_dump(out, &Message::Hello(hello.clone()).encode_to_vec(xid)),
        }
    }
}

/// ` 4 bytes of payload` and a hex dump.
pub(super) fn echo(out: &mut String, payload: &[u8]) {
    let _ = write!(out, " {} bytes of payload", payload.len());
    if !payload.is_empty() {
        out.push('\n');
        hex_dump(out, payload);
    }
}

/// Nicira error codes OVS sends as OpenFlow 1.2+ experimenter errors (experimenter 0x2320),
/// by experimenter type.
const NX_ERRORS: &[(u16, &str)] = &[
    (2, "NXBRC_NXM_INVALID"),
    (3, "NXBRC_NXM_BAD_TYPE"),
    (4, "NXBRC_MUST_BE_ZERO"),
    (5, "NXBRC_BAD_REASON"),
    (6, "OFPMOFC_MONITOR_EXISTS"),
    (7, "OFPMOFC_BAD_FLAGS"),
    (8, "OFPMOFC_UNKNOWN_MONITOR"),
    (9, "NXBRC_FM_BAD_EVENT"),
    (10, "NXBRC_UNENCODABLE_ERROR"),
    (11, "NXBAC_MUST_BE_ZERO"),
    (12, "NXFMFC_HARDWARE"),
    (13, "NXFMFC_BAD_TABLE_ID"),
    (15, "NXBAC_BAD_CONJUNCTION"),
    (16, "NXTTMFC_BAD_COMMAND"),
    (17, "NXTTMFC_BAD_OPT_LEN"),
    (18, "NXTTMFC_BAD_FIELD_IDX"),
    (19, "NXTTMFC_TABLE_FULL"),
    (20, "NXTTMFC_ALREADY_MAPPED"),
    (21, "NXTTMFC_DUP_ENTRY"),
    (34, "NXR_NOT_SUPPORTED"),
    (35, "NXR_STALE"),
    (36, "NXST_NOT_CONFIGURED"),
    (37, "NXFMFC_INVALID_TLV_FIELD"),
    (38, "NXTTMFC_INVALID_TLV_DEL"),
    (39, "NXBAC_BAD_HEADER_TYPE"),
    (40, "NXBAC_UNKNOWN_ED_PROP"),
    (41, "NXBAC_BAD_ED_PROP"),
    (42, "NXBAC_CT_DATAPATH_SUPPORT"),
    (43, "NXBMC_CT_DATAPATH_SUPPORT"),
    (44, "NXTFFC_DUP_TABLE"),
];

/// ONF extension errors (experimenter 0x4f4e4600) OVS knows in OpenFlow 1.3, by type: the
/// OpenFlow 1.4 errors that 1.3 carries as experimenter errors.
const ONF_ERRORS: &[(u16, &str)] = &[
    (2300, "OFPBFC_UNKNOWN"),
    (2301, "OFPBFC_EPERM"),
    (2302, "OFPBFC_BAD_ID"),
    (2303, "OFPBFC_BUNDLE_EXIST"),
    (2304, "OFPBFC_BUNDLE_CLOSED"),
    (2305, "OFPBFC_OUT_OF_BUNDLES"),
    (2306, "OFPBFC_BAD_TYPE"),
    (2307, "OFPBFC_BAD_FLAGS"),
    (2309, "OFPBFC_MSG_BAD_XID"),
    (2310, "OFPBFC_MSG_UNSUP"),
    (2311, "OFPBFC_MSG_CONFLICT"),
    (2312, "OFPBFC_MSG_TOO_MANY"),
    (2313, "OFPBFC_MSG_FAILED"),
    (2314, "OFPBFC_TIMEOUT"),
    (2315, "OFPBFC_BUNDLE_IN_PROGRESS"),
    (2360, "OFPFMFC_BAD_PRIORITY"),
    (2370, "OFPACFC_INVALID"),
    (2371, "OFPACFC_UNSUPPORTED"),
    (2372, "OFPACFC_EPERM"),
    (2600, "OFPBIC_DUP_INST"),
    (2640, "OFPBRC_MULTIPART_REQUEST_TIMEOUT"),
    (2641, "OFPBRC_MULTIPART_REPLY_TIMEOUT"),
    (4250, "OFPBAC_BAD_SET_MASK"),
    (4443, "OFPBPC_TOO_MANY"),
    (4444, "OFPBPC_DUP_TYPE"),
    (4445, "OFPBPC_BAD_EXPERIMENTER"),
    (4446, "OFPBPC_BAD_EXP_TYPE"),
    (4447, "OFPBPC_BAD_EXP_VALUE"),
    (4448, "OFPBPC_EPERM"),
];

/// The name OVS gives an error, or `None` when OVS cannot decode it (an experimenter error it
/// does not know, which it reports as `OFPBRC_BAD_LEN`).
fn error_name(kind: ErrorKind) -> Option<String> {
    match kind {
        ErrorKind::Experimenter {
            exp_type,
            experimenter,
        } => {
            let table = match experimenter {
                crate::nicira_msg::NX_VENDOR_ID => NX_ERRORS,
                crate::oxm::ONF_EXPERIMENTER => ONF_ERRORS,
                _ => return None,
            };
            table
                .iter()
                .find(|(code, _)| *code == exp_type)
                .map(|(_, name)| (*name).to_string())
        }
        // OVS keeps the OpenFlow 1.0 name of (1, 2) in every version.
        standard => match standard.info()?.name {
            "OFPBRC_BAD_MULTIPART" => Some("OFPBRC_BAD_STAT".into()),
            other => Some(other.to_string()),
        },
    }
}

/// ` OFPBAC_BAD_TYPE` and the failed request: printed if it decodes, hex-dumped otherwise.
pub(super) fn error(out: &mut String, error: &ErrorMsg, depth: usize) -> Result<(), &'static str> {
    let name = error_name(error.kind).ok_or("OFPBRC_BAD_LEN")?;
    let _ = writeln!(out, " {name}");
    if error.data.len() < 8 {
        let _ = writeln!(
            out,
            "OpenFlow packet too short (only {} bytes):",
            error.data.len()
        );
        hex_dump(out, &error.data);
        return Ok(());
    }
    // Errors echo at least 64 bytes of the request, not always all of it. OVS names the
    // request when it knows its version and type.
    if let Ok((_, header)) = Header::parse(&error.data)
        && usize::from(header.length) > error.data.len()
    {
        if let (crate::header::OFP_VERSION, Some(name)) = (header.version, header.msg_type.name()) {
            let _ = writeln!(out, "{name} (OF1.3) (xid={:#x}):", header.xid);
        }
        let _ = writeln!(
            out,
            "(***truncated to {} bytes from {}***)",
            error.data.len(),
            header.length
        );
        hex_dump(out, &error.data);
        return Ok(());
    }
    if super::excess_bytes(out, &error.data) {
        return Ok(());
    }
    match Message::decode(&error.data) {
        // An error may echo an error that echoes an error...; a few levels are plenty.
        Ok((xid, failed)) if depth < super::MAX_NESTING => {
            super::render_into(out, xid, &failed, Some(&error.data), depth + 1);
        }
        Ok(_) => hex_dump(out, &error.data),
        Err(decode_error) => {
            // OVS's reason: a version it does not speak at all reads as an unknown type;
            // anything else (another version's layout, a bad body) as a bad length.
            let reason = match decode_error {
                DecodeError::BadVersion(version) if version == 0 || version > 6 => {
                    "OFPBRC_BAD_TYPE"
                }
                _ => "OFPBRC_BAD_LEN",
            };
            let _ = writeln!(out, "***decode error: {reason}***");
            hex_dump(out, &error.data);
        }
    }
    Ok(())
}

/// ` frags=normal miss_send_len=128`.
pub(super) fn switch_config(out: &mut String, config: &SwitchConfig) {
    let frags = match config.flags & 3 {
        0 => "normal",
        1 => "drop",
        2 => "reassemble",
        _ => "nx-match",
    };
    let _ = write!(out, " frags={frags} miss_send_len={}", config.miss_send_len);
}

/// ` role=primary generation_id=5`; a request to keep the role carries no generation, a reply
/// always does.
pub(super) fn role(out: &mut String, role: &Role, reply: bool) -> Result<(), &'static str> {
    let name = match role.role {
        ControllerRole::NoChange => "nochange",
        ControllerRole::Equal => "equal",
        ControllerRole::Master => "primary",
        ControllerRole::Slave => "secondary",
        ControllerRole::Unknown(_) => return Err("OFPRRFC_BAD_ROLE"),
    };
    let _ = write!(out, " role={name}");
    if (reply || role.role != ControllerRole::NoChange) && role.generation_id != u64::MAX {
        let _ = write!(out, " generation_id={}", role.generation_id);
    }
    Ok(())
}

/// `ofp_capabilities` bits and their `ovs-ofctl` names.
const CAPABILITY_NAMES: &[(u32, &str)] = &[
    (1 << 0, "FLOW_STATS"),
    (1 << 1, "TABLE_STATS"),
    (1 << 2, "PORT_STATS"),
    (1 << 3, "GROUP_STATS"),
    (1 << 5, "IP_REASM"),
    (1 << 6, "QUEUE_STATS"),
    (1 << 8, "PORT_BLOCKED"),
];

/// ` dpid:...`, `n_tables:..., n_buffers:...` and the capabilities.
pub(super) fn features_reply(out: &mut String, features: &FeaturesReply) {
    let _ = write!(
        out,
        " dpid:{:016x}\nn_tables:{}, n_buffers:{}",
        features.datapath_id, features.n_tables, features.n_buffers
    );
    if features.auxiliary_id != 0 {
        let _ = write!(out, ", auxiliary_id:{}", features.auxiliary_id);
    }
    out.push_str("\ncapabilities: ");
    // OVS drops the capability bits it does not know.
    let names = known_bit_names(features.capabilities, CAPABILITY_NAMES);
    out.push_str(if names.is_empty() { "0" } else { &names });
}

/// C's `%#x`: `0x` and hex digits, but a plain `0` for zero.
fn c_hex(value: u32) -> String {
    if value == 0 {
        "0".into()
    } else {
        format!("{value:#x}")
    }
}

/// `ovs-ofctl`'s spelling of bundle flags.
fn bundle_flags(flags: u16) -> String {
    bit_names(
        u32::from(flags),
        &[
            (u32::from(BUNDLE_ATOMIC), "atomic"),
            (u32::from(BUNDLE_ORDERED), "ordered"),
        ],
        " ",
    )
}

/// ` bundle_id=0x1 type=OPEN_REQUEST flags=atomic` on its own line.
pub(super) fn bundle_control(out: &mut String, control: &BundleControl) {
    let _ = write!(
        out,
        "\n bundle_id={} type={} flags={}",
        c_hex(control.bundle_id),
        control.ctrl_type.name().unwrap_or_default(),
        bundle_flags(control.flags)
    );
}

/// The bundle-add line; the caller prints the embedded message after it.
pub(super) fn bundle_add(out: &mut String, add: &BundleAdd) {
    let _ = writeln!(
        out,
        "\n bundle_id={} flags={}",
        c_hex(add.bundle_id),
        bundle_flags(add.flags)
    );
}
