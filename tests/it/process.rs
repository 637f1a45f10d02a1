//! The behaviours that are about processes, proven on the real `replay-ledger` binary run as
//! separate OS processes: kill -9 mid-window and resume (invariants `at-most-once` and
//! `kill-and-rerun`), SIGINT/SIGTERM, one process per execution, abandoned reservations settled at
//! once, two executions racing over one window, the exit statuses of the interface contract, and
//! `demo`.

use std::collections::{BTreeSet, HashSet};
use std::future::ready;
use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;
use sqlx::PgPool;
use testkit::sink::Behavior;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// A provider that answers after `ms` milliseconds, deduplicating by key or counting every request.
fn slow(ms: u64, dedup: bool) -> Behavior {
    Behavior {
        dedup,
        delay: Duration::from_millis(ms),
        ..Behavior::default()
    }
}

/// The keys left `reservado` after a crash, asserted to be at most `concurrency` (invariant
/// `at-most-once`: a crash leaves at most that many non-idempotent keys whose outcome is unknown).
/// On failure it says which of them the provider had received (sent, only their completion was
/// lost) and which it had not (reserved but not yet sent).
async fn reserved_within_concurrency(
    pool: &PgPool,
    provider: &testkit::sink::Sink,
    concurrency: usize,
) -> Vec<String> {
    let reserved = keys_in_state(pool, "reservado").await;
    let received: HashSet<String> = provider.received().into_iter().map(|r| r.key).collect();
    let (sent, unsent): (Vec<&String>, Vec<&String>) =
        reserved.iter().partition(|k| received.contains(*k));
    assert!(
        reserved.len() <= concurrency,
        "at most {concurrency} keys may be left reservado by a crash, found {}: \
         {} already received by the provider {sent:?}, {} not {unsent:?}",
        reserved.len(),
        sent.len(),
        unsent.len()
    );
    reserved
}

#[tokio::test]
async fn a_run_killed_with_sigkill_at_three_instants_then_resumed_ends_like_an_uninterrupted_run() {
    let events = paid_orders(3000);
    let sent = sent_share(&events, 3);
    let missing = missing_keys(&events, &sent);
    let db = seeded_db(&events, &sent).await;
    let provider = sink(slow(3, true)).await;
    let spec = JobSpec::default();
    let jobs = jobs_dir(&provider.url(), &spec);

    for share in [0.1, 0.4, 0.7] {
        let mid_window = (missing.len() as f64 * share) as usize;
        let mut child = spawn_run(&db.url, jobs.path(), JOB);
        wait_until(&format!("{mid_window} keys were delivered"), || {
            ready(provider.delivery_count() >= mid_window)
        })
        .await;
        kill9(&mut child).await;
    }
    let resumed = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&resumed, "the run after three kills");
    let (comissao, ledger_rows) = uninterrupted_run(&events, &sent, &spec).await;
    assert_same_rows(&commissions(&db.pool).await, &comissao, "comissao");
    assert_same_rows(&ledger(&db.pool).await, &ledger_rows, "the ledger");
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await.len(),
        events.len(),
        "every key ends concluido"
    );
    let delivered: HashSet<String> = provider.deliveries().into_keys().collect();
    assert_eq!(delivered, missing, "every missing key was delivered");
}

#[tokio::test]
async fn a_sigkill_leaves_at_most_concurrency_non_idempotent_keys_reserved_and_none_is_sent_twice()
{
    let events = paid_orders(2000);
    let sent = sent_share(&events, 3);
    let db = seeded_db(&events, &sent).await;
    let provider = sink(slow(5, false)).await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: 4,
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let mut reserved_at_kills = BTreeSet::new();

    for mid_window in [200, 700] {
        let mut child = spawn_run(&db.url, jobs.path(), JOB);
        wait_until(&format!("{mid_window} keys were delivered"), || {
            ready(provider.delivery_count() >= mid_window)
        })
        .await;
        kill9(&mut child).await;
        wait_sessions_gone(&db.pool).await;
        let reserved = reserved_within_concurrency(&db.pool, &provider, spec.concurrency).await;
        reserved_at_kills.extend(reserved);
    }
    let resumed = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&resumed, "the run after two kills");
    let received = provider.received();
    let distinct: HashSet<&str> = received.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(
        distinct.len(),
        received.len(),
        "a key reached the provider twice"
    );
    assert!(provider.deliveries().values().all(|n| *n == 1));
    let incerto: BTreeSet<String> = keys_in_state(&db.pool, "incerto")
        .await
        .into_iter()
        .collect();
    assert_eq!(
        incerto,
        reserved_at_kills,
        "incerto = the keys reserved at the kills; incerto only: {:?}, reserved only: {:?}",
        incerto.difference(&reserved_at_kills).collect::<Vec<_>>(),
        reserved_at_kills.difference(&incerto).collect::<Vec<_>>()
    );
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await.len(),
        events.len() - incerto.len(),
        "every other key ends concluido"
    );
    let (comissao, _) = uninterrupted_run(&events, &sent, &spec).await;
    assert_same_rows(&commissions(&db.pool).await, &comissao, "comissao");
}

/// Makes every completion (`reservado` → `concluido`) wait for an advisory lock that the returned
/// connection holds: the provider keeps answering while the ledger cannot record it, as when the
/// database is slow. Dropping the connection lets completions through.
async fn stall_completions(db: &TestDb) -> sqlx::PgConnection {
    use sqlx::Connection;
    sqlx::raw_sql(
        r#"
        create function test_stall_completion() returns trigger language plpgsql as $$
        begin
          if old.estado = 'reservado' and new.estado = 'concluido' then
            perform pg_advisory_xact_lock(72427);
          end if;
          return new;
        end $$;
        create trigger test_stall_completion before update on efeito_aplicado
          for each row execute function test_stall_completion();
        "#,
    )
    .execute(&db.pool)
    .await
    .expect("install the stalling trigger");
    let mut gate = sqlx::PgConnection::connect(&db.url).await.expect("connect");
    sqlx::query("select pg_advisory_lock(72427)")
        .execute(&mut gate)
        .await
        .expect("hold the gate");
    gate
}

#[tokio::test]
async fn a_sigkill_while_completions_lag_leaves_at_most_concurrency_non_idempotent_keys_reserved() {
    let events = paid_orders(300);
    let db = seeded_db(&events, &[]).await;
    let _gate = stall_completions(&db).await;
    let provider = sink(Behavior::default()).await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: 4,
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let mut child = spawn_run(&db.url, jobs.path(), JOB);
    wait_until("the run fills its concurrency slots", || {
        ready(provider.delivery_count() >= spec.concurrency)
    })
    .await;
    // Not an assertion: gives a run that frees slots before its completions are written the
    // chance to send more keys; a run that does not stays at `concurrency` and this times out.
    let more = 5 * spec.concurrency;
    eventually(Duration::from_secs(5), || {
        ready(provider.delivery_count() >= more)
    })
    .await;

    kill9(&mut child).await;

    reserved_within_concurrency(&db.pool, &provider, spec.concurrency).await;
}

/// Stops a run with `signal` mid-window, checks how it stopped, reruns it and checks the end.
async fn a_stop_signal_interrupts_the_run_and_a_rerun_finishes_it(signal: Signal) {
    let events = paid_orders(1500);
    let sent = sent_share(&events, 3);
    let missing = missing_keys(&events, &sent);
    let db = seeded_db(&events, &sent).await;
    let provider = sink(slow(5, false)).await;
    let spec = JobSpec::default();
    let jobs = jobs_dir(&provider.url(), &spec);
    let child = spawn_run_captured(&db.url, jobs.path(), JOB);
    wait_until("100 keys were delivered", || {
        ready(provider.delivery_count() >= 100)
    })
    .await;

    send_signal(&child, signal);
    let stopped = finish(child, &format!("the run sent {signal}")).await;

    assert_eq!(stopped.status.code(), Some(130), "{}", stderr(&stopped));
    let out = stdout(&stopped);
    assert!(out.contains("stopped at posicao"), "{out}");
    assert!(out.contains("run it again to resume"), "{out}");
    assert!(stderr(&stopped).contains("stop requested"));
    assert_eq!(
        execution_state(&db.pool, JOB).await.as_deref(),
        Some("interrompida")
    );
    assert!(
        keys_in_state(&db.pool, "reservado").await.is_empty(),
        "a clean stop leaves no reservation"
    );
    let resumed = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;
    assert_success(&resumed, "the rerun");
    assert_eq!(
        execution_state(&db.pool, JOB).await.as_deref(),
        Some("concluida")
    );
    let (comissao, ledger_rows) = uninterrupted_run(&events, &sent, &spec).await;
    assert_same_rows(&commissions(&db.pool).await, &comissao, "comissao");
    assert_same_rows(&ledger(&db.pool).await, &ledger_rows, "the ledger");
    let deliveries = provider.deliveries();
    assert_eq!(deliveries.keys().cloned().collect::<HashSet<_>>(), missing);
    assert!(
        deliveries.values().all(|n| *n == 1),
        "no key was sent twice"
    );
}

#[tokio::test]
async fn an_execution_stopped_by_a_signal_and_resumed_counts_each_event_once_in_its_summary() {
    let events = paid_orders(1000);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(slow(5, true)).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let child = spawn_run_captured(&db.url, jobs.path(), JOB);
    wait_until("50 keys were delivered", || {
        ready(provider.delivery_count() >= 50)
    })
    .await;
    send_signal(&child, Signal::SIGTERM);
    let stopped = finish(child, "the run sent SIGTERM").await;
    assert_eq!(stopped.status.code(), Some(130), "{}", stderr(&stopped));

    let resumed = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&resumed, "the rerun");
    let events_read = replay_ledger_core::tables::execution::load(&db.pool, JOB)
        .await
        .unwrap()
        .expect("the execution")
        .summary
        .events_read as i64;
    assert_eq!(
        events_read,
        events.len() as i64,
        "the execution's summary counts each event of the window once\n{}",
        stdout(&resumed)
    );
}

#[tokio::test]
async fn sigterm_stops_a_run_with_status_130_as_interrompida_and_a_rerun_finishes_it() {
    a_stop_signal_interrupts_the_run_and_a_rerun_finishes_it(Signal::SIGTERM).await;
}

#[tokio::test]
async fn sigint_stops_a_run_with_status_130_as_interrompida_and_a_rerun_finishes_it() {
    a_stop_signal_interrupts_the_run_and_a_rerun_finishes_it(Signal::SIGINT).await;
}

#[tokio::test]
async fn a_second_process_cannot_run_an_execution_that_another_process_is_running() {
    let db = seeded_db(&paid_orders(1000), &[]).await;
    let provider = sink(slow(100, true)).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let mut first = spawn_run(&db.url, jobs.path(), JOB);
    wait_until("the first process calls the provider", || {
        ready(provider.request_count() > 0)
    })
    .await;

    let second = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_eq!(second.status.code(), Some(1), "{}", stderr(&second));
    let err = stderr(&second);
    assert!(err.contains("already being run by"), "{err}");
    assert!(err.contains("replay-ledger"), "the holder is named: {err}");
    assert!(
        first.try_wait().expect("poll the first process").is_none(),
        "the first process is still running"
    );
}

#[tokio::test]
async fn a_fresh_reservation_left_by_its_own_execution_is_sent_at_once_on_rerun_when_idempotent() {
    let events = paid_orders(20);
    let db = seeded_db(&events, &[]).await;
    let abandoned = &events[7];
    abandon_fresh_reservation(&db.pool, abandoned, JOB).await;
    let provider = sink(Behavior::default()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    let output = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&output, "the rerun");
    assert_eq!(provider.deliveries().get(&key(abandoned)), Some(&1));
    assert_eq!(provider.delivery_count(), 20, "each key delivered once");
    assert_eq!(keys_in_state(&db.pool, "concluido").await.len(), 20);
}

/// A reservation of this execution under an earlier claim that lands after the run settled its
/// abandoned ones (a batch's statement of a claim a recovery replaced, committed late) is this
/// execution's own, abandoned: the run retakes and sends it. It once counted it as registered by
/// someone else, moved the checkpoint past it and concluded with the key never sent.
#[tokio::test]
async fn a_reservation_of_its_own_execution_landing_mid_run_is_retaken_and_sent_when_idempotent() {
    let events = paid_orders(200);
    let db = seeded_db(&events, &[]).await;
    let late = &events[190];
    let provider = sink(Behavior {
        delay: std::time::Duration::from_millis(20),
        ..Behavior::default()
    })
    .await;
    let spec = JobSpec {
        batch_size: 10,
        concurrency: 2,
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let run = spawn_run_captured(&db.url, jobs.path(), JOB);
    wait_until("the run calls the provider", || {
        ready(provider.request_count() > 0)
    })
    .await;

    abandon_fresh_reservation(&db.pool, late, JOB).await;
    let output = finish(run, "the run").await;

    assert_success(&output, "the run");
    assert_eq!(provider.deliveries().get(&key(late)), Some(&1));
    assert_eq!(provider.delivery_count(), 200, "each key delivered once");
    assert_eq!(keys_in_state(&db.pool, "concluido").await.len(), 200);
}

#[tokio::test]
async fn a_fresh_reservation_left_by_its_own_execution_ends_incerto_unsent_when_not_idempotent() {
    let events = paid_orders(20);
    let db = seeded_db(&events, &[]).await;
    let abandoned = &events[7];
    abandon_fresh_reservation(&db.pool, abandoned, JOB).await;
    let provider = sink(Behavior::default()).await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);

    let output = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&output, "the rerun");
    assert_eq!(
        keys_in_state(&db.pool, "incerto").await,
        vec![key(abandoned)]
    );
    assert!(
        provider.received().iter().all(|r| r.key != key(abandoned)),
        "an abandoned non-idempotent key is never sent again"
    );
    assert_eq!(keys_in_state(&db.pool, "concluido").await.len(), 19);
}

#[tokio::test]
async fn a_fresh_reservation_of_another_execution_is_left_to_it_and_not_sent() {
    let events = paid_orders(20);
    let db = seeded_db(&events, &[]).await;
    let held = &events[7];
    abandon_fresh_reservation(&db.pool, held, "ao-vivo").await;
    let provider = sink(Behavior::default()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    let output = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&output, "the run");
    assert_eq!(keys_in_state(&db.pool, "reservado").await, vec![key(held)]);
    assert_eq!(provider.deliveries().get(&key(held)), None);
    assert_eq!(provider.delivery_count(), 19);
}

#[tokio::test]
async fn a_replay_and_a_live_execution_racing_over_one_window_send_each_missing_key_exactly_once() {
    let events = paid_orders(2000);
    let sent = sent_share(&events, 3);
    let missing = missing_keys(&events, &sent);
    let db = seeded_db(&events, &sent).await;
    let provider = sink(slow(3, false)).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let live = JobSpec {
        name: "ao-vivo".into(),
        ..JobSpec::default()
    };
    write_jobs(jobs.path(), &provider.url(), &live);

    let replay = spawn_run_captured(&db.url, jobs.path(), JOB);
    let racer = spawn_run_captured(&db.url, jobs.path(), "ao-vivo");
    let (replay, racer) = tokio::join!(finish(replay, "the replay"), finish(racer, "ao-vivo"));

    assert_success(&replay, "the replay");
    assert_success(&racer, "the ao-vivo execution");
    let (rows, keys): (i64, i64) =
        sqlx::query_as("select count(*), count(distinct chave) from efeito_aplicado")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((rows, keys), (2000, 2000), "one ledger row per key");
    assert_eq!(keys_in_state(&db.pool, "concluido").await.len(), 2000);
    let deliveries = provider.deliveries();
    assert_eq!(deliveries.keys().cloned().collect::<HashSet<_>>(), missing);
    assert!(deliveries.values().all(|n| *n == 1), "a key was sent twice");
    assert_eq!(provider.request_count(), missing.len());
    let by_replay: i64 =
        sqlx::query_scalar("select count(*) from efeito_aplicado where execucao_id = $1")
            .bind(JOB)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    let new_live = rows - by_replay - sent.len() as i64;
    assert!(
        by_replay > 0 && new_live > 0,
        "the two did not overlap ({by_replay} / {new_live}): no race was tested"
    );
    let (comissao, _) = uninterrupted_run(&events, &sent, &JobSpec::default()).await;
    assert_same_rows(&commissions(&db.pool).await, &comissao, "comissao");
}

/// Job files in a jobs directory (every `*.yaml` but `effects.yaml`).
fn job_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("read the jobs dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| (n.ends_with(".yaml") || n.ends_with(".yml")) && n != "effects.yaml")
        .count()
}

#[tokio::test]
async fn check_accepts_every_job_file_of_the_repository_and_counts_them() {
    let repo_jobs = Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs");
    let mut check = command(&server_url(), &repo_jobs);
    check
        .env("SELLER_WEBHOOK_URL", "http://127.0.0.1:9/")
        .env("SELLER_WEBHOOK_TOKEN", "test-token")
        .arg("check");

    let output = output_of(check, "check").await;

    assert_success(&output, "check of jobs/");
    let expected = format!("ok: {} jobs", job_files(&repo_jobs));
    assert!(stdout(&output).contains(&expected), "{}", stdout(&output));
}

#[tokio::test]
async fn a_typo_in_a_job_file_makes_check_and_run_exit_2_naming_file_line_and_column() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let file = jobs.path().join(format!("{JOB}.yaml"));
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("on_failure", "on_falure");
    std::fs::write(&file, &text).unwrap();
    let (line, col) = text
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find("on_falure").map(|c| (i + 1, c + 1)))
        .unwrap();
    let place = format!("{}:{line}:{col}", file.display());

    let check = run_bin_within(&db.url, jobs.path(), &["check"]).await;
    let run = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    for (what, output) in [("check", &check), ("run", &run)] {
        assert_eq!(output.status.code(), Some(2), "{what}: {}", stderr(output));
        assert!(
            stderr(output).contains(&place),
            "{what} names {place}: {}",
            stderr(output)
        );
        assert!(
            stderr(output).contains("on_falure"),
            "{what}: {}",
            stderr(output)
        );
    }
}

#[tokio::test]
async fn running_a_job_that_does_not_exist_exits_2() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());

    let output = run_bin_within(&db.url, jobs.path(), &["run", "no-such-job"]).await;

    assert_exits_saying(&output, 2, "no-such-job");
}

#[tokio::test]
async fn migrate_exits_0_on_a_new_database_and_again_on_a_migrated_one() {
    let db = TestDb::unmigrated().await;
    let jobs = tempfile::tempdir().unwrap();

    let first = run_bin_within(&db.url, jobs.path(), &["migrate"]).await;
    let second = run_bin_within(&db.url, jobs.path(), &["migrate"]).await;

    assert_success(&first, "the first migrate");
    assert_success(&second, "the second migrate");
    let tables: i64 = sqlx::query_scalar(
        "select count(*) from information_schema.tables where table_name in ('evento_arquivado', 'comissao', 'efeito_aplicado')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(tables, 3);
}

/// `replay-ledger demo --events 1000` run from an empty directory, so it needs none of the
/// repository's files.
fn demo(database_url: Option<&str>, cwd: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(bin());
    cmd.args(["demo", "--events", "1000"])
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .env_remove("DATABASE_URL")
        .kill_on_drop(true);
    if let Some(url) = database_url {
        cmd.env("DATABASE_URL", url);
    }
    cmd
}

/// A build of the product alone has no demo program beside it: `demo` says how to run it (exit 2)
/// instead of failing obscurely.
#[tokio::test]
async fn demo_from_a_binary_without_the_demo_program_beside_it_says_how_to_run_it() {
    let alone = tempfile::tempdir().unwrap();
    let product = alone.path().join("replay-ledger");
    std::fs::copy(bin(), &product).unwrap();
    let mut cmd = tokio::process::Command::new(&product);
    cmd.args(["demo", "--events", "1000"])
        .current_dir(alone.path())
        .kill_on_drop(true);

    let output = output_of(cmd, "demo").await;

    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("cargo run --release -p replay-ledger-demo"),
        "{output:?}"
    );
}

#[tokio::test]
async fn demo_on_the_shared_server_exits_0_and_every_check_holds() {
    let cwd = tempfile::tempdir().unwrap();

    let output = output_of(demo(Some(&server_url()), cwd.path()), "demo").await;

    assert_success(&output, "demo");
    assert!(
        stdout(&output).contains("every check held"),
        "{}",
        stdout(&output)
    );
}

#[tokio::test]
async fn demo_without_database_url_starts_a_throwaway_cluster_and_exits_0() {
    let cwd = tempfile::tempdir().unwrap();

    let output = output_of(demo(None, cwd.path()), "demo on a throwaway cluster").await;

    assert_success(&output, "demo without DATABASE_URL");
    let out = stdout(&output);
    assert!(out.contains("throwaway PostgreSQL cluster"), "{out}");
    assert!(out.contains("every check held"), "{out}");
}

/// An execution asked to stop from the console (the row's `interrupcao_pedida_*`, as the
/// console's `interromper` writes them) while a partitioned run is under way: every partition
/// stops at its next batch boundary, the process exits 130 naming who asked, the execution is
/// `interrompida` with its checkpoints kept; a rerun clears the ask and finishes it, no key sent
/// twice (the provider does not deduplicate).
#[tokio::test]
async fn a_partitioned_run_asked_to_stop_stops_every_partition_and_a_rerun_finishes_it_once() {
    let events = paid_orders(400);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(slow(20, false)).await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: 2,
        batch_size: 10,
        extra: "partitions: 2\n".into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let child = command(&db.url, jobs.path())
        .args(["run", JOB, "--workers", "2"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn replay-ledger run");
    wait_until("40 keys were delivered", || {
        ready(provider.delivery_count() >= 40)
    })
    .await;
    sqlx::query(
        "update reprocessamento_execucao set interrupcao_pedida_em = now(), \
         interrupcao_pedida_por = 'console:ana@financeiro.example' where execucao_id = $1",
    )
    .bind(JOB)
    .execute(&db.pool)
    .await
    .unwrap();
    let stopped = finish(child, "the run asked to stop").await;
    let sent_when_stopped = provider.delivery_count();
    let partitions: Vec<(String, String)> = sqlx::query_as(
        "select execucao_id, estado from reprocessamento_execucao \
         where execucao_id like $1 || ':p%' order by execucao_id",
    )
    .bind(JOB)
    .fetch_all(&db.pool)
    .await
    .unwrap();

    let resumed = run_bin_within(&db.url, jobs.path(), &["run", JOB, "--workers", "2"]).await;

    assert_eq!(stopped.status.code(), Some(130), "{}", stderr(&stopped));
    assert!(
        stdout(&stopped).contains("asked by console:ana@financeiro.example"),
        "{}",
        stdout(&stopped)
    );
    assert!(
        sent_when_stopped < events.len(),
        "stopped before the end: {sent_when_stopped} sent"
    );
    assert!(
        partitions.iter().all(|(_, estado)| estado != "concluida"),
        "no partition ran on to its end: {partitions:?}"
    );
    assert_success(&resumed, "the rerun");
    let asked: Option<String> = sqlx::query_scalar(
        "select interrupcao_pedida_por from reprocessamento_execucao where execucao_id = $1",
    )
    .bind(JOB)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(asked, None, "the rerun cleared the ask");
    assert_eq!(
        execution_state(&db.pool, JOB).await.as_deref(),
        Some("concluida")
    );
    let deliveries = provider.deliveries();
    assert_eq!(deliveries.len(), events.len());
    assert!(
        deliveries.values().all(|n| *n == 1),
        "no key was sent twice"
    );
}
