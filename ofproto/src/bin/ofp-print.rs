//! `ofp-print`: print OpenFlow 1.3 messages given as hex the way `ovs-ofctl ofp-print` does.
//!
//! Usage: `ofp-print [--separate] [HEX...]`. Each argument is one message; without arguments,
//! each non-empty line of standard input is one message. Whitespace inside the hex is ignored
//! (so `ovs-ofctl`'s spaced dumps paste as is). Each message prints as a header line,
//! `OFPT_FLOW_MOD (OF1.3) (xid=0x2):`, followed by its body in `ovs-ofctl` syntax.
//! `--separate` prints a record separator line (`\x1e`) after each message, for tools that feed
//! many messages at once and need to split the output.
//!
//! A line that is not hex, or that does not decode, is reported on standard error with its line
//! number and the reason; the others are still printed, and the exit status is 1.
//!
//! The text comes from [`ofproto::print::render_bytes`]; this binary only parses the hex and
//! reports bad lines.

use std::io::{self, BufRead, Write};
use std::process::ExitCode;

/// Why one input line could not be printed.
#[derive(Debug)]
enum LineError {
    /// A character that is neither a hex digit nor whitespace.
    BadDigit { column: usize, found: char },
    /// An odd number of hex digits.
    OddDigits { count: usize },
    /// No hex digits at all.
    Empty,
    /// The bytes are not one OpenFlow 1.3 message.
    Decode(ofproto::DecodeError),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::BadDigit { column, found } => {
                write!(f, "bad hex digit {found:?} at column {column}")
            }
            LineError::OddDigits { count } => {
                write!(
                    f,
                    "odd number of hex digits ({count}): the last byte is incomplete"
                )
            }
            LineError::Empty => f.write_str("no hex digits"),
            LineError::Decode(err) => write!(f, "cannot decode OpenFlow message: {err}"),
        }
    }
}

/// Parse hex digits, ignoring whitespace.
fn parse_hex(text: &str) -> Result<Vec<u8>, LineError> {
    let mut digits = Vec::with_capacity(text.len());
    for (index, c) in text.chars().enumerate() {
        if c.is_whitespace() {
            continue;
        }
        let value = c.to_digit(16).ok_or(LineError::BadDigit {
            column: index + 1,
            found: c,
        })?;
        // A hex digit is below 16.
        digits.push(value as u8);
    }
    if digits.is_empty() {
        return Err(LineError::Empty);
    }
    if digits.len() % 2 != 0 {
        return Err(LineError::OddDigits {
            count: digits.len(),
        });
    }
    Ok(digits.chunks_exact(2).map(|p| (p[0] << 4) | p[1]).collect())
}

/// Print one line of input; errors name the line.
fn print_one(text: &str) -> Result<String, LineError> {
    let bytes = parse_hex(text)?;
    ofproto::print::render_bytes(&bytes).map_err(LineError::Decode)
}

fn main() -> ExitCode {
    let mut separate = false;
    let mut inputs = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--separate" => separate = true,
            "-h" | "--help" => {
                println!(
                    "usage: ofp-print [--separate] [HEX...]  (no HEX: one message per stdin line)"
                );
                return ExitCode::SUCCESS;
            }
            _ => inputs.push(arg),
        }
    }
    let from_stdin = inputs.is_empty();
    if from_stdin {
        for line in io::stdin().lock().lines() {
            match line {
                Ok(line) => inputs.push(line),
                Err(err) => {
                    eprintln!("ofp-print: cannot read standard input: {err}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let stdout = io::stdout();
    let mut stdout = stdout.lock();
    let mut failed = false;
    for (index, text) in inputs.iter().enumerate() {
        if from_stdin && text.trim().is_empty() {
            continue;
        }
        let rendered = match print_one(text) {
            Ok(rendered) => rendered,
            Err(err) => {
                let place = if from_stdin { "line" } else { "argument" };
                eprintln!("ofp-print: {place} {}: {err}", index + 1);
                failed = true;
                // Keep the output aligned with the input for `--separate` readers.
                String::new()
            }
        };
        let result = if separate {
            writeln!(stdout, "{rendered}\n\u{1e}")
        } else if rendered.is_empty() {
            Ok(())
        } else {
            writeln!(stdout, "{rendered}")
        };
        if result.is_err() {
            // The reader went away (e.g. `| head`); nothing more to do.
            return ExitCode::FAILURE;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
