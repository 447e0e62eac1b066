//! The one error type of the sandboxes: each variant says which program or step failed and why.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A program could not be started at all (missing binary, permissions).
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },

    /// A command ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },

    /// A daemon did not become ready in time; `log` is the tail of its log file.
    #[error("{what} did not become ready within {seconds} s; log tail:\n{log}")]
    NotReady {
        what: String,
        seconds: u64,
        log: String,
    },

    /// A daemon exited while we waited for it.
    #[error("{what} exited during start-up ({status}); log tail:\n{log}")]
    Exited {
        what: String,
        status: String,
        log: String,
    },

    /// Output of a tool had a shape we do not understand.
    #[error("cannot parse {what}: {line:?}")]
    Parse { what: &'static str, line: String },

    /// A file-system operation on a sandbox directory failed.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A step of a scenario (the chaos run) could not be carried out.
    #[error("{step}: {why}")]
    Step { step: String, why: String },

    /// An operation that needs a running daemon was called after it was stopped.
    #[error("{0} is not running")]
    NotRunning(&'static str),
}
