//! Exactly once or flagged: an e-mailed report is an effect of the ledger like any other, with the
//! key `<sender job>:<report id>:email` (type `email`, not declared in `effects.yaml`, so the sweeper
//! treats it as non-idempotent: SMTP cannot deduplicate).
//!
//! Reserve (committed before the send; a key already in the ledger is never sent again) → send →
//! complete. A send the server certainly did not accept releases the key, so the next tick (or
//! `report`) sends it; a send whose outcome is unknown ends `incerto`, in the review queue. A crash
//! between the server's acceptance and the completion leaves the key `reservado`; the sweeper moves
//! it to `incerto` after `stale_after`. It is never sent twice.
//!
//! `.eml` files are not e-mails that left the machine: they are written without the ledger (a
//! file name per key; rewriting one is harmless).

use std::path::PathBuf;
use std::time::Instant;

use lettre::Message;
use serde_json::json;
use sqlx::PgPool;

use super::mail::{self, Mailer, SendError};
use replay_ledger_core::tables::db::{self, Backoff};
use replay_ledger_core::tables::ledger::State as LedgerState;
use replay_ledger_core::tables::ledger::{self, Attempt, Claim, Entry, Reservation};

/// The ledger's `tipo_efeito` of an e-mailed report.
pub const EFFECT_TYPE: &str = "email";

/// A report's identity in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportKey {
    /// `<sender>:<report id>` (the ledger's `evento_id`).
    pub event_id: String,
    /// `<sender>:<report id>:email`.
    pub key: String,
    /// `<sender>:relatorio`: the ledger's `execucao_id`. Not the id of a replay execution, so a
    /// rerun of that execution never settles a report in flight as its own abandoned effect.
    pub execution_id: String,
}

impl ReportKey {
    pub fn new(sender: &str, report_id: &str) -> ReportKey {
        let event_id = format!("{sender}:{report_id}");
        ReportKey {
            key: format!("{event_id}:{EFFECT_TYPE}"),
            event_id,
            execution_id: format!("{sender}:relatorio"),
        }
    }
}

/// What happened to one report.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// Accepted by the SMTP server, with its reply code; the ledger says `concluido`.
    Sent { key: String, reply: String },
    /// Written as an `.eml` file.
    Written { key: String, path: PathBuf },
    /// The ledger already holds the key (sent, in flight, or `incerto`): not sent again.
    Already { key: String, entry: Option<Entry> },
    /// Certainly not accepted; the key was released, so the next attempt sends it.
    Failed { key: String, class: String },
    /// May or may not have been accepted; the key is `incerto`, in the review queue.
    Uncertain { key: String, class: String },
}

impl Delivery {
    pub fn key(&self) -> &str {
        match self {
            Delivery::Sent { key, .. }
            | Delivery::Written { key, .. }
            | Delivery::Already { key, .. }
            | Delivery::Failed { key, .. }
            | Delivery::Uncertain { key, .. } => key,
        }
    }

    /// One line for people.
    pub fn describe(&self, target: &str) -> String {
        match self {
            Delivery::Sent { key, reply } => format!("{key}: sent via {target} (reply {reply})"),
            Delivery::Written { key, path } => format!("{key}: written to {}", path.display()),
            Delivery::Already { key, entry: Some(e) } if e.estado == LedgerState::Done => format!(
                "{key}: already sent at {}; not sent again",
                e.atualizado_em.format("%Y-%m-%d %H:%M:%S UTC")
            ),
            Delivery::Already { key, entry: Some(e) } if e.estado == LedgerState::Uncertain => format!(
                "{key}: an earlier send's outcome is unknown (incerto); not sent again. Check the mailbox, then `replay-ledger review resolve {key} --sent` or `--not-sent` (the next attempt sends it)"
            ),
            Delivery::Already { key, .. } => format!(
                "{key}: being sent by another process, or abandoned by one that died (the sweeper moves it to incerto after stale_after); not sent"
            ),
            Delivery::Failed { key, class } => format!(
                "{key}: not accepted by {target} ({class}); released, the next attempt sends it"
            ),
            Delivery::Uncertain { key, class } => format!(
                "{key}: outcome unknown ({class}); marked incerto for review, never resent automatically"
            ),
        }
    }

    /// Whether the report is known to have reached its destination (now or before).
    pub fn is_delivered(&self) -> bool {
        match self {
            Delivery::Sent { .. } | Delivery::Written { .. } => true,
            Delivery::Already { entry, .. } => entry
                .as_ref()
                .is_some_and(|e| e.estado == LedgerState::Done),
            Delivery::Failed { .. } | Delivery::Uncertain { .. } => false,
        }
    }
}

/// Sends `message` under `key`, at most once: through the ledger for SMTP, as a file otherwise
/// (into the outbox, or `out` when given).
pub async fn deliver(
    pool: &PgPool,
    mailer: &Mailer,
    key: &ReportKey,
    message: &Message,
) -> Result<Delivery, DeliverError> {
    match mailer.outbox_dir() {
        Some(dir) => write(key, message, &dir.join(mail::eml_name(&key.key))),
        None => Ok(send_once(pool, mailer, key, message).await?),
    }
}

/// Writes the `.eml` of `key` to `path`.
pub fn write(
    key: &ReportKey,
    message: &Message,
    path: &std::path::Path,
) -> Result<Delivery, DeliverError> {
    mail::write_eml(path, message).map_err(|source| DeliverError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    tracing::info!(key = %key.key, path = %path.display(), "report written");
    Ok(Delivery::Written {
        key: key.key.clone(),
        path: path.to_path_buf(),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// Reserve → send → complete (or release / mark uncertain), each ledger change conditioned on
/// this claim. A database failure after the send leaves the key `reservado`: flagged by the sweeper.
async fn send_once(
    pool: &PgPool,
    mailer: &Mailer,
    key: &ReportKey,
    message: &Message,
) -> Result<Delivery, sqlx::Error> {
    let claim = Claim::new(key.execution_id.clone());
    let item = Reservation {
        key: &key.key,
        event_id: &key.event_id,
        effect_type: EFFECT_TYPE,
    };
    let backoff = Backoff::default();
    let held = db::retry("reserve report", backoff, || {
        ledger::reserve(pool, &claim, std::slice::from_ref(&item), None)
    })
    .await?;
    if held.is_empty() {
        let entry = ledger::entry(pool, &key.key).await?;
        return Ok(Delivery::Already {
            key: key.key.clone(),
            entry,
        });
    }
    let keys = vec![key.key.clone()];
    let started = Instant::now();
    let result = mailer.send(message).await;
    let attempt = Attempt::new(&key.key, started, result.as_ref().err().map(class_of));
    let tries = std::slice::from_ref(&attempt);
    let delivery = match result {
        Ok(reply) => {
            let answer = Some(json!({ "transporte": "smtp", "resposta": reply }));
            let done = db::retry("complete report", backoff, || {
                ledger::complete(pool, &claim, &keys, std::slice::from_ref(&answer), tries)
            })
            .await?;
            if done.is_empty() {
                tracing::warn!(key = %key.key, "report sent, but its reservation was taken from this process meanwhile (it is incerto now)");
            }
            Delivery::Sent {
                key: key.key.clone(),
                reply,
            }
        }
        Err(SendError::NotAccepted { class }) => {
            db::retry("release report", backoff, || {
                ledger::release(pool, &claim, &keys, tries)
            })
            .await?;
            Delivery::Failed {
                key: key.key.clone(),
                class,
            }
        }
        Err(SendError::Unknown { class }) => {
            let why = [ledger::Why::of_failure(&class)];
            db::retry("mark report uncertain", backoff, || {
                ledger::mark_uncertain(pool, &claim, &keys, &why, tries)
            })
            .await?;
            Delivery::Uncertain {
                key: key.key.clone(),
                class,
            }
        }
    };
    log(&delivery, &mailer.target());
    Ok(delivery)
}

fn class_of(e: &SendError) -> String {
    match e {
        SendError::NotAccepted { class } | SendError::Unknown { class } => class.clone(),
    }
}

fn log(delivery: &Delivery, target: &str) {
    match delivery {
        Delivery::Sent { key, reply } => {
            tracing::info!(key = %key, target, reply = %reply, "report sent");
        }
        Delivery::Failed { key, class } => {
            tracing::warn!(key = %key, target, class = %class, "report not accepted; released for the next attempt");
        }
        Delivery::Uncertain { key, class } => {
            tracing::error!(key = %key, target, class = %class, "report send outcome unknown; marked incerto for review");
        }
        Delivery::Written { .. } | Delivery::Already { .. } => {}
    }
}
