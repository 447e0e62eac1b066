//! plugin (work in progress).
