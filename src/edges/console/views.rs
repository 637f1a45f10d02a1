//! What the pages show, as the handlers find it and the templates render it: the models both
//! import, so a template imports no handler (handlers import templates, never the reverse).
//!
//! - [`Standing`] and [`Gate`]: where a simulation stands with respect to approval (found by
//!   `approve`, shown on an execution's page);
//! - [`AuditRow`] and [`Action`]: a row of `console_auditoria` (read by `audit`, listed on the
//!   audit page);
//! - [`LiveView`]: the live consumer's page (read by `live`);
//! - [`RebuildView`]: the rebuild's page (read by `rebuild`).

use chrono::{DateTime, Utc};

use replay_ledger_core::domain::Event;
use replay_ledger_core::engine::approval::Approval;
use replay_ledger_core::engine::definition::FieldChange;
use replay_ledger_core::services::consumer::Lag;
use replay_ledger_core::services::rebuild::{DiffRow, Rebuild};
use replay_ledger_core::shared::words::db_words;
use replay_ledger_core::tables::execution::Execution;

/// Where a simulation stands with respect to approval, as the page shows it.
#[derive(Debug)]
pub(super) enum Standing {
    /// Not a simulation (a real run shows what it applied instead), or not a gated job's.
    NotNeeded,
    /// The job could not be found or read in the jobs directory.
    NoJob(String),
    /// Not finished: nothing to approve yet.
    Unfinished,
    /// May be approved now: the button (for finance).
    Approvable,
    /// Changed since the simulation ran: what, and no button.
    Changed {
        what: String,
        fields: Vec<FieldChange>,
    },
    /// This pass is approved; `gate` says whether the real run may start now (or that it ran).
    Approved { approval: Box<Approval>, gate: Gate },
}

/// What the gate of the real run says about an approved simulation.
#[derive(Debug)]
pub(super) enum Gate {
    Open,
    /// The real run started after the approval: its page says what it applied.
    Ran(String),
    Closed(String),
}

db_words! {
    /// What an audit row records (`console_auditoria.acao`, written by the database's functions
    /// and triggers).
    pub enum Action("console audit action") {
        Login = "login",
        LoginRefused = "login-recusado",
        Logout = "logout",
        Approval = "aprovacao",
        Resolution = "resolucao",
        UserCreated = "usuario-criado",
        UserChanged = "usuario-alterado",
        UserRemoved = "usuario-removido",
        /// A run, a resume or a sweep asked of `serve` (`console_solicitar`).
        Request = "solicitacao",
    }
}

/// One row of the audit trail.
#[derive(Debug, Clone)]
pub(super) struct AuditRow {
    pub id: i64,
    pub em: DateTime<Utc>,
    pub quem: String,
    pub acao: Action,
    pub alvo: Option<String>,
    pub detalhe: Option<String>,
    pub endereco: Option<String>,
}

replay_ledger_core::tables::db::from_row!(AuditRow {
    id,
    em,
    quem,
    acao,
    alvo,
    detalhe,
    endereco
});

/// What the live consumer's page shows.
pub(super) struct LiveView {
    /// Its execution row; `None` when `consume` never ran here.
    pub execution: Option<Execution>,
    pub lag: Option<Lag>,
    /// The event at its checkpoint.
    pub last_event: Option<Event>,
    /// Keys of `ao-vivo` by ledger state.
    pub keys: Vec<(String, i64)>,
}

/// What the rebuild's page shows.
pub(super) struct RebuildView {
    /// The open rebuild, or the newest one; `None` when none ever ran here.
    pub rebuild: Option<Rebuild>,
    /// The first differing orders of the comparison.
    pub differing: Vec<DiffRow>,
    /// The approval of the comparison shown, and who gave it.
    pub approved: Option<(i64, String)>,
    /// Of the differing rows: those the swap moves to an older version, those it deletes.
    pub beyond_values: (i64, i64),
}
