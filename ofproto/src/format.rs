//! ovs-ofctl text rendering (filled in below).
