//! A minimal OpenFlow 1.3 controller-side client for tests: connect to a bridge's management
//! socket, say HELLO, send one request and collect the reply messages, all as raw bytes.
//!
//! Like the recording switch, it parses only headers and the multipart flags, so the codec under
//! test never checks itself.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

const OFP13_VERSION: u8 = 0x04;
const OFPT_HELLO: u8 = 0;
const OFPT_ERROR: u8 = 1;
const OFPT_ECHO_REQUEST: u8 = 2;
const OFPT_ECHO_REPLY: u8 = 3;
const OFPT_MULTIPART_REQUEST: u8 = 18;
const OFPT_MULTIPART_REPLY: u8 = 19;
const OFPMP_FLOW: u16 = 1;
const OFPMP_GROUP_DESC: u16 = 7;
const OFPMP_METER_CONFIG: u16 = 10;
const OFPMPF_REPLY_MORE: u16 = 1;

/// A connection to an OpenFlow switch speaking 1.3.
pub struct OfClient {
    stream: UnixStream,
    next_xid: u32,
}

fn message(kind: u8, xid: u32, body: &[u8]) -> Vec<u8> {
    let length = u16::try_from(8 + body.len()).expect("request fits 64 KiB");
    let mut bytes = vec![OFP13_VERSION, kind];
    bytes.extend_from_slice(&length.to_be_bytes());
    bytes.extend_from_slice(&xid.to_be_bytes());
    bytes.extend_from_slice(body);
    bytes
}

impl OfClient {
    /// Connect to `unix:PATH` (as printed by `testbed::Ovs::bridge_mgmt`) and exchange HELLOs.
    pub fn connect(target: &str) -> io::Result<OfClient> {
        let path = target.strip_prefix("unix:").unwrap_or(target);
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut client = OfClient {
            stream,
            next_xid: 1,
        };
        let bitmap_element = [0x00, 0x01, 0x00, 0x08, 0x00, 0x00, 0x00, 0x10];
        client
            .stream
            .write_all(&message(OFPT_HELLO, 0, &bitmap_element))?;
        Ok(client)
    }

    fn read_message(&mut self) -> io::Result<Vec<u8>> {
        let mut header = [0u8; 8];
        self.stream.read_exact(&mut header)?;
        let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
        if length < 8 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "length < 8"));
        }
        let mut bytes = header.to_vec();
        bytes.resize(length, 0);
        self.stream.read_exact(&mut bytes[8..])?;
        Ok(bytes)
    }

    /// Send a multipart request of `kind` with `body` and return every reply message (each one
    /// whole, header included) up to the one without the MORE flag.
    pub fn multipart(&mut self, kind: u16, body: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        let xid = self.next_xid;
        self.next_xid += 1;
        let mut request_body = kind.to_be_bytes().to_vec();
        request_body.extend_from_slice(&[0; 6]); // flags, pad
        request_body.extend_from_slice(body);
        self.stream
            .write_all(&message(OFPT_MULTIPART_REQUEST, xid, &request_body))?;
        let mut replies = Vec::new();
        loop {
            let reply = self.read_message()?;
            let reply_xid = u32::from_be_bytes([reply[4], reply[5], reply[6], reply[7]]);
            match reply[1] {
                OFPT_ECHO_REQUEST => {
                    let echo = message(OFPT_ECHO_REPLY, reply_xid, &reply[8..]);
                    self.stream.write_all(&echo)?;
                }
                OFPT_ERROR if reply_xid == xid => {
                    return Err(io::Error::other(format!(
                        "switch returned an error: {}",
                        super::tools::hex(&reply)
                    )));
                }
                OFPT_MULTIPART_REPLY if reply_xid == xid && reply.len() >= 16 => {
                    let flags = u16::from_be_bytes([reply[10], reply[11]]);
                    replies.push(reply);
                    if flags & OFPMPF_REPLY_MORE == 0 {
                        return Ok(replies);
                    }
                }
                _ => {} // HELLO and anything unrelated
            }
        }
    }

    /// All flow stats of all tables, as the raw multipart reply messages.
    pub fn flow_stats(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let mut body = Vec::new();
        body.push(0xff); // all tables
        body.extend_from_slice(&[0; 3]);
        body.extend_from_slice(&0xffff_ffffu32.to_be_bytes()); // out_port ANY
        body.extend_from_slice(&0xffff_ffffu32.to_be_bytes()); // out_group ANY
        body.extend_from_slice(&[0; 4]);
        body.extend_from_slice(&0u64.to_be_bytes()); // cookie
        body.extend_from_slice(&0u64.to_be_bytes()); // cookie mask
        body.extend_from_slice(&[0x00, 0x01, 0x00, 0x04, 0, 0, 0, 0]); // empty OXM match
        self.multipart(OFPMP_FLOW, &body)
    }

    /// All group descriptions, as the raw multipart reply messages.
    pub fn group_desc(&mut self) -> io::Result<Vec<Vec<u8>>> {
        self.multipart(OFPMP_GROUP_DESC, &[])
    }

    /// All meter configurations, as the raw multipart reply messages.
    pub fn meter_config(&mut self) -> io::Result<Vec<Vec<u8>>> {
        // meter_id OFPM_ALL, pad.
        self.multipart(OFPMP_METER_CONFIG, &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])
    }
}
