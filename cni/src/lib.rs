//! CNI wire types (work in progress).
