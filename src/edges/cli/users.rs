//! `users add EMAIL --role viewer|finance|operator [--password-stdin]`, `users list`,
//! `users remove EMAIL`: the console's accounts, managed by the schema's owner. Every change is
//! written to the console's audit trail with the database role that made it.

use std::io::BufRead;

use super::{connect, Cli, Failure, Outcome};
use crate::edges::console::accounts::{self, AccountError, Role};
use replay_ledger_core::shared::text::inert;

#[derive(Debug, clap::Subcommand)]
pub enum UsersAction {
    /// Create an account (or give an existing one this role and a new password, ending its
    /// sessions). Without --password-stdin, a password is generated and printed once.
    Add {
        /// The account's e-mail (its login).
        email: String,
        /// viewer: reads; finance: reads and approves simulations; operator: reads and resolves
        /// review items.
        #[arg(long, value_parser = ["viewer", "finance", "operator"])]
        role: String,
        /// Read the password from the first line of standard input (at least 12 characters).
        #[arg(long)]
        password_stdin: bool,
    },
    /// Every account: e-mail, role, created when and by which database role, open sessions.
    List,
    /// Remove an account; its sessions end at once.
    Remove { email: String },
}

pub(super) async fn users(cli: &Cli, action: &UsersAction) -> Outcome {
    match action {
        UsersAction::Add {
            email,
            role,
            password_stdin,
        } => add(cli, email, role, *password_stdin).await,
        UsersAction::List => list(cli).await,
        UsersAction::Remove { email } => {
            let pool = connect(cli, true).await?;
            if accounts::remove(&pool, email).await? {
                println!("removed {}; its sessions ended", inert(email.trim()));
                Ok(())
            } else {
                Err(Failure::invalid(format_args!(
                    "no console account {}",
                    inert(email.trim())
                )))
            }
        }
    }
}

async fn add(cli: &Cli, email: &str, role: &str, from_stdin: bool) -> Outcome {
    let role = Role::from_name(role).unwrap_or(Role::Viewer);
    let (password, generated) = if from_stdin {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        (line.trim_end_matches(['\r', '\n']).to_string(), false)
    } else {
        (accounts::generated_password(), true)
    };
    accounts::normalize_email(email)
        .and_then(|_| accounts::check_password(&password))
        .map_err(Failure::invalid)?;
    let pool = connect(cli, true).await?;
    match accounts::add(&pool, email, role, &password).await {
        Ok(new) => {
            let email = accounts::normalize_email(email).unwrap_or_default();
            let what = if new {
                "created"
            } else {
                "updated (its sessions ended)"
            };
            println!("{} ({}): {what}", inert(&email), role.name());
            if generated {
                println!("password (shown once): {password}");
            }
            Ok(())
        }
        Err(AccountError::Database(e)) => Err(e.into()),
        Err(err) => Err(Failure::invalid(err)),
    }
}

async fn list(cli: &Cli) -> Outcome {
    let pool = connect(cli, true).await?;
    let all = accounts::list(&pool).await?;
    if all.is_empty() {
        println!(
            "no console accounts: create one with `replay-ledger users add EMAIL --role finance`"
        );
        return Ok(());
    }
    println!(
        "{:<36} {:<9} {:<20} {:<24} SESSIONS",
        "EMAIL", "ROLE", "CREATED", "BY"
    );
    for a in &all {
        println!(
            "{:<36} {:<9} {:<20} {:<24} {}",
            inert(&a.email),
            a.role.name(),
            a.created_at.format("%Y-%m-%d %H:%M:%S"),
            inert(&a.created_by),
            a.sessions
        );
    }
    Ok(())
}
