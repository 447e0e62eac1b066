//! The OVSDB connection: a task that owns the unix socket, and a cloneable handle.
//!
//! The task (one per [`OvsdbClient::connect`]) numbers requests, matches replies to callers,
//! answers the server's `echo` requests, applies `update` notifications to the monitor cache,
//! and when the socket closes fails the outstanding requests with
//! [`OvsdbError::Disconnected`], marks the cache disconnected and reconnects with backoff,
//! re-establishing the monitor (which replaces the cache). It stops when every handle is dropped.
//!
//! Database: `Open_vSwitch`. Monitored tables and columns: [`super::cache::MONITORED`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{mpsc, oneshot, watch};

use super::cache::{Cache, monitor_requests};
use super::error::OvsdbError;
use super::framing::MessageBuffer;
use super::op::Operation;

/// The database every request addresses.
pub const DATABASE: &str = "Open_vSwitch";

/// Id of our monitor, echoed back by the server in each `update`.
const MONITOR_ID: &str = "netplugin";

/// The first reconnect attempt waits this long; each failure doubles it up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// A request from a handle to the task.
struct Command {
    method: &'static str,
    params: Value,
    reply: oneshot::Sender<Result<Value, OvsdbError>>,
}

/// Handle to an OVSDB connection. Cheap to clone; the connection closes when the last clone is
/// dropped.
#[derive(Clone, Debug)]
pub struct OvsdbClient {
    commands: mpsc::Sender<CommandBox>,
    cache: watch::Receiver<Cache>,
    path: PathBuf,
}

// `Command` holds a oneshot sender, which is not `Debug`; the box keeps `OvsdbClient: Debug`.
struct CommandBox(Command);

impl std::fmt::Debug for CommandBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Command({})", self.0.method)
    }
}

impl OvsdbClient {
    /// Connect to the unix socket at `path`, start monitoring, and return once the cache holds
    /// the initial content. Fails if the first connection or monitor fails (later losses of
    /// the connection are repaired by reconnecting).
    pub async fn connect(path: impl AsRef<Path>) -> Result<OvsdbClient, OvsdbError> {
        let path = path.as_ref().to_path_buf();
        let session = establish(&path).await?;
        let mut cache = Cache::default();
        cache
            .reset(&session.initial)
            .map_err(|problem| OvsdbError::Decode { problem })?;
        let (cache_tx, cache_rx) = watch::channel(cache);
        let (cmd_tx, cmd_rx) = mpsc::channel(64);
        tokio::spawn(run(path.clone(), session, cmd_rx, cache_tx));
        Ok(OvsdbClient {
            commands: cmd_tx,
            cache: cache_rx,
            path,
        })
    }

    /// The socket this client talks to.
    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    /// Send a JSON-RPC request and wait for its result.
    pub async fn call(&self, method: &'static str, params: Value) -> Result<Value, OvsdbError> {
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(CommandBox(Command {
                method,
                params,
                reply,
            }))
            .await
            .map_err(|_| OvsdbError::Closed)?;
        rx.await.map_err(|_| OvsdbError::Closed)?
    }

    /// Run `ops` as one atomic transaction on `Open_vSwitch` and return the per-operation
    /// results (for an insert: `{"uuid": ["uuid", ...]}`; for a select: `{"rows": [...]}`).
    /// Any failing operation fails the whole transaction with [`OvsdbError::Transaction`].
    pub async fn transact(&self, ops: &[Operation]) -> Result<Vec<Value>, OvsdbError> {
        let mut params = vec![Value::String(DATABASE.to_owned())];
        params.extend(ops.iter().map(Operation::to_json));
        let result = self.call("transact", Value::Array(params)).await?;
        check_transaction(ops, result)
    }

    /// Round-trip an `echo` (liveness check).
    pub async fn echo(&self) -> Result<(), OvsdbError> {
        let payload = json!(["netplugin-echo"]);
        let result = self.call("echo", payload.clone()).await?;
        if result == payload {
            Ok(())
        } else {
            Err(OvsdbError::UnexpectedReply {
                method: "echo".into(),
                problem: format!("echoed {result} instead of {payload}"),
            })
        }
    }

    /// Read the current cache.
    pub fn read<T>(&self, f: impl FnOnce(&Cache) -> T) -> T {
        f(&self.cache.borrow())
    }

    /// Wait until `f` returns `Some` for the cache (checked now and after every change), or
    /// fail with [`OvsdbError::Timeout`] naming `what`.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut f: impl FnMut(&Cache) -> Option<T>,
    ) -> Result<T, OvsdbError> {
        let mut rx = self.cache.clone();
        let mut found = None;
        let waited = tokio::time::timeout(timeout, async {
            rx.wait_for(|cache| {
                found = f(cache);
                found.is_some()
            })
            .await
            .map(|_| ())
        })
        .await;
        match waited {
            Err(_) => Err(OvsdbError::Timeout {
                what: what.to_owned(),
                after: timeout,
            }),
            Ok(Err(_)) => Err(OvsdbError::Closed),
            Ok(Ok(())) => found.ok_or(OvsdbError::Closed),
        }
    }
}

/// Turn a `transact` result into per-operation results, or the first error in it.
fn check_transaction(ops: &[Operation], result: Value) -> Result<Vec<Value>, OvsdbError> {
    let Value::Array(results) = result else {
        return Err(OvsdbError::UnexpectedReply {
            method: "transact".into(),
            problem: format!("result is not an array: {result}"),
        });
    };
    for (op_index, outcome) in results.iter().enumerate() {
        if let Some(error) = outcome.get("error").and_then(Value::as_str) {
            return Err(OvsdbError::Transaction {
                op_index,
                op: ops
                    .get(op_index)
                    .map(|op| {
                        format!("{} {}", op.name(), op.table())
                            .trim_end()
                            .to_owned()
                    })
                    .unwrap_or_else(|| "commit".to_owned()),
                error: error.to_owned(),
                details: outcome
                    .get("details")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
        }
    }
    if results.len() < ops.len() {
        return Err(OvsdbError::UnexpectedReply {
            method: "transact".into(),
            problem: format!("{} results for {} operations", results.len(), ops.len()),
        });
    }
    Ok(results)
}

/// A connected socket with the monitor established.
struct Session {
    stream: UnixStream,
    /// Bytes read past the monitor reply.
    buffer: MessageBuffer,
    /// Complete messages that arrived in the same read as the monitor reply, after it.
    backlog: Vec<Value>,
    /// The monitor reply's `<table-updates>`.
    initial: Value,
}

/// A server that accepts but does not answer the monitor within this time is treated as down.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(10);

/// Connect and send the `monitor` request; return when its reply has arrived.
async fn establish(path: &Path) -> Result<Session, OvsdbError> {
    tokio::time::timeout(ESTABLISH_TIMEOUT, establish_now(path))
        .await
        .map_err(|_| OvsdbError::Timeout {
            what: format!("the monitor reply from {}", path.display()),
            after: ESTABLISH_TIMEOUT,
        })?
}

async fn establish_now(path: &Path) -> Result<Session, OvsdbError> {
    let io_err = |source| OvsdbError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut stream = UnixStream::connect(path)
        .await
        .map_err(|source| OvsdbError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
    let request = json!({"id": 0, "method": "monitor",
                         "params": [DATABASE, MONITOR_ID, monitor_requests()]});
    stream
        .write_all(request.to_string().as_bytes())
        .await
        .map_err(io_err)?;
    let mut buffer = MessageBuffer::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut chunk).await.map_err(io_err)?;
        if n == 0 {
            return Err(io_err(std::io::ErrorKind::UnexpectedEof.into()));
        }
        buffer.extend(&chunk[..n]);
        let mut messages = buffer
            .drain_messages()
            .map_err(|problem| OvsdbError::Decode { problem })?
            .into_iter();
        while let Some(message) = messages.next() {
            if message.get("id") == Some(&json!(0)) && message.get("method").is_none() {
                if let Some(error) = message.get("error").filter(|e| !e.is_null()) {
                    return Err(OvsdbError::Rpc {
                        method: "monitor".into(),
                        error: error.clone(),
                    });
                }
                let initial = message.get("result").cloned().unwrap_or(json!({}));
                return Ok(Session {
                    stream,
                    buffer,
                    backlog: messages.collect(),
                    initial,
                });
            }
            if let Some(reply) = reply_to_server_request(&message) {
                stream
                    .write_all(reply.to_string().as_bytes())
                    .await
                    .map_err(io_err)?;
            }
        }
    }
}

/// The reply to a request the server sent us (`echo`), if `message` is one.
fn reply_to_server_request(message: &Value) -> Option<Value> {
    let method = message.get("method")?.as_str()?;
    let id = message.get("id").filter(|id| !id.is_null())?;
    Some(if method == "echo" {
        json!({"id": id, "result": message.get("params").cloned().unwrap_or(json!([])), "error": null})
    } else {
        json!({"id": id, "result": null, "error": format!("unsupported method {method}")})
    })
}

/// Why a session ended.
enum SessionEnd {
    /// All handles are gone: stop.
    HandlesDropped,
    /// The connection failed: reconnect.
    Lost(String),
}

/// The task body: serve sessions until all handles are dropped.
async fn run(
    path: PathBuf,
    session: Session,
    mut commands: mpsc::Receiver<CommandBox>,
    cache: watch::Sender<Cache>,
) {
    let mut session = session;
    loop {
        let Session {
            stream,
            buffer,
            backlog,
            ..
        } = session;
        match serve(stream, buffer, backlog, &mut commands, &cache).await {
            SessionEnd::HandlesDropped => return,
            SessionEnd::Lost(why) => {
                tracing::warn!(socket = %path.display(), %why, "OVSDB connection lost; reconnecting");
                cache.send_modify(Cache::set_disconnected);
            }
        }
        let mut backoff = MIN_BACKOFF;
        session = loop {
            // While disconnected, requests fail at once rather than queueing behind the
            // reconnect: callers decide whether to retry.
            let sleep = tokio::time::sleep(backoff);
            tokio::pin!(sleep);
            loop {
                tokio::select! {
                    cmd = commands.recv() => match cmd {
                        None => return,
                        Some(CommandBox(cmd)) => {
                            let _ = cmd.reply.send(Err(OvsdbError::Disconnected { method: cmd.method.into() }));
                        }
                    },
                    () = &mut sleep => break,
                }
            }
            match establish(&path).await {
                Ok(s) => break s,
                Err(e) => {
                    tracing::debug!(socket = %path.display(), error = %e, "OVSDB reconnect failed");
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        };
        let mut reset = Ok(());
        cache.send_modify(|c| reset = c.reset(&session.initial));
        if let Err(problem) = reset {
            tracing::warn!(socket = %path.display(), %problem, "bad monitor reply after reconnect");
        } else {
            tracing::info!(socket = %path.display(), "OVSDB connection re-established");
        }
    }
}

/// Serve one connection: forward requests, dispatch replies and notifications.
async fn serve(
    stream: UnixStream,
    mut buffer: MessageBuffer,
    mut backlog: Vec<Value>,
    commands: &mut mpsc::Receiver<CommandBox>,
    cache: &watch::Sender<Cache>,
) -> SessionEnd {
    let (mut reader, mut writer) = stream.into_split();
    // Id 0 was the monitor request.
    let mut next_id: u64 = 1;
    let mut pending: HashMap<u64, Command> = HashMap::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let end = 'session: loop {
        // Messages that came with the monitor reply, then whatever is buffered, before waiting.
        let mut messages = std::mem::take(&mut backlog);
        match buffer.drain_messages() {
            Ok(m) => messages.extend(m),
            Err(problem) => break SessionEnd::Lost(problem),
        };
        for message in messages {
            if let Err(why) = dispatch(message, &mut pending, &mut writer, cache).await {
                break 'session SessionEnd::Lost(why);
            }
        }
        tokio::select! {
            cmd = commands.recv() => {
                let Some(CommandBox(cmd)) = cmd else { break SessionEnd::HandlesDropped };
                let id = next_id;
                next_id += 1;
                let request = json!({"id": id, "method": cmd.method, "params": cmd.params});
                if let Err(e) = writer.write_all(request.to_string().as_bytes()).await {
                    let _ = cmd.reply.send(Err(OvsdbError::Disconnected { method: cmd.method.into() }));
                    break SessionEnd::Lost(format!("write: {e}"));
                }
                pending.insert(id, cmd);
            }
            read = reader.read(&mut chunk) => match read {
                Ok(0) => break SessionEnd::Lost("closed by ovsdb-server".into()),
                Ok(n) => buffer.extend(&chunk[..n]),
                Err(e) => break SessionEnd::Lost(format!("read: {e}")),
            },
        }
    };
    for (_, cmd) in pending.drain() {
        let _ = cmd.reply.send(Err(OvsdbError::Disconnected {
            method: cmd.method.into(),
        }));
    }
    end
}

/// Handle one message from the server.
async fn dispatch(
    message: Value,
    pending: &mut HashMap<u64, Command>,
    writer: &mut OwnedWriteHalf,
    cache: &watch::Sender<Cache>,
) -> Result<(), String> {
    if let Some(method) = message.get("method").and_then(Value::as_str) {
        if method == "update" {
            let updates = message
                .get("params")
                .and_then(|p| p.get(1))
                .ok_or_else(|| format!("update without table-updates: {message}"))?;
            let mut applied = Ok(());
            cache.send_modify(|c| applied = c.apply(updates));
            return applied;
        }
        if let Some(reply) = reply_to_server_request(&message) {
            writer
                .write_all(reply.to_string().as_bytes())
                .await
                .map_err(|e| format!("write: {e}"))?;
        }
        return Ok(());
    }
    let Some(id) = message.get("id").and_then(Value::as_u64) else {
        // A reply to an id we never use (e.g. our monitor's 0 after a race): ignore.
        return Ok(());
    };
    let Some(cmd) = pending.remove(&id) else {
        return Ok(());
    };
    let outcome = match message.get("error").filter(|e| !e.is_null()) {
        Some(error) => Err(OvsdbError::Rpc {
            method: cmd.method.into(),
            error: error.clone(),
        }),
        None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
    };
    let _ = cmd.reply.send(outcome);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ovsdb::op::{Condition, Operation};

    #[test]
    fn transaction_error_names_the_failing_operation() {
        let ops = vec![
            Operation::Delete {
                table: "Port",
                conditions: vec![Condition::name("p")],
            },
            Operation::Comment("x".into()),
        ];
        let err = check_transaction(
            &ops,
            json!([{"count": 1}, {"error": "constraint violation", "details": "tag 5000 out of range"}]),
        )
        .unwrap_err();
        match err {
            OvsdbError::Transaction {
                op_index,
                op,
                error,
                details,
            } => {
                assert_eq!(op_index, 1);
                assert_eq!(op, "comment");
                assert_eq!(error, "constraint violation");
                assert_eq!(details.as_deref(), Some("tag 5000 out of range"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn commit_time_error_is_reported_as_commit() {
        let ops = vec![Operation::Delete {
            table: "Interface",
            conditions: vec![],
        }];
        let err = check_transaction(
            &ops,
            json!([{"count": 1}, {"error": "referential integrity violation"}]),
        )
        .unwrap_err();
        assert!(
            matches!(err, OvsdbError::Transaction { op_index: 1, ref op, .. } if op == "commit"),
            "{err}"
        );
    }

    /// A scripted server: answers the monitor, then sends an `echo` request and an `update`,
    /// and checks the client's reply to the echo.
    #[tokio::test]
    async fn answers_server_echo_applies_updates_and_fails_pending_on_close() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = MessageBuffer::default();
            let mut chunk = vec![0u8; 4096];
            let mut next = async |conn: &mut UnixStream, buf: &mut MessageBuffer| loop {
                if let Some(m) = buf.drain_messages().unwrap().into_iter().next() {
                    return m;
                }
                let n = conn.read(&mut chunk).await.unwrap();
                assert!(n > 0, "client closed");
                buf.extend(&chunk[..n]);
            };
            let monitor = next(&mut conn, &mut buf).await;
            assert_eq!(monitor["method"], "monitor");
            assert_eq!(monitor["params"][0], DATABASE);
            let reply = json!({"id": 0, "error": null, "result": {
                "Bridge": {"b1": {"new": {"name": "br0"}}}}});
            conn.write_all(reply.to_string().as_bytes()).await.unwrap();
            let echo = json!({"id": "echo", "method": "echo", "params": ["ping"]});
            let update = json!({"id": null, "method": "update", "params": [MONITOR_ID,
                {"Bridge": {"b2": {"new": {"name": "br1"}}}}]});
            conn.write_all(format!("{echo}{update}").as_bytes())
                .await
                .unwrap();
            let echo_reply = next(&mut conn, &mut buf).await;
            assert_eq!(
                echo_reply,
                json!({"id": "echo", "result": ["ping"], "error": null})
            );
            // A transact that never gets an answer: the server goes away instead.
            let transact = next(&mut conn, &mut buf).await;
            assert_eq!(transact["method"], "transact");
            drop(conn);
        });
        let client = OvsdbClient::connect(&path).await.unwrap();
        assert!(client.read(|c| c.bridge("br0").is_some()));
        client
            .wait_for("the update", Duration::from_secs(5), |c| {
                c.bridge("br1").map(|_| ())
            })
            .await
            .unwrap();
        let err = client
            .transact(&[Operation::Comment("x".into())])
            .await
            .unwrap_err();
        assert!(
            matches!(err, OvsdbError::Disconnected { ref method } if method == "transact"),
            "{err}"
        );
        server.await.unwrap();
        client
            .wait_for("disconnected", Duration::from_secs(5), |c| {
                (!c.is_connected()).then_some(())
            })
            .await
            .unwrap();
        // While nobody listens, requests fail at once instead of hanging.
        let err = client.echo().await.unwrap_err();
        assert!(matches!(err, OvsdbError::Disconnected { .. }), "{err}");
    }

    #[test]
    fn server_echo_is_answered_with_its_params() {
        let reply =
            reply_to_server_request(&json!({"id": "echo", "method": "echo", "params": [1]}))
                .unwrap();
        assert_eq!(reply, json!({"id": "echo", "result": [1], "error": null}));
        assert!(reply_to_server_request(&json!({"id": 3, "result": []})).is_none());
    }
}
