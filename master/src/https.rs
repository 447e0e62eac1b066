//! An HTTP/1.1 client for `http://` and `https://` netmaster URLs (hyper with rustls and the
//! ring provider; reqwest's own TLS would bring aws-lc or a process-wide provider).
//!
//! Contract: `https://` URLs are checked against the CA given at construction only (no system
//! roots: netmaster certificates are the cluster's own); without a CA an `https://` request fails
//! with an error saying to give one. Every request has an overall timeout.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

type Inner = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// A reply: status, content type and body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Bytes,
}

/// A cheap-to-clone client.
#[derive(Clone)]
pub struct HttpClient {
    inner: Inner,
    has_ca: bool,
    timeout: Duration,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("has_ca", &self.has_ca)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// `tls`: how `https://` servers are checked (`None`: `https://` is refused).
    pub fn new(
        tls: Option<rustls::ClientConfig>,
        timeout: Duration,
    ) -> Result<HttpClient, rustls::Error> {
        let has_ca = tls.is_some();
        let tls = match tls {
            Some(t) => t,
            // Never used to connect (https is refused first), but the connector wants one.
            None => rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
        };
        let mut tcp = hyper_util::client::legacy::connect::HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_connect_timeout(Some(timeout));
        tcp.set_nodelay(true);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let inner =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(connector);
        Ok(HttpClient {
            inner,
            has_ca,
            timeout,
        })
    }

    /// Send one request; `Err` is the transport problem in words (status codes are `Ok`).
    pub async fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Reply, String> {
        if url.starts_with("https://") && !self.has_ca {
            return Err(
                "an https:// URL needs a CA certificate to check the server against \
                 (netctl --cacert, netplugin --netmaster-cacert, netmaster --tls-cacert)"
                    .into(),
            );
        }
        let method = hyper::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
        let mut req = hyper::Request::builder().method(method).uri(url);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
        let call = async {
            let resp = self.inner.request(req).await.map_err(|e| chain(&e))?;
            let status = resp.status().as_u16();
            let content_type = resp
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| chain(&e))?
                .to_bytes();
            Ok(Reply {
                status,
                content_type,
                body,
            })
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(r) => r,
            Err(_) => Err(format!("no reply within {:?}", self.timeout)),
        }
    }
}

/// The error and its sources on one line (a source already quoted by its parent is skipped).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        src = s.source();
    }
    out
}
