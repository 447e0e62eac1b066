//! The differential corpus (`flows.txt`) and the allow-list of known, explained mismatches
//! (`allow-list.txt`).

use std::path::PathBuf;

/// One corpus flow.
#[derive(Debug, Clone)]
pub struct CorpusFlow {
    /// The flow as written, in ovs-ofctl syntax.
    pub line: String,
    /// Its unique cookie, used to find it again in captures and dumps.
    pub cookie: u64,
    /// The section comment it sits under.
    pub section: String,
}

fn support_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(name)
}

/// Path of a file under `tests/support/`.
pub fn path(name: &str) -> String {
    support_file(name).display().to_string()
}

/// Load `flows.txt`; every flow line must start with a unique `cookie=0x...`.
pub fn load_flows() -> Vec<CorpusFlow> {
    let text = std::fs::read_to_string(support_file("flows.txt")).expect("flows.txt");
    let mut section = String::new();
    let mut flows = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix('#') {
            section = comment.trim().to_string();
            continue;
        }
        let cookie = line
            .strip_prefix("cookie=0x")
            .and_then(|rest| rest.split(',').next())
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .unwrap_or_else(|| panic!("corpus line without a leading cookie: {line}"));
        flows.push(CorpusFlow {
            line: line.to_string(),
            cookie,
            section: section.clone(),
        });
    }
    let mut cookies: Vec<u64> = flows.iter().map(|f| f.cookie).collect();
    cookies.sort_unstable();
    cookies.dedup();
    assert_eq!(cookies.len(), flows.len(), "corpus cookies must be unique");
    flows
}

/// Which comparison an allow-list entry excuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Our `ofp-print` text vs `ovs-ofctl ofp-print`.
    Print,
    /// Re-encoding the decoded message vs the bytes OVS sent.
    Encode,
    /// Our rendering vs `ovs-ofctl dump-flows`.
    Dump,
}

/// One allowed mismatch: flows whose line contains `pattern`, for `check`, because `reason`.
#[derive(Debug, Clone)]
pub struct Allowed {
    pub pattern: String,
    pub check: Check,
    pub reason: String,
}

/// Load `allow-list.txt`: lines `check | pattern | reason`, `#` comments.
pub fn load_allow_list() -> Vec<Allowed> {
    let Ok(text) = std::fs::read_to_string(support_file("allow-list.txt")) else {
        return Vec::new();
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let mut parts = line.splitn(3, '|').map(str::trim);
            let check = match parts.next() {
                Some("print") => Check::Print,
                Some("encode") => Check::Encode,
                Some("dump") => Check::Dump,
                other => panic!("allow-list: unknown check {other:?} in {line}"),
            };
            let pattern = parts.next().unwrap_or_default().to_string();
            let reason = parts.next().unwrap_or_default().to_string();
            assert!(
                !pattern.is_empty() && !reason.is_empty(),
                "allow-list entries need a pattern and a reason: {line}"
            );
            Allowed {
                pattern,
                check,
                reason,
            }
        })
        .collect()
}

/// The allow-list entry excusing `check` for `flow`, if any.
pub fn allowed<'a>(list: &'a [Allowed], flow: &str, check: Check) -> Option<&'a Allowed> {
    list.iter()
        .find(|a| a.check == check && flow.contains(&a.pattern))
}
