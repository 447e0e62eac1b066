//! `ofp_table_features` and its properties (OFPMP_TABLE_FEATURES request and reply bodies).
//!
//! Contract: every property decodes into a typed list (instruction/action ids, next tables, OXM
//! headers) or, for experimenter and unknown properties, keeps its bytes; padding is written
//! back as zeros.

use bytes::{Bytes, BytesMut};

use crate::fixed_str::FixedStr;
use crate::wire::{
    DecodeError, PResult, fixed, pad8, patch_len, put_zeros, take, take_tlv, u8p, u16p, u32p, u64p,
};

/// An instruction or action id in a table-features property: the type plus, for experimenter
/// ids, the bytes after the 4-byte header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FeatureId {
    /// Instruction or action type.
    pub kind: u16,
    /// Experimenter bytes (empty for standard ids).
    pub data: Bytes,
}

/// The body of one table-features property.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TableFeatureProp {
    /// `OFPTFPT_INSTRUCTIONS` (miss = false) / `_MISS` (true).
    Instructions {
        /// Table-miss variant.
        miss: bool,
        /// Supported instructions.
        ids: Vec<FeatureId>,
    },
    /// `OFPTFPT_NEXT_TABLES` / `_MISS`.
    NextTables {
        /// Table-miss variant.
        miss: bool,
        /// Tables reachable by goto.
        tables: Vec<u8>,
    },
    /// `OFPTFPT_WRITE_ACTIONS` / `_MISS` (write = true) or `APPLY_ACTIONS` / `_MISS`.
    Actions {
        /// Write-actions (true) or apply-actions (false).
        write: bool,
        /// Table-miss variant.
        miss: bool,
        /// Supported actions.
        ids: Vec<FeatureId>,
    },
    /// `OFPTFPT_MATCH` (8), `WILDCARDS` (10), `WRITE_SETFIELD` (12), `_MISS` (13),
    /// `APPLY_SETFIELD` (14), `_MISS` (15): lists of OXM headers.
    Oxms {
        /// Property type.
        kind: u16,
        /// OXM headers (4 bytes each; experimenter headers are followed by their id).
        headers: Vec<u32>,
    },
    /// `OFPTFPT_EXPERIMENTER` / `_MISS` or an unknown property.
    Other {
        /// Property type.
        kind: u16,
        /// Body after the 4-byte header, without padding.
        data: Bytes,
    },
}

fn parse_ids(mut b: &[u8]) -> Result<Vec<FeatureId>, DecodeError> {
    let mut v = Vec::new();
    while !b.is_empty() {
        let (_, (kind, len)) = fixed(b, 4, "table feature id", (u16p, u16p))?;
        let (rest, id) = take_tlv(b, usize::from(len), 4, "table feature id")?;
        v.push(FeatureId {
            kind,
            data: Bytes::copy_from_slice(&id[4..]),
        });
        b = rest;
    }
    Ok(v)
}

impl TableFeatureProp {
    /// Parse one property including its padding.
    pub fn parse(i: &[u8]) -> PResult<'_, TableFeatureProp> {
        let (_, (kind, len)) = fixed(i, 4, "table feature property", (u16p, u16p))?;
        let len = usize::from(len);
        let (rest, p) = take_tlv(i, len, 4, "table feature property")?;
        let pad = pad8(len).min(rest.len());
        let rest = &rest[pad..];
        let b = &p[4..];
        let prop = match kind {
            0 | 1 => TableFeatureProp::Instructions {
                miss: kind == 1,
                ids: parse_ids(b)?,
            },
            2 | 3 => TableFeatureProp::NextTables {
                miss: kind == 3,
                tables: b.to_vec(),
            },
            4..=7 => TableFeatureProp::Actions {
                write: kind < 6,
                miss: kind % 2 == 1,
                ids: parse_ids(b)?,
            },
            8 | 10 | 12..=15 if b.len() % 4 == 0 => TableFeatureProp::Oxms {
                kind,
                headers: b
                    .chunks_exact(4)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            },
            _ => TableFeatureProp::Other {
                kind,
                data: Bytes::copy_from_slice(b),
            },
        };
        Ok((rest, prop))
    }

    /// Append the property and its padding.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        let kind = match self {
            TableFeatureProp::Instructions { miss, .. } => u16::from(*miss),
            TableFeatureProp::NextTables { miss, .. } => 2 + u16::from(*miss),
            TableFeatureProp::Actions { write, miss, .. } => {
                (if *write { 4 } else { 6 }) + u16::from(*miss)
            }
            TableFeatureProp::Oxms { kind, .. } | TableFeatureProp::Other { kind, .. } => *kind,
        };
        out.extend_from_slice(&u16::to_be_bytes(kind));
        out.extend_from_slice(&u16::to_be_bytes(0));
        match self {
            TableFeatureProp::Instructions { ids, .. } | TableFeatureProp::Actions { ids, .. } => {
                for id in ids {
                    out.extend_from_slice(&u16::to_be_bytes(id.kind));
                    out.extend_from_slice(&u16::to_be_bytes((4 + id.data.len()) as u16));
                    out.extend_from_slice(&id.data);
                }
            }
            TableFeatureProp::NextTables { tables, .. } => out.extend_from_slice(tables),
            TableFeatureProp::Oxms { headers, .. } => {
                for h in headers {
                    out.extend_from_slice(&u32::to_be_bytes(*h));
                }
            }
            TableFeatureProp::Other { data, .. } => out.extend_from_slice(data),
        }
        patch_len(out, start + 2, start);
        put_zeros(out, pad8(out.len() - start));
    }
}

/// `ofp_table_features`: one table's capabilities.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableFeatures {
    /// Table id.
    pub table_id: u8,
    /// Table name.
    pub name: FixedStr,
    /// Metadata bits the table can match.
    pub metadata_match: u64,
    /// Metadata bits the table can write.
    pub metadata_write: u64,
    /// `OFPTC_*` bits.
    pub config: u32,
    /// Maximum number of entries.
    pub max_entries: u32,
    /// Properties.
    pub properties: Vec<TableFeatureProp>,
}

impl TableFeatures {
    /// Parse one entry.
    pub fn parse(i: &[u8]) -> PResult<'_, TableFeatures> {
        let (_, len) = fixed(i, 2, "table_features", u16p)?;
        let (rest, b) = take_tlv(i, usize::from(len), 64, "table_features")?;
        let (_, table_id) = fixed(&b[2..], 1, "table_features", u8p)?;
        let (_, name) = take(&b[8..], 32, "table_features name")?;
        let (mut props, (metadata_match, metadata_write, config, max_entries)) =
            fixed(&b[40..], 24, "table_features", (u64p, u64p, u32p, u32p))?;
        let mut properties = Vec::new();
        while !props.is_empty() {
            let (r, p) = TableFeatureProp::parse(props)?;
            properties.push(p);
            props = r;
        }
        Ok((
            rest,
            TableFeatures {
                table_id,
                name: FixedStr::parse_field(name),
                metadata_match,
                metadata_write,
                config,
                max_entries,
                properties,
            },
        ))
    }

    /// Append the entry.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        out.extend_from_slice(&u16::to_be_bytes(0));
        out.extend_from_slice(&[self.table_id]);
        put_zeros(out, 5);
        self.name.emit_field(out, 32);
        out.extend_from_slice(&u64::to_be_bytes(self.metadata_match));
        out.extend_from_slice(&u64::to_be_bytes(self.metadata_write));
        out.extend_from_slice(&u32::to_be_bytes(self.config));
        out.extend_from_slice(&u32::to_be_bytes(self.max_entries));
        for p in &self.properties {
            p.emit(out);
        }
        patch_len(out, start, start);
    }
}

/// Parse entries filling all of `i`.
pub fn parse_table_features(mut i: &[u8]) -> Result<Vec<TableFeatures>, DecodeError> {
    let mut v = Vec::new();
    while !i.is_empty() {
        let (r, t) = TableFeatures::parse(i)?;
        v.push(t);
        i = r;
    }
    Ok(v)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn round_trip_every_property_kind() {
        let tf = TableFeatures {
            table_id: 3,
            name: "classifier".into(),
            metadata_match: u64::MAX,
            metadata_write: u64::MAX,
            config: 0,
            max_entries: 1_000_000,
            properties: vec![
                TableFeatureProp::Instructions {
                    miss: false,
                    ids: vec![
                        FeatureId {
                            kind: 1,
                            data: Bytes::new(),
                        },
                        FeatureId {
                            kind: 0xffff,
                            data: Bytes::from_static(&[0, 0, 0x23, 0x20]),
                        },
                    ],
                },
                TableFeatureProp::NextTables {
                    miss: true,
                    tables: vec![4, 5, 6],
                },
                TableFeatureProp::Actions {
                    write: false,
                    miss: true,
                    ids: vec![FeatureId {
                        kind: 0,
                        data: Bytes::new(),
                    }],
                },
                TableFeatureProp::Oxms {
                    kind: 8,
                    headers: vec![0x8000_0004, 0x8000_0606],
                },
                TableFeatureProp::Other {
                    kind: 0xfffe,
                    data: Bytes::from_static(&[0, 0, 0x23, 0x20, 0, 0, 0, 1, 9]),
                },
            ],
        };
        let mut out = BytesMut::new();
        tf.emit(&mut out);
        assert_eq!(out.len() % 8, 0);
        assert_eq!(parse_table_features(&out).unwrap(), vec![tf]);
        assert!(parse_table_features(&out[..out.len() - 8]).is_err());
    }
}
