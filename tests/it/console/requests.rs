//! People act from the console: finance starts the approved gated real run, an operator asks for
//! a sweep, and a real `serve` carries each request out as the worker — with the job's lock, the
//! runner and the approval gate — while the console records only the request and its audit row.
//! A viewer's post is refused and records nothing; a request the gate refuses, or for an unknown
//! job, ends `falhou` saying why.

use testkit::sink::Behavior;

use super::*;
use crate::serve::Serve;

const OPERATOR: &str = "bruno@operacao.example";
pub(super) const SIMULATION: &str = "/executions/replay-2026-10-14-v2:simulacao";

/// 10 orders under the buggy commission, a gated job whose provider (a real loopback sink) does
/// not deduplicate, its simulation finished, and an unscheduled sweep job.
pub(super) struct Scene {
    pub db: TestDb,
    pub jobs: tempfile::TempDir,
    pub provider: testkit::sink::Sink,
    pub events: Vec<replay_ledger_core::domain::Event>,
}

pub(super) async fn scene() -> Scene {
    let events = paid_orders(10);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(Behavior::default()).await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        extra: "require_approved_simulation: true\n".into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    std::fs::write(
        jobs.path().join("sweeper.yaml"),
        "name: sweeper\nkind: sweep\nstale_after: 5m\n",
    )
    .expect("write the sweep job");
    run_job(&db, jobs.path(), JOB, Some(true), false)
        .await
        .expect("the simulation");
    Scene {
        db,
        jobs,
        provider,
        events,
    }
}

/// Approves the simulation through its confirmation, as finance's browser would.
pub(super) async fn approve(finance: &Client) {
    approve_at(finance, SIMULATION).await;
}

/// Approves the simulation whose page is `simulation` through its confirmation.
pub(super) async fn approve_at(finance: &Client, simulation: &str) {
    let confirmation = finance.get(&format!("{simulation}/approve")).await;
    let fields = ["csrf_token", "pass", "fingerprint"].map(|f| {
        confirmation
            .field(f)
            .unwrap_or_else(|| panic!("{f}: {}", confirmation.body))
    });
    let answer = finance
        .post(
            &format!("{simulation}/approve"),
            &[
                ("csrf_token", &fields[0]),
                ("pass", &fields[1]),
                ("fingerprint", &fields[2]),
            ],
        )
        .await;
    assert_eq!(answer.status, 303, "the approval: {}", answer.body);
}

/// Every request as (acao, job, estado, solicitado_por, resultado), oldest first.
pub(super) async fn requests(db: &TestDb) -> Vec<(String, String, String, String, Option<String>)> {
    sqlx::query_as(
        "select acao, job, estado, solicitado_por, resultado from execucao_solicitada order by id",
    )
    .fetch_all(&db.pool)
    .await
    .expect("read the requests")
}

/// Waits until no request is pending or running.
async fn settled(db: &TestDb) {
    wait_until("serve settles every request", || async {
        requests(db)
            .await
            .iter()
            .all(|r| r.2 == "concluida" || r.2 == "falhou")
    })
    .await;
}

#[tokio::test]
async fn finance_starts_the_approved_real_run_from_the_console_and_serve_applies_it_audited() {
    let s = scene().await;
    add_user(&s.db.url, s.jobs.path(), FINANCE, "finance").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let finance = Client::logged_in(&console, FINANCE).await;
    approve(&finance).await;
    let serve = Serve::start_with(&s.db.url, s.jobs.path(), "serve", |_| {});

    let page = finance.get(SIMULATION).await;
    let confirmation = finance.get(&format!("{SIMULATION}/start")).await;
    let csrf = confirmation.csrf().expect("the confirmation's form");
    let answer = finance
        .post(
            &format!("{SIMULATION}/start"),
            &[("csrf_token", &csrf), ("note", "aprovado na reunião")],
        )
        .await;
    let pending = finance.get(SIMULATION).await;
    settled(&s.db).await;
    let done = finance.get(SIMULATION).await;

    assert!(
        page.body.contains("Iniciar a execução real"),
        "{}",
        page.body
    );
    assert!(
        confirmation.body.contains("console:ana@financeiro.example")
            && confirmation
                .body
                .contains("Confirmar: iniciar a execução real"),
        "{}",
        confirmation.body
    );
    assert_eq!(
        (answer.status.as_u16(), answer.location()),
        (303, Some(SIMULATION))
    );
    assert!(pending.body.contains(r#"http-equiv="refresh""#) || pending.body.contains("concluída"));
    let recorded = requests(&s.db).await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let (acao, job, estado, por, resultado) = &recorded[0];
    assert_eq!(
        (acao.as_str(), job.as_str(), estado.as_str(), por.as_str()),
        (
            "executar",
            JOB,
            "concluida",
            "console:ana@financeiro.example"
        ),
        "{resultado:?}\n{}",
        serve.log()
    );
    assert!(resultado.as_deref().unwrap_or("").starts_with("concluída"));
    assert!(done.body.contains("request-concluida"), "{}", done.body);
    assert_eq!(
        execution_state(&s.db.pool, JOB).await.as_deref(),
        Some("concluida")
    );
    let expected: Vec<(String, i64, i64)> =
        (1..=10).map(|i| (format!("ped-{i}"), 50 * i, 1)).collect();
    let mut rows = commissions(&s.db.pool).await;
    rows.sort_by_key(|r| r.0.trim_start_matches("ped-").parse::<i64>().unwrap());
    assert_eq!(rows, expected);
    let keys: std::collections::HashSet<String> =
        s.provider.received().into_iter().map(|r| r.key).collect();
    assert_eq!(keys, s.events.iter().map(key).collect());
    assert!(audit(&s.db).await.contains(&(
        "console:ana@financeiro.example".into(),
        "solicitacao".into(),
        Some(JOB.into())
    )));
}

#[tokio::test]
async fn a_viewer_sees_no_button_and_its_posts_are_refused_with_403_and_record_nothing() {
    let s = scene().await;
    add_user(&s.db.url, s.jobs.path(), FINANCE, "finance").await;
    add_user(&s.db.url, s.jobs.path(), "vera@leitura.example", "viewer").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    approve(&Client::logged_in(&console, FINANCE).await).await;
    let viewer = Client::logged_in(&console, "vera@leitura.example").await;
    let csrf = viewer.csrf().await;

    let page = viewer.get(SIMULATION).await;
    let review = viewer.get("/review").await;
    let start = viewer
        .post(&format!("{SIMULATION}/start"), &[("csrf_token", &csrf)])
        .await;
    let resume = viewer
        .post(
            &format!("/executions/{JOB}/resume"),
            &[("csrf_token", &csrf)],
        )
        .await;
    let sweep = viewer.post("/sweep", &[("csrf_token", &csrf)]).await;
    let interrupt = viewer
        .post(
            &format!("/executions/{JOB}/interrupt"),
            &[("csrf_token", &csrf)],
        )
        .await;

    assert!(!page.body.contains("start-link"), "{}", page.body);
    assert!(!review.body.contains("sweep-link"), "{}", review.body);
    assert_eq!(
        [start.status, resume.status, sweep.status, interrupt.status].map(|s| s.as_u16()),
        [403, 403, 403, 403]
    );
    assert!(requests(&s.db).await.is_empty());
    assert!(!audit(&s.db).await.iter().any(|a| a.1 == "solicitacao"));
}

#[tokio::test]
async fn an_operators_sweep_runs_in_serve_though_the_sweep_job_has_no_schedule() {
    let s = scene().await;
    abandon_stale_reservation(&s.db.pool, &s.events[0]).await;
    add_user(&s.db.url, s.jobs.path(), OPERATOR, "operator").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let operator = Client::logged_in(&console, OPERATOR).await;
    let _serve = Serve::start_with(&s.db.url, s.jobs.path(), "serve", |_| {});

    let review = operator.get("/review").await;
    let confirmation = operator.get("/sweep").await;
    let csrf = confirmation.csrf().expect("the sweep's form");
    let answer = operator.post("/sweep", &[("csrf_token", &csrf)]).await;
    let again = operator.post("/sweep", &[("csrf_token", &csrf)]).await;
    settled(&s.db).await;
    let trail = operator.get("/audit?acao=solicitacao").await;

    assert!(
        review.body.contains("Rodar uma varredura agora"),
        "{}",
        review.body
    );
    assert_eq!(
        (answer.status.as_u16(), answer.location()),
        (303, Some("/sweep"))
    );
    assert_eq!(
        again.status, 409,
        "a second open request of the job: {}",
        again.body
    );
    let recorded = requests(&s.db).await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(
        (
            recorded[0].0.as_str(),
            recorded[0].1.as_str(),
            recorded[0].2.as_str()
        ),
        ("varrer", "sweeper", "concluida"),
        "{recorded:?}"
    );
    assert_eq!(
        keys_in_state(&s.db.pool, "incerto").await,
        vec![key(&s.events[0])]
    );
    assert!(audit(&s.db).await.contains(&(
        format!("console:{OPERATOR}"),
        "solicitacao".into(),
        Some("sweeper".into())
    )));
    assert_eq!(trail.status, 200, "{}", trail.body);
    assert!(trail.body.contains("pediu ao serve"), "{}", trail.body);
}

#[tokio::test]
async fn a_start_without_an_approval_or_of_an_unknown_job_ends_failed_saying_why() {
    let s = scene().await;
    sqlx::query(
        r#"
        insert into execucao_solicitada (acao, job, execucao_id, solicitado_por)
        values ('executar', $1, $1, 'console:ana@financeiro.example'),
               ('executar', 'no-such-job', 'no-such-job', 'console:ana@financeiro.example')
        "#,
    )
    .bind(JOB)
    .execute(&s.db.pool)
    .await
    .expect("two requests");
    let serve = Serve::start_with(&s.db.url, s.jobs.path(), "serve", |_| {});

    settled(&s.db).await;

    let recorded = requests(&s.db).await;
    let states: Vec<&str> = recorded.iter().map(|r| r.2.as_str()).collect();
    assert_eq!(
        states,
        ["falhou", "falhou"],
        "{recorded:?}\n{}",
        serve.log()
    );
    let gate = recorded[0].4.as_deref().unwrap_or_default();
    assert!(gate.starts_with("recusada pela aprovação"), "{gate}");
    let unknown = recorded[1].4.as_deref().unwrap_or_default();
    assert!(unknown.contains("no-such-job não existe"), "{unknown}");
    assert_eq!(execution_state(&s.db.pool, JOB).await, None);
    assert_eq!(s.provider.request_count(), 0);
}

#[tokio::test]
async fn a_request_left_running_by_a_dead_serve_ends_failed_so_the_job_can_be_asked_again() {
    let s = scene().await;
    sqlx::query(
        r#"
        insert into execucao_solicitada (acao, job, solicitado_por, estado, iniciado_em)
        values ('varrer', 'sweeper', 'console:bruno@operacao.example', 'em-andamento',
                now() - interval '1 hour')
        "#,
    )
    .execute(&s.db.pool)
    .await
    .expect("a request a dead serve took");
    let _serve = Serve::start_with(&s.db.url, s.jobs.path(), "serve", |_| {});

    settled(&s.db).await;

    let recorded = requests(&s.db).await;
    assert_eq!(recorded[0].2, "falhou", "{recorded:?}");
    assert!(
        recorded[0]
            .4
            .as_deref()
            .unwrap_or_default()
            .contains("parou"),
        "{recorded:?}"
    );
}

#[tokio::test]
async fn an_operator_resumes_a_failed_real_run_from_its_page_and_serve_finishes_it() {
    let events = paid_orders(10);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(Behavior {
        dedup: true,
        fail_keys: [key(&events[4])].into(),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let failed = run_job(&db, jobs.path(), JOB, None, false).await;
    assert!(failed.is_err(), "the provider refused one key for good");
    provider.set_behavior(dedup());
    add_user(&db.url, jobs.path(), OPERATOR, "operator").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let operator = Client::logged_in(&console, OPERATOR).await;
    let _serve = Serve::start_with(&db.url, jobs.path(), "serve", |_| {});
    let page = format!("/executions/{JOB}");

    let before = operator.get(&page).await;
    let confirmation = operator.get(&format!("{page}/resume")).await;
    let csrf = confirmation.csrf().expect("the resume's form");
    let answer = operator
        .post(&format!("{page}/resume"), &[("csrf_token", &csrf)])
        .await;
    settled(&db).await;

    assert!(before.body.contains("resume-link"), "{}", before.body);
    assert!(
        confirmation.body.contains("Confirmar: retomar"),
        "{}",
        confirmation.body
    );
    assert_eq!(
        (answer.status.as_u16(), answer.location()),
        (303, Some(page.as_str()))
    );
    let recorded = requests(&db).await;
    assert_eq!(
        (recorded[0].0.as_str(), recorded[0].2.as_str()),
        ("retomar", "concluida"),
        "{recorded:?}"
    );
    assert_eq!(
        execution_state(&db.pool, JOB).await.as_deref(),
        Some("concluida")
    );
    assert_eq!(keys_in_state(&db.pool, "concluido").await.len(), 10);
}

/// A request in the table as the console's function records one (here inserted by the tests'
/// superuser: a forged request, as anyone holding the console role's password could make),
/// for `job`'s simulation execution.
async fn forged_start(db: &TestDb, job: &str) {
    sqlx::query(
        "insert into execucao_solicitada (acao, job, execucao_id, solicitado_por) values ('executar', $1, $1 || ':simulacao', 'console:ana@financeiro.example')",
    )
    .bind(job)
    .execute(&db.pool)
    .await
    .expect("insert a request");
}

/// `serve` carries out `executar` only for a gated job that is not simulation-only, and then only
/// through the approval gate: a `simulate: true` job, an ungated job and a gated job with no
/// approval are each refused, and nothing is written or sent.
#[tokio::test]
async fn serve_refuses_to_start_a_simulation_only_an_ungated_or_an_unapproved_job_and_writes_nothing(
) {
    let s = scene().await;
    for (name, extra) in [
        (
            "so-simulacao",
            "simulate: true\nrequire_approved_simulation: true\n",
        ),
        ("sem-portao", ""),
        ("sem-aprovacao", "require_approved_simulation: true\n"),
    ] {
        std::fs::write(
            s.jobs.path().join(format!("{name}.yaml")),
            format!(
                "name: {name}\nwindow:\n  from: 2026-10-14T00:00:00-03:00\n  to: 2026-10-15T00:00:00-03:00\n{extra}effects:\n  notificar-vendedor: {{ mode: apply, on_failure: keep }}\n"
            ),
        )
        .expect("write a job");
        run_job(&s.db, s.jobs.path(), name, Some(true), false)
            .await
            .expect("its simulation");
    }
    // The simulation-only job's simulation is even approved: approval does not make it real.
    assert_success(
        &run_bin_within(&s.db.url, s.jobs.path(), &["approve", "so-simulacao"]).await,
        "approve the simulation-only job's simulation",
    );
    let before = checksum(&s.db.pool, "comissao", "pedido_id").await;
    let serve = Serve::start_with(&s.db.url, s.jobs.path(), "serve", |_| {});

    for job in ["so-simulacao", "sem-portao", "sem-aprovacao"] {
        forged_start(&s.db, job).await;
    }
    settled(&s.db).await;
    drop(serve);

    let recorded = requests(&s.db).await;
    let states: Vec<(&str, &str)> = recorded
        .iter()
        .map(|r| (r.1.as_str(), r.2.as_str()))
        .collect();
    assert_eq!(
        states,
        vec![
            ("so-simulacao", "falhou"),
            ("sem-portao", "falhou"),
            ("sem-aprovacao", "falhou")
        ],
        "{recorded:?}"
    );
    let said: Vec<&str> = recorded.iter().filter_map(|r| r.4.as_deref()).collect();
    assert!(said[0].contains("só de simulação"), "{said:?}");
    assert!(said[1].contains("não exige simulação aprovada"), "{said:?}");
    assert!(said[2].contains("approved"), "{said:?}");
    assert_eq!(
        checksum(&s.db.pool, "comissao", "pedido_id").await,
        before,
        "comissao untouched"
    );
    assert_eq!(s.provider.request_count(), 0, "nothing sent");
    let real: i64 =
        sqlx::query_scalar("select count(*) from reprocessamento_execucao where modo = 'real'")
            .fetch_one(&s.db.pool)
            .await
            .unwrap_or(0);
    assert_eq!(real, 0, "no real execution started");
}

/// `console_solicitar` as a caller holding only the console role and a live session would call
/// it: an `executar` with no approved simulation, a `retomar` of no interrupted real run, a
/// `varrer` naming an execution and hostile notes are refused in the database, and record
/// nothing; what the console's pages offer is accepted.
#[tokio::test]
async fn console_solicitar_refuses_what_no_console_page_offers_and_hostile_notes() {
    let s = scene().await;
    sqlx::query(
        "insert into console_usuario (email, papel, senha_hash) values ('ana@financeiro.example', 'financeiro', 'x'), ('bruno@operacao.example', 'operador', 'x')",
    )
    .execute(&s.db.pool)
    .await
    .unwrap();
    sqlx::query(
        "insert into console_sessao (id_hash, email, csrf, ocioso) values ('sessao-ana', 'ana@financeiro.example', 'c', interval '1 hour'), ('sessao-bruno', 'bruno@operacao.example', 'c', interval '1 hour')",
    )
    .execute(&s.db.pool)
    .await
    .unwrap();
    let ask = |sessao: &'static str,
               acao: &'static str,
               execucao: Option<&'static str>,
               nota: Option<String>| {
        let pool = s.db.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "select console_solicitar($1, interval '1 hour', $2, $3, $4, $5)",
            )
            .bind(sessao)
            .bind(acao)
            .bind(JOB)
            .bind(execucao)
            .bind(nota)
            .fetch_one(&pool)
            .await
            .map_err(|e| {
                e.as_database_error()
                    .and_then(|d| d.code())
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| e.to_string())
            })
        }
    };

    let unapproved = ask("sessao-ana", "executar", Some(JOB), None).await;
    let no_run = ask("sessao-bruno", "retomar", Some(JOB), None).await;
    let the_simulation = ask(
        "sessao-bruno",
        "retomar",
        Some("replay-2026-10-14-v2:simulacao"),
        None,
    )
    .await;
    let sweep_with_execution = ask("sessao-bruno", "varrer", Some(JOB), None).await;
    let interrupt_no_run = ask("sessao-ana", "interromper", Some(JOB), None).await;
    let interrupt_simulation = ask(
        "sessao-bruno",
        "interromper",
        Some("replay-2026-10-14-v2:simulacao"),
        None,
    )
    .await;
    assert_success(
        &run_bin_within(&s.db.url, s.jobs.path(), &["approve", JOB]).await,
        "approve",
    );
    let long = ask(
        "sessao-ana",
        "executar",
        Some(JOB),
        Some("x".repeat(10_000)),
    )
    .await;
    let escape = ask(
        "sessao-ana",
        "executar",
        Some(JOB),
        Some("ok\u{1b}[2J".into()),
    )
    .await;
    let crlf = ask(
        "sessao-ana",
        "executar",
        Some(JOB),
        Some("ok\r\nForged: line".into()),
    )
    .await;
    let nothing_yet = requests(&s.db).await.len();
    let fine = ask(
        "sessao-ana",
        "executar",
        Some(JOB),
        Some("aprovado na reunião".into()),
    )
    .await;

    assert_eq!(
        unapproved,
        Err("42501".into()),
        "executar without an approval"
    );
    assert_eq!(no_run, Err("42501".into()), "retomar of no real run");
    assert_eq!(
        interrupt_no_run,
        Err("42501".into()),
        "interromper of no real run in progress"
    );
    assert_eq!(
        interrupt_simulation,
        Err("42501".into()),
        "interromper of a simulation"
    );
    assert_eq!(
        the_simulation,
        Err("42501".into()),
        "retomar of a simulation"
    );
    assert_eq!(
        sweep_with_execution,
        Err("42501".into()),
        "varrer naming an execution"
    );
    for (what, said) in [("10 KB", &long), ("ESC", &escape), ("CR LF", &crlf)] {
        assert_eq!(said, &Err("23514".into()), "a note with {what}");
    }
    assert_eq!(nothing_yet, 0, "no refused call recorded a request");
    assert!(
        fine.is_ok(),
        "what the console offers is recorded: {fine:?}"
    );
    assert_eq!(requests(&s.db).await.len(), 1);
}

/// 400 orders under the buggy commission, a gated job over a provider that answers after 15 ms,
/// its simulation approved by finance in the console, a `serve` started, and finance's "start
/// the real run" posted: returned once the run has sent part of the window.
struct Started {
    db: TestDb,
    provider: testkit::sink::Sink,
    jobs: tempfile::TempDir,
    serve: Serve,
    events: Vec<replay_ledger_core::domain::Event>,
    _console: ConsoleProc,
}

async fn started_from_the_console(spec: JobSpec, behavior: Behavior) -> Started {
    let events = paid_orders(400);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(Behavior {
        delay: std::time::Duration::from_millis(15),
        ..behavior
    })
    .await;
    let spec = JobSpec {
        batch_size: 20,
        extra: "require_approved_simulation: true\n".into(),
        ..spec
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    run_job(&db, jobs.path(), JOB, Some(true), false)
        .await
        .expect("the simulation");
    add_user(&db.url, jobs.path(), FINANCE, "finance").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let finance = Client::logged_in(&console, FINANCE).await;
    approve(&finance).await;
    let serve = Serve::start_with(&db.url, jobs.path(), "serve-1", |_| {});
    let confirmation = finance.get(&format!("{SIMULATION}/start")).await;
    let csrf = confirmation.csrf().expect("the confirmation's form");
    let answer = finance
        .post(&format!("{SIMULATION}/start"), &[("csrf_token", &csrf)])
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    wait_until("the run has sent part of the window", || async {
        provider.request_count() >= 60
    })
    .await;
    Started {
        db,
        provider,
        jobs,
        serve,
        events,
        _console: console,
    }
}

/// Finance's approved run, started from the console, whose `serve` is SIGKILLed mid-run: the
/// next `serve` resumes it from its checkpoint, with no command typed, and ends the request
/// `concluida`; no message is sent twice (the type cannot deduplicate: a key the dead process may
/// have sent ends `incerto`, never resent).
#[tokio::test]
async fn a_serve_killed_mid_run_is_resumed_by_the_next_serve_with_nothing_sent_twice() {
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        ..JobSpec::default()
    };
    let Started {
        db,
        provider,
        jobs,
        serve: mut first,
        events,
        _console,
    } = started_from_the_console(spec, Behavior::default()).await;
    let pid = first.child.id().expect("the first serve runs");
    kill9(&mut first.child).await;
    wait_until("the killed serve's database sessions are gone", || async {
        let left: i64 = sqlx::query_scalar(
            "select count(*) from pg_stat_activity where datname = current_database() and application_name like '%:' || $1",
        )
        .bind(pid.to_string())
        .fetch_one(&db.pool)
        .await
        .unwrap();
        left == 0
    })
    .await;
    let sent_before = provider.request_count();

    let _second = Serve::start_with(&db.url, jobs.path(), "serve-2", |_| {});
    settled(&db).await;

    let recorded = requests(&db).await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].2, "concluida", "{recorded:?}");
    assert!(
        recorded[0]
            .4
            .as_deref()
            .unwrap_or_default()
            .contains("retomada"),
        "{recorded:?}"
    );
    assert!(
        sent_before < events.len(),
        "killed mid-run ({sent_before} sent)"
    );
    assert_eq!(
        execution_state(&db.pool, JOB).await.as_deref(),
        Some("concluida")
    );
    let deliveries = provider.deliveries();
    assert!(deliveries.values().all(|n| *n == 1), "a message sent twice");
    let done = keys_in_state(&db.pool, "concluido").await.len();
    let uncertain = keys_in_state(&db.pool, "incerto").await.len();
    assert_eq!(done + uncertain, events.len(), "every key settled");
    assert!(
        uncertain <= 4,
        "at most the calls in flight at the kill: {uncertain}"
    );
}

/// A `serve` stopped gracefully (SIGTERM) in the middle of a console request's run closes the
/// request as it stops — `falhou`, saying why — so the real run, `interrompida`, may be resumed
/// from the console at once (the request once stayed `em-andamento` after the exit, and a resume
/// was refused meanwhile).
#[tokio::test]
async fn a_serve_stopped_mid_request_closes_the_request_as_it_stops() {
    let Started {
        db,
        serve,
        _console,
        ..
    } = started_from_the_console(JobSpec::default(), dedup()).await;

    let (status, _) = serve.terminate().await;
    let recorded = requests(&db).await;

    assert!(status.success(), "serve exits 0 on SIGTERM: {status}");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(
        recorded[0].2, "falhou",
        "closed as serve stopped: {recorded:?}"
    );
    assert_eq!(
        execution_state(&db.pool, JOB).await.as_deref(),
        Some("interrompida")
    );
}
