//! `comissao --as-of TIME [--known-at TIME] [--compare-to TIME2 | --restated] [--timezone TZ]
//! [--csv FILE | --xlsx FILE | --json]`: the commission table as the archive says it stood at a
//! moment (as known at another, if given), the orders whose value differs between two moments,
//! or a closed period's restatements ([`crate::services::history`]). Reads only: no migration,
//! no row written. A moment that cannot be read exits 2.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::{connect, Cli, Failure, Outcome};
use crate::services::history::export::{Export, Form};
use crate::services::history::{self, Query};

/// The moments the command line named, read in its timezone.
#[derive(Debug, Clone, Copy)]
pub(super) struct Moments {
    pub as_of: Option<DateTime<Utc>>,
    pub compare_to: Option<DateTime<Utc>>,
    pub known_at: Option<DateTime<Utc>>,
    pub restated: bool,
}

impl Moments {
    /// Reads `--as-of` and `--compare-to` (exit 2 when one is not a moment).
    pub fn of(
        as_of: Option<&str>,
        compare_to: Option<&str>,
        tz: Option<Tz>,
    ) -> Result<Self, Failure> {
        let now = Utc::now();
        let read = |flag: &str, text: Option<&str>| {
            text.map(|t| history::parse_moment(t, tz.unwrap_or(Tz::UTC), now))
                .transpose()
                .map_err(|e| Failure::invalid(format_args!("{flag}: {e}")))
        };
        Ok(Moments {
            as_of: read("--as-of", as_of)?,
            compare_to: read("--compare-to", compare_to)?,
            known_at: None,
            restated: false,
        })
    }

    /// Reads `--known-at` (exit 2 when it is not a moment), and whether `--restated` was asked.
    pub fn known_at(
        &mut self,
        known_at: Option<&str>,
        tz: Option<Tz>,
        restated: bool,
    ) -> Result<(), Failure> {
        self.known_at = known_at
            .map(|t| history::parse_moment(t, tz.unwrap_or(Tz::UTC), Utc::now()))
            .transpose()
            .map_err(|e| Failure::invalid(format_args!("--known-at: {e}")))?;
        self.restated = restated;
        Ok(())
    }
}

/// The output the flags ask for.
pub(super) fn form(csv: Option<&PathBuf>, xlsx: Option<&PathBuf>, json: bool) -> Form {
    match (csv, xlsx, json) {
        (Some(path), _, _) => Form::Csv(path.clone()),
        (_, Some(path), _) => Form::Xlsx(path.clone()),
        (_, _, true) => Form::Json,
        _ => Form::Text,
    }
}

pub(super) async fn comissao(cli: &Cli, when: &Moments, form: &Form) -> Outcome {
    let as_of = when
        .as_of
        .ok_or_else(|| Failure::invalid("--as-of is required"))?;
    let query = Query {
        as_of,
        compare_to: when.compare_to,
        known_at: when.known_at,
        restated: when.restated,
    };
    let pool = connect(cli, false).await?;
    let head = serde_json::json!({
        "as_of": query.as_of,
        "compare_to": query.compare_to,
        "known_at": query.known_at,
        "restated": query.restated,
        "rule": replay_ledger_core::domain::RULE_VERSION,
    });
    let mut export = Export::open(form, query.comparing(), &head)?;
    let mut write = |row| export.row(row);
    let totals = history::table(&pool, &query, &mut write).await?;
    export.finish(&totals)?;
    if let Form::Csv(path) | Form::Xlsx(path) = form {
        eprintln!(
            "wrote {} rows to {} ({} cents)",
            totals.orders,
            path.display(),
            totals.after_cents
        );
    }
    Ok(())
}
