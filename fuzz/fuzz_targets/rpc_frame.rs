//! What the ofnet RPC port reads: JSON values back to back (`ofnet::rpc::JsonCodec`). Arbitrary
//! bytes fed in two pieces must never panic, and the codec must always make progress (each
//! decode either yields a frame, waits for more bytes, or fails the connection).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ofnet::rpc::{Frame, JsonCodec};
use tokio_util::codec::Decoder;

fuzz_target!(|data: &[u8]| {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let at = usize::from(split) % (data.len() + 1);
    let mut codec = JsonCodec;
    let mut buf = BytesMut::new();
    for piece in [&data[..at], &data[at..]] {
        buf.extend_from_slice(piece);
        loop {
            let before = buf.len();
            match codec.decode(&mut buf) {
                Ok(Some(Frame::Value(v))) => {
                    assert!(buf.len() < before, "a value consumed no bytes");
                    // What a service would do with a request: read method and params.
                    let method = v.get("method").and_then(|m| m.as_str()).unwrap_or("");
                    let params = v.get("params").cloned().unwrap_or_default();
                    let _ = ofnet::rpc::params::<Vec<serde_json::Value>>(method, params);
                }
                Ok(Some(Frame::Malformed(_))) => {
                    assert!(buf.len() < before, "malformed bytes were not skipped");
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
});
