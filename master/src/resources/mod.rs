//! Allocatable resources: bitsets, tag pools, IPv4/IPv6 addresses, EPG ids.
//!
//! Everything here is pure data manipulation; callers read the records, allocate, and write the
//! records back in the same store transaction as the state that uses the allocation.

pub mod bitset;
pub mod epg_id;
pub mod ipv4;
pub mod ipv6;
pub mod tags;

pub use bitset::Bitset;
