//! `contivk8s`: the CNI executable. Reads the CNI environment and the network config on
//! stdin, forwards the request to netplugin over its unix socket, and prints the CNI result
//! or error JSON. All logic is in [`cmd`]; this file only does process I/O.

mod cmd;

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let env = cmd::env::CniEnv::read(|key| std::env::var(key).ok());
    let mut stdin = Vec::new();
    // VERSION may come without stdin; a read error leaves the config empty, which the
    // commands that need one report as a decode failure.
    let _ = std::io::stdin().read_to_end(&mut stdin);
    let (text, code) = match cmd::run(&env, &stdin) {
        Ok(cmd::Output::Json(value)) => (Some(value), ExitCode::SUCCESS),
        Ok(cmd::Output::Nothing) => (None, ExitCode::SUCCESS),
        Err(failure) => (
            Some(failure.error.to_json(&failure.version)),
            ExitCode::FAILURE,
        ),
    };
    if let Some(value) = text {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{value}");
    }
    code
}
