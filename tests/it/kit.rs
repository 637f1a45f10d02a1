//! The operator's kit, through the real binary: the shell completions and the manual page are
//! generated from the command line itself, so every command is in them; bash's completion really
//! completes (a command, then that command's options) when sourced into a real bash; and neither
//! needs a database.

use std::path::Path;
use std::process::{Command, Output};

use crate::helpers::bin;

/// The binary with a database that cannot be reached: the kit must not try it.
fn kit(args: &[&str]) -> Output {
    let output = Command::new(bin())
        .args(args)
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "replay-ledger {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The commands `--help` lists (but `help` itself).
fn commands() -> Vec<String> {
    let help = String::from_utf8(kit(&["--help"]).stdout).expect("UTF-8 help");
    let listed: Vec<String> = help
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands section")
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    // The contract's commands, whatever else is added.
    for contract in [
        "migrate",
        "check",
        "run",
        "sweep",
        "review",
        "report",
        "status",
        "serve",
        "demo",
        "approve",
        "approvals",
        "grants",
        "consume",
        "users",
        "console",
        "explain",
        "verify",
    ] {
        assert!(
            listed.iter().any(|c| c == contract),
            "--help lacks {contract}"
        );
    }
    listed
}

/// What bash offers for `words` (the last one being completed), with the script sourced.
fn bash_completes(script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let program = format!(
        "source '{script}'\n\
         f=$(complete -p replay-ledger | sed -E 's/.*-F ([^ ]+).*/\\1/')\n\
         COMP_WORDS=({words})\n\
         COMP_CWORD={cword}\n\
         \"$f\" replay-ledger \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script = script.display(),
        words = quoted.join(" "),
    );
    let output = Command::new("bash")
        .args(["--noprofile", "--norc", "-c", &program])
        .output()
        .expect("bash runs (Debian's bash is required)");
    assert!(
        output.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_every_command_and_then_that_commands_options() {
    let script = kit(&["completions", "bash"]).stdout;
    let text = String::from_utf8(script.clone()).expect("UTF-8 script");
    assert!(text.contains("verify"), "the bash script lacks verify");
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("replay-ledger.bash");
    std::fs::write(&path, &script).expect("the script is written");

    assert_eq!(bash_completes(&path, &["replay-ledger", "ver"]), ["verify"]);
    let all = bash_completes(&path, &["replay-ledger", ""]);
    for command in commands() {
        assert!(all.contains(&command), "bash does not offer {command}");
    }
    // A command's own options: what an operator tabs for most.
    assert_eq!(
        bash_completes(&path, &["replay-ledger", "run", "--si"]),
        ["--simulate"]
    );
    assert_eq!(
        bash_completes(&path, &["replay-ledger", "review", "resolve", "--not-"]),
        ["--not-sent"]
    );
    assert_eq!(
        bash_completes(&path, &["replay-ledger", "completions", "fi"]),
        ["fish"]
    );
}

#[test]
fn zsh_and_fish_scripts_name_every_command() {
    let commands = commands();
    for shell in ["zsh", "fish"] {
        let text = String::from_utf8(kit(&["completions", shell]).stdout).expect("UTF-8");
        for command in &commands {
            assert!(text.contains(command.as_str()), "{shell} lacks {command}");
        }
    }
}

/// A name as roff writes it (`-` escaped).
fn roff(name: &str) -> String {
    name.replace('-', "\\-")
}

#[test]
fn the_man_page_is_roff_with_every_command() {
    let page = String::from_utf8(kit(&["man"]).stdout).expect("UTF-8 page");
    assert!(
        page.lines().any(|l| l.starts_with(".TH replay-ledger 1")),
        "no .TH header:\n{}",
        &page[..page.len().min(400)]
    );
    assert!(page.contains(".SH SYNOPSIS") && page.contains(".SH SUBCOMMANDS"));
    for command in commands() {
        assert!(
            page.contains(&format!("replay\\-ledger\\-{}(1)", roff(&command))),
            "the man page lacks {command}"
        );
    }
}

#[test]
fn man_out_dir_writes_one_page_per_command_with_its_options() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = dir.path().to_str().expect("a UTF-8 temp path");
    kit(&["man", "--out-dir", out]);
    for command in commands() {
        let page = dir.path().join(format!("replay-ledger-{command}.1"));
        assert!(page.exists(), "no page for {command}");
    }
    let run = std::fs::read_to_string(dir.path().join("replay-ledger-run.1")).expect("run's page");
    assert!(run.contains(".TH replay-ledger-run 1"));
    assert!(
        run.contains("\\-\\-simulate"),
        "run's page lacks --simulate"
    );
    let resolve = std::fs::read_to_string(dir.path().join("replay-ledger-review-resolve.1"))
        .expect("review resolve's page");
    assert!(resolve.contains("\\-\\-not\\-sent"));
}
