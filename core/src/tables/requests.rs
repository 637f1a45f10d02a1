//! Every statement on `execucao_solicitada`: what people asked for from the console (start an
//! approved gated real run, resume an interrupted one, sweep now). The console records a request
//! only through the `security definer` function `console_solicitar`, which checks the session's
//! role and writes the audit row in the same transaction; `serve` claims pending requests
//! (`for update skip locked`, so two daemons never take the same one) and records how each ended.
//! Every change of state names the state it expects in its `where`.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::shared::words::db_words;

db_words! {
    /// What a request asks for (`execucao_solicitada.acao`).
    pub enum Action("request action") {
        /// Start the real run of an approved simulation.
        Start = "executar",
        /// Resume an interrupted or failed real run.
        Resume = "retomar",
        /// One sweeper pass now.
        Sweep = "varrer",
        /// Stop a real run in progress at its next batch boundary (recorded already done: the
        /// runner holding the execution acts on it, not `serve`).
        Interrupt = "interromper",
        /// Run a gated job's simulation again, from the window's start (after the data changed
        /// under it, say).
        Simulate = "simular",
    }
}

db_words! {
    /// Where a request is (`execucao_solicitada.estado`).
    pub enum RequestState("request state") {
        Pending = "pendente",
        Running = "em-andamento",
        Done = "concluida",
        Failed = "falhou",
    }
}

/// One request, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: i64,
    pub action: Action,
    pub job: String,
    /// The execution it is about (`executar`: the execution id; `retomar`: the run's key).
    pub execution_id: Option<String>,
    pub note: Option<String>,
    /// `console:<email>`.
    pub asked_by: String,
    pub asked_at: DateTime<Utc>,
    pub state: RequestState,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// One line: what the run did, or why it failed.
    pub result: Option<String>,
}

crate::tables::db::from_row!(Request {
    id,
    action = "acao",
    job,
    execution_id = "execucao_id",
    note = "nota",
    asked_by = "solicitado_por",
    asked_at = "solicitado_em",
    state = "estado",
    started_at = "iniciado_em",
    finished_at = "concluido_em",
    result = "resultado"
});

const COLUMNS: &str = "id, acao, job, execucao_id, nota, solicitado_por, solicitado_em, estado, \
                       iniciado_em, concluido_em, resultado";

/// What a console session asks for.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// The digest of the session's cookie token: the function finds the account from it.
    pub token_digest: &'a str,
    pub idle_timeout: std::time::Duration,
    pub action: Action,
    pub job: &'a str,
    pub execution_id: Option<&'a str>,
    pub note: Option<&'a str>,
}

/// Records a request as the session's account, with its audit row (`console_solicitar`). The
/// database refuses with 42501 when the session is over or its role may not, and with 23505 when
/// the job already has an open request.
pub async fn ask(pool: &PgPool, ask: Ask<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("select console_solicitar($1, make_interval(secs => $2), $3, $4, $5, $6)")
        .bind(ask.token_digest)
        .bind(ask.idle_timeout.as_secs_f64())
        .bind(ask.action)
        .bind(ask.job)
        .bind(ask.execution_id)
        .bind(ask.note)
        .fetch_one(pool)
        .await
}

/// Whether the database refused a request because the job already has an open one.
pub fn is_already_open(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == "23505")
}

/// Takes the oldest pending request, if any: it becomes `em-andamento`. Another daemon's claim
/// in flight is skipped, never waited for, so each request is taken once.
pub async fn claim_next(pool: &PgPool) -> Result<Option<Request>, sqlx::Error> {
    sqlx::query_as(&format!(
        r#"
        update execucao_solicitada set estado = 'em-andamento', iniciado_em = now()
        where id = (
            select id from execucao_solicitada where estado = 'pendente'
            order by id limit 1 for update skip locked
        ) and estado = 'pendente'
        returning {COLUMNS}
        "#
    ))
    .fetch_optional(pool)
    .await
}

/// Records how a claimed request ended (`concluida` or `falhou`) and why; false when it was not
/// `em-andamento` any more.
pub async fn finish(
    pool: &PgPool,
    id: i64,
    state: RequestState,
    result: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        r#"
        update execucao_solicitada set estado = $2, concluido_em = now(), resultado = $3
        where id = $1 and estado = 'em-andamento'
        "#,
    )
    .bind(id)
    .bind(state)
    .bind(result)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The latest requests about an execution, newest first.
pub async fn of_execution(
    pool: &PgPool,
    execution_id: &str,
    limit: i64,
) -> Result<Vec<Request>, sqlx::Error> {
    sqlx::query_as(&format!(
        "select {COLUMNS} from execucao_solicitada where execucao_id = $1 order by id desc limit $2"
    ))
    .bind(execution_id)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// The latest requests of one action (the sweeps asked for), newest first.
pub async fn of_action(
    pool: &PgPool,
    action: Action,
    limit: i64,
) -> Result<Vec<Request>, sqlx::Error> {
    sqlx::query_as(&format!(
        "select {COLUMNS} from execucao_solicitada where acao = $1 order by id desc limit $2"
    ))
    .bind(action)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// Requests `em-andamento` since before `older_than` ago: taken by a `serve` that may have died
/// (the caller checks, by the job's lock, that nobody runs them).
pub async fn running_since_before(
    pool: &PgPool,
    older_than: std::time::Duration,
) -> Result<Vec<Request>, sqlx::Error> {
    sqlx::query_as(&format!(
        r#"
        select {COLUMNS} from execucao_solicitada
        where estado = 'em-andamento' and iniciado_em < now() - make_interval(secs => $1)
        order by id
        "#
    ))
    .bind(older_than.as_secs_f64())
    .fetch_all(pool)
    .await
}

/// Who asked from the console for each execution's run (`executar`) or resume (`retomar`), the
/// newest ask per execution: execution key → `console:<email>`.
pub async fn askers(
    pool: &PgPool,
) -> Result<std::collections::HashMap<String, String>, sqlx::Error> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        r#"
        select distinct on (execucao_id) execucao_id, solicitado_por
        from execucao_solicitada
        where acao in ('executar', 'retomar') and execucao_id is not null
        order by execucao_id, id desc
        "#,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().collect())
}
