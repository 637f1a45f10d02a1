//! The README's least-privilege grants, run as written: an owner role migrates, a worker role with
//! exactly the README's grants runs every command with `--no-migrate` — which proves the list is
//! complete — and cannot create a table or write to the archive.

use std::path::Path;
use std::process::Output;

use sqlx::{ConnectOptions, Connection};
use testkit::sink::Behavior;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// The SQL block of the README's least-privilege section, split where the owner has migrated.
fn readme_grants() -> (String, String) {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let marker = "<!-- security.rs runs this block";
    let after = &readme[readme
        .find(marker)
        .expect("the README's grant block marker")..];
    let start = after
        .find("```sql\n")
        .expect("a sql block after the marker")
        + "```sql\n".len();
    let block = &after[start..start + after[start..].find("```").expect("its end")];
    let split = block
        .find("-- After `")
        .expect("the block says where the owner migrates");
    (block[..split].to_string(), block[split..].to_string())
}

/// Runs `sql` (statements separated by `;`) as the superuser, with the README's names replaced.
async fn run_sql(db: &TestDb, sql: &str, names: &Names) {
    let sql = sql
        .replace("replay_ledger_owner", &names.owner)
        .replace("replay_ledger_worker", &names.worker)
        .replace(
            "database marketplace",
            &format!("database \"{}\"", names.database),
        )
        .replace("password '…'", "password 'x'");
    for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let statement: String = statement
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        if statement.trim().is_empty() {
            continue;
        }
        sqlx::query(&statement)
            .execute(&db.pool)
            .await
            .unwrap_or_else(|e| panic!("README statement failed: {statement}\n{e}"));
    }
}

struct Names {
    owner: String,
    worker: String,
    database: String,
}

/// Drops the test's roles when the test ends (after its database is gone: declare it first).
pub(super) struct Roles(pub Vec<String>);

impl Drop for Roles {
    fn drop(&mut self) {
        let roles = std::mem::take(&mut self.0);
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let admin: sqlx::postgres::PgConnectOptions = server_url().parse().ok()?;
                let mut conn = admin.connect().await.ok()?;
                for role in roles {
                    let _ = sqlx::query(&format!("drop role if exists {role}"))
                        .execute(&mut conn)
                        .await;
                }
                conn.close().await.ok()
            })
        })
        .join();
    }
}

fn url_as(db: &TestDb, role: &str) -> String {
    let mut url = url::Url::parse(&db.url).expect("the test URL parses");
    url.set_username(role).expect("a user name");
    url.set_password(Some("x")).expect("a password");
    url.to_string()
}

/// `replay-ledger --no-migrate ARGS` as the worker, from `cwd`.
async fn as_worker(url: &str, jobs: &Path, cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = command(url, jobs);
    cmd.arg("--no-migrate").args(args).current_dir(cwd);
    let out = output_of(
        cmd,
        &format!("replay-ledger --no-migrate {}", args.join(" ")),
    )
    .await;
    assert!(
        !stderr(&out).contains("permission denied") && !stdout(&out).contains("permission denied"),
        "{args:?} lacks a grant:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    out
}

#[tokio::test]
async fn the_readmes_grants_are_enough_for_every_command_and_no_more() {
    let mut roles = Roles(Vec::new());
    let db = TestDb::unmigrated().await;
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let names = Names {
        owner: format!("rl_owner_{suffix}"),
        worker: format!("rl_worker_{suffix}"),
        database: sqlx::query_scalar("select current_database()")
            .fetch_one(&db.pool)
            .await
            .expect("database name"),
    };
    roles.0 = vec![names.worker.clone(), names.owner.clone()];
    let (owner_sql, worker_sql) = readme_grants();
    run_sql(&db, &owner_sql, &names).await;
    let scratch = tempfile::tempdir().expect("tempdir");
    let jobs_for_migrate = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let mut migrate = command(&url_as(&db, &names.owner), jobs_for_migrate.path());
    migrate.arg("migrate");
    assert_success(
        &output_of(migrate, "migrate as the owner").await,
        "migrate as the owner",
    );
    run_sql(&db, &worker_sql, &names).await;

    // The archive is the producer's: written here as the superuser.
    let events = paid_orders(30);
    let mut with_invalid = events.clone();
    with_invalid.push(replay_ledger::domain::Event {
        payload: serde_json::json!({"valorCentavos": "x"}),
        ..paid(31, "ped-31", 1, 0, 0.0)
    });
    insert(&db.pool, &with_invalid).await;
    let failing: std::collections::HashSet<String> = [key(&events[3]), key(&events[4])].into();
    let provider = sink(Behavior {
        fail_keys: failing,
        ..Default::default()
    })
    .await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\neffects:\n  notificar-vendedor: { mode: apply, on_failure: keep }\n",
    )
    .expect("write the live job");
    std::fs::write(
        jobs.path().join("finance-daily.yaml"),
        "name: finance-daily\nkind: report\nto: [financeiro@example.com]\n",
    )
    .expect("write the report job");
    std::fs::write(
        jobs.path().join("sweeper.yaml"),
        "name: sweeper\nkind: sweep\nstale_after: 5m\n",
    )
    .expect("write the sweep job");
    let worker = url_as(&db, &names.worker);
    let (w, cwd) = (worker.as_str(), scratch.path());

    for args in [
        vec!["run", JOB, "--simulate"],
        vec!["approve", JOB, "--by", "test"],
        vec!["run", JOB],
    ] {
        assert_success(
            &as_worker(w, jobs.path(), cwd, &args).await,
            &args.join(" "),
        );
    }
    assert_eq!(keys_in_state(&db.pool, "incerto").await.len(), 2);
    let (sent, not_sent) = (key(&events[3]), key(&events[4]));
    provider.set_behavior(Behavior::default());
    for args in [
        vec!["review", "list", "--json"],
        vec!["review", "resolve", sent.as_str(), "--sent"],
        vec!["review", "resolve", not_sent.as_str(), "--not-sent"],
        vec!["run", JOB, "--restart"],
        vec!["status", "--json"],
        vec!["report", JOB],
    ] {
        assert_success(
            &as_worker(w, jobs.path(), cwd, &args).await,
            &args.join(" "),
        );
    }
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await.len(),
        events.len()
    );

    // A reservation abandoned long ago, for the sweeper.
    sqlx::query("update efeito_aplicado set estado = 'reservado', atualizado_em = now() - interval '1 hour' where chave = $1")
        .bind(key(&events[0]))
        .execute(&db.pool)
        .await
        .expect("abandon a reservation");
    assert_success(&as_worker(w, jobs.path(), cwd, &["sweep"]).await, "sweep");
    assert_eq!(
        keys_in_state(&db.pool, "incerto").await,
        vec![key(&events[0])]
    );

    // The live consumer: follows the archive from its start, then stops on SIGTERM.
    let mut consume = command(w, jobs.path());
    consume
        .args(["--no-migrate", "consume", "--from-start"])
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = consume.spawn().expect("spawn consume");
    wait_until("the consumer has a checkpoint", || async {
        checkpoint(&db.pool, "ao-vivo").await.is_some()
    })
    .await;
    send_signal(&child, nix::sys::signal::Signal::SIGTERM);
    let stopped = finish(child, "consume as the worker").await;
    assert!(
        !stderr(&stopped).contains("permission denied"),
        "{}",
        stderr(&stopped)
    );
    assert_success(&stopped, "consume as the worker");

    // And no more: no DDL, no write to the archive.
    let options: sqlx::postgres::PgConnectOptions = worker.parse().expect("worker URL");
    let mut conn = options.connect().await.expect("connect as the worker");
    for forbidden in [
        "create table rl_intruder (a int)",
        "insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em) values (999, 'x', 't', 'p', 1, '{}', now())",
        "delete from comissao",
        "drop table efeito_aplicado",
    ] {
        let err = sqlx::query(forbidden)
            .execute(&mut conn)
            .await
            .expect_err(forbidden);
        assert!(err.to_string().contains("permission denied") || err.to_string().contains("must be owner"), "{forbidden}: {err}");
    }
    conn.close().await.ok();
    drop(db);
}
