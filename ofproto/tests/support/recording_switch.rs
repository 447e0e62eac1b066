//! A fake OpenFlow 1.3 switch that records the modification messages a controller sends.
//!
//! It listens on `127.0.0.1:0` and speaks just enough of the switch side for
//! `ovs-ofctl -O OpenFlow13 add-flows|add-groups|add-meters tcp:127.0.0.1:PORT ...` (with or
//! without `--bundle`) to run to completion: HELLO, FEATURES_REPLY, GET_CONFIG_REPLY,
//! BARRIER_REPLY, ECHO_REPLY, empty MULTIPART replies (ovs-ofctl asks for the port list to map
//! port names) and ONF bundle control replies. FLOW_MOD, GROUP_MOD and METER_MOD, sent directly or
//! inside an ONF bundle add message, are recorded byte for byte, in arrival order. That gives the
//! exact bytes Open vSwitch itself encodes for a flow written as text.
//!
//! Deliberately independent of the `ofproto` codec: it parses only the 8-byte header and the ONF
//! experimenter framing, so a codec bug cannot hide in both sides of a comparison.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const OFP13_VERSION: u8 = 0x04;
const OFPT_HELLO: u8 = 0;
const OFPT_ECHO_REQUEST: u8 = 2;
const OFPT_ECHO_REPLY: u8 = 3;
const OFPT_EXPERIMENTER: u8 = 4;
const OFPT_FEATURES_REQUEST: u8 = 5;
const OFPT_FEATURES_REPLY: u8 = 6;
const OFPT_GET_CONFIG_REQUEST: u8 = 7;
const OFPT_GET_CONFIG_REPLY: u8 = 8;
const OFPT_FLOW_MOD: u8 = 14;
const OFPT_GROUP_MOD: u8 = 15;
const OFPT_MULTIPART_REQUEST: u8 = 18;
const OFPT_MULTIPART_REPLY: u8 = 19;
const OFPT_BARRIER_REQUEST: u8 = 20;
const OFPT_BARRIER_REPLY: u8 = 21;
const OFPT_METER_MOD: u8 = 29;
const OFPMP_TABLE_FEATURES: u16 = 12;

const ONF_EXPERIMENTER_ID: u32 = 0x4f4e_4600;
const ONFT_BUNDLE_CONTROL: u32 = 2300;
const ONFT_BUNDLE_ADD_MESSAGE: u32 = 2301;
/// Experimenter header (16) + bundle id (4) + type (2) + flags (2).
const BUNDLE_CONTROL_LEN: usize = 24;
/// Experimenter header (16) + bundle id (4) + pad (2) + flags (2), then the embedded message.
const BUNDLE_ADD_HEADER_LEN: usize = 24;

/// One recorded modification message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The whole message, header included.
    pub bytes: Vec<u8>,
    /// Whether it arrived inside an ONF bundle add message.
    pub in_bundle: bool,
}

/// A running recording switch; stops accepting when dropped.
pub struct RecordingSwitch {
    addr: SocketAddr,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    stopping: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl RecordingSwitch {
    /// Bind `127.0.0.1:0` and start accepting connections.
    pub fn start() -> io::Result<RecordingSwitch> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let stopping = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let recorded = Arc::clone(&recorded);
            let stopping = Arc::clone(&stopping);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let recorded = Arc::clone(&recorded);
                    std::thread::spawn(move || {
                        // A connection ends when ovs-ofctl closes it; errors only end it sooner.
                        let _ = serve(stream, &recorded);
                    });
                }
            })
        };
        Ok(RecordingSwitch {
            addr,
            recorded,
            stopping,
            acceptor: Some(acceptor),
        })
    }

    /// The `ovs-ofctl` target for this switch, `tcp:127.0.0.1:PORT`.
    pub fn target(&self) -> String {
        format!("tcp:{}", self.addr)
    }

    /// Remove and return everything recorded so far.
    pub fn take(&self) -> Vec<Recorded> {
        std::mem::take(&mut *self.recorded.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for RecordingSwitch {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the acceptor so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Read one whole OpenFlow message; `None` at a clean end of stream.
fn read_message(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut header = [0u8; 8];
    match stream.read_exact(&mut header) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
    if length < header.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("OpenFlow length {length} < 8"),
        ));
    }
    let mut message = header.to_vec();
    message.resize(length, 0);
    stream.read_exact(&mut message[8..])?;
    Ok(Some(message))
}

/// Return a message of `kind` with `xid` and `body`.
fn message(kind: u8, xid: [u8; 4], body: &[u8]) -> Vec<u8> {
    let length = u16::try_from(8 + body.len()).unwrap_or(u16::MAX);
    let mut bytes = vec![OFP13_VERSION, kind];
    bytes.extend_from_slice(&length.to_be_bytes());
    bytes.extend_from_slice(&xid);
    bytes.extend_from_slice(body);
    bytes
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    let word = bytes.get(at..at + 4)?;
    Some(u32::from_be_bytes([word[0], word[1], word[2], word[3]]))
}

/// A table features entry for table 0 with the eight properties OVS requires, all empty.
fn one_table_features() -> Vec<u8> {
    // Instructions, next tables, write/apply actions, match, wildcards, write/apply set-field.
    const REQUIRED_PROPERTIES: [u16; 8] = [0, 2, 4, 6, 8, 10, 12, 14];
    let length = 64 + 8 * REQUIRED_PROPERTIES.len();
    let mut entry = Vec::with_capacity(length);
    entry.extend_from_slice(&(length as u16).to_be_bytes()); // length
    entry.push(0); // table id
    entry.extend_from_slice(&[0; 5]); // pad
    entry.extend_from_slice(&[0; 32]); // name
    entry.extend_from_slice(&u64::MAX.to_be_bytes()); // metadata match
    entry.extend_from_slice(&u64::MAX.to_be_bytes()); // metadata write
    entry.extend_from_slice(&0u32.to_be_bytes()); // config
    entry.extend_from_slice(&1_000_000u32.to_be_bytes()); // max entries
    for property in REQUIRED_PROPERTIES {
        // Type, length 4 (header only), padded to 8 bytes.
        entry.extend_from_slice(&property.to_be_bytes());
        entry.extend_from_slice(&4u16.to_be_bytes());
        entry.extend_from_slice(&[0; 4]);
    }
    entry
}

fn serve(mut stream: TcpStream, recorded: &Mutex<Vec<Recorded>>) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.set_nodelay(true)?;
    // HELLO with a version bitmap element offering only OpenFlow 1.3.
    let bitmap_element = [0x00, 0x01, 0x00, 0x08, 0x00, 0x00, 0x00, 0x10];
    stream.write_all(&message(OFPT_HELLO, [0; 4], &bitmap_element))?;

    let record = |bytes: &[u8], in_bundle: bool| {
        recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Recorded {
                bytes: bytes.to_vec(),
                in_bundle,
            });
    };

    while let Some(request) = read_message(&mut stream)? {
        let kind = request[1];
        let xid = [request[4], request[5], request[6], request[7]];
        let body = &request[8..];
        let reply = match kind {
            OFPT_ECHO_REQUEST => Some(message(OFPT_ECHO_REPLY, xid, body)),
            OFPT_FEATURES_REQUEST => {
                let mut features = Vec::new();
                features.extend_from_slice(&0x0000_0000_0000_00abu64.to_be_bytes()); // datapath id
                features.extend_from_slice(&0u32.to_be_bytes()); // n_buffers
                features.push(254); // n_tables
                features.push(0); // auxiliary id
                features.extend_from_slice(&[0, 0]); // pad
                features.extend_from_slice(&0x4fu32.to_be_bytes()); // capabilities
                features.extend_from_slice(&0u32.to_be_bytes()); // reserved
                Some(message(OFPT_FEATURES_REPLY, xid, &features))
            }
            OFPT_GET_CONFIG_REQUEST => Some(message(
                OFPT_GET_CONFIG_REPLY,
                xid,
                &[0x00, 0x00, 0xff, 0xff], // flags normal, miss_send_len no-buffer
            )),
            OFPT_BARRIER_REQUEST => Some(message(OFPT_BARRIER_REPLY, xid, &[])),
            OFPT_MULTIPART_REQUEST => {
                // Same multipart type, no MORE flag, no entries; except table features, which
                // OVS refuses empty (ovs-ofctl asks for them to learn table names).
                let kind = body.get(..2).unwrap_or(&[0xff, 0xff]);
                let mut reply = vec![kind[0], kind[1], 0, 0, 0, 0, 0, 0];
                if kind == OFPMP_TABLE_FEATURES.to_be_bytes() {
                    reply.extend_from_slice(&one_table_features());
                }
                Some(message(OFPT_MULTIPART_REPLY, xid, &reply))
            }
            OFPT_FLOW_MOD | OFPT_GROUP_MOD | OFPT_METER_MOD => {
                record(&request, false);
                None
            }
            OFPT_EXPERIMENTER if be32(body, 0) == Some(ONF_EXPERIMENTER_ID) => {
                match be32(body, 4) {
                    Some(ONFT_BUNDLE_CONTROL) if request.len() >= BUNDLE_CONTROL_LEN => {
                        // The reply to OPEN/CLOSE/COMMIT/DISCARD_REQUEST (even) is the next type.
                        let mut reply = request[..BUNDLE_CONTROL_LEN].to_vec();
                        reply[2..4].copy_from_slice(&(BUNDLE_CONTROL_LEN as u16).to_be_bytes());
                        let control_type = u16::from_be_bytes([reply[20], reply[21]]);
                        reply[20..22].copy_from_slice(&(control_type + 1).to_be_bytes());
                        Some(reply)
                    }
                    Some(ONFT_BUNDLE_ADD_MESSAGE) if request.len() > BUNDLE_ADD_HEADER_LEN => {
                        record(&request[BUNDLE_ADD_HEADER_LEN..], true);
                        None
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(reply) = reply {
            stream.write_all(&reply)?;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    Ok(())
}
