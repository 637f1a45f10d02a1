//! `GET /historico`: the commission table as of a moment (event time) and, when asked, as known
//! at another (only events archived by then: what the system knew), with its totals, its first
//! rows and the whole table as a CSV download (`?formato=csv`). The same computation as
//! `replay-ledger comissao --as-of T [--known-at K]`, in one snapshot.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::download;
use super::error::PageError;
use super::session::Session;
use super::templates::{self, history as page};
use super::Console;
use crate::services::history::{self, export, parse_moment, AsOfRow, Row};
use crate::services::report::csv as report_csv;

/// Rows shown on the page (all of them in the download).
const SHOWN: usize = 100;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct HistoryQuery {
    /// As of this moment (`AAAA-MM-DD` or `AAAA-MM-DD HH:MM`, in the console's timezone).
    em: Option<String>,
    /// As known at this moment.
    conhecido: Option<String>,
    /// `csv`: the whole table as a download.
    formato: Option<String>,
}

fn moment(
    console: &Console,
    word: Option<&str>,
    what: &str,
) -> Result<Option<DateTime<Utc>>, PageError> {
    match word.map(str::trim).filter(|w| !w.is_empty()) {
        None => Ok(None),
        Some(w) => parse_moment(w, console.config.timezone, Utc::now())
            .map(Some)
            .map_err(|_| {
                PageError::BadRequest(format!(
                    "{what} inválido: use AAAA-MM-DD ou AAAA-MM-DD HH:MM."
                ))
            }),
    }
}

/// `GET /historico`.
pub(super) async fn page(
    State(console): State<Console>,
    session: Session,
    Query(query): Query<HistoryQuery>,
) -> Result<Response, PageError> {
    let as_of = moment(&console, query.em.as_deref(), "Momento")?;
    let known_at = moment(&console, query.conhecido.as_deref(), "Conhecido em")?;
    let tz = console.config.timezone;
    let Some(as_of) = as_of else {
        let markup = page::page(&session, tz, &page::Asked::default(), None);
        return Ok(templates::html(markup).into_response());
    };
    let asked = page::Asked {
        as_of: query.em.clone().unwrap_or_default(),
        known_at: query.conhecido.clone().unwrap_or_default(),
    };
    let q = history::Query {
        as_of,
        compare_to: None,
        known_at,
        restated: false,
    };
    let csv = match query.formato.as_deref() {
        None | Some("") => false,
        Some("csv") => true,
        Some(_) => {
            return Err(PageError::BadRequest(
                "Formato inválido: use formato=csv.".into(),
            ))
        }
    };
    let mut rows: Vec<AsOfRow> = Vec::new();
    let mut out = if csv {
        Some(
            report_csv::writer(Vec::new(), export::TABLE_HEADER)
                .map_err(|e| PageError::BadRequest(e.to_string()))?,
        )
    } else {
        None
    };
    let totals = history::table(&console.pool, &q, &mut |row| {
        if let Row::Order(r) = row {
            match out.as_mut() {
                Some(w) => w.write_record([
                    report_csv::guard(&r.pedido_id),
                    r.valor_centavos.to_string(),
                    r.versao_evento.to_string(),
                    r.ocorrido_em.to_rfc3339(),
                ])?,
                None if rows.len() < SHOWN => rows.push(r),
                None => {}
            }
        }
        Ok(())
    })
    .await
    .map_err(|e| match e {
        history::HistoryError::Database(e) => PageError::from(e),
        other => PageError::BadRequest(replay_ledger_core::shared::text::inert(&other.to_string())),
    })?;
    if csv {
        let name = match known_at {
            Some(k) => format!(
                "comissao-em-{}-conhecida-em-{}.csv",
                as_of.format("%Y%m%dT%H%M%SZ"),
                k.format("%Y%m%dT%H%M%SZ")
            ),
            None => format!("comissao-em-{}.csv", as_of.format("%Y%m%dT%H%M%SZ")),
        };
        let name = download::name(&name);
        let bytes = out.map(report_csv::bytes).unwrap_or_default();
        return Ok(download::attachment(
            "text/csv; charset=utf-8",
            &name,
            bytes,
        ));
    }
    let shown = page::Shown {
        as_of,
        known_at,
        orders: totals.orders,
        total_cents: totals.after_cents,
        rows: &rows,
    };
    let markup = page::page(&session, tz, &asked, Some(&shown));
    Ok(templates::html(markup).into_response())
}
