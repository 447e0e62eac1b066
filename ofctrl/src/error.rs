//! Errors of switch requests and transactions. They name the request the switch refused,
//! printed in ovs-ofctl syntax, and the OpenFlow error by its name — never raw bytes.

use ofproto::{ErrorMsg, Message};
use std::fmt;

/// A request to one switch failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SwitchError {
    /// The connection is gone (or went away while we waited).
    #[error("the switch is not connected")]
    Disconnected,
    /// The switch answered with an OpenFlow error.
    #[error("switch refused {request}: {error}")]
    Rejected { request: String, error: ErrorMsg },
    /// The request could not be encoded (e.g. a match field without its prerequisite).
    #[error("invalid request {request}: {reason}")]
    Invalid { request: String, reason: String },
    /// The switch did not answer in time.
    #[error("the switch did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The switch answered with something we did not expect.
    #[error("unexpected reply from the switch: {0}")]
    BadReply(String),
}

impl SwitchError {
    pub(crate) fn unexpected(msg: &Message) -> SwitchError {
        SwitchError::BadReply(describe(msg))
    }
}

/// One refused request of a transaction.
#[derive(Debug, Clone)]
pub struct RequestFailure {
    /// Position in the transaction, from 0.
    pub index: usize,
    pub xid: u32,
    pub request: Message,
    pub error: ErrorMsg,
}

impl fmt::Display for RequestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} for request #{} (xid={:#x}): {}",
            self.error,
            self.index,
            self.xid,
            describe(&self.request)
        )
    }
}

/// A transaction failed. With [`crate::TxMode::Bundle`] nothing of it was applied.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TxError {
    #[error(transparent)]
    Switch(#[from] SwitchError),
    /// A request could not be encoded; nothing was sent.
    #[error("request #{index} is invalid ({reason}): {request}")]
    Invalid {
        index: usize,
        request: String,
        reason: String,
    },
    /// The switch refused one or more requests (or the bundle itself).
    #[error("{}", rejected_text(failures, bundle.as_ref()))]
    Rejected {
        failures: Vec<RequestFailure>,
        /// The error of the bundle open or commit, when the switch sent one.
        bundle: Option<ErrorMsg>,
    },
}

fn rejected_text(failures: &[RequestFailure], bundle: Option<&ErrorMsg>) -> String {
    let mut parts: Vec<String> = failures.iter().map(ToString::to_string).collect();
    if let Some(b) = bundle {
        parts.push(format!("bundle failed: {b}"));
    }
    if parts.is_empty() {
        parts.push("transaction refused".into());
    }
    parts.join("; ")
}

/// A message in ovs-ofctl's words, for errors and logs.
pub fn describe(msg: &Message) -> String {
    match msg {
        Message::FlowMod(fm) => format!("flow_mod {fm}"),
        Message::GroupMod(gm) => format!("group_mod {gm}"),
        other => format!("{:?}", other.msg_type()),
    }
}
