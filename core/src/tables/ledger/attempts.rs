//! `efeito_tentativa`: the append-only history of provider attempts, written in the same
//! transaction as the ledger change it explains.
//!
//! An attempt is written where it tells something: a failure, each try of a key retried within
//! one call, an uncertain outcome. A first-try success is not: the ledger row says it already
//! (`concluido` under the claim that reserved it, `criado_em` to `atualizado_em`), and writing it
//! again cost a row and two index entries per effect. Readers of the whole history read the view
//! `efeito_tentativa_historico`, which puts those implied successes back.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use sqlx::{PgConnection, PgExecutor, PgPool};

use super::Claim;

/// One call to a provider, as the caller timed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub key: String,
    pub started: Instant,
    pub finished: Instant,
    /// The error class (`timeout`, `http 503`, …); `None` = success.
    pub error: Option<String>,
}

impl Attempt {
    pub fn new(key: &str, started: Instant, error: Option<String>) -> Self {
        Attempt {
            key: key.to_string(),
            started,
            finished: Instant::now(),
            error,
        }
    }
}

/// Appends the attempts that tell something beyond the ledger row: every failure, and every try
/// of a key tried more than once here; a key's lone success is implied by its completion (see the
/// module's doc). Times are placed on the database's clock: `now()` minus the time elapsed since
/// the attempt, so every staleness judgement uses one clock.
pub async fn record(
    conn: &mut PgConnection,
    claim: &Claim,
    attempts: &[Attempt],
) -> Result<(), sqlx::Error> {
    let attempts = telling(attempts);
    if attempts.is_empty() {
        return Ok(());
    }
    let now = Instant::now();
    let ago = |t: Instant| now.saturating_duration_since(t).as_secs_f64();
    let keys: Vec<&str> = attempts.iter().map(|a| a.key.as_str()).collect();
    let started: Vec<f64> = attempts.iter().map(|a| ago(a.started)).collect();
    let finished: Vec<f64> = attempts.iter().map(|a| ago(a.finished)).collect();
    let errors: Vec<Option<&str>> = attempts.iter().map(|a| a.error.as_deref()).collect();
    sqlx::query(
        r#"
        insert into efeito_tentativa
          (chave, execucao_id, reserva_id, iniciada_em, concluida_em, resultado, classe_erro)
        select k, $1, $2, now() - make_interval(secs => s), now() - make_interval(secs => f),
               case when e is null then 'sucesso' else 'falha' end, e
        from unnest($3::text[], $4::float8[], $5::float8[], $6::text[]) as u(k, s, f, e)
        "#,
    )
    .bind(&claim.execution_id)
    .bind(claim.token)
    .bind(keys)
    .bind(started)
    .bind(finished)
    .bind(errors)
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether any of `attempts` is worth a row ([`telling`]).
pub(super) fn any_telling(attempts: &[Attempt]) -> bool {
    !telling(attempts).is_empty()
}

/// The attempts worth a row: all but a key's lone success.
fn telling(attempts: &[Attempt]) -> Vec<&Attempt> {
    let mut tries: HashMap<&str, usize> = HashMap::with_capacity(attempts.len());
    for a in attempts {
        *tries.entry(a.key.as_str()).or_default() += 1;
    }
    attempts
        .iter()
        .filter(|a| a.error.is_some() || tries[a.key.as_str()] > 1)
        .collect()
}

/// Keys whose first attempt (or first reservation) is older than `window`: the provider may have
/// forgotten them, so sending again could duplicate the effect (`dedup_window`).
pub async fn past_dedup_window(
    conn: &mut PgConnection,
    keys: &[String],
    window: Duration,
) -> Result<Vec<String>, sqlx::Error> {
    past_their_windows(conn, keys, &vec![window.as_secs_f64(); keys.len()]).await
}

/// Splits `items` into those still inside their provider's `dedup_window` (every one without a
/// window) and those past it ([`past_dedup_window`]), in one statement whatever their windows.
/// `key_window` gives an item's key and its type's window.
pub async fn within_dedup_window<T>(
    pool: &PgPool,
    items: Vec<T>,
    key_window: impl Fn(&T) -> (&str, Option<Duration>),
) -> Result<(Vec<T>, Vec<T>), sqlx::Error> {
    let (keys, windows): (Vec<String>, Vec<f64>) = items
        .iter()
        .filter_map(|item| match key_window(item) {
            (key, Some(window)) => Some((key.to_owned(), window.as_secs_f64())),
            (_, None) => None,
        })
        .unzip();
    if keys.is_empty() {
        return Ok((items, Vec::new()));
    }
    let past: HashSet<String> = past_their_windows(pool, &keys, &windows)
        .await?
        .into_iter()
        .collect();
    Ok(items
        .into_iter()
        .partition(|item| !past.contains(key_window(item).0)))
}

/// Keys whose first attempt (or first reservation) is older than their own window (`windows`, in
/// seconds, one a key). For a key a human queued for a resend, only what came since it was
/// reserved again counts: the provider never received it before.
async fn past_their_windows<'c>(
    db: impl PgExecutor<'c>,
    keys: &[String],
    windows: &[f64],
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        r#"
        select k from unnest($1::text[], $2::float8[]) as u(k, w)
        left join efeito_aplicado e on e.chave = u.k
        where exists (select 1 from efeito_tentativa t
                      where t.chave = u.k and t.iniciada_em < now() - make_interval(secs => u.w)
                        and (e.reenvio_desde is null or t.iniciada_em >= e.reenvio_desde))
           or coalesce(e.reenvio_desde, e.criado_em) < now() - make_interval(secs => u.w)
        "#,
    )
    .bind(keys)
    .bind(windows)
    .fetch_all(db)
    .await
}

/// Every attempt of a key, oldest first, the implied first-try successes included: (execution,
/// started, outcome, error class).
pub async fn history(
    pool: &sqlx::PgPool,
    key: &str,
) -> Result<
    Vec<(
        String,
        chrono::DateTime<chrono::Utc>,
        String,
        Option<String>,
    )>,
    sqlx::Error,
> {
    sqlx::query_as(
        r#"
        select execucao_id, iniciada_em, resultado, classe_erro from efeito_tentativa_historico
        where chave = $1 order by iniciada_em, id nulls last
        "#,
    )
    .bind(key)
    .fetch_all(pool)
    .await
}

/// One attempt of a key, as a review decision's confirmation shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyAttempt {
    pub key: String,
    pub execution: String,
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// `sucesso` or `falha`.
    pub outcome: String,
    /// The error's class (`http 500`, a timeout, …); none for a success.
    pub error: Option<String>,
}

/// Every attempt of each of `keys`, the implied first-try successes included, by key, oldest
/// first: what a person deciding on the keys must see (a resend that failed with HTTP 500, say).
pub async fn histories(
    pool: &sqlx::PgPool,
    keys: &[String],
) -> Result<Vec<KeyAttempt>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select chave as key, execucao_id as execution, iniciada_em as started_at,
               resultado as outcome, classe_erro as error
        from efeito_tentativa_historico
        where chave = any($1) order by chave, iniciada_em, id nulls last
        "#,
    )
    .bind(keys)
    .fetch_all(pool)
    .await
}

crate::tables::db::from_row!(KeyAttempt {
    key,
    execution,
    started_at,
    outcome,
    error,
});
