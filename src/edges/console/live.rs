//! `GET /executions/ao-vivo`: the live consumer's page — whether it runs and where (the host
//! that holds it), its position and the last event it applied, how far behind it is (events
//! archived and not applied, the age of the oldest, the transaction its checkpoint waits for),
//! its last error and its figures, and the ledger's keys of `ao-vivo` by state. It answers even
//! when `replay-ledger consume` never ran on this database: the `ao-vivo` keys may come from
//! another consumer (the seed's JavaScript one), and the page says so instead of a 404.

use axum::response::{IntoResponse, Response};

use super::error::PageError;
use super::session::Session;
use super::views::LiveView;
use super::Console;
use replay_ledger_core::services::consumer::horizon::HorizonWatch;
use replay_ledger_core::services::consumer::state;
use replay_ledger_core::services::consumer::{lag, LIVE_EXECUTION};
use replay_ledger_core::tables::archive;
use replay_ledger_core::tables::execution;
use replay_ledger_core::tables::ledger;

/// How many of the archive's newest events the page looks through for the last one applied.
const NEWEST_LOOK_BACK: i64 = 1_000;

/// Reads the live consumer's page.
pub(super) async fn page(console: &Console, session: &Session) -> Result<Response, PageError> {
    let pool = &console.pool;
    let execution = execution::load(pool, LIVE_EXECUTION).await?;
    let lag = lag(pool, &HorizonWatch::new(None)).await?;
    // The newest event applied, whatever the stored checkpoint says: it is the safe horizon,
    // which waits for the oldest transaction on the server while newer events are applied.
    let last_event = match state::load(pool, LIVE_EXECUTION).await? {
        Some(s) => archive::newest_applied(pool, &s.applied(), NEWEST_LOOK_BACK).await?,
        None => None,
    };
    let keys = ledger::states_of_execution(pool, LIVE_EXECUTION).await?;
    let view = LiveView {
        execution,
        lag,
        last_event,
        keys,
    };
    let tz = console.config.timezone;
    let markup = super::templates::live::page(session, tz, &view);
    Ok(super::templates::html(markup).into_response())
}
