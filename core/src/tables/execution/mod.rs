//! Executions and their bookkeeping: `reprocessamento_execucao` (what an execution is, its fixed
//! `posicao` range, its summary), `reprocessamento_checkpoint` (the last `posicao` fully settled),
//! `evento_rejeitado`, and the PostgreSQL advisory lock that lets one process at a time run an
//! execution (invariant `kill-and-rerun`). The live consumer's execution and checkpoint are in
//! `live.rs`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

use crate::shared::summary::Summary;
use crate::shared::words::db_words;
use crate::tables::archive::Window;
use crate::tables::tally::{self, Scope};

pub mod lease;
mod live;
mod lock;
mod owner;
mod passes;
pub mod progress;
mod view;

pub use lease::Lease;
pub use live::{advance_live, ensure_live, live_checkpoint};
pub use lock::{ExecutionLock, LockError};
pub use owner::{is_fenced, try_advisory_lock, Owner, FENCED};
pub use passes::{passes, PassRecord};
pub use view::ExecutionView;

db_words! {
    /// How an execution treats state and effects (`reprocessamento_execucao.modo`).
    pub enum Mode("execution mode") {
        /// Writes diff rows only; the ledger and `comissao` are left as they are.
        Simulation = "simulacao",
        /// Corrects `comissao` and performs the missing effects.
        Real = "real",
        /// The live consumer (`ao-vivo`).
        Live = "ao-vivo",
    }
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::Simulation => "simulation",
            Mode::Real => "real run",
            Mode::Live => "live",
        }
    }
}

db_words! {
    /// Where an execution stands (`reprocessamento_execucao.estado`).
    pub enum State("execution state") {
        /// A process is running it, or died running it (its lock tells which).
        Running = "em-andamento",
        /// Its window is done.
        Finished = "concluida",
        /// It stopped on an error; a rerun resumes it.
        Failed = "falhou",
        /// Stopped on request between batches; a rerun resumes it.
        Interrupted = "interrompida",
    }
}

/// How many executions other than the live consumer are running (the console's lists reload
/// themselves while any is).
pub async fn replays_running(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "select count(*) from reprocessamento_execucao where estado = 'em-andamento' and modo <> 'ao-vivo'",
    )
    .fetch_one(pool)
    .await
}

/// The checkpoint key of an execution in a mode: a simulation keeps its own, so a finished
/// simulation never makes the real run skip the window. `:` cannot appear in a job name.
pub fn checkpoint_key(execution_id: &str, mode: Mode) -> String {
    match mode {
        Mode::Simulation => format!("{execution_id}:simulacao"),
        Mode::Real | Mode::Live => execution_id.to_string(),
    }
}

/// The execution id of a checkpoint key: `<id>:simulacao` → `<id>` (the inverse of
/// [`checkpoint_key`]).
pub fn execution_id_of(key: &str) -> &str {
    key.strip_suffix(":simulacao").unwrap_or(key)
}

/// Whether `key` names a partition of an execution (`<execution>:p<index>`), not an execution.
pub fn is_partition_key(key: &str) -> bool {
    key.rsplit_once(":p")
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A row of `reprocessamento_execucao` with its checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Execution {
    pub key: String,
    pub job: String,
    pub mode: Mode,
    pub window_from: Option<DateTime<Utc>>,
    pub window_to: Option<DateTime<Utc>>,
    pub first: Option<i64>,
    pub last: Option<i64>,
    pub total_events: i64,
    pub state: State,
    pub pass: i32,
    pub started_by: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
    /// Its figures as every surface shows them (`status`, the console, the report, `/metrics`):
    /// the run's, over all its passes — see [`Summary::over_passes`].
    pub summary: Summary,
    /// The figures of its current pass alone, from the tallies of that pass (a partitioned
    /// execution's: its partitions'): what a resumed pass goes on adding to, and what `run
    /// --json` prints at the top level. Not in the row's JSON (`summary` is).
    #[serde(skip)]
    pub pass_summary: Summary,
    /// The job's outcome-deciding definition when the pass started (see `approval`).
    pub definition: Option<serde_json::Value>,
    pub checkpoint: Option<i64>,
    /// Who asked from the console for this run to stop at its next batch boundary, and when
    /// (cleared by the next pass or resume).
    pub interrupt_asked_by: Option<String>,
    pub interrupt_asked_at: Option<DateTime<Utc>>,
}

/// A row as selected by [`select_execution`].
struct ExecutionRow {
    execution_id: String,
    job: String,
    modo: Mode,
    janela_inicio: Option<DateTime<Utc>>,
    janela_fim: Option<DateTime<Utc>>,
    posicao_inicial: Option<i64>,
    posicao_final: Option<i64>,
    total_eventos: i64,
    estado: State,
    passagem: i32,
    iniciada_por: String,
    iniciada_em: DateTime<Utc>,
    concluida_em: Option<DateTime<Utc>>,
    erro: Option<String>,
    /// What versions before the tallies stored; read only when no tally exists.
    resumo: sqlx::types::Json<Summary>,
    contagem: serde_json::Value,
    /// What each pass up to the current one added to the run's figures, summed.
    contagem_execucao: serde_json::Value,
    definicao: Option<serde_json::Value>,
    ultima_posicao: Option<i64>,
    interrupcao_pedida_por: Option<String>,
    interrupcao_pedida_em: Option<DateTime<Utc>>,
}

crate::tables::db::from_row!(ExecutionRow {
    execution_id = "execucao_id",
    job,
    modo,
    janela_inicio,
    janela_fim,
    posicao_inicial,
    posicao_final,
    total_eventos,
    estado,
    passagem,
    iniciada_por,
    iniciada_em,
    concluida_em,
    erro,
    resumo,
    contagem,
    contagem_execucao,
    definicao,
    ultima_posicao,
    interrupcao_pedida_por,
    interrupcao_pedida_em,
});

impl From<ExecutionRow> for Execution {
    fn from(r: ExecutionRow) -> Self {
        let tallied = r.contagem.as_object().is_some_and(|o| !o.is_empty());
        let pass_summary = if tallied {
            crate::tables::tally::summary_of(&r.contagem)
        } else {
            r.resumo.0
        };
        let run = crate::tables::tally::summary_of(&r.contagem_execucao).run;
        Execution {
            key: r.execution_id,
            job: r.job,
            mode: r.modo,
            window_from: r.janela_inicio,
            window_to: r.janela_fim,
            first: r.posicao_inicial,
            last: r.posicao_final,
            total_events: r.total_eventos,
            state: r.estado,
            pass: r.passagem,
            started_by: r.iniciada_por,
            started_at: r.iniciada_em,
            finished_at: r.concluida_em,
            error: r.erro,
            summary: pass_summary.over_passes(r.modo == Mode::Real, run),
            pass_summary,
            definition: r.definicao,
            checkpoint: r.ultima_posicao,
            interrupt_asked_by: r.interrupcao_pedida_por,
            interrupt_asked_at: r.interrupcao_pedida_em,
        }
    }
}

/// Executions with their checkpoint and their figures, summed from the tallies of their pass.
fn select_execution(filter: &str) -> String {
    format!(
        "{} from reprocessamento_execucao e {JOIN_CHECKPOINT} {filter}",
        execution_columns()
    )
}

/// The columns of an [`ExecutionRow`], from a row `e` of `reprocessamento_execucao` (the table,
/// or the rows a write returned) joined to its checkpoint `c`.
fn execution_columns() -> String {
    format!(
        r#"
        select e.execucao_id, e.job, e.modo, e.janela_inicio, e.janela_fim, e.posicao_inicial,
               e.posicao_final, e.total_eventos, e.estado, e.passagem, e.iniciada_por,
               e.iniciada_em, e.concluida_em, e.erro, e.resumo,
               {tallies} as contagem, {run} as contagem_execucao,
               e.definicao, c.ultima_posicao, e.interrupcao_pedida_por, e.interrupcao_pedida_em
        "#,
        tallies = crate::tables::tally::SUMMED_FOR_EXECUTION,
        run = crate::tables::tally::SUMMED_FOR_RUN,
    )
}

const JOIN_CHECKPOINT: &str = "left join reprocessamento_checkpoint c using (execucao_id)";

impl Execution {
    /// The window fixed when its pass started; `None` when it held no event.
    pub fn window(&self) -> Option<Window> {
        let (from, to) = (self.window_from?, self.window_to?);
        Some(Window {
            from,
            to,
            first: self.first?,
            last: self.last?,
            count: self.total_events,
            partition: None,
        })
    }
}

/// One execution by checkpoint key.
pub async fn load(pool: &PgPool, key: &str) -> Result<Option<Execution>, sqlx::Error> {
    let sql = select_execution("where e.execucao_id = $1");
    let row: Option<ExecutionRow> = sqlx::query_as(&sql).bind(key).fetch_optional(pool).await?;
    Ok(row.map(Execution::from))
}

/// Executions by key, in the order of `keys` (missing ones left out).
pub async fn load_many(pool: &PgPool, keys: &[String]) -> Result<Vec<Execution>, sqlx::Error> {
    let sql = select_execution("where e.execucao_id = any($1)");
    let rows: Vec<ExecutionRow> = sqlx::query_as(&sql).bind(keys).fetch_all(pool).await?;
    let mut found: Vec<Execution> = rows.into_iter().map(Execution::from).collect();
    found.sort_by_key(|e| keys.iter().position(|k| *k == e.key));
    Ok(found)
}

/// Every execution, newest first.
pub async fn list(pool: &PgPool) -> Result<Vec<Execution>, sqlx::Error> {
    let sql = select_execution("order by e.iniciada_em desc, e.execucao_id");
    let rows: Vec<ExecutionRow> = sqlx::query_as(&sql).fetch_all(pool).await?;
    Ok(rows.into_iter().map(Execution::from).collect())
}

/// What a new pass of an execution is. It is recorded as started by the database role of the
/// connection, at `started_by` (the host that ran it): `role@host`.
#[derive(Debug, Clone)]
pub struct NewPass<'a> {
    pub job: &'a str,
    pub mode: Mode,
    pub window_from: DateTime<Utc>,
    pub window_to: DateTime<Utc>,
    /// `None`: the window holds no event.
    pub window: Option<Window>,
    pub started_by: &'a str,
    /// The pass number to record (a partition takes its parent's); `None` = the next one.
    pub pass: Option<i32>,
    /// The job's outcome-deciding definition (`approval::Definition`), recorded with the pass.
    pub definition: Option<&'a serde_json::Value>,
}

/// Starts a pass of the execution `owner` holds (the first, or a new one after `--restart`):
/// fixes the `posicao` range, resets the checkpoint to before the window, records the job's
/// definition, in one transaction. The pass's figures start from zero (tallies are per pass).
/// Returns the pass number and its start.
pub async fn start_pass(
    pool: &PgPool,
    owner: &Owner,
    pass: &NewPass<'_>,
) -> Result<(i32, DateTime<Utc>), sqlx::Error> {
    let key = owner.key.as_str();
    let mut tx = pool.begin().await?;
    owner.confirm(&mut tx).await?;
    let (first, last, count) = match pass.window {
        Some(w) => (Some(w.first), Some(w.last), w.count),
        None => (None, None, 0),
    };
    let (number, started_at): (i32, DateTime<Utc>) = sqlx::query_as(
        r#"
        insert into reprocessamento_execucao
          (execucao_id, job, modo, janela_inicio, janela_fim, posicao_inicial, posicao_final,
           total_eventos, estado, iniciada_por, passagem, definicao)
        values ($1, $2, $3, $4, $5, $6, $7, $8, 'em-andamento', session_user || '@' || $9,
                coalesce($10, 1), $11)
        on conflict (execucao_id) do update
        set job = excluded.job, modo = excluded.modo, janela_inicio = excluded.janela_inicio,
            janela_fim = excluded.janela_fim, posicao_inicial = excluded.posicao_inicial,
            posicao_final = excluded.posicao_final, total_eventos = excluded.total_eventos,
            estado = 'em-andamento',
            passagem = coalesce($10, reprocessamento_execucao.passagem + 1),
            iniciada_por = excluded.iniciada_por, iniciada_em = now(), concluida_em = null,
            erro = null, resumo = '{}'::jsonb, definicao = excluded.definicao,
            interrupcao_pedida_em = null, interrupcao_pedida_por = null, atualizado_em = now()
        returning passagem, iniciada_em
        "#,
    )
    .bind(key)
    .bind(pass.job)
    .bind(pass.mode)
    .bind(pass.window_from)
    .bind(pass.window_to)
    .bind(first)
    .bind(last)
    .bind(count)
    .bind(pass.started_by)
    .bind(pass.pass)
    .bind(pass.definition)
    .fetch_one(&mut *tx)
    .await?;
    tally::clear(&mut tx, &Scope::whole(key, number)).await?;
    // Before the window: the position before its first event, or no checkpoint row at all when
    // that event is at i64::MIN (no position lies before it; the runner reads from the start).
    match first.map(|f| f.checked_sub(1)) {
        Some(Some(before_window)) => set_checkpoint(&mut tx, key, before_window).await?,
        Some(None) => clear_checkpoint(&mut tx, key).await?,
        None => set_checkpoint(&mut tx, key, 0).await?,
    }
    sqlx::query("delete from evento_rejeitado where execucao_id = $1")
        .bind(key)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok((number, started_at))
}

/// Marks a resumed execution as running again.
pub async fn resume(pool: &PgPool, owner: &Owner) -> Result<(), sqlx::Error> {
    sqlx::query(
        r#"
        update reprocessamento_execucao
        set estado = 'em-andamento', erro = null, atualizado_em = now(),
            interrupcao_pedida_em = null, interrupcao_pedida_por = null
        where execucao_id = $1 and (select confirmar_dono($1, $2))
        "#,
    )
    .bind(&owner.key)
    .bind(owner.epoch)
    .execute(pool)
    .await?;
    Ok(())
}

/// Moves the checkpoint (the seed's table) to `posicao`.
async fn set_checkpoint(
    conn: &mut PgConnection,
    key: &str,
    posicao: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        r#"
        insert into reprocessamento_checkpoint (execucao_id, ultima_posicao) values ($1, $2)
        on conflict (execucao_id) do update
        set ultima_posicao = excluded.ultima_posicao, atualizado_em = now()
        "#,
    )
    .bind(key)
    .bind(posicao)
    .execute(conn)
    .await?;
    Ok(())
}

/// Removes the checkpoint: nothing of the execution is settled.
async fn clear_checkpoint(conn: &mut PgConnection, key: &str) -> Result<(), sqlx::Error> {
    sqlx::query("delete from reprocessamento_checkpoint where execucao_id = $1")
        .bind(key)
        .execute(conn)
        .await?;
    Ok(())
}

/// Advances the checkpoint past a settled prefix of the window and adds the figures of the
/// batches it passes to the tallies, together (invariant `checkpoint-after-settle`: the caller
/// passes only a position whose events are all settled), so each batch is counted exactly once —
/// and only while `owner` still owns the execution (invariant `one-owner`), for the rest of the
/// caller's transaction. Returns whether someone asked from the console for the run to stop
/// (on its own row or, for a partition, its execution's): the runner then stops at this batch
/// boundary.
pub async fn advance(
    conn: &mut PgConnection,
    owner: &Owner,
    scope: &Scope,
    posicao: i64,
    batch: &Summary,
) -> Result<Interrupt, sqlx::Error> {
    owner.confirm(conn).await?;
    set_checkpoint(conn, &scope.key, posicao).await?;
    tally::add(conn, scope, batch).await?;
    tally::settle_pending(conn, scope, posicao).await?;
    touch(conn, &scope.key).await
}

/// Whether a run was asked to stop at its next batch boundary, and by whom.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Interrupt {
    pub asked_by: Option<String>,
}

/// Marks an execution's row as just updated (what `status` shows as its last activity), and
/// returns, from the same write, whether its run was asked to stop. A partition's ask is on its
/// execution's row: for a partition, that row is read too (one index read per batch).
async fn touch(conn: &mut PgConnection, key: &str) -> Result<Interrupt, sqlx::Error> {
    let sql = if is_partition_key(key) {
        r#"
        update reprocessamento_execucao e set atualizado_em = now()
        where e.execucao_id = $1
        returning coalesce(e.interrupcao_pedida_por,
                           (select p.interrupcao_pedida_por from reprocessamento_execucao p
                            where p.execucao_id = regexp_replace($1, ':p[0-9]+$', '')))
        "#
    } else {
        r#"
        update reprocessamento_execucao e set atualizado_em = now()
        where e.execucao_id = $1
        returning e.interrupcao_pedida_por
        "#
    };
    let asked_by: Option<Option<String>> = sqlx::query_scalar(sql)
        .bind(key)
        .fetch_optional(conn)
        .await?;
    Ok(Interrupt {
        asked_by: asked_by.flatten(),
    })
}

/// Ends an execution's process: `concluida`, `falhou` (with the error) or `interrompida`. Returns
/// the row as this write left it, with its checkpoint and figures (the update's own `returning`,
/// not a second read): what the run hands back to whoever prints or mails it. `None` when the row
/// is gone.
pub async fn finish(
    pool: &PgPool,
    owner: &Owner,
    state: State,
    error: Option<&str>,
) -> Result<Option<Execution>, sqlx::Error> {
    let sql = format!(
        r#"
        with e as (
            update reprocessamento_execucao
            set estado = $2, erro = $3, atualizado_em = now(),
                concluida_em = case when $2 = 'concluida' then now() else concluida_em end
            where execucao_id = $1 and (select confirmar_dono($1, $4))
            returning *
        )
        {columns} from e {JOIN_CHECKPOINT}
        "#,
        columns = execution_columns(),
    );
    let row: Option<ExecutionRow> = sqlx::query_as(&sql)
        .bind(&owner.key)
        .bind(state)
        .bind(error)
        .bind(owner.epoch)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(Execution::from))
}

/// A rejected event, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejected {
    pub event_id: String,
    pub posicao: i64,
    pub tipo: String,
    pub erro: String,
}

/// Records events that could not be applied; a rerun over the same event keeps the first record.
pub async fn record_rejected(
    conn: &mut PgConnection,
    key: &str,
    rejected: &[Rejected],
) -> Result<(), sqlx::Error> {
    if rejected.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = rejected.iter().map(|r| r.event_id.as_str()).collect();
    let posicoes: Vec<i64> = rejected.iter().map(|r| r.posicao).collect();
    let tipos: Vec<&str> = rejected.iter().map(|r| r.tipo.as_str()).collect();
    let erros: Vec<&str> = rejected.iter().map(|r| r.erro.as_str()).collect();
    sqlx::query(
        r#"
        insert into evento_rejeitado (execucao_id, evento_id, posicao, tipo, erro)
        select $1, * from unnest($2::text[], $3::bigint[], $4::text[], $5::text[])
        on conflict (execucao_id, evento_id) do nothing
        "#,
    )
    .bind(key)
    .bind(ids)
    .bind(posicoes)
    .bind(tipos)
    .bind(erros)
    .execute(conn)
    .await?;
    Ok(())
}

/// The rejected events of an execution, in `posicao` order.
pub async fn rejected(pool: &PgPool, key: &str) -> Result<Vec<Rejected>, sqlx::Error> {
    rejected_of(pool, std::slice::from_ref(&key.to_string())).await
}

/// The rejected events of several executions (a partitioned execution's partitions), in one
/// statement, in `posicao` order.
pub async fn rejected_of(pool: &PgPool, keys: &[String]) -> Result<Vec<Rejected>, sqlx::Error> {
    let rows: Vec<(String, i64, String, String)> = sqlx::query_as(
        r#"
        select evento_id, posicao, tipo, erro from evento_rejeitado
        where execucao_id = any($1) order by posicao, execucao_id
        "#,
    )
    .bind(keys)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(event_id, posicao, tipo, erro)| Rejected {
            event_id,
            posicao,
            tipo,
            erro,
        })
        .collect())
}
