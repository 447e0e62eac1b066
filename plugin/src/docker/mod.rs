//! netplugin as Docker's remote network driver and remote IPAM driver (reference §7.6;
//! libnetwork's `remote.md` and `ipam.md`), served on a unix socket Docker finds in
//! `/run/docker/plugins/`.
//!
//! Mapping:
//! - `Plugin.Activate` → `NetworkDriver` and `IpamDriver`.
//! - `IpamDriver.RequestPool` resolves the Contiv network (and group) from the IPAM options
//!   or the subnet ([`binding`]) and returns netmaster's pool id (`<net>.<tenant>`,
//!   `<net>:<group>.<tenant>`), with the network's gateway as the pool's gateway.
//!   `RequestAddress` → `/plugin/allocAddress` (a reservation), `ReleaseAddress` →
//!   `/plugin/releaseAddress` (frees a reservation only: an address an endpoint took is freed
//!   by `/plugin/deleteEndpoint`, so Docker's release after `DeleteEndpoint` cannot free an
//!   address someone else holds by then).
//! - `NetworkDriver.CreateNetwork` resolves and stores the binding of the Docker network;
//!   `CreateEndpoint` attaches the endpoint through the same driver code as a CNI ADD
//!   ([`Driver::attach`], in handover mode: Docker moves the interface itself at `Join`);
//!   `DeleteEndpoint` is a CNI DEL ([`Driver::detach`]).
//!
//! Errors: a request that does not decode is HTTP 400; one that cannot be done is HTTP 500
//! with `{"Err": "..."}` naming the problem, after everything it created was undone (a
//! non-200 status with `Err` is what Docker's plugin client reports for both APIs; on 200 the
//! IPAM API would read an `Error` field instead).

pub mod api;
pub mod binding;
pub mod events;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use master::endpoint::{AddressAllocRequest, AddressReleaseRequest};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::driver::{Driver, LocalEndpointInfo, PodAttach, PodDetach};
use crate::error::{PluginError, Result};
use crate::http::{Handler, Request, Response};
use crate::oper::port_name_for;
use api::*;
use binding::{DockerNetwork, Resolved};

/// The prefix Docker names the container's interface with (`eth0`, `eth1`, ...).
pub const INTERFACE_PREFIX: &str = "eth";
/// The address spaces the IPAM announces (Contiv's pools are per tenant, named by options).
pub const ADDRESS_SPACE: &str = "contiv";

/// The request handler for [`crate::http::serve_unix`].
pub fn handler(driver: Arc<Driver>) -> Handler {
    Rc::new(move |req: Request| {
        let driver = driver.clone();
        Box::pin(async move { handle(&driver, req).await })
    })
}

fn reply(value: &impl Serialize) -> Response {
    let mut r = Response::json(200, value);
    r.content_type = CONTENT_TYPE;
    r
}

fn error_reply(status: u16, message: String) -> Response {
    let mut r = Response::json(status, &ErrorReply { Err: message });
    r.content_type = CONTENT_TYPE;
    r
}

fn decode<T: DeserializeOwned + Default>(req: &Request) -> std::result::Result<T, Response> {
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(&req.body).map_err(|e| {
        error_reply(
            400,
            format!("{}: the body is not the expected JSON: {e}", req.path),
        )
    })
}

/// Run one operation: decode, call, and turn the outcome into the reply.
async fn call<Q, R, F>(req: &Request, op: F) -> Response
where
    Q: DeserializeOwned + Default,
    R: Serialize,
    F: AsyncFnOnce(Q) -> Result<R>,
{
    let q: Q = match decode(req) {
        Ok(q) => q,
        Err(r) => return r,
    };
    match op(q).await {
        Ok(r) => reply(&r),
        Err(e) => {
            tracing::warn!(call = %req.path, error = %e, "Docker request failed");
            error_reply(500, e.to_string())
        }
    }
}

async fn handle(driver: &Driver, req: Request) -> Response {
    if req.method != "POST" {
        return error_reply(405, format!("{} must be POST", req.path));
    }
    tracing::debug!(call = %req.path, "Docker plugin call");
    let d = driver;
    match req.path.as_str() {
        "/Plugin.Activate" => reply(&ActivateReply {
            Implements: vec!["NetworkDriver".into(), "IpamDriver".into()],
        }),
        "/NetworkDriver.GetCapabilities" => reply(&CapabilitiesReply {
            Scope: "local".into(),
            ConnectivityScope: "global".into(),
        }),
        "/NetworkDriver.CreateNetwork" => call(&req, async |q| create_network(d, q).await).await,
        "/NetworkDriver.DeleteNetwork" => {
            call(&req, async |q: NetworkRequest| {
                binding::delete(d, &q.NetworkID).await.map(|()| json!({}))
            })
            .await
        }
        "/NetworkDriver.CreateEndpoint" => call(&req, async |q| create_endpoint(d, q).await).await,
        "/NetworkDriver.DeleteEndpoint" => call(&req, async |q| delete_endpoint(d, q).await).await,
        "/NetworkDriver.Join" => call(&req, async |q| join(d, q).await).await,
        "/NetworkDriver.Leave" => call(&req, async |_: EndpointRequest| Ok(json!({}))).await,
        "/NetworkDriver.EndpointOperInfo" => {
            call(&req, async |q| endpoint_oper_info(d, q).await).await
        }
        "/NetworkDriver.ProgramExternalConnectivity"
        | "/NetworkDriver.RevokeExternalConnectivity"
        | "/NetworkDriver.DiscoverNew"
        | "/NetworkDriver.DiscoverDelete" => call(&req, async |_: Value| Ok(json!({}))).await,
        "/IpamDriver.GetCapabilities" => reply(&IpamCapabilitiesReply::default()),
        "/IpamDriver.GetDefaultAddressSpaces" => reply(&AddressSpacesReply {
            LocalDefaultAddressSpace: ADDRESS_SPACE.into(),
            GlobalDefaultAddressSpace: ADDRESS_SPACE.into(),
        }),
        "/IpamDriver.RequestPool" => call(&req, async |q| request_pool(d, q).await).await,
        "/IpamDriver.ReleasePool" => call(&req, async |_: PoolRequest| Ok(json!({}))).await,
        "/IpamDriver.RequestAddress" => call(&req, async |q| request_address(d, q).await).await,
        "/IpamDriver.ReleaseAddress" => call(&req, async |q| release_address(d, q).await).await,
        other => error_reply(404, format!("{other} is not a method of this plugin")),
    }
}

/// A string option of a JSON option map.
fn option_of(map: &BTreeMap<String, Value>, key: &str) -> Option<String> {
    match map.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

async fn create_network(driver: &Driver, q: CreateNetworkRequest) -> Result<Value> {
    if q.NetworkID.is_empty() {
        return Err(invalid("NetworkID", "is empty".into()));
    }
    let generic = match q.Options.get(GENERIC_OPTIONS) {
        Some(Value::Object(m)) => m.clone().into_iter().collect(),
        _ => BTreeMap::new(),
    };
    let pool = q
        .IPv4Data
        .first()
        .map(|d| d.Pool.clone())
        .unwrap_or_default();
    let mut resolved = binding::resolve(driver, |k| option_of(&generic, k), &pool).await?;
    resolved.binding.DocknetUUID = q.NetworkID.clone();
    binding::save(driver, &resolved.binding).await?;
    tracing::info!(docker_network = %q.NetworkID, binding = ?resolved.binding, "Docker network bound");
    Ok(json!({}))
}

fn invalid(field: &'static str, problem: String) -> PluginError {
    PluginError::Invalid { field, problem }
}

/// The binding of a Docker network, or an error naming it.
async fn bound(driver: &Driver, docker_id: &str) -> Result<DockerNetwork> {
    binding::load(driver, docker_id).await?.ok_or_else(|| {
        invalid(
            "NetworkID",
            format!(
                "Docker network {docker_id} was not created through this plugin (or its record is gone); \
                 delete it and create it again with -d and --ipam-driver set to this plugin"
            ),
        )
    })
}

fn strip_len(address: &str) -> &str {
    address.split('/').next().unwrap_or_default()
}

async fn create_endpoint(driver: &Driver, q: CreateEndpointRequest) -> Result<CreateEndpointReply> {
    if q.EndpointID.is_empty() {
        return Err(invalid("EndpointID", "is empty".into()));
    }
    let b = bound(driver, &q.NetworkID).await?;
    let given = q.Interface.unwrap_or_default();
    if !given.MacAddress.is_empty() {
        return Err(invalid(
            "MacAddress",
            format!(
                "{} was asked for, but netplugin derives each endpoint's MAC from its address; leave --mac-address out",
                given.MacAddress
            ),
        ));
    }
    if driver.find_local(&q.EndpointID, "").is_some() {
        return Err(PluginError::EndpointExists(q.EndpointID.clone()));
    }
    let net_id = master::state::CfgNetworkState::id_for(&b.TenantName, &b.NetworkName);
    let ep_id = master::state::CfgEndpointState::id_for(&net_id, &q.EndpointID);
    let attach = PodAttach {
        tenant: b.TenantName.clone(),
        network: b.NetworkName.clone(),
        group: b.ServiceName.clone(),
        container_id: q.EndpointID.clone(),
        ifname: port_name_for(&ep_id),
        address: strip_len(&given.Address).to_string(),
        handover: true,
        ..PodAttach::default()
    };
    let info = driver.attach(&attach).await?;
    Ok(CreateEndpointReply {
        Interface: Some(interface_reply(&given, &info)),
    })
}

/// What Docker did not give: the MAC, and the addresses it left empty.
fn interface_reply(given: &EndpointInterface, info: &LocalEndpointInfo) -> EndpointInterface {
    let oper = &info.oper;
    EndpointInterface {
        Address: if given.Address.is_empty() {
            format!("{}/{}", oper.ip_address, info.prefix_len)
        } else {
            String::new()
        },
        AddressIPv6: if given.AddressIPv6.is_empty() && !oper.ipv6_address.is_empty() {
            format!("{}/{}", strip_len(&oper.ipv6_address), info.ipv6_prefix_len)
        } else {
            String::new()
        },
        MacAddress: oper.mac_address.clone(),
    }
}

async fn delete_endpoint(driver: &Driver, q: EndpointRequest) -> Result<Value> {
    let (tenant, network) = match driver.find_local(&q.EndpointID, "") {
        Some(l) => (l.oper.tenant, l.oper.network),
        None => {
            let b = bound(driver, &q.NetworkID).await?;
            (b.TenantName, b.NetworkName)
        }
    };
    driver
        .detach(&PodDetach {
            tenant,
            network,
            container_id: q.EndpointID,
            ..PodDetach::default()
        })
        .await?;
    Ok(json!({}))
}

fn local(driver: &Driver, endpoint_id: &str) -> Result<LocalEndpointInfo> {
    driver.find_local(endpoint_id, "").ok_or_else(|| {
        invalid(
            "EndpointID",
            format!("endpoint {endpoint_id} does not exist on this host"),
        )
    })
}

async fn join(driver: &Driver, q: JoinRequest) -> Result<JoinReply> {
    let info = local(driver, &q.EndpointID)?;
    Ok(JoinReply {
        InterfaceName: InterfaceName {
            SrcName: info.oper.intf_name.clone(),
            DstPrefix: INTERFACE_PREFIX.into(),
        },
        DisableGatewayService: info.gateway.is_empty(),
        Gateway: info.gateway,
        GatewayIPv6: info.ipv6_gateway,
    })
}

async fn endpoint_oper_info(driver: &Driver, q: EndpointRequest) -> Result<OperInfoReply> {
    let info = local(driver, &q.EndpointID)?;
    let o = &info.oper;
    let value = [
        ("id", &o.id),
        ("ipAddress", &o.ip_address),
        ("ipv6Address", &o.ipv6_address),
        ("macAddress", &o.mac_address),
        ("endpointGroup", &o.service_name),
        ("ovsPort", &o.ovs_port()),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| (k.to_string(), Value::String(v.clone())))
    .collect();
    Ok(OperInfoReply { Value: value })
}

async fn request_pool(driver: &Driver, q: RequestPoolRequest) -> Result<RequestPoolReply> {
    if q.V6 || q.Pool.contains(':') {
        return Err(invalid(
            "pool",
            "IPv6 pools are not handed to Docker: an endpoint gets its IPv6 address from the \
             Contiv network's ipv6Subnet; create the Docker network without --ipv6 and IPv6 options"
                .into(),
        ));
    }
    if !q.SubPool.is_empty() {
        return Err(invalid(
            "ip-range",
            format!(
                "{} cannot be used: a Contiv endpoint group's ipPool sets the range; leave --ip-range out",
                q.SubPool
            ),
        ));
    }
    let r = binding::resolve(driver, |k| q.Options.get(k).cloned(), &q.Pool).await?;
    let mut data = BTreeMap::new();
    if !r.network.gateway.is_empty() {
        data.insert(
            GATEWAY_ADDRESS.to_string(),
            format!("{}/{}", r.network.gateway, r.network.subnet_len),
        );
    }
    Ok(RequestPoolReply {
        PoolID: r.binding.pool_id(),
        Pool: r.subnet(),
        Data: data,
    })
}

/// The network a pool id names (`<net>.<tenant>` or `<net>:<group>.<tenant>`).
async fn pool_network(driver: &Driver, pool_id: &str) -> Result<Resolved> {
    let (net, tenant) = match pool_id.split_once(':') {
        Some((net, rest)) => (
            net,
            rest.rsplit_once('.').map(|(_, t)| t).unwrap_or_default(),
        ),
        None => pool_id.rsplit_once('.').unwrap_or_default(),
    };
    if net.is_empty() || tenant.is_empty() {
        return Err(invalid(
            "PoolID",
            format!("{pool_id:?} is not a pool of this plugin"),
        ));
    }
    let network = driver.load_network(tenant, net).await?;
    Ok(Resolved {
        binding: DockerNetwork {
            TenantName: tenant.into(),
            NetworkName: net.into(),
            ..DockerNetwork::default()
        },
        network,
        group: None,
    })
}

/// The address Docker records as a network's gateway: the Contiv gateway, or for a network
/// without one the subnet's own address (never given to an endpoint).
fn gateway_of(r: &Resolved) -> String {
    let ip = if r.network.gateway.is_empty() {
        &r.network.subnet_ip
    } else {
        &r.network.gateway
    };
    format!("{ip}/{}", r.network.subnet_len)
}

async fn request_address(driver: &Driver, q: RequestAddressRequest) -> Result<RequestAddressReply> {
    let r = pool_network(driver, &q.PoolID).await?;
    if q.Options.get(REQUEST_ADDRESS_TYPE).map(String::as_str) == Some(GATEWAY_ADDRESS) {
        let gateway = gateway_of(&r);
        if !q.Address.is_empty() && q.Address != strip_len(&gateway) {
            return Err(invalid(
                "gateway",
                format!(
                    "{} is not the gateway {} of network {}; leave --gateway out",
                    q.Address,
                    strip_len(&gateway),
                    r.binding.NetworkName
                ),
            ));
        }
        return Ok(RequestAddressReply {
            Address: gateway,
            Data: BTreeMap::new(),
        });
    }
    let client = driver.netmaster().await?;
    let reply = client
        .alloc_address(&AddressAllocRequest {
            NetworkID: q.PoolID.clone(),
            AddressPool: String::new(),
            PreferredIPv4Address: q.Address.clone(),
        })
        .await?;
    Ok(RequestAddressReply {
        Address: reply.IPv4Address,
        Data: BTreeMap::new(),
    })
}

async fn release_address(driver: &Driver, q: ReleaseAddressRequest) -> Result<Value> {
    let r = pool_network(driver, &q.PoolID).await?;
    if strip_len(&q.Address) == strip_len(&gateway_of(&r)) {
        return Ok(json!({}));
    }
    let client = driver.netmaster().await?;
    client
        .release_address(&AddressReleaseRequest {
            NetworkID: q.PoolID.clone(),
            IPv4Address: strip_len(&q.Address).to_string(),
        })
        .await?;
    Ok(json!({}))
}
