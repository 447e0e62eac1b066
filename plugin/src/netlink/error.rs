//! Errors of the netlink plumbing, each naming the operation and the link or namespace.

use std::path::PathBuf;

/// Everything that can go wrong while plumbing links.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// No rtnetlink socket could be opened.
    #[error("cannot open a netlink socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The namespace file could not be opened or entered.
    #[error("cannot enter network namespace {path}: {problem}")]
    Namespace { path: PathBuf, problem: String },
    /// The kernel refused a request.
    #[error("{op}: {source}")]
    Request {
        op: String,
        #[source]
        source: rtnetlink::Error,
    },
    /// A link the operation needs does not exist.
    #[error("no link named {name:?} in {netns}")]
    LinkNotFound { name: String, netns: String },
    /// An argument is out of range (a name too long for the kernel, a bad MAC).
    #[error("invalid {what}: {problem}")]
    Invalid { what: &'static str, problem: String },
    /// A kernel setting under `/proc/sys` could not be written.
    #[error("cannot write {path}: {source}")]
    Sysctl {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The worker thread that runs requests inside a namespace failed.
    #[error("namespace worker thread: {0}")]
    Worker(String),
}

impl NetlinkError {
    /// Wrap an rtnetlink error with the operation it belongs to.
    pub(crate) fn request(op: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> Self {
        let op = op.into();
        move |source| NetlinkError::Request { op, source }
    }

    /// The kernel's errno for a refused request, if this is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            NetlinkError::Request {
                source: rtnetlink::Error::NetlinkError(msg),
                ..
            } => msg.code.map(|c| -c.get()),
            _ => None,
        }
    }
}
