//! The [`Message`] enum (one variant per OpenFlow 1.3 message, plus the ONF bundle and Nicira
//! extension messages) and the one dispatching decode/encode.
//!
//! Contract: [`Message::decode`] takes exactly one whole message (header included) and returns
//! its xid and value; it rejects versions other than 0x04, lengths that disagree with the
//! buffer, and malformed bodies, never panicking. [`Message::encode`] is infallible; values that
//! can be invalid (a match missing a prerequisite, a body over 65535 bytes) are reported by
//! [`Message::check`] or refused by [`Message::encode_checked`].

use bytes::{Bytes, BytesMut};

use crate::async_config::AsyncConfig;
use crate::bundle::{BundleAdd, BundleControl, ONFT_BUNDLE_ADD_MESSAGE, ONFT_BUNDLE_CONTROL};
use crate::config::SwitchConfig;
use crate::error::ErrorMsg;
use crate::features::FeaturesReply;
use crate::flow_mod::FlowMod;
use crate::flow_removed::FlowRemoved;
use crate::group::GroupMod;
use crate::header::{HEADER_LEN, Header, MsgType, OFP_VERSION};
use crate::hello::Hello;
use crate::meter::MeterMod;
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::nicira_msg::{self as nx, PacketIn2, TlvTableMod, TlvTableReply};
use crate::oxm::ONF_EXPERIMENTER;
use crate::packet_in::PacketIn;
use crate::packet_out::PacketOut;
use crate::port::{PortMod, PortStatus};
use crate::queue::{self, QueueGetConfigReply};
use crate::role::Role;
use crate::table_mod::TableMod;
use crate::wire::{DecodeError, EncodeError, fixed, patch_len, u32p};

/// One OpenFlow message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Message {
    /// OFPT_HELLO.
    Hello(Hello),
    /// OFPT_ERROR.
    Error(ErrorMsg),
    /// OFPT_ECHO_REQUEST with its payload.
    EchoRequest(Bytes),
    /// OFPT_ECHO_REPLY with its payload.
    EchoReply(Bytes),
    /// An OFPT_EXPERIMENTER message this crate does not model.
    Experimenter {
        /// Experimenter id.
        experimenter: u32,
        /// Experimenter-defined type.
        exp_type: u32,
        /// Body after the type.
        data: Bytes,
    },
    /// OFPT_FEATURES_REQUEST.
    FeaturesRequest,
    /// OFPT_FEATURES_REPLY.
    FeaturesReply(FeaturesReply),
    /// OFPT_GET_CONFIG_REQUEST.
    GetConfigRequest,
    /// OFPT_GET_CONFIG_REPLY.
    GetConfigReply(SwitchConfig),
    /// OFPT_SET_CONFIG.
    SetConfig(SwitchConfig),
    /// OFPT_PACKET_IN.
    PacketIn(PacketIn),
    /// OFPT_FLOW_REMOVED.
    FlowRemoved(FlowRemoved),
    /// OFPT_PORT_STATUS.
    PortStatus(PortStatus),
    /// OFPT_PACKET_OUT.
    PacketOut(PacketOut),
    /// OFPT_FLOW_MOD.
    FlowMod(FlowMod),
    /// OFPT_GROUP_MOD.
    GroupMod(GroupMod),
    /// OFPT_PORT_MOD.
    PortMod(PortMod),
    /// OFPT_TABLE_MOD.
    TableMod(TableMod),
    /// OFPT_MULTIPART_REQUEST.
    MultipartRequest(MultipartRequest),
    /// OFPT_MULTIPART_REPLY.
    MultipartReply(MultipartReply),
    /// OFPT_BARRIER_REQUEST.
    BarrierRequest,
    /// OFPT_BARRIER_REPLY.
    BarrierReply,
    /// OFPT_QUEUE_GET_CONFIG_REQUEST for a port.
    QueueGetConfigRequest(u32),
    /// OFPT_QUEUE_GET_CONFIG_REPLY.
    QueueGetConfigReply(QueueGetConfigReply),
    /// OFPT_ROLE_REQUEST.
    RoleRequest(Role),
    /// OFPT_ROLE_REPLY.
    RoleReply(Role),
    /// OFPT_GET_ASYNC_REQUEST.
    GetAsyncRequest,
    /// OFPT_GET_ASYNC_REPLY.
    GetAsyncReply(AsyncConfig),
    /// OFPT_SET_ASYNC.
    SetAsync(AsyncConfig),
    /// OFPT_METER_MOD.
    MeterMod(MeterMod),
    /// ONFT_BUNDLE_CONTROL.
    BundleControl(BundleControl),
    /// ONFT_BUNDLE_ADD_MESSAGE.
    BundleAdd(BundleAdd),
    /// NXT_PACKET_IN2.
    PacketIn2(PacketIn2),
    /// NXT_SET_ASYNC_CONFIG.
    NxSetAsyncConfig(AsyncConfig),
    /// NXT_SET_CONTROLLER_ID.
    SetControllerId(u16),
    /// NXT_TLV_TABLE_MOD.
    TlvTableMod(TlvTableMod),
    /// NXT_TLV_TABLE_REQUEST.
    TlvTableRequest,
    /// NXT_TLV_TABLE_REPLY.
    TlvTableReply(TlvTableReply),
    /// NXT_ROLE_REQUEST: the Nicira role request (`nicira_msg::NX_ROLE_*`).
    NxRoleRequest(u32),
    /// NXT_ROLE_REPLY.
    NxRoleReply(u32),
    /// NXT_FLOW_MOD_TABLE_ID: nonzero lets OpenFlow 1.0 flow mods carry a table id.
    FlowModTableId(u8),
    /// NXT_SET_PACKET_IN_FORMAT (`nicira_msg::NXPIF_*`).
    SetPacketInFormat(u32),
    /// NXT_FLOW_AGE.
    FlowAge,
    /// NXT_CT_FLUSH_ZONE: flush the connection tracker's entries of this zone.
    CtFlushZone(u16),
    /// A message type this crate does not know.
    Unknown {
        /// Header type.
        msg_type: u8,
        /// Body after the header.
        body: Bytes,
    },
}

impl Message {
    /// The header type this message is sent with.
    pub fn msg_type(&self) -> MsgType {
        use Message as M;
        match self {
            M::Hello(_) => MsgType::Hello,
            M::Error(_) => MsgType::Error,
            M::EchoRequest(_) => MsgType::EchoRequest,
            M::EchoReply(_) => MsgType::EchoReply,
            M::Experimenter { .. }
            | M::BundleControl(_)
            | M::BundleAdd(_)
            | M::PacketIn2(_)
            | M::NxSetAsyncConfig(_)
            | M::SetControllerId(_)
            | M::TlvTableMod(_)
            | M::TlvTableRequest
            | M::TlvTableReply(_)
            | M::NxRoleRequest(_)
            | M::NxRoleReply(_)
            | M::FlowModTableId(_)
            | M::SetPacketInFormat(_)
            | M::FlowAge
            | M::CtFlushZone(_) => MsgType::Experimenter,
            M::FeaturesRequest => MsgType::FeaturesRequest,
            M::FeaturesReply(_) => MsgType::FeaturesReply,
            M::GetConfigRequest => MsgType::GetConfigRequest,
            M::GetConfigReply(_) => MsgType::GetConfigReply,
            M::SetConfig(_) => MsgType::SetConfig,
            M::PacketIn(_) => MsgType::PacketIn,
            M::FlowRemoved(_) => MsgType::FlowRemoved,
            M::PortStatus(_) => MsgType::PortStatus,
            M::PacketOut(_) => MsgType::PacketOut,
            M::FlowMod(_) => MsgType::FlowMod,
            M::GroupMod(_) => MsgType::GroupMod,
            M::PortMod(_) => MsgType::PortMod,
            M::TableMod(_) => MsgType::TableMod,
            M::MultipartRequest(_) => MsgType::MultipartRequest,
            M::MultipartReply(_) => MsgType::MultipartReply,
            M::BarrierRequest => MsgType::BarrierRequest,
            M::BarrierReply => MsgType::BarrierReply,
            M::QueueGetConfigRequest(_) => MsgType::QueueGetConfigRequest,
            M::QueueGetConfigReply(_) => MsgType::QueueGetConfigReply,
            M::RoleRequest(_) => MsgType::RoleRequest,
            M::RoleReply(_) => MsgType::RoleReply,
            M::GetAsyncRequest => MsgType::GetAsyncRequest,
            M::GetAsyncReply(_) => MsgType::GetAsyncReply,
            M::SetAsync(_) => MsgType::SetAsync,
            M::MeterMod(_) => MsgType::MeterMod,
            M::Unknown { msg_type, .. } => MsgType::from(*msg_type),
        }
    }

    /// Decode exactly one whole message; returns its xid and the message.
    pub fn decode(buf: &[u8]) -> Result<(u32, Message), DecodeError> {
        let (_, h) = Header::parse(buf)?;
        if h.version != OFP_VERSION {
            return Err(DecodeError::BadVersion(h.version));
        }
        let len = usize::from(h.length);
        if len < HEADER_LEN {
            return Err(DecodeError::BadLength {
                what: "ofp_header",
                len,
                reason: "shorter than the 8-byte header",
            });
        }
        if buf.len() < len {
            return Err(DecodeError::Truncated {
                what: h.msg_type.name().unwrap_or("message"),
                need: len,
                have: buf.len(),
            });
        }
        if buf.len() > len {
            return Err(DecodeError::BadLength {
                what: "ofp_header",
                len,
                reason: "buffer holds bytes past the message length",
            });
        }
        Ok((h.xid, Message::decode_body(h.msg_type, &buf[HEADER_LEN..])?))
    }

    fn decode_body(t: MsgType, b: &[u8]) -> Result<Message, DecodeError> {
        use Message as M;
        let bytes = || Bytes::copy_from_slice(b);
        Ok(match t {
            MsgType::Hello => M::Hello(Hello::parse(b)?),
            MsgType::Error => M::Error(ErrorMsg::parse(b)?),
            MsgType::EchoRequest => M::EchoRequest(bytes()),
            MsgType::EchoReply => M::EchoReply(bytes()),
            MsgType::Experimenter => Message::decode_experimenter(b)?,
            MsgType::FeaturesRequest => M::FeaturesRequest,
            MsgType::FeaturesReply => M::FeaturesReply(FeaturesReply::parse(b)?),
            MsgType::GetConfigRequest => M::GetConfigRequest,
            MsgType::GetConfigReply => M::GetConfigReply(SwitchConfig::parse(b)?),
            MsgType::SetConfig => M::SetConfig(SwitchConfig::parse(b)?),
            MsgType::PacketIn => M::PacketIn(PacketIn::parse(b)?),
            MsgType::FlowRemoved => M::FlowRemoved(FlowRemoved::parse(b)?),
            MsgType::PortStatus => M::PortStatus(PortStatus::parse(b)?),
            MsgType::PacketOut => M::PacketOut(PacketOut::parse(b)?),
            MsgType::FlowMod => M::FlowMod(FlowMod::parse(b)?),
            MsgType::GroupMod => M::GroupMod(GroupMod::parse(b)?),
            MsgType::PortMod => M::PortMod(PortMod::parse(b)?),
            MsgType::TableMod => M::TableMod(TableMod::parse(b)?),
            MsgType::MultipartRequest => M::MultipartRequest(MultipartRequest::parse(b)?),
            MsgType::MultipartReply => M::MultipartReply(MultipartReply::parse(b)?),
            MsgType::BarrierRequest => M::BarrierRequest,
            MsgType::BarrierReply => M::BarrierReply,
            MsgType::QueueGetConfigRequest => M::QueueGetConfigRequest(queue::parse_request(b)?),
            MsgType::QueueGetConfigReply => M::QueueGetConfigReply(QueueGetConfigReply::parse(b)?),
            MsgType::RoleRequest => M::RoleRequest(Role::parse(b)?),
            MsgType::RoleReply => M::RoleReply(Role::parse(b)?),
            MsgType::GetAsyncRequest => M::GetAsyncRequest,
            MsgType::GetAsyncReply => M::GetAsyncReply(AsyncConfig::parse(b)?),
            MsgType::SetAsync => M::SetAsync(AsyncConfig::parse(b)?),
            MsgType::MeterMod => M::MeterMod(MeterMod::parse(b)?),
            MsgType::Unknown(msg_type) => M::Unknown {
                msg_type,
                body: bytes(),
            },
        })
    }

    fn decode_experimenter(b: &[u8]) -> Result<Message, DecodeError> {
        use Message as M;
        let (data, (experimenter, exp_type)) = fixed(b, 8, "experimenter message", (u32p, u32p))?;
        Ok(match (experimenter, exp_type) {
            (ONF_EXPERIMENTER, ONFT_BUNDLE_CONTROL) => {
                M::BundleControl(BundleControl::parse(data)?)
            }
            (ONF_EXPERIMENTER, ONFT_BUNDLE_ADD_MESSAGE) => M::BundleAdd(BundleAdd::parse(data)?),
            (nx::NX_VENDOR_ID, nx::NXT_PACKET_IN2) => M::PacketIn2(PacketIn2::parse(data)?),
            (nx::NX_VENDOR_ID, nx::NXT_SET_ASYNC_CONFIG) if data.len() == 24 => {
                M::NxSetAsyncConfig(AsyncConfig::parse(data)?)
            }
            (nx::NX_VENDOR_ID, nx::NXT_SET_CONTROLLER_ID) if data.len() == 8 => {
                M::SetControllerId(nx::parse_controller_id(data)?)
            }
            (nx::NX_VENDOR_ID, nx::NXT_TLV_TABLE_MOD) => M::TlvTableMod(TlvTableMod::parse(data)?),
            (nx::NX_VENDOR_ID, nx::NXT_TLV_TABLE_REQUEST) if data.is_empty() => M::TlvTableRequest,
            (nx::NX_VENDOR_ID, nx::NXT_TLV_TABLE_REPLY) => {
                M::TlvTableReply(TlvTableReply::parse(data)?)
            }
            (nx::NX_VENDOR_ID, t @ (nx::NXT_ROLE_REQUEST | nx::NXT_ROLE_REPLY))
                if data.len() == 4 =>
            {
                let role = nx::parse_word(data).unwrap_or_default();
                if t == nx::NXT_ROLE_REQUEST {
                    M::NxRoleRequest(role)
                } else {
                    M::NxRoleReply(role)
                }
            }
            (nx::NX_VENDOR_ID, nx::NXT_SET_PACKET_IN_FORMAT) if data.len() == 4 => {
                M::SetPacketInFormat(nx::parse_word(data).unwrap_or_default())
            }
            (nx::NX_VENDOR_ID, nx::NXT_FLOW_AGE) if data.is_empty() => M::FlowAge,
            (nx::NX_VENDOR_ID, nx::NXT_FLOW_MOD_TABLE_ID)
                if nx::parse_flow_mod_table_id(data).is_some() =>
            {
                M::FlowModTableId(nx::parse_flow_mod_table_id(data).unwrap_or_default())
            }
            (nx::NX_VENDOR_ID, nx::NXT_CT_FLUSH_ZONE)
                if nx::parse_ct_flush_zone(data).is_some() =>
            {
                M::CtFlushZone(nx::parse_ct_flush_zone(data).unwrap_or_default())
            }
            _ => M::Experimenter {
                experimenter,
                exp_type,
                data: Bytes::copy_from_slice(data),
            },
        })
    }

    /// Append the whole message (header included) with transaction id `xid` to `out`.
    pub fn encode(&self, xid: u32, out: &mut BytesMut) {
        out.reserve(256);
        encode_framed(self.msg_type(), xid, out, |out| self.emit_body(out));
    }

    /// Append what follows the header.
    fn emit_body(&self, out: &mut BytesMut) {
        use Message as M;
        let exp = |out: &mut BytesMut, e: u32, t: u32| {
            out.extend_from_slice(&u32::to_be_bytes(e));
            out.extend_from_slice(&u32::to_be_bytes(t));
        };
        match self {
            M::Hello(h) => h.emit(out),
            M::Error(e) => e.emit(out),
            M::EchoRequest(b) | M::EchoReply(b) => out.extend_from_slice(b),
            M::Experimenter {
                experimenter,
                exp_type,
                data,
            } => {
                exp(out, *experimenter, *exp_type);
                out.extend_from_slice(data);
            }
            M::FeaturesRequest
            | M::GetConfigRequest
            | M::BarrierRequest
            | M::BarrierReply
            | M::GetAsyncRequest => {}
            M::FeaturesReply(f) => f.emit(out),
            M::GetConfigReply(c) | M::SetConfig(c) => c.emit(out),
            M::PacketIn(p) => p.emit(out),
            M::FlowRemoved(f) => f.emit(out),
            M::PortStatus(p) => p.emit(out),
            M::PacketOut(p) => p.emit(out),
            M::FlowMod(f) => f.emit(out),
            M::GroupMod(g) => g.emit(out),
            M::PortMod(p) => p.emit(out),
            M::TableMod(t) => t.emit(out),
            M::MultipartRequest(m) => m.emit(out),
            M::MultipartReply(m) => m.emit(out),
            M::QueueGetConfigRequest(port) => queue::emit_request(*port, out),
            M::QueueGetConfigReply(q) => q.emit(out),
            M::RoleRequest(r) | M::RoleReply(r) => r.emit(out),
            M::GetAsyncReply(a) | M::SetAsync(a) => a.emit(out),
            M::MeterMod(m) => m.emit(out),
            M::BundleControl(b) => {
                exp(out, ONF_EXPERIMENTER, ONFT_BUNDLE_CONTROL);
                b.emit(out);
            }
            M::BundleAdd(b) => {
                exp(out, ONF_EXPERIMENTER, ONFT_BUNDLE_ADD_MESSAGE);
                b.emit(out);
            }
            M::PacketIn2(p) => {
                exp(out, nx::NX_VENDOR_ID, nx::NXT_PACKET_IN2);
                p.emit(out);
            }
            M::NxSetAsyncConfig(a) => {
                exp(out, nx::NX_VENDOR_ID, nx::NXT_SET_ASYNC_CONFIG);
                a.emit(out);
            }
            M::SetControllerId(id) => {
                exp(out, nx::NX_VENDOR_ID, nx::NXT_SET_CONTROLLER_ID);
                nx::emit_controller_id(*id, out);
            }
            M::TlvTableMod(t) => {
                exp(out, nx::NX_VENDOR_ID, nx::NXT_TLV_TABLE_MOD);
                t.emit(out);
            }
            M::TlvTableRequest => exp(out, nx::NX_VENDOR_ID, nx::NXT_TLV_TABLE_REQUEST),
            M::TlvTableReply(t) => {
                exp(out, nx::NX_VENDOR_ID, nx::NXT_TLV_TABLE_REPLY);
                t.emit(out);
            }
            M::NxRoleRequest(role) | M::NxRoleReply(role) => {
                let t = if matches!(self, M::NxRoleRequest(_)) {
                    nx::NXT_ROLE_REQUEST
                } else {
                    nx::NXT_ROLE_REPLY
                };
                exp(out, nx::NX_VENDOR_ID, t);
                out.extend_from_slice(&role.to_be_bytes());
            }
            M::SetPacketInFormat(format) => {
                exp(out, nx::NX_VENDOR_ID, nx::NXT_SET_PACKET_IN_FORMAT);
                out.extend_from_slice(&format.to_be_bytes());
            }
            M::FlowAge => exp(out, nx::NX_VENDOR_ID, nx::NXT_FLOW_AGE),
            M::FlowModTableId(set) => {
                exp(out, nx::NX_VENDOR_ID, nx::NXT_FLOW_MOD_TABLE_ID);
                nx::emit_flow_mod_table_id(*set, out);
            }
            M::CtFlushZone(zone) => {
                exp(out, nx::NX_VENDOR_ID, nx::NXT_CT_FLUSH_ZONE);
                nx::emit_ct_flush_zone(*zone, out);
            }
            M::Unknown { body, .. } => out.extend_from_slice(body),
        }
    }

    /// Encode into a new vector.
    pub fn encode_to_vec(&self, xid: u32) -> Vec<u8> {
        let mut out = BytesMut::with_capacity(256);
        self.encode(xid, &mut out);
        out.to_vec()
    }

    /// Check what encoding cannot: the message fits in 65535 bytes, and the matches of flow
    /// mods and flow-stats requests satisfy their prerequisites.
    pub fn check(&self) -> Result<(), EncodeError> {
        match self {
            Message::FlowMod(f) => f.matching.check()?,
            Message::MultipartRequest(MultipartRequest {
                body:
                    crate::multipart::MultipartRequestBody::Flow(r)
                    | crate::multipart::MultipartRequestBody::Aggregate(r),
                ..
            }) => r.matching.check()?,
            Message::BundleAdd(b) => b.message.check()?,
            _ => {}
        }
        let mut out = BytesMut::new();
        self.encode(0, &mut out);
        if out.len() > usize::from(u16::MAX) {
            return Err(EncodeError::TooLong {
                what: self.msg_type().name().unwrap_or("message"),
                len: out.len(),
            });
        }
        Ok(())
    }

    /// [`Message::check`], then [`Message::encode`].
    pub fn encode_checked(&self, xid: u32, out: &mut BytesMut) -> Result<(), EncodeError> {
        self.check()?;
        self.encode(xid, out);
        Ok(())
    }
}

impl From<FlowMod> for Message {
    fn from(f: FlowMod) -> Message {
        Message::FlowMod(f)
    }
}

impl From<GroupMod> for Message {
    fn from(g: GroupMod) -> Message {
        Message::GroupMod(g)
    }
}

impl From<PacketOut> for Message {
    fn from(p: PacketOut) -> Message {
        Message::PacketOut(p)
    }
}

/// Append a message of type `msg_type` with transaction id `xid`: the header, what `body`
/// appends, and the header's length set to the whole.
pub(crate) fn encode_framed(
    msg_type: MsgType,
    xid: u32,
    out: &mut BytesMut,
    body: impl FnOnce(&mut BytesMut),
) {
    let start = out.len();
    Header {
        version: OFP_VERSION,
        msg_type,
        length: 0,
        xid,
    }
    .emit(out);
    body(out);
    patch_len(out, start + 2, start);
}

#[cfg(test)]
mod test {
    use super::*;

    static BARRIER: [u8; 8] = [4, 20, 0, 8, 0, 0, 0, 5];

    #[test]
    fn test_barrier() {
        assert_eq!(
            Message::decode(&BARRIER).unwrap(),
            (5, Message::BarrierRequest)
        );
        assert_eq!(Message::BarrierRequest.encode_to_vec(5), BARRIER.to_vec());
    }

    #[test]
    fn test_echo() {
        let m = Message::EchoRequest(Bytes::from_static(b"ping"));
        let v = m.encode_to_vec(9);
        assert_eq!(&v[..4], &[4, 2, 0, 12]);
        assert_eq!(Message::decode(&v).unwrap(), (9, m));
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            Message::decode(&[1, 0, 0, 8, 0, 0, 0, 0]),
            Err(DecodeError::BadVersion(1))
        );
        assert!(matches!(
            Message::decode(&[4, 0, 0, 4, 0, 0, 0, 0]),
            Err(DecodeError::BadLength { .. })
        ));
        assert!(
            Message::decode(&[4, 0, 0, 16, 0, 0, 0, 0])
                .unwrap_err()
                .is_truncated()
        );
        assert!(Message::decode(&[4, 0, 0, 8]).unwrap_err().is_truncated());
        assert!(matches!(
            Message::decode(&[4, 0, 0, 8, 0, 0, 0, 0, 1]),
            Err(DecodeError::BadLength { .. })
        ));
    }

    #[test]
    fn unknown_type_round_trips() {
        let raw = [4, 99, 0, 10, 0, 0, 0, 1, 7, 7];
        let (xid, m) = Message::decode(&raw).unwrap();
        assert_eq!(m.encode_to_vec(xid), raw.to_vec());
    }

    #[test]
    fn check_reports_prerequisite() {
        let fm = FlowMod::add(0, 1).matching(crate::Match::new().tcp_dst(80));
        assert!(Message::FlowMod(fm).check().is_err());
    }

    #[test]
    fn nested_bundle_is_refused() {
        let inner = Message::BundleControl(BundleControl::new(
            1,
            crate::bundle::BundleCtrlType::OpenRequest,
            0,
        ));
        let outer = Message::BundleAdd(BundleAdd {
            bundle_id: 1,
            flags: 0,
            xid: 1,
            message: Box::new(inner),
            properties: Bytes::new(),
        });
        assert!(matches!(
            Message::decode(&outer.encode_to_vec(1)),
            Err(DecodeError::Invalid { .. })
        ));
    }
}
