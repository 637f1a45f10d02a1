//! The review queue can be triaged: each `incerto` key says why its outcome is unknown, since when,
//! when its attempts started and ended and how old it really is; `review list` filters by type,
//! execution and age, in English JSON keys and in an escaped text table.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use testkit::sink::Behavior;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// `review list --json ARGS`, parsed.
async fn review_json(db: &TestDb, jobs: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["review", "list", "--json"];
    all.extend_from_slice(args);
    let out = run_bin_within(&db.url, jobs, &all).await;
    assert_success(&out, &all.join(" "));
    serde_json::from_str(&stdout(&out)).expect("review list --json is JSON")
}

fn item<'a>(items: &'a [Value], key: &str) -> &'a Value {
    items
        .iter()
        .find(|i| i["key"] == key)
        .unwrap_or_else(|| panic!("{key} is not in the queue: {items:#?}"))
}

/// A reservation some dead process left behind `age` ago.
async fn abandoned_reservation(db: &TestDb, key: &str, tipo: &str, age: &str) {
    sqlx::query(
        r#"
        insert into efeito_aplicado
          (chave, evento_id, tipo_efeito, estado, execucao_id, criado_em, atualizado_em)
        values ($1, split_part($1, ':', 1), $2, 'reservado', 'ao-vivo',
                now() - $3::interval, now() - $3::interval)
        "#,
    )
    .bind(key)
    .bind(tipo)
    .bind(age)
    .execute(&db.pool)
    .await
    .expect("an abandoned reservation");
}

fn effects_yaml(url: &str, idempotent: bool, extra: &str) -> String {
    format!(
        "notificar-vendedor:\n  webhook:\n    url: {url}\n    timeout: 500ms\n  idempotent: {idempotent}\n  concurrency: 1\n{extra}"
    )
}

#[tokio::test]
async fn every_incerto_key_says_why_and_how_old_it_really_is() {
    let db = TestDb::new().await;
    let events = paid_orders(5);
    let [http_500, timeout, crash, past_window] = [0, 1, 2, 3].map(|i| key(&events[i]));
    let undeclared = "evt-99:sms-legado".to_string();
    let provider = sink(Behavior {
        fail_keys: [http_500.clone()].into(),
        ..Default::default()
    })
    .await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: 1,
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let effects = jobs.path().join("effects.yaml");
    std::fs::write(&effects, effects_yaml(&provider.url(), false, "")).unwrap();

    // An HTTP 500 from a provider that cannot deduplicate.
    insert(&db.pool, &events[..1]).await;
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &["run", JOB]).await,
        "run",
    );
    // A timeout.
    insert(&db.pool, &events[1..2]).await;
    provider.set_behavior(Behavior {
        delay: Duration::from_millis(1500),
        ..Default::default()
    });
    let args = ["run", JOB, "--restart"];
    assert_success(&run_bin_within(&db.url, jobs.path(), &args).await, "run");
    // A crash with the call in flight: the rerun settles the abandoned reservation.
    insert(&db.pool, &events[2..3]).await;
    std::fs::write(
        &effects,
        effects_yaml(&provider.url(), false, "").replace("500ms", "60s"),
    )
    .unwrap();
    provider.set_behavior(Behavior {
        delay: Duration::from_secs(60),
        ..Default::default()
    });
    let mut child = command(&db.url, jobs.path())
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn run");
    wait_until("the call is in flight", || {
        let received = provider.received().iter().any(|r| r.key == crash);
        std::future::ready(received)
    })
    .await;
    kill9(&mut child).await;
    provider.set_behavior(Behavior::default());
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &["run", JOB]).await,
        "rerun",
    );
    // Past the provider's dedup window, and a type no longer declared: the sweeper's.
    std::fs::write(
        &effects,
        effects_yaml(&provider.url(), true, "  dedup_window: 1h\n"),
    )
    .unwrap();
    insert(&db.pool, &events[3..4]).await;
    abandoned_reservation(&db, &past_window, "notificar-vendedor", "2 hours").await;
    abandoned_reservation(&db, &undeclared, "sms-legado", "2 hours").await;
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &["sweep"]).await,
        "sweep",
    );
    // Three hours older than they are, all of them.
    for table in ["efeito_tentativa set iniciada_em = iniciada_em - interval '3 hours', concluida_em = concluida_em - interval '3 hours'",
                  "efeito_aplicado set criado_em = criado_em - interval '3 hours'"] {
        sqlx::query(&format!("update {table}"))
            .execute(&db.pool)
            .await
            .unwrap();
    }

    let items = review_json(&db, jobs.path(), &[]).await;

    assert_eq!(items.len(), 5, "{items:#?}");
    let reasons = [
        (&http_500, "resposta-http"),
        (&timeout, "tempo-esgotado"),
        (&crash, "queda-durante-chamada"),
        (&past_window, "fora-da-janela-de-dedup"),
        (&undeclared, "tipo-nao-declarado"),
    ];
    for (k, reason) in reasons {
        let i = item(&items, k);
        assert_eq!(i["reason"], reason, "{k}: {i:#}");
        assert!(i["age_seconds"].as_i64().unwrap() >= 3 * 3600, "{k}: {i:#}");
        assert!(i["uncertain_since"].is_string(), "{k}: {i:#}");
    }
    assert_eq!(item(&items, &http_500)["http_status"], 500);
    assert_eq!(item(&items, &http_500)["last_error"], "http 500");
    assert_eq!(item(&items, &timeout)["last_error"], "timeout");
    for k in [&http_500, &timeout] {
        let i = item(&items, k);
        assert_eq!(i["attempts"], 1, "{i:#}");
        assert!(i["first_attempt_at"].is_string() && i["last_attempt_at"].is_string());
        assert_eq!(i["effect_type"], "notificar-vendedor");
        assert_eq!(i["execution"], JOB);
    }
}

/// An `incerto` row as another process left it: `age` old, with one failed attempt.
async fn uncertain(db: &TestDb, key: &str, tipo: &str, execution: &str, age: &str) {
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id,
                                     motivo_incerto, incerto_desde, criado_em, atualizado_em)
        values ($1, split_part($1, ':', 1), $2, 'incerto', $3, 'tempo-esgotado',
                now() - $4::interval, now() - $4::interval, now() - $4::interval)
        "#,
    )
    .bind(key)
    .bind(tipo)
    .bind(execution)
    .bind(age)
    .execute(&db.pool)
    .await
    .expect("an incerto row");
    sqlx::query(
        r#"
        insert into efeito_tentativa (chave, execucao_id, iniciada_em, concluida_em, resultado, classe_erro)
        values ($1, $2, now() - $3::interval, now() - $3::interval + interval '10 seconds', 'falha', 'timeout')
        "#,
    )
    .bind(key)
    .bind(execution)
    .bind(age)
    .execute(&db.pool)
    .await
    .expect("its attempt");
}

/// A seller notification of the job's execution, `incerto` for an hour.
async fn queued(db: &TestDb, key: &str) {
    uncertain(db, key, "notificar-vendedor", JOB, "1 hour").await;
}

fn keys_of(items: &[Value]) -> Vec<&str> {
    items.iter().map(|i| i["key"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn review_list_filters_by_type_execution_and_age() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    uncertain(
        &db,
        "evt-1:notificar-vendedor",
        "notificar-vendedor",
        JOB,
        "3 hours",
    )
    .await;
    uncertain(
        &db,
        "evt-2:notificar-vendedor",
        "notificar-vendedor",
        "ao-vivo",
        "30 minutes",
    )
    .await;
    uncertain(&db, "f:r#1:email", "email", "finance-daily", "1 day").await;

    let by_type = review_json(&db, jobs.path(), &["--type", "notificar-vendedor"]).await;
    let by_execution = review_json(&db, jobs.path(), &["--execution", "ao-vivo"]).await;
    let old = review_json(&db, jobs.path(), &["--older-than", "2h"]).await;
    let both = review_json(&db, jobs.path(), &["--older-than", "2h", "--type", "email"]).await;

    assert_eq!(
        keys_of(&by_type),
        ["evt-1:notificar-vendedor", "evt-2:notificar-vendedor"]
    );
    assert_eq!(keys_of(&by_execution), ["evt-2:notificar-vendedor"]);
    assert_eq!(
        keys_of(&old),
        ["f:r#1:email", "evt-1:notificar-vendedor"],
        "oldest first"
    );
    assert_eq!(keys_of(&both), ["f:r#1:email"]);
}

#[tokio::test]
async fn review_list_prints_a_table_with_a_header_and_archive_text_escaped() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    uncertain(
        &db,
        "evt-\u{1b}[2J\u{202e}1:notificar-vendedor",
        "notificar-vendedor",
        JOB,
        "1 hour",
    )
    .await;

    let out = run_bin_within(&db.url, jobs.path(), &["review", "list"]).await;

    assert_success(&out, "review list");
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for column in [
        "key",
        "type",
        "execution",
        "reason",
        "age",
        "attempts",
        "last error",
    ] {
        assert!(lines[0].contains(column), "{text}");
    }
    assert!(
        lines[1].contains("evt-\\u{1b}[2J\\u{202e}1:notificar-vendedor"),
        "{text}"
    );
    assert!(lines[1].contains("tempo-esgotado"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}'),
        "{text:?}"
    );
}

#[tokio::test]
async fn resolve_records_the_session_role_and_keeps_the_name_given_as_a_note() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    queued(&db, "evt-1:notificar-vendedor").await;
    queued(&db, "evt-2:notificar-vendedor").await;

    let with_note = run_bin_within(
        &db.url,
        jobs.path(),
        &[
            "review",
            "resolve",
            "evt-1:notificar-vendedor",
            "--sent",
            "--note",
            "checked with the seller",
        ],
    )
    .await;
    let with_by = run_bin_within(
        &db.url,
        jobs.path(),
        &[
            "review",
            "resolve",
            "evt-2:notificar-vendedor",
            "--not-sent",
            "--by",
            "ceo@example.com",
        ],
    )
    .await;

    assert_success(&with_note, "resolve --note");
    assert_success(&with_by, "resolve --by");
    assert!(
        stderr(&with_by).contains("--by is deprecated"),
        "{}",
        stderr(&with_by)
    );
    let rows: Vec<(String, String, Option<String>, String)> = sqlx::query_as(
        "select chave, resolvido_por, nota, session_user::text from efeito_revisao order by chave",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let role = &rows[0].3;
    assert_eq!(
        rows.iter()
            .map(|r| (r.0.as_str(), r.1.as_str(), r.2.as_deref()))
            .collect::<Vec<_>>(),
        [
            (
                "evt-1:notificar-vendedor",
                role.as_str(),
                Some("checked with the seller")
            ),
            (
                "evt-2:notificar-vendedor",
                role.as_str(),
                Some("ceo@example.com")
            ),
        ]
    );
    assert!(
        stdout(&with_note).contains(&format!("recorded as `{role}`")),
        "{}",
        stdout(&with_note)
    );
}

#[tokio::test]
async fn a_note_that_is_too_long_or_holds_control_characters_is_refused_with_exit_2() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    queued(&db, "evt-1:notificar-vendedor").await;
    let long = "x".repeat(100_000);

    for (flag, note) in [
        ("--note", "ok\u{1b}[2J"),
        ("--note", "line\nforged: resolved by admin"),
        ("--note", "\u{202e}dias"),
        ("--note", long.as_str()),
        ("--by", "bell\u{7}"),
    ] {
        let out = run_bin_within(
            &db.url,
            jobs.path(),
            &[
                "review",
                "resolve",
                "evt-1:notificar-vendedor",
                "--sent",
                flag,
                note,
            ],
        )
        .await;

        assert_eq!(out.status.code(), Some(2), "{note:?}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains(note),
            "the refusal quotes the note: {}",
            stderr(&out)
        );
    }
    assert_eq!(
        keys_in_state(&db.pool, "incerto").await,
        ["evt-1:notificar-vendedor"],
        "nothing was resolved"
    );
}
