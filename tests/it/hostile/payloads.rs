//! The domain against arbitrary JSON: any payload, id and position goes through `handle` and
//! `calcular_comissao` without a panic, and what comes out is well formed (a commission inside
//! JavaScript's safe integers, the ledger key of the event, a body naming the event) or the
//! seed's "invalid payload" error.

use proptest::prelude::*;
use replay_ledger_core::domain::{calcular_comissao, handle, Event, INVALID_PAYLOAD, ORDER_PAID};
use serde_json::{json, Map, Number, Value};

const MAX_SAFE: i64 = 9_007_199_254_740_991;

fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Characters that break naive code: direction marks, joiners, combining marks, the BOM, the
/// replacement character, astral planes, quotes and separators.
fn odd_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => any::<char>(),
        1 => prop::sample::select(vec![
            '\u{202e}', '\u{200f}', '\u{200e}', '\u{2066}', '\u{200d}', '\u{fe0f}', '\u{0301}',
            '\u{feff}', '\u{fffd}', '\u{10ffff}', '😀', '👩', ':', '"', '\'', '\\', '\n', '\r',
            '\t', '\u{1b}', '\u{85}', '\u{2028}', '%', ' ',
        ]),
    ]
}

fn odd_string() -> impl Strategy<Value = String> {
    prop::collection::vec(odd_char(), 0..24).prop_map(|c| c.into_iter().collect())
}

/// Numbers at the edges of what JSON, `f64` and JavaScript hold (no NaN or infinity: JSON
/// cannot carry them).
fn edge_number() -> impl Strategy<Value = Number> {
    let floats = prop::sample::select(vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1e-300,
        5e-324,
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        9_007_199_254_740_991.0,
        9_007_199_254_740_992.0,
        9_007_199_254_740_993.0,
        1e16,
        1e300,
        -1e300,
        12_345.0,
        2.5,
        0.499_999_999_999_999_94,
    ]);
    prop_oneof![
        floats.prop_map(|f| Number::from_f64(f).expect("finite")),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| Number::from_f64(f).expect("finite")),
        any::<i64>().prop_map(Number::from),
        any::<u64>().prop_map(Number::from),
        prop::sample::select(vec![i64::MIN, i64::MAX, MAX_SAFE, -MAX_SAFE, 0, 1, -1])
            .prop_map(Number::from),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        edge_number().prop_map(Value::Number),
        odd_string().prop_map(Value::String),
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(odd_string(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A payload shaped like `pedido.pago` most of the time, with anything in its two fields.
fn order_paid_payload() -> impl Strategy<Value = Value> {
    let field = prop_oneof![3 => edge_number().prop_map(Value::Number), 1 => any_json()];
    (
        prop::option::weighted(0.9, field.clone()),
        prop::option::weighted(0.9, field),
        prop::collection::btree_map(odd_string(), any_json(), 0..4),
    )
        .prop_map(|(valor, percentual, extra)| {
            let mut object: Map<String, Value> = extra.into_iter().collect();
            if let Some(v) = valor {
                object.insert("valorCentavos".into(), v);
            }
            if let Some(p) = percentual {
                object.insert("percentual".into(), p);
            }
            Value::Object(object)
        })
}

fn any_event() -> impl Strategy<Value = Event> {
    (
        any::<i64>(),
        odd_string(),
        prop_oneof![3 => Just(ORDER_PAID.to_string()), 1 => odd_string()],
        odd_string(),
        any::<i64>(),
        prop_oneof![3 => order_paid_payload(), 1 => any_json()],
    )
        .prop_map(|(posicao, id, tipo, pedido_id, versao, payload)| Event {
            posicao,
            id,
            tipo,
            pedido_id,
            versao,
            payload,
            ocorrido_em: chrono::Utc::now(),
        })
}

/// A decision is well formed, or the error is the seed's.
fn assert_well_formed(event: &Event) -> Result<(), TestCaseError> {
    match handle(event) {
        Ok(None) => prop_assert_ne!(&event.tipo, ORDER_PAID),
        Ok(Some(decision)) => {
            let valor = decision.commission.valor_centavos;
            prop_assert!((-MAX_SAFE..=MAX_SAFE).contains(&valor), "{valor}");
            prop_assert_eq!(&decision.commission.pedido_id, &event.pedido_id);
            prop_assert_eq!(decision.commission.versao, event.versao);
            prop_assert_eq!(decision.effects.len(), 1);
            let effect = &decision.effects[0];
            prop_assert_eq!(&effect.key, &format!("{}:{}", event.id, effect.tipo));
            let body =
                json!({"eventoId": event.id, "pedidoId": event.pedido_id, "valorCentavos": valor});
            prop_assert_eq!(&effect.body, &body);
            // The body survives the trip to the provider and back.
            let wire = serde_json::to_vec(&effect.body).expect("serializes");
            let back: Value = serde_json::from_slice(&wire).expect("parses back");
            prop_assert_eq!(back, body);
        }
        Err(e) => prop_assert!(e.to_string().starts_with(INVALID_PAYLOAD), "{e}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(2_000))]

    #[test]
    fn any_event_is_decided_or_rejected_without_a_panic(event in any_event()) {
        assert_well_formed(&event)?;
    }

    #[test]
    fn any_json_value_is_a_commission_or_an_invalid_payload(payload in any_json()) {
        if let Ok(valor) = calcular_comissao(&payload) {
            prop_assert!((-MAX_SAFE..=MAX_SAFE).contains(&valor));
        }
    }
}

/// `[[[ … value … ]]]`, `depth` arrays deep, built without recursion.
fn nested_arrays(depth: usize, value: Value) -> Value {
    (0..depth).fold(value, |inner, _| Value::Array(vec![inner]))
}

/// Takes a deep value apart one level at a time: dropping it whole would recurse once per level.
fn dismantle(mut value: Value) {
    loop {
        value = match value {
            Value::Array(mut items) => match items.pop() {
                Some(inner) => inner,
                None => return,
            },
            _ => return,
        };
    }
}

#[test]
fn a_payload_with_ten_thousand_nested_arrays_is_decided_on_its_own_fields() {
    let deep = nested_arrays(10_000, json!(1));
    let mut event = Event {
        posicao: 1,
        id: "evt-deep".into(),
        tipo: ORDER_PAID.into(),
        pedido_id: "ped-deep".into(),
        versao: 1,
        payload: json!({"valorCentavos": 1000, "percentual": 5, "extra": null}),
        ocorrido_em: chrono::Utc::now(),
    };
    event.payload["extra"] = deep;
    let decision = handle(&event).expect("valid").expect("handled");
    assert_eq!(decision.commission.valor_centavos, 50);
    // The deep value where the amount belongs is not a number: rejected, no panic.
    let extra = event.payload["extra"].take();
    event.payload["valorCentavos"] = extra;
    assert!(handle(&event).is_err());
    dismantle(event.payload["valorCentavos"].take());
}

#[test]
fn json_text_nested_beyond_serde_jsons_limit_is_an_error_not_a_stack_overflow() {
    // serde_json stops at 128 levels; the archive's decoder must cope with deeper jsonb (see
    // hostile::archive).
    let text = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let err = serde_json::from_str::<Value>(&text).expect_err("too deep");
    assert!(err.to_string().contains("recursion limit"), "{err}");
}

#[test]
fn numbers_beyond_f64_are_refused_by_serde_json_and_must_not_reach_the_domain_as_panics() {
    // PostgreSQL's jsonb holds numbers of any size; serde_json (without arbitrary_precision)
    // refuses those beyond f64. The archive's decoder turns that into a rejected event.
    assert!(serde_json::from_str::<Value>(r#"{"valorCentavos": 1e400}"#).is_err());
    let huge_integer = format!(
        r#"{{"valorCentavos": 1{}, "percentual": 5}}"#,
        "0".repeat(400)
    );
    let parsed: Result<Value, _> = serde_json::from_str(&huge_integer);
    if let Ok(payload) = parsed {
        assert!(calcular_comissao(&payload).is_err());
    }
}

#[test]
fn ids_too_long_for_a_postgresql_index_are_rejected() {
    let limit = replay_ledger_core::domain::MAX_ID_BYTES;
    let mut event = Event {
        posicao: 1,
        id: "e".repeat(limit),
        tipo: ORDER_PAID.into(),
        pedido_id: "p".repeat(limit),
        versao: 1,
        payload: json!({"valorCentavos": 1000, "percentual": 5}),
        ocorrido_em: chrono::Utc::now(),
    };
    assert!(handle(&event).is_ok());
    event.pedido_id.push('p');
    assert!(handle(&event)
        .unwrap_err()
        .to_string()
        .contains("pedido_id longer"));
    event.pedido_id.pop();
    event.id.push('é');
    assert!(handle(&event)
        .unwrap_err()
        .to_string()
        .contains("evento id longer"));
}

proptest! {
    #![proptest_config(cases(2_000))]

    #[test]
    fn idempotency_headers_are_visible_ascii_and_never_shared(a in odd_string(), b in odd_string()) {
        use replay_ledger_core::engine::effects::idempotency_header;
        let (ha, hb) = (idempotency_header(&a), idempotency_header(&b));
        prop_assert!(ha.bytes().all(|c| c.is_ascii_graphic()), "{ha}");
        prop_assert!(reqwest_accepts(&ha));
        prop_assert_eq!(a == b, ha == hb);
    }
}

/// A header value an HTTP client sends and any server reads back as the same text.
fn reqwest_accepts(value: &str) -> bool {
    value.bytes().all(|b| (0x21..=0x7e).contains(&b))
}
