//! Every statement on `reprocessamento_aprovacao`. Who approved is never written by this code:
//! the column defaults to `session_user`, the authenticated database role (a role granted
//! `--approver` may insert every column but that one), or, from the console, the function
//! `console_aprovar` writes the account of the session it is given.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::{Approval, Fingerprint};
use crate::engine::definition::Definition;
use crate::shared::summary::Totals;
use crate::tables::archive;

/// An approval to record.
pub(super) struct NewApproval {
    pub execution_id: String,
    pub job: String,
    pub simulation_pass: i32,
    pub simulation_finished_at: DateTime<Utc>,
    pub note: Option<String>,
    pub totals: Totals,
    pub fingerprint: Fingerprint,
}

const SELECT_APPROVAL: &str = r#"
    select id, execucao_id, job, simulacao_passagem, simulacao_concluida_em, aprovado_por,
           aprovado_em, nota, pedidos, pedidos_alterados, total_antes_centavos,
           total_depois_centavos, eventos_total, eventos_max_posicao, eventos_hash,
           comissao_hash, definicao
    from reprocessamento_aprovacao
"#;

/// The latest approval of an execution.
pub async fn latest(pool: &PgPool, execution_id: &str) -> Result<Option<Approval>, sqlx::Error> {
    let sql = format!("{SELECT_APPROVAL} where execucao_id = $1 order by id desc limit 1");
    let row: Option<ApprovalRow> = sqlx::query_as(&sql)
        .bind(execution_id)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(ApprovalRow::into_approval))
}

/// Every approval, newest first.
pub async fn list(pool: &PgPool) -> Result<Vec<Approval>, sqlx::Error> {
    let sql = format!("{SELECT_APPROVAL} order by id desc");
    let rows: Vec<ApprovalRow> = sqlx::query_as(&sql).fetch_all(pool).await?;
    Ok(rows.into_iter().map(ApprovalRow::into_approval).collect())
}

/// Records an approval as the session's role (the column's default) and returns it as stored.
pub(super) async fn insert(pool: &PgPool, a: NewApproval) -> Result<Approval, sqlx::Error> {
    let definition = a.fingerprint.definition.as_ref().map(Definition::to_json);
    let sql = format!(
        r#"
        with nova as (
            insert into reprocessamento_aprovacao
              (execucao_id, job, simulacao_passagem, simulacao_concluida_em, nota, pedidos,
               pedidos_alterados, total_antes_centavos, total_depois_centavos, eventos_total,
               eventos_max_posicao, eventos_hash, comissao_hash, definicao, versao_regra)
            values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
            returning *
        )
        {}
        "#,
        SELECT_APPROVAL.replace("from reprocessamento_aprovacao", "from nova")
    );
    let row: ApprovalRow = sqlx::query_as(&sql)
        .bind(&a.execution_id)
        .bind(&a.job)
        .bind(a.simulation_pass)
        .bind(a.simulation_finished_at)
        .bind(&a.note)
        .bind(a.totals.orders as i64)
        .bind(a.totals.changed as i64)
        .bind(a.totals.before_centavos)
        .bind(a.totals.after_centavos)
        .bind(a.fingerprint.events.count)
        .bind(a.fingerprint.events.max_posicao)
        .bind(&a.fingerprint.events.hash)
        .bind(&a.fingerprint.comissao)
        .bind(definition)
        .bind(rule_version(&a))
        .fetch_one(pool)
        .await?;
    Ok(row.into_approval())
}

/// What [`insert_in_console_once`] did.
pub(super) enum Once {
    Recorded(Approval),
    /// The latest approval of the execution is of this very simulation pass: nothing recorded.
    Already(Approval),
}

/// Records an approval as the finance account of a console session, through
/// `console_aprovar` (42501 unless the session is live and its account may approve), unless the
/// latest approval of the execution is of the same simulation pass. The check and the insert run
/// in one transaction under a lock of the execution, so forms posted at once record one approval.
pub(super) async fn insert_in_console_once(
    pool: &PgPool,
    session: super::ConsoleSession<'_>,
    a: NewApproval,
) -> Result<Once, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "select pg_advisory_xact_lock(hashtextextended('reprocessamento_aprovacao:' || $1, 0))",
    )
    .bind(&a.execution_id)
    .execute(&mut *tx)
    .await?;
    let sql = format!("{SELECT_APPROVAL} where execucao_id = $1 order by id desc limit 1");
    let latest: Option<ApprovalRow> = sqlx::query_as(&sql)
        .bind(&a.execution_id)
        .fetch_optional(&mut *tx)
        .await?;
    if let Some(latest) = latest.map(ApprovalRow::into_approval) {
        if latest.simulation_pass == a.simulation_pass
            && latest.simulation_finished_at == a.simulation_finished_at
        {
            return Ok(Once::Already(latest));
        }
    }
    let row = serde_json::json!({
        "execucao_id": a.execution_id,
        "job": a.job,
        "simulacao_passagem": a.simulation_pass,
        "simulacao_concluida_em": a.simulation_finished_at,
        "nota": a.note,
        "pedidos": a.totals.orders,
        "pedidos_alterados": a.totals.changed,
        "total_antes_centavos": a.totals.before_centavos,
        "total_depois_centavos": a.totals.after_centavos,
        "eventos_total": a.fingerprint.events.count,
        "eventos_max_posicao": a.fingerprint.events.max_posicao,
        "eventos_hash": a.fingerprint.events.hash,
        "comissao_hash": a.fingerprint.comissao,
        "definicao": a.fingerprint.definition.as_ref().map(Definition::to_json),
        "versao_regra": rule_version(&a),
    });
    let id: i64 =
        sqlx::query_scalar("select console_aprovar($1, make_interval(secs => $2), $3::jsonb)")
            .bind(session.token_digest)
            .bind(session.idle_timeout.as_secs_f64())
            .bind(row)
            .fetch_one(&mut *tx)
            .await?;
    let sql = format!("{SELECT_APPROVAL} where id = $1");
    let row: ApprovalRow = sqlx::query_as(&sql).bind(id).fetch_one(&mut *tx).await?;
    tx.commit().await?;
    Ok(Once::Recorded(row.into_approval()))
}

struct ApprovalRow {
    id: i64,
    execution_id: String,
    job: String,
    simulacao_passagem: i32,
    simulacao_concluida_em: DateTime<Utc>,
    aprovado_por: String,
    aprovado_em: DateTime<Utc>,
    nota: Option<String>,
    pedidos: i64,
    pedidos_alterados: i64,
    total_antes_centavos: i64,
    total_depois_centavos: i64,
    eventos_total: i64,
    eventos_max_posicao: Option<i64>,
    eventos_hash: String,
    comissao_hash: String,
    definicao: Option<serde_json::Value>,
}

crate::tables::db::from_row!(ApprovalRow {
    id,
    execution_id = "execucao_id",
    job,
    simulacao_passagem,
    simulacao_concluida_em,
    aprovado_por,
    aprovado_em,
    nota,
    pedidos,
    pedidos_alterados,
    total_antes_centavos,
    total_depois_centavos,
    eventos_total,
    eventos_max_posicao,
    eventos_hash,
    comissao_hash,
    definicao,
});

impl ApprovalRow {
    fn into_approval(self) -> Approval {
        Approval {
            id: self.id,
            execution_id: self.execution_id,
            job: self.job,
            simulation_pass: self.simulacao_passagem,
            simulation_finished_at: self.simulacao_concluida_em,
            by: self.aprovado_por,
            at: self.aprovado_em,
            note: self.nota,
            totals: Totals {
                orders: self.pedidos.max(0) as u64,
                changed: self.pedidos_alterados.max(0) as u64,
                before_centavos: self.total_antes_centavos,
                after_centavos: self.total_depois_centavos,
            },
            fingerprint: Fingerprint {
                definition: Definition::from_json(self.definicao.as_ref()),
                events: archive::Fingerprint {
                    count: self.eventos_total,
                    max_posicao: self.eventos_max_posicao,
                    hash: self.eventos_hash,
                },
                comissao: self.comissao_hash,
            },
        }
    }
}

/// The rule an approval binds: its definition's (the job's `rule`), else the rule in force.
fn rule_version(a: &NewApproval) -> String {
    a.fingerprint
        .definition
        .as_ref()
        .and_then(|d| d.0.get("rule").cloned())
        .unwrap_or_else(|| crate::domain::RULE_VERSION.to_string())
}
