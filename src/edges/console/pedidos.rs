//! `GET /pedidos/{pedido_id}`: one order's story for any logged-in account — the same read model
//! as `explain` ([`crate::services::story`]). An id no order can have is 400, an unknown order 404.
//! `?as_of=TIME` tells it as of a moment (as `explain --as-of`, moments without an offset in the
//! console's timezone); a moment that cannot be read is 400.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};

use super::error::PageError;
use super::session::Session;
use super::templates::{self, pedido as page};
use super::Console;
use crate::services::story::{self, StoryError};

/// `?as_of=`: the moment to tell the story as of.
#[derive(Debug, serde::Deserialize)]
pub(super) struct AsOfQuery {
    as_of: Option<String>,
}

pub(super) async fn detail(
    State(console): State<Console>,
    session: Session,
    Path(pedido_id): Path<String>,
    Query(query): Query<AsOfQuery>,
) -> Result<Response, PageError> {
    let tz = console.config.timezone;
    let as_of = match query
        .as_of
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        None => None,
        Some(text) => Some(
            crate::services::history::parse_moment(text, tz, chrono::Utc::now())
                .map_err(|e| PageError::BadRequest(format!("Momento inválido: {e}")))?,
        ),
    };
    let told = match story::story_as_of(&console.pool, &pedido_id, as_of).await {
        Ok(told) => told,
        Err(StoryError::InvalidId) => {
            return Err(PageError::BadRequest(
                "Identificador de pedido inválido.".into(),
            ))
        }
        Err(StoryError::Unknown(_)) => {
            return Err(PageError::NotFound("Pedido desconhecido.".into()))
        }
        Err(StoryError::Database(e)) => return Err(e.into()),
    };
    let markup = page::page(&session, console.config.timezone, &told);
    Ok(templates::html(markup).into_response())
}
