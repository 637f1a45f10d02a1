//! Anyone cannot be anyone: with the README's roles, the worker cannot approve, resolve, forge a
//! decision, settle the review queue, declare a window done, create a table or write the archive;
//! an approval and a review decision record the role that made them (or the person's login), never
//! a name typed on the command line.

use sqlx::PgConnection;

use super::privileges::{Grant, Setup, JOB};
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

/// An `incerto` key, as a crashed non-idempotent call leaves it (written as the superuser).
async fn uncertain_key(s: &Setup, key: &str) {
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id, motivo_incerto)
        values ($1, split_part($1, ':', 1), 'notificar-vendedor', 'incerto', $2, 'queda-durante-chamada')
        "#,
    )
    .bind(key)
    .bind(JOB)
    .execute(&s.db.pool)
    .await
    .expect("an incerto key");
}

/// A finished simulation of the job, run by the worker (something to approve).
async fn simulated(s: &Setup) {
    insert(&s.db.pool, &paid_orders(3)).await;
    s.succeeds_as(&s.names.worker, &["run", JOB, "--simulate"])
        .await;
}

/// An execution halfway through its window: 30 events, checkpoint at the 5th.
async fn unfinished_execution(s: &Setup, key: &str) {
    for sql in [
        "insert into reprocessamento_execucao (execucao_id, job, modo, janela_inicio, janela_fim, posicao_inicial, posicao_final, total_eventos, estado, iniciada_por)
         values ($1, 'j', 'real', '2026-10-14T03:00:00Z', '2026-10-15T03:00:00Z', 1, 30, 30, 'em-andamento', 'test')",
        "insert into reprocessamento_checkpoint (execucao_id, ultima_posicao) values ($1, 5)",
    ] {
        sqlx::query(sql)
            .bind(key)
            .execute(&s.db.pool)
            .await
            .expect("an unfinished execution");
    }
}

#[tokio::test]
async fn the_worker_role_cannot_approve_or_resolve_and_says_which_role_may() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &JobSpec::default()).await;
    simulated(&s).await;
    uncertain_key(&s, "evt-1:notificar-vendedor").await;
    let worker = s.url(&s.names.worker);

    let approve = s.as_role(&worker, &["approve", JOB], true).await;
    let resolve = s
        .as_role(
            &worker,
            &["review", "resolve", "evt-1:notificar-vendedor", "--sent"],
            true,
        )
        .await;

    assert_eq!(approve.status.code(), Some(1), "{}", stderr(&approve));
    let expected = format!(
        "the database role `{}` may not approve simulations: connect as a role granted `--approver` (see docs/src/security.md, Least privileges)",
        s.names.worker
    );
    assert!(stderr(&approve).contains(&expected), "{}", stderr(&approve));
    assert_eq!(resolve.status.code(), Some(1), "{}", stderr(&resolve));
    let expected = format!(
        "the database role `{}` may not resolve review items: connect as a role granted `--reviewer` (see docs/src/security.md, Least privileges)",
        s.names.worker
    );
    assert!(stderr(&resolve).contains(&expected), "{}", stderr(&resolve));
    let migrating = s.as_role(&worker, &["status"], false).await;
    assert_eq!(migrating.status.code(), Some(1), "{}", stderr(&migrating));
    assert!(
        stderr(&migrating).contains(
            "may not migrate the schema: connect as the role that owns it, or pass `--no-migrate`"
        ),
        "{}",
        stderr(&migrating)
    );
    let approvals: i64 = sqlx::query_scalar("select count(*) from reprocessamento_aprovacao")
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(approvals, 0);
    assert_eq!(
        keys_in_state(&s.db.pool, "incerto").await,
        ["evt-1:notificar-vendedor"]
    );
}

#[tokio::test]
async fn the_worker_role_cannot_write_an_approval_a_decision_or_an_incerto_row_itself() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &JobSpec::default()).await;
    uncertain_key(&s, "evt-1:notificar-vendedor").await;
    unfinished_execution(&s, "half-done").await;
    let mut worker = s.connect(&s.names.worker).await;

    for statement in [
        "insert into reprocessamento_aprovacao (execucao_id, job, simulacao_passagem, simulacao_concluida_em, aprovado_por, pedidos, pedidos_alterados, total_antes_centavos, total_depois_centavos, eventos_total, eventos_hash, comissao_hash) values ('x', 'x', 1, now(), 'ana@financeiro', 0, 0, 0, 0, 0, '', '')",
        "insert into efeito_revisao (chave, tipo_efeito, execucao_id, decisao, resolvido_por) values ('evt-1:notificar-vendedor', 'notificar-vendedor', 'x', 'enviado', 'bruno')",
        "select resolver_incerto('evt-1:notificar-vendedor', 'enviado', null)",
        "update efeito_aplicado set estado = 'concluido' where estado = 'incerto'",
        "update efeito_aplicado set motivo_incerto = null where estado = 'incerto'",
        "delete from efeito_aplicado where estado = 'incerto'",
        "update reprocessamento_execucao set estado = 'concluida' where execucao_id = 'half-done'",
        "insert into reprocessamento_execucao (execucao_id, job, modo, posicao_inicial, posicao_final, total_eventos, estado, iniciada_por) values ('forged', 'j', 'real', 1, 30, 30, 'concluida', 'w')",
        // No DDL, no write to the archive, no delete of commissions.
        "create table rl_intruder (a int)",
        "insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em) values (999, 'x', 't', 'p', 1, '{}', now())",
        "delete from comissao",
        "drop table efeito_aplicado",
    ] {
        refused(&mut worker, statement).await;
    }

    assert_eq!(
        keys_in_state(&s.db.pool, "incerto").await,
        ["evt-1:notificar-vendedor"]
    );
    assert_eq!(
        execution_state(&s.db.pool, "half-done").await.as_deref(),
        Some("em-andamento")
    );
}

#[tokio::test]
async fn the_reviewer_resolves_and_the_decision_records_the_role_that_did_not_the_name_given() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &JobSpec::default()).await;
    for k in ["evt-1:notificar-vendedor", "evt-2:notificar-vendedor"] {
        uncertain_key(&s, k).await;
    }

    s.succeeds_as(
        &s.names.reviewer,
        &[
            "review",
            "resolve",
            "evt-1:notificar-vendedor",
            "--sent",
            "--by",
            "ceo@example.com",
        ],
    )
    .await;
    s.succeeds_as(
        &s.names.bruno,
        &[
            "review",
            "resolve",
            "evt-2:notificar-vendedor",
            "--not-sent",
            "--note",
            "seller says no",
        ],
    )
    .await;

    let decisions: Vec<(String, String, Option<String>)> =
        sqlx::query_as("select chave, resolvido_por, nota from efeito_revisao order by chave")
            .fetch_all(&s.db.pool)
            .await
            .unwrap();
    assert_eq!(
        decisions,
        [
            (
                "evt-1:notificar-vendedor".into(),
                s.names.reviewer.clone(),
                Some("ceo@example.com".into())
            ),
            (
                "evt-2:notificar-vendedor".into(),
                s.names.bruno.clone(),
                Some("seller says no".into())
            ),
        ]
    );
    let mut reviewer = s.connect(&s.names.reviewer).await;
    refused(&mut reviewer, "insert into efeito_revisao (chave, tipo_efeito, execucao_id, decisao, resolvido_por) values ('k', 't', 'x', 'enviado', 'someone')").await;
    refused(
        &mut reviewer,
        "update efeito_aplicado set estado = 'reservado'",
    )
    .await;
    refused(&mut reviewer, "insert into reprocessamento_aprovacao (execucao_id, job, simulacao_passagem, simulacao_concluida_em, pedidos, pedidos_alterados, total_antes_centavos, total_depois_centavos, eventos_total, eventos_hash, comissao_hash) values ('x', 'x', 1, now(), 0, 0, 0, 0, 0, '', '')").await;
}

#[tokio::test]
async fn an_approver_inserts_an_approval_but_cannot_say_who_approved_nor_resolve() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &JobSpec::default()).await;
    uncertain_key(&s, "evt-1:notificar-vendedor").await;
    let approval = |by: &str| {
        format!(
            "insert into reprocessamento_aprovacao (execucao_id, job, simulacao_passagem, simulacao_concluida_em, {by}pedidos, pedidos_alterados, total_antes_centavos, total_depois_centavos, eventos_total, eventos_hash, comissao_hash) values ('x', 'x', 1, now(), {}0, 0, 0, 0, 0, '', '')",
            if by.is_empty() { "" } else { "'ana@financeiro', " }
        )
    };

    for role in [&s.names.approver, &s.names.ana] {
        let mut conn = s.connect(role).await;
        refused(&mut conn, &approval("aprovado_por, ")).await;
        sqlx::query(&approval(""))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{role} inserts an approval: {e}"));
        refused(&mut conn, "update efeito_aplicado set estado = 'concluido'").await;
    }
    let resolve = s
        .as_role(
            &s.url(&s.names.ana),
            &["review", "resolve", "evt-1:notificar-vendedor", "--sent"],
            true,
        )
        .await;

    let who: Vec<String> =
        sqlx::query_scalar("select aprovado_por from reprocessamento_aprovacao order by id")
            .fetch_all(&s.db.pool)
            .await
            .unwrap();
    assert_eq!(who, [s.names.approver.clone(), s.names.ana.clone()]);
    assert_exits_saying(&resolve, 1, "`--reviewer`");
}

#[tokio::test]
async fn the_approver_role_approves_and_the_approval_records_that_role() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &JobSpec::default()).await;
    simulated(&s).await;

    s.succeeds_as(
        &s.names.approver,
        &["approve", JOB, "--note", "diff conferido"],
    )
    .await;
    s.succeeds_as(&s.names.ana, &["approve", JOB]).await;

    let rows: Vec<(String, Option<String>)> =
        sqlx::query_as("select aprovado_por, nota from reprocessamento_aprovacao order by id")
            .fetch_all(&s.db.pool)
            .await
            .unwrap();
    assert_eq!(
        rows,
        [
            (s.names.approver.clone(), Some("diff conferido".into())),
            (s.names.ana.clone(), None)
        ]
    );
}

#[tokio::test]
async fn grants_again_takes_away_what_the_old_readme_gave_the_worker() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &JobSpec::default()).await;
    let (owner, worker) = (s.url(&s.names.owner), &s.names.worker);
    let mut as_owner = s.connect(&s.names.owner).await;
    for old in [
        "grant select, insert on reprocessamento_aprovacao to {w}",
        "grant insert on efeito_revisao to {w}",
        "grant usage on sequence efeito_revisao_id_seq, reprocessamento_aprovacao_id_seq to {w}",
    ] {
        sqlx::query(&old.replace("{w}", worker))
            .execute(&mut as_owner)
            .await
            .expect("the old README's grants");
    }
    let decision = "insert into efeito_revisao (chave, tipo_efeito, execucao_id, decisao, resolvido_por) values ('k', 't', 'x', 'enviado', 'bruno')";
    let mut as_worker = s.connect(worker).await;
    sqlx::query(decision)
        .execute(&mut as_worker)
        .await
        .expect("the old grants let the worker forge a decision");

    let out = s
        .as_role(&owner, &["grants", "--worker", worker], false)
        .await;

    assert_success(&out, "grants again");
    refused(&mut as_worker, decision).await;
}

#[tokio::test]
async fn grants_refuses_an_unknown_role_one_role_for_two_duties_and_reserved_names() {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &JobSpec::default()).await;
    let owner = s.url(&s.names.owner);
    let w = s.names.worker.as_str();

    for args in [
        vec!["grants", "--worker", "rl_nobody_at_all"],
        vec!["grants", "--worker", w, "--approver", w],
        vec!["grants", "--worker", w, "--reviewer", "public", "--print"],
        vec!["grants", "--worker", "pg_write_all_data", "--print"],
    ] {
        let out = s.as_role(&owner, &args, false).await;

        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stdout(&out).is_empty(),
            "{args:?} printed SQL: {}",
            stdout(&out)
        );
    }
}

#[tokio::test]
async fn a_rebuild_is_approved_by_the_approver_seen_by_the_worker_and_swapped_with_the_workers_grants(
) {
    let s = Setup::new(Grant::AsWritten, "http://127.0.0.1:9/", &JobSpec::default()).await;
    insert(&s.db.pool, &paid_orders(20)).await;
    let owner = s.url(&s.names.owner);
    let compared = s.as_role(&owner, &["rebuild"], true).await;
    assert_success(&compared, "rebuild as the owner");
    let out = stdout(&compared);
    let at = out.find("--approve '").expect("a fingerprint to approve") + 11;
    let fingerprint = out[at..].split('\'').next().unwrap().to_string();

    let by_worker = s
        .as_role(
            &s.url(&s.names.worker),
            &["rebuild", "--approve", &fingerprint],
            true,
        )
        .await;
    assert_eq!(by_worker.status.code(), Some(1), "{}", stderr(&by_worker));
    s.succeeds_as(&s.names.ana, &["rebuild", "--approve", &fingerprint])
        .await;
    let by: String = sqlx::query_scalar(
        "select aprovado_por from reprocessamento_aprovacao where job = 'rebuild'",
    )
    .fetch_one(&s.db.pool)
    .await
    .unwrap();
    assert_eq!(by, s.names.ana);
    let status = s.succeeds_as(&s.names.worker, &["status"]).await;
    assert!(stdout(&status).contains("rebuild 1 of comissao: comparada"));

    assert_success(&s.as_role(&owner, &["rebuild"], true).await, "the swap");
    let mut worker = s.connect(&s.names.worker).await;
    sqlx::query(
        "insert into comissao (pedido_id, valor_centavos, versao_evento) values ('novo', 1, 1)",
    )
    .execute(&mut worker)
    .await
    .expect("the worker writes the swapped-in comissao");
}

/// The approver notes its approval on the rebuild it approves, and nothing else: an id that is
/// not an approval of that rebuild's comparison is refused (it once took 424242).
#[tokio::test]
async fn the_approver_cannot_note_an_approval_that_is_not_of_the_rebuilds_comparison() {
    let provider = sink(testkit::sink::Behavior::default()).await;
    let setup = Setup::new(Grant::AsWritten, &provider.url(), &JobSpec::default()).await;
    insert(&setup.db.pool, &paid_orders(3)).await;
    let owner = setup.url(&setup.names.owner);
    assert_success(
        &setup.as_role(&owner, &["rebuild"], true).await,
        "rebuild as the owner",
    );
    let mut approver = setup.connect(&setup.names.approver).await;
    let forged = sqlx::query("update comissao_reconstrucao set aprovacao_id = 424242")
        .execute(&mut approver)
        .await;
    let code = forged
        .expect_err("a forged approval id")
        .as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("42501"));
    let noted: Option<i64> = sqlx::query_scalar("select aprovacao_id from comissao_reconstrucao")
        .fetch_one(&setup.db.pool)
        .await
        .unwrap();
    assert_eq!(noted, None);
}

/// Another role's lock holder is named without what PostgreSQL hides from the worker (its
/// application name, address and start are null for another role's session): `run` says the
/// execution is held, where it once failed to decode a null column.
#[tokio::test]
async fn a_run_meeting_another_roles_holder_says_it_is_held_instead_of_failing_to_decode() {
    let provider = sink(testkit::sink::Behavior::default()).await;
    let setup = Setup::new(Grant::AsWritten, &provider.url(), &JobSpec::default()).await;
    insert(&setup.db.pool, &paid_orders(3)).await;
    let mut holder = setup.connect(&setup.names.owner).await;
    hold_execution_lock(&mut holder, JOB).await;

    let out = setup
        .as_role(&setup.url(&setup.names.worker), &["run", JOB], true)
        .await;

    assert_exits_saying(
        &out,
        1,
        "already being run by 'a session of another database role'",
    );
    assert!(!stderr(&out).contains("decoding"), "{}", stderr(&out));
}

/// `rebuild` as the worker is refused for want of the owner's rights, and the message says to
/// connect as the schema's owner (it once told the worker to connect as the worker).
#[tokio::test]
async fn a_rebuild_as_the_worker_says_to_connect_as_the_schemas_owner() {
    let provider = sink(testkit::sink::Behavior::default()).await;
    let setup = Setup::new(Grant::AsWritten, &provider.url(), &JobSpec::default()).await;
    insert(&setup.db.pool, &paid_orders(3)).await;

    let out = setup
        .as_role(&setup.url(&setup.names.worker), &["rebuild"], true)
        .await;

    assert_exits_saying(
        &out,
        1,
        "connect as the role that ran `migrate` (the schema's owner)",
    );
}

/// A session of `role` named `application_name`, as a process of this program names its own.
async fn session_named(setup: &Setup, role: &str, application_name: &str) -> PgConnection {
    use sqlx::ConnectOptions;
    let options: sqlx::postgres::PgConnectOptions =
        setup.url(role).parse().expect("the role's URL");
    options
        .application_name(application_name)
        .connect()
        .await
        .expect("connect as the role")
}

async fn alive(conn: &mut PgConnection) -> bool {
    sqlx::query("select 1").execute(conn).await.is_ok()
}

/// Two worker roles, neither granted `pg_signal_backend`: a `run` as the second finds the
/// execution's lock held by a process of the first whose lease lapsed an hour ago, ends that
/// process's sessions (through the schema's function, with the owner's rights the book's setup
/// gives it) and finishes the run — ending no session of another process of the same host, nor
/// one not of this program.
#[tokio::test]
async fn a_worker_of_another_role_takes_a_lapsed_holder_over_ending_only_its_sessions() {
    let second = format!(
        "rl_worker_b_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    // Dropped after the database (declared before it).
    let _second_role = super::privileges::Roles(vec![second.clone()]);
    let provider = sink(testkit::sink::Behavior::default()).await;
    let setup = Setup::new(Grant::AsWritten, &provider.url(), &JobSpec::default()).await;
    insert(&setup.db.pool, &paid_orders(20)).await;
    // The superuser's part for a second worker role, as the book gives it for the first.
    for statement in [
        format!("create role {second} login password 'x'"),
        format!(
            "grant connect on database \"{}\" to {second}",
            setup.names.database
        ),
        format!("grant usage on schema public to {second}"),
        format!("grant {second} to {}", setup.names.owner),
    ] {
        sqlx::query(&statement)
            .execute(&setup.db.pool)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    assert_success(
        &setup
            .as_role(
                &setup.url(&setup.names.owner),
                &["grants", "--worker", &second],
                false,
            )
            .await,
        "grants --worker for the second role",
    );
    let worker = setup.names.worker.clone();
    let word = "replay-ledger run far-host:4242";
    let mut holder = session_named(&setup, &worker, word).await;
    hold_execution_lock(&mut holder, JOB).await;
    sqlx::query("insert into reprocessamento_dono (execucao_id, epoca, tomada_por) values ($1, 1, current_user)")
        .bind(JOB)
        .execute(&mut holder)
        .await
        .unwrap();
    sqlx::query(
        "insert into reprocessamento_arrendamento (execucao_id, epoca, confirmado_em, confirmado_por) \
         values ($1, 1, now() - interval '1 hour', $2)",
    )
    .bind(JOB)
    .bind(word)
    .execute(&mut holder)
    .await
    .unwrap();
    let mut sibling = session_named(&setup, &worker, word).await;
    let mut neighbour = session_named(&setup, &worker, "replay-ledger run far-host:4243").await;
    let mut person = session_named(&setup, &worker, "psql").await;
    let mut console = session_named(&setup, &setup.names.console, word).await;

    let out = setup
        .as_role(&setup.url(&second), &["run", JOB], true)
        .await;

    assert_exits_saying(&out, 0, "ended its sessions, the lock frees");
    assert_eq!(
        execution_state(&setup.db.pool, JOB).await.as_deref(),
        Some("concluida")
    );
    assert!(!alive(&mut holder).await, "the holder's lock session ended");
    assert!(
        !alive(&mut sibling).await,
        "the holder's other session ended"
    );
    assert!(
        alive(&mut neighbour).await,
        "another process of the same host lives"
    );
    assert!(
        alive(&mut person).await,
        "a session not of this program lives"
    );
    assert!(
        alive(&mut console).await,
        "a role the owner has no rights of is not ended, whatever its name"
    );
    let signal: i64 = sqlx::query_scalar(
        "select count(*) from pg_auth_members where roleid = 'pg_signal_backend'::regrole",
    )
    .fetch_one(&setup.db.pool)
    .await
    .unwrap();
    assert_eq!(signal, 0, "no role was granted pg_signal_backend");
}
