//! Contiv's flag spelling: Contiv's netctl parses flags the way Go's `flag` package does, where
//! a flag has one name however many letters it has, and `-name`, `-name=value`, `--name` and
//! `--name=value` all mean the same thing (`-subnet 10.1.1.0/24`, `-direction=in`, `-tag x`,
//! `--t blue`). clap reads `-direction=in` as the short flags `-d irection=in`, so before clap
//! sees the command line, [`go_style`] rewrites every token that names a flag of the command
//! being parsed into clap's spelling: a single-dash multi-letter name that is a long flag (or
//! alias) becomes `--name`, a double-dash one-letter name that is a short flag becomes `-n`.
//! Anything else (real short flags such as `-t blue`, clustered shorts, values, positional
//! arguments, everything after `--`) is left as it is.

use std::ffi::OsString;

use clap::{ArgAction, Command};

/// Rewrite `args` (program name first) from Go `flag` spelling into clap's, for `cmd`'s tree.
pub fn go_style(cmd: &Command, args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args = args.into_iter();
    let mut out: Vec<OsString> = args.next().into_iter().collect();
    let mut scope: Vec<&Command> = vec![cmd];
    let mut value_next = false;
    let mut rest_verbatim = false;
    for token in args {
        let Some(text) = token.to_str().map(str::to_owned) else {
            out.push(token);
            continue;
        };
        if rest_verbatim || value_next {
            value_next = false;
            out.push(token);
            continue;
        }
        if text == "--" {
            rest_verbatim = true;
            out.push(token);
            continue;
        }
        let Some(body) = text.strip_prefix('-').filter(|b| !b.is_empty()) else {
            // A positional argument: maybe the name of a subcommand of the current one.
            if let Some(sub) = scope.last().and_then(|c| find_subcommand(c, &text)) {
                scope.push(sub);
            }
            out.push(token);
            continue;
        };
        let body = body.strip_prefix('-').unwrap_or(body);
        let (name, value) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        let single_letter = name.chars().count() == 1;
        let Some((flag, action)) = lookup(&scope, name, single_letter) else {
            out.push(token);
            continue;
        };
        let spelled = match flag {
            Spelling::Long(ref long) => format!("--{long}"),
            Spelling::Short(c) => format!("-{c}"),
        };
        if matches!(action, ArgAction::SetTrue | ArgAction::SetFalse) {
            // Go accepts `-flag=true` / `-flag=false` for a boolean; clap takes no value.
            match value.map(go_bool) {
                None | Some(Some(true)) => out.push(spelled.into()),
                Some(Some(false)) => {}
                Some(None) => out.push(token),
            }
            continue;
        }
        match value {
            Some(v) => match flag {
                Spelling::Long(_) => out.push(format!("{spelled}={v}").into()),
                Spelling::Short(_) => {
                    out.push(spelled.into());
                    out.push(v.into());
                }
            },
            None => {
                value_next = action.takes_values();
                out.push(spelled.into());
            }
        }
    }
    out
}

enum Spelling {
    Long(String),
    Short(char),
}

/// The flag of the innermost command (or a global one of its ancestors) that `name` spells in
/// Go style but not in clap's: a multi-letter long name or alias written with one dash
/// (`-subnet`), or a one-letter short name written with two (`--t`).
fn lookup(scope: &[&Command], name: &str, single_letter: bool) -> Option<(Spelling, ArgAction)> {
    let innermost = scope.len() - 1;
    for (depth, cmd) in scope.iter().enumerate().rev() {
        for arg in cmd.get_arguments() {
            if depth != innermost && !arg.is_global_set() {
                continue;
            }
            let action = arg.get_action().clone();
            if single_letter {
                let short = arg.get_short_and_visible_aliases().unwrap_or_default();
                if short.iter().any(|c| c.to_string() == name) {
                    return name.chars().next().map(|c| (Spelling::Short(c), action));
                }
            } else {
                let mut longs: Vec<&str> = arg.get_long().into_iter().collect();
                longs.extend(arg.get_all_aliases().unwrap_or_default());
                if longs.contains(&name) {
                    return Some((Spelling::Long(name.to_string()), action));
                }
            }
        }
    }
    // clap's own `--help` / `--version`, which Go's flag package also accepts as `-help`.
    (!single_letter && (name == "help" || (name == "version" && scope.len() == 1)))
        .then(|| (Spelling::Long(name.to_string()), ArgAction::Help))
}

fn find_subcommand<'a>(cmd: &'a Command, name: &str) -> Option<&'a Command> {
    cmd.get_subcommands()
        .find(|s| s.get_name() == name || s.get_all_aliases().any(|a| a == name))
}

/// Go's `strconv.ParseBool`.
fn go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::netctl::{Cli, Command as C, NetworkCmd, PolicyCmd};

    fn rewrite(line: &str) -> Vec<String> {
        let cmd = Cli::command();
        go_style(&cmd, line.split_whitespace().map(OsString::from))
            .into_iter()
            .map(|s| s.into_string().unwrap())
            .collect()
    }

    fn parse(line: &str) -> Cli {
        let cmd = Cli::command();
        Cli::try_parse_from(go_style(&cmd, line.split_whitespace().map(OsString::from)))
            .unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    #[test]
    fn single_dash_long_flags_become_double_dash() {
        assert_eq!(
            rewrite(
                "netctl policy rule-add web 1 -direction=in -protocol=tcp -port=80 -action=allow"
            ),
            [
                "netctl",
                "policy",
                "rule-add",
                "web",
                "1",
                "--direction=in",
                "--protocol=tcp",
                "--port=80",
                "--action=allow"
            ]
        );
        assert_eq!(
            rewrite(
                "netctl net create -subnet 10.1.1.0/24 -gateway 10.1.1.254 -tag t1 -s6 fd::/64 net1"
            ),
            [
                "netctl",
                "net",
                "create",
                "--subnet",
                "10.1.1.0/24",
                "--gateway",
                "10.1.1.254",
                "--tag",
                "t1",
                "--s6",
                "fd::/64",
                "net1"
            ]
        );
        // Global flags before the subcommand, one-letter names with two dashes.
        assert_eq!(
            rewrite("netctl -netmaster=http://x:9999 net ls --t blue --a"),
            [
                "netctl",
                "--netmaster=http://x:9999",
                "net",
                "ls",
                "-t",
                "blue",
                "-a"
            ]
        );
    }

    #[test]
    fn short_flags_values_and_unknown_tokens_stay() {
        for line in [
            "netctl net create -t blue -e vlan -p 10 -s 10.1.1.0/24 n1",
            "netctl policy rule-add p1 1 -d out -o db -P 53 -l udp",
            "netctl net ls -aj",
            "netctl net create -s 10.1.1.0/24 -- -subnet",
            // A value that looks like a flag is still a value.
            "netctl net create --tag -subnet -s 10.1.1.0/24 n1",
            "netctl net create -nosuchflag n1",
        ] {
            assert_eq!(rewrite(line).join(" "), line);
        }
    }

    #[test]
    fn booleans_take_go_values() {
        assert_eq!(
            rewrite("netctl net ls -json"),
            ["netctl", "net", "ls", "--json"]
        );
        assert_eq!(
            rewrite("netctl net ls -json=true"),
            ["netctl", "net", "ls", "--json"]
        );
        assert_eq!(
            rewrite("netctl net ls --all=false"),
            ["netctl", "net", "ls"]
        );
    }

    #[test]
    fn every_spelling_of_every_flag_parses_the_same() {
        for spelling in [
            "-direction=in -priority=10 -port=80",
            "-direction in -priority 10 -port 80",
            "--direction in --priority=10 --port 80",
            "-d in -p 10 -P 80",
            "--d=in --p 10 --P=80",
        ] {
            let cli = parse(&format!("netctl policy rule-add web 1 {spelling}"));
            let C::Policy(PolicyCmd::RuleAdd { rule, .. }) = cli.command else {
                panic!("{spelling}");
            };
            assert_eq!(
                (rule.direction.as_str(), rule.priority, rule.port),
                ("in", 10, 80),
                "{spelling}"
            );
        }
        let cli = parse("netctl net create -subnet=10.1.1.0/24 -pkt-tag 5 -encap=vlan n1");
        let C::Network(NetworkCmd::Create {
            subnet,
            pkt_tag,
            encap,
            ..
        }) = cli.command
        else {
            panic!("net create");
        };
        assert_eq!(
            (subnet.as_str(), pkt_tag, encap.as_str()),
            ("10.1.1.0/24", 5, "vlan")
        );
    }
}
