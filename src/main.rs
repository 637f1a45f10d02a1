//! `replay-ledger`: a thin binary over the library; see `replay_ledger::edges::cli`.

fn main() -> std::process::ExitCode {
    replay_ledger::edges::cli::start()
}
