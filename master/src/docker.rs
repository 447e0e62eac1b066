//! Docker cluster mode (`--mode docker` with `--docker-host`, reference §2.3 and §7.6):
//! netmaster creates a Docker network for every Contiv network and endpoint group created
//! through REST or netctl, and removes it with them, on every Docker engine it is given.
//!
//! The Docker network is named as Contiv names it: `<network or group>` in the `default`
//! tenant, `<name>/<tenant>` in any other. It uses netplugin (`--name`, default `netplugin`)
//! as network and IPAM driver, with the subnet of the Contiv network and the options netplugin
//! resolves it by (`tenant`, `network`, `group`; both as driver and as IPAM options), so
//! `docker run --net <group>` lands a container in that group with its policies, and
//! `docker run --ip` works.
//!
//! Contract: [`DockerNetworks::create`] succeeds when every engine has the network (one that
//! exists is left alone); a failure names the engine, and the caller undoes the Contiv object.
//! [`DockerNetworks::remove`] succeeds when no engine has it any more.

use std::collections::HashMap;

use bollard::Docker;
use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
use bollard::query_parameters::ListNetworksOptions;

use crate::state::CfgNetworkState;

/// How long one Docker API request may take, in seconds.
const TIMEOUT_SECS: u64 = 60;

/// A failure talking to a Docker engine.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error("--docker-host {0:?}: only unix:///path is supported")]
    Host(String),
    #[error("Docker engine at {host}: cannot {what}: {source}")]
    Api {
        host: String,
        what: String,
        #[source]
        source: bollard::errors::Error,
    },
}

/// What a Docker network is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSpec {
    pub tenant: String,
    pub network: String,
    /// The endpoint group; empty for a network's own Docker network.
    pub group: String,
    /// `subnet/len` of the Contiv network.
    pub subnet: String,
}

impl NetworkSpec {
    /// The Docker network's name.
    pub fn name(&self) -> String {
        let base = if self.group.is_empty() {
            &self.network
        } else {
            &self.group
        };
        docker_name(&self.tenant, base)
    }

    /// The options netplugin resolves the network by (driver and IPAM alike).
    pub fn options(&self) -> HashMap<String, String> {
        let mut o = HashMap::from([
            ("tenant".to_string(), self.tenant.clone()),
            ("network".to_string(), self.network.clone()),
        ]);
        if !self.group.is_empty() {
            o.insert("group".into(), self.group.clone());
        }
        o
    }

    /// The spec of a Contiv network or group from the network's state.
    pub fn of(net: &CfgNetworkState, group: &str) -> NetworkSpec {
        NetworkSpec {
            tenant: net.tenant.clone(),
            network: net.network_name.clone(),
            group: group.to_string(),
            subnet: format!("{}/{}", net.subnet_ip, net.subnet_len),
        }
    }
}

/// `<name>` in the default tenant, `<name>/<tenant>` otherwise.
pub fn docker_name(tenant: &str, name: &str) -> String {
    if tenant == "default" {
        name.to_string()
    } else {
        format!("{name}/{tenant}")
    }
}

/// The Docker engines of the cluster and the driver name. Cheap to clone.
#[derive(Clone)]
pub struct DockerNetworks {
    engines: Vec<String>,
    driver: String,
}

impl std::fmt::Debug for DockerNetworks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerNetworks")
            .field("engines", &self.engines)
            .field("driver", &self.driver)
            .finish()
    }
}

impl DockerNetworks {
    /// The engines at `hosts` (`unix:///path`). An engine need not be up yet: each operation
    /// connects anew.
    pub fn connect(hosts: &[String], driver: &str) -> Result<DockerNetworks, DockerError> {
        if let Some(bad) = hosts.iter().find(|h| !h.starts_with("unix:///")) {
            return Err(DockerError::Host(bad.clone()));
        }
        Ok(DockerNetworks {
            engines: hosts.to_vec(),
            driver: driver.to_string(),
        })
    }

    fn client(host: &str) -> Result<Docker, DockerError> {
        Docker::connect_with_unix(host, TIMEOUT_SECS, bollard::API_DEFAULT_VERSION).map_err(
            |source| DockerError::Api {
                host: host.to_string(),
                what: "connect".into(),
                source,
            },
        )
    }

    /// The id of the network called exactly `name` on an engine.
    async fn find(host: &str, docker: &Docker, name: &str) -> Result<Option<String>, DockerError> {
        let options = ListNetworksOptions {
            filters: Some(HashMap::from([(
                "name".to_string(),
                vec![name.to_string()],
            )])),
        };
        let nets = docker
            .list_networks(Some(options))
            .await
            .map_err(|source| DockerError::Api {
                host: host.to_string(),
                what: format!("list networks named {name}"),
                source,
            })?;
        Ok(nets
            .into_iter()
            .find(|n| n.name.as_deref() == Some(name))
            .and_then(|n| n.id))
    }

    /// Create the Docker network on every engine that does not have it.
    pub async fn create(&self, spec: &NetworkSpec) -> Result<(), DockerError> {
        let name = spec.name();
        for host in &self.engines {
            let docker = &Self::client(host)?;
            if Self::find(host, docker, &name).await?.is_some() {
                continue;
            }
            let request = NetworkCreateRequest {
                name: name.clone(),
                driver: Some(self.driver.clone()),
                options: Some(spec.options()),
                ipam: Some(Ipam {
                    driver: Some(self.driver.clone()),
                    config: Some(vec![IpamConfig {
                        subnet: Some(spec.subnet.clone()),
                        ..IpamConfig::default()
                    }]),
                    options: Some(spec.options()),
                }),
                ..NetworkCreateRequest::default()
            };
            docker
                .create_network(request)
                .await
                .map_err(|source| DockerError::Api {
                    host: host.clone(),
                    what: format!("create network {name}"),
                    source,
                })?;
            tracing::info!(engine = %host, network = %name, "Docker network created");
        }
        Ok(())
    }

    /// Remove the Docker network `name` from every engine that has it.
    pub async fn remove(&self, name: &str) -> Result<(), DockerError> {
        for host in &self.engines {
            let docker = &Self::client(host)?;
            let Some(id) = Self::find(host, docker, name).await? else {
                continue;
            };
            docker
                .remove_network(&id)
                .await
                .map_err(|source| DockerError::Api {
                    host: host.clone(),
                    what: format!("remove network {name}"),
                    source,
                })?;
            tracing::info!(engine = %host, network = %name, "Docker network removed");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_options_follow_contiv() {
        let mut spec = NetworkSpec {
            tenant: "default".into(),
            network: "n1".into(),
            group: String::new(),
            subnet: "10.1.0.0/24".into(),
        };
        assert_eq!(spec.name(), "n1");
        spec.group = "web".into();
        assert_eq!(spec.name(), "web");
        assert_eq!(spec.options()["group"], "web");
        spec.tenant = "t1".into();
        assert_eq!(spec.name(), "web/t1");
        assert_eq!(spec.options()["tenant"], "t1");
        assert!(DockerNetworks::connect(&["tcp://h:2375".into()], "netplugin").is_err());
    }
}
