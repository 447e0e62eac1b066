//! OFPT_ROLE_REQUEST / OFPT_ROLE_REPLY.

use bytes::BytesMut;

use crate::macros::code_enum;
use crate::wire::{DecodeError, fixed, u32p, u64p};

code_enum! {
    /// `ofp_controller_role`.
    pub enum ControllerRole: u32 {
        NoChange = 0 => "nochange",
        Equal = 1 => "equal",
        Master = 2 => "master",
        Slave = 3 => "slave",
    }
}

/// Role request or reply body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Role {
    /// The role.
    pub role: ControllerRole,
    /// Master election generation id.
    pub generation_id: u64,
}

impl Role {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<Role, DecodeError> {
        let (_, (role, _pad, generation_id)) = fixed(i, 16, "role message", (u32p, u32p, u64p))?;
        Ok(Role {
            role: ControllerRole::from(role),
            generation_id,
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.role.code()));
        out.extend_from_slice(&u32::to_be_bytes(0));
        out.extend_from_slice(&u64::to_be_bytes(self.generation_id));
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_parse_emit() {
        let body = [0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        let r = Role::parse(&body).unwrap();
        assert_eq!((r.role, r.generation_id), (ControllerRole::Master, 9));
        let mut out = BytesMut::new();
        r.emit(&mut out);
        assert_eq!(&out[..], &body[..]);
        assert!(Role::parse(&body[..15]).unwrap_err().is_truncated());
    }
}
