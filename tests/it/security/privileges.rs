//! The book's least-privilege section (`docs/src/security.md`), run as written: a superuser creates the roles, an owner
//! that is **not** a superuser migrates and runs `grants` (or `grants --print`'s SQL), and each
//! role then does its duty with `--no-migrate` — which proves the lists are complete — and
//! nothing more (`duties.rs` proves the refusals).

use std::path::Path;
use std::process::Output;

use sqlx::{ConnectOptions, Connection};
use testkit::sink::Behavior;

use crate::helpers::*;

pub(super) const JOB: &str = "replay-2026-10-14-v2";

/// The text of the block that follows `marker` in the book's security chapter (the least
/// privileges section), between its fences.
fn readme_block(marker: &str, fence: &str) -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/security.md"))
            .expect("docs/src/security.md");
    let after = &readme[readme
        .find(marker)
        .unwrap_or_else(|| panic!("the README's marker {marker:?}"))..];
    let start = after
        .find(fence)
        .unwrap_or_else(|| panic!("a {fence} block after {marker:?}"))
        + fence.len();
    after[start..start + after[start..].find("```").expect("its end")].to_string()
}

/// The roles of one test, named uniquely (the README's names replaced).
pub(super) struct Names {
    pub owner: String,
    pub worker: String,
    pub approver: String,
    pub reviewer: String,
    /// The web console's role.
    pub console: String,
    /// Logins of people, members of the approver and the reviewer roles.
    pub ana: String,
    pub bruno: String,
    pub database: String,
}

impl Names {
    fn new(database: String) -> Names {
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..12];
        let name = |duty: &str| format!("rl_{duty}_{suffix}");
        Names {
            owner: name("owner"),
            worker: name("worker"),
            approver: name("approver"),
            reviewer: name("reviewer"),
            console: name("console"),
            ana: name("ana"),
            bruno: name("bruno"),
            database,
        }
    }

    fn all(&self) -> Vec<String> {
        // Members before the roles they belong to, for `drop role`.
        [
            &self.ana,
            &self.bruno,
            &self.worker,
            &self.approver,
            &self.reviewer,
            &self.console,
            &self.owner,
        ]
        .map(String::clone)
        .to_vec()
    }

    /// `text` with the README's names replaced by this test's.
    fn replace(&self, text: &str) -> String {
        text.replace("replay_ledger_owner", &self.owner)
            .replace("replay_ledger_worker", &self.worker)
            .replace("replay_ledger_approver", &self.approver)
            .replace("replay_ledger_reviewer", &self.reviewer)
            .replace("replay_ledger_console", &self.console)
            .replace("role ana ", &format!("role {} ", self.ana))
            .replace("role bruno ", &format!("role {} ", self.bruno))
            .replace(
                "database marketplace",
                &format!("database \"{}\"", self.database),
            )
            .replace("password '…'", "password 'x'")
    }
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

/// How the owner grants: the README's commands as written, or `grants --print`'s SQL.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Grant {
    AsWritten,
    Printed,
}

/// A database whose roles are set up by the README: the superuser's block, then the owner's
/// commands. Fields drop in order: the database before its roles.
pub(super) struct Setup {
    pub db: TestDb,
    _roles: Roles,
    pub names: Names,
    pub jobs: tempfile::TempDir,
    pub cwd: tempfile::TempDir,
}

impl Setup {
    pub async fn new(grant: Grant, provider_url: &str, spec: &JobSpec) -> Setup {
        let db = TestDb::unmigrated().await;
        let names = Names::new(
            sqlx::query_scalar("select current_database()")
                .fetch_one(&db.pool)
                .await
                .expect("database name"),
        );
        let roles = Roles(names.all());
        run_sql_as_superuser(&db, &names.replace(&readme_block(SQL_MARKER, "```sql\n"))).await;
        let setup = Setup {
            db,
            _roles: roles,
            names,
            jobs: jobs_dir(provider_url, spec),
            cwd: tempfile::tempdir().expect("tempdir"),
        };
        let commands = readme_commands(&setup.names);
        let owner = setup.url(&setup.names.owner);
        for args in &commands {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if grant == Grant::Printed && args[0] == "grants" {
                setup.run_printed_grants(&args).await;
                continue;
            }
            assert_success(
                &setup.as_role(&owner, &args, false).await,
                &format!("{} as the owner", args.join(" ")),
            );
        }
        setup
    }

    /// `grants … --print` as the owner, and its output run by the owner, as a DBA would.
    async fn run_printed_grants(&self, args: &[&str]) {
        let owner = self.url(&self.names.owner);
        let mut printing = args.to_vec();
        printing.push("--print");
        let printed = self.as_role(&owner, &printing, false).await;
        assert_success(&printed, "grants --print");
        let mut conn = self.connect(&self.names.owner).await;
        sqlx::raw_sql(&stdout(&printed))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "grants --print's output failed as the owner: {e}\n{}",
                    stdout(&printed)
                )
            });
        conn.close().await.ok();
    }

    /// The test database's URL, logging in as `role`.
    pub fn url(&self, role: &str) -> String {
        let mut url = url::Url::parse(&self.db.url).expect("the test URL parses");
        url.set_username(role).expect("a user name");
        url.set_password(Some("x")).expect("a password");
        url.to_string()
    }

    pub async fn connect(&self, role: &str) -> sqlx::PgConnection {
        let options: sqlx::postgres::PgConnectOptions =
            self.url(role).parse().expect("the role's URL");
        options.connect().await.expect("connect as the role")
    }

    /// `replay-ledger [--no-migrate] ARGS` at `url`, from the scratch directory.
    pub async fn as_role(&self, url: &str, args: &[&str], no_migrate: bool) -> Output {
        let mut cmd = command(url, self.jobs.path());
        if no_migrate {
            cmd.arg("--no-migrate");
        }
        cmd.args(args).current_dir(self.cwd.path());
        output_of(cmd, &format!("replay-ledger {}", args.join(" "))).await
    }

    /// As `role` with `--no-migrate`, asserting that no grant was missing and that it succeeded.
    pub async fn succeeds_as(&self, role: &str, args: &[&str]) -> Output {
        let out = self.as_role(&self.url(role), args, true).await;
        assert!(
            !stderr(&out).contains("permission denied") && !stderr(&out).contains("may not"),
            "{args:?} as {role} lacks a grant:\n{}\n{}",
            stdout(&out),
            stderr(&out)
        );
        assert_success(&out, &format!("{} as {role}", args.join(" ")));
        out
    }
}

const SQL_MARKER: &str = "<!-- privileges.rs runs this block";
const COMMANDS_MARKER: &str = "<!-- privileges.rs runs these commands";

/// The `replay-ledger` command lines of the README's owner block, with this test's names.
fn readme_commands(names: &Names) -> Vec<Vec<String>> {
    let block = readme_block(COMMANDS_MARKER, "```sh\n");
    let commands: Vec<Vec<String>> = block
        .lines()
        .filter_map(|l| l.trim().strip_prefix("replay-ledger "))
        .map(|l| {
            names
                .replace(l)
                .split_whitespace()
                .map(String::from)
                .collect()
        })
        .collect();
    assert!(
        commands.iter().any(|c| c[0] == "migrate") && commands.iter().any(|c| c[0] == "grants"),
        "the README's owner block migrates and grants: {block}"
    );
    commands
}

/// Runs `sql` (statements separated by `;`, comment lines dropped) as the superuser.
async fn run_sql_as_superuser(db: &TestDb, sql: &str) {
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

/// Every privilege the roles hold on the database's tables, columns, sequences and functions.
pub(super) async fn privileges(db: &TestDb, roles: &[String]) -> Vec<(String, String, String)> {
    sqlx::query_as(
        r#"
        select r.rolname::text, c.relname::text, a.privilege_type
        from pg_class c cross join lateral aclexplode(c.relacl) a
        join pg_roles r on r.oid = a.grantee where r.rolname = any($1)
        union all
        select r.rolname::text, c.relname || '.' || t.attname, a.privilege_type
        from pg_attribute t join pg_class c on c.oid = t.attrelid
        cross join lateral aclexplode(t.attacl) a
        join pg_roles r on r.oid = a.grantee where r.rolname = any($1)
        union all
        select r.rolname::text, p.proname::text, a.privilege_type
        from pg_proc p cross join lateral aclexplode(p.proacl) a
        join pg_roles r on r.oid = a.grantee where r.rolname = any($1)
        order by 1, 2, 3
        "#,
    )
    .bind(roles)
    .fetch_all(&db.pool)
    .await
    .expect("read the privileges")
}

#[tokio::test]
async fn the_readmes_roles_are_enough_for_every_duty() {
    let events = paid_orders(30);
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
    let s = Setup::new(Grant::AsWritten, &provider.url(), &spec).await;
    let (db, n, jobs) = (&s.db, &s.names, s.jobs.path());
    // The archive is the producer's: written here as the superuser.
    let mut with_invalid = events.clone();
    with_invalid.push(replay_ledger_core::domain::Event {
        payload: serde_json::json!({"valorCentavos": "x"}),
        ..paid(31, "ped-31", 1, 0, 0.0)
    });
    insert(&db.pool, &with_invalid).await;
    for (file, yaml) in [
        ("live.yaml", "name: live\nkind: live\neffects:\n  notificar-vendedor: { mode: apply, on_failure: keep }\n".to_string()),
        ("finance-daily.yaml", "name: finance-daily\nkind: report\nto: [financeiro@example.com]\n".into()),
        ("sweeper.yaml", "name: sweeper\nkind: sweep\nstale_after: 5m\n".into()),
        ("partitioned.yaml", std::fs::read_to_string(jobs.join(format!("{JOB}.yaml"))).unwrap()
            .replace(&format!("name: {JOB}"), "name: partitioned") + "partitions: 3\n"),
    ] {
        std::fs::write(jobs.join(file), yaml).expect("write a job");
    }

    s.succeeds_as(&n.worker, &["run", JOB, "--simulate"]).await;
    s.succeeds_as(&n.worker, &["run", JOB]).await;
    assert_eq!(keys_in_state(&db.pool, "incerto").await.len(), 2);
    let (sent, not_sent) = (key(&events[3]), key(&events[4]));
    provider.set_behavior(Behavior::default());
    s.succeeds_as(&n.bruno, &["review", "list", "--json"]).await;
    s.succeeds_as(&n.bruno, &["review", "resolve", &sent, "--sent"])
        .await;
    s.succeeds_as(&n.reviewer, &["review", "resolve", &not_sent, "--not-sent"])
        .await;
    for args in [
        vec!["run", JOB, "--restart"],
        vec!["run", "partitioned"],
        vec!["status", "--json"],
        vec!["review", "list", "--json"],
        vec!["report", JOB],
    ] {
        s.succeeds_as(&n.worker, &args).await;
    }
    s.succeeds_as(&n.ana, &["status", "--json"]).await;
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await.len(),
        events.len()
    );
    for execution in [
        JOB,
        "partitioned",
        "partitioned:p0",
        "partitioned:p1",
        "partitioned:p2",
    ] {
        assert_eq!(
            execution_state(&db.pool, execution).await.as_deref(),
            Some("concluida"),
            "{execution}, run by the worker, is concluida"
        );
    }

    // A reservation abandoned long ago, for the sweeper.
    sqlx::query("update efeito_aplicado set estado = 'reservado', atualizado_em = now() - interval '1 hour' where chave = $1")
        .bind(key(&events[0]))
        .execute(&db.pool)
        .await
        .expect("abandon a reservation");
    s.succeeds_as(&n.worker, &["sweep"]).await;
    assert_eq!(
        keys_in_state(&db.pool, "incerto").await,
        vec![key(&events[0])]
    );

    // The live consumer: follows the archive from its start, then stops on SIGTERM.
    let mut consume = command(&s.url(&n.worker), jobs);
    consume
        .args(["--no-migrate", "consume", "--from-start"])
        .current_dir(s.cwd.path())
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
}

#[tokio::test]
async fn grants_print_run_by_the_owner_gives_exactly_what_grants_gives() {
    let s = Setup::new(Grant::Printed, "http://127.0.0.1:9/", &JobSpec::default()).await;
    let roles = s.names.all();
    let printed = privileges(&s.db, &roles).await;
    assert!(
        printed
            .iter()
            .any(|(r, t, p)| r == &s.names.worker && t == "efeito_aplicado" && p == "DELETE"),
        "the printed SQL granted: {printed:?}"
    );
    let is_superuser: bool = sqlx::query_scalar("select rolsuper from pg_roles where rolname = $1")
        .bind(&s.names.owner)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert!(!is_superuser, "the owner is not a superuser");

    let args = readme_commands(&s.names)
        .into_iter()
        .find(|c| c[0] == "grants")
        .unwrap();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let owner = s.url(&s.names.owner);
    assert_success(
        &s.as_role(&owner, &args, false).await,
        "grants as the owner",
    );

    assert_eq!(privileges(&s.db, &roles).await, printed);
}
