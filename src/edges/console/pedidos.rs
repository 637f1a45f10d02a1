//! `GET /pedidos/{pedido_id}`: one order's story for any logged-in account — the same read model
//! as `explain` ([`crate::services::story`]). An id no order can have is 400, an unknown order 404.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};

use super::error::PageError;
use super::session::Session;
use super::templates::{self, pedido as page};
use super::Console;
use crate::services::story::{self, StoryError};

pub(super) async fn detail(
    State(console): State<Console>,
    session: Session,
    Path(pedido_id): Path<String>,
) -> Result<Response, PageError> {
    let told = match story::story(&console.pool, &pedido_id).await {
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
