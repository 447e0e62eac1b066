//! The JSON bodies of Docker's remote network driver and remote IPAM driver protocols
//! (libnetwork's `remote.md` and `ipam.md`), with their Go field names. Every field is
//! optional on the wire (`#[serde(default)]`): Docker leaves out what it does not know.

#![allow(non_snake_case)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Go encodes an empty map or slice as `null`: read it as empty.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The content type of plugin replies.
pub const CONTENT_TYPE: &str = "application/vnd.docker.plugins.v1.2+json";

/// The driver option map inside `CreateNetwork`'s `Options` (`docker network create -o`).
pub const GENERIC_OPTIONS: &str = "com.docker.network.generic";
/// `RequestAddress` option naming the address a network gateway asks for.
pub const REQUEST_ADDRESS_TYPE: &str = "RequestAddressType";
/// Its value for the gateway (and the key of a gateway in `RequestPool`'s `Data`).
pub const GATEWAY_ADDRESS: &str = "com.docker.network.gateway";

/// A failure the driver understood the request for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ErrorReply {
    pub Err: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ActivateReply {
    #[serde(deserialize_with = "nullable")]
    pub Implements: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct CapabilitiesReply {
    pub Scope: String,
    pub ConnectivityScope: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct IpamData {
    pub AddressSpace: String,
    pub Pool: String,
    pub Gateway: String,
    #[serde(deserialize_with = "nullable")]
    pub AuxAddresses: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct CreateNetworkRequest {
    pub NetworkID: String,
    #[serde(deserialize_with = "nullable")]
    pub Options: BTreeMap<String, Value>,
    #[serde(deserialize_with = "nullable")]
    pub IPv4Data: Vec<IpamData>,
    #[serde(deserialize_with = "nullable")]
    pub IPv6Data: Vec<IpamData>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct NetworkRequest {
    pub NetworkID: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct EndpointInterface {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub Address: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub AddressIPv6: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub MacAddress: String,
}

impl EndpointInterface {
    pub fn is_empty(&self) -> bool {
        self.Address.is_empty() && self.AddressIPv6.is_empty() && self.MacAddress.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct CreateEndpointRequest {
    pub NetworkID: String,
    pub EndpointID: String,
    pub Interface: Option<EndpointInterface>,
    #[serde(deserialize_with = "nullable")]
    pub Options: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CreateEndpointReply {
    /// Only what Docker did not supply (it refuses values it sent itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub Interface: Option<EndpointInterface>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct EndpointRequest {
    pub NetworkID: String,
    pub EndpointID: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct JoinRequest {
    pub NetworkID: String,
    pub EndpointID: String,
    pub SandboxKey: String,
    #[serde(deserialize_with = "nullable")]
    pub Options: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct InterfaceName {
    pub SrcName: String,
    pub DstPrefix: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct JoinReply {
    pub InterfaceName: InterfaceName,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub Gateway: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub GatewayIPv6: String,
    /// No gateway: do not give the container Docker's own default-gateway network either.
    pub DisableGatewayService: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct OperInfoReply {
    #[serde(deserialize_with = "nullable")]
    pub Value: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct AddressSpacesReply {
    pub LocalDefaultAddressSpace: String,
    pub GlobalDefaultAddressSpace: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct IpamCapabilitiesReply {
    pub RequiresMACAddress: bool,
    pub RequiresRequestReplay: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RequestPoolRequest {
    pub AddressSpace: String,
    pub Pool: String,
    pub SubPool: String,
    #[serde(deserialize_with = "nullable")]
    pub Options: BTreeMap<String, String>,
    pub V6: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RequestPoolReply {
    pub PoolID: String,
    pub Pool: String,
    #[serde(deserialize_with = "nullable")]
    pub Data: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct PoolRequest {
    pub PoolID: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RequestAddressRequest {
    pub PoolID: String,
    pub Address: String,
    #[serde(deserialize_with = "nullable")]
    pub Options: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RequestAddressReply {
    pub Address: String,
    #[serde(deserialize_with = "nullable")]
    pub Data: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ReleaseAddressRequest {
    pub PoolID: String,
    pub Address: String,
}
