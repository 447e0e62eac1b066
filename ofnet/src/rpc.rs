//! The master↔agent RPC on Contiv's wire: Go `net/rpc` with the JSON-RPC 1.0 codec over plain
//! TCP, so an ofnet agent or master written in Go can sit in the same cluster.
//!
//! Wire format: JSON values back to back on the stream (we end each with a newline, as Go's
//! encoder does). Request `{"method":"OfnetMaster.RegisterNode","params":[{...}],"id":7}`
//! (exactly one argument, in an array), response `{"id":7,"result":true,"error":null}` or
//! `{"id":7,"result":null,"error":"..."}`. Method names are the reference's (§5.1).
//!
//! - [`Peer`]: the client side, a task owning one connection plus a cloneable handle. Calls
//!   go out in the order they were queued and are answered one at a time, so an `EndpointAdd`
//!   followed by an `EndpointDel` can never arrive swapped (a Go server runs calls
//!   concurrently; waiting for each answer keeps the order there too). The queue is bounded:
//!   [`Peer::notify`] never waits and reports a full queue, so a peer that stops reading
//!   cannot hold up the caller. A broken connection is re-dialled (a few attempts with
//!   back-off), greeted again, and the call retried once.
//! - [`serve`]: the server side, an accept loop with one session task per connection that
//!   decodes each request, hands it to a [`Service`] and answers in order. A malformed JSON
//!   value, a request without a method, an unknown method or wrong params are answered with
//!   an error naming the problem (id `null` when none could be read); the connection stays
//!   usable.

use bytes::{Buf, BytesMut};
use futures::future::LocalBoxFuture;
use futures::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{Decoder, Encoder, Framed};

/// How long a call waits for its answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Dial attempts before a call fails, and the pause between them (doubling).
const DIAL_ATTEMPTS: u32 = 5;
const DIAL_BACKOFF: Duration = Duration::from_millis(50);
/// Calls a peer may have queued before [`Peer::notify`] reports it as too far behind.
pub const PEER_QUEUE: usize = 4096;
/// The largest JSON value accepted on a connection.
pub const MAX_VALUE: usize = 16 << 20;

/// A request as the server reads it (the id is echoed whatever its JSON type).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub method: String,
    #[serde(default)]
    pub params: Value,
    #[serde(default)]
    pub id: Value,
}

/// A response: `error` is `null` on success, `result` is `null` on failure (Go's codec writes
/// both).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: Value,
    #[serde(default)]
    pub result: Value,
    #[serde(default)]
    pub error: Option<Value>,
}

/// A failed call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    #[error("cannot reach {peer}: {reason}")]
    Unreachable { peer: SocketAddr, reason: String },
    #[error("{peer} did not answer {method} within {CALL_TIMEOUT:?}")]
    Timeout { peer: SocketAddr, method: String },
    #[error("{peer} refused {method}: {error}")]
    Remote {
        peer: SocketAddr,
        method: String,
        error: String,
    },
    #[error("{peer} sent a malformed answer to {method}: {reason}")]
    BadReply {
        peer: SocketAddr,
        method: String,
        reason: String,
    },
    #[error("cannot encode the arguments of {method}: {reason}")]
    Encode { method: String, reason: String },
    #[error("{peer} is too far behind: {PEER_QUEUE} calls already queued")]
    Full { peer: SocketAddr },
    #[error("the connection task to {0} is gone")]
    Closed(SocketAddr),
}

/// What the codec reads: a JSON value, or bytes that are not one (skipped up to the next
/// newline, so the stream stays usable).
#[derive(Debug)]
pub enum Frame {
    Value(Value),
    Malformed(String),
}

/// JSON values back to back, each written with a trailing newline.
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonCodec;

impl Decoder for JsonCodec {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        let start = buf
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(buf.len());
        buf.advance(start);
        if buf.is_empty() {
            return Ok(None);
        }
        let mut values = serde_json::Deserializer::from_slice(buf).into_iter::<Value>();
        match values.next() {
            Some(Ok(v)) => {
                let used = values.byte_offset();
                buf.advance(used);
                Ok(Some(Frame::Value(v)))
            }
            Some(Err(e)) if e.is_eof() => {
                if buf.len() > MAX_VALUE {
                    return Err(std::io::Error::other(format!(
                        "a JSON value longer than {MAX_VALUE} bytes"
                    )));
                }
                Ok(None)
            }
            Some(Err(e)) => {
                let skip = buf
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(buf.len(), |n| n + 1);
                buf.advance(skip);
                Ok(Some(Frame::Malformed(e.to_string())))
            }
            None => Ok(None),
        }
    }
}

impl Encoder<Vec<u8>> for JsonCodec {
    type Error = std::io::Error;

    fn encode(&mut self, mut item: Vec<u8>, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        item.push(b'\n');
        dst.extend_from_slice(&item);
        Ok(())
    }
}

type Conn = Framed<TcpStream, JsonCodec>;

/// Arguments serialized once (a relay to a thousand agents encodes its endpoint once).
pub type Params = Arc<str>;

/// Serialize one call argument.
pub fn encode_params<P: Serialize>(method: &str, params: &P) -> Result<Params, RpcError> {
    serde_json::to_string(params)
        .map(Params::from)
        .map_err(|e| RpcError::Encode {
            method: method.into(),
            reason: e.to_string(),
        })
}

/// The bytes of request `id`.
fn request_bytes(method: &str, params: &str, id: u64) -> Vec<u8> {
    let method = serde_json::to_string(method).unwrap_or_else(|_| "\"\"".into());
    format!("{{\"method\":{method},\"params\":[{params}],\"id\":{id}}}").into_bytes()
}

struct Call {
    /// `None`: only make sure the connection is up (and greeted).
    method: Option<Arc<str>>,
    params: Params,
    /// `None`: nobody waits; a failure is logged.
    reply: Option<oneshot::Sender<Result<Value, RpcError>>>,
}

/// The calls a peer makes first on every new connection, before anything queued: how a client
/// re-synchronizes a server that restarted (register, then re-announce its state), or how a
/// master re-synchronizes an agent it dropped.
pub type Greeting = std::rc::Rc<dyn Fn() -> LocalBoxFuture<'static, Vec<(String, Value)>>>;

/// A handle to a remote RPC server (see the module documentation).
#[derive(Clone, Debug)]
pub struct Peer {
    addr: SocketAddr,
    calls: mpsc::Sender<Call>,
    task: tokio::task::AbortHandle,
}

impl Peer {
    /// Start the connection task (inside an actix or tokio runtime); it dials on first use.
    pub fn new(addr: SocketAddr) -> Peer {
        Self::start(addr, None)
    }

    /// A peer that sends `greeting`'s calls on every new connection.
    pub fn with_greeting(addr: SocketAddr, greeting: Greeting) -> Peer {
        Self::start(addr, Some(greeting))
    }

    fn start(addr: SocketAddr, greeting: Option<Greeting>) -> Peer {
        let (calls, rx) = mpsc::channel(PEER_QUEUE);
        let task = actix_rt::spawn(run_peer(addr, rx, greeting)).abort_handle();
        Peer { addr, calls, task }
    }

    /// Connect now (and greet) instead of on the first call.
    pub async fn connect(&self) -> Result<(), RpcError> {
        let (reply, answer) = oneshot::channel();
        self.calls
            .send(Call {
                method: None,
                params: Params::from("null"),
                reply: Some(reply),
            })
            .await
            .map_err(|_| RpcError::Closed(self.addr))?;
        answer
            .await
            .map_err(|_| RpcError::Closed(self.addr))?
            .map(|_| ())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop the connection task now, dropping whatever is queued.
    pub fn close(&self) {
        self.task.abort();
    }

    /// Call `method` and decode its result (waits for room in the queue).
    pub async fn call<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R, RpcError> {
        let params = encode_params(method, params)?;
        let (reply, answer) = oneshot::channel();
        self.calls
            .send(Call {
                method: Some(method.into()),
                params,
                reply: Some(reply),
            })
            .await
            .map_err(|_| RpcError::Closed(self.addr))?;
        let value = answer.await.map_err(|_| RpcError::Closed(self.addr))??;
        serde_json::from_value(value).map_err(|e| RpcError::BadReply {
            peer: self.addr,
            method: method.to_string(),
            reason: e.to_string(),
        })
    }

    /// Queue a call whose answer nobody waits for (a failed call is logged); order with the
    /// other calls on this peer is kept. Never waits: a full queue is [`RpcError::Full`].
    pub fn notify<P: Serialize>(&self, method: &str, params: &P) -> Result<(), RpcError> {
        self.notify_encoded(method.into(), encode_params(method, params)?)
    }

    /// [`Peer::notify`] with arguments already serialized.
    pub fn notify_encoded(&self, method: Arc<str>, params: Params) -> Result<(), RpcError> {
        self.calls
            .try_send(Call {
                method: Some(method),
                params,
                reply: None,
            })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => RpcError::Full { peer: self.addr },
                mpsc::error::TrySendError::Closed(_) => RpcError::Closed(self.addr),
            })
    }

    /// Calls queued and not yet answered.
    pub fn backlog(&self) -> usize {
        PEER_QUEUE - self.calls.capacity()
    }
}

async fn dial(addr: SocketAddr) -> Result<Conn, RpcError> {
    let mut pause = DIAL_BACKOFF;
    let mut last = String::new();
    for _ in 0..DIAL_ATTEMPTS {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(Framed::new(s, JsonCodec));
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
    Err(RpcError::Unreachable {
        peer: addr,
        reason: last,
    })
}

/// Why one exchange failed.
enum ExchangeError {
    /// The connection broke (a retry on a new one may work).
    Broken,
    /// The peer answered something that is not a response.
    Bad(String),
}

/// One request/response exchange on `conn`.
async fn exchange(
    conn: &mut Conn,
    method: &str,
    params: &str,
    id: u64,
) -> Result<Response, ExchangeError> {
    conn.send(request_bytes(method, params, id))
        .await
        .map_err(|_| ExchangeError::Broken)?;
    loop {
        let frame = conn
            .next()
            .await
            .ok_or(ExchangeError::Broken)?
            .map_err(|_| ExchangeError::Broken)?;
        let value = match frame {
            Frame::Value(v) => v,
            Frame::Malformed(reason) => return Err(ExchangeError::Bad(reason)),
        };
        let resp: Response =
            serde_json::from_value(value).map_err(|e| ExchangeError::Bad(e.to_string()))?;
        if resp.id.as_u64() == Some(id) {
            return Ok(resp);
        }
        // An answer to a call that timed out earlier: skip it.
    }
}

/// The outcome of one call on `conn` (`None` in the error means: re-dial and retry).
async fn call_on(
    addr: SocketAddr,
    conn: &mut Conn,
    method: &str,
    params: &str,
    id: u64,
) -> Result<Value, Option<RpcError>> {
    match tokio::time::timeout(CALL_TIMEOUT, exchange(conn, method, params, id)).await {
        Err(_) => Err(Some(RpcError::Timeout {
            peer: addr,
            method: method.into(),
        })),
        Ok(Err(ExchangeError::Broken)) => Err(None),
        Ok(Err(ExchangeError::Bad(reason))) => Err(Some(RpcError::BadReply {
            peer: addr,
            method: method.into(),
            reason,
        })),
        Ok(Ok(resp)) => match resp.error {
            None | Some(Value::Null) => Ok(resp.result),
            Some(Value::String(error)) => Err(Some(RpcError::Remote {
                peer: addr,
                method: method.into(),
                error,
            })),
            Some(other) => Err(Some(RpcError::Remote {
                peer: addr,
                method: method.into(),
                error: other.to_string(),
            })),
        },
    }
}

/// Dial `addr` and send the greeting's calls; a refused greeting call is logged, a broken
/// connection fails the dial.
async fn dial_and_greet(
    addr: SocketAddr,
    greeting: Option<&Greeting>,
    next_id: &mut u64,
) -> Result<Conn, RpcError> {
    let mut conn = dial(addr).await?;
    let Some(greeting) = greeting else {
        return Ok(conn);
    };
    for (method, params) in greeting().await {
        let params = encode_params(&method, &params)?;
        *next_id += 1;
        match call_on(addr, &mut conn, &method, &params, *next_id).await {
            Ok(_) => {}
            Err(Some(e @ RpcError::Remote { .. })) => {
                tracing::warn!(%addr, error = %e, "greeting call refused");
            }
            Err(Some(e)) => return Err(e),
            Err(None) => {
                return Err(RpcError::Unreachable {
                    peer: addr,
                    reason: "connection lost while greeting".into(),
                });
            }
        }
    }
    Ok(conn)
}

async fn run_peer(addr: SocketAddr, mut calls: mpsc::Receiver<Call>, greeting: Option<Greeting>) {
    let mut conn: Option<Conn> = None;
    let mut next_id = 0u64;
    while let Some(call) = calls.recv().await {
        let Some(method) = call.method else {
            let outcome = match conn {
                Some(_) => Ok(Value::Null),
                None => match dial_and_greet(addr, greeting.as_ref(), &mut next_id).await {
                    Ok(c) => {
                        conn = Some(c);
                        Ok(Value::Null)
                    }
                    Err(e) => Err(e),
                },
            };
            if let Some(reply) = call.reply {
                let _ = reply.send(outcome);
            }
            continue;
        };
        let mut outcome = Err(RpcError::Closed(addr));
        // A connection that broke since the last call gets one fresh dial and one retry.
        for _attempt in 0..2 {
            if conn.is_none() {
                match dial_and_greet(addr, greeting.as_ref(), &mut next_id).await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        outcome = Err(e);
                        break;
                    }
                }
            }
            let Some(c) = conn.as_mut() else {
                break;
            };
            next_id += 1;
            match call_on(addr, c, &method, &call.params, next_id).await {
                Ok(v) => {
                    outcome = Ok(v);
                    break;
                }
                Err(Some(e)) => {
                    if !matches!(e, RpcError::Remote { .. }) {
                        // A late answer or garbage may follow: start on a fresh connection.
                        conn = None;
                    }
                    outcome = Err(e);
                    break;
                }
                Err(None) => conn = None,
            }
        }
        match call.reply {
            Some(reply) => {
                let _ = reply.send(outcome);
            }
            None => {
                if let Err(e) = outcome {
                    tracing::warn!(error = %e, "RPC notification failed");
                }
            }
        }
    }
}

/// What serves RPC requests: `method` and its one argument in, a result or an error message out.
pub trait Service: Clone + 'static {
    fn call(&self, method: String, params: Value)
    -> LocalBoxFuture<'static, Result<Value, String>>;
}

/// Decode `params` for `method`, naming both on failure.
pub fn params<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, String> {
    serde_json::from_value(params).map_err(|e| format!("bad params for {method}: {e}"))
}

/// A running RPC server; dropping it stops accepting and closes its connections.
pub struct RpcServer {
    addr: SocketAddr,
    task: actix_rt::task::JoinHandle<()>,
    // Sessions end when this is dropped.
    _stop: tokio::sync::watch::Sender<()>,
}

impl RpcServer {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for RpcServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Accept connections on `addr` (port 0 picks one) and serve them with `service`.
pub async fn serve<S: Service>(addr: SocketAddr, service: S) -> std::io::Result<RpcServer> {
    let listener = TcpListener::bind(addr).await?;
    serve_listener(listener, service)
}

/// Serve `service` on a listener already bound.
pub fn serve_listener<S: Service>(listener: TcpListener, service: S) -> std::io::Result<RpcServer> {
    serve_gated(listener, service, None)
}

/// Decides whether a connection from a peer address is served: answers `false` to close it
/// unread (the gate logs what it refuses).
pub type Gate = std::rc::Rc<dyn Fn(SocketAddr) -> LocalBoxFuture<'static, bool>>;

/// [`serve_listener`], serving only the connections `gate` admits (all when `None`).
pub fn serve_gated<S: Service>(
    listener: TcpListener,
    service: S,
    gate: Option<Gate>,
) -> std::io::Result<RpcServer> {
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "RPC server listening");
    let (stop, stopped) = tokio::sync::watch::channel(());
    let task = actix_rt::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let (service, stopped, gate) = (service.clone(), stopped.clone(), gate.clone());
                    actix_rt::spawn(async move {
                        if let Some(gate) = gate
                            && !gate(peer).await
                        {
                            return;
                        }
                        session(Framed::new(stream, JsonCodec), service, stopped).await;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "RPC accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(RpcServer {
        addr,
        task,
        _stop: stop,
    })
}

/// Decode one request value: its id (for the answer) and method and argument, or what is wrong.
fn read_request(value: Value) -> (Value, Result<(String, Value), String>) {
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let req = match serde_json::from_value::<Request>(value) {
        Ok(r) => r,
        Err(e) => return (id, Err(format!("not a JSON-RPC request: {e}"))),
    };
    let arg = match req.params {
        Value::Array(mut args) if args.len() == 1 => args.pop().unwrap_or(Value::Null),
        other => {
            return (
                id,
                Err(format!(
                    "bad params for {}: expected one argument in an array, got {other}",
                    req.method
                )),
            );
        }
    };
    (id, Ok((req.method, arg)))
}

async fn session<S: Service>(
    mut conn: Conn,
    service: S,
    mut stop: tokio::sync::watch::Receiver<()>,
) {
    loop {
        let frame = tokio::select! {
            f = conn.next() => f,
            _ = stop.changed() => return,
        };
        let (id, outcome) = match frame {
            None => return,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "RPC connection failed");
                return;
            }
            Some(Ok(Frame::Malformed(reason))) => {
                (Value::Null, Err(format!("malformed JSON value: {reason}")))
            }
            Some(Ok(Frame::Value(value))) => match read_request(value) {
                (id, Ok((method, arg))) => (id, service.call(method, arg).await),
                (id, Err(e)) => (id, Err(e)),
            },
        };
        let resp = match outcome {
            Ok(result) => Response {
                id,
                result,
                error: None,
            },
            Err(error) => Response {
                id,
                result: Value::Null,
                error: Some(Value::String(error)),
            },
        };
        let Ok(bytes) = serde_json::to_vec(&resp) else {
            return;
        };
        if conn.send(bytes).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    #[derive(Clone)]
    struct Echo;

    impl Service for Echo {
        fn call(
            &self,
            method: String,
            params: Value,
        ) -> LocalBoxFuture<'static, Result<Value, String>> {
            Box::pin(async move {
                match method.as_str() {
                    "Test.Echo" => Ok(params),
                    "Test.Number" => self::params::<u32>(&method, params).map(Value::from),
                    other => Err(format!("unknown method {other}")),
                }
            })
        }
    }

    #[test]
    fn requests_and_responses_use_go_jsonrpc_shapes() {
        assert_eq!(
            String::from_utf8(request_bytes(
                "OfnetMaster.RegisterNode",
                r#"{"HostAddr":"10.0.0.1","HostPort":9002}"#,
                7
            ))
            .unwrap(),
            r#"{"method":"OfnetMaster.RegisterNode","params":[{"HostAddr":"10.0.0.1","HostPort":9002}],"id":7}"#
        );
        let ok = Response {
            id: Value::from(7),
            result: Value::Bool(true),
            error: None,
        };
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"id":7,"result":true,"error":null}"#
        );
        let err: Response = serde_json::from_str(r#"{"id":7,"result":null,"error":"no"}"#).unwrap();
        assert_eq!(err.error, Some(Value::from("no")));
    }

    #[test]
    fn the_codec_reads_values_back_to_back_split_anywhere_and_skips_garbage() {
        let mut codec = JsonCodec;
        let mut buf = BytesMut::from(&b"{\"a\":1}{\"b\":"[..]);
        let Some(Frame::Value(v)) = codec.decode(&mut buf).unwrap() else {
            panic!("first value")
        };
        assert_eq!(v, serde_json::json!({"a": 1}));
        assert!(
            codec.decode(&mut buf).unwrap().is_none(),
            "half a value waits"
        );
        buf.extend_from_slice(b"2}\n{oops\n[3]");
        let Some(Frame::Value(v)) = codec.decode(&mut buf).unwrap() else {
            panic!("second value")
        };
        assert_eq!(v, serde_json::json!({"b": 2}));
        assert!(matches!(
            codec.decode(&mut buf).unwrap(),
            Some(Frame::Malformed(_))
        ));
        let Some(Frame::Value(v)) = codec.decode(&mut buf).unwrap() else {
            panic!("value after garbage")
        };
        assert_eq!(v, serde_json::json!([3]));
    }

    /// A client writing bytes by hand: every bad request gets an error answer naming the
    /// problem, and the same connection then serves a good one.
    #[actix_rt::test]
    async fn bad_input_is_answered_and_the_connection_stays_usable() {
        let server = serve("127.0.0.1:0".parse().unwrap(), Echo).await.unwrap();
        let stream = TcpStream::connect(server.local_addr()).await.unwrap();
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        let mut ask = async |text: &str| -> Value {
            write.write_all(text.as_bytes()).await.unwrap();
            write.write_all(b"\n").await.unwrap();
            let line = lines.next_line().await.unwrap().unwrap();
            serde_json::from_str(&line).unwrap()
        };
        let cases = [
            (r#"{"method":"Test.Echo",oops}"#, "malformed JSON"),
            (r#"{"params":[1],"id":2}"#, "missing field `method`"),
            (
                r#"{"method":"Test.Nope","params":[1],"id":3}"#,
                "unknown method Test.Nope",
            ),
            (
                r#"{"method":"Test.Echo","params":{},"id":4}"#,
                "expected one argument",
            ),
            (
                r#"{"method":"Test.Number","params":["x"],"id":5}"#,
                "bad params for Test.Number",
            ),
        ];
        for (text, why) in cases {
            // The malformed one is cut by the newline and answered once the next arrives.
            let answer = ask(text).await;
            let error = answer["error"].as_str().unwrap_or_default();
            assert!(error.contains(why), "{text}: {answer}");
            assert_eq!(answer["result"], Value::Null, "{answer}");
        }
        let answer = ask(r#"{"method":"Test.Echo","params":[{"x":1}],"id":6}"#).await;
        assert_eq!(
            answer,
            serde_json::json!({"id": 6, "result": {"x": 1}, "error": null})
        );
    }

    #[actix_rt::test]
    async fn calls_are_answered_in_order_and_errors_name_the_method() {
        let server = serve("127.0.0.1:0".parse().unwrap(), Echo).await.unwrap();
        let peer = Peer::new(server.local_addr());
        for n in 0..20 {
            let back: u32 = peer.call("Test.Echo", &n).await.unwrap();
            assert_eq!(back, n);
        }
        let err = peer.call::<_, Value>("Test.Nope", &1).await.unwrap_err();
        assert!(
            matches!(&err, RpcError::Remote { method, error, .. } if method == "Test.Nope" && error.contains("unknown method")),
            "{err}"
        );
        // A refused call leaves the connection usable.
        assert_eq!(peer.call::<_, u32>("Test.Echo", &3).await.unwrap(), 3);
    }

    /// A server that accepts and never reads: notifications fill the bounded queue and are
    /// then refused at once instead of piling up.
    #[actix_rt::test]
    async fn a_peer_that_stops_reading_fills_its_queue_and_is_reported() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _held = actix_rt::spawn(async move {
            let (_s, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        let peer = Peer::new(addr);
        let mut full = None;
        for n in 0..PEER_QUEUE * 2 {
            if let Err(e) = peer.notify("Test.Echo", &n) {
                full = Some((n, e));
                break;
            }
        }
        let (n, e) = full.expect("the queue is bounded");
        assert!(matches!(e, RpcError::Full { peer } if peer == addr), "{e}");
        assert!(
            (PEER_QUEUE - 1..=PEER_QUEUE + 1).contains(&n),
            "full after {n}"
        );
        peer.close();
    }

    /// Counts greetings: every new connection must greet before its first call.
    #[derive(Clone, Default)]
    struct Recorder(std::rc::Rc<std::cell::RefCell<Vec<String>>>);

    impl Service for Recorder {
        fn call(&self, method: String, _: Value) -> LocalBoxFuture<'static, Result<Value, String>> {
            self.0.borrow_mut().push(method);
            Box::pin(async { Ok(Value::Bool(true)) })
        }
    }

    #[actix_rt::test]
    async fn every_new_connection_is_greeted_first() {
        let calls = Recorder::default();
        let server = serve("127.0.0.1:0".parse().unwrap(), calls.clone())
            .await
            .unwrap();
        let addr = server.local_addr();
        let greeting: Greeting =
            std::rc::Rc::new(|| Box::pin(async { vec![("Test.Hello".to_string(), Value::Null)] }));
        let peer = Peer::with_greeting(addr, greeting);
        peer.connect().await.unwrap();
        peer.call::<_, Value>("Test.A", &1).await.unwrap();
        drop(server);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _again = serve(addr, calls.clone()).await.unwrap();
        peer.call::<_, Value>("Test.B", &1).await.unwrap();
        assert_eq!(
            *calls.0.borrow(),
            ["Test.Hello", "Test.A", "Test.Hello", "Test.B"]
        );
    }

    #[actix_rt::test]
    async fn an_unreachable_peer_fails_with_its_address() {
        // Bind then drop: nothing listens there.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = Peer::new(addr)
            .call::<_, Value>("Test.Echo", &1)
            .await
            .unwrap_err();
        assert!(
            matches!(err, RpcError::Unreachable { peer, .. } if peer == addr),
            "{err}"
        );
    }

    #[actix_rt::test]
    async fn a_restarted_server_is_redialled() {
        let server = serve("127.0.0.1:0".parse().unwrap(), Echo).await.unwrap();
        let addr = server.local_addr();
        let peer = Peer::new(addr);
        assert_eq!(peer.call::<_, u32>("Test.Echo", &1).await.unwrap(), 1);
        drop(server);
        // The old connection is closed with the server; a new server on the same port is
        // reached through the same peer.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _again = serve(addr, Echo).await.unwrap();
        assert_eq!(peer.call::<_, u32>("Test.Echo", &2).await.unwrap(), 2);
    }
}
