//! Errors of the OVSDB client: one enum, each variant naming what failed and where.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

/// Everything that can go wrong talking to ovsdb-server.
#[derive(Debug, thiserror::Error)]
pub enum OvsdbError {
    /// The unix socket could not be opened.
    #[error("cannot connect to ovsdb-server at {path}: {source}")]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Reading from or writing to the socket failed.
    #[error("ovsdb-server connection {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The server sent bytes that are not JSON, or JSON that is not a JSON-RPC message.
    #[error("ovsdb-server sent an undecodable message: {problem}")]
    Decode { problem: String },
    /// The connection went away while the request was outstanding (the client reconnects by
    /// itself; the request may or may not have been applied).
    #[error("ovsdb-server connection lost while waiting for the reply to {method}")]
    Disconnected { method: String },
    /// The client task has stopped (all handles to it were dropped or it was shut down).
    #[error("the OVSDB client has stopped")]
    Closed,
    /// The server answered a request with a JSON-RPC error.
    #[error("ovsdb-server rejected {method}: {error}")]
    Rpc { method: String, error: Value },
    /// One operation of a transaction failed; the whole transaction was rolled back.
    /// `op_index` counts from 0; when the failure was detected at commit time (for example a
    /// referential integrity violation) `op` is `"commit"` and `op_index` equals the number of
    /// operations sent.
    #[error("transaction failed at operation {op_index} ({op}): {error}{}", details.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Transaction {
        op_index: usize,
        op: String,
        error: String,
        details: Option<String>,
    },
    /// A reply was well-formed JSON-RPC but its result does not have the shape RFC 7047 gives.
    #[error("unexpected reply to {method}: {problem}")]
    UnexpectedReply { method: String, problem: String },
    /// A wait on the monitor cache did not see the expected state in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { what: String, after: Duration },
    /// A row the operation needs does not exist (in the monitor cache).
    #[error("no {table} row named {name:?}")]
    NotFound { table: &'static str, name: String },
    /// ovs-vswitchd reported an error for an interface (the `error` column), so it will never
    /// get an OpenFlow port number.
    #[error("interface {name:?} failed in ovs-vswitchd: {error}")]
    InterfaceFailed { name: String, error: String },
}
