//! netplugin's decoders of network input on garbage: the CNI socket's request reader and pod
//! request decoder, and the OVSDB framing and monitor cache. The same properties as the `fuzz/`
//! targets `cni_request` and `ovsdb_reply`, run as bounded randomized loops so CI checks them
//! without nightly.

#![allow(clippy::unwrap_used)]

use plugin::http::{MAX_BODY, read_request};
use plugin::ovsdb::Cache;
use plugin::ovsdb::framing::MessageBuffer;

use testbed::garbage::{Rng, mutate};

/// The decoder's structural characters, inserted by [`mutate`].
const ALPHABET: &[u8] = b"{}[]\",:\r\n0-e\\ ";

#[test]
fn cni_requests_from_garbage_never_panic() {
    let body = br#"{"K8S_POD_NAME":"web-1","K8S_POD_NAMESPACE":"default","K8S_POD_INFRA_CONTAINER_ID":"abc","CNI_NETNS":"/var/run/netns/x","CNI_IFNAME":"eth0","CNI_CONTAINERID":"abc","cniVersion":"1.0.0","labels":{"io.contiv.network":"net"}}"#;
    let full = [
        format!(
            "POST /ContivCNI.AddPod HTTP/1.1\r\nHost: unix\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes(),
        body.to_vec(),
    ]
    .concat();
    let seeds: [&[u8]; 3] = [
        &full,
        b"POST /ContivCNI.DelPod HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        b"GET /ContivCNI.Status HTTP/1.1\r\n\r\n",
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut rng = Rng(0x1319_8a2e_0370_7344);
    let mut parsed = 0;
    let mut pods = 0;
    for i in 0..20_000 {
        let data: Vec<u8> = if i % 5 == 4 {
            (0..rng.below(512)).map(|_| rng.next_u64() as u8).collect()
        } else {
            {
                let seed = seeds[rng.below(seeds.len())];
                mutate(&mut rng, seed, ALPHABET)
            }
        };
        let mut input = data.as_slice();
        let Ok(req) = rt.block_on(read_request(&mut input)) else {
            continue;
        };
        assert!(req.body.len() <= MAX_BODY);
        parsed += 1;
        if plugin::cniserver::parse(&req).is_ok() {
            pods += 1;
        }
    }
    assert!(parsed > 1_000, "only {parsed} requests parsed");
    assert!(pods > 100, "only {pods} pod requests decoded");
}

#[test]
fn ovsdb_replies_from_garbage_never_panic_and_splits_do_not_matter() {
    let seeds: [&[u8]; 3] = [
        br#"{"id":1,"result":{"Bridge":{"b1":{"new":{"name":"contivVxlanBridge","ports":["set",[["uuid","p1"]]],"controller":["set",[]],"fail_mode":"secure","protocols":"OpenFlow13"}}},"Port":{"p1":{"new":{"name":"vvport1","interfaces":["uuid","i1"],"tag":["set",[]]}}},"Interface":{"i1":{"new":{"name":"vvport1","ofport":3,"type":""}}}},"error":null}"#,
        br#"{"id":null,"method":"update","params":[null,{"Port":{"p1":{"old":{"name":"vvport1"}}}}]}"#,
        br#"{"id":"echo","method":"echo","params":[]}"#,
    ];
    let mut rng = Rng(0xa409_3822_299f_31d0);
    let mut decoded = 0;
    for i in 0..20_000 {
        let data: Vec<u8> = if i % 5 == 4 {
            (0..rng.below(512)).map(|_| rng.next_u64() as u8).collect()
        } else {
            {
                let seed = seeds[rng.below(seeds.len())];
                mutate(&mut rng, seed, ALPHABET)
            }
        };
        let at = rng.below(data.len() + 1);
        let mut whole = MessageBuffer::default();
        whole.extend(&data);
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
        let Ok(messages) = all else { continue };
        let mut cache = Cache::default();
        for m in &messages {
            decoded += 1;
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
            let _ = cache.port("vvport1");
            let _ = cache.interface("vvport1");
        }
    }
    assert!(decoded > 1_000, "only {decoded} messages decoded");
}
