//! `GET /verificacao`: the days verify jobs found wrong, newest first, each with the correction
//! proposed for it and where that correction stands (simulated and waiting for approval,
//! approved, applied), linking to its simulation and its real run.

use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::error::PageError;
use super::session::Session;
use super::templates::{self, verification as page};
use super::Console;
use replay_ledger_core::tables::execution::{self, Mode};
use replay_ledger_core::tables::proposals;

/// At most this many proposals listed.
const LISTED: i64 = 200;

/// `GET /verificacao`.
pub(super) async fn page(
    State(console): State<Console>,
    session: Session,
) -> Result<Response, PageError> {
    let list = proposals::newest(&console.pool, LISTED).await?;
    let mut keys = Vec::new();
    for p in &list {
        keys.push(p.name.clone());
        keys.push(execution::checkpoint_key(&p.name, Mode::Simulation));
    }
    let executions = execution::load_many(&console.pool, &keys).await?;
    let mut rows = Vec::new();
    for p in list {
        let simulation_key = execution::checkpoint_key(&p.name, Mode::Simulation);
        let simulation = executions.iter().find(|e| e.key == simulation_key).cloned();
        let run = executions.iter().find(|e| e.key == p.name).cloned();
        let approved = match &simulation {
            Some(s) => replay_ledger_core::engine::approval::latest(&console.pool, &p.name)
                .await?
                .is_some_and(|a| a.simulation_pass == s.pass),
            None => false,
        };
        rows.push(page::Row {
            proposal: p,
            simulation,
            run,
            approved,
        });
    }
    let markup = page::page(&session, console.config.timezone, &rows);
    Ok(templates::html(markup).into_response())
}
