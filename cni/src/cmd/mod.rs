//! One invocation of the plugin: read the environment and the network config, forward the
//! request to netplugin, and produce the CNI output (a result, nothing, or an error).
//!
//! Which labels go to netplugin: `args.cni.labels` from the network config, overridden per
//! key by `CNI_ARGS` (the runtime's per-pod arguments); only `io.contiv.*` keys are forwarded.
//! netplugin applies Kubernetes labels (when it has an API) and the defaults.

pub mod env;
pub mod http;

use std::path::Path;
use std::time::Duration;

use cni::api::{self, PodReply, PodRequest};
use cni::spec::{self, CniError, ErrorCode, NetworkConfig};
use serde_json::Value;

use env::CniEnv;

/// How long to wait for netplugin: creating an endpoint talks to netmaster and OVS, and
/// under load (many pods at once) it queues; a runtime retries after a failure anyway.
const NETPLUGIN_TIMEOUT: Duration = Duration::from_secs(120);

/// What the invocation prints on success.
pub enum Output {
    Json(Value),
    Nothing,
}

/// A failure and the cniVersion to report it in.
pub struct Failure {
    pub error: CniError,
    pub version: String,
}

/// Run the command described by `env` with `stdin` as the network configuration.
pub fn run(env: &CniEnv, stdin: &[u8]) -> Result<Output, Failure> {
    let fallback_version = version_hint(stdin);
    let fail = |error: CniError| Failure {
        error,
        version: fallback_version.clone(),
    };
    let command = CniEnv::require(&env.command, "CNI_COMMAND", "any command").map_err(fail)?;
    if command == "VERSION" {
        return Ok(Output::Json(spec::version_info(
            fallback_version_opt(stdin).as_deref(),
        )));
    }
    let config = NetworkConfig::parse(stdin).map_err(fail)?;
    let version = config.cni_version.clone();
    let fail = |error: CniError| Failure {
        error,
        version: version.clone(),
    };
    match command {
        "ADD" => add(env, &config).map(Output::Json).map_err(fail),
        "DEL" => del(env, &config).map(|()| Output::Nothing).map_err(fail),
        "CHECK" => check(env, &config).map(|()| Output::Nothing).map_err(fail),
        "STATUS" => status(&config).map(|()| Output::Nothing).map_err(fail),
        other => Err(fail(CniError::new(
            ErrorCode::InvalidEnvironment,
            format!("CNI_COMMAND={other} is not one of ADD, DEL, CHECK, VERSION, STATUS"),
        ))),
    }
}

/// The request netplugin gets for this pod.
fn pod_request(
    env: &CniEnv,
    config: &NetworkConfig,
    command: &str,
) -> Result<PodRequest, CniError> {
    let container_id = CniEnv::require(&env.container_id, "CNI_CONTAINERID", command)?;
    let ifname = CniEnv::require(&env.ifname, "CNI_IFNAME", command)?;
    let mut request = PodRequest {
        container_id: container_id.to_owned(),
        ifname: ifname.to_owned(),
        netns: env.netns.clone().unwrap_or_default(),
        cni_version: config.cni_version.clone(),
        // Every `args.cni.labels` entry is a label (service selectors match any of them);
        // from CNI_ARGS, which also carries runtime keys, only contiv's.
        labels: config.labels.clone(),
        ..PodRequest::default()
    };
    for (key, value) in env.arg_pairs()? {
        match key.as_str() {
            "K8S_POD_NAME" => request.pod_name = value,
            "K8S_POD_NAMESPACE" => request.pod_namespace = value,
            "K8S_POD_INFRA_CONTAINER_ID" => request.infra_container_id = value,
            k if is_contiv_label(k) => {
                request.labels.insert(key, value);
            }
            _ => {}
        }
    }
    if request.infra_container_id.is_empty() {
        request.infra_container_id = container_id.to_owned();
    }
    Ok(request)
}

fn is_contiv_label(key: &str) -> bool {
    matches!(
        key,
        api::LABEL_TENANT | api::LABEL_NETWORK | api::LABEL_GROUP
    )
}

fn add(env: &CniEnv, config: &NetworkConfig) -> Result<Value, CniError> {
    CniEnv::require(&env.netns, "CNI_NETNS", "ADD")?;
    let request = pod_request(env, config, "ADD")?;
    let reply = call(&config.socket_path, api::ADD_POD_PATH, &request)?;
    spec::add_result(&config.cni_version, &reply, &request.ifname, &request.netns)
}

fn del(env: &CniEnv, config: &NetworkConfig) -> Result<(), CniError> {
    let request = pod_request(env, config, "DEL")?;
    call(&config.socket_path, api::DEL_POD_PATH, &request).map(|_| ())
}

fn check(env: &CniEnv, config: &NetworkConfig) -> Result<(), CniError> {
    if !spec::version_at_least(&config.cni_version, "0.4.0") {
        return Err(CniError::new(
            ErrorCode::IncompatibleVersion,
            format!(
                "CHECK needs cniVersion 0.4.0 or later; the network config says {}",
                config.cni_version
            ),
        ));
    }
    CniEnv::require(&env.netns, "CNI_NETNS", "CHECK")?;
    let mut request = pod_request(env, config, "CHECK")?;
    request.prev_result = config.prev_result.clone();
    call(&config.socket_path, api::CHECK_POD_PATH, &request).map(|_| ())
}

fn status(config: &NetworkConfig) -> Result<(), CniError> {
    call(
        &config.socket_path,
        api::STATUS_PATH,
        &PodRequest::default(),
    )
    .map(|_| ())
    .map_err(|e| match e.code {
        ErrorCode::TryAgainLater => CniError {
            code: ErrorCode::NotAvailable,
            ..e
        },
        _ => e,
    })
}

/// POST `request` to netplugin and decode its reply; every failure becomes a CNI error whose
/// message says what to do.
fn call(socket: &Path, path: &str, request: &PodRequest) -> Result<PodReply, CniError> {
    let body = serde_json::to_vec(request).map_err(|e| {
        CniError::new(ErrorCode::Io, "cannot encode the request for netplugin")
            .details(e.to_string())
    })?;
    let response =
        http::post_json(socket, path, &body, NETPLUGIN_TIMEOUT).map_err(|e| match e {
            http::HttpError::Connect { .. } => CniError::new(
                ErrorCode::TryAgainLater,
                format!(
                    "netplugin is not running: could not connect to {}; start netplugin on this \
                 host (or point `socketPath` in the network config at its CNI socket)",
                    socket.display()
                ),
            )
            .details(e.to_string()),
            http::HttpError::Io { .. } => CniError::new(
                ErrorCode::TryAgainLater,
                format!(
                    "netplugin at {} did not answer {path}; retry, and check netplugin's log",
                    socket.display()
                ),
            )
            .details(e.to_string()),
            http::HttpError::Malformed { .. } => CniError::new(
                ErrorCode::Netplugin,
                format!("{} did not answer like netplugin", socket.display()),
            )
            .details(e.to_string()),
        })?;
    if response.status == 404 {
        return Err(CniError::new(
            ErrorCode::Netplugin,
            format!(
                "netplugin at {} does not serve {path}; upgrade netplugin to match this plugin",
                socket.display()
            ),
        ));
    }
    let reply: PodReply = serde_json::from_slice(&response.body).map_err(|e| {
        CniError::new(
            ErrorCode::Netplugin,
            format!(
                "netplugin answered {path} with HTTP {} and a body that is not a pod reply",
                response.status
            ),
        )
        .details(format!("{e}: {}", String::from_utf8_lossy(&response.body)))
    })?;
    if reply.result != api::RESULT_OK || !(200..300).contains(&response.status) {
        let msg = if reply.errmsg.is_empty() {
            format!("netplugin failed {path} (HTTP {})", response.status)
        } else {
            reply.errmsg.clone()
        };
        let code = reply
            .cni_code
            .map(ErrorCode::from_code)
            .unwrap_or(ErrorCode::Netplugin);
        return Err(CniError::new(code, msg).details(reply.errinfo));
    }
    Ok(reply)
}

/// The cniVersion to report an early error in: the config's if it has a supported one.
fn version_hint(stdin: &[u8]) -> String {
    fallback_version_opt(stdin).unwrap_or_else(|| spec::LATEST_VERSION.to_owned())
}

fn fallback_version_opt(stdin: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(stdin).ok()?;
    let version = value.get("cniVersion")?.as_str()?;
    spec::SUPPORTED_VERSIONS
        .contains(&version)
        .then(|| version.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(args: &str) -> CniEnv {
        CniEnv {
            command: Some("ADD".into()),
            container_id: Some("cid".into()),
            netns: Some("/var/run/netns/p".into()),
            ifname: Some("eth0".into()),
            args: Some(args.into()),
        }
    }

    #[test]
    fn cni_args_override_config_labels_and_fill_pod_identity() {
        let config = NetworkConfig::parse(
            br#"{"cniVersion":"1.0.0","name":"n","args":{"cni":{"labels":
                {"io.contiv.tenant":"t1","io.contiv.network":"red","other":"x"}}}}"#,
        )
        .unwrap();
        let req = pod_request(
            &env("IgnoreUnknown=1;K8S_POD_NAME=web;K8S_POD_NAMESPACE=ns;io.contiv.network=blue"),
            &config,
            "ADD",
        )
        .unwrap();
        assert_eq!(req.pod_name, "web");
        assert_eq!(req.pod_namespace, "ns");
        assert_eq!(req.infra_container_id, "cid", "defaults to CNI_CONTAINERID");
        assert_eq!(req.labels["io.contiv.tenant"], "t1");
        assert_eq!(req.labels["io.contiv.network"], "blue");
        // Config labels are all forwarded (service selectors match them); CNI_ARGS' runtime
        // keys are not labels.
        assert_eq!(req.labels["other"], "x");
        assert!(!req.labels.contains_key("IgnoreUnknown"));
        assert!(!req.labels.contains_key("K8S_POD_NAME"));
    }

    #[test]
    fn version_needs_no_config_and_check_needs_0_4() {
        let env = CniEnv {
            command: Some("VERSION".into()),
            ..CniEnv::default()
        };
        let Ok(Output::Json(v)) = run(&env, b"") else {
            panic!("VERSION failed")
        };
        assert_eq!(v["cniVersion"], spec::LATEST_VERSION);
        let env = CniEnv {
            command: Some("CHECK".into()),
            ..self::tests::env("")
        };
        let Err(f) = run(&env, br#"{"cniVersion":"0.3.1","name":"n"}"#) else {
            panic!("CHECK on 0.3.1 must fail")
        };
        assert_eq!(f.error.code, ErrorCode::IncompatibleVersion);
        assert_eq!(f.version, "0.3.1");
    }
}
