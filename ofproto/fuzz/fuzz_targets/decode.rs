//! `Message::decode` on arbitrary bytes must never panic, and whatever it accepts must survive
//! encode → decode unchanged (same xid, same value) and re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofproto::Message;

fuzz_target!(|data: &[u8]| {
    let Ok((xid, message)) = Message::decode(data) else {
        return;
    };
    let encoded = message.encode_to_vec(xid);
    let (xid_again, message_again) = match Message::decode(&encoded) {
        Ok(decoded) => decoded,
        Err(err) => panic!("re-encoded message does not decode: {err}\nencoded: {encoded:02x?}"),
    };
    assert_eq!(xid, xid_again, "xid changed in a round trip");
    assert_eq!(message, message_again, "decode(encode(m)) != m");
    assert_eq!(
        encoded,
        message_again.encode_to_vec(xid),
        "encoding is not stable"
    );
    // Rendering must not panic either.
    let _ = format!("{message:?}");
});
