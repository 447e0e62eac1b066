//! Endpoint-group ids, persisted (Contiv used a per-process counter that restarted at 1, §2.6).
//!
//! Ids live in OpenFlow metadata bits 1-15 / 16-30, so 1..=32767 are usable. The pool is a bitset
//! (set = used) stored at `/contiv.io/state/epg-ids/global` and updated in the same transaction as the
//! EPG that takes or frees an id.

use serde::{Deserialize, Serialize};

use super::bitset::Bitset;
use crate::error::{Error, Result};

/// Largest id that fits the 15-bit metadata field.
pub const MAX_EPG_ID: u32 = 32767;

/// The persisted EPG id pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpgIdPool {
    pub id: String,
    #[serde(rename = "usedIds")]
    pub used: Bitset,
}

impl Default for EpgIdPool {
    fn default() -> Self {
        let mut used = Bitset::new(u64::from(MAX_EPG_ID) + 1);
        used.set(0);
        EpgIdPool {
            id: "global".into(),
            used,
        }
    }
}

impl EpgIdPool {
    pub fn allocate(&mut self) -> Result<u32> {
        let id = self
            .used
            .next_clear(1)
            .ok_or_else(|| Error::conflict("no endpoint group ids available"))?;
        self.used.set(id);
        Ok(id as u32)
    }

    pub fn release(&mut self, id: u32) {
        if id != 0 {
            self.used.clear(u64::from(id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_start_at_one_and_are_reused() {
        let mut p = EpgIdPool::default();
        assert_eq!(p.allocate().unwrap(), 1);
        assert_eq!(p.allocate().unwrap(), 2);
        p.release(1);
        assert_eq!(p.allocate().unwrap(), 1);
        let json = serde_json::to_string(&p).unwrap();
        let back: EpgIdPool = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
    }
}
