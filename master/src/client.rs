//! A REST client for netmaster, shared by netctl and netplugin.
//!
//! Object calls are generic over [`Object`]: `client.post(&network)` posts to
//! `/api/v1/networks/<tenant:name>/`. REST errors keep the status and the server's message (which
//! names the field and the rule); transport failures say which URL could not be reached.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::endpoint::{
    AddressAllocRequest, AddressAllocResponse, AddressReleaseRequest, CreateEndpointRequest,
    DeleteEndpointRequest, EndpointResponse, UpdateEndpointRequest, UpdateEndpointResponse,
};
use crate::model::Object;
use crate::state::CfgEndpointState;

/// What went wrong talking to netmaster.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("netmaster URL {0:?} must start with http:// or https://")]
    InvalidUrl(String),
    #[error("cannot reach netmaster at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// netmaster answered with an error status; `message` is its body.
    #[error("{message}")]
    Api { status: u16, message: String },
    #[error("unexpected reply from {url}: {reason}")]
    Decode { url: String, reason: String },
    /// The CA file (`--cacert`) cannot be used.
    #[error("{0}")]
    Ca(String),
}

impl ClientError {
    /// HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

pub type ClientResult<T> = Result<T, ClientError>;

/// A netmaster REST client. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    base: String,
    http: crate::https::HttpClient,
    /// `Authorization` header value (`Bearer <token>`).
    authorization: Option<Arc<str>>,
}

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

impl Client {
    /// `base` is like `http://netmaster:9999`; no token, no CA (https refused).
    pub fn new(base: &str) -> ClientResult<Self> {
        Client::with_auth(base, None, None)
    }

    /// A client sending `token` as a bearer token and checking `https://` servers against the
    /// certificates in `ca` (`cacert_flag` names the flag in errors).
    pub fn with_auth(base: &str, token: Option<&str>, ca: Option<&Path>) -> ClientResult<Self> {
        Client::with_auth_flag(base, token, ca, "--cacert")
    }

    /// As [`Client::with_auth`], naming the CA flag `cacert_flag` in errors.
    pub fn with_auth_flag(
        base: &str,
        token: Option<&str>,
        ca: Option<&Path>,
        cacert_flag: &'static str,
    ) -> ClientResult<Self> {
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::InvalidUrl(base.to_string()));
        }
        let tls = match ca {
            Some(path) => Some(
                crate::auth::client_config(cacert_flag, path)
                    .map_err(|e| ClientError::Ca(e.to_string()))?,
            ),
            None => None,
        };
        let http =
            crate::https::HttpClient::new(tls, TIMEOUT).map_err(|e| ClientError::Unreachable {
                url: base.to_string(),
                reason: e.to_string(),
            })?;
        let authorization = token
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| Arc::from(format!("Bearer {t}")));
        Ok(Client {
            base: base.trim_end_matches('/').to_string(),
            http,
            authorization,
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    async fn call<B: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&B>,
    ) -> ClientResult<R> {
        let url = format!("{}{path}", self.base);
        let mut headers = Vec::with_capacity(2);
        let payload = match body {
            Some(b) => {
                headers.push(("content-type", "application/json"));
                serde_json::to_vec(b).map_err(|e| ClientError::Decode {
                    url: url.clone(),
                    reason: e.to_string(),
                })?
            }
            None => Vec::new(),
        };
        if let Some(auth) = &self.authorization {
            headers.push(("authorization", auth));
        }
        let reply = self
            .http
            .send(method, &url, &headers, payload.into())
            .await
            .map_err(|reason| ClientError::Unreachable {
                url: url.clone(),
                reason,
            })?;
        if reply.status != 200 {
            return Err(ClientError::Api {
                status: reply.status,
                message: String::from_utf8_lossy(&reply.body).trim_end().to_string(),
            });
        }
        serde_json::from_slice(&reply.body).map_err(|e| ClientError::Decode {
            url,
            reason: e.to_string(),
        })
    }

    async fn get_json<R: DeserializeOwned>(&self, path: &str) -> ClientResult<R> {
        self.call::<(), R>("GET", path, None).await
    }

    async fn post_json<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> ClientResult<R> {
        self.call("POST", path, Some(body)).await
    }

    /// All objects of a kind.
    pub async fn list<T: Object>(&self) -> ClientResult<Vec<T>> {
        self.get_json(&format!("/api/v1/{}/", T::PLURAL)).await
    }

    /// One object.
    pub async fn get<T: Object>(&self, key: &str) -> ClientResult<T> {
        self.get_json(&format!("/api/v1/{}/{key}/", T::PLURAL))
            .await
    }

    /// Create or update an object (its key is derived from its fields); returns the stored object.
    pub async fn post<T: Object>(&self, obj: &T) -> ClientResult<T> {
        let key = obj.derived_key();
        self.post_json(&format!("/api/v1/{}/{key}/", T::PLURAL), obj)
            .await
    }

    pub async fn delete<T: Object>(&self, key: &str) -> ClientResult<()> {
        let _: Value = self
            .call::<(), Value>("DELETE", &format!("/api/v1/{}/{key}/", T::PLURAL), None)
            .await?;
        Ok(())
    }

    /// `{"Config": ..., "Oper": ...}`.
    pub async fn inspect<T: Object>(&self, key: &str) -> ClientResult<Value> {
        self.get_json(&format!("/api/v1/inspect/{}/{key}/", T::PLURAL))
            .await
    }

    pub async fn inspect_endpoint(&self, key: &str) -> ClientResult<Value> {
        self.get_json(&format!("/api/v1/inspect/endpoints/{key}/"))
            .await
    }

    pub async fn version(&self) -> ClientResult<Value> {
        self.get_json("/version").await
    }

    pub async fn info(&self) -> ClientResult<Value> {
        self.get_json("/info").await
    }

    /// The netplugin hosts registered now (`/debug/netplugins`): host name, debug listener
    /// URL, agent RPC address, VTEP.
    pub async fn netplugins(&self) -> ClientResult<Vec<Value>> {
        self.get_json("/debug/netplugins").await
    }

    pub async fn alloc_address(
        &self,
        req: &AddressAllocRequest,
    ) -> ClientResult<AddressAllocResponse> {
        self.post_json("/plugin/allocAddress", req).await
    }

    pub async fn release_address(&self, req: &AddressReleaseRequest) -> ClientResult<()> {
        let _: Value = self.post_json("/plugin/releaseAddress", req).await?;
        Ok(())
    }

    pub async fn create_endpoint(
        &self,
        req: &CreateEndpointRequest,
    ) -> ClientResult<CfgEndpointState> {
        Ok(self.create_endpoint_reserving(req).await?.EndpointConfig)
    }

    /// createEndpoint, answering the host's reserve too (when the request asks for one).
    pub async fn create_endpoint_reserving(
        &self,
        req: &CreateEndpointRequest,
    ) -> ClientResult<EndpointResponse> {
        self.post_json("/plugin/createEndpoint", req).await
    }

    pub async fn delete_endpoint(
        &self,
        req: &DeleteEndpointRequest,
    ) -> ClientResult<CfgEndpointState> {
        Ok(self.delete_endpoint_reserving(req).await?.EndpointConfig)
    }

    /// deleteEndpoint, answering the host's reserve too (when the request gives its size).
    pub async fn delete_endpoint_reserving(
        &self,
        req: &DeleteEndpointRequest,
    ) -> ClientResult<EndpointResponse> {
        self.post_json("/plugin/deleteEndpoint", req).await
    }

    pub async fn update_endpoint(
        &self,
        req: &UpdateEndpointRequest,
    ) -> ClientResult<UpdateEndpointResponse> {
        self.post_json("/plugin/updateEndpoint", req).await
    }
}
