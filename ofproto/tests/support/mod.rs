//! Shared support for the differential tests against Open vSwitch: a recording switch that
//! captures what `ovs-ofctl` sends, a minimal OpenFlow client to read a bridge's flow table, the
//! flow corpus and its allow-list, and wrappers for `ovs-ofctl ofp-print` and our `ofp-print`.
//!
//! Each test binary uses a different subset, hence the `dead_code` allowance.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod corpus;
pub mod of_client;
pub mod recording_switch;
pub mod tools;
