//! Docker mode: container names and labels for this host's endpoints (reference §4.1, docker
//! events). The remote driver protocol never names the container, so netplugin follows the
//! Docker API: on a container `start` (and, at start-up, for every running container) each of
//! its endpoints that is ours is reported to netmaster's `/plugin/updateEndpoint` with the
//! container's name, id and labels. netmaster keeps them on the endpoint: `netctl endpoint
//! inspect` shows the name, the labels make the container a provider of the netctl services
//! they select, and the inline DNS answers the name.
//!
//! Contract: the Docker API being away is not an error; the follower reconnects every
//! [`RETRY`] and replays the running containers each time it (re)connects.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{EventsOptions, ListContainersOptions};
use futures::StreamExt;
use master::endpoint::UpdateEndpointRequest;

use crate::driver::Driver;

/// Pause between attempts to reach the Docker API.
pub const RETRY: Duration = Duration::from_secs(1);
/// One Docker API request's time limit, in seconds.
const TIMEOUT_SECS: u64 = 30;

/// Follow the Docker API at `host` (`unix:///path`) until the task is dropped.
pub async fn follow(driver: Arc<Driver>, host: String) {
    let mut logged = false;
    loop {
        match Docker::connect_with_unix(&host, TIMEOUT_SECS, bollard::API_DEFAULT_VERSION) {
            Ok(docker) => {
                if let Err(e) = follow_once(&driver, &docker).await
                    && !logged
                {
                    tracing::info!(docker = %host, error = %e, "Docker API not available; container names follow when it is");
                    logged = true;
                }
            }
            Err(e) => tracing::warn!(docker = %host, error = %e, "Docker API client"),
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Replay the running containers, then report each `start` until the stream ends.
async fn follow_once(driver: &Driver, docker: &Docker) -> Result<(), bollard::errors::Error> {
    // Subscribe first, so a container starting during the replay is not missed.
    let filters = HashMap::from([
        ("type".to_string(), vec!["container".to_string()]),
        ("event".to_string(), vec!["start".to_string()]),
    ]);
    let mut events = docker.events(Some(EventsOptions {
        filters: Some(filters),
        ..EventsOptions::default()
    }));
    let running = docker
        .list_containers(Some(ListContainersOptions::default()))
        .await?;
    for c in running {
        if let Some(id) = c.id {
            started(driver, docker, &id).await;
        }
    }
    while let Some(event) = events.next().await {
        let event = event?;
        if let Some(id) = event.actor.and_then(|a| a.id) {
            started(driver, docker, &id).await;
        }
    }
    Ok(())
}

/// Report the container's endpoints that are ours.
async fn started(driver: &Driver, docker: &Docker, id: &str) {
    let info = match docker.inspect_container(id, None).await {
        Ok(info) => info,
        Err(e) => {
            tracing::debug!(container = %id, error = %e, "inspect");
            return;
        }
    };
    let name = info
        .name
        .unwrap_or_default()
        .trim_start_matches('/')
        .to_string();
    let labels: BTreeMap<String, String> = info
        .config
        .and_then(|c| c.labels)
        .unwrap_or_default()
        .into_iter()
        .collect();
    let networks = info
        .network_settings
        .and_then(|n| n.networks)
        .unwrap_or_default();
    for settings in networks.into_values() {
        let Some(endpoint) = settings.endpoint_id.filter(|e| !e.is_empty()) else {
            continue;
        };
        let Some(local) = driver.find_local(&endpoint, "") else {
            continue;
        };
        let update = UpdateEndpointRequest {
            IPAddress: local.oper.ip_address.clone(),
            ContainerID: id.to_string(),
            Labels: labels.clone(),
            Tenant: local.oper.tenant.clone(),
            Network: local.oper.network.clone(),
            Event: "start".into(),
            EndpointID: endpoint.clone(),
            EPCommonName: name.clone(),
        };
        let result = match driver.netmaster().await {
            Ok(client) => client
                .update_endpoint(&update)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match result {
            Ok(_) => {
                tracing::info!(container = %name, endpoint = %local.oper.id, "container named on its endpoint")
            }
            Err(e) => {
                tracing::warn!(container = %name, endpoint = %local.oper.id, error = %e, "updateEndpoint")
            }
        }
    }
}
