//! Tables declared as data: an id, a name for humans, and what happens to a packet no flow
//! matches. The miss behaviour becomes a priority-0 match-all flow the controller owns like any
//! other desired flow, so a restarted switch gets its misses back with everything else.

/// What a table does with a packet no flow matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// Drop it (an empty instruction list).
    Drop,
    /// Continue in another table.
    Goto(u8),
    /// Hand it to OVS's normal L2 switching.
    Normal,
    /// Send it to the controller.
    Controller,
}

/// One table of a bridge's pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSpec {
    pub id: u8,
    pub name: &'static str,
    pub miss: Miss,
}

/// Priority of the miss flow every declared table gets.
pub const MISS_PRIORITY: u16 = 0;

/// Category of the cookie of miss flows (see [`crate::Cookie`]).
pub const MISS_CATEGORY: u8 = 0xff;
