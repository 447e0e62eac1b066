//! A minimal HTTP/1.1 client over a unix socket: one `POST` with a JSON body per connection
//! (`Connection: close`), response body by `Content-Length`, chunked encoding, or EOF.
//!
//! Written by hand because the executable runs once per pod operation and must start and
//! finish in a few milliseconds; an HTTP stack with a runtime would dominate that.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest response accepted.
const MAX_RESPONSE: usize = 4 << 20;

/// What went wrong talking to the server.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Nobody is listening on the socket (or it does not exist).
    #[error("could not connect to {path}: {source}")]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The exchange broke off.
    #[error("talking to {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The response is not HTTP/1.x.
    #[error("malformed HTTP response from {path}: {problem}")]
    Malformed { path: PathBuf, problem: String },
}

/// A response: status code and body.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// `POST path` with `body` as JSON to the server on `socket`, waiting at most `timeout` for
/// each read or write.
pub fn post_json(
    socket: &Path,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<Response, HttpError> {
    let mut stream = UnixStream::connect(socket).map_err(|source| HttpError::Connect {
        path: socket.to_path_buf(),
        source,
    })?;
    let io = |source| HttpError::Io {
        path: socket.to_path_buf(),
        source,
    };
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    stream.write_all(&request).map_err(io)?;
    let mut raw = Vec::new();
    stream
        .take(MAX_RESPONSE as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(io)?;
    parse_response(&raw).map_err(|problem| HttpError::Malformed {
        path: socket.to_path_buf(),
        problem,
    })
}

/// Parse a complete HTTP/1.x response (the server closed the connection after it).
pub fn parse_response(raw: &[u8]) -> Result<Response, String> {
    if raw.len() > MAX_RESPONSE {
        return Err(format!("response larger than {MAX_RESPONSE} bytes"));
    }
    let head_end = find(raw, b"\r\n\r\n").ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(format!("status line {status_line:?}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("status line {status_line:?}"))?;
    let mut content_length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("header line {line:?}"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| format!("Content-Length {value:?}"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        }
    }
    let rest = &raw[head_end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(len) = content_length {
        rest.get(..len)
            .ok_or_else(|| format!("body shorter than Content-Length {len}"))?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response { status, body })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = find(data, b"\r\n").ok_or("chunk size line not terminated")?;
        let size_text = std::str::from_utf8(&data[..line_end]).map_err(|_| "chunk size")?;
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(size_hex, 16).map_err(|_| format!("chunk size {size_hex:?}"))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = data.get(..size).ok_or("chunk shorter than its size")?;
        body.extend_from_slice(chunk);
        data = data.get(size + 2..).ok_or("chunk not terminated")?;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_and_chunked_bodies() {
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}",
        )
        .unwrap();
        assert_eq!(
            r,
            Response {
                status: 200,
                body: b"{}".to_vec()
            }
        );
        let r = parse_response(
            b"HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.status, 500);
        assert_eq!(r.body, b"{\"a\":1}");
        let r = parse_response(b"HTTP/1.0 404 Not Found\r\n\r\nnope").unwrap();
        assert_eq!(r.body, b"nope");
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
    }
}
