//! The command line's shape: global options, subcommands and their flags (clap derive). The
//! `--help` text of every command is the doc comment here.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::console::ConsoleArgs;
use super::ops;
use super::users::UsersAction;
use replay_ledger_core::config;

/// Replays archived domain events on PostgreSQL to correct derived state (`comissao`) and to
/// perform the external side effects still missing, through an effects ledger
/// (`efeito_aplicado`) shared with the live consumer, so no message is sent twice where the
/// provider cannot deduplicate.
#[derive(Debug, Parser)]
#[command(name = "replay-ledger", version, about, long_about = None)]
pub struct Cli {
    /// PostgreSQL URL (e.g. postgres://user@host:5432/db?sslmode=require).
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub database_url: Option<String>,

    /// Directory holding the job files and effects.yaml.
    #[arg(long, default_value = "jobs", global = true)]
    pub jobs_dir: PathBuf,

    /// Do not apply migrations before working (for a role that does not own the schema).
    #[arg(long, global = true)]
    pub no_migrate: bool,

    /// Wait up to this long (e.g. 30s, 2m) for a database that is not reachable yet — not up,
    /// its name not resolving yet, starting up — saying what it waits for, before failing with
    /// the cause. A wrong password or a missing database fails at once. `serve` keeps trying on
    /// its own whatever this says.
    #[arg(
        long,
        env = "WAIT_FOR_DB",
        global = true,
        default_value = "0s",
        value_name = "DURATION",
        value_parser = replay_ledger_core::tables::db::parse_wait
    )]
    pub wait_for_db: std::time::Duration,

    #[command(subcommand)]
    pub command: Command,

    /// The settings no flag carries, read from the environment once at start
    /// ([`super::settings`]).
    #[arg(skip)]
    pub settings: super::settings::Settings,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply the database migrations (idempotent).
    Migrate {
        /// Apply nothing: list every migration this binary carries as applied, pending, failed
        /// or changed (applied from a different file).
        #[arg(long)]
        status: bool,
    },
    /// Validate every file of the jobs directory; prints `ok: N jobs` or one error per line.
    Check,
    /// Run a replay job to the end of its window, resuming from its checkpoint.
    ///
    /// A simulation writes only diff rows (reprocessamento_diff) for finance to review; the real
    /// run corrects comissao and performs only the effects the ledger does not hold yet. Stop it
    /// with Ctrl-C or SIGTERM: no new effect call starts, calls in flight are answered and
    /// recorded, the checkpoint stays after the last wholly settled batch, exit 130; run it again
    /// to resume (a second signal exits at once).
    Run {
        /// A job's `name`, or a path to its YAML file.
        job: String,
        /// Simulate, whatever the job says: diff rows only, no state write, no effect.
        #[arg(long)]
        simulate: bool,
        /// Start a new pass from the window's start (the ledger keeps effects from repeating).
        #[arg(long)]
        restart: bool,
        /// For a job with `partitions`: how many partitions this process runs at once. Other
        /// processes, on this machine or others, may run the same job at the same time.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
        workers: u16,
        /// Print the final summary as one JSON object (the same fields as `status --json`).
        #[arg(long)]
        json: bool,
    },
    /// One order's story: its events (the commission each implies, or why it was rejected), its
    /// comissao row against the value the archive implies, every correction by execution, every
    /// effect key with state, execution, attempts and reason. An unknown order exits 2.
    Explain {
        /// The order's `pedido_id`.
        pedido: String,
        /// Print the story as one JSON object.
        #[arg(long)]
        json: bool,
        /// Tell the story as of this moment: only the events that occurred by then (what
        /// `comissao` would have said then). RFC 3339, `YYYY-MM-DD` (the close of that day),
        /// `YYYY-MM-DD HH:MM` in `--timezone`, or `now`.
        #[arg(long, value_name = "TIME")]
        as_of: Option<String>,
        /// The timezone of an `--as-of` without an offset (default UTC).
        #[arg(long, value_name = "TZ", value_parser = super::verify::parse_timezone, requires = "as_of")]
        timezone: Option<chrono_tz::Tz>,
    },
    /// The commission table as the archive says it stood at a moment, computed from
    /// `evento_arquivado` with the rule and upcasters in force (each order's newest accepted
    /// `pedido.pago` that occurred by then); with `--known-at`, only what had been archived by
    /// then (what the system knew); with `--compare-to`, only the orders whose value differs
    /// between the two moments; with `--restated`, the restatements of a closed period. Reads
    /// only; streams its rows. Default output: a tab-separated table on standard output.
    Comissao {
        /// The moment: RFC 3339, `YYYY-MM-DD` (the close of that day), `YYYY-MM-DD HH:MM` in
        /// `--timezone`, or `now`.
        #[arg(long, value_name = "TIME")]
        as_of: String,
        /// A second moment ("what changed since"): list the orders whose value differs, as
        /// `antes` (the earlier moment) and `depois` (the later).
        #[arg(long, visible_alias = "since", value_name = "TIME")]
        compare_to: Option<String>,
        /// As known at this moment: only the events archived by then (`arquivado_em`), what the
        /// system knew — not an event that occurred before `--as-of` but was archived later.
        /// Default: everything archived.
        #[arg(long, value_name = "TIME")]
        known_at: Option<String>,
        /// The restatements of the period closed at `--as-of`: the orders whose value then, as
        /// known at `--known-at`, differs from what is known now (`antes`: as known then,
        /// `depois`: as known now).
        #[arg(long, requires = "known_at", conflicts_with = "compare_to")]
        restated: bool,
        /// The timezone of moments without an offset (default UTC).
        #[arg(long, value_name = "TZ", value_parser = super::verify::parse_timezone)]
        timezone: Option<chrono_tz::Tz>,
        /// Write the rows as CSV (the diff download's shape) to FILE.
        #[arg(long, value_name = "FILE", group = "output")]
        csv: Option<PathBuf>,
        /// Write the rows as an XLSX spreadsheet (amounts in reais) to FILE.
        #[arg(long, value_name = "FILE", group = "output")]
        xlsx: Option<PathBuf>,
        /// Print one JSON object: the moments, `rows`, `totals`.
        #[arg(long, group = "output")]
        json: bool,
    },
    /// One sweeper pass over stale reservations: retake those of idempotent types, move the
    /// others to `incerto`; then send the keys a review decision queued (`--not-sent`).
    Sweep {
        /// Age past which a reservation is abandoned (default: the sweep job's `stale_after`, else 5m).
        #[arg(long, value_parser = config::parse_stale_after)]
        stale_after: Option<std::time::Duration>,
    },
    /// Render an execution's report for finance (text, HTML, CSV of the diff) and e-mail it by
    /// SMTP (`SMTP_URL`, `REPORT_FROM`) exactly once, or write it as an `.eml` into `outbox/`.
    Report {
        /// An execution as `status` lists it: `<id>` (real run) or `<id>:simulacao`; a bare id
        /// with no real run means its simulation.
        execution: String,
        /// Write the `.eml` to this file instead of sending it.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The job whose recipients get it: a report job, or a replay job with `report_to`
        /// (default: the execution's job when it has `report_to`, else the only report job).
        #[arg(long)]
        job: Option<String>,
    },
    /// Approve the finished simulation of a replay job, so that its real run may start
    /// (`require_approved_simulation: true`). The approval binds what the real run will do: the
    /// job's definition (window, event types, each effect's mode, on_failure and provider,
    /// on_invalid_event), the commission rule's version, the window's events and the diff's
    /// commissions. Who approved is the database role you are connected as.
    Approve {
        /// A replay job's `name`, or a path to its YAML file.
        job: String,
        /// A note kept with the approval (at most 500 characters, plain text).
        #[arg(long)]
        note: Option<String>,
        /// Deprecated: kept as a note, never as who approved.
        #[arg(long, hide = true)]
        by: Option<String>,
    },
    /// The approvals recorded: job, execution, simulation pass, totals, what they bind, who
    /// approved, the note, when; newest first.
    Approvals {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Grant each database role exactly its duty, as the owner that ran `migrate`: the worker
    /// runs, sweeps, consumes, serves and reports; the approver approves; the reviewer resolves
    /// review items; both read. Every privilege a role had on replay-ledger's tables is revoked
    /// first. The roles must exist.
    Grants {
        /// The role of `run`, `serve`, `consume`, `sweep` and `report`.
        #[arg(long)]
        worker: String,
        /// The role that approves simulations (`approve`).
        #[arg(long)]
        approver: Option<String>,
        /// The role that resolves review items (`review resolve`).
        #[arg(long)]
        reviewer: Option<String>,
        /// The web console's role (`console`, `serve --console-database-url`): reads, and
        /// records approvals and review decisions only with their audit row.
        #[arg(long)]
        console: Option<String>,
        /// Print the SQL (one transaction) for a DBA to run as the owner, instead of running it.
        #[arg(long)]
        print: bool,
    },
    /// The manual-review queue of `incerto` effects (outcome unknown; never resent automatically).
    Review {
        #[command(subcommand)]
        action: ReviewAction,
    },
    /// Executions (and partitions), their checkpoints and progress, the scheduled jobs with their
    /// next fire and last run, and the size of the review queue.
    Status {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// The scheduler daemon: fires every job of the jobs directory that has a `schedule` (one
    /// process at a time per job, across machines), catches up a missed nightly run on start, and
    /// serves Prometheus `/metrics` and `/healthz`. Stops cleanly on SIGTERM/SIGINT (running jobs
    /// finish their batch) and exits 0.
    Serve {
        /// Where `/metrics` and `/healthz` listen.
        #[arg(long, env = "METRICS_ADDR", default_value = "127.0.0.1:9187")]
        metrics_addr: std::net::SocketAddr,
        /// HTTP connections served at once on the metrics address; more are closed at once. Keep
        /// it well under the open-files limit (LimitNOFILE).
        #[arg(long, env = "METRICS_MAX_CONNECTIONS", default_value_t = 256)]
        metrics_max_connections: usize,
        /// Also serve the web console here (as `replay-ledger console` does).
        #[arg(long, env = "CONSOLE_ADDR")]
        console_addr: Option<std::net::SocketAddr>,
        /// The console's database URL (a role granted `--console`); default: DATABASE_URL.
        #[arg(
            long,
            env = "CONSOLE_DATABASE_URL",
            hide_env_values = true,
            requires = "console_addr"
        )]
        console_database_url: Option<String>,
        #[command(flatten)]
        web: ConsoleArgs,
    },
    /// The web console: executions and their diffs, approvals (finance), the review queue
    /// (operators), the audit trail. Several instances may run: sessions live in PostgreSQL.
    /// Stops on SIGTERM/SIGINT.
    Console {
        /// Where it listens.
        #[arg(long, env = "CONSOLE_ADDR", default_value = "127.0.0.1:9188")]
        addr: std::net::SocketAddr,
        #[command(flatten)]
        web: ConsoleArgs,
    },
    /// The web console's accounts (argon2id passwords), as the schema's owner.
    Users {
        #[command(subcommand)]
        action: UsersAction,
    },
    /// The live consumer: follow `evento_arquivado` as it grows, through the same applier as a
    /// replay, with execution id `ao-vivo` and the policy of a `kind: live` job. Applies each
    /// event once its transaction commits, whatever else is open on the server; out-of-order
    /// commits never make it skip one. Serves `/metrics` (with its lag) and `/healthz`. Runs
    /// until SIGINT/SIGTERM.
    Consume {
        /// The `kind: live` job (default: the only one in the jobs dir).
        job: Option<String>,
        /// Without a checkpoint, start at the beginning of the archive instead of at "now".
        #[arg(long)]
        from_start: bool,
        /// Where `/metrics` and `/healthz` listen (give `serve` and `consume` on one host
        /// different ports).
        #[arg(long, env = "METRICS_ADDR", default_value = "127.0.0.1:9187")]
        metrics_addr: std::net::SocketAddr,
        /// HTTP connections served at once on the metrics address; more are closed at once. Keep
        /// it well under the open-files limit (LimitNOFILE).
        #[arg(long, env = "METRICS_MAX_CONNECTIONS", default_value_t = 256)]
        metrics_max_connections: usize,
    },
    /// Blue-green rebuild of comissao: builds comissao_nova from the whole archive with the rule
    /// and upcasters in force (resumable), follows the live writers, compares by count and
    /// checksum and prints the fingerprint of the differences; once that fingerprint is approved
    /// (`--approve`), the next `rebuild` swaps the tables in one short transaction. The previous
    /// table is kept as comissao_anterior until `--drop-previous`. Run it as the schema's owner.
    Rebuild {
        /// Approve the comparison shown, by its fingerprint (the whole 'sha256:…' the comparison prints after --approve); recorded as the
        /// database role you are connected as.
        #[arg(long, value_name = "FINGERPRINT", conflicts_with_all = ["rollback", "drop_previous", "abandon", "diff"])]
        approve: Option<String>,
        /// A note kept with the approval (at most 500 characters, plain text).
        #[arg(long, requires = "approve")]
        note: Option<String>,
        /// Swap the previous table back in (writes made since the swap are carried over).
        #[arg(long, conflicts_with_all = ["drop_previous", "abandon", "diff"])]
        rollback: bool,
        /// Drop the table the swap (comissao_anterior) or the rollback (comissao_nova) kept.
        #[arg(long, conflicts_with_all = ["abandon", "diff"])]
        drop_previous: bool,
        /// Give the open rebuild up before its swap: comissao_nova is dropped.
        #[arg(long, conflicts_with = "diff")]
        abandon: bool,
        /// Write the orders that differ to FILE (.csv or .xlsx), as the diff finance reads.
        #[arg(long, value_name = "FILE")]
        diff: Option<PathBuf>,
        /// pedido.pago events per chunk (one transaction each; default 20000).
        #[arg(long)]
        chunk: Option<u32>,
    },
    /// Reconcile: which days of `[from, to)` (in the timezone) hold an order whose `comissao`
    /// differs from what the archive implies, or an event whose effect the ledger lacks. Per day:
    /// events, orders (by the day of their newest `pedido.pago`), orders wrong, orders missing,
    /// the net difference in cents (expected minus current), effects missing and `incerto`.
    /// Reads only. Exit 0 clean, 3 differences found, 2 invalid input, 1 failure.
    Verify {
        /// The first day, YYYY-MM-DD.
        #[arg(long, value_name = "DAY", value_parser = super::verify::parse_day)]
        from: chrono::NaiveDate,
        /// The day after the last, YYYY-MM-DD.
        #[arg(long, value_name = "DAY", value_parser = super::verify::parse_day)]
        to: chrono::NaiveDate,
        /// The days' timezone (default: the job's, else UTC).
        #[arg(long, value_name = "TZ", value_parser = super::verify::parse_timezone)]
        timezone: Option<chrono_tz::Tz>,
        /// The replay or live job whose policy says which effects to check, and which emitted
        /// jobs carry (default: the `kind: live` job; none: effects are not checked).
        #[arg(long)]
        job: Option<String>,
        /// Print the findings as one JSON object.
        #[arg(long)]
        json: bool,
        /// Write one gated replay job per day with differences into DIR (accepted by `check`).
        #[arg(long, value_name = "DIR")]
        emit_jobs: Option<PathBuf>,
    },
    /// The whole story end to end: an archive of 2026-10-14 with the commission bug, a
    /// simulation, the real run, and a second run that sends nothing. Uses a scratch database on
    /// DATABASE_URL's server when set, else a throwaway cluster from the local PostgreSQL binaries.
    /// Runs the demo's own program, `replay-ledger-demo`, built beside this one from the
    /// repository's workspace (`cargo run --release -p replay-ledger-demo` runs it directly).
    Demo {
        /// Events to generate.
        #[arg(long, default_value_t = 10_000)]
        events: u32,
        /// Then keep the scratch database and serve the web console over it on loopback, with a
        /// finance and an operator account printed, until Ctrl-C.
        #[arg(long)]
        console: bool,
        /// Where `--console` listens (a busy port falls back to a free one).
        #[arg(long, default_value = "127.0.0.1:9188")]
        console_addr: std::net::SocketAddr,
    },
    /// Print the shell completion script for SHELL on stdout (from this command line's own
    /// definition; touches no database). E.g. `replay-ledger completions bash >
    /// /etc/bash_completion.d/replay-ledger`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page, in roff, on stdout: the global options and every command (from this
    /// command line's own definition; touches no database). E.g. `replay-ledger man | man -l -`.
    Man {
        /// Write instead one page per command into DIR (`replay-ledger.1`, `replay-ledger-run.1`,
        /// `replay-ledger-review-resolve.1`, …), each with that command's options, for
        /// /usr/local/share/man/man1.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReviewAction {
    /// The `incerto` effects, oldest first: key, type, execution, why, age, attempts, last error.
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Only effects of this type.
        #[arg(long = "type", value_name = "TYPE")]
        effect_type: Option<String>,
        /// Only effects of this execution (`execucao_id`).
        #[arg(long)]
        execution: Option<String>,
        /// Only effects older than this (real age: since the first attempt), e.g. 2h or 30m.
        #[arg(long, value_parser = ops::parse_age)]
        older_than: Option<std::time::Duration>,
    },
    /// Record what a human established about one `incerto` effect: `--sent` or `--not-sent`.
    #[command(group = clap::ArgGroup::new("decision").required(true))]
    Resolve {
        /// The ledger key, `<evento_id>:<tipo_efeito>`.
        key: String,
        /// It went out: the effect becomes `concluido`.
        #[arg(long, group = "decision")]
        sent: bool,
        /// It did not go out: the key is queued, and the next `sweep` performs it, once.
        #[arg(long, group = "decision")]
        not_sent: bool,
        /// A note kept with the decision (at most 500 characters, no control characters). Who
        /// resolved it is recorded as the database role you connect as.
        #[arg(long, conflicts_with = "by")]
        note: Option<String>,
        /// Deprecated: kept as the note; who resolved it is the database role.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
}
