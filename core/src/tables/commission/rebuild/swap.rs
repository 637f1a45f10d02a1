//! The approval of a rebuild's comparison and the statements that swap tables by renaming:
//! `comissao` ↔ `comissao_anterior` / `comissao_nova` (function `comissao_trocar`, which moves the
//! indexes' names and the capture triggers along). Each runs in the caller's transaction, which
//! first takes `comissao` with [`lock`]: the swap happens whole or not at all.

use sqlx::PgConnection;

use super::Rebuild;

/// How long live writers may be kept waiting by the swap's lock request.
pub const LOCK_TIMEOUT: &str = "200ms";

/// Takes `comissao` for the swap (access exclusive), waiting at most [`LOCK_TIMEOUT`]: a writer
/// queued behind the request waits no longer than that. A timeout is SQLSTATE 55P03.
pub async fn lock(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("select set_config('lock_timeout', $1, true)")
        .bind(LOCK_TIMEOUT)
        .execute(&mut *conn)
        .await?;
    sqlx::query("lock table comissao in access exclusive mode")
        .execute(conn)
        .await?;
    Ok(())
}

/// Whether an error is the lock request timing out (55P03).
pub fn is_lock_timeout(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|c| c == "55P03")
}

/// Records an approval of the rebuild's comparison (`fingerprint`, the one shown) in
/// `reprocessamento_aprovacao` as the connected role (`session_user`): the diff's size and totals,
/// the fingerprint as what it binds, `comissao_nova`'s checksum. The statement is the database's
/// `comissao_reconstrucao_aprovar`, which the console's approval goes through too. Returns its
/// id and who; [`is_stale`] when the comparison is no longer the one shown.
pub async fn approve(
    conn: &mut PgConnection,
    rebuild: &Rebuild,
    fingerprint: &str,
    note: Option<&str>,
) -> Result<(i64, String), sqlx::Error> {
    sqlx::query_as("select aprovacao, por from comissao_reconstrucao_aprovar($1, $2, $3, null)")
        .bind(rebuild.id)
        .bind(fingerprint)
        .bind(note)
        .fetch_one(conn)
        .await
}

/// Records an approval of the rebuild `id`'s comparison shown (`fingerprint`) as the finance
/// account of a console session (`console:<email>`; the session proved by its token's digest,
/// live if used within `idle_timeout`), through the `security definer` function
/// `console_aprovar_reconstrucao` (42501 unless the session is live and its account may
/// approve). Returns the approval's id and who.
pub async fn approve_in_console(
    conn: &mut PgConnection,
    token_digest: &str,
    idle_timeout: std::time::Duration,
    id: i64,
    fingerprint: &str,
    note: Option<&str>,
) -> Result<(i64, String), sqlx::Error> {
    let approval: i64 = sqlx::query_scalar(
        "select console_aprovar_reconstrucao($1, make_interval(secs => $2), $3, $4, $5)",
    )
    .bind(token_digest)
    .bind(idle_timeout.as_secs_f64())
    .bind(id)
    .bind(fingerprint)
    .bind(note)
    .fetch_one(&mut *conn)
    .await?;
    let by: String =
        sqlx::query_scalar("select aprovado_por from reprocessamento_aprovacao where id = $1")
            .bind(approval)
            .fetch_one(conn)
            .await?;
    Ok((approval, by))
}

/// Whether the database refused an approval because the comparison is not the one shown any
/// more (SQLSTATE RL409).
pub fn is_stale(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|c| c == "RL409")
}

/// The approval that lets this comparison be swapped in: the newest for the rebuild, given for
/// this very comparison (its time) and this fingerprint. `(id, who)`.
pub async fn approval_of(
    conn: &mut PgConnection,
    rebuild: &Rebuild,
    fingerprint: &str,
) -> Result<Option<(i64, String)>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select id, aprovado_por from reprocessamento_aprovacao
        where execucao_id = $1 and eventos_hash = $2 and simulacao_concluida_em = $3
        order by id desc limit 1
        "#,
    )
    .bind(rebuild.execution_id())
    .bind(fingerprint)
    .bind(rebuild.compared_at)
    .fetch_optional(conn)
    .await
}

/// What hangs on `comissao` that a swap by renaming would not carry to the incoming table (row-level
/// security, policies, other triggers, rules, dependent views, foreign keys), each named; empty
/// when nothing does (function `comissao_dependencias`).
pub async fn dependents(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("select d from comissao_dependencias() as d order by d")
        .fetch_all(conn)
        .await
}

/// How many of the rows that differ now are not among those approval `approval` was given for,
/// with the same values and versions on both sides (an order that agrees now is not a differing
/// row any more, so it drops out by itself). A row is not counted either when `comissao_nova`
/// holds a newer version than `comissao` taken from an event archived after the build's target
/// (`target`): that event is the live writers' to apply, which they would do to either table (the
/// version guard lets it in), so the swap only gets there first.
pub async fn beyond_approval(
    conn: &mut PgConnection,
    approval: i64,
    target: Option<i64>,
    tipo: &str,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        r#"
        select count(*) from comissao_reconstrucao_diff d
        where not exists (
            select 1 from comissao_reconstrucao_diff_aprovado a
            where a.aprovacao_id = $1 and a.pedido_id = d.pedido_id
              -- null-safe: an absent side (no row before, or deleted after) is null, and a null
              -- approved beside a null now is the same row, which `=` would not say.
              and (a.antes, a.versao_antes, a.depois, a.versao_depois)
                  is not distinct from (d.antes, d.versao_antes, d.depois, d.versao_depois))
          and not (
            d.versao_depois is not null
            and (d.versao_antes is null or d.versao_depois > d.versao_antes)
            and exists (select 1 from evento_arquivado e
                        where e.pedido_id = d.pedido_id and e.tipo = $3 and e.posicao > $2
                          and e.versao = d.versao_depois))
        "#,
    )
    .bind(approval)
    .bind(target.unwrap_or(i64::MAX))
    .bind(tipo)
    .fetch_one(conn)
    .await
}

/// Swaps `comissao_nova` in: `comissao` becomes `comissao_anterior`. The caller holds the lock.
pub async fn swap(conn: &mut PgConnection, id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("select comissao_trocar('comissao_anterior', 'comissao_nova')")
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        r#"
        update comissao_reconstrucao
        set estado = 'trocada', trocada_em = now(), atualizado_em = now()
        where id = $1 and estado = 'comparada'
        "#,
    )
    .bind(id)
    .execute(&mut *conn)
    .await?;
    sqlx::query("delete from comissao_reconstrucao_fila")
        .execute(conn)
        .await?;
    Ok(())
}

/// Swaps the previous table back in: the rows of the orders written since the swap (queued by the
/// capture triggers) are carried into `comissao_anterior` first, so no write is lost — under the
/// version guard (invariant `never-older`): a carried row never moves the restored table's row
/// to an older version; then
/// `comissao` becomes `comissao_nova` again. The caller holds the lock.
pub async fn roll_back(conn: &mut PgConnection, id: i64) -> Result<u64, sqlx::Error> {
    let carried = sqlx::query(
        r#"
        with escritos as (delete from comissao_reconstrucao_fila returning pedido_id),
        removidos as (
            delete from comissao_anterior a using escritos e
            where a.pedido_id = e.pedido_id
              and not exists (select 1 from comissao c where c.pedido_id = e.pedido_id)
        )
        insert into comissao_anterior (pedido_id, valor_centavos, versao_evento, atualizado_em)
        select c.pedido_id, c.valor_centavos, c.versao_evento, c.atualizado_em
        from comissao c join escritos e on e.pedido_id = c.pedido_id
        on conflict (pedido_id) do update
        set valor_centavos = excluded.valor_centavos, versao_evento = excluded.versao_evento,
            atualizado_em = excluded.atualizado_em
        where comissao_anterior.versao_evento <= excluded.versao_evento
        "#,
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    sqlx::query("select comissao_trocar('comissao_nova', 'comissao_anterior')")
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        r#"
        update comissao_reconstrucao
        set estado = 'revertida', revertida_em = now(), atualizado_em = now()
        where id = $1 and estado = 'trocada'
        "#,
    )
    .bind(id)
    .execute(conn)
    .await?;
    Ok(carried)
}

/// Drops the table a swapped (`comissao_anterior`) or rolled-back (`comissao_nova`) rebuild kept,
/// and closes it.
pub async fn drop_kept(conn: &mut PgConnection, rebuild: &Rebuild) -> Result<(), sqlx::Error> {
    let statement = match rebuild.stage {
        super::Stage::Swapped => "drop table if exists comissao_anterior",
        _ => "drop table if exists comissao_nova",
    };
    sqlx::query(statement).execute(&mut *conn).await?;
    sqlx::query(
        r#"
        update comissao_reconstrucao
        set estado = 'encerrada', encerrada_em = now(), atualizado_em = now()
        where id = $1 and estado in ('trocada', 'revertida')
        "#,
    )
    .bind(rebuild.id)
    .execute(&mut *conn)
    .await?;
    sqlx::query("delete from comissao_reconstrucao_fila")
        .execute(&mut *conn)
        .await?;
    sqlx::query("delete from comissao_reconstrucao_diff")
        .execute(conn)
        .await?;
    Ok(())
}
