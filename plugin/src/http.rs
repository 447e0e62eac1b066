//! A small HTTP/1.1 server for netplugin's two APIs: the CNI socket (unix) and the debug REST
//! (TCP). One request per connection (`Connection: close`), `Content-Length` bodies only:
//! that is what contivk8s, curl and Contiv's clients send.
//!
//! Contract: a request that cannot be parsed gets a 400 naming the problem; a body over
//! [`MAX_BODY`] a 413; handlers run on the caller's (actix) thread, so they may hold
//! thread-local handles.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::rc::Rc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};

/// Largest request head accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// Largest request body accepted.
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// How long a client may take to send its whole request (a stalled client holds no slot longer).
pub const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Log lines about a peer's bad requests, at most one a minute per peer (a flood of garbage from
/// one peer writes one line). Lives on the listener's thread; holds at most
/// [`PeerLog::MAX_PEERS`] peers.
#[derive(Debug, Default)]
pub struct PeerLog {
    last: std::cell::RefCell<std::collections::HashMap<String, std::time::Instant>>,
}

impl PeerLog {
    pub const MAX_PEERS: usize = 4096;
    pub const INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

    /// Whether a line about `peer` may be written now (and remember that it was).
    pub fn should_log(&self, peer: &str) -> bool {
        let now = std::time::Instant::now();
        let mut last = self.last.borrow_mut();
        if last.len() >= Self::MAX_PEERS {
            last.retain(|_, t| now.duration_since(*t) < Self::INTERVAL);
            if last.len() >= Self::MAX_PEERS {
                last.clear();
            }
        }
        match last.get(peer) {
            Some(t) if now.duration_since(*t) < Self::INTERVAL => false,
            _ => {
                last.insert(peer.to_string(), now);
                true
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub content_type: Option<String>,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
    /// `Content-Type` of the body.
    pub content_type: &'static str,
}

impl Response {
    pub fn json(status: u16, value: &impl serde::Serialize) -> Response {
        Response {
            status,
            body: serde_json::to_vec_pretty(value).unwrap_or_else(|e| e.to_string().into_bytes()),
            content_type: "application/json",
        }
    }

    pub fn text(status: u16, text: impl Into<String>) -> Response {
        Response {
            status,
            body: text.into().into_bytes(),
            content_type: "text/plain; charset=utf-8",
        }
    }
}

pub type Handler = Rc<dyn Fn(Request) -> Pin<Box<dyn Future<Output = Response>>>>;

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("connection closed before a complete request")]
    Closed,
    #[error("reading the request: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Bad(String),
    #[error("request body of {0} bytes is over the {MAX_BODY}-byte limit")]
    TooLarge(usize),
}

/// Read one request (head and `Content-Length` body) from `stream`.
pub async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Request, ReadError> {
    let mut buf = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > MAX_HEAD {
            return Err(ReadError::Bad(format!(
                "request head over {MAX_HEAD} bytes"
            )));
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(ReadError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut body = buf.split_off(head_end + 4);
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| ReadError::Bad("request head is not UTF-8".into()))?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(ReadError::Bad(format!(
            "malformed request line {request_line:?}"
        )));
    };
    let mut content_length = 0usize;
    let mut content_type = None;
    let mut authorization = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::Bad(format!("malformed header line {line:?}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = value
                .parse()
                .map_err(|_| ReadError::Bad(format!("bad Content-Length {value:?}")))?;
        } else if name.eq_ignore_ascii_case("content-type") {
            content_type = Some(value.to_string());
        } else if name.eq_ignore_ascii_case("authorization") {
            authorization = Some(value.to_string());
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(ReadError::Bad(
                "chunked request bodies are not supported; send Content-Length".into(),
            ));
        }
    }
    if content_length > MAX_BODY {
        return Err(ReadError::TooLarge(content_length));
    }
    if body.len() < content_length {
        let have = body.len();
        body.resize(content_length, 0);
        stream.read_exact(&mut body[have..]).await?;
    }
    body.truncate(content_length);
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        content_type,
        authorization,
        body,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    handler: Handler,
    peer: String,
    log: Rc<PeerLog>,
) {
    let read = match tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream)).await {
        Ok(r) => r,
        Err(_) => Err(ReadError::Bad(format!(
            "request not complete within {READ_TIMEOUT:?}"
        ))),
    };
    let response = match read {
        Ok(req) => handler(req).await,
        Err(ReadError::Closed) => return,
        Err(e) => {
            if log.should_log(&peer) {
                tracing::warn!(%peer, error = %e, "malformed request refused (further ones from this peer are not logged for a minute)");
            }
            match e {
                ReadError::TooLarge(_) => Response::text(413, e.to_string()),
                _ => Response::text(400, e.to_string()),
            }
        }
    };
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(&response.body);
    if let Err(e) = stream.write_all(&out).await {
        tracing::debug!(error = %e, "client went away before the response");
    }
    let _ = stream.shutdown().await;
}

/// Bind a unix socket for root only: the socket mode 0600, in a directory that, when created
/// here, is mode 0700. An existing directory that others may enter is left as it is (it may be
/// shared, like /run) with a warning; the socket's own mode still keeps them out. A stale socket
/// file is replaced.
pub fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        match std::fs::metadata(dir) {
            Ok(meta) => {
                let mode = meta.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    tracing::warn!(
                        dir = %dir.display(),
                        mode = %format_args!("{mode:o}"),
                        "the CNI socket's directory is open to other users; the socket itself is mode 0600, \
                         but a directory of its own with mode 0700 is safer"
                    );
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
                // The umask may have cut the mode further, never widened it; make it exact.
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            }
            Err(e) => return Err(e),
        }
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Who is on the other end of a unix connection, for log lines.
fn unix_peer(stream: &tokio::net::UnixStream) -> String {
    match stream.peer_cred() {
        Ok(cred) => format!("uid {}", cred.uid()),
        Err(_) => "unix peer".into(),
    }
}

/// Accept loop on a unix listener (runs on the current actix arbiter).
pub async fn serve_unix(listener: UnixListener, handler: Handler) {
    let log = Rc::new(PeerLog::default());
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let peer = unix_peer(&stream);
                actix_rt::spawn(serve_connection(stream, handler.clone(), peer, log.clone()));
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept on the CNI socket failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// Accept loop on a TCP listener (runs on the current actix arbiter).
pub async fn serve_tcp(listener: TcpListener, handler: Handler) {
    let log = Rc::new(PeerLog::default());
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let peer = peer.ip().to_string();
                actix_rt::spawn(serve_connection(stream, handler.clone(), peer, log.clone()));
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept on the debug listener failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn parses_a_request_and_writes_a_response() {
        let (mut client, server) = tokio::io::duplex(8192);
        let handler: Handler = Rc::new(|req: Request| {
            Box::pin(async move {
                Response::text(
                    200,
                    format!(
                        "{} {} {:?} {}",
                        req.method,
                        req.path,
                        req.content_type,
                        String::from_utf8_lossy(&req.body)
                    ),
                )
            })
        });
        let task = actix_rt::spawn(serve_connection(
            server,
            handler,
            "test".into(),
            Rc::default(),
        ));
        client
            .write_all(b"POST /x HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n{\"a\"")
            .await
            .unwrap();
        let mut out = String::new();
        client.read_to_string(&mut out).await.unwrap();
        task.await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(
            out.ends_with("POST /x Some(\"application/json\") {\"a\""),
            "{out}"
        );
    }

    #[test]
    fn the_socket_is_root_only_in_a_directory_of_its_own() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let sock_dir = dir.path().join("run").join("contiv");
        let path = sock_dir.join("cni.sock");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let listener = bind_unix(&path).unwrap();
        assert_eq!(mode(&sock_dir), 0o700);
        assert_eq!(mode(&path), 0o600);
        drop(listener);
        // Again over the stale file, in a directory someone opened up: the socket is 0600 still.
        std::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let _listener = bind_unix(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn peer_log_writes_once_per_peer_per_interval() {
        let log = PeerLog::default();
        assert!(log.should_log("10.0.0.1"));
        assert!(!log.should_log("10.0.0.1"));
        assert!(log.should_log("10.0.0.2"));
        for i in 0..PeerLog::MAX_PEERS + 10 {
            log.should_log(&format!("peer{i}"));
        }
        assert!(log.last.borrow().len() <= PeerLog::MAX_PEERS);
    }

    #[actix_rt::test]
    async fn malformed_requests_get_400() {
        let (mut client, server) = tokio::io::duplex(8192);
        let handler: Handler = Rc::new(|_| Box::pin(async { Response::text(200, "") }));
        let task = actix_rt::spawn(serve_connection(
            server,
            handler,
            "test".into(),
            Rc::default(),
        ));
        client
            .write_all(b"POST /x HTTP/1.1\r\nContent-Length: nope\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        client.read_to_string(&mut out).await.unwrap();
        task.await.unwrap();
        assert!(out.starts_with("HTTP/1.1 400"), "{out}");
        assert!(out.contains("bad Content-Length"), "{out}");
    }
}
