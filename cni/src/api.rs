//! netplugin's CNI API: HTTP/1.1 `POST` with JSON bodies over the unix socket
//! [`DEFAULT_SOCKET`] (reference §7.1), Host `localhost`, `Content-Type: application/json`.
//!
//! The field names of [`PodRequest`] and [`PodReply`] are Contiv's (`K8S_POD_NAME`,
//! `ipaddress`, ...), so a Contiv-era client still works; the fields after them are additions
//! that a CNI 1.0 result needs (gateway, MAC, host interface, routes) or that carry labels
//! when no Kubernetes API is configured. Every added field is optional on the wire.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Directory of netplugin's sockets.
pub const PLUGIN_DIR: &str = "/run/contiv";
/// netplugin's CNI socket.
pub const DEFAULT_SOCKET: &str = "/run/contiv/contiv-cni.sock";
/// Create the pod's endpoint and interface; replies [`PodReply`] with the addresses.
pub const ADD_POD_PATH: &str = "/ContivCNI.AddPod";
/// Delete the pod's endpoint and interface; succeeds if they are already gone.
pub const DEL_POD_PATH: &str = "/ContivCNI.DelPod";
/// Verify the pod's endpoint and interface are as ADD left them (CNI CHECK).
pub const CHECK_POD_PATH: &str = "/ContivCNI.CheckPod";
/// Whether netplugin can serve ADD now (CNI STATUS): `result` 0 when ready.
pub const STATUS_PATH: &str = "/ContivCNI.Status";

/// Label keys a pod (or the CNI config) uses to pick its tenant, network and group.
pub const LABEL_TENANT: &str = "io.contiv.tenant";
pub const LABEL_NETWORK: &str = "io.contiv.network";
pub const LABEL_GROUP: &str = "io.contiv.net-group";
/// Defaults when a label is absent (§7.3).
pub const DEFAULT_TENANT: &str = "default";
pub const DEFAULT_NETWORK: &str = "default-net";

/// `result` of a successful [`PodReply`].
pub const RESULT_OK: u32 = 0;
/// `result` of a failed [`PodReply`] (`CNIPodAttr`'s convention).
pub const RESULT_ERROR: u32 = 1;

/// The pod a request is about (Contiv's `CNIPodAttr`, plus additions).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodRequest {
    #[serde(
        rename = "K8S_POD_NAME",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub pod_name: String,
    #[serde(
        rename = "K8S_POD_NAMESPACE",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub pod_namespace: String,
    /// The endpoint id; the CNI container id when the runtime does not pass it.
    #[serde(
        rename = "K8S_POD_INFRA_CONTAINER_ID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub infra_container_id: String,
    /// The pod's network namespace path, exactly as CNI gave it.
    #[serde(
        rename = "CNI_NETNS",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub netns: String,
    #[serde(
        rename = "CNI_IFNAME",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub ifname: String,
    /// Addition: `CNI_CONTAINERID`.
    #[serde(
        rename = "CNI_CONTAINERID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub container_id: String,
    /// Addition: the labels of the network config (`args.cni.labels`, all of them) and the
    /// Contiv keys of `CNI_ARGS`; netplugin applies Kubernetes labels and defaults.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Addition: the network config's `cniVersion`.
    #[serde(
        rename = "cniVersion",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub cni_version: String,
    /// Addition, CHECK only: the result ADD returned, as the runtime passed it back.
    #[serde(
        rename = "prevResult",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub prev_result: Option<Value>,
}

/// Tenant, network and group after defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodNetwork {
    pub tenant: String,
    pub network: String,
    /// Endpoint group; empty for none.
    pub group: String,
}

impl PodNetwork {
    /// Resolve labels (from Kubernetes, the config or `CNI_ARGS`) with §7.3's defaults.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> PodNetwork {
        let get = |key: &str, default: &str| {
            labels
                .get(key)
                .filter(|v| !v.is_empty())
                .cloned()
                .unwrap_or_else(|| default.to_owned())
        };
        PodNetwork {
            tenant: get(LABEL_TENANT, DEFAULT_TENANT),
            network: get(LABEL_NETWORK, DEFAULT_NETWORK),
            group: get(LABEL_GROUP, ""),
        }
    }
}

/// One route to install in the pod (`dst` CIDR via optional `gw`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodRoute {
    pub dst: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<String>,
}

/// netplugin's answer (Contiv's `RspAddPod`, plus additions). Errors come with HTTP 500 and
/// this body; `result` is then [`RESULT_ERROR`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodReply {
    #[serde(default)]
    pub result: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub endpointid: String,
    /// `a.b.c.d/len`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ipaddress: String,
    /// `x::y/len`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ipv6address: String,
    /// What went wrong, in words that say what to do.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub errmsg: String,
    /// Detail for the log (the underlying error).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub errinfo: String,
    /// Addition: the CNI error code to report (see [`crate::spec::ErrorCode`]); 100 when absent.
    #[serde(rename = "cniCode", default, skip_serializing_if = "Option::is_none")]
    pub cni_code: Option<u32>,
    /// Addition: IPv4 gateway of the network.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gateway: String,
    /// Addition: IPv6 gateway of the network.
    #[serde(
        rename = "ipv6gateway",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub ipv6_gateway: String,
    /// Addition: MAC of the pod's interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// Addition: name of the host end of the veth (the OVS port).
    #[serde(
        rename = "hostIfname",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub host_ifname: String,
    /// Addition: MAC of the host end.
    #[serde(rename = "hostMac", default, skip_serializing_if = "String::is_empty")]
    pub host_mac: String,
    /// Addition: routes in the pod; when absent, a default route via each gateway is reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<PodRoute>>,
}

impl PodReply {
    /// A failure reply.
    pub fn error(code: Option<u32>, msg: impl Into<String>, info: impl Into<String>) -> Self {
        PodReply {
            result: RESULT_ERROR,
            errmsg: msg.into(),
            errinfo: info.into(),
            cni_code: code,
            ..PodReply::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_uses_contiv_field_names_and_omits_empty_ones() {
        let req = PodRequest {
            pod_name: "web-1".into(),
            pod_namespace: "default".into(),
            infra_container_id: "abc".into(),
            netns: "/var/run/netns/x".into(),
            ifname: "eth0".into(),
            ..PodRequest::default()
        };
        assert_eq!(
            serde_json::to_value(&req).unwrap(),
            json!({"K8S_POD_NAME":"web-1","K8S_POD_NAMESPACE":"default",
                   "K8S_POD_INFRA_CONTAINER_ID":"abc","CNI_NETNS":"/var/run/netns/x","CNI_IFNAME":"eth0"})
        );
    }

    #[test]
    fn contiv_reply_decodes() {
        let reply: PodReply = serde_json::from_value(json!({
            "result": 0, "endpointid": "abc", "ipaddress": "10.1.1.2/24"
        }))
        .unwrap();
        assert_eq!(reply.ipaddress, "10.1.1.2/24");
        assert_eq!(reply.routes, None);
        let err = PodReply::error(Some(7), "network x not found", "");
        assert_eq!(
            serde_json::to_value(&err).unwrap(),
            json!({"result":1,"errmsg":"network x not found","cniCode":7})
        );
    }

    #[test]
    fn labels_default_per_reference() {
        let mut labels = BTreeMap::new();
        assert_eq!(
            PodNetwork::from_labels(&labels),
            PodNetwork {
                tenant: "default".into(),
                network: "default-net".into(),
                group: String::new()
            }
        );
        labels.insert(LABEL_NETWORK.into(), "blue".into());
        labels.insert(LABEL_GROUP.into(), "web".into());
        let net = PodNetwork::from_labels(&labels);
        assert_eq!((net.network.as_str(), net.group.as_str()), ("blue", "web"));
    }
}
