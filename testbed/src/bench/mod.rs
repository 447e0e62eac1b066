//! Benchmarks that measure our parts against the reference tool in the same run and report
//! the ratio, as one JSON line each.

pub mod convergence;
pub mod flow_push;
pub mod netpol;
pub mod pod_setup;
pub mod scale;
pub mod services;
