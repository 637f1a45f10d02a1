//! A sweeper counts only what it committed: two sweeps racing on the same stale rows
//! print counts that add up to the rows moved, not more.

use crate::helpers::*;

const ROWS: i64 = 3000;

/// `ROWS` reservations of a non-idempotent type, left an hour ago by a dead process.
async fn stale_rows(pool: &sqlx::PgPool) {
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id, atualizado_em)
        select 'evt-' || i || ':notificar-vendedor', 'evt-' || i, 'notificar-vendedor', 'reservado',
               'crashed', now() - interval '1 hour'
        from generate_series(1, $1::int8) i
        "#,
    )
    .bind(ROWS)
    .execute(pool)
    .await
    .expect("stale reservations");
}

/// The `moved to incerto N` of a `sweep`'s summary line.
fn moved(out: &std::process::Output) -> u64 {
    let said = stdout(out);
    said.split("moved to incerto ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in {said:?}"))
}

#[tokio::test]
async fn two_sweeps_racing_on_the_same_stale_rows_print_counts_that_add_up_to_the_rows_moved() {
    let db = TestDb::new().await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        ..JobSpec::default()
    };
    let jobs = jobs_dir("http://127.0.0.1:9/", &spec);
    stale_rows(&db.pool).await;

    let (a, b) = tokio::join!(
        run_bin_within(&db.url, jobs.path(), &["sweep"]),
        run_bin_within(&db.url, jobs.path(), &["sweep"]),
    );

    assert_success(&a, "the first sweep");
    assert_success(&b, "the second sweep");
    let uncertain = keys_in_state(&db.pool, "incerto").await.len() as u64;
    assert_eq!(uncertain, ROWS as u64, "every stale row moved");
    assert_eq!(moved(&a) + moved(&b), uncertain, "each row counted once");
}

/// Waits until a session of the process `pid` waits for a row lock.
async fn waits_for_a_row_lock(pool: &sqlx::PgPool, pid: u32) -> bool {
    sqlx::query_scalar(
        r#"
        select exists (select 1 from pg_stat_activity
                       where application_name like '% ' || $1 and wait_event_type = 'Lock')
        "#,
    )
    .bind(format!("%:{pid}"))
    .fetch_one(pool)
    .await
    .expect("read pg_stat_activity")
}

/// The race made real: a sweep frozen (SIGSTOP) in the middle of its pass — its
/// UPDATE of a page held up by a row lock, then let through while it is frozen — is resumed only
/// after a second sweep finished the rest. Each prints only the rows its own statements changed.
#[tokio::test]
async fn a_sweep_frozen_mid_pass_and_resumed_after_another_counts_only_its_own_rows() {
    use nix::sys::signal::Signal;
    let db = TestDb::new().await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        ..JobSpec::default()
    };
    let jobs = jobs_dir("http://127.0.0.1:9/", &spec);
    stale_rows(&db.pool).await;
    // A row of the third page (pages of 500 in `chave` order): the first sweep stops on it.
    let mut blocker = db.pool.begin().await.expect("a transaction");
    sqlx::query(
        "select 1 from efeito_aplicado where chave = (select chave from efeito_aplicado order by chave offset 1200 limit 1) for update",
    )
    .execute(&mut *blocker)
    .await
    .expect("lock a row of the third page");
    let first = command(&db.url, jobs.path())
        .arg("sweep")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the first sweep");
    let pid = first.id().expect("its pid");
    wait_until("the first sweep waits on the locked row", || {
        waits_for_a_row_lock(&db.pool, pid)
    })
    .await;

    send_signal(&first, Signal::SIGSTOP);
    blocker.rollback().await.expect("let its statement through");
    let second = run_bin_within(&db.url, jobs.path(), &["sweep"]).await;
    send_signal(&first, Signal::SIGCONT);
    let first = finish(first, "the first sweep").await;

    assert_success(&first, "the first sweep");
    assert_success(&second, "the second sweep");
    eprintln!(
        "frozen sweep: moved to incerto {}; the other: {}",
        moved(&first),
        moved(&second)
    );
    let uncertain = keys_in_state(&db.pool, "incerto").await.len() as u64;
    assert_eq!(uncertain, ROWS as u64, "every stale row moved");
    assert!(
        moved(&first) >= 1000,
        "the first sweep moved its first pages"
    );
    assert_eq!(
        moved(&first) + moved(&second),
        uncertain,
        "each row counted once"
    );
}

/// The resend path of a zombie sweeper: frozen (SIGSTOP) while its resends of keys a person
/// decided "not sent" are with the provider, its reservations go stale and a second sweep moves
/// them to `incerto`; resumed, its calls fail and its own `incerto` write changes no row. It
/// counts none of them (it once said `moved to incerto 16` beside the other's 16).
#[tokio::test]
async fn a_zombie_sweepers_failed_resends_count_only_rows_its_own_statements_moved() {
    use nix::sys::signal::Signal;
    const KEYS: usize = 16;
    let db = TestDb::new().await;
    let events = paid_orders(KEYS as i64);
    insert(&db.pool, &events).await;
    let provider = sink(testkit::sink::Behavior {
        fail_status: Some(500),
        delay: std::time::Duration::from_secs(2),
        ..Default::default()
    })
    .await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: KEYS,
        timeout: "30s",
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    for e in &events {
        sqlx::query(
            "insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id, motivo_incerto, incerto_desde) values ($1, $2, 'notificar-vendedor', 'incerto', 'ao-vivo', 'tempo-esgotado', now())",
        )
        .bind(key(e))
        .bind(&e.id)
        .execute(&db.pool)
        .await
        .unwrap();
        sqlx::query("select resolver_incerto($1, 'nao-enviado', null)")
            .bind(key(e))
            .execute(&db.pool)
            .await
            .unwrap();
    }
    let zombie = command(&db.url, jobs.path())
        .args(["sweep", "--stale-after", "1h"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the first sweep");
    wait_until("every resend is with the provider", || {
        std::future::ready(provider.request_count() >= KEYS)
    })
    .await;
    send_signal(&zombie, Signal::SIGSTOP);
    // Its reservations are an hour old now: the next sweep finds them stale.
    sqlx::query("update efeito_aplicado set atualizado_em = now() - interval '2 hours' where estado = 'reservado'")
        .execute(&db.pool)
        .await
        .unwrap();
    let other = run_bin_within(&db.url, jobs.path(), &["sweep", "--stale-after", "1h"]).await;
    send_signal(&zombie, Signal::SIGCONT);
    let zombie = finish(zombie, "the zombie sweep").await;

    assert_success(&other, "the second sweep");
    assert_eq!(
        keys_in_state(&db.pool, "incerto").await.len(),
        KEYS,
        "every key incerto again"
    );
    assert_eq!(moved(&other), KEYS as u64, "{}", stdout(&other));
    assert_eq!(
        moved(&zombie),
        0,
        "the zombie moved none itself:\n{}\n{}",
        stdout(&zombie),
        stderr(&zombie)
    );
}
