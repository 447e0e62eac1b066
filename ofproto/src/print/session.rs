//! Connection-level messages: hello, echo, error, features reply, switch config, role and the
//! ONF bundle messages.

use std::fmt::Write as _;

use crate::Message;
use crate::bundle::{BUNDLE_ATOMIC, BUNDLE_ORDERED, BundleAdd, BundleControl};
use crate::config::SwitchConfig;
use crate::error::{ErrorKind, ErrorMsg};
use crate::features::FeaturesReply;
use crate::hello::{Hello, HelloElem};
use crate::role::{ControllerRole, Role};

use super::text::{bit_names, hex_dump};

/// ` version bitmap: 0x01, 0x04` on its own line.
pub(super) fn hello(out: &mut String, hello: &Hello) {
    let bitmap = hello.elements.iter().find_map(|e| match e {
        HelloElem::VersionBitmap(words) => Some(versions(words)),
        HelloElem::Unknown { .. } => None,
    });
    // Without a bitmap, a 1.3 hello offers every version up to 1.3.
    let bitmap = bitmap.unwrap_or_else(|| "0x01, 0x02, 0x03, 0x04".into());
    let _ = write!(out, "\n version bitmap: {bitmap}");
}

/// `ovs-ofctl`'s spelling of a wire version list.
fn versions(bitmap: &[u32]) -> String {
    let mut list = Vec::new();
    for (word_index, word) in bitmap.iter().enumerate() {
        for bit in 0..32 {
            if word & (1 << bit) != 0 {
                list.push(format!("{:#04x}", word_index * 32 + bit));
            }
        }
    }
    list.join(", ")
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
        standard => match standard.to_string().as_str() {
            "OFPBRC_BAD_MULTIPART" => Some("OFPBRC_BAD_STAT".into()),
            other => Some(other.to_string()),
        },
    }
}

/// ` OFPBAC_BAD_TYPE` and the failed request: printed if it decodes, hex-dumped otherwise.
pub(super) fn error(out: &mut String, error: &ErrorMsg, depth: usize) -> Result<(), &'static str> {
    let name = error_name(error.kind).ok_or("OFPBRC_BAD_LEN")?;
    let _ = writeln!(out, " {name}");
    match Message::decode(&error.data) {
        // An error may echo an error that echoes an error...; a few levels are plenty.
        Ok((xid, failed)) if depth < super::MAX_NESTING => {
            super::render_into(out, xid, &failed, depth + 1);
        }
        Err(_) if error.data.len() < 8 => {
            let _ = writeln!(
                out,
                "OpenFlow packet too short (only {} bytes):",
                error.data.len()
            );
            hex_dump(out, &error.data);
        }
        _ => hex_dump(out, &error.data),
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

/// ` role=primary generation_id=5`.
pub(super) fn role(out: &mut String, role: &Role) {
    let name = match role.role {
        ControllerRole::Master => "primary".to_string(),
        ControllerRole::Slave => "secondary".to_string(),
        other => other.to_string(),
    };
    let _ = write!(out, " role={name}");
    if role.role != ControllerRole::NoChange && role.generation_id != u64::MAX {
        let _ = write!(out, " generation_id={}", role.generation_id);
    }
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
    out.push_str(&bit_names(features.capabilities, CAPABILITY_NAMES, " "));
}

/// `ovs-ofctl`'s spelling of bundle flags.
fn bundle_flags(flags: u16) -> String {
    let mut names = Vec::new();
    if flags & BUNDLE_ATOMIC != 0 {
        names.push("atomic");
    }
    if flags & BUNDLE_ORDERED != 0 {
        names.push("ordered");
    }
    if names.is_empty() {
        "0".into()
    } else {
        names.join(" ")
    }
}

/// ` bundle_id=0x1 type=OPEN_REQUEST flags=atomic` on its own line.
pub(super) fn bundle_control(out: &mut String, control: &BundleControl) {
    let _ = write!(
        out,
        "\n bundle_id={:#x} type={} flags={}",
        control.bundle_id,
        control.ctrl_type,
        bundle_flags(control.flags)
    );
}

/// The bundle-add line; the caller prints the embedded message after it.
pub(super) fn bundle_add(out: &mut String, add: &BundleAdd) {
    let _ = writeln!(
        out,
        "\n bundle_id={:#x} flags={}",
        add.bundle_id,
        bundle_flags(add.flags)
    );
}
