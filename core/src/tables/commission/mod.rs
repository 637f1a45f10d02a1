//! Every statement on `comissao` (the derived state), `reprocessamento_diff` (a simulation's
//! before/after, in [`diff`]) and `reprocessamento_correcao` (what a real run changed); one
//! order's row and corrections in [`order`]. Batches
//! are set-based: one statement per step over arrays.

mod diff;
pub mod order;
pub mod rebuild;

pub use diff::{
    approved_vs_applied, clear_diff, correction_rows, diff_drift, diff_fingerprint, diff_rows,
    upsert_diff, DiffRow, Divergence,
};

use std::collections::HashMap;

use sqlx::PgConnection;

use crate::domain::CommissionRow;
use crate::shared::summary::Summary;

/// A row of `comissao` as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Current {
    pub valor_centavos: i64,
    pub versao_evento: i64,
}

/// A change of one order's commission, written or (in a simulation) that would be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub pedido_id: String,
    pub antes: Option<i64>,
    pub depois: i64,
    pub versao: i64,
}

/// Reduces a batch, in `posicao` order, to one row per order: the newest version, and among equal
/// versions the last one, which is what applying the events one by one with the version guard
/// leaves behind. Sorted by `pedido_id` so concurrent writers lock rows in the same order.
pub fn newest_per_order<'a>(
    rows: impl IntoIterator<Item = &'a CommissionRow>,
) -> Vec<CommissionRow> {
    let mut newest: HashMap<&str, &CommissionRow> = HashMap::new();
    for row in rows {
        match newest.get(row.pedido_id.as_str()) {
            Some(kept) if kept.versao > row.versao => {}
            _ => {
                newest.insert(&row.pedido_id, row);
            }
        }
    }
    let mut rows: Vec<CommissionRow> = newest.into_values().cloned().collect();
    rows.sort_by(|a, b| a.pedido_id.cmp(&b.pedido_id));
    rows
}

/// The current rows of these orders, as the statement's snapshot sees them.
pub async fn current(
    conn: &mut PgConnection,
    pedido_ids: &[String],
) -> Result<HashMap<String, Current>, sqlx::Error> {
    if pedido_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "select pedido_id, valor_centavos, versao_evento from comissao where pedido_id = any($1)",
    )
    .bind(pedido_ids)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, valor_centavos, versao_evento)| {
            (
                id,
                Current {
                    valor_centavos,
                    versao_evento,
                },
            )
        })
        .collect())
}

/// Where a real run records the corrections its upsert makes: the execution and its pass.
#[derive(Debug, Clone, Copy)]
pub struct Recording<'a> {
    pub execution_id: &'a str,
    pub pass: i32,
}

/// What the upsert of a batch did.
#[derive(Debug, Default)]
pub struct Upserted {
    /// The orders written, each with the row it replaced (`None`: the order had none).
    pub written: Vec<(String, Option<Current>)>,
    /// The orders the statement left alone because their row already held this value and
    /// version or a newer version, with that row as it read it. An order neither written nor
    /// here met a row another writer changed meanwhile; [`current`] reads it.
    pub untouched: HashMap<String, Current>,
    /// What the corrections recorded added to the pass's figures (orders changed, totals before
    /// and after); zero when none are recorded.
    pub figures: Summary,
}

/// The version-guarded upsert of the seed, for a whole batch: a row is overwritten only by an
/// event of the same or a newer version (invariant `never-older`). A row that already holds exactly
/// this value and version, or a newer version, is left untouched — not even locked: a replay of a
/// correct day writes nothing, not even `atualizado_em` or a row lock. Each order's row is looked
/// up once, by the primary key (a lateral subquery the planner cannot turn into a scan).
///
/// Returns the orders written, each with the row it replaced: the version the upsert itself
/// locked and overwrote, so the before-values stay true whatever another writer committed
/// meanwhile. The orders left untouched come back with the row the statement read. With
/// `recording`, the same statement records the corrections (every order written whose value
/// changed), per order and execution: the value before the execution's first change (kept when
/// a later batch or pass changes the order again), the value after, the version, and the pass
/// that last changed it. Only rows the upsert changed are recorded, so a batch read again adds
/// nothing to the figures — neither to the pass's nor to the run's over all its passes.
pub async fn upsert_guarded(
    conn: &mut PgConnection,
    rows: &[CommissionRow],
    recording: Option<Recording<'_>>,
) -> Result<Upserted, sqlx::Error> {
    type Row = (
        String,
        bool,
        Option<i64>,
        Option<i64>,
        bool,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i32>,
        Option<i64>,
    );
    let (ids, valores, versoes) = columns(rows);
    // An order whose row already holds this value and version, or a newer version, would be
    // refused by the guard after locking its row: it is left out of the insert instead, so it
    // is read once and neither locked nor logged. Leaving it out is the same as this statement
    // running before any writer that changes the row after the statement's snapshot.
    let returned: Vec<Row> = sqlx::query_as(
        r#"
        with entrada as materialized (
            select e.pedido_id, e.valor_centavos, e.versao_evento, a.valor_atual, a.versao_atual,
                   coalesce(a.versao_atual > e.versao_evento
                            or (a.valor_atual = e.valor_centavos
                                and a.versao_atual = e.versao_evento), false) as intacta
            from unnest($1::text[], $2::bigint[], $3::bigint[])
                as e(pedido_id, valor_centavos, versao_evento)
            left join lateral (
                select c.valor_centavos as valor_atual, c.versao_evento as versao_atual
                from comissao c where c.pedido_id = e.pedido_id
                offset 0
            ) a on true
        ),
        gravadas as (
            insert into comissao (pedido_id, valor_centavos, versao_evento)
            select pedido_id, valor_centavos, versao_evento
            from entrada
            where not intacta
            on conflict (pedido_id) do update
            set valor_centavos = excluded.valor_centavos,
                versao_evento = excluded.versao_evento,
                atualizado_em = now(),
                valor_anterior = comissao.valor_centavos,
                versao_anterior = comissao.versao_evento
            where comissao.versao_evento <= excluded.versao_evento
              and (comissao.valor_centavos, comissao.versao_evento)
                  is distinct from (excluded.valor_centavos, excluded.versao_evento)
            returning pedido_id, valor_centavos, versao_evento, valor_anterior, versao_anterior
        ),
        corrigidas as (
            insert into reprocessamento_correcao
              (execucao_id, pedido_id, antes, depois, versao_evento, passagem, antes_passagem)
            select $4, pedido_id, valor_anterior, valor_centavos, versao_evento, $5,
                   valor_anterior
            from gravadas
            where $4::text is not null and valor_anterior is distinct from valor_centavos
            order by pedido_id
            on conflict (execucao_id, pedido_id) do update
            set depois_anterior = reprocessamento_correcao.depois,
                passagem_anterior = reprocessamento_correcao.passagem,
                antes_passagem = case when reprocessamento_correcao.passagem = excluded.passagem
                                      then reprocessamento_correcao.antes_passagem
                                      else excluded.antes_passagem end,
                depois = excluded.depois, versao_evento = excluded.versao_evento,
                passagem = excluded.passagem, atualizado_em = now()
            returning pedido_id, antes, depois, depois_anterior, passagem_anterior,
                      antes_passagem
        )
        -- An inserted `comissao` row leaves both `_anterior` columns null; an overwritten one
        -- sets both (from not-null columns). A correction keeps `antes` from the execution's
        -- first change of the order; `passagem_anterior` and `depois_anterior` are null when the
        -- order is new to the execution, else the pass and value of its last correction. Then
        -- the orders left untouched, as read.
        select g.pedido_id, true, g.valor_anterior, g.versao_anterior, c.pedido_id is not null,
               c.antes, c.depois, c.depois_anterior, c.passagem_anterior, c.antes_passagem
        from gravadas g left join corrigidas c on c.pedido_id = g.pedido_id
        union all
        select pedido_id, false, valor_atual, versao_atual, false,
               null::bigint, null::bigint, null::bigint, null::integer, null::bigint
        from entrada where intacta
        "#,
    )
    .bind(ids)
    .bind(valores)
    .bind(versoes)
    .bind(recording.map(|r| r.execution_id))
    .bind(recording.map(|r| r.pass))
    .fetch_all(conn)
    .await?;
    let mut upserted = Upserted::default();
    let mut figures = PassFigures::default();
    let pass = recording.map_or(0, |r| r.pass);
    for (id, written, valor, versao, corrected, antes, depois, earlier, earlier_pass, antes_pass) in
        returned
    {
        if !written {
            if let Some((valor_centavos, versao_evento)) = valor.zip(versao) {
                upserted.untouched.insert(
                    id,
                    Current {
                        valor_centavos,
                        versao_evento,
                    },
                );
            }
            continue;
        }
        if corrected {
            let correction = Correction {
                before_pass: antes_pass,
                before_run: antes,
                after: depois.unwrap_or(0),
                earlier: earlier.zip(earlier_pass),
            };
            figures.add(&correction, pass);
        }
        let before = valor
            .zip(versao)
            .map(|(valor_centavos, versao_evento)| Current {
                valor_centavos,
                versao_evento,
            });
        upserted.written.push((id, before));
    }
    upserted.figures = figures.summary();
    Ok(upserted)
}

/// One correction row as the write left it.
struct Correction {
    /// What `comissao` held before the pass first changed the order (`None`: no row).
    before_pass: Option<i64>,
    /// What it held before the execution first changed the order (the row's `antes`).
    before_run: Option<i64>,
    after: i64,
    /// The value and pass of the order's earlier correction by this execution, if any.
    earlier: Option<(i64, i32)>,
}

/// One side's figures (a pass's, or its run's over all passes), as what a batch adds: signed,
/// since a batch that puts an order back where it was takes it off. Wide enough for any sum of
/// `bigint`s; saturated into `i64` at the end.
#[derive(Default)]
struct Side {
    orders: i64,
    before: i128,
    after: i128,
}

impl Side {
    /// The order's figures move from its old state (`old`: the value after its earlier
    /// correction on this side, if it had one) to its new value `after`; on each side an order
    /// counts only while its value differs from its value before (`before`).
    fn replace(&mut self, before: Option<i64>, old: Option<i64>, after: i64) {
        let base = i128::from(before.unwrap_or(0));
        if let Some(old) = old.filter(|old| before != Some(*old)) {
            self.orders -= 1;
            self.before -= base;
            self.after -= i128::from(old);
        }
        if before != Some(after) {
            self.orders += 1;
            self.before += base;
            self.after += i128::from(after);
        }
    }
}

/// A batch's figures, for its pass and for its run, summed over the correction rows a write
/// returned.
#[derive(Default)]
struct PassFigures {
    pass: Side,
    run: Side,
}

impl PassFigures {
    /// An order counts in a pass (and in the run) while its value differs from its value before
    /// the pass (before the run): one moved A -> B -> A counts in neither (invariant
    /// `batch-independent`: the figures do not depend on which batch saw which version).
    fn add(&mut self, c: &Correction, pass: i32) {
        let in_pass = c
            .earlier
            .filter(|(_, p)| *p == pass)
            .map(|(value, _)| value);
        self.pass.replace(c.before_pass, in_pass, c.after);
        self.run
            .replace(c.before_run, c.earlier.map(|(value, _)| value), c.after);
    }

    fn summary(&self) -> Summary {
        let saturated =
            |n: i128| i64::try_from(n).unwrap_or(if n < 0 { i64::MIN } else { i64::MAX });
        let up = |n: i64| u64::try_from(n).unwrap_or(0);
        let down = |n: i64| {
            n.checked_neg()
                .and_then(|n| u64::try_from(n).ok())
                .unwrap_or(0)
        };
        Summary {
            orders_changed: up(self.pass.orders),
            orders_changed_back: down(self.pass.orders),
            total_before_centavos: saturated(self.pass.before),
            total_after_centavos: saturated(self.pass.after),
            run: crate::shared::summary::RunCorrections {
                orders: up(self.run.orders),
                orders_back: down(self.run.orders),
                before_centavos: saturated(self.run.before),
                after_centavos: saturated(self.run.after),
            },
            ..Summary::default()
        }
    }
}

/// The corrections a real run's batch wrote: every order the guarded upsert wrote whose value
/// changed, with the value it replaced (`current`: for the orders written, what the upsert
/// replaced).
pub fn corrections(
    rows: &[CommissionRow],
    current: &HashMap<String, Current>,
    written: &[String],
) -> Vec<Change> {
    let written: std::collections::HashSet<&str> = written.iter().map(String::as_str).collect();
    rows.iter()
        .filter(|r| written.contains(r.pedido_id.as_str()))
        .map(|r| Change {
            pedido_id: r.pedido_id.clone(),
            antes: current.get(&r.pedido_id).map(|c| c.valor_centavos),
            depois: r.valor_centavos,
            versao: r.versao,
        })
        .filter(|c| c.antes != Some(c.depois))
        .collect()
}

/// The orders of `pedido_ids` this pass has already corrected, with the value and version it
/// wrote: after an interruption, what an earlier attempt of the same pass did.
pub async fn corrected_in_pass(
    conn: &mut PgConnection,
    execution_id: &str,
    pass: i32,
    pedido_ids: &[String],
) -> Result<HashMap<String, Current>, sqlx::Error> {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        r#"
        select pedido_id, depois, versao_evento from reprocessamento_correcao
        where execucao_id = $1 and passagem = $2 and pedido_id = any($3)
        "#,
    )
    .bind(execution_id)
    .bind(pass)
    .bind(pedido_ids)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, valor_centavos, versao_evento)| {
            let current = Current {
                valor_centavos,
                versao_evento,
            };
            (id, current)
        })
        .collect())
}

fn columns(rows: &[CommissionRow]) -> (Vec<&str>, Vec<i64>, Vec<i64>) {
    (
        rows.iter().map(|r| r.pedido_id.as_str()).collect(),
        rows.iter().map(|r| r.valor_centavos).collect(),
        rows.iter().map(|r| r.versao).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, valor: i64, versao: i64) -> CommissionRow {
        CommissionRow {
            pedido_id: id.into(),
            valor_centavos: valor,
            versao,
        }
    }

    #[test]
    fn an_order_a_later_pass_corrects_again_counts_in_that_pass_but_once_in_the_run() {
        let mut first = PassFigures::default();
        first.add(
            &Correction {
                before_pass: Some(5),
                before_run: Some(5),
                after: 50,
                earlier: None,
            },
            1,
        );
        let mut second = PassFigures::default();
        second.add(
            &Correction {
                before_pass: Some(7),
                before_run: Some(5),
                after: 60,
                earlier: Some((50, 1)),
            },
            2,
        );
        let mut run = first.summary();
        run.add(&second.summary());

        assert_eq!(
            (second.pass.orders, second.pass.before, second.pass.after),
            (1, 7, 60),
            "the second pass's own figures"
        );
        assert_eq!(run.run.orders - run.run.orders_back, 1);
        assert_eq!((run.run.before_centavos, run.run.after_centavos), (5, 60));
    }

    #[test]
    fn an_order_a_pass_moves_a_b_a_counts_in_no_figure() {
        let mut pass = PassFigures::default();
        pass.add(
            &Correction {
                before_pass: Some(10),
                before_run: Some(10),
                after: 20,
                earlier: None,
            },
            1,
        );
        pass.add(
            &Correction {
                before_pass: Some(10),
                before_run: Some(10),
                after: 10,
                earlier: Some((20, 1)),
            },
            1,
        );
        let figures = pass.summary();
        assert_eq!(
            (
                figures.orders_changed,
                figures.orders_changed_back,
                figures.total_before_centavos,
                figures.total_after_centavos
            ),
            (0, 0, 0, 0)
        );
        assert_eq!((figures.run.orders, figures.run.orders_back), (0, 0));
    }

    #[test]
    fn a_batch_keeps_the_newest_version_and_the_last_of_equal_versions() {
        let rows = newest_per_order(&[
            row("b", 1, 2),
            row("a", 5, 1),
            row("b", 9, 1),
            row("a", 7, 1),
        ]);
        assert_eq!(rows, vec![row("a", 7, 1), row("b", 1, 2)]);
    }
}
