//! OFPT_GROUP_MOD and group buckets (also used by the group-description multipart reply).

use bytes::BytesMut;

use crate::action::{Action, emit_actions, parse_actions};
use crate::macros::code_enum;
use crate::port::OFPP_ANY;
use crate::wire::{DecodeError, PResult, fixed, patch_len, take_tlv, u8p, u16p, u32p};

code_enum! {
    /// `ofp_group_mod_command`.
    pub enum GroupModCommand: u16 {
        Add = 0 => "ADD",
        Modify = 1 => "MOD",
        Delete = 2 => "DEL",
    }
}

code_enum! {
    /// `ofp_group_type`.
    pub enum GroupType: u8 {
        All = 0 => "all",
        Select = 1 => "select",
        Indirect = 2 => "indirect",
        FastFailover = 3 => "ff",
    }
}

/// `OFPG_ALL`.
pub const OFPG_ALL: u32 = 0xffff_fffc;
/// `OFPG_ANY`.
pub const OFPG_ANY: u32 = 0xffff_ffff;

/// `ofp_bucket`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// Relative weight (select groups).
    pub weight: u16,
    /// Port whose liveness this bucket depends on (fast failover), `OFPP_ANY` if none.
    pub watch_port: u32,
    /// Group whose liveness this bucket depends on, `OFPG_ANY` if none.
    pub watch_group: u32,
    /// The bucket's actions.
    pub actions: Vec<Action>,
}

impl Bucket {
    /// A bucket with these actions, weight 0 and no watch.
    pub fn new(actions: Vec<Action>) -> Bucket {
        Bucket {
            weight: 0,
            watch_port: OFPP_ANY,
            watch_group: OFPG_ANY,
            actions,
        }
    }

    /// Parse one bucket.
    pub fn parse(i: &[u8]) -> PResult<'_, Bucket> {
        let (_, len) = fixed(i, 2, "bucket", u16p)?;
        let (rest, b) = take_tlv(i, usize::from(len), 16, "bucket")?;
        let (actions, (_, weight, watch_port, watch_group, _pad)) =
            fixed(b, 16, "bucket", (u16p, u16p, u32p, u32p, u32p))?;
        Ok((
            rest,
            Bucket {
                weight,
                watch_port,
                watch_group,
                actions: parse_actions(actions)?,
            },
        ))
    }

    /// Append the bucket.
    pub fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        out.extend_from_slice(&u16::to_be_bytes(0));
        out.extend_from_slice(&u16::to_be_bytes(self.weight));
        out.extend_from_slice(&u32::to_be_bytes(self.watch_port));
        out.extend_from_slice(&u32::to_be_bytes(self.watch_group));
        out.extend_from_slice(&u32::to_be_bytes(0));
        emit_actions(&self.actions, out);
        patch_len(out, start, start);
    }
}

/// Parse buckets filling all of `i`.
pub fn parse_buckets(mut i: &[u8]) -> Result<Vec<Bucket>, DecodeError> {
    let mut v = Vec::new();
    while !i.is_empty() {
        let (rest, b) = Bucket::parse(i)?;
        v.push(b);
        i = rest;
    }
    Ok(v)
}

/// OFPT_GROUP_MOD body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupMod {
    /// Command.
    pub command: GroupModCommand,
    /// Group type.
    pub group_type: GroupType,
    /// Group id.
    pub group_id: u32,
    /// Buckets.
    pub buckets: Vec<Bucket>,
}

impl GroupMod {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<GroupMod, DecodeError> {
        let (rest, (command, group_type, _pad, group_id)) =
            fixed(i, 8, "group_mod", (u16p, u8p, u8p, u32p))?;
        Ok(GroupMod {
            command: GroupModCommand::from(command),
            group_type: GroupType::from(group_type),
            group_id,
            buckets: parse_buckets(rest)?,
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u16::to_be_bytes(self.command.code()));
        out.extend_from_slice(&[self.group_type.code()]);
        out.extend_from_slice(&[0]);
        out.extend_from_slice(&u32::to_be_bytes(self.group_id));
        for b in &self.buckets {
            b.emit(out);
        }
    }
}

/// Emit buckets (helper for multipart).
pub(crate) fn emit_buckets(buckets: &[Bucket], out: &mut BytesMut) {
    for b in buckets {
        b.emit(out);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::port::PortNo;

    static GROUP_MOD_BODY: [u8; 40] = [
        0, 0, 1, 0, 0, 0, 0, 5, // ADD select group 5
        0, 32, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0,
        0, // bucket header, weight 1
        0, 0, 0, 16, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, // output:2
    ];

    #[test]
    fn test_parse_emit() {
        let g = GroupMod::parse(&GROUP_MOD_BODY).unwrap();
        let mut b = Bucket::new(vec![Action::output(PortNo(2))]);
        b.weight = 1;
        assert_eq!(
            g,
            GroupMod {
                command: GroupModCommand::Add,
                group_type: GroupType::Select,
                group_id: 5,
                buckets: vec![b]
            }
        );
        let mut out = BytesMut::new();
        g.emit(&mut out);
        assert_eq!(&out[..], &GROUP_MOD_BODY[..]);
    }

    #[test]
    fn malformed() {
        assert!(
            GroupMod::parse(&GROUP_MOD_BODY[..30])
                .unwrap_err()
                .is_truncated()
        );
        let mut bad = GROUP_MOD_BODY;
        bad[9] = 8; // bucket shorter than its header
        assert!(matches!(
            GroupMod::parse(&bad),
            Err(DecodeError::BadLength { .. })
        ));
    }
}
