//! Every statement on `job_rodada`: the last run of each job that leaves no execution behind (a
//! sweep, a report, a verify, a rebuild job), for `status` and the console. What the run found is
//! kept twice: the English line `status` prints (`detalhe`), and the same as data
//! (`detalhe_dados`, a [`RunDetail`]) that each surface says in its own language.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use replay_ledger_core::tables::execution::State;

/// What a job's last run found or why it failed, as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "tipo", rename_all = "kebab-case")]
pub enum RunDetail {
    /// A sweeper pass's counts.
    Sweep {
        retaken: u64,
        completed: u64,
        uncertain: u64,
        resent: u64,
    },
    /// A verify run: the days that differ, and the corrections proposed for them.
    Verify { days_differing: u64, proposals: u64 },
    /// A rebuild compared: how many orders differ, the comparison's fingerprint to approve.
    RebuildCompared {
        orders_differing: i64,
        fingerprint: String,
    },
    /// A rebuild still waiting for the approval of the comparison shown earlier.
    RebuildAwaiting { fingerprint: String },
    /// A rebuild swapped in under an approval.
    RebuildSwapped { approval: i64 },
    /// It failed; the cause is in the log (never a payload or a secret here).
    SeeLog,
    /// It failed, saying why (one inert line).
    Failed { error: String },
}

impl RunDetail {
    /// What `status` prints.
    pub fn english(&self) -> String {
        match self {
            RunDetail::Sweep {
                retaken,
                completed,
                uncertain,
                resent,
            } => format!(
                "retaken {retaken}, completed {completed}, uncertain {uncertain}, resent {resent}"
            ),
            RunDetail::Verify { days_differing, .. } => {
                format!("{days_differing} day(s) with differences")
            }
            RunDetail::RebuildCompared {
                orders_differing,
                fingerprint,
            } => format!(
                "{orders_differing} orders differ; fingerprint {fingerprint} waits for approval"
            ),
            RunDetail::RebuildAwaiting { fingerprint } => {
                format!("fingerprint {fingerprint} waits for approval")
            }
            RunDetail::RebuildSwapped { approval } => format!("swapped in (approval {approval})"),
            RunDetail::SeeLog => "see the log".into(),
            RunDetail::Failed { error } => error.clone(),
        }
    }

    /// What the console shows.
    pub fn portuguese(&self) -> String {
        match self {
            RunDetail::Sweep {
                retaken,
                completed,
                uncertain,
                resent,
            } => format!(
                "retomadas {retaken}, concluídas {completed}, incertas {uncertain}, reenviadas {resent}"
            ),
            RunDetail::Verify {
                days_differing,
                proposals,
            } => match (days_differing, proposals) {
                (0, _) => "nenhum dia com diferenças".into(),
                (d, 0) => format!("{d} dia(s) com diferenças"),
                (d, p) => format!("{d} dia(s) com diferenças; {p} correção(ões) proposta(s)"),
            },
            RunDetail::RebuildCompared {
                orders_differing,
                fingerprint,
            } => format!(
                "{orders_differing} pedido(s) diferem; a comparação {} aguarda aprovação",
                short(fingerprint)
            ),
            RunDetail::RebuildAwaiting { fingerprint } => {
                format!("a comparação {} aguarda aprovação", short(fingerprint))
            }
            RunDetail::RebuildSwapped { approval } => {
                format!("trocada (aprovação {approval})")
            }
            RunDetail::SeeLog => "falhou: veja o log do serve".into(),
            RunDetail::Failed { .. } => "falhou: veja o log do serve".into(),
        }
    }
}

/// The first characters of a fingerprint, as the console shows it.
fn short(fingerprint: &str) -> &str {
    fingerprint.get(..12).unwrap_or(fingerprint)
}

/// A job's last run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRun {
    pub job: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    /// `concluida` or `falhou`.
    pub state: State,
    /// Counts, or why it failed: the English line.
    pub detail: Option<String>,
    /// The same, as data (`None` for a run recorded by an older version).
    pub data: Option<RunDetail>,
}

/// Records a job's run, replacing its previous one.
pub async fn record(pool: &PgPool, run: &JobRun) -> Result<(), sqlx::Error> {
    sqlx::query(
        r#"
        insert into job_rodada (job, iniciada_em, concluida_em, resultado, detalhe, detalhe_dados)
        values ($1, $2, $3, $4, $5, $6)
        on conflict (job) do update
        set iniciada_em = excluded.iniciada_em, concluida_em = excluded.concluida_em,
            resultado = excluded.resultado, detalhe = excluded.detalhe,
            detalhe_dados = excluded.detalhe_dados
        "#,
    )
    .bind(&run.job)
    .bind(run.started_at)
    .bind(run.finished_at)
    .bind(run.state)
    .bind(&run.detail)
    .bind(run.data.as_ref().map(sqlx::types::Json))
    .execute(pool)
    .await?;
    Ok(())
}

/// A row of `job_rodada`, in its column order.
type Row = (
    String,
    DateTime<Utc>,
    DateTime<Utc>,
    State,
    Option<String>,
    Option<serde_json::Value>,
);

/// Every job's last run.
pub async fn all(pool: &PgPool) -> Result<Vec<JobRun>, sqlx::Error> {
    let rows: Vec<Row> = sqlx::query_as(
        "select job, iniciada_em, concluida_em, resultado, detalhe, detalhe_dados from job_rodada \
         order by job",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(job, started_at, finished_at, state, detail, data)| JobRun {
                job,
                started_at,
                finished_at,
                state,
                detail,
                data: data.and_then(|d| serde_json::from_value(d).ok()),
            },
        )
        .collect())
}
