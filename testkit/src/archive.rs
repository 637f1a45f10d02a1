//! The archive as the tests and the demo fill it: rows of `evento_arquivado` written set-based,
//! and the demo's generated day of 2026-10-14 (the commission bug's day).
//!
//! The product only ever reads the archive (its `archive` module); another system writes it.
//! This crate does not know the product's types, so a row here is plain columns, and the names
//! the generator writes (the event type, the payload's fields) are the product's spelled out.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{json, Value};
use sqlx::PgPool;

/// The event type the generator writes: the product's `domain::ORDER_PAID`.
pub const ORDER_PAID: &str = "pedido.pago";

/// One row of `evento_arquivado`.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedEvent {
    pub posicao: i64,
    pub id: String,
    pub tipo: String,
    pub pedido_id: String,
    pub versao: i64,
    pub payload: Value,
    pub ocorrido_em: DateTime<Utc>,
}

/// What the seed's buggy live consumer left beside the archive, written as it wrote it (the rig
/// plays that consumer; the product writes these tables only through its own `tables` modules):
/// one `comissao` row per order (`(pedido_id, valor_centavos, versao_evento)`), and the
/// `efeito_aplicado` rows of the notifications it sent (`(chave, evento_id)`), done by `ao-vivo`.
pub async fn buggy_consumer_left(
    pool: &PgPool,
    commissions: &[(String, i64, i64)],
    notified: &[(String, String)],
) -> Result<(), sqlx::Error> {
    let ids: Vec<&str> = commissions.iter().map(|c| c.0.as_str()).collect();
    let valores: Vec<i64> = commissions.iter().map(|c| c.1).collect();
    let versoes: Vec<i64> = commissions.iter().map(|c| c.2).collect();
    sqlx::query(
        r#"
        insert into comissao (pedido_id, valor_centavos, versao_evento)
        select * from unnest($1::text[], $2::bigint[], $3::bigint[])
        "#,
    )
    .bind(&ids)
    .bind(&valores)
    .bind(&versoes)
    .execute(pool)
    .await?;
    let keys: Vec<&str> = notified.iter().map(|n| n.0.as_str()).collect();
    let eventos: Vec<&str> = notified.iter().map(|n| n.1.as_str()).collect();
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id, resultado)
        select k, e, 'notificar-vendedor', 'concluido', 'ao-vivo', '{"recebido": true}'::jsonb
        from unnest($1::text[], $2::text[]) as u(k, e)
        "#,
    )
    .bind(&keys)
    .bind(&eventos)
    .execute(pool)
    .await?;
    Ok(())
}

/// Inserts events set-based, in chunks. PostgreSQL's own refusals (a NUL in text, a duplicate
/// `posicao`) come back as they are.
pub async fn insert_events(pool: &PgPool, events: &[ArchivedEvent]) -> Result<(), sqlx::Error> {
    for chunk in events.chunks(5_000) {
        let posicoes: Vec<i64> = chunk.iter().map(|e| e.posicao).collect();
        let ids: Vec<&str> = chunk.iter().map(|e| e.id.as_str()).collect();
        let tipos: Vec<&str> = chunk.iter().map(|e| e.tipo.as_str()).collect();
        let pedidos: Vec<&str> = chunk.iter().map(|e| e.pedido_id.as_str()).collect();
        let versoes: Vec<i64> = chunk.iter().map(|e| e.versao).collect();
        let payloads: Vec<&Value> = chunk.iter().map(|e| &e.payload).collect();
        let quando: Vec<DateTime<Utc>> = chunk.iter().map(|e| e.ocorrido_em).collect();
        sqlx::query(
            r#"
            insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)
            select * from unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                                 $6::jsonb[], $7::timestamptz[])
            "#,
        )
        .bind(posicoes)
        .bind(ids)
        .bind(tipos)
        .bind(pedidos)
        .bind(versoes)
        .bind(payloads)
        .bind(quando)
        .execute(pool)
        .await?;
    }
    Ok(())
}

/// The demo's archive: `pedido.pago` events spread over 2026-10-14 (at -03:00), a few on the
/// days around it, one invalid payload in 2,500, and a version 3 of [`DemoDay::newer_order`]
/// on the next day (what the live consumer already processed). Deterministic: every demo tells
/// the same story.
#[derive(Debug, Clone)]
pub struct DemoDay {
    /// Every event, in `posicao` order.
    pub events: Vec<ArchivedEvent>,
    /// The window `[from, to)`: the day.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Distinct orders in the window (an order may have several versions).
    pub orders: u64,
    /// The order whose version 3 lies after the window: a replay must keep it.
    pub newer_order: String,
    /// Ids of the window's valid events whose seller notification went out on the day (~70 %).
    pub notified: Vec<String>,
    /// Ids of the window's valid events whose notification is missing: what a replay must send.
    pub not_notified: Vec<String>,
    /// Events of the window whose payload is invalid (`valorCentavos` as text).
    pub invalid: usize,
}

/// A deterministic pseudo-random sequence (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Builds the events one by one, drawing positions and amounts from one sequence.
struct Generator {
    rng: Rng,
    posicao: i64,
    events: Vec<ArchivedEvent>,
    /// Per event: whether its payload is valid.
    valid: Vec<bool>,
}

impl Generator {
    fn push(&mut self, at: DateTime<Utc>, pedido: String, versao: i64, valid: bool) {
        self.posicao += 1 + (self.rng.next() % 3) as i64;
        let valor = 1_000 + (self.rng.next() % 500_000) as i64;
        let percentual = [2.5, 5.0, 7.5, 10.0][(self.rng.next() % 4) as usize];
        let payload = if valid {
            json!({"valorCentavos": valor, "percentual": percentual})
        } else {
            json!({"valorCentavos": format!("{},{:02}", valor / 100, valor % 100), "percentual": percentual})
        };
        self.events.push(ArchivedEvent {
            posicao: self.posicao,
            id: format!("evt-{}", self.posicao),
            tipo: ORDER_PAID.into(),
            pedido_id: pedido,
            versao,
            payload,
            ocorrido_em: at,
        });
        self.valid.push(valid);
    }
}

impl DemoDay {
    /// `events` in the window (at least 1), `events / 50` on each side of it, and one more.
    pub fn generate(events: u32) -> DemoDay {
        let events = events.max(1);
        let from: DateTime<Utc> = chrono::FixedOffset::west_opt(3 * 3600)
            .expect("valid offset")
            .with_ymd_and_hms(2026, 10, 14, 0, 0, 0)
            .single()
            .expect("valid date")
            .with_timezone(&Utc);
        let to = from + Duration::hours(24);
        let orders = (u64::from(events) * 4 / 5).max(1);
        let outside = u64::from(events / 50);
        let mut g = Generator {
            rng: Rng(0x2026_1014),
            posicao: 1_000_000,
            events: Vec::new(),
            valid: Vec::new(),
        };
        for i in 0..outside {
            let at = from - Duration::seconds(3600 + i as i64);
            g.push(at, format!("ped-old-{i}"), 1, true);
        }
        let step = 86_400_000 / i64::from(events);
        for i in 0..u64::from(events) {
            let at = from + Duration::milliseconds(i as i64 * step);
            let versao = (i / orders) as i64 + 1;
            let pedido = format!("ped-{}", i % orders + 1);
            g.push(at, pedido, versao, i % 2_500 != 1_234);
        }
        for i in 0..outside {
            let at = to + Duration::seconds(60 + i as i64);
            g.push(at, format!("ped-new-{i}"), 1, true);
        }
        let newer_order = "ped-42".to_string();
        g.push(from + Duration::hours(30), newer_order.clone(), 3, true);

        // ~70 % of the day's notifications went out; the rest is what a replay must send.
        let (mut notified, mut not_notified, mut invalid) = (Vec::new(), Vec::new(), 0);
        for (e, valid) in g.events.iter().zip(&g.valid) {
            if e.ocorrido_em < from || e.ocorrido_em >= to {
                continue;
            }
            if !valid {
                invalid += 1;
            } else if g.rng.next() % 10 < 7 {
                notified.push(e.id.clone());
            } else {
                not_notified.push(e.id.clone());
            }
        }
        DemoDay {
            events: g.events,
            from,
            to,
            orders,
            newer_order,
            notified,
            not_notified,
            invalid,
        }
    }

    /// The events inside the window.
    pub fn in_window(&self) -> impl Iterator<Item = &ArchivedEvent> {
        self.events
            .iter()
            .filter(|e| e.ocorrido_em >= self.from && e.ocorrido_em < self.to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_day_is_the_same_every_time() {
        let (a, b) = (DemoDay::generate(1_000), DemoDay::generate(1_000));
        assert_eq!(a.events, b.events);
        assert_eq!(a.notified, b.notified);
    }

    #[test]
    fn every_valid_event_of_the_window_was_notified_or_not_and_no_other() {
        let day = DemoDay::generate(5_000);
        let in_window = day.in_window().count();
        assert_eq!(in_window, 5_000);
        assert_eq!(day.invalid, 2);
        assert_eq!(
            day.notified.len() + day.not_notified.len() + day.invalid,
            in_window
        );
        assert!(day
            .events
            .iter()
            .any(|e| e.pedido_id == day.newer_order && e.versao == 3 && e.ocorrido_em >= day.to));
    }
}
