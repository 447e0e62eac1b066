//! How the daemons reach etcd: the endpoints and the TLS files (`--etcd-cacert`, `--etcd-cert`,
//! `--etcd-key`), checked before anything is connected so that a wrong path or a half-given client
//! identity is a start-up error naming the file, not a stream of 503s.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};

use super::StoreError;

/// Where etcd is and how to authenticate to it.
#[derive(Debug, Clone, Default)]
pub struct EtcdConfig {
    /// `http://host:port`, `https://host:port` or `etcd://host:port` (read as http).
    pub endpoints: Vec<String>,
    /// CA bundle the etcd server certificates are checked against (`--etcd-cacert`).
    pub ca: Option<PathBuf>,
    /// Client certificate (`--etcd-cert`), for clusters started with `--client-cert-auth`.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (`--etcd-key`).
    pub key: Option<PathBuf>,
}

impl EtcdConfig {
    /// Plain endpoints, no TLS files.
    pub fn plain(endpoints: &[String]) -> EtcdConfig {
        EtcdConfig {
            endpoints: endpoints.to_vec(),
            ..EtcdConfig::default()
        }
    }

    /// Whether any TLS file was given.
    pub fn has_tls(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some()
    }
}

/// Why the etcd client could not be set up. Everything but `Unavailable` is a configuration mistake
/// that retrying will not fix.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("no etcd endpoint given (--etcd)")]
    NoEndpoint,
    #[error("etcd endpoint {endpoint:?}: {reason}")]
    Endpoint { endpoint: String, reason: String },
    #[error("cannot read {flag} {path}: {source}")]
    ReadFile {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{flag} {path} does not hold a PEM {expected}")]
    NotPem {
        flag: &'static str,
        path: PathBuf,
        expected: &'static str,
    },
    #[error(
        "{given} was given without {missing}: a client certificate needs its key and vice versa"
    )]
    HalfIdentity {
        given: &'static str,
        missing: &'static str,
    },
    #[error(
        "{flag} was given but endpoint {endpoint} is not https://; use https:// endpoints with TLS"
    )]
    TlsOnPlain {
        flag: &'static str,
        endpoint: String,
    },
    #[error(
        "endpoint {endpoint} is https:// but no --etcd-cacert was given (the CA that signed the etcd \
         server certificates)"
    )]
    NoCa { endpoint: String },
    /// The TLS handshake with a member failed for a reason only the files can fix.
    #[error("etcd at {endpoint} refused TLS: {reason}")]
    Tls { endpoint: String, reason: String },
    #[error(transparent)]
    Unavailable(#[from] StoreError),
}

impl ConnectError {
    /// Whether retrying later may succeed (etcd down), as opposed to a configuration mistake.
    pub fn is_transient(&self) -> bool {
        matches!(self, ConnectError::Unavailable(_))
    }
}

const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----";

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, ConnectError> {
    std::fs::read(path).map_err(|source| ConnectError::ReadFile {
        flag,
        path: path.to_path_buf(),
        source,
    })
}

fn require_pem(
    flag: &'static str,
    path: &Path,
    bytes: &[u8],
    marker: &str,
    expected: &'static str,
) -> Result<(), ConnectError> {
    let text = String::from_utf8_lossy(bytes);
    let ok = if marker == "PRIVATE KEY" {
        text.contains("-----BEGIN ") && text.contains("PRIVATE KEY-----")
    } else {
        text.contains(marker)
    };
    if ok {
        Ok(())
    } else {
        Err(ConnectError::NotPem {
            flag,
            path: path.to_path_buf(),
            expected,
        })
    }
}

/// Normalise the endpoints (`etcd://` means `http://`; a bare `host:port` gets the scheme the TLS
/// settings imply) and check them against the TLS settings.
pub fn endpoints(config: &EtcdConfig) -> Result<Vec<String>, ConnectError> {
    let tls = config.has_tls();
    let mut out = Vec::new();
    for raw in &config.endpoints {
        let e = raw.trim();
        if e.is_empty() {
            continue;
        }
        let url = if let Some(rest) = e.strip_prefix("etcd://") {
            format!("http://{rest}")
        } else if e.starts_with("http://") || e.starts_with("https://") {
            e.to_string()
        } else if e.contains("://") {
            return Err(ConnectError::Endpoint {
                endpoint: e.into(),
                reason: "the scheme must be http://, https:// or etcd://".into(),
            });
        } else if tls {
            format!("https://{e}")
        } else {
            format!("http://{e}")
        };
        let hostport = url.split_once("://").map_or("", |(_, r)| r);
        if hostport.is_empty() || hostport.starts_with(':') {
            return Err(ConnectError::Endpoint {
                endpoint: e.into(),
                reason: "no host".into(),
            });
        }
        if tls && url.starts_with("http://") {
            let flag = if config.ca.is_some() {
                "--etcd-cacert"
            } else if config.cert.is_some() {
                "--etcd-cert"
            } else {
                "--etcd-key"
            };
            return Err(ConnectError::TlsOnPlain {
                flag,
                endpoint: url,
            });
        }
        if url.starts_with("https://") && config.ca.is_none() {
            return Err(ConnectError::NoCa { endpoint: url });
        }
        if !out.contains(&url) {
            out.push(url);
        }
    }
    if out.is_empty() {
        return Err(ConnectError::NoEndpoint);
    }
    Ok(out)
}

/// The client options: deadlines are applied per attempt by the member set, not here; leader
/// required so that a member cut off from the quorum answers at once instead of hanging.
pub fn options(config: &EtcdConfig) -> Result<ConnectOptions, ConnectError> {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(std::time::Duration::from_secs(1))
        .with_keep_alive(
            std::time::Duration::from_secs(2),
            std::time::Duration::from_secs(2),
        )
        .with_require_leader(true);
    if !config.has_tls() {
        return Ok(options);
    }
    let mut tls = TlsOptions::new();
    if let Some(ca) = &config.ca {
        let pem = read("--etcd-cacert", ca)?;
        require_pem("--etcd-cacert", ca, &pem, CERT_PEM, "CA certificate")?;
        tls = tls.ca_certificate(Certificate::from_pem(pem));
    }
    match (&config.cert, &config.key) {
        (Some(cert), Some(key)) => {
            let cert_pem = read("--etcd-cert", cert)?;
            require_pem("--etcd-cert", cert, &cert_pem, CERT_PEM, "certificate")?;
            let key_pem = read("--etcd-key", key)?;
            require_pem("--etcd-key", key, &key_pem, "PRIVATE KEY", "private key")?;
            tls = tls.identity(Identity::from_pem(cert_pem, key_pem));
        }
        (Some(_), None) => {
            return Err(ConnectError::HalfIdentity {
                given: "--etcd-cert",
                missing: "--etcd-key",
            });
        }
        (None, Some(_)) => {
            return Err(ConnectError::HalfIdentity {
                given: "--etcd-key",
                missing: "--etcd-cert",
            });
        }
        (None, None) => {}
    }
    options = options.with_tls(tls);
    Ok(options)
}

/// Explain a TLS failure seen while probing a member in the operator's words, naming the file to
/// fix; `None` if the failure is not about TLS (the member is just down).
pub fn explain_tls(config: &EtcdConfig, chain: &str) -> Option<String> {
    let ca = config
        .ca
        .as_ref()
        .map_or_else(|| "(none)".into(), |p| p.display().to_string());
    let cert = config
        .cert
        .as_ref()
        .map_or_else(|| "(none)".into(), |p| p.display().to_string());
    let lower = chain.to_ascii_lowercase();
    if lower.contains("unknownissuer") || lower.contains("unknown issuer") {
        Some(format!(
            "the server certificate is not signed by the CA in --etcd-cacert {ca} ({chain})"
        ))
    } else if lower.contains("notvalidforname") || lower.contains("not valid for name") {
        Some(format!(
            "the server certificate does not name this endpoint's host ({chain})"
        ))
    } else if lower.contains("certificaterequired")
        || lower.contains("certificate required")
        || (config.cert.is_none()
            && (lower.contains("badcertificate") || lower.contains("bad certificate")))
    {
        Some(format!(
            "the server requires a client certificate; give --etcd-cert and --etcd-key ({chain})"
        ))
    } else if lower.contains("badcertificate")
        || lower.contains("bad certificate")
        || lower.contains("unknownca")
        || lower.contains("unknown ca")
    {
        Some(format!(
            "the server rejected the client certificate --etcd-cert {cert} (not signed by a CA it \
             trusts?) ({chain})"
        ))
    } else if lower.contains("invalid peer certificate") || lower.contains("invalidcertificate") {
        Some(format!(
            "the server certificate was rejected when checked against --etcd-cacert {ca} ({chain})"
        ))
    } else if lower.contains("wrong version number")
        || lower.contains("invalidcontenttype")
        || lower.contains("corrupt message")
    {
        Some(format!(
            "the server does not speak TLS on this port ({chain})"
        ))
    } else {
        None
    }
}

/// Open one TLS connection to `endpoint` (`https://host:port`) with the configured files and wait
/// briefly for the server's verdict on our client certificate (with TLS 1.3 it comes after the
/// handshake). `Ok(())` when the member accepted us or could not be reached at all (down members
/// are retried per request); a TLS refusal is an error naming the file to fix.
pub async fn check_handshake(config: &EtcdConfig, endpoint: &str) -> Result<(), ConnectError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::AsyncReadExt;

    let tls_err = |reason: String| ConnectError::Tls {
        endpoint: endpoint.to_string(),
        reason,
    };
    let Some(hostport) = endpoint.strip_prefix("https://") else {
        return Ok(());
    };
    let hostport = hostport.trim_end_matches('/');
    let host = match hostport.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
        None => hostport,
    };
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = &config.ca {
        let pem = read("--etcd-cacert", ca)?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|_| ConnectError::NotPem {
                flag: "--etcd-cacert",
                path: ca.clone(),
                expected: "CA certificate",
            })?;
            roots
                .add(cert)
                .map_err(|e| tls_err(format!("--etcd-cacert {}: {e}", ca.display())))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(e.to_string()))?
        .with_root_certificates(roots);
    let mut client = match (&config.cert, &config.key) {
        (Some(cert), Some(key)) => {
            let cert_pem = read("--etcd-cert", cert)?;
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
                .collect::<Result<_, _>>()
                .map_err(|_| ConnectError::NotPem {
                    flag: "--etcd-cert",
                    path: cert.clone(),
                    expected: "certificate",
                })?;
            let key_pem = read("--etcd-key", key)?;
            let key_der =
                PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| ConnectError::NotPem {
                    flag: "--etcd-key",
                    path: key.clone(),
                    expected: "private key",
                })?;
            builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                tls_err(format!(
                    "--etcd-cert {} and --etcd-key {} do not form a usable identity: {e}",
                    cert.display(),
                    key.display()
                ))
            })?
        }
        _ => builder.with_no_client_auth(),
    };
    client.alpn_protocols = vec![b"h2".to_vec()];
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| tls_err(format!("{host} is not a valid server name: {e}")))?;
    let connect = tokio::net::TcpStream::connect(hostport);
    let Ok(Ok(tcp)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, connect).await else {
        return Ok(());
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let explain = |e: &std::io::Error| {
        let text = chain(e);
        explain_tls(config, &text)
    };
    let mut stream =
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name, tcp)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return explain(&e).map_or(Ok(()), |r| Err(tls_err(r))),
            Err(_) => return Ok(()),
        };
    // The server speaks next only to refuse us (an alert) or to send session tickets.
    let mut buf = [0u8; 64];
    match tokio::time::timeout(VERDICT_WAIT, stream.read(&mut buf)).await {
        Ok(Ok(0)) if config.cert.is_none() => Err(tls_err(
            "the server closed the connection after the handshake: it requires a client \
             certificate; give --etcd-cert and --etcd-key"
                .into(),
        )),
        Ok(Err(e)) => explain(&e).map_or(Ok(()), |r| Err(tls_err(r))),
        _ => Ok(()),
    }
}

/// Deadline of the TCP connect and of the TLS handshake of [`check_handshake`].
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long [`check_handshake`] waits for an alert after the handshake.
const VERDICT_WAIT: Duration = Duration::from_millis(500);

/// An error and all its sources, as one line.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_normalised_and_checked() {
        let plain = EtcdConfig::plain(&["etcd://a:1".into(), "b:2".into(), "http://a:1".into()]);
        assert_eq!(endpoints(&plain).unwrap(), ["http://a:1", "http://b:2"]);
        let mut tls = EtcdConfig::plain(&["http://a:1".into()]);
        tls.ca = Some("/nonexistent/ca.pem".into());
        assert!(matches!(
            endpoints(&tls),
            Err(ConnectError::TlsOnPlain {
                flag: "--etcd-cacert",
                ..
            })
        ));
        let https = EtcdConfig::plain(&["https://a:1".into()]);
        assert!(matches!(endpoints(&https), Err(ConnectError::NoCa { .. })));
        assert!(matches!(
            endpoints(&EtcdConfig::plain(&["ftp://x:1".into()])),
            Err(ConnectError::Endpoint { .. })
        ));
        assert!(matches!(
            endpoints(&EtcdConfig::plain(&[" ".into()])),
            Err(ConnectError::NoEndpoint)
        ));
    }

    #[test]
    fn tls_files_are_named_in_errors() {
        let dir = std::env::temp_dir().join(format!("contiv-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let garbage = dir.join("garbage.pem");
        std::fs::write(&garbage, "not a certificate").unwrap();
        let mut c = EtcdConfig::plain(&["https://a:1".into()]);
        c.ca = Some(dir.join("missing.pem"));
        let err = options(&c).unwrap_err().to_string();
        assert!(
            err.contains("--etcd-cacert") && err.contains("missing.pem"),
            "{err}"
        );
        c.ca = Some(garbage.clone());
        let err = options(&c).unwrap_err().to_string();
        assert!(
            err.contains("garbage.pem") && err.contains("CA certificate"),
            "{err}"
        );
        c.ca = None;
        c.cert = Some(garbage);
        let err = options(&c).unwrap_err().to_string();
        assert!(
            err.contains("--etcd-cert") && err.contains("--etcd-key"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
