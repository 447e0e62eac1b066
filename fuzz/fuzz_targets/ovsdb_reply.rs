//! What netplugin reads from ovsdb-server: JSON-RPC messages back to back (framing), and the
//! monitor's table updates applied to the cache and read back as typed rows. Arbitrary bytes,
//! split at an arbitrary point, must never panic; the split must not change what is decoded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plugin::ovsdb::Cache;
use plugin::ovsdb::framing::MessageBuffer;

fuzz_target!(|data: &[u8]| {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let at = usize::from(split) % (data.len() + 1);
    let mut whole = MessageBuffer::default();
    whole.extend(data);
    let all = whole.drain_messages();
    let mut parts = MessageBuffer::default();
    parts.extend(&data[..at]);
    let first = parts.drain_messages();
    parts.extend(&data[at..]);
    let rest = parts.drain_messages();
    if let (Ok(all), Ok(mut first), Ok(rest)) = (&all, first, rest) {
        first.extend(rest);
        assert_eq!(all, &first, "splitting the bytes changed the messages");
    }
    let Ok(messages) = all else {
        return;
    };
    let mut cache = Cache::default();
    for m in &messages {
        // An initial monitor reply is a result; an update notification's params[1].
        let updates = m
            .get("result")
            .or_else(|| m.get("params").and_then(|p| p.get(1)))
            .unwrap_or(m);
        let _ = cache.reset(updates);
        let _ = cache.apply(updates);
        let _ = cache.root();
        for b in cache.bridges() {
            let _ = cache.ports_of_bridge(&b.name);
        }
        let _ = cache.port("p");
        let _ = cache.interface("p");
    }
});
