//! `replay-ledger`: a thin binary over the library; see `replay_ledger::edges::cli`.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    replay_ledger::edges::cli::start()
}
