//! Running short-lived tools (`ip`, `ovs-vsctl`, `ovs-ofctl`, ...) and turning failure into
//! an [`Error`] that shows the command line and its stderr.

use crate::{Error, Result};
use std::process::{Command, Stdio};

/// Run `argv` to completion and return its stdout; a non-zero exit is an error with stderr.
pub fn run<S: AsRef<str>>(argv: &[S]) -> Result<String> {
    let mut cmd = command(argv)?;
    output(&mut cmd, argv)
}

/// Run a prepared command; `argv` is only used to describe it in errors.
pub(crate) fn output<S: AsRef<str>>(cmd: &mut Command, argv: &[S]) -> Result<String> {
    let shown = show(argv);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            program: shown.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Command {
            command: shown,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Build a [`Command`] from an argument vector.
pub(crate) fn command<S: AsRef<str>>(argv: &[S]) -> Result<Command> {
    let (program, args) = argv.split_first().ok_or_else(|| Error::Parse {
        what: "command line",
        line: String::new(),
    })?;
    let mut cmd = Command::new(program.as_ref());
    cmd.args(args.iter().map(AsRef::as_ref));
    Ok(cmd)
}

pub(crate) fn show<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_carries_the_command_and_stderr() {
        let err = run(&["sh", "-c", "echo boom >&2; exit 3"]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("sh -c"), "{text}");
        assert!(text.contains("boom"), "{text}");
    }

    #[test]
    fn success_returns_stdout() {
        assert_eq!(run(&["echo", "hi"]).unwrap(), "hi\n");
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        assert!(matches!(
            run(&["/nonexistent/tool"]),
            Err(Error::Spawn { .. })
        ));
    }
}
