//! OFPT_ERROR: every OpenFlow 1.3 error type and code, named, from ONE table of
//! (type, code, name, description) that drives decoding, `Display` and lookup by name.
//!
//! Contract: [`ErrorMsg::parse`] keeps the data that follows the code unchanged (normally the
//! start of the request that failed); [`ErrorMsg::request`] decodes it when it is a whole message.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::wire::{DecodeError, fixed, u16p, u32p};

/// One row of the error table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCodeInfo {
    /// `ofp_error_type`.
    pub err_type: u16,
    /// Code within the type.
    pub code: u16,
    /// Symbolic name as OVS prints it (`OFPBAC_BAD_OUT_PORT`).
    pub name: &'static str,
    /// What it means.
    pub description: &'static str,
}

macro_rules! errors {
    ($( $t:literal, $c:literal, $name:literal, $desc:literal; )*) => {
        /// Every OpenFlow 1.3 error code.
        pub static ERROR_CODES: &[ErrorCodeInfo] = &[
            $( ErrorCodeInfo { err_type: $t, code: $c, name: $name, description: $desc }, )*
        ];
    };
}

errors! {
    0, 0, "OFPHFC_INCOMPATIBLE", "no compatible version";
    0, 1, "OFPHFC_EPERM", "permissions error during hello";
    1, 0, "OFPBRC_BAD_VERSION", "header version not supported";
    1, 1, "OFPBRC_BAD_TYPE", "message type not supported";
    1, 2, "OFPBRC_BAD_MULTIPART", "multipart request type not supported";
    1, 3, "OFPBRC_BAD_EXPERIMENTER", "experimenter id not supported";
    1, 4, "OFPBRC_BAD_EXP_TYPE", "experimenter type not supported";
    1, 5, "OFPBRC_EPERM", "permissions error";
    1, 6, "OFPBRC_BAD_LEN", "wrong request length for type";
    1, 7, "OFPBRC_BUFFER_EMPTY", "specified buffer has already been used";
    1, 8, "OFPBRC_BUFFER_UNKNOWN", "specified buffer does not exist";
    1, 9, "OFPBRC_BAD_TABLE_ID", "table id out of range";
    1, 10, "OFPBRC_IS_SLAVE", "denied because controller is a slave";
    1, 11, "OFPBRC_BAD_PORT", "invalid port";
    1, 12, "OFPBRC_BAD_PACKET", "invalid packet in packet-out";
    1, 13, "OFPBRC_MULTIPART_BUFFER_OVERFLOW", "multipart request overflowed the assigned buffer";
    2, 0, "OFPBAC_BAD_TYPE", "unknown action type";
    2, 1, "OFPBAC_BAD_LEN", "length problem in actions";
    2, 2, "OFPBAC_BAD_EXPERIMENTER", "unknown experimenter id";
    2, 3, "OFPBAC_BAD_EXP_TYPE", "unknown action for experimenter id";
    2, 4, "OFPBAC_BAD_OUT_PORT", "problem validating output port";
    2, 5, "OFPBAC_BAD_ARGUMENT", "bad action argument";
    2, 6, "OFPBAC_EPERM", "permissions error";
    2, 7, "OFPBAC_TOO_MANY", "cannot handle this many actions";
    2, 8, "OFPBAC_BAD_QUEUE", "problem validating output queue";
    2, 9, "OFPBAC_BAD_OUT_GROUP", "invalid group id in forward action";
    2, 10, "OFPBAC_MATCH_INCONSISTENT", "action cannot apply to this match or set-field is missing its prerequisite";
    2, 11, "OFPBAC_UNSUPPORTED_ORDER", "action order unsupported for the action list";
    2, 12, "OFPBAC_BAD_TAG", "actions uses an unsupported tag or encapsulation";
    2, 13, "OFPBAC_BAD_SET_TYPE", "unsupported type in set-field action";
    2, 14, "OFPBAC_BAD_SET_LEN", "length problem in set-field action";
    2, 15, "OFPBAC_BAD_SET_ARGUMENT", "bad argument in set-field action";
    3, 0, "OFPBIC_UNKNOWN_INST", "unknown instruction";
    3, 1, "OFPBIC_UNSUP_INST", "switch or table does not support the instruction";
    3, 2, "OFPBIC_BAD_TABLE_ID", "invalid table id";
    3, 3, "OFPBIC_UNSUP_METADATA", "metadata value unsupported by datapath";
    3, 4, "OFPBIC_UNSUP_METADATA_MASK", "metadata mask value unsupported by datapath";
    3, 5, "OFPBIC_BAD_EXPERIMENTER", "unknown experimenter id";
    3, 6, "OFPBIC_BAD_EXP_TYPE", "unknown instruction for experimenter id";
    3, 7, "OFPBIC_BAD_LEN", "length problem in instructions";
    3, 8, "OFPBIC_EPERM", "permissions error";
    4, 0, "OFPBMC_BAD_TYPE", "unsupported match type";
    4, 1, "OFPBMC_BAD_LEN", "length problem in match";
    4, 2, "OFPBMC_BAD_TAG", "match uses an unsupported tag or encapsulation";
    4, 3, "OFPBMC_BAD_DL_ADDR_MASK", "unsupported datalink address mask";
    4, 4, "OFPBMC_BAD_NW_ADDR_MASK", "unsupported network address mask";
    4, 5, "OFPBMC_BAD_WILDCARDS", "unsupported combination of fields masked or omitted";
    4, 6, "OFPBMC_BAD_FIELD", "unsupported field type in the match";
    4, 7, "OFPBMC_BAD_VALUE", "unsupported value in a match field";
    4, 8, "OFPBMC_BAD_MASK", "unsupported mask in a match field";
    4, 9, "OFPBMC_BAD_PREREQ", "a prerequisite was not met";
    4, 10, "OFPBMC_DUP_FIELD", "a field type was duplicated";
    4, 11, "OFPBMC_EPERM", "permissions error";
    5, 0, "OFPFMFC_UNKNOWN", "unspecified error";
    5, 1, "OFPFMFC_TABLE_FULL", "flow not added because table was full";
    5, 2, "OFPFMFC_BAD_TABLE_ID", "table does not exist";
    5, 3, "OFPFMFC_OVERLAP", "attempted to add overlapping flow with check_overlap set";
    5, 4, "OFPFMFC_EPERM", "permissions error";
    5, 5, "OFPFMFC_BAD_TIMEOUT", "flow not added because of unsupported idle/hard timeout";
    5, 6, "OFPFMFC_BAD_COMMAND", "unsupported or unknown command";
    5, 7, "OFPFMFC_BAD_FLAGS", "unsupported or unknown flags";
    6, 0, "OFPGMFC_GROUP_EXISTS", "group not added because a group with that id already exists";
    6, 1, "OFPGMFC_INVALID_GROUP", "group not added because the group specified is invalid";
    6, 2, "OFPGMFC_WEIGHT_UNSUPPORTED", "switch does not support unequal load sharing with select groups";
    6, 3, "OFPGMFC_OUT_OF_GROUPS", "the group table is full";
    6, 4, "OFPGMFC_OUT_OF_BUCKETS", "the maximum number of action buckets for a group has been exceeded";
    6, 5, "OFPGMFC_CHAINING_UNSUPPORTED", "switch does not support groups that forward to groups";
    6, 6, "OFPGMFC_WATCH_UNSUPPORTED", "this group cannot watch the watch_port or watch_group specified";
    6, 7, "OFPGMFC_LOOP", "group entry would cause a loop";
    6, 8, "OFPGMFC_UNKNOWN_GROUP", "group not modified because the group does not exist";
    6, 9, "OFPGMFC_CHAINED_GROUP", "group not deleted because another group is forwarding to it";
    6, 10, "OFPGMFC_BAD_TYPE", "unsupported or unknown group type";
    6, 11, "OFPGMFC_BAD_COMMAND", "unsupported or unknown command";
    6, 12, "OFPGMFC_BAD_BUCKET", "error in bucket";
    6, 13, "OFPGMFC_BAD_WATCH", "error in watch port or group";
    6, 14, "OFPGMFC_EPERM", "permissions error";
    7, 0, "OFPPMFC_BAD_PORT", "specified port number does not exist";
    7, 1, "OFPPMFC_BAD_HW_ADDR", "specified hardware address does not match the port number";
    7, 2, "OFPPMFC_BAD_CONFIG", "specified config is invalid";
    7, 3, "OFPPMFC_BAD_ADVERTISE", "specified advertise is invalid";
    7, 4, "OFPPMFC_EPERM", "permissions error";
    8, 0, "OFPTMFC_BAD_TABLE", "specified table does not exist";
    8, 1, "OFPTMFC_BAD_CONFIG", "specified config is invalid";
    8, 2, "OFPTMFC_EPERM", "permissions error";
    9, 0, "OFPQOFC_BAD_PORT", "invalid port or port does not exist";
    9, 1, "OFPQOFC_BAD_QUEUE", "queue does not exist";
    9, 2, "OFPQOFC_EPERM", "permissions error";
    10, 0, "OFPSCFC_BAD_FLAGS", "specified flags are invalid";
    10, 1, "OFPSCFC_BAD_LEN", "specified length is invalid";
    10, 2, "OFPSCFC_EPERM", "permissions error";
    11, 0, "OFPRRFC_STALE", "stale message: old generation id";
    11, 1, "OFPRRFC_UNSUP", "controller role change unsupported";
    11, 2, "OFPRRFC_BAD_ROLE", "invalid role";
    12, 0, "OFPMMFC_UNKNOWN", "unspecified error";
    12, 1, "OFPMMFC_METER_EXISTS", "meter not added because the meter already exists";
    12, 2, "OFPMMFC_INVALID_METER", "meter not added because the meter specified is invalid";
    12, 3, "OFPMMFC_UNKNOWN_METER", "meter not modified because the meter does not exist";
    12, 4, "OFPMMFC_BAD_COMMAND", "unsupported or unknown command";
    12, 5, "OFPMMFC_BAD_FLAGS", "flag configuration unsupported";
    12, 6, "OFPMMFC_BAD_RATE", "rate unsupported";
    12, 7, "OFPMMFC_BAD_BURST", "burst size unsupported";
    12, 8, "OFPMMFC_BAD_BAND", "band unsupported";
    12, 9, "OFPMMFC_BAD_BAND_VALUE", "band value unsupported";
    12, 10, "OFPMMFC_OUT_OF_METERS", "no more meters available";
    12, 11, "OFPMMFC_OUT_OF_BANDS", "the maximum number of bands for a meter has been exceeded";
    13, 0, "OFPTFFC_BAD_TABLE", "specified table does not exist";
    13, 1, "OFPTFFC_BAD_METADATA", "invalid metadata mask";
    13, 2, "OFPTFFC_BAD_TYPE", "unknown property type";
    13, 3, "OFPTFFC_BAD_LEN", "length problem in properties";
    13, 4, "OFPTFFC_BAD_ARGUMENT", "unsupported property value";
    13, 5, "OFPTFFC_EPERM", "permissions error";
}

/// Names of the error types, indexed by type.
static TYPE_NAMES: [&str; 14] = [
    "OFPET_HELLO_FAILED",
    "OFPET_BAD_REQUEST",
    "OFPET_BAD_ACTION",
    "OFPET_BAD_INSTRUCTION",
    "OFPET_BAD_MATCH",
    "OFPET_FLOW_MOD_FAILED",
    "OFPET_GROUP_MOD_FAILED",
    "OFPET_PORT_MOD_FAILED",
    "OFPET_TABLE_MOD_FAILED",
    "OFPET_QUEUE_OP_FAILED",
    "OFPET_SWITCH_CONFIG_FAILED",
    "OFPET_ROLE_REQUEST_FAILED",
    "OFPET_METER_MOD_FAILED",
    "OFPET_TABLE_FEATURES_FAILED",
];

/// `OFPET_EXPERIMENTER`.
pub const OFPET_EXPERIMENTER: u16 = 0xffff;

/// The kind of error: a (type, code) pair, or an experimenter error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A standard error; `code` may be unknown to this crate.
    Standard {
        /// `ofp_error_type`.
        err_type: u16,
        /// Code within the type.
        code: u16,
    },
    /// `OFPET_EXPERIMENTER`.
    Experimenter {
        /// Experimenter-defined type.
        exp_type: u16,
        /// Experimenter id.
        experimenter: u32,
    },
}

impl ErrorKind {
    /// Look up a standard error by name (`"OFPBAC_BAD_OUT_PORT"`).
    pub fn by_name(name: &str) -> Option<ErrorKind> {
        ERROR_CODES
            .iter()
            .find(|e| e.name == name)
            .map(|e| ErrorKind::Standard {
                err_type: e.err_type,
                code: e.code,
            })
    }

    /// The table row for this error, if it is a known standard error.
    pub fn info(self) -> Option<&'static ErrorCodeInfo> {
        match self {
            ErrorKind::Standard { err_type, code } => ERROR_CODES
                .iter()
                .find(|e| e.err_type == err_type && e.code == code),
            ErrorKind::Experimenter { .. } => None,
        }
    }

    /// The type's name (`OFPET_BAD_ACTION`), if known.
    pub fn type_name(self) -> Option<&'static str> {
        match self {
            ErrorKind::Standard { err_type, .. } => TYPE_NAMES.get(usize::from(err_type)).copied(),
            ErrorKind::Experimenter { .. } => Some("OFPET_EXPERIMENTER"),
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.info(), self) {
            (Some(i), _) => f.write_str(i.name),
            (None, ErrorKind::Standard { err_type, code }) => match self.type_name() {
                Some(t) => write!(f, "{t} code={code}"),
                None => write!(f, "type={err_type} code={code}"),
            },
            (
                None,
                ErrorKind::Experimenter {
                    exp_type,
                    experimenter,
                },
            ) => {
                write!(
                    f,
                    "OFPET_EXPERIMENTER type={exp_type} experimenter={experimenter:#010x}"
                )
            }
        }
    }
}

/// OFPT_ERROR.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorMsg {
    /// Which error.
    pub kind: ErrorKind,
    /// The data that followed (normally the first bytes of the failed request).
    pub data: Bytes,
}

impl ErrorMsg {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<ErrorMsg, DecodeError> {
        let (rest, (err_type, code)) = fixed(i, 4, "error message", (u16p, u16p))?;
        if err_type == OFPET_EXPERIMENTER {
            let (data, experimenter) = fixed(rest, 4, "experimenter error", u32p)?;
            return Ok(ErrorMsg {
                kind: ErrorKind::Experimenter {
                    exp_type: code,
                    experimenter,
                },
                data: Bytes::copy_from_slice(data),
            });
        }
        Ok(ErrorMsg {
            kind: ErrorKind::Standard { err_type, code },
            data: Bytes::copy_from_slice(rest),
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        match self.kind {
            ErrorKind::Standard { err_type, code } => {
                out.extend_from_slice(&u16::to_be_bytes(err_type));
                out.extend_from_slice(&u16::to_be_bytes(code));
            }
            ErrorKind::Experimenter {
                exp_type,
                experimenter,
            } => {
                out.extend_from_slice(&u16::to_be_bytes(OFPET_EXPERIMENTER));
                out.extend_from_slice(&u16::to_be_bytes(exp_type));
                out.extend_from_slice(&u32::to_be_bytes(experimenter));
            }
        }
        out.extend_from_slice(&self.data);
    }

    /// The failed request, when `data` holds it whole: its xid and the message.
    pub fn request(&self) -> Option<(u32, crate::Message)> {
        crate::Message::decode(&self.data).ok()
    }

    /// The failed request's header (type and xid), when at least 8 bytes were echoed.
    pub fn request_header(&self) -> Option<crate::header::Header> {
        crate::header::Header::parse(&self.data)
            .ok()
            .map(|(_, h)| h)
    }
}

impl fmt::Display for ErrorMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if let Some(h) = self.request_header() {
            write!(f, " for {} xid={:#x}", h.msg_type, h.xid)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // OFPBAC_BAD_OUT_PORT echoing an 8-byte barrier request.
    static ERROR_BYTES: [u8; 12] = [0, 2, 0, 4, 4, 20, 0, 8, 0, 0, 0, 7];

    #[test]
    fn test_parse_emit() {
        let e = ErrorMsg::parse(&ERROR_BYTES).unwrap();
        assert_eq!(e.kind, ErrorKind::by_name("OFPBAC_BAD_OUT_PORT").unwrap());
        let mut out = BytesMut::new();
        e.emit(&mut out);
        assert_eq!(&out[..], &ERROR_BYTES[..]);
        assert_eq!(
            e.to_string(),
            "OFPBAC_BAD_OUT_PORT for OFPT_BARRIER_REQUEST xid=0x7"
        );
        assert_eq!(e.request().unwrap(), (7, crate::Message::BarrierRequest));
    }

    #[test]
    fn table_is_complete_and_unique() {
        for (n, e) in ERROR_CODES.iter().enumerate() {
            assert!(
                ERROR_CODES[..n]
                    .iter()
                    .all(|o| (o.err_type, o.code) != (e.err_type, e.code) && o.name != e.name)
            );
        }
        assert_eq!(ERROR_CODES.iter().filter(|e| e.err_type == 6).count(), 15);
    }

    #[test]
    fn unknown_and_experimenter() {
        let k = ErrorKind::Standard {
            err_type: 2,
            code: 99,
        };
        assert_eq!(k.to_string(), "OFPET_BAD_ACTION code=99");
        let e = ErrorMsg::parse(&[0xff, 0xff, 0, 1, 0, 0, 0x23, 0x20, 9]).unwrap();
        assert_eq!(
            e.kind,
            ErrorKind::Experimenter {
                exp_type: 1,
                experimenter: 0x2320
            }
        );
        assert!(ErrorMsg::parse(&[0, 1]).unwrap_err().is_truncated());
    }
}
