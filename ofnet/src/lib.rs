//! ofnet (work in progress).
