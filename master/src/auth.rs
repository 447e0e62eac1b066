//! Who may call netmaster's REST API, and over what.
//!
//! * Bearer tokens from `--token-file`: one `<token> <role>` a line (`#` comments and blank lines
//!   allowed). Roles: `admin` may do anything; `plugin` (netplugin's) may read and call
//!   `/plugin/*`; `read` may only `GET`/`HEAD`. A request without a known token gets 401, a
//!   token whose role does not allow the request 403, each with a body saying what to do.
//! * TLS from `--tls-cert`/`--tls-key` (rustls with the ring provider), and the CA a follower
//!   checks the leader's certificate against (`--tls-cacert`; default: the `--tls-cert` chain).
//! * Every file is read at start: a file that cannot be read or parsed ends start-up with an
//!   error naming the flag and the file.
//!
//! Tokens are compared in constant time (per candidate), so response timing does not reveal a
//! prefix of a valid token.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A file given on the command line could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("{flag} {}: cannot read: {source}", path.display())]
    Read {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{flag} {}: {problem}", path.display())]
    Invalid {
        flag: &'static str,
        path: PathBuf,
        problem: String,
    },
    #[error("{0} needs {1} too")]
    Pair(&'static str, &'static str),
}

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything.
    Admin,
    /// Reads and `/plugin/*` (netplugin's token).
    Plugin,
    /// `GET` and `HEAD` only.
    Read,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Plugin => "plugin",
            Role::Read => "read",
        }
    }

    fn parse(text: &str) -> Option<Role> {
        match text {
            "admin" => Some(Role::Admin),
            "plugin" => Some(Role::Plugin),
            "read" => Some(Role::Read),
            _ => None,
        }
    }

    /// Whether this role may send `method` to `path`.
    pub fn allows(self, method: &str, path: &str) -> bool {
        let read = matches!(method, "GET" | "HEAD");
        match self {
            Role::Admin => true,
            Role::Read => read,
            Role::Plugin => read || path.starts_with("/plugin/"),
        }
    }
}

/// The tokens of a token file.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<(Vec<u8>, Role)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        f.debug_struct("Tokens")
            .field("count", &self.entries.len())
            .finish()
    }
}

/// Shortest token accepted: shorter ones are guessable.
pub const MIN_TOKEN_LEN: usize = 16;

impl Tokens {
    /// Parse the text of a token file; `flag`/`path` name it in errors.
    pub fn parse(flag: &'static str, path: &Path, text: &str) -> Result<Tokens, AuthError> {
        let invalid = |problem: String| AuthError::Invalid {
            flag,
            path: path.to_path_buf(),
            problem,
        };
        let mut entries = Vec::new();
        let mut seen = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let (Some(token), Some(role), None) = (words.next(), words.next(), words.next()) else {
                return Err(invalid(format!(
                    "line {}: expected \"<token> <role>\" (role admin, plugin or read)",
                    n + 1
                )));
            };
            let role = Role::parse(role).ok_or_else(|| {
                invalid(format!(
                    "line {}: unknown role {role:?}: use admin, plugin or read",
                    n + 1
                ))
            })?;
            if token.len() < MIN_TOKEN_LEN {
                return Err(invalid(format!(
                    "line {}: token shorter than {MIN_TOKEN_LEN} characters",
                    n + 1
                )));
            }
            if let Some(first) = seen.insert(token.to_string(), n + 1) {
                return Err(invalid(format!(
                    "line {}: the same token as line {first}",
                    n + 1
                )));
            }
            entries.push((token.as_bytes().to_vec(), role));
        }
        if entries.is_empty() {
            return Err(invalid("no token in the file".into()));
        }
        Ok(Tokens { entries })
    }

    /// Read and parse a token file.
    pub fn load(flag: &'static str, path: &Path) -> Result<Tokens, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthError::Read {
            flag,
            path: path.to_path_buf(),
            source,
        })?;
        Tokens::parse(flag, path, &text)
    }

    /// The role of `token`, if it is one of ours.
    pub fn role_of(&self, token: &str) -> Option<Role> {
        let mut found = None;
        for (t, role) in &self.entries {
            if constant_time_eq(t, token.as_bytes()) {
                found = Some(*role);
            }
        }
        found
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A refused request: the status and a body saying what is missing and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

/// The bearer token of an `Authorization` header value (`Bearer <token>`, scheme case-insensitive).
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let value = header?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Decide a request: `Ok` with the caller's role, or the refusal.
pub fn authorize(
    tokens: &Tokens,
    method: &str,
    path: &str,
    authorization: Option<&str>,
) -> Result<Role, Refusal> {
    let Some(token) = bearer(authorization) else {
        let message = if authorization.is_some() {
            "unauthorized: the Authorization header is not \"Bearer <token>\"; \
             pass netctl --token (or $NETCTL_TOKEN) with a token from netmaster's --token-file"
        } else {
            "unauthorized: no bearer token; this netmaster requires \"Authorization: Bearer <token>\": \
             pass netctl --token (or $NETCTL_TOKEN) with a token from netmaster's --token-file"
        };
        return Err(Refusal {
            status: 401,
            message: message.into(),
        });
    };
    let Some(role) = tokens.role_of(token) else {
        return Err(Refusal {
            status: 401,
            message: "unauthorized: unknown token; use a token listed in netmaster's --token-file"
                .into(),
        });
    };
    if role.allows(method, path) {
        return Ok(role);
    }
    let needs = if path.starts_with("/plugin/") {
        "an admin or plugin token"
    } else {
        "an admin token"
    };
    Err(Refusal {
        status: 403,
        message: format!(
            "forbidden: the token's role is {}, which may only {}; {method} {path} needs {needs}",
            role.name(),
            match role {
                Role::Read => "read (GET)",
                Role::Plugin => "read (GET) and call /plugin/*",
                Role::Admin => "do anything",
            }
        ),
    })
}

fn read_file(flag: &'static str, path: &Path) -> Result<Vec<u8>, AuthError> {
    std::fs::read(path).map_err(|source| AuthError::Read {
        flag,
        path: path.to_path_buf(),
        source,
    })
}

fn certificates(
    flag: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, AuthError> {
    let pem = read_file(flag, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| AuthError::Invalid {
            flag,
            path: path.to_path_buf(),
            problem: format!("not a PEM certificate file: {e}"),
        })?;
    if certs.is_empty() {
        return Err(AuthError::Invalid {
            flag,
            path: path.to_path_buf(),
            problem: "no certificate in the file".into(),
        });
    }
    Ok(certs)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server side of `--tls-cert`/`--tls-key`.
pub fn server_config(cert: &Path, key: &Path) -> Result<rustls::ServerConfig, AuthError> {
    let chain = certificates("--tls-cert", cert)?;
    let key_pem = read_file("--tls-key", key)?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| AuthError::Invalid {
        flag: "--tls-key",
        path: key.to_path_buf(),
        problem: format!("not a PEM private key: {e}"),
    })?;
    rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| AuthError::Invalid {
            flag: "--tls-cert",
            path: cert.to_path_buf(),
            problem: e.to_string(),
        })?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| AuthError::Invalid {
            flag: "--tls-key",
            path: key.to_path_buf(),
            problem: format!("does not match --tls-cert {}: {e}", cert.display()),
        })
}

/// A client configuration trusting only the certificates of `ca` (`flag` names it in errors).
pub fn client_config(flag: &'static str, ca: &Path) -> Result<rustls::ClientConfig, AuthError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(flag, ca)? {
        roots.add(cert).map_err(|e| AuthError::Invalid {
            flag,
            path: ca.to_path_buf(),
            problem: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| AuthError::Invalid {
            flag,
            path: ca.to_path_buf(),
            problem: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// netmaster's security settings, loaded from the files at start.
#[derive(Clone, Default)]
pub struct Security {
    /// `None`: every caller may do everything (and a warning was logged).
    pub tokens: Option<Arc<Tokens>>,
    /// `Some`: the listeners speak TLS.
    pub server_tls: Option<Arc<rustls::ServerConfig>>,
    /// How a follower reaches the leader over TLS.
    pub leader_tls: Option<rustls::ClientConfig>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("tokens", &self.tokens)
            .field("tls", &self.server_tls.is_some())
            .finish()
    }
}

/// The flags of [`Security`].
#[derive(Debug, Clone, Default)]
pub struct SecurityFiles {
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    pub token_file: Option<PathBuf>,
}

impl Security {
    /// Read every file; an error names the flag and the file.
    pub fn load(files: &SecurityFiles) -> Result<Security, AuthError> {
        let tokens = match &files.token_file {
            Some(path) => Some(Arc::new(Tokens::load("--token-file", path)?)),
            None => None,
        };
        let (server_tls, leader_tls) = match (&files.tls_cert, &files.tls_key) {
            (Some(cert), Some(key)) => {
                let server = server_config(cert, key)?;
                let client = match &files.tls_ca {
                    Some(ca) => client_config("--tls-cacert", ca)?,
                    None => client_config("--tls-cert", cert)?,
                };
                (Some(Arc::new(server)), Some(client))
            }
            (Some(_), None) => return Err(AuthError::Pair("--tls-cert", "--tls-key")),
            (None, Some(_)) => return Err(AuthError::Pair("--tls-key", "--tls-cert")),
            (None, None) => {
                if files.tls_ca.is_some() {
                    return Err(AuthError::Pair("--tls-cacert", "--tls-cert and --tls-key"));
                }
                (None, None)
            }
        };
        Ok(Security {
            tokens,
            server_tls,
            leader_tls,
        })
    }

    /// The scheme followers use to reach the leader.
    pub fn scheme(&self) -> &'static str {
        if self.server_tls.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn tokens() -> Tokens {
        Tokens::parse(
            "--token-file",
            Path::new("t"),
            "# netmaster tokens\n\nadmin-token-0123456789 admin\nread-token-0123456789 read\n\
             plugin-token-012345678 plugin\n",
        )
        .unwrap()
    }

    #[test]
    fn roles_decide_what_a_token_may_do() {
        let t = tokens();
        let admin = Some("Bearer admin-token-0123456789");
        let read = Some("bearer read-token-0123456789");
        let plugin = Some("Bearer plugin-token-012345678");
        assert_eq!(
            authorize(&t, "POST", "/api/v1/networks/x/", admin),
            Ok(Role::Admin)
        );
        assert_eq!(
            authorize(&t, "GET", "/api/v1/networks/", read),
            Ok(Role::Read)
        );
        let refused = authorize(&t, "POST", "/api/v1/networks/x/", read).unwrap_err();
        assert_eq!(refused.status, 403);
        assert!(
            refused.message.contains("role is read"),
            "{}",
            refused.message
        );
        assert!(
            refused.message.contains("needs an admin token"),
            "{}",
            refused.message
        );
        assert_eq!(
            authorize(&t, "DELETE", "/api/v1/tenants/x/", read)
                .unwrap_err()
                .status,
            403
        );
        assert_eq!(
            authorize(&t, "POST", "/plugin/allocAddress", plugin),
            Ok(Role::Plugin)
        );
        assert_eq!(
            authorize(&t, "POST", "/api/v1/networks/x/", plugin)
                .unwrap_err()
                .status,
            403
        );
        let missing = authorize(&t, "GET", "/api/v1/networks/", None).unwrap_err();
        assert_eq!(missing.status, 401);
        assert!(
            missing.message.contains("no bearer token"),
            "{}",
            missing.message
        );
        let unknown = authorize(&t, "GET", "/", Some("Bearer admin-token-012345678X")).unwrap_err();
        assert_eq!(unknown.status, 401);
        assert!(
            unknown.message.contains("unknown token"),
            "{}",
            unknown.message
        );
        let basic = authorize(&t, "GET", "/", Some("Basic YWRtaW4=")).unwrap_err();
        assert_eq!(basic.status, 401);
        assert!(
            basic.message.contains("not \"Bearer <token>\""),
            "{}",
            basic.message
        );
    }

    #[test]
    fn bad_token_files_name_the_line() {
        let bad = |text: &str| {
            Tokens::parse("--token-file", Path::new("/etc/contiv/tokens"), text)
                .unwrap_err()
                .to_string()
        };
        let e = bad("admin-token-0123456789 root\n");
        assert!(
            e.contains("/etc/contiv/tokens") && e.contains("line 1") && e.contains("root"),
            "{e}"
        );
        assert!(bad("short admin\n").contains("shorter than 16"));
        assert!(bad("only-a-token-0123456789\n").contains("expected"));
        assert!(bad("# nothing\n").contains("no token"));
        assert!(
            bad("admin-token-0123456789 admin\nadmin-token-0123456789 read\n").contains("line 2")
        );
        let missing = Tokens::load("--token-file", Path::new("/nonexistent/tokens")).unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("--token-file /nonexistent/tokens: cannot read")
        );
    }

    #[test]
    fn tls_files_are_checked_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not pem").unwrap();
        let e = Security::load(&SecurityFiles {
            tls_cert: Some(junk.clone()),
            tls_key: Some(junk.clone()),
            ..Default::default()
        })
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.starts_with("--tls-cert ") && e.contains("junk.pem"),
            "{e}"
        );
        let e = Security::load(&SecurityFiles {
            tls_cert: Some(junk),
            ..Default::default()
        })
        .err()
        .unwrap()
        .to_string();
        assert_eq!(e, "--tls-cert needs --tls-key too");
    }
}
