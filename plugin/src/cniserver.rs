//! netplugin's CNI server (reference §7.1, §7.3): `POST /ContivCNI.AddPod`, `DelPod`,
//! `CheckPod` and `Status` on the unix socket, JSON [`PodRequest`] in, [`PodReply`] out.
//!
//! Contract:
//! - Labels (tenant, network, group) come from the request (`args.cni.labels` or `CNI_ARGS`,
//!   forwarded by contivk8s); when a Kubernetes API is configured (kubernetes mode) and the
//!   request names the pod, the pod's own labels override those keys (see
//!   [`crate::kubeapi::resolve_labels`]); §7.3's defaults fill the rest. AddPod fails when
//!   the API cannot be asked or does not know the pod; DelPod then falls back to the
//!   request's labels, so a pod deleted from Kubernetes can still be torn down.
//! - AddPod either attaches the pod completely or leaves nothing (the driver undoes every
//!   step); errors are HTTP 500 with `result: 1`, a message that says what to do, and the CNI
//!   code (`cniCode`) contivk8s reports.
//! - DelPod succeeds when nothing of the pod is left, including when nothing was there.
//! - CheckPod fails unless the endpoint, its OVS port and the pod's interface with its
//!   address exist.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use cni::api::{
    ADD_POD_PATH, CHECK_POD_PATH, DEL_POD_PATH, PodNetwork, PodReply, PodRequest, RESULT_OK,
    STATUS_PATH,
};

use crate::driver::{Driver, LocalEndpointInfo, PodAttach, PodDetach};
use crate::error::PluginError;
use crate::http::{Handler, Request, Response};
use crate::kubeapi::{KubeClient, resolve_labels};
use crate::kubenetpol::{self, PolicyHandle};
use crate::kubeobj::Pod;
use crate::netlink::pod_interface;

/// What the CNI server works with in kubernetes mode: the API, and the NetworkPolicy
/// controller.
#[derive(Debug, Clone, Default)]
pub struct Kube {
    pub client: Option<Arc<KubeClient>>,
    pub policies: Option<PolicyHandle>,
}

/// The request handler for [`crate::http::serve_unix`].
pub fn handler(driver: Arc<Driver>, kube: Kube) -> Handler {
    Rc::new(move |req: Request| {
        let driver = driver.clone();
        let kube = kube.clone();
        Box::pin(async move { handle(&driver, &kube, req).await })
    })
}

/// The pod object of the request, when an API is configured and the request names a pod.
pub async fn pod_object(
    kube: Option<&KubeClient>,
    pod: &PodRequest,
) -> Result<Option<Pod>, PluginError> {
    let Some(kube) = kube else {
        return Ok(None);
    };
    if pod.pod_name.is_empty() || pod.pod_namespace.is_empty() {
        tracing::debug!(
            container = %pod.container_id,
            "no K8S_POD_NAMESPACE/K8S_POD_NAME in the request; labels from the CNI config only"
        );
        return Ok(None);
    }
    Ok(Some(kube.pod(&pod.pod_namespace, &pod.pod_name).await?))
}

/// The labels the pod's network is chosen by: the request's, overridden by the pod's
/// Kubernetes labels (`object`, see [`pod_object`]).
fn labels_of(pod: &PodRequest, object: Option<&Pod>) -> BTreeMap<String, String> {
    let from_kube = object.map(|o| o.metadata.labels.clone().unwrap_or_default());
    resolve_labels(&pod.labels, from_kube.as_ref())
}

/// The labels the pod's network is chosen by: the request's, overridden by the pod's
/// Kubernetes labels when an API is configured and the request names the pod.
pub async fn pod_labels(
    kube: Option<&KubeClient>,
    pod: &PodRequest,
) -> Result<BTreeMap<String, String>, PluginError> {
    let object = pod_object(kube, pod).await?;
    Ok(labels_of(pod, object.as_ref()))
}

fn error_reply(status: u16, reply: &PodReply) -> Response {
    Response::json(status, reply)
}

fn plugin_error(what: &str, err: &PluginError) -> Response {
    error_reply(
        500,
        &PodReply::error(
            Some(err.cni_code()),
            format!("{what}: {err}"),
            format!("{err:?}"),
        ),
    )
}

/// The CNI operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Add,
    Del,
    Check,
    Status,
}

/// Check method, path and content type and decode the body; the error is the reply.
pub fn parse(req: &Request) -> Result<(Operation, PodRequest), Response> {
    if req.method != "POST" {
        return Err(error_reply(
            405,
            &PodReply::error(None, format!("{} must be POST", req.path), ""),
        ));
    }
    let op = match req.path.as_str() {
        ADD_POD_PATH => Operation::Add,
        DEL_POD_PATH => Operation::Del,
        CHECK_POD_PATH => Operation::Check,
        STATUS_PATH => Operation::Status,
        other => {
            return Err(error_reply(
                404,
                &PodReply::error(None, format!("no CNI operation {other}"), ""),
            ));
        }
    };
    if !req
        .content_type
        .as_deref()
        .is_some_and(|t| t.starts_with("application/json"))
    {
        return Err(error_reply(
            415,
            &PodReply::error(None, "Content-Type must be application/json", ""),
        ));
    }
    let pod = serde_json::from_slice(&req.body).map_err(|e| {
        error_reply(
            400,
            &PodReply::error(
                Some(7),
                format!("request body is not a pod request: {e}"),
                "",
            ),
        )
    })?;
    Ok((op, pod))
}

async fn handle(driver: &Driver, kube: &Kube, req: Request) -> Response {
    let start = std::time::Instant::now();
    let (command, reply) = match parse(&req) {
        Err(reply) => return reply,
        Ok((Operation::Add, pod)) => ("ADD", add_pod(driver, kube, &pod).await),
        Ok((Operation::Del, pod)) => ("DEL", del_pod(driver, kube, &pod).await),
        Ok((Operation::Check, pod)) => ("CHECK", check_pod(driver, &pod).await),
        Ok((Operation::Status, _)) => return status_reply(),
    };
    // A failed reply carries its CNI code (`cniCode`); read it back for the error counter.
    let failed = (reply.status >= 400).then(|| {
        serde_json::from_slice::<PodReply>(&reply.body)
            .ok()
            .and_then(|r| r.cni_code)
    });
    driver.metrics.cni(command, start.elapsed(), failed);
    reply
}

/// The socket is served only once start-up is complete: Status always succeeds.
fn status_reply() -> Response {
    Response::json(
        200,
        &PodReply {
            result: RESULT_OK,
            ..PodReply::default()
        },
    )
}

fn endpoint_id(pod: &PodRequest) -> &str {
    if pod.infra_container_id.is_empty() {
        &pod.container_id
    } else {
        &pod.infra_container_id
    }
}

/// The success reply for an attached endpoint.
pub fn reply_for(info: &LocalEndpointInfo) -> PodReply {
    let oper = &info.oper;
    PodReply {
        result: RESULT_OK,
        endpointid: oper.endpoint_id.clone(),
        ipaddress: format!("{}/{}", oper.ip_address, info.prefix_len),
        ipv6address: if oper.ipv6_address.is_empty() {
            String::new()
        } else {
            format!(
                "{}/{}",
                oper.ipv6_address.split('/').next().unwrap_or_default(),
                info.ipv6_prefix_len
            )
        },
        gateway: info.gateway.clone(),
        ipv6_gateway: info.ipv6_gateway.clone(),
        mac: oper.mac_address.clone(),
        host_ifname: oper.ovs_port(),
        ..PodReply::default()
    }
}

async fn add_pod(driver: &Driver, kube: &Kube, pod: &PodRequest) -> Response {
    let object = match pod_object(kube.client.as_deref(), pod).await {
        Ok(object) => object,
        Err(e) => {
            return plugin_error(
                &format!(
                    "cannot read the labels of pod {}/{}",
                    pod.pod_namespace, pod.pod_name
                ),
                &e,
            );
        }
    };
    let labels = labels_of(pod, object.as_ref());
    let net = PodNetwork::from_labels(&labels);
    let attach = PodAttach {
        tenant: net.tenant,
        network: net.network,
        group: net.group,
        container_id: endpoint_id(pod).to_string(),
        pod_name: pod.pod_name.clone(),
        pod_namespace: pod.pod_namespace.clone(),
        netns: PathBuf::from(&pod.netns),
        ifname: pod.ifname.clone(),
        labels,
        ..PodAttach::default()
    };
    let info = match driver.attach(&attach).await {
        Ok(info) => info,
        Err(e) => {
            return plugin_error(
                &format!(
                    "cannot attach pod {} to network {} of tenant {}",
                    attach.container_id, attach.network, attach.tenant
                ),
                &e,
            );
        }
    };
    // The pod's NetworkPolicies are in the switch before the runtime starts its containers.
    if let Some(policies) = &kube.policies
        && let Err(e) = policies
            .local_pods(kubenetpol::local_pods(driver), object)
            .await
    {
        let detach = PodDetach {
            tenant: attach.tenant.clone(),
            network: attach.network.clone(),
            container_id: attach.container_id.clone(),
            netns: Some(attach.netns.clone()),
            ifname: attach.ifname.clone(),
        };
        if let Err(undo) = driver.detach(&detach).await {
            tracing::warn!(error = %undo, container = %attach.container_id, "undoing the attach");
        }
        let _ = policies
            .local_pods(kubenetpol::local_pods(driver), None)
            .await;
        return plugin_error(
            &format!(
                "cannot put the network policies of pod {}/{} in place",
                pod.pod_namespace, pod.pod_name
            ),
            &PluginError::Policy(e),
        );
    }
    Response::json(200, &reply_for(&info))
}

async fn del_pod(driver: &Driver, kube: &Kube, pod: &PodRequest) -> Response {
    // The labels only matter when no local state names the endpoint; a pod already gone from
    // Kubernetes must still be deletable.
    let labels = pod_labels(kube.client.as_deref(), pod)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "DelPod: using the request's labels");
            pod.labels.clone()
        });
    let net = PodNetwork::from_labels(&labels);
    let detach = PodDetach {
        tenant: net.tenant,
        network: net.network,
        container_id: endpoint_id(pod).to_string(),
        netns: (!pod.netns.is_empty()).then(|| PathBuf::from(&pod.netns)),
        ifname: pod.ifname.clone(),
    };
    let detached = driver.detach(&detach).await;
    if let Some(policies) = &kube.policies
        && let Err(e) = policies
            .local_pods(kubenetpol::local_pods(driver), None)
            .await
    {
        tracing::warn!(error = %e, container = %detach.container_id, "network policies after DelPod");
    }
    match detached {
        Ok(()) => Response::json(
            200,
            &PodReply {
                result: RESULT_OK,
                endpointid: detach.container_id,
                ..PodReply::default()
            },
        ),
        Err(e) => plugin_error(&format!("cannot detach pod {}", detach.container_id), &e),
    }
}

async fn check_pod(driver: &Driver, pod: &PodRequest) -> Response {
    let id = endpoint_id(pod);
    let fail = |msg: String| error_reply(500, &PodReply::error(Some(100), msg, ""));
    let Some(info) = driver.find_local(id, &pod.ifname) else {
        return fail(format!(
            "pod {id} has no endpoint on this host (was it deleted?)"
        ));
    };
    let port = info.oper.ovs_port();
    if !driver.ovsdb.read(|c| c.port(&port).is_some()) {
        return fail(format!("the OVS port {port} of pod {id} is missing"));
    }
    let netns = PathBuf::from(&pod.netns);
    match pod_interface(&netns, &pod.ifname).await {
        Ok(Some(state)) => {
            let want = &info.oper.ip_address;
            if !state
                .addresses
                .iter()
                .any(|a| a.addr().to_string() == *want)
            {
                return fail(format!(
                    "{} in pod {id} does not have its address {want}",
                    pod.ifname
                ));
            }
            Response::json(200, &reply_for(&info))
        }
        Ok(None) => fail(format!(
            "interface {} is missing from pod {id}'s namespace {}",
            pod.ifname, pod.netns
        )),
        Err(e) => fail(format!("cannot inspect pod {id}'s namespace: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::LocalEndpointInfo;
    use crate::oper::OperEndpointState;

    fn request(method: &str, path: &str, content_type: Option<&str>, body: &str) -> Request {
        Request {
            method: method.into(),
            path: path.into(),
            content_type: content_type.map(str::to_string),
            authorization: None,
            body: body.as_bytes().to_vec(),
        }
    }

    fn reply_of(r: &Response) -> PodReply {
        serde_json::from_slice(&r.body).unwrap()
    }

    #[test]
    fn requests_are_checked_before_anything_happens() {
        let json = Some("application/json");
        let r = parse(&request("GET", ADD_POD_PATH, json, "{}")).unwrap_err();
        assert_eq!(r.status, 405);
        let r = parse(&request("POST", "/ContivCNI.Nope", json, "{}")).unwrap_err();
        assert_eq!(r.status, 404);
        assert!(reply_of(&r).errmsg.contains("/ContivCNI.Nope"));
        let r = parse(&request("POST", ADD_POD_PATH, Some("text/plain"), "{}")).unwrap_err();
        assert_eq!(r.status, 415);
        let r = parse(&request("POST", ADD_POD_PATH, json, "{nope")).unwrap_err();
        assert_eq!((r.status, reply_of(&r).cni_code), (400, Some(7)));
        let (op, pod) = parse(&request(
            "POST",
            DEL_POD_PATH,
            Some("application/json; charset=utf-8"),
            r#"{"K8S_POD_INFRA_CONTAINER_ID":"c1","CNI_IFNAME":"eth0"}"#,
        ))
        .unwrap();
        assert_eq!(op, Operation::Del);
        assert_eq!(endpoint_id(&pod), "c1");
    }

    #[test]
    fn the_endpoint_id_falls_back_to_the_container_id() {
        let pod = PodRequest {
            container_id: "cid".into(),
            ..PodRequest::default()
        };
        assert_eq!(endpoint_id(&pod), "cid");
    }

    #[test]
    fn replies_carry_prefix_gateway_and_host_port() {
        let info = LocalEndpointInfo {
            oper: OperEndpointState {
                endpoint_id: "c1".into(),
                ip_address: "10.1.0.5".into(),
                ipv6_address: "2001:db8::5".into(),
                mac_address: "02:02:0a:01:00:05".into(),
                port_name: "vport1".into(),
                ..OperEndpointState::default()
            },
            ofport: 3,
            kind: ofnet::BridgeKind::Vxlan,
            prefix_len: 24,
            ipv6_prefix_len: 64,
            gateway: "10.1.0.1".into(),
            ipv6_gateway: String::new(),
            host_access: None,
        };
        let r = reply_for(&info);
        assert_eq!(
            (
                r.ipaddress.as_str(),
                r.ipv6address.as_str(),
                r.gateway.as_str()
            ),
            ("10.1.0.5/24", "2001:db8::5/64", "10.1.0.1")
        );
        assert_eq!(r.host_ifname, "vvport1");
        assert_eq!(r.result, RESULT_OK);
    }
}
