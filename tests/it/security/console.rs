//! The web console's role (`grants --console`), with the README's roles: it serves the console
//! with `--no-migrate` and records approvals and decisions as the logged-in account, but only
//! through its functions — never a row of its own, never without a live session of an account
//! with the right, never without the audit row; the other roles cannot use those functions or
//! read the accounts; and every approval or decision, whoever records it, has its audit row.
//! A console started with a role that lacks its privileges (the worker's) refuses to start and
//! says which URL to pass; `serve` as the worker with `--console-database-url` works.

use sqlx::PgConnection;

use super::privileges::{Grant, Setup, JOB};
use crate::console::{add_user, free_addr, Client, ConsoleProc};
use crate::helpers::*;

/// `statement` as the connection's role: refused for want of a privilege (42501).
async fn refused(conn: &mut PgConnection, statement: &str) {
    let err = sqlx::query(statement)
        .execute(&mut *conn)
        .await
        .expect_err(statement);
    let code = err.as_database_error().and_then(|e| e.code());
    assert_eq!(code.as_deref(), Some("42501"), "{statement}: {err}");
}

fn gated() -> JobSpec {
    JobSpec {
        extra: "require_approved_simulation: true\n".into(),
        ..JobSpec::default()
    }
}

/// A finished simulation (run by the worker), an `incerto` key, and the accounts (made by the
/// owner): a finance one, an operator one, a viewer.
async fn arranged(s: &Setup) -> String {
    insert(&s.db.pool, &paid_orders(3)).await;
    s.succeeds_as(&s.names.worker, &["run", JOB, "--simulate"])
        .await;
    let key = "evt-1:notificar-vendedor".to_string();
    // A simulation writes no ledger row: the key is left `incerto` as a crashed call leaves it.
    sqlx::query(
        "insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id) values ($1, 'evt-1', 'notificar-vendedor', 'incerto', $2)",
    )
    .bind(&key)
    .bind(JOB)
    .execute(&s.db.pool)
    .await
    .unwrap();
    let owner = s.url(&s.names.owner);
    for (email, role) in [
        ("ana@financeiro.example", "finance"),
        ("otto@operacao.example", "operator"),
        ("vera@example.com", "viewer"),
    ] {
        add_user(&owner, s.jobs.path(), email, role).await;
    }
    key
}

#[tokio::test]
async fn the_console_role_serves_the_console_and_records_as_the_logged_in_account() {
    let provider = sink(dedup()).await;
    let s = Setup::new(Grant::AsWritten, &provider.url(), &gated()).await;
    let key = arranged(&s).await;
    let as_console = s.url(&s.names.console);
    let console = ConsoleProc::start(&as_console, s.jobs.path(), &["--no-migrate"]).await;
    let finance = Client::logged_in(&console, "ana@financeiro.example").await;
    let operator = Client::logged_in(&console, "otto@operacao.example").await;

    let page = format!("/executions/{JOB}:simulacao");
    let csrf = finance.csrf().await;
    let approved = finance
        .post(&format!("{page}/approve"), &[("csrf_token", &csrf)])
        .await;
    let csrf = operator.csrf().await;
    let form = [
        ("csrf_token", csrf.as_str()),
        ("key", &key),
        ("outcome", "sent"),
    ];
    let resolved = operator.post("/review/resolve", &form).await;

    assert_eq!(approved.status, 303, "{}\n{}", approved.body, console.log());
    assert_eq!(resolved.status, 303, "{}\n{}", resolved.body, console.log());
    assert!(
        !console.log().contains("permission denied"),
        "{}",
        console.log()
    );
    assert!(
        !console.log().contains("the console's database role"),
        "the console's own role is not warned about: {}",
        console.log()
    );
    // The same console served as the schema's owner says that its role can write the engine's
    // tables.
    let as_owner =
        ConsoleProc::start(&s.url(&s.names.owner), s.jobs.path(), &["--no-migrate"]).await;
    assert!(
        as_owner
            .log()
            .contains("the console's database role can write comissao and the ledger"),
        "{}",
        as_owner.log()
    );
    drop(as_owner);
    let by: String = sqlx::query_scalar("select aprovado_por from reprocessamento_aprovacao")
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(by, "console:ana@financeiro.example");
    let decided: String = sqlx::query_scalar("select resolvido_por from efeito_revisao")
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(decided, "console:otto@operacao.example");
    let trail = crate::console::audit(&s.db).await;
    for (quem, acao) in [
        (s.names.owner.as_str(), "usuario-criado"),
        ("console:ana@financeiro.example", "login"),
        ("console:ana@financeiro.example", "aprovacao"),
        ("console:otto@operacao.example", "resolucao"),
    ] {
        assert!(
            trail.iter().any(|(q, a, _)| q == quem && a == acao),
            "{quem} {acao} in {trail:?}"
        );
    }
    s.succeeds_as(&s.names.worker, &["run", JOB]).await;
    assert_eq!(
        provider.delivery_count(),
        2,
        "the approved real run sent what was missing"
    );
}

#[tokio::test]
async fn the_console_role_writes_nothing_but_through_a_live_session_of_an_account_with_the_right() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &gated()).await;
    let key = arranged(&s).await;
    let mut conn = s.connect(&s.names.console).await;
    // A viewer's session, opened as a login would (the function writes its audit row).
    sqlx::query(
        "select console_abrir_sessao('viewer-session', 'vera@example.com', 'csrf', '127.0.0.1', '30 minutes')",
    )
    .execute(&mut conn)
    .await
    .expect("the console opens a session");
    let approval = r#"{"execucao_id": "replay-2026-10-14-v2", "job": "replay-2026-10-14-v2", "simulacao_passagem": 1, "simulacao_concluida_em": "2026-10-15T00:00:00Z", "pedidos": 0, "pedidos_alterados": 0, "total_antes_centavos": 0, "total_depois_centavos": 0, "eventos_total": 0, "eventos_hash": "", "comissao_hash": ""}"#;

    for statement in [
        "insert into reprocessamento_aprovacao (execucao_id, job, simulacao_passagem, simulacao_concluida_em, pedidos, pedidos_alterados, total_antes_centavos, total_depois_centavos, eventos_total, eventos_hash, comissao_hash) values ('x', 'x', 1, now(), 0, 0, 0, 0, 0, '', '')",
        "insert into efeito_revisao (chave, tipo_efeito, execucao_id, decisao, resolvido_por) values ('k', 't', 'x', 'enviado', 'console:ana@financeiro.example')",
        "select resolver_incerto('evt-1:notificar-vendedor', 'enviado', null)",
        "select resolver_incerto_como('evt-1:notificar-vendedor', 'enviado', null, 'console:ana@financeiro.example')",
        "insert into console_auditoria (quem, acao) values ('console:ana@financeiro.example', 'aprovacao')",
        "delete from console_auditoria",
        "insert into console_sessao (id_hash, email, csrf) values ('forged', 'ana@financeiro.example', 'x')",
        "update console_sessao set email = 'ana@financeiro.example'",
        "update console_usuario set papel = 'financeiro'",
        "update efeito_aplicado set estado = 'concluido'",
        "delete from console_tentativa_login",
        &format!("select console_aprovar('no-such-session', '30 minutes', '{approval}'::jsonb)"),
        &format!("select console_aprovar('viewer-session', '30 minutes', '{approval}'::jsonb)"),
        "select console_resolver_incerto('viewer-session', '30 minutes', 'evt-1:notificar-vendedor', 'enviado', null)",
    ] {
        refused(&mut conn, statement).await;
    }

    let approvals: i64 = sqlx::query_scalar("select count(*) from reprocessamento_aprovacao")
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(approvals, 0);
    assert_eq!(keys_in_state(&s.db.pool, "incerto").await, [key]);
}

#[tokio::test]
async fn no_other_role_may_use_the_consoles_functions_or_read_its_accounts() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &gated()).await;
    arranged(&s).await;

    for role in [
        &s.names.worker,
        &s.names.approver,
        &s.names.reviewer,
        &s.names.ana,
    ] {
        let mut conn = s.connect(role).await;
        for statement in [
            "select senha_hash from console_usuario",
            "select id_hash from console_sessao",
            "select console_abrir_sessao('s', 'ana@financeiro.example', 'c', 'a', '30 minutes')",
            "select console_aprovar('s', '30 minutes', '{}'::jsonb)",
            "select console_resolver_incerto('s', '30 minutes', 'k', 'enviado', null)",
            "select console_recusar_login('ana@financeiro.example', 'a')",
            "insert into console_auditoria (quem, acao) values ('x', 'login')",
        ] {
            refused(&mut conn, statement).await;
        }
    }
}

#[tokio::test]
async fn every_approval_and_decision_writes_its_audit_row_whoever_records_it() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &gated()).await;
    let key = arranged(&s).await;

    s.succeeds_as(&s.names.ana, &["approve", JOB, "--note", "conferido"])
        .await;
    s.succeeds_as(&s.names.bruno, &["review", "resolve", &key, "--not-sent"])
        .await;

    let trail = crate::console::audit(&s.db).await;
    assert!(
        trail.contains(&(s.names.ana.clone(), "aprovacao".into(), Some(JOB.into()))),
        "{trail:?}"
    );
    assert!(
        trail.contains(&(s.names.bruno.clone(), "resolucao".into(), Some(key))),
        "{trail:?}"
    );
}

#[tokio::test]
async fn a_console_as_the_workers_role_refuses_to_start_and_says_which_url_to_pass() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &gated()).await;
    arranged(&s).await;
    let worker = s.url(&s.names.worker);
    let (metrics, console) = (free_addr().to_string(), free_addr().to_string());

    let serve = s
        .as_role(
            &worker,
            &[
                "serve",
                "--metrics-addr",
                &metrics,
                "--console-addr",
                &console,
            ],
            true,
        )
        .await;
    let alone = s
        .as_role(&worker, &["console", "--addr", &console], true)
        .await;

    assert_eq!(serve.status.code(), Some(2), "{}", stderr(&serve));
    let said = stderr(&serve);
    for words in [
        s.names.worker.as_str(),
        "may not serve the console",
        "select on console_usuario",
        "--console-database-url",
        "grants --console",
    ] {
        assert!(said.contains(words), "{words} in: {said}");
    }
    assert_exits_saying(&alone, 2, "connect as a role granted `grants --console");
}

#[tokio::test]
async fn serve_as_the_worker_with_the_consoles_role_for_the_console_lets_finance_log_in() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &gated()).await;
    arranged(&s).await;
    let (metrics, addr) = (free_addr().to_string(), free_addr());
    let console_url = s.url(&s.names.console);
    let args = [
        "--no-migrate",
        "serve",
        "--metrics-addr",
        &metrics,
        "--console-addr",
        &addr.to_string(),
        "--console-database-url",
        &console_url,
        "--insecure-cookies",
    ];
    let serve = ConsoleProc::spawn(&s.url(&s.names.worker), s.jobs.path(), &args, addr).await;

    let finance = Client::logged_in(&serve, "ana@financeiro.example").await;
    let page = finance.get(&format!("/executions/{JOB}:simulacao")).await;

    assert_eq!(page.status, 200, "{}\n{}", page.body, serve.log());
    assert!(page.body.contains("Revisar e aprovar"), "{}", page.body);
    assert!(
        !serve.log().contains("permission denied"),
        "{}",
        serve.log()
    );
}
