//! ofproto (work in progress).
