//! `verify --from DAY --to DAY [--timezone TZ] [--job JOB] [--json] [--emit-jobs DIR]`: which days
//! are wrong, for people (a table, days with differences first, totals, what to do next) or as
//! JSON; exit 3 when it found differences. It only reads: no migration, no row written.

use std::fmt::Write as _;
use std::path::Path;

use chrono::NaiveDate;
use chrono_tz::Tz;

use super::{connect, Class, Cli, Failure, Outcome};
use crate::services::verify::{self, EmitSpec, Findings, Progress, Request};
use replay_ledger_core::config::{self, JobKind};
use replay_ledger_core::engine::applier::Policy;
use replay_ledger_core::shared::money;

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct VerifyArgs {
    pub from: NaiveDate,
    pub to: NaiveDate,
    pub timezone: Option<Tz>,
    pub job: Option<String>,
    pub json: bool,
    pub emit_jobs: Option<std::path::PathBuf>,
}

/// `YYYY-MM-DD`.
pub fn parse_day(text: &str) -> Result<NaiveDate, String> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map_err(|e| format!("{e}: a day is written YYYY-MM-DD"))
}

/// An IANA timezone name, e.g. America/Sao_Paulo.
pub fn parse_timezone(text: &str) -> Result<Tz, String> {
    text.parse::<Tz>()
        .map_err(|_| format!("unknown timezone {text:?}: an IANA name, e.g. America/Sao_Paulo"))
}

pub async fn verify(cli: &Cli, args: &VerifyArgs) -> Outcome {
    if args.from >= args.to {
        return Err(Failure::invalid(format_args!(
            "--from {} must be before --to {} (the range is [from, to))",
            args.from, args.to
        )));
    }
    let (policy, emit) = policy_of(&cli.jobs_dir, args.job.as_deref())?;
    let timezone = args.timezone.or(emit.as_ref().map(|e| e.timezone));
    let request = Request {
        from: args.from,
        to: args.to,
        timezone: timezone.unwrap_or(Tz::UTC),
        policy,
    };
    let pool = connect(cli, false).await?;
    let findings = verify::verify(&pool, &request, &mut Progress::shown()).await?;
    if args.json {
        println!("{}", serde_json::to_string(&findings)?);
    } else {
        print!("{}", table(&findings));
    }
    if let (Some(dir), false) = (&args.emit_jobs, findings.clean) {
        let spec = EmitSpec {
            timezone: request.timezone,
            ..emit.ok_or_else(|| {
                Failure::invalid("--emit-jobs needs a policy for the jobs: give --job, or add a `kind: live` job")
            })?
        };
        for (name, path) in verify::emit_jobs(dir, &findings, &spec)? {
            eprintln!("wrote job {name} to {}", path.display());
        }
    }
    match findings.clean {
        true => Ok(()),
        false => Err(Failure::said(Class::Differences)),
    }
}

/// The policy whose effects are checked, and what an emitted job carries: `--job`'s (a replay or
/// live job; a verify job's is the live job's, in its timezone), else the jobs dir's `kind: live`
/// job, else none.
fn policy_of(dir: &Path, job: Option<&str>) -> Result<(Option<Policy>, Option<EmitSpec>), Failure> {
    let job = match job {
        Some(name) => config::find_job(dir, name)?.1,
        None if !dir.exists() => return Ok((None, None)),
        None => match config::load_dir(dir)?
            .jobs
            .into_iter()
            .find(|j| matches!(j.kind, JobKind::Live(_)))
        {
            Some(live) => live,
            None => return Ok((None, None)),
        },
    };
    let (policy, batch_size) = match &job.kind {
        JobKind::Replay(r) => (Policy::from(r), r.batch_size),
        JobKind::Live(l) => (Policy::from(l), l.batch_size),
        // A verify job checks with the live policy, in its own timezone.
        JobKind::Verify(_) => {
            let (policy, spec) = policy_of(dir, None)?;
            let spec = spec.map(|s| EmitSpec {
                timezone: job.timezone,
                ..s
            });
            return Ok((policy, spec));
        }
        _ => {
            return Err(Failure::wrong_kind(
                &job,
                "replay, live or verify",
                "verify checks the effects of its policy",
            ))
        }
    };
    let spec = EmitSpec {
        policy: policy.clone(),
        batch_size,
        timezone: job.timezone,
    };
    Ok((Some(policy), Some(spec)))
}

/// The findings for people: days with differences first, then the clean ones, the totals, and
/// what to do next.
fn table(f: &Findings) -> String {
    let mut out = String::new();
    let differing: Vec<_> = f.differing().collect();
    let _ = writeln!(
        out,
        "verify {} .. {} ({}): {}",
        f.from,
        f.to,
        f.timezone,
        match differing.len() {
            0 => "clean".to_string(),
            n => format!("{n} day(s) with differences"),
        }
    );
    let _ = writeln!(
        out,
        "{:<10}  {:>9}  {:>8}  {:>6}  {:>7}  {:>16}  {:>15}  {:>7}",
        "day", "events", "orders", "wrong", "missing", "difference", "effects missing", "incerto"
    );
    let clean = f.days.iter().filter(|d| !d.counts.has_differences());
    for d in differing.iter().copied().chain(clean) {
        let _ = writeln!(
            out,
            "{}",
            row(&d.day.to_string(), &d.counts, f.effects_checked)
        );
    }
    let _ = writeln!(out, "{}", row("total", &f.totals, f.effects_checked));
    if !f.effects_checked {
        let _ = writeln!(
            out,
            "effects not checked: no policy (give --job, or add a `kind: live` job)"
        );
    }
    if f.totals.effects_uncertain > 0 {
        let _ = writeln!(
            out,
            "{} effect(s) incerto wait in the review queue: replay-ledger review list",
            f.totals.effects_uncertain
        );
    }
    set_aside(&mut out, f);
    if !differing.is_empty() {
        let _ = writeln!(
            out,
            "next: replay-ledger verify --from {} --to {} --emit-jobs jobs writes a gated replay job per day;\n      for each: replay-ledger run JOB --simulate, finance approves (replay-ledger approve JOB), replay-ledger run JOB;\n      then verify those days again.",
            f.from, f.to
        );
    }
    out
}

/// What is reported apart from the differences: never a job, never exit 3.
fn set_aside(out: &mut String, f: &Findings) {
    let t = &f.set_aside_totals;
    if t.waiting_for_live() > 0 {
        let _ = writeln!(
            out,
            "live consumer behind: {} order(s) and {} effect(s) ainda não aplicados pelo consumidor ao vivo;\n      not differences: verify again once it catches up (replay-ledger status shows its lag)",
            money::group_thousands(t.pending_live),
            money::group_thousands(t.effects_pending_live),
        );
    }
    if t.not_replayable() == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "{} order(s) a replay cannot fix ({} newer than the archive, {} with no archived event), no job emitted:",
        money::group_thousands(t.not_replayable()),
        money::group_thousands(t.orders_ahead_of_archive),
        money::group_thousands(t.orders_without_events),
    );
    for o in &f.not_replayable {
        let id = replay_ledger_core::shared::text::inert(&o.pedido_id);
        let _ = writeln!(out, "  {}  {id}  {}", o.day, o.describe());
    }
    if (f.not_replayable.len() as u64) < t.not_replayable() {
        let _ = writeln!(out, "  … the first {} listed", f.not_replayable.len());
    }
    let _ = writeln!(out, "what to do: {}", verify::apart::WHAT_TO_DO);
}

fn row(label: &str, c: &verify::Counts, effects_checked: bool) -> String {
    let effects = |n: u64| match effects_checked {
        true => money::group_thousands(n),
        false => "-".into(),
    };
    format!(
        "{label:<10}  {:>9}  {:>8}  {:>6}  {:>7}  {:>16}  {:>15}  {:>7}",
        money::group_thousands(c.events),
        money::group_thousands(c.orders),
        money::group_thousands(c.orders_wrong),
        money::group_thousands(c.orders_missing),
        money::brl_signed(c.difference_cents),
        effects(c.effects_missing),
        effects(c.effects_uncertain),
    )
}
