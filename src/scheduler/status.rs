//! The jobs of a jobs directory as `status` shows them: schedule, next fire time in the job's
//! timezone, and the job's last run (the newest row of `reprocessamento_execucao` of that job).

use chrono::{DateTime, FixedOffset, Utc};
use serde::Serialize;

use crate::config::Job;
use crate::execution::Execution;

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

/// The newest execution of a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastRun {
    pub execution: String,
    pub state: crate::execution::State,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
}

/// Every job, in the order of `jobs`; `executions` newest first (as [`crate::execution::list`]
/// returns them).
pub fn job_statuses(jobs: &[Job], executions: &[Execution], now: DateTime<Utc>) -> Vec<JobStatus> {
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
                    execution: e.key.clone(),
                    state: e.state,
                    started_at: e.started_at,
                    finished_at: e.finished_at,
                    error: e.error.clone(),
                }),
        })
        .collect()
}

/// The human-readable lines of `status`.
pub fn render(statuses: &[JobStatus]) -> String {
    let mut out = String::new();
    for s in statuses {
        let when = match (&s.schedule, &s.next_fire) {
            (Some(schedule), Some(next)) => format!(
                "\"{schedule}\" {}  next {}",
                s.timezone,
                next.format("%Y-%m-%d %H:%M:%S %:z")
            ),
            (Some(schedule), None) => format!("\"{schedule}\" {}  next -", s.timezone),
            (None, _) => "on demand".to_string(),
        };
        let last = match &s.last_run {
            Some(r) => format!(
                "last run {} {} (started {})",
                r.execution,
                r.state,
                r.started_at.format("%Y-%m-%d %H:%M:%S UTC")
            ),
            None if s.kind == "replay" => "no run recorded".to_string(),
            // Sweeps leave no execution row; their passes show in the log and the metrics.
            None => String::new(),
        };
        out.push_str(&format!("{:<28} {:<7} {when}  {last}\n", s.name, s.kind));
    }
    out
}
