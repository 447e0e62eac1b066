//! Kubernetes `Service` and `Endpoints` objects as netplugin reads them, and what the agents
//! get from them: a [`ServiceSpec`] (cluster IP, ports) and the provider addresses.
//!
//! Contract of [`desired`]:
//! - A service with an IPv4 `clusterIP` (types ClusterIP, NodePort and LoadBalancer all have
//!   one; pods reach it the same way) becomes a spec; headless (`None`), ExternalName and
//!   services without a cluster IP do not (said in a note, never an error).
//! - Each port: protocol TCP or UDP (absent = TCP; SCTP is skipped with a note),
//!   `svc_port = port`, `prov_port = targetPort` (absent = `port`). A named targetPort is
//!   resolved through the Endpoints' ports: the endpoints controller lists each resolved
//!   port under the service port's name, so the Endpoints port of the same name and protocol
//!   gives the number. Subsets that resolve a name to another number than the largest
//!   subset are left out (the datapath has one provider port per service port), with a note.
//! - Providers: every IPv4 `subsets[].addresses[].ip` (not `notReadyAddresses`), sorted,
//!   each once.
//! - `sessionAffinity: ClientIP` becomes the spec's affinity timeout
//!   (`sessionAffinityConfig.clientIP.timeoutSeconds`, default 10800 s).
//! - Nothing here panics or fails on odd input: what cannot be used is skipped and named in
//!   the notes the caller logs.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use ofnet::{ServicePort, ServiceProtocol, ServiceSpec};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// `null` where a list or object is expected means empty (the API server omits most empty
/// fields, but clients must not rely on it).
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// `namespace/name` of an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl ObjectKey {
    /// The agents' service name: `k8s:<namespace>/<name>`, never a netctl id
    /// (`<service>:<tenant>` has no `/`).
    pub fn agent_name(&self) -> String {
        format!("k8s:{self}")
    }

    /// The key of a raw object, for naming it in messages and for DELETED events (only the
    /// metadata is needed). `None` if it has no name.
    pub fn of_value(object: &Value) -> Option<ObjectKey> {
        let meta = object.get("metadata")?;
        let name = meta.get("name")?.as_str()?;
        if name.is_empty() {
            return None;
        }
        Some(ObjectKey {
            namespace: meta
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or("default")
                .to_string(),
            name: name.to_string(),
        })
    }

    /// How a raw object is named in a message: its key, or what it is if it has none.
    pub fn describe(object: &Value) -> String {
        ObjectKey::of_value(object)
            .map_or_else(|| "an object without a name".into(), |k| k.to_string())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ObjectMeta {
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub namespace: String,
}

impl ObjectMeta {
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: if self.namespace.is_empty() {
                "default".into()
            } else {
                self.namespace.clone()
            },
            name: self.name.clone(),
        }
    }
}

/// A `v1/Service`, the fields used.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Service {
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: ServiceObjectSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ServiceObjectSpec {
    #[serde(rename = "type", default, deserialize_with = "nullable")]
    pub kind: String,
    #[serde(rename = "clusterIP", default, deserialize_with = "nullable")]
    pub cluster_ip: String,
    /// Dual-stack: the cluster IPs of every family (`clusterIP` first).
    #[serde(rename = "clusterIPs", default, deserialize_with = "nullable")]
    pub cluster_ips: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub ports: Vec<ServiceObjectPort>,
    /// `None` (default) or `ClientIP`.
    #[serde(rename = "sessionAffinity", default, deserialize_with = "nullable")]
    pub session_affinity: String,
    #[serde(
        rename = "sessionAffinityConfig",
        default,
        deserialize_with = "nullable"
    )]
    pub session_affinity_config: Value,
}

/// Kubernetes' default `sessionAffinityConfig.clientIP.timeoutSeconds` (3 hours).
pub const DEFAULT_AFFINITY_TIMEOUT: u16 = 10_800;

/// The session affinity timeout of a Service: `Some` for `sessionAffinity: ClientIP` (its
/// `timeoutSeconds`, default 3 h; above 65535 s, the most an OpenFlow idle timeout holds, cut
/// with a note), `None` otherwise.
fn affinity_timeout(spec: &ServiceObjectSpec, notes: &mut Vec<String>) -> Option<u16> {
    if spec.session_affinity != "ClientIP" {
        return None;
    }
    let secs = spec.session_affinity_config["clientIP"]["timeoutSeconds"].as_i64();
    Some(match secs {
        None => DEFAULT_AFFINITY_TIMEOUT,
        Some(n) if n < 1 => {
            notes.push(format!(
                "sessionAffinity timeoutSeconds {n} is not a timeout; the default 10800 is used"
            ));
            DEFAULT_AFFINITY_TIMEOUT
        }
        Some(n) => u16::try_from(n).unwrap_or_else(|_| {
            notes.push(format!(
                "sessionAffinity timeoutSeconds {n} is more than the switch holds; 65535 is used"
            ));
            u16::MAX
        }),
    })
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServiceObjectPort {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub protocol: String,
    pub port: i64,
    #[serde(rename = "targetPort", default)]
    pub target_port: Option<IntOrString>,
}

/// Kubernetes' `IntOrString`: a port number or a port name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum IntOrString {
    Int(i64),
    String(String),
}

/// A `v1/Endpoints`, the fields used.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Endpoints {
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub subsets: Vec<EndpointSubset>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct EndpointSubset {
    #[serde(default, deserialize_with = "nullable")]
    pub addresses: Vec<EndpointAddress>,
    #[serde(default, deserialize_with = "nullable")]
    pub ports: Vec<EndpointPort>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EndpointAddress {
    pub ip: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EndpointPort {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    pub port: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub protocol: String,
}

/// What the agents get for one service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentService {
    pub spec: ServiceSpec,
    pub providers: Vec<Ipv4Addr>,
}

fn protocol(text: &str) -> Option<ServiceProtocol> {
    match text.to_ascii_uppercase().as_str() {
        "" | "TCP" => Some(ServiceProtocol::Tcp),
        "UDP" => Some(ServiceProtocol::Udp),
        _ => None,
    }
}

fn port_number(n: i64) -> Option<u16> {
    u16::try_from(n).ok().filter(|p| *p != 0)
}

/// How a service port is named in notes: `name` or the number.
fn port_label(p: &ServiceObjectPort) -> String {
    if p.name.is_empty() {
        format!("port {}", p.port)
    } else {
        format!("port {} ({})", p.port, p.name)
    }
}

/// A service port before its provider port is known.
struct Pending {
    protocol: ServiceProtocol,
    svc_port: u16,
    /// Resolved number, or the Endpoints port name to look up.
    target: Result<u16, String>,
}

/// A subset's IPv4 ready addresses (notes name the others).
fn subset_providers(subset: &EndpointSubset, notes: &mut Vec<String>) -> Vec<Ipv4Addr> {
    subset
        .addresses
        .iter()
        .filter_map(|a| match a.ip.parse::<Ipv4Addr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                notes.push(format!("endpoint address {:?} is not IPv4; skipped", a.ip));
                None
            }
        })
        .collect()
}

/// The spec and providers for `service` given its Endpoints (see the module contract);
/// `None` when it is not a service the agents can balance. `notes` say what was skipped.
pub fn desired(
    service: &Service,
    endpoints: Option<&Endpoints>,
    notes: &mut Vec<String>,
) -> Option<AgentService> {
    let spec = &service.spec;
    if spec.kind == "ExternalName" {
        notes.push("an ExternalName service has no cluster IP; not balanced".into());
        return None;
    }
    let vip6;
    let vip = match spec.cluster_ip.as_str() {
        "" => {
            notes.push("no clusterIP; not balanced".into());
            return None;
        }
        "None" => {
            notes.push("headless (clusterIP None); not balanced".into());
            return None;
        }
        _ => {
            // A dual-stack Service lists both families in `clusterIPs`; its IPv6 VIP balances
            // over the IPv6 addresses of the same (IPv4-named) providers.
            let all: Vec<IpAddr> = std::iter::once(&spec.cluster_ip)
                .chain(&spec.cluster_ips)
                .filter_map(|ip| ip.parse().ok())
                .collect();
            let v4 = all.iter().find_map(|ip| match ip {
                IpAddr::V4(a) => Some(*a),
                IpAddr::V6(_) => None,
            });
            vip6 = all.iter().find_map(|ip| match ip {
                IpAddr::V6(a) => Some(*a),
                IpAddr::V4(_) => None,
            });
            match v4 {
                Some(vip) => vip,
                None if vip6.is_some() => {
                    notes.push(format!(
                        "clusterIP {:?}: an IPv6-only service is not balanced (dual-stack services with an IPv4 clusterIP are)",
                        spec.cluster_ip
                    ));
                    return None;
                }
                None => {
                    notes.push(format!(
                        "clusterIP {:?} is not an IP address; not balanced",
                        spec.cluster_ip
                    ));
                    return None;
                }
            }
        }
    };
    let mut pending = Vec::new();
    let mut seen = BTreeSet::new();
    for p in &spec.ports {
        let Some(proto) = protocol(&p.protocol) else {
            notes.push(format!(
                "{}: protocol {} is not supported (TCP and UDP are); skipped",
                port_label(p),
                p.protocol
            ));
            continue;
        };
        let Some(svc_port) = port_number(p.port) else {
            notes.push(format!("{}: not a port number; skipped", port_label(p)));
            continue;
        };
        let target = match &p.target_port {
            None => Ok(svc_port),
            Some(IntOrString::Int(n)) => match port_number(*n) {
                Some(t) => Ok(t),
                None => {
                    notes.push(format!(
                        "{}: targetPort {n} is not a port number; skipped",
                        port_label(p)
                    ));
                    continue;
                }
            },
            // The endpoints controller files the resolved number under the service port's
            // name, not under the container port's name.
            Some(IntOrString::String(_)) => Err(p.name.clone()),
        };
        if !seen.insert((proto, svc_port)) {
            notes.push(format!(
                "{}: listed twice; the first is used",
                port_label(p)
            ));
            continue;
        }
        pending.push(Pending {
            protocol: proto,
            svc_port,
            target,
        });
    }
    let subsets = endpoints.map_or(&[][..], |e| &e.subsets[..]);
    // Each subset's numbers for the named ports (None: it does not list one of them).
    let resolve = |subset: &EndpointSubset| -> Option<Vec<u16>> {
        pending
            .iter()
            .filter_map(|p| p.target.as_ref().err().map(|name| (p.protocol, name)))
            .map(|(proto, name)| {
                subset
                    .ports
                    .iter()
                    .find(|ep| &ep.name == name && protocol(&ep.protocol) == Some(proto))
                    .and_then(|ep| port_number(ep.port))
            })
            .collect()
    };
    let mut candidates: Vec<(Vec<u16>, Vec<Ipv4Addr>)> = Vec::new();
    for subset in subsets {
        let ips = subset_providers(subset, notes);
        match resolve(subset) {
            Some(numbers) => candidates.push((numbers, ips)),
            None if !ips.is_empty() => notes.push(format!(
                "providers {ips:?} do not list every named port; skipped"
            )),
            None => {}
        }
    }
    // The numbers of the largest subset decide; others must agree.
    let chosen = candidates
        .iter()
        .max_by_key(|(_, ips)| ips.len())
        .map(|(numbers, _)| numbers.clone());
    let mut providers = Vec::new();
    for (numbers, ips) in &candidates {
        if Some(numbers) == chosen.as_ref() {
            providers.extend(ips.iter().copied());
        } else {
            notes.push(format!(
                "providers {ips:?} serve the named ports on {numbers:?}, others on {chosen:?}; skipped"
            ));
        }
    }
    providers.sort();
    providers.dedup();
    let mut named = chosen.unwrap_or_default().into_iter();
    let mut ports = Vec::new();
    for p in pending {
        let prov_port = match p.target {
            Ok(n) => n,
            Err(name) => match named.next() {
                Some(n) => n,
                None => {
                    notes.push(format!(
                        "port {}: named targetPort of service port {name:?} unresolved until the Endpoints list it; skipped",
                        p.svc_port
                    ));
                    continue;
                }
            },
        };
        ports.push(ServicePort {
            protocol: p.protocol,
            svc_port: p.svc_port,
            prov_port,
        });
    }
    if ports.is_empty() {
        notes.push("no usable port; not balanced".into());
        return None;
    }
    Some(AgentService {
        spec: ServiceSpec {
            vip,
            ports,
            affinity_timeout: affinity_timeout(spec, notes),
            vip6,
        },
        providers,
    })
}

/// One line of a watch stream, before its object is read as a Service or Endpoints.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RawWatchEvent {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub object: Value,
}

/// A watch event, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    /// ADDED or MODIFIED: the object as it is now.
    Put(Value),
    /// DELETED: which object.
    Deleted(ObjectKey),
    /// BOOKMARK: nothing changed.
    Bookmark,
    /// ERROR: the `Status` object's code (410: the resourceVersion is too old) and message.
    Error { code: u16, message: String },
}

/// A watch stream line that is not a usable event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("not a watch event ({0})")]
    NotJson(String),
    #[error("unknown watch event type {0:?}")]
    UnknownType(String),
    #[error("DELETED event for {0}, which has no metadata.name")]
    Unnamed(String),
}

/// Classify one line of a watch stream.
pub fn parse_event(line: &[u8]) -> Result<WatchEvent, EventError> {
    let raw: RawWatchEvent =
        serde_json::from_slice(line).map_err(|e| EventError::NotJson(e.to_string()))?;
    match raw.kind.as_str() {
        "ADDED" | "MODIFIED" => Ok(WatchEvent::Put(raw.object)),
        "DELETED" => ObjectKey::of_value(&raw.object)
            .map(WatchEvent::Deleted)
            .ok_or_else(|| EventError::Unnamed(raw.object.to_string())),
        "BOOKMARK" => Ok(WatchEvent::Bookmark),
        "ERROR" => Ok(WatchEvent::Error {
            code: raw
                .object
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(0),
            message: raw
                .object
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }),
        other => Err(EventError::UnknownType(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(value: Value) -> Service {
        serde_json::from_value(value).unwrap()
    }

    fn endpoints(value: Value) -> Endpoints {
        serde_json::from_value(value).unwrap()
    }

    fn tcp(svc_port: u16, prov_port: u16) -> ServicePort {
        ServicePort {
            protocol: ServiceProtocol::Tcp,
            svc_port,
            prov_port,
        }
    }

    #[test]
    fn cluster_ip_service_maps_ports_and_ready_providers() {
        let svc = service(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.254.0.10", "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                {"name": "dns", "protocol": "UDP", "port": 53},
            ]}
        }));
        let eps = endpoints(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "subsets": [
                {"addresses": [{"ip": "10.1.0.3"}, {"ip": "10.1.0.2"}],
                 "notReadyAddresses": [{"ip": "10.1.0.9"}],
                 "ports": [{"name": "http", "port": 8080}]},
                {"addresses": [{"ip": "10.1.0.2"}, {"ip": "fd00::1"}]},
            ]
        }));
        let mut notes = Vec::new();
        let got = desired(&svc, Some(&eps), &mut notes).unwrap();
        assert_eq!(got.spec.vip, Ipv4Addr::new(10, 254, 0, 10));
        assert_eq!(
            got.spec.ports,
            [
                tcp(80, 8080),
                ServicePort {
                    protocol: ServiceProtocol::Udp,
                    svc_port: 53,
                    prov_port: 53
                }
            ]
        );
        assert_eq!(
            got.providers,
            [Ipv4Addr::new(10, 1, 0, 2), Ipv4Addr::new(10, 1, 0, 3)]
        );
        assert!(notes.iter().any(|n| n.contains("fd00::1")), "{notes:?}");
        assert_eq!(svc.metadata.key().agent_name(), "k8s:shop/web");
        // Without Endpoints the service is there, with no providers.
        let got = desired(&svc, None, &mut notes).unwrap();
        assert!(got.providers.is_empty());
    }

    #[test]
    fn a_dual_stack_service_gets_its_ipv6_cluster_ip_and_an_ipv6_only_one_a_note() {
        let eps = endpoints(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "subsets": [{"addresses": [{"ip": "10.1.0.2"}], "ports": [{"port": 8080}]}]
        }));
        let with = |spec: Value| {
            let svc =
                service(json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": spec}));
            let mut notes = Vec::new();
            let got = desired(&svc, Some(&eps), &mut notes);
            (got, notes)
        };
        let (got, notes) = with(json!({"clusterIP": "10.254.0.10",
            "clusterIPs": ["10.254.0.10", "fd00:254::10"], "ipFamilies": ["IPv4", "IPv6"],
            "ports": [{"port": 80, "targetPort": 8080}]}));
        let got = got.unwrap();
        assert_eq!(got.spec.vip, Ipv4Addr::new(10, 254, 0, 10));
        assert_eq!(got.spec.vip6, Some("fd00:254::10".parse().unwrap()));
        assert_eq!(got.providers, vec![Ipv4Addr::new(10, 1, 0, 2)]);
        assert!(notes.is_empty(), "{notes:?}");
        let (got, notes) = with(json!({"clusterIP": "fd00:254::10",
            "clusterIPs": ["fd00:254::10", "10.254.0.10"],
            "ports": [{"port": 80, "targetPort": 8080}]}));
        assert_eq!(
            got.unwrap().spec.vip6,
            Some("fd00:254::10".parse().unwrap()),
            "IPv6-primary dual-stack: both VIPs (providers still named by IPv4 addresses)"
        );
        assert!(notes.is_empty(), "{notes:?}");
        let (got, notes) = with(json!({"clusterIP": "fd00:254::10",
            "ports": [{"port": 80, "targetPort": 8080}]}));
        assert!(got.is_none());
        assert!(notes[0].contains("IPv6-only"), "{notes:?}");
        let (got, notes) = with(json!({"clusterIP": "web.example",
            "ports": [{"port": 80}]}));
        assert!(got.is_none());
        assert!(notes[0].contains("not an IP address"), "{notes:?}");
    }

    #[test]
    fn client_ip_session_affinity_becomes_the_affinity_timeout() {
        let with = |affinity: Value| {
            let mut spec = json!({"clusterIP": "10.254.0.10", "ports": [{"port": 80}]});
            if let (Some(o), Some(a)) = (spec.as_object_mut(), affinity.as_object()) {
                o.extend(a.clone());
            }
            let svc =
                service(json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": spec}));
            let mut notes = Vec::new();
            let got = desired(&svc, None, &mut notes).unwrap();
            (got.spec.affinity_timeout, notes)
        };
        assert_eq!(with(json!({})).0, None);
        assert_eq!(with(json!({"sessionAffinity": "None"})).0, None);
        assert_eq!(
            with(json!({"sessionAffinity": "ClientIP"})).0,
            Some(DEFAULT_AFFINITY_TIMEOUT)
        );
        assert_eq!(
            with(json!({"sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}))
            .0,
            Some(60)
        );
        let (cut, notes) = with(json!({"sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 86400}}}));
        assert_eq!(cut, Some(u16::MAX));
        assert!(notes.iter().any(|n| n.contains("86400")), "{notes:?}");
    }

    #[test]
    fn named_target_port_resolves_through_the_endpoints_ports() {
        let svc = service(json!({
            "metadata": {"name": "api", "namespace": "default"},
            "spec": {"clusterIP": "10.254.1.1", "ports": [
                {"name": "web", "port": 80, "targetPort": "http-alt"},
                {"name": "metrics", "port": 9100, "targetPort": 9100},
            ]}
        }));
        let mut notes = Vec::new();
        // No endpoints yet: the named port waits, the numeric one is there.
        let got = desired(&svc, None, &mut notes).unwrap();
        assert_eq!(got.spec.ports, [tcp(9100, 9100)]);
        assert!(notes.iter().any(|n| n.contains("unresolved")), "{notes:?}");

        let eps = endpoints(json!({
            "metadata": {"name": "api"},
            "subsets": [
                {"addresses": [{"ip": "10.1.0.5"}, {"ip": "10.1.0.6"}],
                 "ports": [{"name": "web", "port": 8081, "protocol": "TCP"},
                           {"name": "metrics", "port": 9100}]},
                {"addresses": [{"ip": "10.1.0.7"}],
                 "ports": [{"name": "web", "port": 9999}, {"name": "metrics", "port": 9100}]},
            ]
        }));
        let mut notes = Vec::new();
        let got = desired(&svc, Some(&eps), &mut notes).unwrap();
        assert_eq!(got.spec.ports, [tcp(80, 8081), tcp(9100, 9100)]);
        // The minority subset disagrees on the number: left out, and said so.
        assert_eq!(
            got.providers,
            [Ipv4Addr::new(10, 1, 0, 5), Ipv4Addr::new(10, 1, 0, 6)]
        );
        assert!(notes.iter().any(|n| n.contains("10.1.0.7")), "{notes:?}");
    }

    #[test]
    fn headless_external_name_and_sctp_are_skipped_with_a_note() {
        let mut notes = Vec::new();
        for (spec, why) in [
            (
                json!({"clusterIP": "None", "ports": [{"port": 80}]}),
                "headless",
            ),
            (json!({"ports": [{"port": 80}]}), "no clusterIP"),
            (
                json!({"type": "ExternalName", "externalName": "x.example"}),
                "ExternalName",
            ),
            (
                json!({"clusterIP": "fd00::10", "ports": [{"port": 80}]}),
                "IPv6-only",
            ),
            (
                json!({"clusterIP": "10.254.0.9", "ports": [{"port": 80, "protocol": "SCTP"}]}),
                "SCTP",
            ),
        ] {
            notes.clear();
            let svc = service(json!({"metadata": {"name": "x"}, "spec": spec}));
            assert_eq!(desired(&svc, None, &mut notes), None, "{why}");
            assert!(notes.iter().any(|n| n.contains(why)), "{why}: {notes:?}");
        }
        // SCTP next to TCP: only the TCP port.
        let svc = service(json!({"metadata": {"name": "x"}, "spec": {
            "clusterIP": "10.254.0.9",
            "ports": [{"port": 80, "protocol": "SCTP"}, {"port": 81, "protocol": "tcp"},
                      {"port": 81, "protocol": "TCP", "name": "again"},
                      {"port": 82, "targetPort": 70000}]
        }}));
        notes.clear();
        let got = desired(&svc, None, &mut notes).unwrap();
        assert_eq!(got.spec.ports, [tcp(81, 81)]);
        assert_eq!(notes.len(), 3, "{notes:?}");
    }

    #[test]
    fn malformed_objects_do_not_parse_and_are_named() {
        let bad = json!({"metadata": {"name": "web", "namespace": "shop"},
                         "spec": {"clusterIP": "10.254.0.1", "ports": [{"port": "eighty"}]}});
        assert!(serde_json::from_value::<Service>(bad.clone()).is_err());
        assert_eq!(ObjectKey::describe(&bad), "shop/web");
        assert_eq!(
            ObjectKey::describe(&json!({"spec": {}})),
            "an object without a name"
        );
        let nulls = json!({"metadata": {"name": "web", "namespace": null},
                           "spec": {"clusterIP": "10.254.0.1", "ports": null}});
        let svc: Service = serde_json::from_value(nulls).unwrap();
        assert_eq!(svc.metadata.key().to_string(), "default/web");
        let eps: Endpoints =
            serde_json::from_value(json!({"metadata": {"name": "web"}, "subsets": null})).unwrap();
        assert!(eps.subsets.is_empty());
    }

    #[test]
    fn watch_events_are_classified() {
        let put = br#"{"type":"MODIFIED","object":{"metadata":{"name":"a"}}}"#;
        assert_eq!(
            parse_event(put).unwrap(),
            WatchEvent::Put(json!({"metadata": {"name": "a"}}))
        );
        let del = br#"{"type":"DELETED","object":{"metadata":{"name":"a","namespace":"n"}}}"#;
        assert_eq!(
            parse_event(del).unwrap(),
            WatchEvent::Deleted(ObjectKey {
                namespace: "n".into(),
                name: "a".into()
            })
        );
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 5 (90)"}}"#;
        assert_eq!(
            parse_event(gone).unwrap(),
            WatchEvent::Error {
                code: 410,
                message: "too old resource version: 5 (90)".into()
            }
        );
        assert_eq!(
            parse_event(br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#)
                .unwrap(),
            WatchEvent::Bookmark
        );
        assert!(matches!(
            parse_event(b"{not json"),
            Err(EventError::NotJson(_))
        ));
        assert!(matches!(
            parse_event(br#"{"type":"WHATEVER","object":{}}"#),
            Err(EventError::UnknownType(t)) if t == "WHATEVER"
        ));
        assert!(matches!(
            parse_event(br#"{"type":"DELETED","object":{"metadata":{}}}"#),
            Err(EventError::Unnamed(_))
        ));
    }
}
