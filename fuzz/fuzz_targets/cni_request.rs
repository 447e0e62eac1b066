//! What the CNI socket reads: an HTTP/1.1 request (head and `Content-Length` body) and the pod
//! request in its JSON body. Arbitrary bytes must never panic; a request that parses must carry
//! exactly the body its `Content-Length` announced (never more than the limit).
#![no_main]

use libfuzzer_sys::fuzz_target;
use plugin::http::{MAX_BODY, read_request};

fuzz_target!(|data: &[u8]| {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    let mut input = data;
    let Ok(req) = rt.block_on(read_request(&mut input)) else {
        return;
    };
    assert!(req.body.len() <= MAX_BODY);
    let _ = plugin::cniserver::parse(&req);
    // The body as a pod request whatever the path said.
    let _ = serde_json::from_slice::<cni::api::PodRequest>(&req.body);
});
