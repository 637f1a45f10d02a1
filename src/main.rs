//! `replay-ledger`: a thin binary over the library; see `replay_ledger::cli`.

fn main() -> std::process::ExitCode {
    replay_ledger::cli::start()
}
