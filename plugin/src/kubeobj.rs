//! The Kubernetes objects netplugin follows, as it reads them: only the fields it uses, under
//! the API's own names (`Pod`, `Namespace`, `Service`, `EndpointSlice`).
//!
//! Why not `k8s_openapi`'s types: netplugin follows every pod, namespace, service and
//! EndpointSlice of the cluster (NetworkPolicy peers and service providers are anywhere), and
//! an object as the API server sends it carries far more than netplugin reads: a pod its whole
//! spec (containers, volumes, probes, affinity…) and status, every object its `managedFields`
//! (a few KiB of generic JSON each), an EndpointSlice's endpoints their target references,
//! zones and hints. All of it was parsed into memory for every event, the services' cache kept
//! it, and a re-list held every pod of the cluster that way at once; the deserializers of the
//! pod's hundreds of types were also ≈ 1.2 MB of netplugin's code. These types take the
//! metadata netplugin and `kube`'s watcher use (name, namespace, labels, `resourceVersion`,
//! uid) and the fields named below, and skip everything else while parsing (unknown fields are
//! ignored, not allocated). A field the API adds later, or one netplugin does not read, can
//! therefore never make an object unreadable; a field it reads may be absent (every type
//! takes its `Default` for what is missing).
//!
//! `NetworkPolicy` stays `k8s_openapi`'s: netplugin reads nearly all of it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use serde::{Deserialize, Deserializer};

/// The metadata every object here keeps.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimMeta {
    name: Option<String>,
    namespace: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    resource_version: Option<String>,
    uid: Option<String>,
}

/// `metadata`, keeping only [`SlimMeta`]'s fields (`kube` needs an [`ObjectMeta`]).
fn slim_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = SlimMeta::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        labels: m.labels,
        resource_version: m.resource_version,
        uid: m.uid,
        ..ObjectMeta::default()
    })
}

/// A pod (`v1`, `pods`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Pod {
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    pub spec: Option<PodSpec>,
    pub status: Option<PodStatus>,
}

/// What netplugin reads of a pod's spec.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpec {
    pub host_network: Option<bool>,
    pub containers: Vec<Container>,
    pub init_containers: Option<Vec<Container>>,
}

/// What netplugin reads of a container: its ports (NetworkPolicy's named ports).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Container {
    pub ports: Option<Vec<ContainerPort>>,
}

/// A container port.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerPort {
    pub name: Option<String>,
    pub protocol: Option<String>,
    /// 0 when absent (never a usable port).
    pub container_port: i32,
}

/// What netplugin reads of a pod's status.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodStatus {
    pub phase: Option<String>,
    #[serde(rename = "podIP")]
    pub pod_ip: Option<String>,
    #[serde(rename = "podIPs")]
    pub pod_ips: Option<Vec<PodIp>>,
}

/// One of `status.podIPs`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PodIp {
    pub ip: String,
}

/// A namespace (`v1`, `namespaces`): its metadata (name and labels).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Namespace {
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
}

/// A service (`v1`, `services`): what [`crate::kubesvc`] balances.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Service {
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    pub spec: Option<ServiceSpec>,
}

/// What netplugin reads of a service's spec.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    #[serde(rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    #[serde(rename = "clusterIPs")]
    pub cluster_ips: Option<Vec<String>>,
    pub ports: Option<Vec<ServicePort>>,
    pub session_affinity: Option<String>,
    pub session_affinity_config: Option<SessionAffinityConfig>,
    pub internal_traffic_policy: Option<String>,
}

/// A service port.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ServicePort {
    pub name: Option<String>,
    pub protocol: Option<String>,
    /// 0 when absent (never a usable port).
    pub port: i32,
    pub target_port: Option<IntOrString>,
}

/// `sessionAffinityConfig`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionAffinityConfig {
    #[serde(rename = "clientIP")]
    pub client_ip: Option<ClientIpConfig>,
}

/// `sessionAffinityConfig.clientIP`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClientIpConfig {
    pub timeout_seconds: Option<i32>,
}

/// An EndpointSlice (`discovery.k8s.io/v1`, `endpointslices`): a service's endpoints.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EndpointSlice {
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    pub address_type: String,
    pub endpoints: Vec<Endpoint>,
    pub ports: Option<Vec<EndpointPort>>,
}

/// One endpoint of a slice.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Endpoint {
    pub addresses: Vec<String>,
    pub conditions: Option<EndpointConditions>,
    pub node_name: Option<String>,
}

/// An endpoint's `conditions` (absent ones as the API defines them, see `kubesvc::objects`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct EndpointConditions {
    pub ready: Option<bool>,
    pub serving: Option<bool>,
    pub terminating: Option<bool>,
}

/// A port of a slice: the number its endpoints serve a service port's name on.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct EndpointPort {
    pub name: Option<String>,
    pub protocol: Option<String>,
    pub port: Option<i32>,
}

/// `kube`'s `Api` and watcher find an object's URL and metadata through these traits.
macro_rules! resource {
    ($ty:ty, $group:literal, $version:literal, $kind:literal, $plural:literal, $scope:ty) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = if $group.is_empty() {
                $version
            } else {
                concat!($group, "/", $version)
            };
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl k8s_openapi::ListableResource for $ty {
            const LIST_KIND: &'static str = concat!($kind, "List");
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = ObjectMeta;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource!(Pod, "", "v1", "Pod", "pods", NamespaceResourceScope);
resource!(
    Namespace,
    "",
    "v1",
    "Namespace",
    "namespaces",
    ClusterResourceScope
);
resource!(
    Service,
    "",
    "v1",
    "Service",
    "services",
    NamespaceResourceScope
);
resource!(
    EndpointSlice,
    "discovery.k8s.io",
    "v1",
    "EndpointSlice",
    "endpointslices",
    NamespaceResourceScope
);

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;
    use serde_json::json;

    /// A pod as an API server sends it (`plugin/tests/data/pod.json`, which `kube_memory`
    /// puts in the handcrafted API server by the thousand): everything netplugin does not read
    /// is skipped, what it reads is kept.
    fn full_pod() -> serde_json::Value {
        serde_json::from_str(include_str!("../tests/data/pod.json")).unwrap()
    }

    #[test]
    fn a_pod_keeps_what_netplugin_reads_and_nothing_else() {
        let pod: Pod = serde_json::from_value(full_pod()).unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("web-1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(pod.metadata.resource_version.as_deref(), Some("81234"));
        assert_eq!(
            pod.metadata.labels.as_ref().and_then(|l| l.get("app")),
            Some(&"web".to_string())
        );
        // Not kept: the watcher does not need them and policies do not read them.
        assert!(pod.metadata.managed_fields.is_none());
        assert!(pod.metadata.annotations.is_none());
        assert!(pod.metadata.owner_references.is_none());
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.host_network, None);
        let ports = spec.containers[0].ports.as_ref().unwrap();
        assert_eq!(ports[0].name.as_deref(), Some("http"));
        assert_eq!(ports[0].container_port, 80);
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.pod_ip.as_deref(), Some("10.1.0.7"));
        let ips: Vec<&str> = status
            .pod_ips
            .iter()
            .flatten()
            .map(|p| p.ip.as_str())
            .collect();
        assert_eq!(ips, ["10.1.0.7", "fd00:1::7"]);
    }

    #[test]
    fn a_pod_with_fields_netplugin_does_not_read_in_odd_shapes_is_still_read() {
        // A field of a newer API, or one malformed where netplugin never looks, must not make
        // a pod (and with it every policy naming it) unreadable.
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "odd", "namespace": "x", "managedFields": "not a list"},
            "spec": {"containers": [{"name": "c", "resources": 42}], "futureField": {"a": 1}},
            "status": {"podIP": "10.0.0.9", "conditions": "?"}
        }))
        .unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("odd"));
        assert_eq!(
            pod.status.and_then(|s| s.pod_ip).as_deref(),
            Some("10.0.0.9")
        );
        // What netplugin does read must still have its type.
        let bad = serde_json::from_value::<Pod>(json!({"metadata": {"labels": ["x"]}}));
        assert!(bad.is_err());
    }

    #[test]
    fn a_service_and_a_slice_keep_what_the_balancer_reads() {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "9",
                "annotations": {"a": "b"}, "managedFields": [{"manager": "kubectl"}]},
            "spec": {"type": "ClusterIP", "clusterIP": "10.254.0.10",
                "clusterIPs": ["10.254.0.10", "fd00:254::10"], "ipFamilies": ["IPv4", "IPv6"],
                "ports": [{"name": "http", "port": 80, "targetPort": "web", "protocol": "TCP"}],
                "selector": {"app": "web"}, "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}},
                "internalTrafficPolicy": "Local"},
            "status": {"loadBalancer": {}}
        }))
        .unwrap();
        let spec = service.spec.unwrap();
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.cluster_ip.as_deref(), Some("10.254.0.10"));
        assert_eq!(spec.cluster_ips.unwrap().len(), 2);
        let port = &spec.ports.unwrap()[0];
        assert_eq!(
            (port.port, &port.target_port),
            (80, &Some(IntOrString::String("web".into())))
        );
        assert_eq!(
            spec.session_affinity_config
                .and_then(|c| c.client_ip)
                .and_then(|c| c.timeout_seconds),
            Some(60)
        );
        assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Local"));

        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "web-abc", "namespace": "shop",
                "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.1.0.7"], "nodeName": "node-1", "zone": "a",
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "targetRef": {"kind": "Pod", "name": "web-1", "namespace": "shop", "uid": "u"},
                "hints": {"forZones": [{"name": "a"}]}}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"}]
        }))
        .unwrap();
        assert_eq!(slice.address_type, "IPv4");
        let e = &slice.endpoints[0];
        assert_eq!(e.addresses, ["10.1.0.7"]);
        assert_eq!(e.node_name.as_deref(), Some("node-1"));
        assert_eq!(e.conditions.as_ref().and_then(|c| c.ready), Some(true));
        assert_eq!(slice.ports.unwrap()[0].port, Some(8080));
    }

    #[test]
    fn every_kind_has_its_api_path() {
        assert_eq!(
            Pod::url_path(&(), Some("shop")),
            "/api/v1/namespaces/shop/pods"
        );
        assert_eq!(Pod::url_path(&(), None), "/api/v1/pods");
        assert_eq!(Namespace::url_path(&(), None), "/api/v1/namespaces");
        assert_eq!(Pod::kind(&()), "Pod");
        assert_eq!(Namespace::api_version(&()), "v1");
        assert_eq!(Service::url_path(&(), None), "/api/v1/services");
        assert_eq!(
            EndpointSlice::url_path(&(), None),
            "/apis/discovery.k8s.io/v1/endpointslices"
        );
        assert_eq!(EndpointSlice::api_version(&()), "discovery.k8s.io/v1");
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": "shop", "labels": {"team": "a"}, "resourceVersion": "5"},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}
        }))
        .unwrap();
        assert_eq!(ns.metadata.name.as_deref(), Some("shop"));
        assert_eq!(ns.metadata.resource_version.as_deref(), Some("5"));
    }

    /// The heap a listed pod costs, and the time to read it, as `k8s_openapi`'s `Pod` and as
    /// [`Pod`] (docs/performance.md, "Memory"). A measurement, not a check:
    /// `cargo test --release -p plugin --lib kubeobj -- --ignored --nocapture --test-threads 1`.
    #[test]
    #[ignore]
    fn measure_a_listed_pod() {
        let text = serde_json::to_vec(&full_pod()).unwrap();
        let n = 5_000;
        let used = || crate::heap::used_bytes().unwrap_or(0);
        let before = used();
        let full: Vec<k8s_openapi::api::core::v1::Pod> = (0..n)
            .map(|_| serde_json::from_slice(&text).unwrap())
            .collect();
        let full_bytes = (used() - before) / n;
        drop(full);
        let before = used();
        let slim: Vec<Pod> = (0..n)
            .map(|_| serde_json::from_slice(&text).unwrap())
            .collect();
        let slim_bytes = (used() - before) / n;
        drop(slim);
        let time = |read: &dyn Fn()| {
            let start = std::time::Instant::now();
            for _ in 0..n {
                read();
            }
            start.elapsed() / u32::try_from(n).unwrap_or(1)
        };
        let full_time = time(&|| {
            let _: k8s_openapi::api::core::v1::Pod = serde_json::from_slice(&text).unwrap();
        });
        let slim_time = time(&|| {
            let _: Pod = serde_json::from_slice(&text).unwrap();
        });
        println!(
            "a pod of {} bytes of JSON: k8s_openapi {full_bytes} bytes of heap, {full_time:?}; \
             kubeobj {slim_bytes} bytes, {slim_time:?}",
            text.len()
        );
    }
}
