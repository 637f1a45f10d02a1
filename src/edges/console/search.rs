//! `GET /busca?q=…`, the search box of every page: an order id, an effect's key or an execution,
//! typed whole, opens its page (303); otherwise a page lists the executions whose key contains
//! what was typed, and says what was looked for. Exact lookups only on the large tables (an
//! order by its key, a key by its primary key), so a search costs the database an index read.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::error::PageError;
use super::session::Session;
use super::templates::{self, search as page, segment};
use super::Console;
use replay_ledger_core::tables::{archive, commission, execution, ledger};

/// At most this many executions listed for a partial match.
const LISTED: usize = 20;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct SearchQuery {
    q: Option<String>,
}

/// Where what was typed leads, if it names one thing whole.
async fn found(console: &Console, q: &str) -> Result<Option<String>, PageError> {
    if execution::load(&console.pool, q).await?.is_some() {
        return Ok(Some(format!("/executions/{}", segment(q))));
    }
    if commission::order::row_of(&console.pool, q).await?.is_some()
        || !archive::of_order(&console.pool, q).await?.is_empty()
    {
        return Ok(Some(format!("/pedidos/{}", segment(q))));
    }
    if ledger::entry(&console.pool, q).await?.is_some() {
        let event = q.rsplit_once(':').map_or(q, |(event, _)| event);
        if let Some(e) = archive::by_ids(&console.pool, &[event.to_string()])
            .await?
            .first()
        {
            return Ok(Some(format!("/pedidos/{}#efeitos", segment(&e.pedido_id))));
        }
    }
    Ok(None)
}

/// `GET /busca`.
pub(super) async fn search(
    State(console): State<Console>,
    session: Session,
    Query(query): Query<SearchQuery>,
) -> Result<Response, PageError> {
    let q = query.q.as_deref().map(str::trim).unwrap_or_default();
    if q.is_empty() {
        return Ok(templates::html(page::results(&session, q, &[])).into_response());
    }
    if q.chars().count() > 200 {
        return Err(PageError::BadRequest(
            "Busca longa demais: um pedido, uma chave ou uma execução tem menos de 200 caracteres."
                .into(),
        ));
    }
    if let Some(to) = found(&console, q).await? {
        return Ok(Redirect::to(&to).into_response());
    }
    let near: Vec<String> = execution::list(&console.pool)
        .await?
        .into_iter()
        .map(|e| e.key)
        .filter(|k| !execution::is_partition_key(k) && k.contains(q))
        .take(LISTED)
        .collect();
    Ok(templates::html(page::results(&session, q, &near)).into_response())
}
