//! netmaster's command line: bad options exit with Contiv's code 22, help exits 0.

use std::process::Command;

fn netmaster(args: &[&str]) -> i32 {
    Command::new(env!("CARGO_BIN_EXE_netmaster"))
        .args(args)
        .output()
        .unwrap()
        .status
        .code()
        .unwrap_or(-1)
}

#[test]
fn bad_options_exit_22() {
    // Missing required --mode/--netmode/--fwdmode.
    assert_eq!(netmaster(&[]), 22);
    // A value outside the allowed set.
    assert_eq!(
        netmaster(&[
            "--mode",
            "bogus",
            "--netmode",
            "vxlan",
            "--fwdmode",
            "bridge",
            "--etcd",
            "http://127.0.0.1:1"
        ]),
        22
    );
    assert_eq!(
        netmaster(&[
            "--mode",
            "test",
            "--netmode",
            "vxlan",
            "--fwdmode",
            "hub",
            "--etcd",
            "http://127.0.0.1:1"
        ]),
        22
    );
    assert_eq!(netmaster(&["--help"]), 0);
}
