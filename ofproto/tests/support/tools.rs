//! Running `ovs-ofctl` and our `ofp-print` binary, and hex helpers.

use std::io::Write;
use std::process::{Command, Stdio};

/// Lower-case hex of `bytes`, no separators.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Run a command; `Ok(stdout)` on success, `Err(stderr)` otherwise.
pub fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {args:?} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        ))
    }
}

/// `ovs-ofctl ofp-print HEX`, trimmed.
pub fn ovs_ofp_print(message: &[u8]) -> Result<String, String> {
    run("ovs-ofctl", &["ofp-print", &hex(message)]).map(|s| s.trim_end().to_string())
}

/// Our `ofp-print` binary over several messages at once (one hex line each, on stdin); returns
/// one rendering per message, in order (empty where it could not decode). `--separate` makes
/// the binary end each rendering with a record-separator line.
pub fn our_ofp_print_many(binary: &str, messages: &[Vec<u8>]) -> Result<Vec<String>, String> {
    let mut child = Command::new(binary)
        .arg("--separate")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {binary}: {e}"))?;
    let input: String = messages.iter().map(|m| hex(m) + "\n").collect();
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    let _ = writer.join();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    // Each rendering is followed by the separator, so the last piece is the empty tail; a
    // message that failed to decode renders as an empty piece in its place.
    let mut renderings: Vec<String> = text
        .split("\n\u{1e}\n")
        .map(|s| s.trim_end().to_string())
        .collect();
    if renderings.last().is_some_and(String::is_empty) {
        renderings.pop();
    }
    if renderings.len() != messages.len() {
        return Err(format!(
            "{binary}: {} renderings for {} messages; stderr: {}",
            renderings.len(),
            messages.len(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(renderings)
}
