//! netctl, the command-line client (reference §8): the command tree, flags, table/JSON/quiet output
//! and exit codes. The binary only parses arguments and calls [`run`].
//!
//! Exit codes: 0 ok, 1 usage, 2 netmaster unreachable, 3 netmaster refused the request (its message is
//! printed), 4 local I/O.

mod argv;
mod cli;
mod commands;
mod table;
mod trace;

pub use argv::go_style;
pub use cli::*;
pub use commands::{NetctlError, run};

pub const EXIT_USAGE: i32 = 1;
pub const EXIT_REQUEST: i32 = 2;
pub const EXIT_REST: i32 = 3;
pub const EXIT_IO: i32 = 4;

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use clap::Parser;

    #[test]
    fn command_tree_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_contiv_style_invocations() {
        let cli = Cli::try_parse_from([
            "netctl",
            "net",
            "create",
            "-t",
            "t1",
            "-e",
            "vlan",
            "-p",
            "10",
            "-s",
            "10.1.1.0/24",
            "n1",
        ])
        .unwrap();
        match cli.command {
            Command::Network(NetworkCmd::Create {
                name,
                t,
                encap,
                pkt_tag,
                subnet,
                ..
            }) => {
                assert_eq!(
                    (
                        name.as_str(),
                        t.tenant.as_str(),
                        encap.as_str(),
                        pkt_tag,
                        subnet.as_str()
                    ),
                    ("n1", "t1", "vlan", 10, "10.1.1.0/24")
                );
            }
            other => panic!("parsed as {other:?}"),
        }
        let cli = Cli::try_parse_from([
            "netctl", "policy", "rule-add", "p1", "1", "-d", "out", "-o", "db", "-P", "53", "-l",
            "udp",
        ])
        .unwrap();
        match cli.command {
            Command::Policy(PolicyCmd::RuleAdd { rule, .. }) => {
                assert_eq!(
                    (
                        rule.direction.as_str(),
                        rule.to_network.as_str(),
                        rule.port,
                        rule.priority
                    ),
                    ("out", "db", 53, 1)
                );
            }
            other => panic!("parsed as {other:?}"),
        }
        assert!(
            Cli::try_parse_from(["netctl", "network", "create", "n1"]).is_err(),
            "subnet is required"
        );
    }
}
