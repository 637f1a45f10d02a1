//! What the archive implies, decided by the domain's one rule (no second calculator): per chunk,
//! the row each order's newest accepted event writes; per order, the row its newest accepted event
//! implies (a rejected event writes nothing, so the next older one decides, as in `verify`).

use crate::domain::{self, CommissionRow, Event};
use crate::tables::commission;

/// The rows a chunk (in `posicao` order) writes with the version guard: one per order, the newest
/// version, the last among equal ones.
pub fn newest_of_chunk(events: &[Event]) -> Vec<CommissionRow> {
    let accepted: Vec<CommissionRow> = events
        .iter()
        .filter_map(|e| domain::handle(e).ok().flatten().map(|d| d.commission))
        .collect();
    commission::newest_per_order(&accepted)
}

/// The row each order's newest accepted event implies; `events` hold an order's events together,
/// newest first (as `archive::rebuild::of_orders` reads them).
pub fn newest_of_orders(events: &[Event]) -> Vec<CommissionRow> {
    let mut rows: Vec<CommissionRow> = Vec::new();
    for event in events {
        if rows.last().is_some_and(|r| r.pedido_id == event.pedido_id) {
            continue;
        }
        if let Ok(Some(decision)) = domain::handle(event) {
            rows.push(decision.commission);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paid(posicao: i64, pedido: &str, versao: i64, payload: serde_json::Value) -> Event {
        Event {
            posicao,
            id: format!("e{posicao}"),
            tipo: domain::ORDER_PAID.into(),
            pedido_id: pedido.into(),
            versao,
            payload,
            ocorrido_em: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_rejected_newest_event_lets_the_next_older_one_decide_the_order() {
        let events = vec![
            paid(3, "p", 2, json!({"valorCentavos": "x", "percentual": 5})),
            paid(1, "p", 1, json!({"valorCentavos": 1000, "percentual": 5})),
        ];

        let rows = newest_of_orders(&events);

        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].valor_centavos, rows[0].versao), (50, 1));
    }

    #[test]
    fn a_chunk_keeps_the_newest_version_of_each_order_and_the_last_among_equals() {
        let events = vec![
            paid(1, "p", 2, json!({"valorCentavos": 1000, "percentual": 5})),
            paid(2, "p", 1, json!({"valorCentavos": 2000, "percentual": 5})),
            paid(3, "p", 2, json!({"valorCentavos": 3000, "percentual": 5})),
        ];

        let rows = newest_of_chunk(&events);

        assert_eq!((rows[0].valor_centavos, rows[0].versao), (150, 2));
    }
}
