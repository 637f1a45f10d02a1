//! What the pages show and what their forms record: figures from the tallies, the report's CSV
//! byte for byte, an approval bound like the CLI's and recorded as the account, a definition
//! change said field by field instead of the button, review decisions as the operator, and
//! archive text inert in HTML.

use replay_ledger::services::report::{render, ExecutionReport};

use super::*;

#[tokio::test]
async fn finance_approves_in_the_console_as_its_account_and_the_gate_lets_the_real_run_through() {
    let s = simulated().await;
    let (_console, finance) = signed_in(&s, FINANCE, "finance").await;
    let page = format!("/executions/{JOB}:simulacao");

    let before = finance.get(&page).await;
    let confirmation = finance.get(&format!("{page}/approve")).await;
    let csrf = confirmation.csrf().unwrap();
    let answer = finance
        .post(
            &format!("{page}/approve"),
            &[("csrf_token", &csrf), ("note", "diff conferido")],
        )
        .await;
    let after = finance.get(&page).await;
    let real = run_job(&s.db, s.jobs.path(), JOB, None, false).await;

    assert!(before.body.contains("Revisar e aprovar"), "{}", before.body);
    assert!(
        confirmation.body.contains("O que será aplicado")
            && confirmation.body.contains("Confirmar a aprovação")
            && confirmation
                .body
                .contains(&format!(r#"action="{page}/approve""#)),
        "{}",
        confirmation.body
    );
    assert_eq!(
        (answer.status.as_u16(), answer.location()),
        (303, Some(page.as_str()))
    );
    let who: (String, Option<String>) =
        sqlx::query_as("select aprovado_por, nota from reprocessamento_aprovacao")
            .fetch_one(&s.db.pool)
            .await
            .unwrap();
    assert_eq!(
        who,
        (
            "console:ana@financeiro.example".into(),
            Some("diff conferido".into())
        )
    );
    assert!(
        after
            .body
            .contains("Aprovada por console:ana@financeiro.example"),
        "{}",
        after.body
    );
    assert!(
        after.body.contains("A execução real pode começar."),
        "{}",
        after.body
    );
    assert!(!after.body.contains("Revisar e aprovar"));
    assert!(real.is_ok(), "the gated real run starts: {:?}", real.err());
    assert!(audit(&s.db).await.contains(&(
        "console:ana@financeiro.example".into(),
        "aprovacao".into(),
        Some(JOB.into())
    )));
}

#[tokio::test]
async fn a_job_changed_since_the_simulation_is_said_field_by_field_instead_of_the_button() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "finance").await;
    let file = s.jobs.path().join(format!("{JOB}.yaml"));
    let yaml = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, yaml.replace("mode: apply", "mode: suppress")).unwrap();

    let (shown, forced) = finance_is_refused_the_approval(&s).await;

    for cell in [
        "effects.notificar-vendedor.mode",
        "<td>apply</td>",
        "<td>suppress</td>",
    ] {
        assert!(shown.body.contains(cell), "{cell} in {}", shown.body);
    }
    assert!(
        forced
            .body
            .contains("effects.notificar-vendedor.mode: apply → suppress"),
        "{}",
        forced.body
    );
}

/// Finance opens the simulation's page and, though the page offers no button, posts the approval
/// anyway: the page says it cannot be approved, the post gets 409 and no approval is recorded.
/// Returns the page and the post's answer, for what each test says about why.
async fn finance_is_refused_the_approval(s: &Simulated) -> (Answer, Answer) {
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let finance = Client::logged_in(&console, "ana@example.com").await;
    let page = format!("/executions/{JOB}:simulacao");

    let shown = finance.get(&page).await;
    let csrf = finance.csrf().await;
    let forced = finance
        .post(&format!("{page}/approve"), &[("csrf_token", &csrf)])
        .await;

    assert_eq!(shown.status, 200);
    assert!(!shown.body.contains("Revisar e aprovar"), "{}", shown.body);
    assert!(
        shown.body.contains("Não pode ser aprovada"),
        "{}",
        shown.body
    );
    assert_eq!(forced.status, 409, "{}", forced.body);
    let approvals: i64 = sqlx::query_scalar("select count(*) from reprocessamento_aprovacao")
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(approvals, 0);
    (shown, forced)
}

#[tokio::test]
async fn the_figures_are_the_tallies_and_the_csv_is_the_reports_attachment() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;
    let key = format!("{JOB}:simulacao");
    let report = ExecutionReport::load(&s.db.pool, &key).await.unwrap();
    let status = run_bin_within(&s.db.url, s.jobs.path(), &["status", "--json"]).await;

    let csv = reqwest::Client::new()
        .get(console.url(&format!("/executions/{key}/diff.csv")))
        .header(
            "cookie",
            format!("rl_console={}", viewer.token.as_deref().unwrap()),
        )
        .send()
        .await
        .unwrap();
    let list = viewer.get("/").await;
    let detail = viewer.get(&format!("/executions/{key}")).await;

    assert_eq!(
        csv.headers()["content-disposition"],
        format!("attachment; filename=\"{}\"", render::csv_name(&report)).as_str()
    );
    assert_eq!(
        csv.bytes().await.unwrap().as_ref(),
        render::csv(&report).as_slice()
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    let view = json["executions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["execution"] == key.as_str())
        .unwrap();
    let after = replay_ledger_core::shared::money::brl(view["total_after_cents"].as_i64().unwrap());
    assert!(view["total_after_cents"].as_i64().unwrap() > 0);
    assert!(
        list.body.contains(&after),
        "{after} in the list: {}",
        list.body
    );
    assert!(
        detail.body.contains(&after),
        "{after} in the page: {}",
        detail.body
    );
    assert!(detail.body.contains("Pedidos no diff"));
    assert!(detail.body.contains(">ped-10<"), "{}", detail.body);
}

#[tokio::test]
async fn the_diff_is_searched_by_pedido_id_and_the_list_filtered_by_job_and_state() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let found = viewer
        .get(&format!("/executions/{JOB}:simulacao?q=ped-7"))
        .await;
    let none = viewer
        .get(&format!("/executions/{JOB}:simulacao?q=nothing-like-it"))
        .await;
    let by_job = viewer.get(&format!("/?job={JOB}&state=concluida")).await;
    let other = viewer.get("/?state=falhou").await;
    let bad = viewer.get("/?state=<script>").await;

    assert!(
        found.body.contains("1 pedidos com “ped-7”"),
        "{}",
        found.body
    );
    let diff = &found.body[found.body.find("id=\"diff\"").unwrap()..];
    assert!(
        diff.contains(">ped-7<") && !diff.contains(">ped-8<"),
        "{diff}"
    );
    assert!(none.body.contains("0 pedidos com"), "{}", none.body);
    assert!(by_job.body.contains(&format!("{JOB}:simulacao")));
    assert!(other.body.contains("Nenhuma execução."), "{}", other.body);
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn an_operator_resolves_as_its_account_and_an_unknown_outcome_is_refused() {
    let s = simulated().await;
    let (sent, not_sent) = (
        uncertain(&s.db, "evt-3").await,
        uncertain(&s.db, "evt-4").await,
    );
    add_user(&s.db.url, s.jobs.path(), "otto@example.com", "operator").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let operator = Client::logged_in(&console, "otto@example.com").await;
    let queue = operator.get("/review?type=notificar-vendedor").await;
    let csrf = queue.csrf().unwrap();
    let resolve = |key: &str, outcome: &str| {
        let operator = operator.clone();
        let form = [
            ("csrf_token", csrf.clone()),
            ("key", key.into()),
            ("outcome", outcome.into()),
            ("note", "conferido no provedor".into()),
        ];
        async move {
            let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            operator.post("/review/resolve", &form).await
        }
    };

    let unknown = resolve(&sent, "maybe").await;
    let first = resolve(&sent, "sent").await;
    let second = resolve(&not_sent, "not-sent").await;
    let twice = resolve(&sent, "not-sent").await;

    assert!(
        queue.body.contains(&sent) && queue.body.contains("tempo-esgotado"),
        "{}",
        queue.body
    );
    assert_eq!(unknown.status, 400);
    assert_eq!(first.status, 303);
    assert!(first.location().unwrap().starts_with("/review?decisao="));
    let banner = operator.get(first.location().unwrap()).await;
    assert!(
        banner.body.contains(&sent),
        "the banner names the key: {}",
        banner.body
    );
    assert_eq!(second.status, 303);
    assert_eq!(twice.status, 409, "{}", twice.body);
    assert_eq!(
        ledger(&s.db.pool).await,
        [
            (sent.clone(), "concluido".into()),
            (not_sent.clone(), "incerto".into())
        ],
        "the not-sent key waits, queued, for the next sweep"
    );
    let decisions: Vec<(String, String, String)> =
        sqlx::query_as("select chave, decisao, resolvido_por from efeito_revisao order by chave")
            .fetch_all(&s.db.pool)
            .await
            .unwrap();
    let otto = "console:otto@example.com".to_string();
    assert_eq!(
        decisions,
        [
            (sent.clone(), "enviado".into(), otto.clone()),
            (not_sent.clone(), "nao-enviado".into(), otto.clone())
        ]
    );
    let trail = operator.get("/audit").await;
    assert!(
        trail.body.contains("resolveu") && trail.body.contains(&not_sent),
        "{}",
        trail.body
    );
}

#[tokio::test]
async fn script_tags_and_control_characters_in_a_pedido_id_render_inert() {
    let hostile = "<script>alert(1)</script>\u{1b}[31m\u{202e}x";
    let mut events = paid_orders(3);
    events[1].pedido_id = hostile.into();
    events[1].id = format!("evt-<b>{}", '\u{7}');
    let db = seeded_db(&events, &[]).await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    run_job(&db, jobs.path(), JOB, Some(true), false)
        .await
        .expect("the simulation");
    let key = uncertain(&db, &events[1].id).await;
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let search = format!(
        "/executions/{JOB}:simulacao?q={}",
        url::form_urlencoded::byte_serialize(hostile.as_bytes()).collect::<String>()
    );
    for page in [
        format!("/executions/{JOB}:simulacao"),
        search,
        "/review".into(),
    ] {
        let body = viewer.get(&page).await.body;
        assert!(!body.contains("<script>alert"), "{page}: {body}");
        assert!(!body.contains("<b>"), "{page}: {body}");
        assert!(
            !body
                .chars()
                .any(|c| c == '\u{1b}' || c == '\u{7}' || c == '\u{202e}'),
            "{page}: {body:?}"
        );
    }
    let body = viewer
        .get(&format!("/executions/{JOB}:simulacao"))
        .await
        .body;
    assert!(
        body.contains("&lt;script&gt;alert(1)&lt;/script&gt;\\u{1b}[31m\\u{202e}x"),
        "{body}"
    );
    assert!(
        viewer
            .get("/review")
            .await
            .body
            .contains("evt-&lt;b&gt;\\u{7}"),
        "{key}"
    );

    // An operator's page carries the key in a form, and the filters echo what was typed.
    add_user(&db.url, jobs.path(), "otto@example.com", "operator").await;
    let operator = Client::logged_in(&console, "otto@example.com").await;
    let queue = operator.get("/review").await;
    let typed = url::form_urlencoded::byte_serialize(hostile.as_bytes()).collect::<String>();
    let echo = operator.get(&format!("/review?type={typed}")).await;
    for body in [&queue.body, &echo.body] {
        assert!(
            !body
                .chars()
                .any(replay_ledger_core::shared::text::is_hazard),
            "{body:?}"
        );
        assert!(!body.contains("<script>alert"), "{body}");
    }
    assert_eq!(
        attribute_value(&echo.body, "type"),
        hostile,
        "the echo is what was typed"
    );
    let form_key = attribute_value(&queue.body, "key");
    assert_eq!(form_key, key, "the form carries the exact key");
    let csrf = queue.csrf().unwrap();
    let form = [
        ("csrf_token", csrf.as_str()),
        ("key", &form_key),
        ("outcome", "sent"),
    ];
    let resolved = operator.post("/review/resolve", &form).await;
    assert_eq!(resolved.status, 303, "{}", resolved.body);
    assert_eq!(ledger(&db.pool).await, [(key, "concluido".into())]);
}

/// The value of the first attribute `value` after `name="NAME"`, as a browser reads it: the
/// character references decoded.
fn attribute_value(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\"");
    let tag = &html[html
        .find(&marker)
        .unwrap_or_else(|| panic!("{marker} in {html}"))..];
    let at = tag.find("value=\"").expect("a value") + 7;
    let raw = &tag[at..at + tag[at..].find('"').expect("the value's end")];
    let mut out = String::new();
    let mut rest = raw;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let end = i + rest[i..].find(';').expect("a reference's end");
        out.push(match &rest[i + 1..end] {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "#39" => '\'',
            hex => {
                let code = u32::from_str_radix(hex.strip_prefix("#x").expect("hex"), 16).unwrap();
                char::from_u32(code).unwrap()
            }
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[tokio::test]
async fn an_event_added_to_the_window_after_the_simulation_blocks_the_approval_and_says_why() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "finance").await;
    insert(&s.db.pool, &[paid(11, "ped-11", 1, 11_000, 5.0)]).await;

    let (shown, forced) = finance_is_refused_the_approval(&s).await;

    assert!(
        shown.body.contains("the window's events changed"),
        "{}",
        shown.body
    );
    assert!(forced.body.contains("events changed"), "{}", forced.body);
    let recorded = audit(&s.db).await;
    assert!(
        !recorded.iter().any(|(_, acao, _)| acao == "aprovacao"),
        "{recorded:?}"
    );
}

#[tokio::test]
async fn the_review_queue_is_filtered_by_type_execution_and_age_and_a_live_execution_has_a_page() {
    let s = simulated().await;
    let (old, recent) = (
        uncertain(&s.db, "evt-3").await,
        uncertain(&s.db, "evt-4").await,
    );
    sqlx::query(
        "update efeito_aplicado set criado_em = now() - interval '3 hours' where chave = $1",
    )
    .bind(&old)
    .execute(&s.db.pool)
    .await
    .unwrap();
    sqlx::query("insert into reprocessamento_execucao (execucao_id, job, modo, estado, iniciada_por) values ('ao-vivo', 'live', 'ao-vivo', 'em-andamento', 'consume@host')")
        .execute(&s.db.pool)
        .await
        .unwrap();
    add_user(&s.db.url, s.jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let aged = viewer.get("/review?older_than=2h").await;
    let by_execution = viewer
        .get(&format!("/review?execution={JOB}&type=notificar-vendedor"))
        .await;
    let other = viewer.get("/review?execution=another-job").await;
    let bad_age = viewer.get("/review?older_than=soon").await;
    let live = viewer.get("/executions/ao-vivo").await;

    assert!(
        aged.body.contains("1 efeito(s).") && aged.body.contains(&old),
        "{}",
        aged.body
    );
    assert!(!aged.body.contains(&recent));
    assert!(
        by_execution.body.contains("2 efeito(s)."),
        "{}",
        by_execution.body
    );
    assert!(other.body.contains("0 efeito(s)."), "{}", other.body);
    assert!(
        !aged.body.contains("Foi enviado"),
        "a viewer gets no decision form"
    );
    assert_eq!(bad_age.status, 400);
    assert_eq!(live.status, 200, "{}", live.body);
    assert!(live.body.contains("ao vivo"), "{}", live.body);
}
