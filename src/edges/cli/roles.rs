//! `grants`, and what a command says when the database refuses it for want of a privilege: which
//! role was refused what, and which role to connect as instead.

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;

use super::{connect, Cli, Command, Failure, Outcome, ReviewAction};
use replay_ledger_core::shared::text::inert;
use replay_ledger_core::tables::db;
use replay_ledger_core::tables::grants::{self, Duties, GrantError};

/// `replay-ledger grants --worker ROLE [--approver ROLE] [--reviewer ROLE] [--console ROLE]
/// [--print]`; `others` are the approver, the reviewer and the console.
pub(super) async fn grants(
    cli: &Cli,
    worker: &str,
    others: [Option<&str>; 3],
    print: bool,
) -> Outcome {
    let [approver, reviewer, console] = others;
    let duties =
        Duties::with_console(worker, approver, reviewer, console).map_err(Failure::invalid)?;
    if print {
        print!("{}", grants::script(&duties));
        return Ok(());
    }
    let pool = connect(cli, false).await?;
    match grants::apply(&pool, &duties).await {
        Ok(()) => {
            let mut done = vec![format!("worker `{}`", duties.worker.name())];
            done.extend(duties.approver.map(|r| format!("approver `{}`", r.name())));
            done.extend(duties.reviewer.map(|r| format!("reviewer `{}`", r.name())));
            done.extend(duties.console.map(|r| format!("console `{}`", r.name())));
            println!("granted: {}", done.join(", "));
            Ok(())
        }
        Err(GrantError::Database(e)) => Err(e.into()),
        Err(err) => Err(Failure::invalid(err)),
    }
}

/// What a command needs the connected role to be allowed, for the refusal's message.
pub(super) struct Duty {
    what: &'static str,
    instead: &'static str,
}

/// Every command but `migrate` and `grants` migrates first, unless `--no-migrate`.
const MIGRATE: Duty = Duty {
    what: "migrate the schema",
    instead: "the role that owns it, or pass `--no-migrate`",
};

pub(super) fn duty_of(command: &Command) -> Duty {
    let (what, instead) = match command {
        Command::Approve { .. } => ("approve simulations", "a role granted `--approver`"),
        Command::Review {
            action: ReviewAction::Resolve { .. },
        } => ("resolve review items", "a role granted `--reviewer`"),
        Command::Review { .. }
        | Command::Status { .. }
        | Command::Explain { .. }
        | Command::Comissao { .. }
        | Command::Verify { .. } => (
            "read the ledger",
            "a role granted `--worker`, `--approver` or `--reviewer`",
        ),
        Command::Migrate { status: false } => return MIGRATE,
        Command::Migrate { status: true } => {
            ("read the migrations table", "the role that ran `migrate`")
        }
        Command::Grants { .. } => ("grant privileges", "the role that ran `migrate`"),
        Command::Users { .. } => ("manage console accounts", "the role that ran `migrate`"),
        Command::Console { .. } => ("serve the console", "a role granted `--console`"),
        Command::Rebuild {
            approve: Some(_), ..
        } => ("approve a rebuild", "a role granted `--approver`"),
        // The rebuild creates, renames and drops tables: the schema's owner's work.
        Command::Rebuild { .. } => (
            "rebuild comissao",
            "the role that ran `migrate` (the schema's owner)",
        ),
        _ => ("run jobs", "a role granted `--worker`"),
    };
    Duty { what, instead }
}

/// The database role a command connects as: the user of `DATABASE_URL` (or `PGUSER`).
pub(super) fn connected_role(database_url: Option<&str>) -> Option<String> {
    let options = PgConnectOptions::from_str(database_url?).ok()?;
    Some(options.get_username().to_string())
}

/// When `err` is the database refusing a privilege (42501): the message that says which role was
/// refused what, and as whom to connect instead. Exit status 1.
pub(super) fn permission_denied(
    err: &anyhow::Error,
    duty: &Duty,
    role: Option<&str>,
) -> Option<String> {
    let denied = err
        .chain()
        .filter_map(|e| e.downcast_ref::<sqlx::Error>())
        .find(|e| db::is_permission_denied(e))?;
    let said = match denied {
        sqlx::Error::Database(e) => inert(e.message()),
        other => other.to_string(),
    };
    let role = role.map_or_else(
        || "the connected role".into(),
        |r| format!("`{}`", inert(r)),
    );
    let migrating = err.chain().any(|e| e.is::<sqlx::migrate::MigrateError>());
    let duty = if migrating { &MIGRATE } else { duty };
    Some(format!(
        "the database role {role} may not {}: connect as {} (see docs/src/security.md, Least privileges); the server said: {said}",
        duty.what, duty.instead
    ))
}
