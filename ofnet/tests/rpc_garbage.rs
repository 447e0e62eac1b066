//! The ofnet RPC frame decoder (`rpc::JsonCodec`) on garbage: the same property as the
//! `fuzz/` target `rpc_frame`, run as a bounded randomized loop so CI checks it without nightly:
//! mutated and random bytes, fed in two pieces, never panic and always make progress.

#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use ofnet::rpc::{Frame, JsonCodec};
use tokio_util::codec::Decoder;

use testbed::garbage::{Rng, mutate};

/// The decoder's structural characters, inserted by [`mutate`].
const ALPHABET: &[u8] = b"{}[]\",:\n0-e\\";

/// Decode `data` fed in two pieces split at `at`; returns the number of values.
fn decode_all(data: &[u8], at: usize) -> usize {
    let mut codec = JsonCodec;
    let mut buf = BytesMut::new();
    let mut values = 0;
    for piece in [&data[..at], &data[at..]] {
        buf.extend_from_slice(piece);
        loop {
            let before = buf.len();
            match codec.decode(&mut buf) {
                Ok(Some(Frame::Value(v))) => {
                    assert!(buf.len() < before, "a value consumed no bytes");
                    let method = v.get("method").and_then(|m| m.as_str()).unwrap_or("");
                    let params = v.get("params").cloned().unwrap_or_default();
                    let _ = ofnet::rpc::params::<Vec<serde_json::Value>>(method, params);
                    values += 1;
                }
                Ok(Some(Frame::Malformed(_))) => {
                    assert!(buf.len() < before, "malformed bytes were not skipped");
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
    values
}

#[test]
fn garbage_frames_never_panic_and_always_progress() {
    let seeds: [&[u8]; 4] = [
        br#"{"method":"OfnetAgent.AddNetwork","params":[{"vlan":10,"vni":5000}],"id":1}"#,
        b"{\"result\":true,\"error\":null,\"id\":7}\n{\"method\":\"x\",\"params\":[],\"id\":null}\n",
        br#"[1,2,{"a":"\u00e9\ud800"}] 3 "str" null"#,
        b"\n\n   \t",
    ];
    let mut rng = Rng(0x243f_6a88_85a3_08d3);
    let mut values = 0;
    for i in 0..20_000 {
        let data = if i % 4 == 3 {
            (0..rng.below(256)).map(|_| rng.next_u64() as u8).collect()
        } else {
            {
                let seed = seeds[rng.below(seeds.len())];
                mutate(&mut rng, seed, ALPHABET)
            }
        };
        let at = rng.below(data.len() + 1);
        values += decode_all(&data, at);
    }
    // The loop reached the decoder's accepting paths too, not only its error paths.
    assert!(values > 1_000, "only {values} values decoded");
    // A valid value after garbage on its own line is still read.
    assert_eq!(decode_all(b"\x00\xff{oops\n{\"id\":1}\n", 3), 1);
}
