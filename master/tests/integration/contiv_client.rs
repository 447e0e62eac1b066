//! Errors as Contiv's own Go client (contivmodel's client) shows them. That client reads the
//! body of an HTTP 500 only; for 404 it says "page not found", for 403 "access denied", and for
//! any other failure it prints the status line (`resp.Status`, e.g. `409 Conflict`). The test
//! client below does exactly that over a raw connection, so it sees the real status line.

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::common::*;

/// One request; the status code, the status line after the protocol, and the body.
pub fn request(url: &str, method: &str, path: &str, body: &str) -> (u16, String, String) {
    let addr = url.trim_start_matches("http://");
    let mut conn = TcpStream::connect(addr).unwrap();
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = Vec::new();
    conn.read_to_end(&mut reply).unwrap();
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    let status_line = head.lines().next().unwrap();
    let status = status_line.split_once(' ').unwrap().1.to_string();
    let code = status[..3].parse().unwrap();
    (code, status, body.to_string())
}

/// What Contiv's client returns as the error for a reply.
fn contiv_client_error(code: u16, status: &str, body: &str) -> Option<String> {
    match code {
        200 => None,
        404 => Some("page not found".into()),
        403 => Some("access denied".into()),
        500 => Some(body.into()),
        _ => Some(status.into()),
    }
}

#[tokio::test]
async fn contiv_go_client_sees_the_reason() {
    testbed::require!(Etcd);
    let etcd = testbed::Etcd::start().unwrap();
    let nm = InProcess::start(&etcd.client_url(), 5).await;
    let url = nm.url.clone();
    tokio::task::spawn_blocking(move || {
        let net = r#"{"key":"default:web","tenantName":"default","networkName":"web",
                      "encap":"vxlan","subnet":"10.9.0.0/24","gateway":"10.9.0.1"}"#;
        let (code, ..) = request(&url, "POST", "/api/v1/networks/default:web/", net);
        assert_eq!(code, 200);
        let group =
            r#"{"key":"default:g","tenantName":"default","groupName":"g","networkName":"web"}"#;
        let (code, ..) = request(&url, "POST", "/api/v1/endpointGroups/default:g/", group);
        assert_eq!(code, 200);

        // In use: 409 for our clients, and the reason in the status line for Contiv's.
        let (code, status, body) = request(&url, "DELETE", "/api/v1/networks/default:web/", "");
        assert_eq!(code, 409, "{status}");
        let shown = contiv_client_error(code, &status, &body).unwrap();
        assert_eq!(
            shown,
            format!("409 {}", body.trim()),
            "status line {status:?}"
        );
        assert!(shown.contains("web"), "{shown}");

        // Invalid input: 400 with the field and the rule.
        let bad = r#"{"key":"default:x","tenantName":"default","networkName":"x",
                      "encap":"vxlan","subnet":"10.9.1.0/99"}"#;
        let (code, status, body) = request(&url, "POST", "/api/v1/networks/default:x/", bad);
        assert_eq!(code, 400);
        let shown = contiv_client_error(code, &status, &body).unwrap();
        assert!(
            shown.starts_with("400 ") && shown.contains("subnet"),
            "{shown}"
        );
        assert_eq!(shown, format!("400 {}", body.trim()));

        // Success keeps the standard phrase.
        let (code, status, _) = request(&url, "GET", "/api/v1/networks/default:web/", "");
        assert_eq!((code, status.as_str()), (200, "200 OK"));
    })
    .await
    .unwrap();
}
