//! The jobs of a jobs directory as `status` shows them: schedule, next fire time in the job's
//! timezone, and the job's last run (the newest row of `reprocessamento_execucao` of that job).

use chrono::{DateTime, FixedOffset, Utc};
use serde::Serialize;

use super::runs::JobRun;
use replay_ledger_core::config::Job;
use replay_ledger_core::tables::execution::Execution;

/// One job of the jobs directory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobStatus {
    pub name: String,
    pub kind: &'static str,
    /// `None`: on demand only.
    pub schedule: Option<String>,
    pub timezone: String,
    /// In the job's timezone.
    pub next_fire: Option<DateTime<FixedOffset>>,
    pub last_run: Option<LastRun>,
}

/// A job's last run: its newest execution, or for a sweep or report job its last fire.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastRun {
    /// `None` for a sweep or report job (they leave no execution).
    pub execution: Option<String>,
    pub state: replay_ledger_core::tables::execution::State,
    /// How the table names the state (see `State::label_in`).
    #[serde(skip)]
    pub state_label: &'static str,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
    /// What a sweep, report, verify or rebuild job's run found, as data: the console says it in
    /// Portuguese (`error` is the English line `status` prints).
    #[serde(skip)]
    pub detail: Option<super::runs::RunDetail>,
}

/// Every job, in the order of `jobs`; `executions` newest first (as [`replay_ledger_core::tables::execution::list`]
/// returns them), `runs` the last fires of sweep and report jobs.
pub fn job_statuses(
    jobs: &[Job],
    executions: &[Execution],
    runs: &[JobRun],
    now: DateTime<Utc>,
) -> Vec<JobStatus> {
    jobs.iter()
        .map(|job| JobStatus {
            name: job.name.clone(),
            kind: job.kind.label(),
            schedule: job.schedule.clone(),
            timezone: job.timezone.name().to_string(),
            next_fire: job
                .schedule
                .as_deref()
                .and_then(|s| super::timing::parse(s).ok())
                .and_then(|cron| super::timing::next_fire(&cron, job.timezone, now))
                .map(|t| t.fixed_offset()),
            last_run: executions
                .iter()
                .filter(|e| e.job == job.name)
                .max_by_key(|e| e.started_at)
                .map(|e| LastRun {
                    execution: Some(e.key.clone()),
                    state: e.state,
                    state_label: e.state.label_in(e.mode),
                    started_at: e.started_at,
                    finished_at: e.finished_at,
                    error: e.error.clone(),
                    detail: None,
                })
                .or_else(|| {
                    runs.iter().find(|r| r.job == job.name).map(|r| LastRun {
                        execution: None,
                        state: r.state,
                        state_label: r.state.as_db(),
                        started_at: r.started_at,
                        finished_at: Some(r.finished_at),
                        error: r.detail.clone(),
                        detail: r.data.clone(),
                    })
                }),
        })
        .collect()
}

/// The human-readable table of `status`: a header row, then one row per job.
pub fn render(statuses: &[JobStatus]) -> String {
    let mut out = format!(
        "{:<28} {:<7} {:<34} {:<26} LAST RUN\n",
        "JOB", "KIND", "SCHEDULE", "NEXT FIRE"
    );
    for s in statuses {
        let schedule = match &s.schedule {
            Some(schedule) => format!("\"{schedule}\" {}", s.timezone),
            None => "on demand".to_string(),
        };
        let next = match &s.next_fire {
            Some(next) => next.format("%Y-%m-%d %H:%M:%S %:z").to_string(),
            None => "-".to_string(),
        };
        let last = s
            .last_run
            .as_ref()
            .map_or_else(|| "no run recorded".to_string(), last_run);
        out.push_str(&format!(
            "{:<28} {:<7} {schedule:<34} {next:<26} {}\n",
            s.name,
            s.kind,
            replay_ledger_core::shared::text::inert(&last)
        ));
    }
    out
}

/// "EXECUTION STATE, started …, took …" or, for a sweep or report job, "STATE …: detail".
fn last_run(r: &LastRun) -> String {
    let took = r
        .finished_at
        .map(|f| (f - r.started_at).to_std().unwrap_or_default())
        .map(|d| format!(", took {}", humantime::format_duration(round_secs(d))))
        .unwrap_or_default();
    let execution = r
        .execution
        .as_deref()
        .map(|e| format!("{e} "))
        .unwrap_or_default();
    let detail = match (&r.execution, &r.error) {
        (None, Some(detail)) => format!(": {detail}"),
        _ => String::new(),
    };
    format!(
        "{execution}{} (started {}{took}){detail}",
        r.state_label,
        r.started_at.format("%Y-%m-%d %H:%M:%S UTC")
    )
}

/// A duration to the second, for people.
fn round_secs(d: std::time::Duration) -> std::time::Duration {
    std::time::Duration::from_secs(d.as_secs())
}
