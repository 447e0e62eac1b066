//! VLAN and VXLAN tag pools (reference §1.1 "Resources").
//!
//! The VLAN pool is a 4096-bit set in which a set bit means *free*; bits 0 and 4095 are never free.
//! The VXLAN pool is a 16384-bit set indexed by `vni - FreeVXLANsStart` (`FreeVXLANsStart = min - 1`),
//! and each VXLAN network also takes a host-local VLAN from `LocalVLANs` (1-4094). Records and their
//! keys are Contiv's (`/contiv.io/state/auto-vlan/global` ...), so existing tools can read them.

use serde::{Deserialize, Serialize};

use super::bitset::Bitset;
use crate::error::{Error, Result};

pub const VLAN_BITS: u64 = 4096;
pub const VXLAN_BITS: u64 = 16384;
pub const MAX_VLAN: u32 = 4095;
pub const MAX_VXLAN: u32 = 65535;
pub const MAX_VXLAN_SPAN: u32 = 16000;

/// Which kind of tag a range describes (limits differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagKind {
    Vlan,
    Vxlan,
}

impl TagKind {
    fn name(self) -> &'static str {
        match self {
            TagKind::Vlan => "vlans",
            TagKind::Vxlan => "vxlans",
        }
    }
}

/// An inclusive tag range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagRange {
    pub min: u32,
    pub max: u32,
}

/// Parse `"a-b"` (VLAN: comma-separated list allowed; VXLAN: exactly one range) with the reference's
/// limits: min ≥ 1, min ≤ max, VLAN max ≤ 4095, VXLAN max ≤ 65535 and span ≤ 16000.
pub fn parse_tag_ranges(text: &str, kind: TagKind) -> Result<Vec<TagRange>> {
    let field = kind.name();
    let parts: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() {
        return Err(Error::invalid(
            field,
            "range is empty; expected \"min-max\"",
        ));
    }
    if kind == TagKind::Vxlan && parts.len() > 1 {
        return Err(Error::invalid(field, "only one vxlan range is supported"));
    }
    let mut out = Vec::new();
    for part in parts {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let parse = |s: &str| {
            s.trim().parse::<u32>().map_err(|_| {
                Error::invalid(
                    field,
                    format!("{part:?} is not a range of numbers \"min-max\""),
                )
            })
        };
        let (min, max) = (parse(a)?, parse(b)?);
        if min < 1 {
            return Err(Error::invalid(
                field,
                format!("range {part:?} must start at 1 or above"),
            ));
        }
        if min > max {
            return Err(Error::invalid(
                field,
                format!("range {part:?} has min greater than max"),
            ));
        }
        match kind {
            TagKind::Vlan if max > MAX_VLAN => {
                return Err(Error::invalid(
                    field,
                    format!("range {part:?} exceeds the largest vlan {MAX_VLAN}"),
                ));
            }
            TagKind::Vxlan if max > MAX_VXLAN => {
                return Err(Error::invalid(
                    field,
                    format!("range {part:?} exceeds the largest vxlan {MAX_VXLAN}"),
                ));
            }
            TagKind::Vxlan if max - min > MAX_VXLAN_SPAN => {
                return Err(Error::invalid(
                    field,
                    format!("range {part:?} spans more than {MAX_VXLAN_SPAN} ids"),
                ));
            }
            _ => {}
        }
        out.push(TagRange { min, max });
    }
    Ok(out)
}

/// Format tags as `"1-3, 7"` (the global object's `vlansInUse` / `vxlansInUse`).
pub fn format_tag_list(tags: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < tags.len() {
        let start = tags[i];
        let mut end = start;
        while i + 1 < tags.len() && tags[i + 1] == end + 1 {
            i += 1;
            end = tags[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(", ")
}

/// `/contiv.io/state/auto-vlan/global`: the configured VLANs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoVlanCfg {
    pub id: String,
    pub vlans: Bitset,
}

/// `/contiv.io/oper/auto-vlan/global`: the VLANs still free.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoVlanOper {
    pub id: String,
    #[serde(rename = "freeVLANs")]
    pub free_vlans: Bitset,
}

/// `/contiv.io/state/auto-vxlan/global`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoVxlanCfg {
    pub id: String,
    pub vxlans: Bitset,
    #[serde(rename = "LocalVLANs")]
    pub local_vlans: Bitset,
    #[serde(rename = "FreeVXLANsStart")]
    pub free_vxlans_start: u32,
}

/// `/contiv.io/oper/auto-vxlan/global`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoVxlanOper {
    pub id: String,
    #[serde(rename = "freeVXLANs")]
    pub free_vxlans: Bitset,
    #[serde(rename = "freeLocalVLANs")]
    pub free_local_vlans: Bitset,
}

/// The VLAN pool: configured set plus free set.
#[derive(Debug, Clone, PartialEq)]
pub struct VlanPool {
    pub cfg: AutoVlanCfg,
    pub oper: AutoVlanOper,
}

fn vlan_bits(ranges: &[TagRange]) -> Bitset {
    let mut b = Bitset::new(VLAN_BITS);
    for r in ranges {
        b.set_range(u64::from(r.min), u64::from(r.max));
    }
    b.clear(0);
    b.clear(VLAN_BITS - 1);
    b
}

impl VlanPool {
    /// A pool with every VLAN of `ranges` free.
    pub fn new(ranges: &[TagRange]) -> Self {
        let bits = vlan_bits(ranges);
        VlanPool {
            cfg: AutoVlanCfg {
                id: "global".into(),
                vlans: bits.clone(),
            },
            oper: AutoVlanOper {
                id: "global".into(),
                free_vlans: bits,
            },
        }
    }

    /// Take `requested` (0 = first free).
    pub fn allocate(&mut self, requested: u32) -> Result<u32> {
        if requested != 0 {
            if !self.oper.free_vlans.test(u64::from(requested)) {
                return Err(Error::conflict(format!(
                    "requested vlan not available - vlan:{requested}"
                )));
            }
            self.oper.free_vlans.clear(u64::from(requested));
            return Ok(requested);
        }
        let v = self.oper.free_vlans.next_set(1).ok_or_else(|| {
            Error::conflict(format!(
                "no vlans available: each vlan network takes one tag of the global vlans \
                     range and all {} are in use; widen the range (at most 1-4094)",
                self.cfg.vlans.count()
            ))
        })?;
        self.oper.free_vlans.clear(v);
        Ok(v as u32)
    }

    /// Return a VLAN to the pool (ignored if outside the configured range).
    pub fn release(&mut self, vlan: u32) {
        if self.cfg.vlans.test(u64::from(vlan)) {
            self.oper.free_vlans.set(u64::from(vlan));
        }
    }

    /// VLANs configured but not free.
    pub fn in_use(&self) -> Vec<u32> {
        self.cfg
            .vlans
            .ones()
            .filter(|&v| !self.oper.free_vlans.test(v))
            .map(|v| v as u32)
            .collect()
    }

    /// Replace the configured ranges, keeping in-use VLANs allocated. Every in-use VLAN must fall
    /// inside the new ranges.
    pub fn resize(&self, ranges: &[TagRange]) -> Result<Self> {
        let in_use = self.in_use();
        let mut next = VlanPool::new(ranges);
        for v in &in_use {
            if !next.cfg.vlans.test(u64::from(*v)) {
                return Err(Error::conflict(format!(
                    "cannot update the vlan range due to existing vlans {}",
                    format_tag_list(&in_use)
                )));
            }
            next.oper.free_vlans.clear(u64::from(*v));
        }
        Ok(next)
    }
}

/// The VXLAN pool and the host-local VLANs that carry VXLAN networks on the bridge.
#[derive(Debug, Clone, PartialEq)]
pub struct VxlanPool {
    pub cfg: AutoVxlanCfg,
    pub oper: AutoVxlanOper,
}

impl VxlanPool {
    /// A pool with every VNI of `range` free, and local VLANs 1-4094 free.
    pub fn new(range: TagRange) -> Self {
        let start = range.min - 1;
        let mut vx = Bitset::new(VXLAN_BITS);
        vx.set_range(u64::from(range.min - start), u64::from(range.max - start));
        let local = vlan_bits(&[TagRange { min: 1, max: 4094 }]);
        VxlanPool {
            cfg: AutoVxlanCfg {
                id: "global".into(),
                vxlans: vx.clone(),
                local_vlans: local.clone(),
                free_vxlans_start: start,
            },
            oper: AutoVxlanOper {
                id: "global".into(),
                free_vxlans: vx,
                free_local_vlans: local,
            },
        }
    }

    /// Take a VNI (`requested`, or first free when 0) plus a local VLAN. Returns `(vni, local_vlan)`.
    pub fn allocate(&mut self, requested: u32) -> Result<(u32, u32)> {
        let start = self.cfg.free_vxlans_start;
        let index = if requested != 0 {
            if requested <= start {
                return Err(Error::conflict(format!(
                    "requested vxlan is out of range - vxlan:{requested}"
                )));
            }
            let index = u64::from(requested - start);
            if !self.oper.free_vxlans.test(index) {
                return Err(Error::conflict(format!(
                    "requested vxlan not available - vxlan:{requested}"
                )));
            }
            index
        } else {
            self.oper.free_vxlans.next_set(0).ok_or_else(|| {
                Error::conflict(format!(
                    "no vxlans available: all {} VNIs of the global vxlans range are in use; \
                         widen the range (a span of at most {MAX_VXLAN_SPAN})",
                    self.cfg.vxlans.count()
                ))
            })?
        };
        let local = self.oper.free_local_vlans.next_set(1).ok_or_else(|| {
            let all = self.cfg.local_vlans.count();
            Error::conflict(format!(
                "no local vlans available: each vxlan network takes one of the {all} \
                     host-local vlans that carry it on the vxlan bridge, and all are in use; \
                     at most {all} vxlan networks can exist"
            ))
        })?;
        self.oper.free_vxlans.clear(index);
        self.oper.free_local_vlans.clear(local);
        Ok((index as u32 + start, local as u32))
    }

    /// Return a VNI and its local VLAN.
    pub fn release(&mut self, vni: u32, local_vlan: u32) {
        let start = self.cfg.free_vxlans_start;
        if vni > start && self.cfg.vxlans.test(u64::from(vni - start)) {
            self.oper.free_vxlans.set(u64::from(vni - start));
        }
        if self.cfg.local_vlans.test(u64::from(local_vlan)) {
            self.oper.free_local_vlans.set(u64::from(local_vlan));
        }
    }

    /// VNIs configured but not free.
    pub fn in_use(&self) -> Vec<u32> {
        let start = self.cfg.free_vxlans_start;
        self.cfg
            .vxlans
            .ones()
            .filter(|&i| !self.oper.free_vxlans.test(i))
            .map(|i| i as u32 + start)
            .collect()
    }

    /// Replace the configured range, keeping in-use VNIs and local VLANs allocated.
    pub fn resize(&self, range: TagRange) -> Result<Self> {
        let in_use = self.in_use();
        let mut next = VxlanPool::new(range);
        let start = next.cfg.free_vxlans_start;
        for vni in &in_use {
            if *vni < range.min || *vni > range.max {
                return Err(Error::conflict(format!(
                    "cannot update the vxlan range due to existing vxlans {}",
                    format_tag_list(&in_use)
                )));
            }
            next.oper.free_vxlans.clear(u64::from(vni - start));
        }
        next.oper.free_local_vlans = self.oper.free_local_vlans.clone();
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(min: u32, max: u32) -> TagRange {
        TagRange { min, max }
    }

    #[test]
    fn parses_ranges_with_reference_limits() {
        assert_eq!(
            parse_tag_ranges("1-4094", TagKind::Vlan).unwrap(),
            vec![r(1, 4094)]
        );
        assert_eq!(
            parse_tag_ranges("1-10,20-30", TagKind::Vlan).unwrap(),
            vec![r(1, 10), r(20, 30)]
        );
        assert!(parse_tag_ranges("0-10", TagKind::Vlan).is_err());
        assert!(parse_tag_ranges("10-5", TagKind::Vlan).is_err());
        assert!(parse_tag_ranges("1-4096", TagKind::Vlan).is_err());
        assert!(parse_tag_ranges("1-16002", TagKind::Vxlan).is_err());
        assert!(parse_tag_ranges("1-10,20-30", TagKind::Vxlan).is_err());
        assert!(parse_tag_ranges("60000-65536", TagKind::Vxlan).is_err());
        assert!(parse_tag_ranges("", TagKind::Vlan).is_err());
    }

    #[test]
    fn vlan_pool_allocates_requested_and_first_free() {
        let mut p = VlanPool::new(&[r(1, 4094)]);
        assert_eq!(p.allocate(0).unwrap(), 1);
        assert_eq!(p.allocate(100).unwrap(), 100);
        assert!(p.allocate(100).is_err());
        assert!(p.allocate(4095).is_err());
        assert_eq!(p.in_use(), vec![1, 100]);
        p.release(1);
        assert_eq!(p.allocate(0).unwrap(), 1);
    }

    #[test]
    fn vlan_resize_must_cover_in_use() {
        let mut p = VlanPool::new(&[r(1, 4094)]);
        for v in [10, 11, 300] {
            p.allocate(v).unwrap();
        }
        let q = p.resize(&[r(9, 301)]).unwrap();
        assert_eq!(q.in_use(), vec![10, 11, 300]);
        assert!(q.clone().allocate(10).is_err());
        assert!(q.clone().allocate(302).is_err());
        assert!(q.resize(&[r(50, 301)]).is_err());
        assert!(q.resize(&[r(1, 200)]).is_err());
        assert!(q.resize(&[r(1, 800)]).is_ok());
    }

    #[test]
    fn vxlan_pool_offsets_by_range_start() {
        let mut p = VxlanPool::new(r(1000, 2000));
        assert_eq!(p.cfg.free_vxlans_start, 999);
        assert_eq!(p.allocate(0).unwrap(), (1000, 1));
        assert_eq!(p.allocate(1500).unwrap(), (1500, 2));
        assert!(p.allocate(999).is_err());
        assert!(p.allocate(1500).is_err());
        assert_eq!(p.in_use(), vec![1000, 1500]);
        p.release(1000, 1);
        assert_eq!(p.allocate(0).unwrap(), (1000, 1));
        assert!(p.resize(r(1200, 3000)).is_err());
        let q = p.resize(r(500, 3000)).unwrap();
        assert_eq!(q.in_use(), vec![1000, 1500]);
    }

    #[test]
    fn formats_tag_lists() {
        assert_eq!(format_tag_list(&[1, 2, 3, 7]), "1-3, 7");
        assert_eq!(format_tag_list(&[]), "");
    }

    /// The network ceiling: each VXLAN network takes a host-local VLAN, so the 4,095th fails
    /// (with VNIs to spare) and says why; VLAN networks stop at their range.
    #[test]
    fn exhausted_tag_spaces_say_what_the_ceiling_is() {
        let mut vx = VxlanPool::new(TagRange { min: 1, max: 10000 });
        for _ in 0..4094 {
            vx.allocate(0).unwrap();
        }
        let err = vx.allocate(0).unwrap_err().to_string();
        assert!(
            err.contains("no local vlans available") && err.contains("at most 4094 vxlan networks"),
            "{err}"
        );
        let mut vl = VlanPool::new(&[TagRange { min: 10, max: 12 }]);
        for _ in 0..3 {
            vl.allocate(0).unwrap();
        }
        let err = vl.allocate(0).unwrap_err().to_string();
        assert!(err.contains("all 3 are in use"), "{err}");
    }
}
