//! netctl: parse the command line (reference §8), run it against netmaster, print the result, and
//! exit with netctl's codes (0 ok, 1 usage, 2 unreachable, 3 refused, 4 I/O).

use std::io::Write;

use clap::{CommandFactory, Parser};
use master::netctl::{self, Cli, NetctlError};

fn main() {
    let args = netctl::go_style(&Cli::command(), std::env::args_os());
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            let code = match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
                _ => netctl::EXIT_USAGE,
            };
            std::process::exit(code);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("netctl: cannot start runtime: {e}");
            std::process::exit(netctl::EXIT_IO);
        }
    };
    let code = match runtime.block_on(netctl::run(&cli)) {
        Ok(out) => match std::io::stdout().write_all(out.as_bytes()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("netctl: {}", NetctlError::Io(e));
                netctl::EXIT_IO
            }
        },
        Err(e) => {
            match &e {
                NetctlError::Client(master::client::ClientError::Unreachable { .. }) => {
                    eprintln!("netctl: {e}\n(is netmaster running? set --netmaster or NETMASTER)")
                }
                _ => eprintln!("{e}"),
            }
            e.exit_code()
        }
    };
    std::process::exit(code);
}
