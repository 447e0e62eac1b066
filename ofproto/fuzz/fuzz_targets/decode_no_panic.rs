//! `Message::decode`, `encode`, the ovs-ofctl text of flows and groups (`Display`) and the
//! whole-message `ofp-print` text (`ofproto::print`) on arbitrary bytes must never panic. Unlike `decode`, this target does not check round trips, so known round-trip findings
//! do not stop it from exploring further.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofproto::Message;
use ofproto::multipart::MultipartReplyBody;

fuzz_target!(|data: &[u8]| {
    let Ok((xid, message)) = Message::decode(data) else {
        return;
    };
    let encoded = message.encode_to_vec(xid);
    let _ = Message::decode(&encoded);
    let _ = message.check();
    // Render what has ovs-ofctl text.
    let text = match &message {
        Message::FlowMod(flow_mod) => flow_mod.to_string(),
        Message::GroupMod(group_mod) => group_mod.to_string(),
        Message::MultipartReply(reply) => match &reply.body {
            MultipartReplyBody::Flow(entries) => entries.iter().map(|e| e.to_string()).collect(),
            _ => String::new(),
        },
        _ => String::new(),
    };
    std::hint::black_box(text);
    std::hint::black_box(ofproto::print::render(xid, &message));
    std::hint::black_box(ofproto::print::render_bytes(data).ok());
});
