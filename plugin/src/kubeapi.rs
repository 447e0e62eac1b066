//! The Kubernetes API as netplugin uses it in kubernetes mode (reference §7.3, §7.4): read
//! `ContivConfig` from the config file, build a `kube` client from it, and fetch one pod at a
//! CNI ADD (its labels choose the network; its container ports name ports for policies).
//!
//! Contract:
//! - [`KubeConfig::load`] returns `None` when the file does not exist or names no API server:
//!   no API is configured, and labels come from the CNI request alone. A file that exists but
//!   cannot be read or parsed is an error (a typo must not silently change where pods land).
//! - Authentication: bearer token (`K8S_TOKEN`, a token or the path of a file holding one,
//!   re-read as `kube` does when it rotates), else a client certificate (`K8S_CERT` +
//!   `K8S_KEY`), else the service-account token file if it exists. An `https` URL needs
//!   `K8S_CA`, and the server is verified against that CA only; plain `http` is accepted as
//!   is (tests).
//! - [`KubeClient`] is a [`kube::Client`] on our own rustls (ring provider, no aws-lc) HTTP
//!   stack with `kube`'s base-URI and authorization layers; the watchers
//!   ([`crate::kubesvc`], [`crate::kubenetpol`]) run `kube::runtime` on it. Build it inside a
//!   tokio runtime (the client spawns its request buffer there).
//! - [`resolve_labels`] merges: a Kubernetes label overrides the CNI label of the same key,
//!   for the three Contiv keys only; §7.3's defaults apply afterwards ([`cni::api::PodNetwork`]).
//! - [`service_subnet`]: `SVC_SUBNET` of the config file, `10.254.0.0/16` when it names none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cni::api::{LABEL_GROUP, LABEL_NETWORK, LABEL_TENANT};
use kube::client::ConfigExt;
use serde::Deserialize;

use crate::kubeobj::Pod;

/// Where §7.4's config file lives by default.
pub const DEFAULT_CONFIG_PATH: &str = "/var/contiv/config/contiv.json";
/// The service CIDR when the config file names none (§7.4).
pub const DEFAULT_SVC_SUBNET: &str = "10.254.0.0/16";
/// The token a pod's service account gets, used when the config names no credentials.
pub const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// How long one API request may take before the pod's ADD fails with "try again later".
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The label keys a pod's Kubernetes labels may set.
const CONTIV_KEYS: [&str; 3] = [LABEL_TENANT, LABEL_NETWORK, LABEL_GROUP];

/// `ContivConfig` (§7.4). Field names are Contiv's; the CamelCase spellings are accepted too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct KubeConfig {
    #[serde(rename = "K8S_API_SERVER", alias = "K8sAPIServer", default)]
    pub api_server: String,
    #[serde(rename = "K8S_CA", alias = "K8sCa", default)]
    pub ca: String,
    #[serde(rename = "K8S_KEY", alias = "K8sKey", default)]
    pub key: String,
    #[serde(rename = "K8S_CERT", alias = "K8sCert", default)]
    pub cert: String,
    /// A token, or the absolute path of a file holding one.
    #[serde(rename = "K8S_TOKEN", alias = "K8sToken", default)]
    pub token: String,
    #[serde(rename = "SVC_SUBNET", alias = "SvcSubnet", default)]
    pub svc_subnet: String,
    /// The file this came from, for error messages.
    #[serde(skip)]
    pub source: PathBuf,
}

/// What went wrong talking to (or configuring) the Kubernetes API.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("Kubernetes config {path}: {problem}")]
    Config { path: PathBuf, problem: String },
    #[error("Kubernetes credentials: cannot read {path}: {problem}")]
    Credentials { path: PathBuf, problem: String },
    #[error("Kubernetes client for {server}: {problem}")]
    Client { server: String, problem: String },
    #[error(
        "Kubernetes API server {server} is unreachable while reading pod {namespace}/{pod}: {problem}; check K8S_API_SERVER and that the API server runs"
    )]
    Unreachable {
        server: String,
        namespace: String,
        pod: String,
        problem: String,
    },
    #[error(
        "pod {namespace}/{pod} does not exist in the Kubernetes API at {server} (was it deleted?)"
    )]
    PodNotFound {
        server: String,
        namespace: String,
        pod: String,
    },
    #[error(
        "Kubernetes API server {server} answered {status} for pod {namespace}/{pod}: {problem}"
    )]
    Status {
        server: String,
        namespace: String,
        pod: String,
        status: u16,
        problem: String,
    },
    #[error(
        "Kubernetes API server {server} sent pod {namespace}/{pod} that is not a pod: {problem}"
    )]
    BadPod {
        server: String,
        namespace: String,
        pod: String,
        problem: String,
    },
}

impl KubeError {
    /// The CNI error code: 11 ("try again later") when the API could not be asked.
    pub fn cni_code(&self) -> u32 {
        match self {
            KubeError::Unreachable { .. } => 11,
            KubeError::Status { status, .. } if *status >= 500 || *status == 429 => 11,
            _ => 100,
        }
    }
}

fn config_error(path: &Path, problem: impl ToString) -> KubeError {
    KubeError::Config {
        path: path.to_path_buf(),
        problem: problem.to_string(),
    }
}

/// Where the bearer token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Value(String),
    /// A file, re-read when it changes (projected service-account tokens rotate).
    File(PathBuf),
}

impl KubeConfig {
    /// Read the config file; `None` when it does not exist or names no API server.
    pub fn load(path: &Path) -> Result<Option<KubeConfig>, KubeError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(config_error(path, e)),
        };
        let mut cfg: KubeConfig = serde_json::from_str(&text).map_err(|e| config_error(path, e))?;
        cfg.source = path.to_path_buf();
        if cfg.api_server.trim().is_empty() {
            return Ok(None);
        }
        Ok(Some(cfg))
    }

    /// The bearer token to send, if any (see the module contract for the order). A token
    /// file must be readable now: a typo is reported at start, not at the first request.
    fn bearer_token(&self) -> Result<Option<Token>, KubeError> {
        let readable = |path: &Path| {
            std::fs::read_to_string(path)
                .map(|_| Token::File(path.to_path_buf()))
                .map_err(|e| KubeError::Credentials {
                    path: path.to_path_buf(),
                    problem: e.to_string(),
                })
        };
        let token = self.token.trim();
        if !token.is_empty() {
            // Tokens never start with '/', so an absolute path names a token file.
            return if token.starts_with('/') {
                readable(Path::new(token)).map(Some)
            } else {
                Ok(Some(Token::Value(token.to_string())))
            };
        }
        if !self.cert.is_empty() {
            return Ok(None);
        }
        let default = Path::new(SERVICE_ACCOUNT_TOKEN);
        if default.exists() {
            return readable(default).map(Some);
        }
        Ok(None)
    }
}

/// `SVC_SUBNET` of the config file at `path` ([`DEFAULT_SVC_SUBNET`] when the file does not
/// exist or names none); an unreadable file or a value that is not an IPv4 CIDR is an error.
pub fn service_subnet(path: &Path) -> Result<ipnet::Ipv4Net, KubeError> {
    let named = match std::fs::read_to_string(path) {
        Ok(text) => {
            serde_json::from_str::<KubeConfig>(&text)
                .map_err(|e| config_error(path, e))?
                .svc_subnet
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(config_error(path, e)),
    };
    let text = match named.trim() {
        "" => DEFAULT_SVC_SUBNET,
        t => t,
    };
    text.parse::<ipnet::Ipv4Net>()
        .map(|n| n.trunc())
        .map_err(|e| {
            config_error(
                path,
                format!("SVC_SUBNET {text:?} is not an IPv4 CIDR: {e}"),
            )
        })
}

/// A client for one API server: `kube`'s, on our TLS stack.
#[derive(Clone)]
pub struct KubeClient {
    server: String,
    client: kube::Client,
}

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("KubeClient")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

fn pem_error(path: &str, e: impl ToString) -> KubeError {
    KubeError::Credentials {
        path: PathBuf::from(path),
        problem: e.to_string(),
    }
}

/// rustls with ring, the CA file as the only root (system roots are not used: the cluster's
/// CA is what signs the API server), and the client certificate if any.
fn tls_config(cfg: &KubeConfig) -> Result<rustls::ClientConfig, KubeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| pem_error(&cfg.ca, e))?;
    let mut roots = rustls::RootCertStore::empty();
    if !cfg.ca.is_empty() {
        for cert in CertificateDer::pem_file_iter(&cfg.ca).map_err(|e| pem_error(&cfg.ca, e))? {
            let cert = cert.map_err(|e| pem_error(&cfg.ca, e))?;
            roots.add(cert).map_err(|e| pem_error(&cfg.ca, e))?;
        }
        if roots.is_empty() {
            return Err(pem_error(&cfg.ca, "no certificate in the file"));
        }
    }
    let builder = builder.with_root_certificates(roots);
    if cfg.cert.is_empty() || cfg.key.is_empty() {
        return Ok(builder.with_no_client_auth());
    }
    let chain = CertificateDer::pem_file_iter(&cfg.cert)
        .map_err(|e| pem_error(&cfg.cert, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(&cfg.cert, e))?;
    let key = PrivateKeyDer::from_pem_file(&cfg.key).map_err(|e| pem_error(&cfg.key, e))?;
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| pem_error(&cfg.cert, e))
}

/// A request with `Authorization: Bearer <token>`, the token read from `path` for each
/// request (trimmed: files written by hand end in a newline), so a rotated token is used at
/// once. An unreadable file sends no token (the API server's 401 is then logged).
fn bearer_from(
    path: PathBuf,
) -> impl Fn(hyper::Request<kube::client::Body>) -> hyper::Request<kube::client::Body> + Clone {
    move |mut req| {
        match std::fs::read_to_string(&path) {
            Ok(token) => {
                match hyper::header::HeaderValue::try_from(format!("Bearer {}", token.trim())) {
                    Ok(mut value) => {
                        value.set_sensitive(true);
                        req.headers_mut()
                            .insert(hyper::header::AUTHORIZATION, value);
                    }
                    Err(_) => {
                        tracing::warn!(path = %path.display(), "the token file holds no valid token")
                    }
                }
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read the token file")
            }
        }
        req
    }
}

impl KubeClient {
    /// Build a client; fails when the URL is not http(s), or a credential or CA file cannot
    /// be read. Must be called inside a tokio runtime.
    pub fn new(cfg: &KubeConfig) -> Result<KubeClient, KubeError> {
        let server = cfg.api_server.trim().trim_end_matches('/').to_string();
        let tls = if server.starts_with("https://") {
            if cfg.ca.is_empty() {
                return Err(config_error(
                    &cfg.source,
                    format!("K8S_API_SERVER {server} is https but K8S_CA names no CA file"),
                ));
            }
            tls_config(cfg)?
        } else if server.starts_with("http://") {
            // Never used for http, but the connector wants one.
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error(&cfg.source, e))?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth()
        } else {
            return Err(config_error(
                &cfg.source,
                format!("K8S_API_SERVER {server:?} must be an http:// or https:// URL"),
            ));
        };
        let url: hyper::Uri = server
            .parse()
            .map_err(|e| config_error(&cfg.source, format!("K8S_API_SERVER {server:?}: {e}")))?;
        let mut config = kube::Config::new(url);
        let mut token_file = None;
        match cfg.bearer_token()? {
            Some(Token::Value(token)) => config.auth_info.token = Some(token.into()),
            Some(Token::File(path)) => token_file = Some(path),
            None => {}
        }
        let client_error = |problem: String| KubeError::Client {
            server: server.clone(),
            problem,
        };
        let mut tcp = hyper_util::client::legacy::connect::HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_connect_timeout(Some(REQUEST_TIMEOUT));
        // A watch stays open for minutes with nothing to say: keepalive finds a dead peer.
        tcp.set_keepalive(Some(Duration::from_secs(30)));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let http: hyper_util::client::legacy::Client<_, kube::client::Body> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector);
        let auth = config
            .auth_layer()
            .map_err(|e| client_error(error_chain(&e)))?;
        let service = tower::ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .option_layer(auth)
            .option_layer(
                token_file.map(|path| tower::util::MapRequestLayer::new(bearer_from(path))),
            )
            .map_err(tower::BoxError::from)
            .service(http);
        let client = kube::Client::new(service, config.default_namespace);
        Ok(KubeClient { server, client })
    }

    /// The API server URL, as errors name it.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The `kube` client, for `Api`s and watchers.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Pod `namespace/name` as the API server has it now.
    pub async fn pod(&self, namespace: &str, name: &str) -> Result<Pod, KubeError> {
        let api: kube::Api<Pod> = kube::Api::namespaced(self.client.clone(), namespace);
        let unreachable = |problem: String| KubeError::Unreachable {
            server: self.server.clone(),
            namespace: namespace.to_string(),
            pod: name.to_string(),
            problem,
        };
        let got = tokio::time::timeout(REQUEST_TIMEOUT, api.get(name))
            .await
            .map_err(|_| unreachable(format!("no answer within {REQUEST_TIMEOUT:?}")))?;
        match got {
            Ok(pod) => Ok(pod),
            Err(kube::Error::Api(status)) if status.code == 404 => Err(KubeError::PodNotFound {
                server: self.server.clone(),
                namespace: namespace.to_string(),
                pod: name.to_string(),
            }),
            Err(kube::Error::Api(status)) => Err(KubeError::Status {
                server: self.server.clone(),
                namespace: namespace.to_string(),
                pod: name.to_string(),
                status: status.code,
                problem: if status.message.is_empty() {
                    status.reason.clone()
                } else {
                    status.message.clone()
                },
            }),
            Err(kube::Error::SerdeError(e)) => Err(KubeError::BadPod {
                server: self.server.clone(),
                namespace: namespace.to_string(),
                pod: name.to_string(),
                problem: e.to_string(),
            }),
            Err(e) => Err(unreachable(error_chain(&e))),
        }
    }

    /// The labels of pod `namespace/name`.
    pub async fn pod_labels(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<BTreeMap<String, String>, KubeError> {
        Ok(self
            .pod(namespace, name)
            .await?
            .metadata
            .labels
            .unwrap_or_default())
    }
}

/// An error with its causes: the chain says why (refused, TLS, DNS); the top level of a
/// hyper error only says "client error".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut problem = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        problem = format!("{problem}: {c}");
        cause = c.source();
    }
    problem
}

/// A pod's labels: the CNI request's, overridden by the pod's Kubernetes labels key by key (an
/// empty Contiv key in Kubernetes is ignored). The Contiv keys choose the network; the others
/// are what service selectors match.
pub fn resolve_labels(
    cni: &BTreeMap<String, String>,
    kube: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut labels = cni.clone();
    if let Some(kube) = kube {
        for (key, value) in kube {
            // An empty contiv key in Kubernetes does not erase the request's choice; any other
            // label (what service selectors match) is the pod's.
            if value.is_empty() && CONTIV_KEYS.contains(&key.as_str()) {
                continue;
            }
            labels.insert(key.clone(), value.clone());
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use cni::api::PodNetwork;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kubernetes_labels_override_cni_labels_key_by_key() {
        let cni = map(&[(LABEL_TENANT, "t-cni"), (LABEL_NETWORK, "net-cni")]);
        let kube = map(&[
            (LABEL_NETWORK, "net-k8s"),
            (LABEL_GROUP, "web"),
            (LABEL_TENANT, ""),
            ("app", "nginx"),
        ]);
        let labels = resolve_labels(&cni, Some(&kube));
        assert_eq!(
            labels,
            map(&[
                (LABEL_TENANT, "t-cni"),
                (LABEL_NETWORK, "net-k8s"),
                (LABEL_GROUP, "web"),
                ("app", "nginx"),
            ])
        );
        let net = PodNetwork::from_labels(&resolve_labels(&BTreeMap::new(), Some(&kube)));
        assert_eq!(
            (
                net.tenant.as_str(),
                net.network.as_str(),
                net.group.as_str()
            ),
            ("default", "net-k8s", "web")
        );
        assert_eq!(resolve_labels(&cni, None), cni);
    }

    #[test]
    fn config_file_absent_or_without_server_means_no_api() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("contiv.json");
        assert_eq!(KubeConfig::load(&path).unwrap(), None);
        std::fs::write(&path, r#"{"SVC_SUBNET":"10.96.0.0/12"}"#).unwrap();
        assert_eq!(KubeConfig::load(&path).unwrap(), None);
        std::fs::write(
            &path,
            r#"{"K8sAPIServer":"http://127.0.0.1:8080","K8S_TOKEN":"abc"}"#,
        )
        .unwrap();
        let cfg = KubeConfig::load(&path).unwrap().unwrap();
        assert_eq!(cfg.api_server, "http://127.0.0.1:8080");
        assert_eq!(
            cfg.bearer_token().unwrap(),
            Some(Token::Value("abc".into()))
        );
        std::fs::write(&path, "{not json").unwrap();
        let err = KubeConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("contiv.json"), "{err}");
    }

    #[tokio::test]
    async fn token_may_be_a_file_and_https_needs_a_ca() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "from-file\n").unwrap();
        let cfg = KubeConfig {
            api_server: "https://10.0.0.1:6443".into(),
            token: token.display().to_string(),
            ..KubeConfig::default()
        };
        assert_eq!(
            cfg.bearer_token().unwrap(),
            Some(Token::File(token.clone()))
        );
        let missing = KubeConfig {
            api_server: "http://10.0.0.1:8080".into(),
            token: dir.path().join("nope").display().to_string(),
            ..cfg.clone()
        };
        let err = KubeClient::new(&missing).unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
        let err = KubeClient::new(&cfg).unwrap_err().to_string();
        assert!(err.contains("K8S_CA"), "{err}");
        let bad_ca = dir.path().join("ca.pem");
        std::fs::write(&bad_ca, "not a certificate").unwrap();
        let err = KubeClient::new(&KubeConfig {
            ca: bad_ca.display().to_string(),
            ..cfg.clone()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("ca.pem"), "{err}");
        let err = KubeClient::new(&KubeConfig {
            api_server: "10.0.0.1:6443".into(),
            ..cfg
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("http:// or https://"), "{err}");
    }

    #[test]
    fn service_subnet_defaults_and_checks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("contiv.json");
        assert_eq!(service_subnet(&path).unwrap().to_string(), "10.254.0.0/16");
        std::fs::write(&path, r#"{"K8S_API_SERVER":"http://x:1"}"#).unwrap();
        assert_eq!(service_subnet(&path).unwrap().to_string(), "10.254.0.0/16");
        std::fs::write(&path, r#"{"SVC_SUBNET":"10.96.3.4/12"}"#).unwrap();
        assert_eq!(service_subnet(&path).unwrap().to_string(), "10.96.0.0/12");
        std::fs::write(&path, r#"{"SVC_SUBNET":"10.96.0.0"}"#).unwrap();
        let err = service_subnet(&path).unwrap_err().to_string();
        assert!(
            err.contains("SVC_SUBNET") && err.contains("contiv.json"),
            "{err}"
        );
    }

    #[test]
    fn unreachable_is_try_again_later() {
        let e = KubeError::Unreachable {
            server: "http://x".into(),
            namespace: "ns".into(),
            pod: "p".into(),
            problem: "refused".into(),
        };
        assert_eq!(e.cni_code(), 11);
        let e = KubeError::PodNotFound {
            server: "http://x".into(),
            namespace: "ns".into(),
            pod: "p".into(),
        };
        assert_eq!(e.cni_code(), 100);
        assert!(e.to_string().contains("ns/p"));
    }
}
