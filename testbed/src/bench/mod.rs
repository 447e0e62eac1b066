//! Benchmarks that measure our parts against the reference tool in the same run and report
//! the ratio, as one JSON line each.

pub mod convergence;
pub mod flow_push;
pub mod memory;
pub mod netpol;
pub mod pod_setup;
pub mod scale;
pub mod services;

/// `count` services `svc0`, `svc1`, … on `network` of the default tenant, each selecting
/// `selector` (`key=value`) with its own port (1000 + i → 8080/TCP), created with `netctl` as a
/// user would.
pub(crate) fn create_services(
    cluster: &crate::demo::Cluster,
    network: &str,
    selector: &str,
    count: usize,
) -> anyhow::Result<()> {
    use anyhow::Context;
    for i in 0..count {
        cluster
            .netctl(&[
                "service",
                "create",
                &format!("svc{i}"),
                "-network",
                network,
                "-selector",
                selector,
                "-port",
                &format!("{}:8080:TCP", 1000 + i),
            ])
            .with_context(|| format!("creating service svc{i}"))?;
    }
    Ok(())
}
