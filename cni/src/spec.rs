//! The CNI specification's side (1.0.0, 1.1.0, and configs of 0.3.0/0.3.1/0.4.0): network
//! configuration, results, error codes and the error JSON.
//!
//! The network configuration is validated by hand from a `serde_json::Value` so every error
//! names the field that is wrong (serde's messages give a line and column of a JSON text the
//! runtime generated, which the user never saw).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::api::{self, PodReply};

/// Spec versions this plugin speaks, oldest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];
/// The version reported when the caller did not name one.
pub const LATEST_VERSION: &str = "1.1.0";

/// CNI error codes (spec "Error" section); 100 and up are this plugin's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    IncompatibleVersion,
    UnsupportedField,
    UnknownContainer,
    InvalidEnvironment,
    Io,
    Decode,
    InvalidConfig,
    TryAgainLater,
    /// STATUS: the plugin cannot serve ADD.
    NotAvailable,
    /// netplugin reported a failure (its message says what).
    Netplugin,
    /// Any other code, e.g. one netplugin chose.
    Other(u32),
}

impl ErrorCode {
    /// The numeric code.
    pub fn code(self) -> u32 {
        match self {
            ErrorCode::IncompatibleVersion => 1,
            ErrorCode::UnsupportedField => 2,
            ErrorCode::UnknownContainer => 3,
            ErrorCode::InvalidEnvironment => 4,
            ErrorCode::Io => 5,
            ErrorCode::Decode => 6,
            ErrorCode::InvalidConfig => 7,
            ErrorCode::TryAgainLater => 11,
            ErrorCode::NotAvailable => 50,
            ErrorCode::Netplugin => 100,
            ErrorCode::Other(n) => n,
        }
    }

    /// The code for a number (the inverse of [`ErrorCode::code`]).
    pub fn from_code(code: u32) -> ErrorCode {
        match code {
            1 => ErrorCode::IncompatibleVersion,
            2 => ErrorCode::UnsupportedField,
            3 => ErrorCode::UnknownContainer,
            4 => ErrorCode::InvalidEnvironment,
            5 => ErrorCode::Io,
            6 => ErrorCode::Decode,
            7 => ErrorCode::InvalidConfig,
            11 => ErrorCode::TryAgainLater,
            50 => ErrorCode::NotAvailable,
            100 => ErrorCode::Netplugin,
            n => ErrorCode::Other(n),
        }
    }
}

/// A CNI error, printed on stdout as `{"cniVersion","code","msg","details"}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CniError {
    pub code: ErrorCode,
    /// Short, and says what to do.
    pub msg: String,
    /// Longer detail (the underlying error).
    pub details: String,
}

impl CniError {
    pub fn new(code: ErrorCode, msg: impl Into<String>) -> Self {
        CniError {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    pub fn details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// The error JSON for a caller speaking `version`.
    pub fn to_json(&self, version: &str) -> Value {
        let mut out = json!({"cniVersion": version, "code": self.code.code(), "msg": self.msg});
        if !self.details.is_empty()
            && let Some(obj) = out.as_object_mut()
        {
            obj.insert("details".into(), json!(self.details));
        }
        out
    }
}

impl fmt::Display for CniError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CNI error {}: {}", self.code.code(), self.msg)?;
        if !self.details.is_empty() {
            write!(f, " ({})", self.details)?;
        }
        Ok(())
    }
}

impl std::error::Error for CniError {}

/// The parts of a network configuration this plugin reads.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkConfig {
    pub cni_version: String,
    pub name: String,
    pub plugin_type: String,
    /// netplugin's socket (`socketPath`), default [`api::DEFAULT_SOCKET`].
    pub socket_path: PathBuf,
    /// `args.cni.labels`.
    pub labels: BTreeMap<String, String>,
    /// `prevResult` (CHECK, DEL, chained ADD).
    pub prev_result: Option<Value>,
}

impl NetworkConfig {
    /// Parse the network configuration from stdin's bytes: not JSON → code 6; a field of
    /// the wrong type or value → code 7 naming it; an unsupported `cniVersion` → code 1.
    pub fn parse(bytes: &[u8]) -> Result<NetworkConfig, CniError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| {
            CniError::new(
                ErrorCode::Decode,
                "the network configuration on stdin is not valid JSON",
            )
            .details(e.to_string())
        })?;
        let Value::Object(obj) = value else {
            return Err(invalid("the network configuration must be a JSON object"));
        };
        let cni_version = required_string(&obj, "cniVersion")?;
        check_version(&cni_version)?;
        let name = required_string(&obj, "name")?;
        let plugin_type = optional_string(&obj, "type")?.unwrap_or_default();
        let socket_path = match optional_string(&obj, "socketPath")? {
            None => PathBuf::from(api::DEFAULT_SOCKET),
            Some(p) if p.starts_with('/') => PathBuf::from(p),
            Some(p) => {
                return Err(invalid(format!(
                    "network config field `socketPath` must be an absolute path, got {p:?}"
                )));
            }
        };
        let labels = parse_labels(&obj);
        let prev_result = match obj.get("prevResult") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(other) => {
                return Err(invalid(format!(
                    "network config field `prevResult` must be an object, got {other}"
                )));
            }
        };
        Ok(NetworkConfig {
            cni_version,
            name,
            plugin_type,
            socket_path,
            labels,
            prev_result,
        })
    }
}

/// Fail with code 1 unless `version` is supported.
pub fn check_version(version: &str) -> Result<(), CniError> {
    if SUPPORTED_VERSIONS.contains(&version) {
        Ok(())
    } else {
        Err(CniError::new(
            ErrorCode::IncompatibleVersion,
            format!(
                "cniVersion {version:?} is not supported; use one of {}",
                SUPPORTED_VERSIONS.join(", ")
            ),
        ))
    }
}

/// Whether `version` is at least `min` (both from [`SUPPORTED_VERSIONS`]).
pub fn version_at_least(version: &str, min: &str) -> bool {
    let rank = |v: &str| SUPPORTED_VERSIONS.iter().position(|s| *s == v);
    matches!((rank(version), rank(min)), (Some(a), Some(b)) if a >= b)
}

fn invalid(msg: impl Into<String>) -> CniError {
    CniError::new(ErrorCode::InvalidConfig, msg)
}

fn optional_string(obj: &Map<String, Value>, field: &str) -> Result<Option<String>, CniError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(invalid(format!(
            "network config field `{field}` must be a string, got {other}"
        ))),
    }
}

fn required_string(obj: &Map<String, Value>, field: &str) -> Result<String, CniError> {
    match optional_string(obj, field)? {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(invalid(format!(
            "network config field `{field}` is missing or empty"
        ))),
    }
}

/// `args.cni.labels`, in either shape runtimes send: the CNI conventions' list of
/// `{"key": .., "value": ..}` objects, or an object of strings. `args` is optional metadata
/// (CONVENTIONS.md): an entry or shape this plugin does not understand is skipped, never an error.
fn parse_labels(obj: &Map<String, Value>) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let found = obj
        .get("args")
        .and_then(|a| a.get("cni"))
        .and_then(|c| c.get("labels"));
    match found {
        Some(Value::Array(list)) => {
            for entry in list {
                if let (Some(Value::String(k)), Some(Value::String(v))) =
                    (entry.get("key"), entry.get("value"))
                {
                    labels.insert(k.clone(), v.clone());
                }
            }
        }
        Some(Value::Object(map)) => {
            for (key, value) in map {
                if let Value::String(v) = value {
                    labels.insert(key.clone(), v.clone());
                }
            }
        }
        _ => {}
    }
    labels
}

/// A CNI `interfaces` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Interface {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mac: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sandbox: String,
}

/// The ADD result for the pod as netplugin reported it, in the JSON of `version`: 1.x has
/// `ips[].address/gateway/interface`; 0.3.x/0.4.0 add `ips[].version`.
pub fn add_result(
    version: &str,
    reply: &PodReply,
    ifname: &str,
    netns: &str,
) -> Result<Value, CniError> {
    let mut interfaces = Vec::new();
    if !reply.host_ifname.is_empty() {
        interfaces.push(Interface {
            name: reply.host_ifname.clone(),
            mac: reply.host_mac.clone(),
            sandbox: String::new(),
        });
    }
    let pod_index = interfaces.len();
    interfaces.push(Interface {
        name: ifname.to_owned(),
        mac: reply.mac.clone(),
        sandbox: netns.to_owned(),
    });
    let legacy = !version_at_least(version, "1.0.0");
    let mut ips = Vec::new();
    let mut default_routes = Vec::new();
    for (address, gateway, family, any) in [
        (&reply.ipaddress, &reply.gateway, "4", "0.0.0.0/0"),
        (&reply.ipv6address, &reply.ipv6_gateway, "6", "::/0"),
    ] {
        if address.is_empty() {
            continue;
        }
        if !address.contains('/') {
            return Err(CniError::new(
                ErrorCode::Netplugin,
                format!("netplugin returned address {address:?} without a prefix length"),
            ));
        }
        let mut ip = json!({"address": address, "interface": pod_index});
        if let Some(obj) = ip.as_object_mut() {
            if !gateway.is_empty() {
                obj.insert("gateway".into(), json!(gateway));
                default_routes.push(json!({"dst": any, "gw": gateway}));
            }
            if legacy {
                obj.insert("version".into(), json!(family));
            }
        }
        ips.push(ip);
    }
    let routes = match &reply.routes {
        Some(routes) => routes
            .iter()
            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
            .collect(),
        None => default_routes,
    };
    let mut result = json!({
        "cniVersion": version,
        "interfaces": interfaces,
        "ips": ips,
        "dns": {},
    });
    if !routes.is_empty()
        && let Some(obj) = result.as_object_mut()
    {
        obj.insert("routes".into(), Value::Array(routes));
    }
    Ok(result)
}

/// The VERSION output.
pub fn version_info(requested: Option<&str>) -> Value {
    let version = requested
        .filter(|v| SUPPORTED_VERSIONS.contains(v))
        .unwrap_or(LATEST_VERSION);
    json!({"cniVersion": version, "supportedVersions": SUPPORTED_VERSIONS})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(bytes: &str) -> u32 {
        NetworkConfig::parse(bytes.as_bytes())
            .unwrap_err()
            .code
            .code()
    }

    #[test]
    fn config_parses_socket_and_labels() {
        let cfg = NetworkConfig::parse(
            br#"{"cniVersion":"1.0.0","name":"contiv-net","type":"contivk8s",
                 "socketPath":"/tmp/x.sock","args":{"cni":{"labels":{"io.contiv.network":"blue"}}}}"#,
        )
        .unwrap();
        assert_eq!(cfg.socket_path, PathBuf::from("/tmp/x.sock"));
        assert_eq!(cfg.labels["io.contiv.network"], "blue");
        let cfg = NetworkConfig::parse(
            br#"{"cniVersion":"1.0.0","name":"n","args":{"cni":{"labels":[
                {"key":"io.contiv.network","value":"blue"},{"key":"app","value":"web"}]}}}"#,
        )
        .unwrap();
        assert_eq!(
            cfg.labels,
            BTreeMap::from([
                ("app".to_string(), "web".to_string()),
                ("io.contiv.network".to_string(), "blue".to_string())
            ])
        );
    }

    #[test]
    fn args_it_does_not_understand_are_ignored() {
        for args in [
            r#"{"cni":{"labels":{"io.contiv.tenant":3,"app":"web"}}}"#,
            r#"{"cni":{"labels":[{"key":"app","value":"web"},{"key":1},"x",{"name":"y"}]}}"#,
            r#"{"cni":{"labels":"app=web","ips":["10.1.1.5"]},"other":{"x":1}}"#,
            r#"{"cni":7}"#,
            r#"[1,2]"#,
            r#""a string""#,
        ] {
            let conf = format!(r#"{{"cniVersion":"1.0.0","name":"n","args":{args}}}"#);
            let cfg = NetworkConfig::parse(conf.as_bytes())
                .unwrap_or_else(|e| panic!("args {args} refused: {}", e.msg));
            assert!(
                cfg.labels.is_empty()
                    || cfg.labels == BTreeMap::from([("app".into(), "web".into())]),
                "args {args}: {:?}",
                cfg.labels
            );
        }
        let cfg = NetworkConfig::parse(br#"{"cniVersion":"0.3.1","name":"n","type":"contivk8s"}"#)
            .unwrap();
        assert_eq!(cfg.socket_path, PathBuf::from(api::DEFAULT_SOCKET));
    }

    #[test]
    fn config_errors_have_the_spec_codes_and_name_the_field() {
        assert_eq!(code_of("{not json"), 6);
        assert_eq!(code_of("[]"), 7);
        assert_eq!(code_of(r#"{"cniVersion":"1.0.0"}"#), 7);
        assert_eq!(code_of(r#"{"cniVersion":"9.9.9","name":"n"}"#), 1);
        let err = NetworkConfig::parse(br#"{"cniVersion":"1.0.0","name":"n","socketPath":5}"#)
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        assert!(err.msg.contains("socketPath"), "{}", err.msg);
        assert_eq!(
            code_of(r#"{"cniVersion":"1.0.0","name":"n","socketPath":"rel.sock"}"#),
            7
        );
    }

    #[test]
    fn results_follow_the_requested_version() {
        let reply = PodReply {
            ipaddress: "10.1.1.2/24".into(),
            gateway: "10.1.1.1".into(),
            mac: "02:02:0a:01:01:02".into(),
            host_ifname: "vvport1".into(),
            ..PodReply::default()
        };
        let v1 = add_result("1.0.0", &reply, "eth0", "/var/run/netns/p").unwrap();
        assert_eq!(
            v1,
            json!({"cniVersion":"1.0.0",
                "interfaces":[{"name":"vvport1"},{"name":"eth0","mac":"02:02:0a:01:01:02","sandbox":"/var/run/netns/p"}],
                "ips":[{"address":"10.1.1.2/24","gateway":"10.1.1.1","interface":1}],
                "routes":[{"dst":"0.0.0.0/0","gw":"10.1.1.1"}],
                "dns":{}})
        );
        let old = add_result("0.3.1", &reply, "eth0", "/p").unwrap();
        assert_eq!(old["ips"][0]["version"], "4");
        let bad = PodReply {
            ipaddress: "10.1.1.2".into(),
            ..PodReply::default()
        };
        assert!(add_result("1.0.0", &bad, "eth0", "/p").is_err());
    }

    #[test]
    fn error_json_and_versions() {
        let e = CniError::new(ErrorCode::TryAgainLater, "netplugin is not running").details("x");
        assert_eq!(
            e.to_json("1.0.0"),
            json!({"cniVersion":"1.0.0","code":11,"msg":"netplugin is not running","details":"x"})
        );
        assert!(version_at_least("1.0.0", "0.4.0"));
        assert!(!version_at_least("0.3.1", "0.4.0"));
        assert_eq!(version_info(Some("0.4.0"))["cniVersion"], "0.4.0");
        assert_eq!(version_info(None)["cniVersion"], LATEST_VERSION);
        assert_eq!(ErrorCode::from_code(11), ErrorCode::TryAgainLater);
        assert_eq!(ErrorCode::from_code(123).code(), 123);
    }
}
