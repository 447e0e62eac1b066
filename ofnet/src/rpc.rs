//! The master↔agent RPC: JSON requests and responses in length-delimited frames over TCP.
//!
//! Wire format (one JSON object per frame, 4-byte big-endian length prefix):
//! request `{"id":7,"method":"OfnetMaster.EndpointAdd","params":{...}}`, response
//! `{"id":7,"result":true}` or `{"id":7,"error":"..."}`. Method names are the reference's.
//!
//! - [`Peer`]: the client side, a task owning one connection plus a cloneable handle. Calls
//!   are sent in the order they were made and answered one at a time, so an `EndpointAdd`
//!   followed by an `EndpointDel` can never arrive swapped. A broken connection is re-dialled
//!   (a few attempts with back-off) and the call retried once.
//! - [`serve`]: the server side, an accept loop that hands each request to a [`Service`] and
//!   answers in order, per connection.

use bytes::Bytes;
use futures::future::LocalBoxFuture;
use futures::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// How long a call waits for its answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Dial attempts before a call fails, and the pause between them (doubling).
const DIAL_ATTEMPTS: u32 = 5;
const DIAL_BACKOFF: Duration = Duration::from_millis(50);

/// A request frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub method: String,
    pub params: Value,
}

/// A response frame: exactly one of `result` and `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
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
    #[error("the connection task to {0} is gone")]
    Closed(SocketAddr),
}

type Conn = Framed<TcpStream, LengthDelimitedCodec>;

struct Call {
    /// `None`: only make sure the connection is up (and greeted).
    method: Option<String>,
    params: Value,
    reply: oneshot::Sender<Result<Value, RpcError>>,
}

/// The calls a peer makes first on every new connection, before anything queued: how a client
/// re-synchronizes a server that restarted (register, then re-announce its state).
pub type Greeting = std::rc::Rc<dyn Fn() -> LocalBoxFuture<'static, Vec<(String, Value)>>>;

/// A handle to a remote RPC server (see the module documentation).
#[derive(Clone, Debug)]
pub struct Peer {
    addr: SocketAddr,
    calls: mpsc::UnboundedSender<Call>,
}

impl Peer {
    /// Start the connection task (inside an actix or tokio runtime); it dials on first use.
    pub fn new(addr: SocketAddr) -> Peer {
        let (calls, rx) = mpsc::unbounded_channel();
        actix_rt::spawn(run_peer(addr, rx, None));
        Peer { addr, calls }
    }

    /// A peer that sends `greeting`'s calls on every new connection.
    pub fn with_greeting(addr: SocketAddr, greeting: Greeting) -> Peer {
        let (calls, rx) = mpsc::unbounded_channel();
        actix_rt::spawn(run_peer(addr, rx, Some(greeting)));
        Peer { addr, calls }
    }

    /// Connect now (and greet) instead of on the first call.
    pub async fn connect(&self) -> Result<(), RpcError> {
        let (reply, answer) = oneshot::channel();
        self.calls
            .send(Call {
                method: None,
                params: Value::Null,
                reply,
            })
            .map_err(|_| RpcError::Closed(self.addr))?;
        answer
            .await
            .map_err(|_| RpcError::Closed(self.addr))?
            .map(|_| ())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Call `method` and decode its result.
    pub async fn call<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R, RpcError> {
        let bad = |reason: String| RpcError::BadReply {
            peer: self.addr,
            method: method.to_string(),
            reason,
        };
        let params = serde_json::to_value(params).map_err(|e| bad(e.to_string()))?;
        let (reply, answer) = oneshot::channel();
        self.calls
            .send(Call {
                method: Some(method.to_string()),
                params,
                reply,
            })
            .map_err(|_| RpcError::Closed(self.addr))?;
        let value = answer.await.map_err(|_| RpcError::Closed(self.addr))??;
        serde_json::from_value(value).map_err(|e| bad(e.to_string()))
    }

    /// Queue a call whose answer nobody waits for; failures are logged. Order with other
    /// calls on this peer is kept.
    pub fn notify<P: Serialize>(&self, method: &'static str, params: &P) {
        let peer = self.clone();
        let params = serde_json::to_value(params);
        actix_rt::spawn(async move {
            let result = match params {
                Ok(p) => peer.call::<Value, Value>(method, &p).await.map(|_| ()),
                Err(e) => Err(RpcError::BadReply {
                    peer: peer.addr,
                    method: method.into(),
                    reason: e.to_string(),
                }),
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, "RPC notification failed");
            }
        });
    }
}

async fn dial(addr: SocketAddr) -> Result<Conn, RpcError> {
    let mut pause = DIAL_BACKOFF;
    let mut last = String::new();
    for _ in 0..DIAL_ATTEMPTS {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(Framed::new(s, LengthDelimitedCodec::new()));
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

/// One request/response exchange on `conn`; `Err(None)` means the connection broke.
async fn exchange(conn: &mut Conn, req: &Request) -> Result<Response, Option<String>> {
    let bytes = serde_json::to_vec(req).map_err(|e| Some(e.to_string()))?;
    conn.send(Bytes::from(bytes)).await.map_err(|_| None)?;
    loop {
        let frame = conn.next().await.ok_or(None)?.map_err(|_| None)?;
        let resp: Response = serde_json::from_slice(&frame).map_err(|e| Some(e.to_string()))?;
        if resp.id == req.id {
            return Ok(resp);
        }
        // An answer to a call that timed out earlier: skip it.
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
        let req = Request {
            id: *next_id,
            method,
            params,
        };
        *next_id += 1;
        match tokio::time::timeout(CALL_TIMEOUT, exchange(&mut conn, &req)).await {
            Ok(Ok(resp)) => {
                if let Some(error) = resp.error {
                    tracing::warn!(%addr, method = %req.method, %error, "greeting call refused");
                }
            }
            Ok(Err(reason)) => {
                return Err(RpcError::Unreachable {
                    peer: addr,
                    reason: reason.unwrap_or_else(|| "connection lost while greeting".into()),
                });
            }
            Err(_) => {
                return Err(RpcError::Timeout {
                    peer: addr,
                    method: req.method,
                });
            }
        }
    }
    Ok(conn)
}

async fn run_peer(
    addr: SocketAddr,
    mut calls: mpsc::UnboundedReceiver<Call>,
    greeting: Option<Greeting>,
) {
    let mut conn: Option<Conn> = None;
    let mut next_id = 1u64;
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
            let _ = call.reply.send(outcome);
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
            let req = Request {
                id: next_id,
                method: method.clone(),
                params: call.params.clone(),
            };
            next_id += 1;
            match tokio::time::timeout(CALL_TIMEOUT, exchange(c, &req)).await {
                Err(_) => {
                    outcome = Err(RpcError::Timeout {
                        peer: addr,
                        method: method.clone(),
                    });
                    // The answer may still come; a fresh connection avoids reading it later.
                    conn = None;
                    break;
                }
                Ok(Ok(resp)) => {
                    outcome = match (resp.result, resp.error) {
                        (_, Some(error)) => Err(RpcError::Remote {
                            peer: addr,
                            method: method.clone(),
                            error,
                        }),
                        (result, None) => Ok(result.unwrap_or(Value::Null)),
                    };
                    break;
                }
                Ok(Err(Some(reason))) => {
                    outcome = Err(RpcError::BadReply {
                        peer: addr,
                        method: method.clone(),
                        reason,
                    });
                    conn = None;
                    break;
                }
                Ok(Err(None)) => conn = None,
            }
        }
        let _ = call.reply.send(outcome);
    }
}

/// What serves RPC requests: `method` and `params` in, a result or an error message out.
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
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "RPC server listening");
    let (stop, stopped) = tokio::sync::watch::channel(());
    let task = actix_rt::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    actix_rt::spawn(session(
                        Framed::new(stream, LengthDelimitedCodec::new()),
                        service.clone(),
                        stopped.clone(),
                    ));
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
        let Some(Ok(frame)) = frame else {
            return;
        };
        let resp = match serde_json::from_slice::<Request>(&frame) {
            Ok(req) => match service.call(req.method, req.params).await {
                Ok(result) => Response {
                    id: req.id,
                    result: Some(result),
                    error: None,
                },
                Err(error) => Response {
                    id: req.id,
                    result: None,
                    error: Some(error),
                },
            },
            Err(e) => {
                tracing::warn!(error = %e, "malformed RPC request; closing the connection");
                return;
            }
        };
        let Ok(bytes) = serde_json::to_vec(&resp) else {
            return;
        };
        if conn.send(Bytes::from(bytes)).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                    other => Err(format!("unknown method {other}")),
                }
            })
        }
    }

    #[test]
    fn frames_use_the_documented_json_shape() {
        let r = Request {
            id: 7,
            method: "OfnetMaster.EndpointAdd".into(),
            params: serde_json::json!({"EndpointID": "x"}),
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"id":7,"method":"OfnetMaster.EndpointAdd","params":{"EndpointID":"x"}}"#
        );
        let ok = Response {
            id: 7,
            result: Some(Value::Bool(true)),
            error: None,
        };
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"id":7,"result":true}"#
        );
        let err: Response = serde_json::from_str(r#"{"id":7,"error":"no"}"#).unwrap();
        assert_eq!(err.error.as_deref(), Some("no"));
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
