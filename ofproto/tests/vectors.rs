//! Conformance against the os-ken 4.2.2 OpenFlow 1.3 vectors (see `/work/shared/vectors/README.md`):
//! every `.packet` decodes, re-encodes to the identical bytes and its decoded fields equal the
//! JSON next to it (through the os-ken-shaped converter in `oskenjson`); every `.truncated64`
//! fails with a truncated error.
//!
//! The vectors are read from the shared directory (or `OFPROTO_VECTORS`); when it is missing the
//! test skips with a message, except under `CI=true`, where it fails.

#![allow(clippy::unwrap_used)]

#[path = "conformance/oskenjson.rs"]
mod oskenjson;

use std::path::PathBuf;

use ofproto::Message;

fn vectors_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("OFPROTO_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/vectors/os-ken-4.2.2")
        });
    if dir.join("packet_data_of13").is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "os-ken vectors not found at {} (set OFPROTO_VECTORS)",
            dir.display()
        );
    }
    eprintln!("SKIP: os-ken vectors not found at {}", dir.display());
    None
}

/// Vectors whose body ofproto keeps opaque on purpose (decode and byte-exact re-encode still
/// checked): the ONF flow-monitor multipart request (ONFMP_FLOW_MONITOR, exp_type 1870), which
/// the controller never sends; it stays `MultipartRequestBody::Experimenter`.
const UNMODELLED: &[&str] = &["4-63-onf_flow_monitor_request.packet"];

#[test]
fn os_ken_of13_vectors() {
    let Some(dir) = vectors_dir() else { return };
    let mut names: Vec<_> = std::fs::read_dir(dir.join("packet_data_of13"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let (mut passed, mut failures) = (0, Vec::new());
    for name in &names {
        let bytes = std::fs::read(dir.join("packet_data_of13").join(name)).unwrap();
        let result = if name.ends_with(".truncated64") {
            match Message::decode(&bytes) {
                Err(e) if e.is_truncated() => Ok(()),
                other => Err(format!("expected a truncated error, got {other:?}")),
            }
        } else {
            check_packet(&dir, name, &bytes)
        };
        match result {
            Ok(()) => passed += 1,
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    println!(
        "os-ken OpenFlow 1.3 vectors: {passed}/{} passed",
        names.len()
    );
    for f in &failures {
        println!("FAIL {f}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
}

fn check_packet(dir: &std::path::Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    let (xid, msg) = Message::decode(bytes).map_err(|e| format!("decode: {e}"))?;
    let again = msg.encode_to_vec(xid);
    if again != bytes {
        let at = again
            .iter()
            .zip(bytes)
            .position(|(a, b)| a != b)
            .unwrap_or(again.len().min(bytes.len()));
        return Err(format!(
            "re-encoding differs at byte {at} (len {} vs {}): ours {:02x?} theirs {:02x?}",
            again.len(),
            bytes.len(),
            &again[at.saturating_sub(4)..(at + 12).min(again.len())],
            &bytes[at.saturating_sub(4)..(at + 12).min(bytes.len())]
        ));
    }
    let json_path = dir.join("json_of13").join(format!("{name}.json"));
    let expect: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&json_path)
            .map_err(|e| format!("{}: {e}", json_path.display()))?,
    )
    .map_err(|e| format!("json: {e}"))?;
    if UNMODELLED.contains(&name) {
        return Ok(());
    }
    let ours = oskenjson::message(&msg);
    oskenjson::compare(&expect, &ours, "$")
}

/// Every prefix of every vector: decoding never panics, and a prefix shorter than the header's
/// length field is reported as truncated.
#[test]
fn every_prefix_of_every_vector_is_truncated() {
    let Some(dir) = vectors_dir() else { return };
    let mut checked = 0;
    for entry in std::fs::read_dir(dir.join("packet_data_of13")).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        for n in 0..bytes.len() {
            let r = Message::decode(&bytes[..n]);
            if n < bytes.len()
                && bytes.len() >= 4
                && usize::from(u16::from_be_bytes([bytes[2], bytes[3]])) == bytes.len()
            {
                assert!(
                    matches!(&r, Err(e) if e.is_truncated()),
                    "{} cut at {n}: {r:?}",
                    path.display()
                );
            }
            checked += 1;
        }
    }
    println!("{checked} prefixes decoded without panicking");
}
