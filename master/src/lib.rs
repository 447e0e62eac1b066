//! master (work in progress).
