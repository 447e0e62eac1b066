//! Kubernetes `Service` and `EndpointSlice` (`discovery.k8s.io/v1`) objects as netplugin reads
//! them, and what the agents get from them: a [`ServiceSpec`] (cluster IP, ports) and the
//! provider addresses.
//!
//! Contract of [`desired`]:
//! - A service with an IPv4 `clusterIP` (types ClusterIP, NodePort and LoadBalancer all have
//!   one; pods reach it the same way) becomes a spec; headless (`None`), ExternalName and
//!   services without a cluster IP do not (said in a note, never an error). A dual-stack
//!   service's IPv6 `clusterIPs` entry is the spec's second VIP.
//! - Each port: protocol TCP or UDP (absent = TCP; SCTP is skipped with a note),
//!   `svc_port = port`, `prov_port = targetPort` (absent = `port`). A named targetPort is
//!   resolved per endpoint: the EndpointSlice controller lists, in each slice, the number the
//!   slice's pods give that name, under the *service port's* name and protocol.
//! - Endpoints: those of the service's IPv4 slices (label `kubernetes.io/service-name`),
//!   first address of each. With `internalTrafficPolicy: Local`, only endpoints whose
//!   `nodeName` is this node. Of those, the ready ones (`conditions.ready`, absent = ready);
//!   when none is ready, the ones still serving while terminating (`serving` and
//!   `terminating`), as kube-proxy does, so a rolling update does not drop connections while
//!   the new pods start. An address in two slices counts once.
//! - The datapath has one provider port per service port: when endpoints resolve a named
//!   port to different numbers, the numbers most endpoints use win and the others are left
//!   out, with a note. A named port no endpoint resolves is left out while endpoints exist;
//!   without any endpoint it stays (no provider, so new connections are refused, as for any
//!   service without endpoints).
//! - `sessionAffinity: ClientIP` becomes the spec's affinity timeout
//!   (`sessionAffinityConfig.clientIP.timeoutSeconds`, default 10800 s).
//! - Nothing here panics or fails on odd input: what cannot be used is skipped and named in
//!   the notes the caller logs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use ofnet::{ServicePort, ServiceProtocol, ServiceSpec};

use crate::kubeobj::{Endpoint, EndpointSlice, Service, ServicePort as KubeServicePort};

/// The label an EndpointSlice names its Service with.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

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
    /// The key of an object's metadata (namespace `default` when it names none).
    pub fn of(meta: &ObjectMeta) -> ObjectKey {
        ObjectKey {
            namespace: meta
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".into()),
            name: meta.name.clone().unwrap_or_default(),
        }
    }

    /// The agents' service name: `k8s:<namespace>/<name>`, never a netctl id
    /// (`<service>:<tenant>` has no `/`).
    pub fn agent_name(&self) -> String {
        format!("k8s:{self}")
    }

    /// The Service an EndpointSlice belongs to; `None` when it names none.
    pub fn service_of(slice: &EndpointSlice) -> Option<ObjectKey> {
        let service = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
        if service.is_empty() {
            return None;
        }
        Some(ObjectKey {
            name: service.clone(),
            ..ObjectKey::of(&slice.metadata)
        })
    }
}

/// Kubernetes' default `sessionAffinityConfig.clientIP.timeoutSeconds` (3 hours).
pub const DEFAULT_AFFINITY_TIMEOUT: u16 = 10_800;

/// What the agents get for one service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentService {
    pub spec: ServiceSpec,
    pub providers: Vec<Ipv4Addr>,
}

fn protocol(text: Option<&str>) -> Option<ServiceProtocol> {
    match text.unwrap_or_default().to_ascii_uppercase().as_str() {
        "" | "TCP" => Some(ServiceProtocol::Tcp),
        "UDP" => Some(ServiceProtocol::Udp),
        _ => None,
    }
}

fn port_number(n: i32) -> Option<u16> {
    u16::try_from(n).ok().filter(|p| *p != 0)
}

/// How a service port is named in notes: `name` or the number.
fn port_label(p: &KubeServicePort) -> String {
    match p.name.as_deref() {
        None | Some("") => format!("port {}", p.port),
        Some(name) => format!("port {} ({name})", p.port),
    }
}

/// The session affinity timeout of a Service: `Some` for `sessionAffinity: ClientIP` (its
/// `timeoutSeconds`, default 3 h; above 65535 s, the most an OpenFlow idle timeout holds, cut
/// with a note), `None` otherwise.
fn affinity_timeout(service: &Service, notes: &mut Vec<String>) -> Option<u16> {
    let spec = service.spec.as_ref()?;
    if spec.session_affinity.as_deref() != Some("ClientIP") {
        return None;
    }
    let secs = spec
        .session_affinity_config
        .as_ref()
        .and_then(|c| c.client_ip.as_ref())
        .and_then(|c| c.timeout_seconds);
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

/// A service port before its provider port is known.
struct Pending {
    protocol: ServiceProtocol,
    svc_port: u16,
    /// The service port's name (what slices list the resolved number under).
    name: String,
    /// `Some`: the number for every endpoint; `None`: named, resolved per endpoint.
    target: Option<u16>,
}

/// The VIPs of a service, or why it has none the agents can use.
fn vips(service: &Service, notes: &mut Vec<String>) -> Option<(Ipv4Addr, Option<Ipv6Addr>)> {
    let spec = service.spec.as_ref();
    if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
        notes.push("an ExternalName service has no cluster IP; not balanced".into());
        return None;
    }
    let cluster_ip = spec
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or_default();
    match cluster_ip {
        "" => {
            notes.push("no clusterIP; not balanced".into());
            return None;
        }
        "None" => {
            notes.push("headless (clusterIP None); not balanced".into());
            return None;
        }
        _ => {}
    }
    // A dual-stack Service lists both families in `clusterIPs`; its IPv6 VIP balances over
    // the IPv6 addresses of the same (IPv4-named) providers.
    let all: Vec<IpAddr> = std::iter::once(cluster_ip)
        .chain(
            spec.and_then(|s| s.cluster_ips.as_deref())
                .unwrap_or_default()
                .iter()
                .map(String::as_str),
        )
        .filter_map(|ip| ip.parse().ok())
        .collect();
    let v4 = all.iter().find_map(|ip| match ip {
        IpAddr::V4(a) => Some(*a),
        IpAddr::V6(_) => None,
    });
    let v6 = all.iter().find_map(|ip| match ip {
        IpAddr::V6(a) => Some(*a),
        IpAddr::V4(_) => None,
    });
    match v4 {
        Some(vip) => Some((vip, v6)),
        None if v6.is_some() => {
            notes.push(format!(
                "clusterIP {cluster_ip:?}: an IPv6-only service is not balanced (dual-stack services with an IPv4 clusterIP are)"
            ));
            None
        }
        None => {
            notes.push(format!(
                "clusterIP {cluster_ip:?} is not an IP address; not balanced"
            ));
            None
        }
    }
}

/// The service's ports, before named targetPorts are resolved.
fn pending_ports(service: &Service, notes: &mut Vec<String>) -> Vec<Pending> {
    let mut pending = Vec::new();
    let mut seen = BTreeSet::new();
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    for p in ports {
        let Some(proto) = protocol(p.protocol.as_deref()) else {
            notes.push(format!(
                "{}: protocol {} is not supported (TCP and UDP are); skipped",
                port_label(p),
                p.protocol.as_deref().unwrap_or_default()
            ));
            continue;
        };
        let Some(svc_port) = port_number(p.port) else {
            notes.push(format!("{}: not a port number; skipped", port_label(p)));
            continue;
        };
        let target = match &p.target_port {
            None => Some(svc_port),
            Some(IntOrString::Int(n)) => match port_number(*n) {
                Some(t) => Some(t),
                None => {
                    notes.push(format!(
                        "{}: targetPort {n} is not a port number; skipped",
                        port_label(p)
                    ));
                    continue;
                }
            },
            // A container port's name, resolved per endpoint.
            Some(IntOrString::String(_)) => None,
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
            name: p.name.clone().unwrap_or_default(),
            target,
        });
    }
    pending
}

/// An endpoint the service may use.
struct Candidate {
    ip: Ipv4Addr,
    ready: bool,
    serving_terminating: bool,
    /// The number of each named port of `Pending` (in order), as the endpoint's slice has it.
    named: Vec<Option<u16>>,
}

fn conditions(endpoint: &Endpoint) -> (bool, bool) {
    let c = endpoint.conditions.as_ref();
    let ready = c.and_then(|c| c.ready).unwrap_or(true);
    let serving = c.and_then(|c| c.serving).unwrap_or(ready);
    let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
    (ready, serving && terminating)
}

/// The spec and providers for `service` given its EndpointSlices, as seen by node `node`
/// (see the module contract); `None` when it is not a service the agents can balance.
/// `notes` say what was skipped.
pub fn desired(
    service: &Service,
    slices: &[&EndpointSlice],
    node: &str,
    notes: &mut Vec<String>,
) -> Option<AgentService> {
    let (vip, vip6) = vips(service, notes)?;
    let pending = pending_ports(service, notes);
    let local_only = service
        .spec
        .as_ref()
        .and_then(|s| s.internal_traffic_policy.as_deref())
        == Some("Local");
    let named_ports: Vec<&Pending> = pending.iter().filter(|p| p.target.is_none()).collect();

    // Every usable endpoint once (by address), with what its slice says of the named ports.
    let mut candidates: BTreeMap<Ipv4Addr, Candidate> = BTreeMap::new();
    let mut elsewhere = 0usize;
    for slice in slices {
        match slice.address_type.as_str() {
            "IPv4" => {}
            // Providers are named by their IPv4 address; their IPv6 one is the endpoint DB's.
            "IPv6" => continue,
            other => {
                notes.push(format!(
                    "EndpointSlice {}: addressType {other} is not used; skipped",
                    slice.metadata.name.as_deref().unwrap_or_default()
                ));
                continue;
            }
        }
        let slice_ports = slice.ports.as_deref().unwrap_or_default();
        let named: Vec<Option<u16>> = named_ports
            .iter()
            .map(|p| {
                slice_ports
                    .iter()
                    .find(|sp| {
                        sp.name.as_deref().unwrap_or_default() == p.name
                            && protocol(sp.protocol.as_deref()) == Some(p.protocol)
                    })
                    .and_then(|sp| sp.port.and_then(port_number))
            })
            .collect();
        for endpoint in &slice.endpoints {
            if local_only && endpoint.node_name.as_deref() != Some(node) {
                elsewhere += 1;
                continue;
            }
            let Some(first) = endpoint.addresses.first() else {
                continue;
            };
            let Ok(ip) = first.parse::<Ipv4Addr>() else {
                notes.push(format!("endpoint address {first:?} is not IPv4; skipped"));
                continue;
            };
            let (ready, serving_terminating) = conditions(endpoint);
            let candidate = candidates.entry(ip).or_insert(Candidate {
                ip,
                ready: false,
                serving_terminating: false,
                named: named.clone(),
            });
            // Two slices may list an address while it moves between them: ready in either
            // is ready, and the ready slice's ports are the ones that count.
            if ready && !candidate.ready {
                candidate.named = named.clone();
            }
            candidate.ready |= ready;
            candidate.serving_terminating |= serving_terminating;
        }
    }
    if elsewhere > 0 {
        notes.push(format!(
            "internalTrafficPolicy Local: {elsewhere} endpoints on other nodes are not used"
        ));
    }
    let mut usable: Vec<&Candidate> = candidates.values().filter(|c| c.ready).collect();
    if usable.is_empty() {
        usable = candidates
            .values()
            .filter(|c| c.serving_terminating)
            .collect();
        if !usable.is_empty() {
            notes.push(format!(
                "no ready endpoint; {} serving while terminating are used",
                usable.len()
            ));
        }
    }

    // The named ports' numbers most endpoints use decide (ties: the lowest numbers).
    let mut by_numbers: BTreeMap<&[Option<u16>], Vec<Ipv4Addr>> = BTreeMap::new();
    for c in &usable {
        by_numbers.entry(&c.named[..]).or_default().push(c.ip);
    }
    let chosen: Option<&[Option<u16>]> = by_numbers
        .iter()
        .rev()
        .max_by_key(|(_, ips)| ips.len())
        .map(|(numbers, _)| *numbers);
    let mut providers = Vec::new();
    for (numbers, ips) in &by_numbers {
        if Some(*numbers) == chosen {
            providers.extend(ips.iter().copied());
        } else {
            notes.push(format!(
                "endpoints {ips:?} serve the named ports on {numbers:?}, more endpoints on {chosen:?}; skipped"
            ));
        }
    }
    providers.sort();

    let mut ports = Vec::new();
    let mut named_index = 0usize;
    for p in &pending {
        let prov_port = match p.target {
            Some(n) => n,
            None => {
                let resolved = chosen.and_then(|c| c.get(named_index).copied().flatten());
                named_index += 1;
                match resolved {
                    Some(n) => n,
                    // Nobody to send to: the port refuses, whatever its number.
                    None if providers.is_empty() => p.svc_port,
                    None => {
                        notes.push(format!(
                            "port {}: the endpoints' EndpointSlices do not resolve the named targetPort of service port {:?}; skipped",
                            p.svc_port, p.name
                        ));
                        continue;
                    }
                }
            }
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
            affinity_timeout: affinity_timeout(service, notes),
            vip6,
        },
        providers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn service(value: Value) -> Service {
        serde_json::from_value(value).unwrap()
    }

    fn slice(value: Value) -> EndpointSlice {
        serde_json::from_value(value).unwrap()
    }

    /// An IPv4 slice of service `web` with these endpoints and ports.
    fn web_slice(name: &str, endpoints: Value, ports: Value) -> EndpointSlice {
        slice(json!({
            "metadata": {"name": name, "namespace": "shop",
                         "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": ports,
        }))
    }

    fn ready(ip: &str) -> Value {
        json!({"addresses": [ip], "conditions": {"ready": true}, "nodeName": "n1"})
    }

    fn tcp(svc_port: u16, prov_port: u16) -> ServicePort {
        ServicePort {
            protocol: ServiceProtocol::Tcp,
            svc_port,
            prov_port,
        }
    }

    fn ips(list: &[&str]) -> Vec<Ipv4Addr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn cluster_ip_service_maps_ports_and_ready_endpoints() {
        let svc = service(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.254.0.10", "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                {"name": "dns", "protocol": "UDP", "port": 53},
            ]}
        }));
        let a = web_slice(
            "web-a",
            json!([ready("10.1.0.3"), ready("10.1.0.2"),
                   {"addresses": ["10.1.0.9"], "conditions": {"ready": false}},
                   {"addresses": ["10.1.0.8"]}]),
            json!([{"name": "http", "port": 8080}, {"name": "dns", "port": 53, "protocol": "UDP"}]),
        );
        // The same address in a second slice counts once; an IPv6 slice is not providers.
        let b = web_slice("web-b", json!([ready("10.1.0.2")]), json!([]));
        let mut v6 = web_slice("web-c", json!([ready("fd00::1")]), json!([]));
        v6.address_type = "IPv6".into();
        let mut notes = Vec::new();
        let got = desired(&svc, &[&a, &b, &v6], "n1", &mut notes).unwrap();
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
        // No conditions at all is ready (the API's default).
        assert_eq!(got.providers, ips(&["10.1.0.2", "10.1.0.3", "10.1.0.8"]));
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(ObjectKey::of(&svc.metadata).agent_name(), "k8s:shop/web");
        assert_eq!(
            ObjectKey::service_of(&a),
            Some(ObjectKey {
                namespace: "shop".into(),
                name: "web".into()
            })
        );
        // Without EndpointSlices the service is there, with no providers (it refuses).
        let got = desired(&svc, &[], "n1", &mut notes).unwrap();
        assert!(got.providers.is_empty());
    }

    #[test]
    fn terminating_endpoints_serve_only_when_none_is_ready() {
        let svc = service(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"clusterIP": "10.254.0.10", "ports": [{"port": 80}]}
        }));
        let going = json!({"addresses": ["10.1.0.5"],
            "conditions": {"ready": false, "serving": true, "terminating": true}});
        let gone = json!({"addresses": ["10.1.0.6"],
            "conditions": {"ready": false, "serving": false, "terminating": true}});
        let starting = json!({"addresses": ["10.1.0.7"],
            "conditions": {"ready": false, "serving": false, "terminating": false}});
        let s = web_slice(
            "web-a",
            json!([going, gone, starting, ready("10.1.0.2")]),
            json!([]),
        );
        let mut notes = Vec::new();
        let got = desired(&svc, &[&s], "n1", &mut notes).unwrap();
        assert_eq!(got.providers, ips(&["10.1.0.2"]));
        let s = web_slice("web-a", json!([going, gone, starting]), json!([]));
        let got = desired(&svc, &[&s], "n1", &mut notes).unwrap();
        assert_eq!(got.providers, ips(&["10.1.0.5"]));
        assert!(notes.iter().any(|n| n.contains("terminating")), "{notes:?}");
        let s = web_slice("web-a", json!([gone, starting]), json!([]));
        let got = desired(&svc, &[&s], "n1", &mut notes).unwrap();
        assert!(got.providers.is_empty());
    }

    #[test]
    fn internal_traffic_policy_local_keeps_this_nodes_endpoints() {
        let svc = service(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"clusterIP": "10.254.0.10", "ports": [{"port": 80}],
                     "internalTrafficPolicy": "Local"}
        }));
        let s = web_slice(
            "web-a",
            json!([ready("10.1.0.2"),
                   {"addresses": ["10.1.0.3"], "nodeName": "n2"},
                   {"addresses": ["10.1.0.4"]}]),
            json!([]),
        );
        let mut notes = Vec::new();
        assert_eq!(
            desired(&svc, &[&s], "n1", &mut notes).unwrap().providers,
            ips(&["10.1.0.2"])
        );
        assert!(notes.iter().any(|n| n.contains("2 endpoints")), "{notes:?}");
        assert_eq!(
            desired(&svc, &[&s], "n2", &mut notes).unwrap().providers,
            ips(&["10.1.0.3"])
        );
        // None here: the service refuses on this node.
        assert!(
            desired(&svc, &[&s], "n3", &mut notes)
                .unwrap()
                .providers
                .is_empty()
        );
    }

    #[test]
    fn a_dual_stack_service_gets_its_ipv6_cluster_ip_and_an_ipv6_only_one_a_note() {
        let s = web_slice("web-a", json!([ready("10.1.0.2")]), json!([]));
        let with = |spec: Value| {
            let svc =
                service(json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": spec}));
            let mut notes = Vec::new();
            let got = desired(&svc, &[&s], "n1", &mut notes);
            (got, notes)
        };
        let (got, notes) = with(json!({"clusterIP": "10.254.0.10",
            "clusterIPs": ["10.254.0.10", "fd00:254::10"], "ipFamilies": ["IPv4", "IPv6"],
            "ports": [{"port": 80, "targetPort": 8080}]}));
        let got = got.unwrap();
        assert_eq!(got.spec.vip, Ipv4Addr::new(10, 254, 0, 10));
        assert_eq!(got.spec.vip6, Some("fd00:254::10".parse().unwrap()));
        assert_eq!(got.providers, ips(&["10.1.0.2"]));
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
            let got = desired(&svc, &[], "n1", &mut notes).unwrap();
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
    fn named_target_ports_resolve_per_endpoint_through_its_slice() {
        let svc = service(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"clusterIP": "10.254.1.1", "ports": [
                {"name": "web", "port": 80, "targetPort": "http-alt"},
                {"name": "metrics", "port": 9100, "targetPort": 9100},
            ]}
        }));
        let mut notes = Vec::new();
        // No endpoints: every port is there, the named one refusing like the others.
        let got = desired(&svc, &[], "n1", &mut notes).unwrap();
        assert_eq!(got.spec.ports, [tcp(80, 80), tcp(9100, 9100)]);
        // Two slices give the name two numbers: the one of more endpoints wins.
        let a = web_slice(
            "web-a",
            json!([ready("10.1.0.5"), ready("10.1.0.6")]),
            json!([{"name": "web", "port": 8081, "protocol": "TCP"},
                   {"name": "metrics", "port": 9100}]),
        );
        let b = web_slice(
            "web-b",
            json!([ready("10.1.0.7")]),
            json!([{"name": "web", "port": 9999}, {"name": "metrics", "port": 9100}]),
        );
        let mut notes = Vec::new();
        let got = desired(&svc, &[&b, &a], "n1", &mut notes).unwrap();
        assert_eq!(got.spec.ports, [tcp(80, 8081), tcp(9100, 9100)]);
        assert_eq!(got.providers, ips(&["10.1.0.5", "10.1.0.6"]));
        assert!(notes.iter().any(|n| n.contains("10.1.0.7")), "{notes:?}");
        // Only the minority's endpoints ready: their number is used.
        let mut a_down = a.clone();
        for e in &mut a_down.endpoints {
            e.conditions = serde_json::from_value(json!({"ready": false})).unwrap();
        }
        let got = desired(&svc, &[&a_down, &b], "n1", &mut Vec::new()).unwrap();
        assert_eq!(got.spec.ports[0], tcp(80, 9999));
        assert_eq!(got.providers, ips(&["10.1.0.7"]));
        // Endpoints whose slice does not name the port: the port is left out.
        let c = web_slice("web-c", json!([ready("10.1.0.8")]), json!([]));
        let mut notes = Vec::new();
        let got = desired(&svc, &[&c], "n1", &mut notes).unwrap();
        assert_eq!(got.spec.ports, [tcp(9100, 9100)]);
        assert!(
            notes.iter().any(|n| n.contains("do not resolve")),
            "{notes:?}"
        );
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
            assert_eq!(desired(&svc, &[], "n1", &mut notes), None, "{why}");
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
        let got = desired(&svc, &[], "n1", &mut notes).unwrap();
        assert_eq!(got.spec.ports, [tcp(81, 81)]);
        assert_eq!(notes.len(), 3, "{notes:?}");
        // A slice of an unknown address type is named.
        let mut fqdn = web_slice("web-f", json!([ready("a.example")]), json!([]));
        fqdn.address_type = "FQDN".into();
        notes.clear();
        desired(&svc, &[&fqdn], "n1", &mut notes);
        assert!(notes.iter().any(|n| n.contains("FQDN")), "{notes:?}");
    }

    #[test]
    fn objects_without_namespace_or_with_nulls_read() {
        let nulls = json!({"metadata": {"name": "web", "namespace": null},
                           "spec": {"clusterIP": "10.254.0.1", "ports": null}});
        let svc: Service = serde_json::from_value(nulls).unwrap();
        assert_eq!(ObjectKey::of(&svc.metadata).to_string(), "default/web");
        let mut notes = Vec::new();
        assert_eq!(desired(&svc, &[], "n1", &mut notes), None);
        assert!(
            notes.iter().any(|n| n.contains("no usable port")),
            "{notes:?}"
        );
        let s: EndpointSlice = serde_json::from_value(
            json!({"metadata": {"name": "web-x"}, "addressType": "IPv4", "endpoints": []}),
        )
        .unwrap();
        assert_eq!(ObjectKey::service_of(&s), None);
    }
}
