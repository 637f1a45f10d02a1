//! `rebuild`: the blue-green rebuild of `comissao`, for people. Without flags it goes as far as it
//! can: builds (or resumes) `comissao_nova` from the whole archive, follows the live writers,
//! compares and prints the counts, checksums and fingerprint to approve — or swaps when that
//! fingerprint was approved. `--approve`, `--rollback`, `--drop-previous`, `--abandon` and
//! `--diff FILE` act on the open rebuild.

use std::path::{Path, PathBuf};

use super::{connect, Class, Cli, Failure, Outcome};
use replay_ledger_core::services::rebuild::{self, Outcome as Done, RebuildConfig, RebuildError};
use replay_ledger_core::shared::shutdown;
use replay_ledger_core::shared::text::inert;

/// What the command line asked for.
#[derive(Debug, Clone, Default)]
pub struct RebuildArgs {
    pub approve: Option<String>,
    pub note: Option<String>,
    pub rollback: bool,
    pub drop_previous: bool,
    pub abandon: bool,
    pub diff: Option<PathBuf>,
    pub chunk: Option<u32>,
}

pub async fn rebuild(cli: &Cli, args: &RebuildArgs) -> Outcome {
    let pool = connect(cli, true).await?;
    if let Some(shown) = &args.approve {
        let (approval, by) =
            rebuild::approve(&pool, rebuild::Approver::Role, shown, args.note.as_deref())
                .await
                .map_err(failure)?;
        println!(
            "approved {} as approval {approval} by {}: run `replay-ledger rebuild` to swap it in",
            inert(rebuild::short_fingerprint(shown)),
            inert(&by)
        );
        return Ok(());
    }
    if args.rollback {
        let (r, carried) = rebuild::roll_back(&pool).await.map_err(failure)?;
        println!("rebuild {}: rolled back; comissao is the previous table again ({carried} orders written since the swap carried over); the rebuilt one is comissao_nova", r.id);
        return Ok(());
    }
    if args.drop_previous {
        let r = rebuild::drop_previous(&pool).await.map_err(failure)?;
        let kept = match r.stage {
            rebuild::Stage::Swapped => "comissao_anterior",
            _ => "comissao_nova",
        };
        println!("rebuild {}: {kept} dropped; the rebuild is closed", r.id);
        return Ok(());
    }
    if args.abandon {
        let r = rebuild::abandon(&pool).await.map_err(failure)?;
        println!("rebuild {}: abandoned; comissao_nova dropped", r.id);
        return Ok(());
    }
    if let Some(path) = &args.diff {
        return write_diff(&pool, path).await;
    }
    let mut config = RebuildConfig::default();
    if let Some(chunk) = args.chunk {
        config.chunk = chunk;
    }
    config.validate().map_err(Failure::invalid)?;
    let (trigger, stop) = shutdown::channel();
    shutdown::on_signals(trigger);
    let mut say = |line: &str| println!("{line}");
    let done = match rebuild::run(&pool, &config, &stop, &mut say).await {
        Ok(done) => done,
        Err(RebuildError::Database(e)) if lost(&e) => {
            eprintln!(
                "error: lost the database {} mid-rebuild ({}); nothing is half-done: the checkpoint and both tables are as the last committed step left them (each chunk, each follow and the swap are one transaction). Run `replay-ledger rebuild` again once the server is back: it resumes",
                replay_ledger_core::tables::db::target(&pool),
                replay_ledger_core::tables::db::explain_loss(&pool, &e).await
            );
            return Err(Failure::said(Class::Failed));
        }
        Err(e) => return Err(failure(e)),
    };
    print_outcome(&done);
    Ok(())
}

fn print_outcome(done: &Done) {
    match done {
        Done::Compared(c) => {
            println!(
                "comissao:      {} rows, checksum {}",
                c.current.count, c.current.digest
            );
            println!("comissao_nova: {} rows, checksum {}", c.new.count, c.new.digest);
            println!(
                "{} orders differ (`replay-ledger rebuild --diff FILE.csv|.xlsx` lists them): {} go back to an older versao_evento, {} rows are deleted (no accepted event); fingerprint {}",
                c.orders_differing,
                c.older_versions,
                c.deleted,
                rebuild::short_fingerprint(&c.fingerprint)
            );
            println!(
                "to swap: `replay-ledger rebuild --approve '{}'`, then `replay-ledger rebuild`",
                c.fingerprint
            );
        }
        Done::AwaitingApproval {
            fingerprint,
            orders,
        } => println!(
            "{orders} orders differ; fingerprint {} waits for approval: `replay-ledger rebuild --approve '{fingerprint}'`",
            rebuild::short_fingerprint(fingerprint)
        ),
        Done::Swapped { current, .. } => println!(
            "comissao: {} rows, checksum {}; `replay-ledger rebuild --rollback` swaps back, `--drop-previous` drops comissao_anterior",
            current.count, current.digest
        ),
    }
}

/// The differing orders as the diff finance reads (CSV or XLSX, by the file's extension): before
/// is `comissao`, after `comissao_nova` (empty when the swap deletes the row), each side's version,
/// and why the row differs.
async fn write_diff(pool: &sqlx::PgPool, path: &Path) -> Outcome {
    let rows = rebuild::diff(pool, i64::MAX).await?;
    let bytes = match path.extension().and_then(|e| e.to_str()) {
        Some("xlsx") => crate::services::report::xlsx::render_rebuild(&rows)?,
        Some("csv") => crate::services::report::csv::render_rebuild(&rows),
        _ => {
            return Err(Failure::invalid(format_args!(
                "--diff {}: the file must end in .csv or .xlsx",
                path.display()
            )))
        }
    };
    std::fs::write(path, bytes)?;
    println!(
        "wrote {} differing orders to {}",
        rows.len(),
        path.display()
    );
    Ok(())
}

/// A database that went away under the rebuild (a restart, a lost connection): its message is a
/// protocol's ("expected to read 5 bytes, got 0 bytes at EOF"), not a cause.
fn lost(err: &sqlx::Error) -> bool {
    replay_ledger_core::tables::db::is_transient(err)
        || matches!(err, sqlx::Error::Protocol(_) | sqlx::Error::Io(_))
}

fn failure(err: RebuildError) -> Failure {
    match err {
        RebuildError::Interrupted => {
            eprintln!("{err}");
            Failure::said(Class::Interrupted)
        }
        RebuildError::Database(e) => Failure::from(e),
        other => Failure::failed(other),
    }
}
