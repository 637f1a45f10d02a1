//! `replay-ledger`: a thin binary over the library; see `replay_ledger::cli`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    replay_ledger::cli::main().await
}
