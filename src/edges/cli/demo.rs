//! `replay-ledger demo`: hands over to the demo's own program, `replay-ledger-demo`, built beside
//! this binary from the workspace's `demo/` package. The demo needs the test rigs (a throwaway
//! cluster, a loopback webhook, a generated archive), and the product does not link them.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use super::exit::Failure;

/// The demo program's file name.
const PROGRAM: &str = "replay-ledger-demo";

/// Replaces this process with the demo program, handing over the options as given (and the
/// database URL through `DATABASE_URL`). Returns only when it cannot: the program is not beside
/// this binary (a build of the product alone), or it would not start.
pub(super) fn hand_over(
    database_url: Option<&str>,
    events: u32,
    console: Option<SocketAddr>,
) -> Result<(), Failure> {
    let Some(program) = beside_this_binary() else {
        return Err(Failure::invalid(format_args!(
            "the demo is its own program, {PROGRAM}, and it is not beside this binary: from the \
             repository, `cargo run --release -p {PROGRAM}` (or build the workspace, then run \
             `replay-ledger demo` again)"
        )));
    };
    let mut command = std::process::Command::new(&program);
    command.arg("--events").arg(events.to_string());
    if let Some(addr) = console {
        command
            .arg("--console")
            .arg("--console-addr")
            .arg(addr.to_string());
    }
    if let Some(url) = database_url {
        command.env("DATABASE_URL", url);
    }
    let err = command.exec();
    Err(Failure::failed(format_args!(
        "could not start {}: {err}",
        program.display()
    )))
}

/// `replay-ledger-demo` in this binary's directory, if it is there.
fn beside_this_binary() -> Option<PathBuf> {
    let program = std::env::current_exe().ok()?.with_file_name(PROGRAM);
    program.is_file().then_some(program)
}
