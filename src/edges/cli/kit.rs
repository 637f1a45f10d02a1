//! The operator's kit, generated from the command line's own definition so it cannot drift from
//! it: shell completions (`completions bash|zsh|fish|elvish|powershell`) and the manual page
//! (`man`, roff), printed on stdout (or, for `man --out-dir`, one page per command). Neither
//! touches a database.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use clap::CommandFactory;

use super::{Cli, Outcome};

/// The completion script for `shell`, as `replay-ledger completions SHELL` prints it.
///
/// clap_complete's bash script spells a subcommand's state two ways when the binary's name has a
/// hyphen (clap-rs/clap#6421): the loop that reads the words arrives at `replay__ledger__subcmd__run`
/// while the arm that offers `run`'s options is labelled `replay__subcmd__ledger__subcmd__run`, so
/// no command's options were ever completed. The arms are relabelled as the loop spells them.
fn completion_script(shell: clap_complete::Shell) -> Vec<u8> {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "replay-ledger", &mut out);
    if shell == clap_complete::Shell::Bash {
        let text = String::from_utf8_lossy(&out);
        return text
            .replace("replay__subcmd__ledger", "replay__ledger")
            .into_bytes();
    }
    out
}

/// The manual page in roff, as `replay-ledger man` prints it: the synopsis, every global
/// option, and every command with what its `--help` says first.
fn man_page() -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    Ok(out)
}

pub(super) fn completions(shell: clap_complete::Shell) -> Outcome {
    print(&completion_script(shell))
}

/// The manual on stdout, or one page per command (subcommands included) into `out_dir`.
pub(super) fn man(out_dir: Option<&Path>) -> Outcome {
    match out_dir {
        None => print(&man_page()?),
        Some(dir) => {
            clap_mangen::generate_to(Cli::command(), dir)
                .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
            Ok(())
        }
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not a failure of ours.
fn print(bytes: &[u8]) -> Outcome {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e.into()),
    }
}
