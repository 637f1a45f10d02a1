//! Approved = applied (invariant `approved-is-applied`), through the real binary: an approval binds
//! the job's outcome-deciding definition and the commission rule's version; a real run under
//! anything else refuses to start, writes and sends nothing, and says what changed, field by field.

use std::path::Path;

use testkit::sink::Sink;

use crate::helpers::*;

const JOB: &str = "gated";

/// The gated job of the issue's story: the seller notifications suppressed, a window of the first
/// 20 s of 2026-10-14 (events 1..=19 of `paid_orders`).
struct Job {
    from: &'static str,
    to: &'static str,
    mode: &'static str,
    on_failure: &'static str,
    event_types: &'static str,
    on_invalid_event: &'static str,
    /// The effect type's `idempotent` in effects.yaml.
    idempotent: bool,
    /// The effect type's `retry` in effects.yaml, a flow mapping; empty for the defaults.
    retry: &'static str,
}

const APPROVED: Job = Job {
    from: "2026-10-14T00:00:00-03:00",
    to: "2026-10-14T00:00:20-03:00",
    mode: "suppress",
    on_failure: "release",
    event_types: "[pedido.pago]",
    on_invalid_event: "record",
    idempotent: true,
    retry: "",
};

/// The same job with the seller notifications sent.
const APPLIED: Job = Job {
    mode: "apply",
    ..APPROVED
};

fn write(dir: &Path, provider: &str, job: &Job) {
    std::fs::write(
        dir.join("effects.yaml"),
        format!(
            "notificar-vendedor:\n  webhook:\n    url: {provider}\n  idempotent: {}\n  concurrency: 4\n{}",
            job.idempotent,
            if job.retry.is_empty() { String::new() } else { format!("  retry: {}\n", job.retry) }
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("gated.yaml"),
        format!(
            "name: {JOB}\nwindow:\n  from: {}\n  to: {}\nrequire_approved_simulation: true\nbatch_size: 7\nevent_types: {}\non_invalid_event: {}\neffects:\n  notificar-vendedor: {{ mode: {}, on_failure: {} }}\n",
            job.from, job.to, job.event_types, job.on_invalid_event, job.mode, job.on_failure
        ),
    )
    .unwrap();
}

struct Setup {
    db: TestDb,
    provider: Sink,
    jobs: tempfile::TempDir,
}

/// A day of buggy commissions, the job simulated and approved as [`APPROVED`].
async fn approved() -> Setup {
    approved_as(&APPROVED, dedup()).await
}

/// A day of buggy commissions, the job simulated and approved as `job`, with a provider that
/// behaves as `provider`.
async fn approved_as(job: &Job, provider: testkit::sink::Behavior) -> Setup {
    let events = paid_orders(40);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(provider).await;
    let jobs = tempfile::tempdir().unwrap();
    write(jobs.path(), &provider.url(), job);
    let s = Setup { db, provider, jobs };
    assert_success(&s.bin(&["run", JOB, "--simulate"]).await, "simulation");
    assert_success(&s.bin(&["approve", JOB]).await, "approve");
    s
}

impl Setup {
    async fn bin(&self, args: &[&str]) -> std::process::Output {
        run_bin_within(&self.db.url, self.jobs.path(), args).await
    }

    fn edit(&self, job: &Job) {
        write(self.jobs.path(), &self.provider.url(), job);
    }
}

/// The real run goes ahead under the approval: exit 0, and the approved notifications (the
/// window's missing ones) sent, each once.
async fn runs_as_approved(s: &Setup) {
    assert_success(
        &s.bin(&["run", JOB]).await,
        "the real run under the approval",
    );
    assert_eq!(
        s.provider.deliveries().len(),
        19,
        "the approved notifications, once each"
    );
}

/// The real run refused: exit 1, the message names `field`, nothing written or sent.
async fn refused_naming(s: &Setup, field: &str, untouched: &Option<String>) {
    let out = s.bin(&["run", JOB]).await;
    assert_eq!(out.status.code(), Some(1), "stderr:\n{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(field), "the message names {field}:\n{err}");
    assert!(
        err.contains("needs approval"),
        "the message says a new simulation needs approval:\n{err}"
    );
    assert_eq!(
        &checksum(&s.db.pool, "comissao", "pedido_id").await,
        untouched,
        "nothing written"
    );
    assert!(ledger(&s.db.pool).await.is_empty(), "nothing reserved");
    assert_eq!(s.provider.request_count(), 0, "nothing sent");
    assert_eq!(
        execution_state(&s.db.pool, JOB).await,
        None,
        "no pass started"
    );
}

#[tokio::test]
async fn the_issues_story_an_edited_window_and_mode_after_approval_refuse_the_real_run() {
    let s = approved().await;
    let untouched = checksum(&s.db.pool, "comissao", "pedido_id").await;
    s.edit(&Job {
        to: "2026-10-14T00:00:40-03:00",
        mode: "apply",
        ..APPROVED
    });

    let out = s.bin(&["run", JOB]).await;

    let err = stderr(&out);
    assert!(
        err.contains("effects.notificar-vendedor.mode: suppress → apply"),
        "{err}"
    );
    assert!(
        err.contains("window.to: 2026-10-14T03:00:20+00:00 → 2026-10-14T03:00:40+00:00"),
        "{err}"
    );
    refused_naming(&s, "window.to", &untouched).await;
}

#[tokio::test]
async fn editing_any_outcome_deciding_field_after_approval_refuses_the_real_run() {
    let s = approved().await;
    let untouched = checksum(&s.db.pool, "comissao", "pedido_id").await;
    let edits = [
        (
            Job {
                to: "2026-10-14T00:00:30-03:00",
                ..APPROVED
            },
            "window.to",
        ),
        (
            Job {
                mode: "apply",
                ..APPROVED
            },
            "effects.notificar-vendedor.mode",
        ),
        (
            Job {
                event_types: "[pedido.pago, pedido.cancelado]",
                ..APPROVED
            },
            "event_types",
        ),
        (
            Job {
                on_invalid_event: "stop",
                ..APPROVED
            },
            "on_invalid_event",
        ),
    ];
    for (job, field) in &edits {
        s.edit(job);
        refused_naming(&s, field, &untouched).await;
    }

    s.edit(&APPROVED);
    assert_success(&s.bin(&["run", JOB]).await, "the approved definition runs");
}

#[tokio::test]
async fn an_edited_job_runs_once_its_new_simulation_is_approved() {
    let s = approved().await;
    let edited = Job {
        mode: "apply",
        ..APPROVED
    };
    s.edit(&edited);
    let stale_approval = s.bin(&["approve", JOB]).await;
    assert_eq!(
        stale_approval.status.code(),
        Some(1),
        "{}",
        stderr(&stale_approval)
    );
    assert!(stderr(&stale_approval).contains("effects.notificar-vendedor.mode"));

    assert_success(
        &s.bin(&["run", JOB, "--simulate", "--restart"]).await,
        "new simulation",
    );
    assert_success(&s.bin(&["approve", JOB]).await, "approve it");

    runs_as_approved(&s).await;
}

#[tokio::test]
async fn an_approval_given_under_another_rule_version_is_refused() {
    let s = approved().await;
    let untouched = checksum(&s.db.pool, "comissao", "pedido_id").await;
    // As if an older release, computing commissions another way, had recorded the approval.
    sqlx::query(
        "update reprocessamento_aprovacao set definicao = jsonb_set(definicao, '{rule}', '\"calcularComissao/0\"')",
    )
    .execute(&s.db.pool)
    .await
    .unwrap();

    let out = s.bin(&["run", JOB]).await;

    assert!(
        stderr(&out).contains("rule: calcularComissao/0 → calcularComissao/2"),
        "{}",
        stderr(&out)
    );
    refused_naming(&s, "rule", &untouched).await;
}

#[tokio::test]
async fn after_a_gated_real_run_the_report_says_it_applied_exactly_what_was_approved() {
    let s = approved().await;

    assert_success(&s.bin(&["run", JOB]).await, "the real run");
    let report = replay_ledger::services::report::ExecutionReport::load(&s.db.pool, JOB)
        .await
        .unwrap();
    let check = report.approved.expect("the run's approval is checked");

    assert!(check.exact(), "{check:?}");
    assert_eq!(check.applied, check.approved);
}

#[tokio::test]
async fn editing_an_applied_effects_on_failure_or_the_windows_start_after_approval_refuses_the_real_run(
) {
    let s = approved_as(&APPLIED, dedup()).await;
    let untouched = checksum(&s.db.pool, "comissao", "pedido_id").await;
    let edits = [
        (
            Job {
                on_failure: "keep",
                ..APPLIED
            },
            "effects.notificar-vendedor.on_failure: release → keep",
        ),
        (
            Job {
                from: "2026-10-14T00:00:05-03:00",
                ..APPLIED
            },
            "window.from: 2026-10-14T03:00:00+00:00 → 2026-10-14T03:00:05+00:00",
        ),
    ];
    for (job, field) in &edits {
        s.edit(job);
        refused_naming(&s, field, &untouched).await;
    }
}

#[tokio::test]
async fn making_an_applied_effect_type_non_idempotent_after_approval_refuses_the_real_run() {
    // `keep`: `check` refuses `release` on a type that is not idempotent.
    let approved = Job {
        on_failure: "keep",
        ..APPLIED
    };
    let s = approved_as(&approved, dedup()).await;
    let untouched = checksum(&s.db.pool, "comissao", "pedido_id").await;

    s.edit(&Job {
        idempotent: false,
        ..approved
    });

    refused_naming(
        &s,
        "effects.notificar-vendedor.idempotent: true → false",
        &untouched,
    )
    .await;
}

#[tokio::test]
async fn tuning_an_effect_types_retries_after_approval_keeps_the_approval() {
    let s = approved_as(&APPLIED, dedup()).await;

    s.edit(&Job {
        retry: "{ attempts: 3, backoff: 10ms, max_backoff: 20ms }",
        ..APPLIED
    });

    runs_as_approved(&s).await;
}

#[tokio::test]
async fn approvals_json_lists_the_job_the_simulation_its_totals_its_fingerprint_and_the_role_that_approved(
) {
    let events = paid_orders(40);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(dedup()).await;
    let jobs = tempfile::tempdir().unwrap();
    write(jobs.path(), &provider.url(), &APPROVED);
    let s = Setup { db, provider, jobs };
    assert_success(&s.bin(&["run", JOB, "--simulate"]).await, "simulation");
    let before = chrono::Utc::now();
    assert_success(
        &s.bin(&["approve", JOB, "--note", "checked against the ticket"])
            .await,
        "approve",
    );
    let role: String = sqlx::query_scalar("select session_user::text")
        .fetch_one(&s.db.pool)
        .await
        .unwrap();

    let out = s.bin(&["approvals", "--json"]).await;

    assert_success(&out, "approvals --json");
    let all: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let [a] = all.as_array().expect("a list").as_slice() else {
        panic!("one approval: {all}")
    };
    assert_eq!(
        (&a["job"], &a["execution"]),
        (&JOB.into(), &JOB.into()),
        "{a}"
    );
    assert_eq!(a["simulation_pass"], 1, "{a}");
    // Events 1..=19 of the window, 5 % of 1000 × i cents, which the bug had divided by 10.
    assert_eq!(
        (
            &a["orders_changed"],
            &a["total_before_cents"],
            &a["total_after_cents"]
        ),
        (&19.into(), &950.into(), &9500.into()),
        "{a}"
    );
    let fingerprint = &a["fingerprint"];
    assert_eq!(fingerprint["events"], 19, "{a}");
    assert_eq!(
        fingerprint["definition"]["effects.notificar-vendedor.mode"], "suppress",
        "{a}"
    );
    let summary = fingerprint["summary"]
        .as_str()
        .expect("a fingerprint summary");
    assert!(
        summary.starts_with(&format!(
            "{}; 19 events up to posicao 19; commissions of 19 orders; #",
            replay_ledger_core::domain::RULE_VERSION
        )),
        "{summary}"
    );
    assert_eq!(a["approved_by"], role.as_str(), "{a}");
    assert_eq!(a["note"], "checked against the ticket", "{a}");
    let at: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(a["approved_at"].clone()).expect("approved_at is a time");
    assert!(
        at >= before - chrono::Duration::seconds(5),
        "{at} vs {before}"
    );
    let table = stdout(&s.bin(&["approvals"]).await);
    let short = summary.rsplit("; ").next().unwrap();
    assert!(
        table.contains(JOB) && table.contains(short) && table.contains(&role),
        "the table shows the job, the fingerprint and who:\n{table}"
    );
}

#[tokio::test]
async fn a_gated_run_that_meets_a_newer_commission_says_it_did_not_apply_exactly_what_was_approved()
{
    let slow = testkit::sink::Behavior {
        delay: std::time::Duration::from_millis(300),
        ..dedup()
    };
    let s = approved_as(&APPLIED, slow).await;
    let child = spawn_run_captured(&s.db.url, s.jobs.path(), JOB);
    wait_until("the gate let the run through", || async {
        s.provider.delivery_count() >= 1
    })
    .await;
    send_signal(&child, nix::sys::signal::Signal::SIGINT);
    let stopped = finish(child, "the interrupted run").await;
    assert_eq!(stopped.status.code(), Some(130), "{}", stderr(&stopped));
    // The live consumer applies a newer event of ped-19, the last order of the window.
    sqlx::query(
        "update comissao set valor_centavos = 4321, versao_evento = 2 where pedido_id = 'ped-19'",
    )
    .execute(&s.db.pool)
    .await
    .unwrap();

    assert_success(&s.bin(&["run", JOB]).await, "the resumed real run");

    let execution = replay_ledger::services::report::ExecutionReport::load(&s.db.pool, JOB)
        .await
        .unwrap();
    let report = replay_ledger::services::report::Report::new(
        "test",
        chrono_tz::UTC,
        chrono::Utc::now(),
        Some(execution),
        Vec::new(),
    );
    let text = replay_ledger::services::report::render::text(&report);
    assert!(
        text.contains("Não aplicou exatamente o que foi aprovado por"),
        "{text}"
    );
    assert!(
        text.contains("aprovado 19 pedidos, +R$ 85,50; aplicado 18 pedidos, +R$ 76,95"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.contains("ped-19"))
        .unwrap_or_else(|| panic!("ped-19 listed:\n{text}"));
    assert!(
        row.contains("R$ 9,50") && row.trim_end().ends_with('-'),
        "{row}"
    );
}
