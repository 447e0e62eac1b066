//! Netlink plumbing (in progress).
