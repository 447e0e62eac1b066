//! OFPT_FLOW_MOD: add, modify or delete flows, plus a builder.
//!
//! Contract: decoding keeps the match and instruction order; `Display` (in [`crate::format`])
//! prints the ovs-ofctl form.

use bytes::BytesMut;

use crate::action::Action;
use crate::instruction::{Instruction, emit_instructions, parse_instructions_into};
use crate::macros::code_enum;
use crate::matches::Match;
use crate::port::OFPP_ANY;
use crate::wire::{DecodeError, fixed, u8p, u16p, u32p, u64p};

code_enum! {
    /// `ofp_flow_mod_command`.
    pub enum FlowModCommand: u8 {
        Add = 0 => "ADD",
        Modify = 1 => "MOD",
        ModifyStrict = 2 => "MOD_STRICT",
        Delete = 3 => "DEL",
        DeleteStrict = 4 => "DEL_STRICT",
    }
}

/// `OFPFF_SEND_FLOW_REM`.
pub const OFPFF_SEND_FLOW_REM: u16 = 1 << 0;
/// `OFPFF_CHECK_OVERLAP`.
pub const OFPFF_CHECK_OVERLAP: u16 = 1 << 1;
/// `OFPFF_RESET_COUNTS`.
pub const OFPFF_RESET_COUNTS: u16 = 1 << 2;
/// `OFPFF_NO_PKT_COUNTS`.
pub const OFPFF_NO_PKT_COUNTS: u16 = 1 << 3;
/// `OFPFF_NO_BYT_COUNTS`.
pub const OFPFF_NO_BYT_COUNTS: u16 = 1 << 4;
/// `OFP_NO_BUFFER`.
pub const OFP_NO_BUFFER: u32 = 0xffff_ffff;
/// `OFPG_ANY`.
pub const OFPG_ANY: u32 = 0xffff_ffff;
/// Priority OVS uses when none is given.
pub const DEFAULT_PRIORITY: u16 = 0x8000;

/// OFPT_FLOW_MOD body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowMod {
    /// Opaque controller cookie.
    pub cookie: u64,
    /// For modify/delete: which cookie bits must match.
    pub cookie_mask: u64,
    /// Table (0xff = all, for delete).
    pub table_id: u8,
    /// Command.
    pub command: FlowModCommand,
    /// Idle timeout in seconds (0 = none).
    pub idle_timeout: u16,
    /// Hard timeout in seconds (0 = none).
    pub hard_timeout: u16,
    /// Priority.
    pub priority: u16,
    /// Buffered packet to apply to, or `OFP_NO_BUFFER`.
    pub buffer_id: u32,
    /// For delete: require an output to this port (`OFPP_ANY` = any).
    pub out_port: u32,
    /// For delete: require an output to this group (`OFPG_ANY` = any).
    pub out_group: u32,
    /// `OFPFF_*` bits.
    pub flags: u16,
    /// The match.
    pub matching: Match,
    /// The instructions.
    pub instructions: Vec<Instruction>,
}

impl FlowMod {
    fn new(command: FlowModCommand, table_id: u8, priority: u16) -> FlowMod {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id,
            command,
            idle_timeout: 0,
            hard_timeout: 0,
            priority,
            buffer_id: OFP_NO_BUFFER,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            flags: 0,
            matching: Match::new(),
            instructions: Vec::new(),
        }
    }

    /// An ADD for `table` at `priority`.
    pub fn add(table: u8, priority: u16) -> FlowMod {
        FlowMod::new(FlowModCommand::Add, table, priority)
    }

    /// A MODIFY_STRICT for `table` at `priority` (replace the actions of one exact flow).
    pub fn modify_strict(table: u8, priority: u16) -> FlowMod {
        FlowMod::new(FlowModCommand::ModifyStrict, table, priority)
    }

    /// A DELETE_STRICT for `table` at `priority`.
    pub fn delete_strict(table: u8, priority: u16) -> FlowMod {
        FlowMod::new(FlowModCommand::DeleteStrict, table, priority)
    }

    /// A non-strict DELETE of every flow in `table` (0xff = all tables) that the match covers.
    pub fn delete(table: u8) -> FlowMod {
        FlowMod::new(FlowModCommand::Delete, table, 0)
    }

    /// Set the cookie.
    pub fn cookie(mut self, cookie: u64) -> FlowMod {
        self.cookie = cookie;
        self
    }

    /// Set cookie and cookie mask (for modify/delete by cookie).
    pub fn cookie_masked(mut self, cookie: u64, mask: u64) -> FlowMod {
        self.cookie = cookie;
        self.cookie_mask = mask;
        self
    }

    /// Set the match.
    pub fn matching(mut self, m: Match) -> FlowMod {
        self.matching = m;
        self
    }

    /// Set the idle timeout.
    pub fn idle_timeout(mut self, secs: u16) -> FlowMod {
        self.idle_timeout = secs;
        self
    }

    /// Set the hard timeout.
    pub fn hard_timeout(mut self, secs: u16) -> FlowMod {
        self.hard_timeout = secs;
        self
    }

    /// Set the `OFPFF_*` flags.
    pub fn flags(mut self, flags: u16) -> FlowMod {
        self.flags = flags;
        self
    }

    /// Append an apply-actions instruction.
    pub fn apply(mut self, actions: Vec<Action>) -> FlowMod {
        self.instructions.push(Instruction::ApplyActions(actions));
        self
    }

    /// Append a write-actions instruction.
    pub fn write(mut self, actions: Vec<Action>) -> FlowMod {
        self.instructions.push(Instruction::WriteActions(actions));
        self
    }

    /// Append a write-metadata instruction.
    pub fn write_metadata(mut self, metadata: u64, mask: u64) -> FlowMod {
        self.instructions
            .push(Instruction::WriteMetadata { metadata, mask });
        self
    }

    /// Append a goto-table instruction.
    pub fn goto(mut self, table: u8) -> FlowMod {
        self.instructions.push(Instruction::GotoTable(table));
        self
    }

    /// Append any instruction.
    pub fn instruction(mut self, i: Instruction) -> FlowMod {
        self.instructions.push(i);
        self
    }

    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<FlowMod, DecodeError> {
        let (rest, (cookie, cookie_mask, table_id, command, idle_timeout, hard_timeout, priority)) =
            fixed(i, 24, "flow_mod", (u64p, u64p, u8p, u8p, u16p, u16p, u16p))?;
        let (rest, (buffer_id, out_port, out_group, flags, _pad)) =
            fixed(rest, 16, "flow_mod", (u32p, u32p, u32p, u16p, u16p))?;
        // The vectors are filled in place (see `Match::parse_into`).
        let mut flow_mod = FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command: FlowModCommand::from(command),
            idle_timeout,
            hard_timeout,
            priority,
            buffer_id,
            out_port,
            out_group,
            flags,
            matching: Match::new(),
            instructions: Vec::new(),
        };
        let rest = flow_mod.matching.parse_into(rest)?;
        parse_instructions_into(rest, &mut flow_mod.instructions)?;
        Ok(flow_mod)
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        self.borrowing(&self.matching, &self.instructions).emit(out);
    }

    /// This flow mod's fixed fields (command, table, priority, cookie, timeouts, ...) with a
    /// match and instructions borrowed from elsewhere in place of its own, which are not read.
    pub fn borrowing<'a>(
        &'a self,
        matching: &'a Match,
        instructions: &'a [Instruction],
    ) -> FlowModRef<'a> {
        FlowModRef {
            fixed: self,
            matching,
            instructions,
        }
    }

    /// All actions of apply-actions and write-actions instructions, in order.
    pub fn actions(&self) -> impl Iterator<Item = &Action> {
        self.instructions.iter().flat_map(|i| match i {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => a.as_slice(),
            _ => &[],
        })
    }
}

/// A FLOW_MOD whose match and instructions are borrowed (see [`FlowMod::borrowing`]), e.g. from
/// a flow a controller keeps: it encodes byte for byte as a [`FlowMod`] owning copies of them,
/// without making the copies.
#[derive(Debug, Clone, Copy)]
pub struct FlowModRef<'a> {
    fixed: &'a FlowMod,
    matching: &'a Match,
    instructions: &'a [Instruction],
}

impl FlowModRef<'_> {
    /// The match.
    pub fn matching(&self) -> &Match {
        self.matching
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        let f = self.fixed;
        let mut b = [0u8; 40];
        b[0..8].copy_from_slice(&f.cookie.to_be_bytes());
        b[8..16].copy_from_slice(&f.cookie_mask.to_be_bytes());
        b[16] = f.table_id;
        b[17] = f.command.code();
        b[18..20].copy_from_slice(&f.idle_timeout.to_be_bytes());
        b[20..22].copy_from_slice(&f.hard_timeout.to_be_bytes());
        b[22..24].copy_from_slice(&f.priority.to_be_bytes());
        b[24..28].copy_from_slice(&f.buffer_id.to_be_bytes());
        b[28..32].copy_from_slice(&f.out_port.to_be_bytes());
        b[32..36].copy_from_slice(&f.out_group.to_be_bytes());
        b[36..38].copy_from_slice(&f.flags.to_be_bytes());
        out.extend_from_slice(&b);
        self.matching.emit(out);
        emit_instructions(self.instructions, out);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::port::PortNo;

    /// table=1, priority=100, in_port=3, actions=output:2 (OXM in_port, apply_actions).
    static FLOW_MOD_BODY: [u8; 80] = [
        0, 0, 0, 0, 0, 0, 0, 0x2a, // cookie
        0, 0, 0, 0, 0, 0, 0, 0, // cookie_mask
        1, 0, 0, 0, 0, 0, 0, 100, // table, command, idle, hard, priority
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0,
        0, // buffer, out_port, out_group, flags, pad
        0, 1, 0, 12, 0x80, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 0, // match in_port=3 + pad
        0, 4, 0, 24, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
        0, // apply output:2
    ];

    fn sample() -> FlowMod {
        FlowMod::add(1, 100)
            .cookie(0x2a)
            .matching(Match::new().in_port(3))
            .apply(vec![Action::output(PortNo(2))])
    }

    #[test]
    fn test_parse() {
        assert_eq!(FlowMod::parse(&FLOW_MOD_BODY).unwrap(), sample());
    }

    #[test]
    fn test_emit() {
        let mut out = BytesMut::new();
        sample().emit(&mut out);
        assert_eq!(&out[..], &FLOW_MOD_BODY[..]);
    }

    #[test]
    fn malformed() {
        for n in [0, 20, 39, 44, 60, 79] {
            assert!(
                FlowMod::parse(&FLOW_MOD_BODY[..n])
                    .unwrap_err()
                    .is_truncated(),
                "cut at {n}"
            );
        }
    }
}
