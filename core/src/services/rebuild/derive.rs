//! What the archive implies, decided by the domain's one rule (no second calculator): per order,
//! the row its newest accepted event implies (a rejected event writes nothing, so the next older
//! one decides, as in `verify`).

use crate::domain::{self, CommissionRow, Event};

/// Decides orders from their events read in order — an order's events together, newest first
/// (`versao` then `posicao`, descending) — one event at a time: an order's first accepted event
/// writes its row, the rest of its events are only counted.
#[derive(Debug, Default)]
pub struct Orders {
    current: Option<String>,
    decided: bool,
}

impl Orders {
    /// The order whose events are being read.
    pub fn current(&self) -> Option<&str> {
        self.current.as_deref()
    }

    /// Whether `event` starts another order (the current one's events are all read).
    pub fn starts_another(&self, event: &Event) -> bool {
        self.current.as_deref() != Some(event.pedido_id.as_str())
    }

    /// Takes the next event; pushes its row onto `rows` when it decides its order.
    pub fn take(&mut self, event: &Event, rows: &mut Vec<CommissionRow>) {
        if self.starts_another(event) {
            self.current = Some(event.pedido_id.clone());
            self.decided = false;
        }
        if self.decided {
            return;
        }
        if let Ok(Some(row)) = domain::commission(event) {
            rows.push(row);
            self.decided = true;
        }
    }
}

/// The row each order's newest accepted event implies; `events` hold an order's events together,
/// newest first (as `archive::rebuild::of_orders` reads them).
pub fn newest_of_orders(events: &[Event]) -> Vec<CommissionRow> {
    let (mut orders, mut rows) = (Orders::default(), Vec::new());
    for event in events {
        orders.take(event, &mut rows);
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
}
