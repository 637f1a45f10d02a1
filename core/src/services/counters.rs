//! The counters of this process ([`Metrics`]): what its runs, sweeps and the live consumer did
//! since it started, and the heartbeat of its scheduler. Every part that works feeds them; they
//! depend on nothing that reads the database, so any part may — the live consumer feeds them and
//! `metrics` renders them, without either importing the other. Rendering (the Prometheus
//! exposition) is `metrics`'s.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::services::sweeper::SweepOutcome;
use crate::shared::summary::Summary;

/// How a scheduled run of a job ended: the `outcome` label of `replay_ledger_runs_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RunOutcome {
    /// The window was completed (a sweep pass ended).
    Finished,
    /// The execution was already finished; nothing to do.
    AlreadyFinished,
    /// Stopped between batches by shutdown; the next fire (or `run`) resumes it.
    Interrupted,
    /// Failed; retried at the next fire.
    Failed,
    /// Another process holds the job or the execution; this fire was skipped.
    LockedElsewhere,
}

impl RunOutcome {
    pub const ALL: [RunOutcome; 5] = [
        RunOutcome::Finished,
        RunOutcome::AlreadyFinished,
        RunOutcome::Interrupted,
        RunOutcome::Failed,
        RunOutcome::LockedElsewhere,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Finished => "finished",
            RunOutcome::AlreadyFinished => "already_finished",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::Failed => "failed",
            RunOutcome::LockedElsewhere => "locked_elsewhere",
        }
    }
}

/// The counters of this process, plus the scheduler's heartbeat.
#[derive(Debug, Default)]
pub struct Metrics {
    counters: Mutex<Counters>,
    /// Unix seconds of the last heartbeat; 0 = none yet.
    heartbeat: AtomicI64,
}

/// What the counters hold, per job (and per outcome or action).
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub events: BTreeMap<String, u64>,
    pub effects: BTreeMap<(String, crate::shared::summary::EffectOutcome), u64>,
    pub runs: BTreeMap<(String, &'static str), u64>,
    pub last_success: BTreeMap<String, DateTime<Utc>>,
    pub sweeper: BTreeMap<&'static str, u64>,
    /// Events of an older payload shape upcast on read, per job.
    pub upcast: BTreeMap<String, u64>,
    /// Rejected events per job and the domain's reason.
    pub rejected: BTreeMap<(String, String), u64>,
    /// The last run of each verify job.
    pub verify: BTreeMap<String, LastVerify>,
}

/// What a verify job's last run found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastVerify {
    pub at: DateTime<Utc>,
    pub orders_wrong: u64,
    pub orders_missing: u64,
    pub effects_missing: u64,
}

impl Metrics {
    pub fn new() -> Self {
        let metrics = Metrics::default();
        let mut c = metrics.lock();
        for action in ["retaken", "completed", "released", "uncertain", "resent"] {
            c.sweeper.insert(action, 0);
        }
        drop(c);
        metrics
    }

    fn lock(&self) -> MutexGuard<'_, Counters> {
        // A panic while holding it cannot leave the maps inconsistent: every update is one insert.
        self.counters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes a job's series exist at zero from the start, so `rate()` and `increase()` see the
    /// first run. `replay` jobs also get `replay_ledger_events_total`.
    pub fn register_job(&self, job: &str, replay: bool) {
        let mut c = self.lock();
        for outcome in RunOutcome::ALL {
            c.runs
                .entry((job.to_string(), outcome.as_str()))
                .or_default();
        }
        if replay {
            c.events.entry(job.to_string()).or_default();
            c.upcast.entry(job.to_string()).or_default();
        }
    }

    pub fn record_run(&self, job: &str, outcome: RunOutcome) {
        *self
            .lock()
            .runs
            .entry((job.to_string(), outcome.as_str()))
            .or_default() += 1;
    }

    pub fn record_success(&self, job: &str, at: DateTime<Utc>) {
        self.lock().last_success.insert(job.to_string(), at);
    }

    /// Adds what one run did: the difference between the execution's summary after and before it.
    pub fn add_work(&self, job: &str, delta: &Summary) {
        let mut c = self.lock();
        *c.events.entry(job.to_string()).or_default() += delta.events_read;
        *c.upcast.entry(job.to_string()).or_default() += delta.events_upcast;
        for (reason, n) in &delta.rejected_by_reason {
            *c.rejected
                .entry((job.to_string(), reason.clone()))
                .or_default() += n;
        }
        for (outcome, n) in &delta.effects {
            *c.effects.entry((job.to_string(), *outcome)).or_default() += n;
        }
    }

    /// Keeps what a verify job's run found.
    pub fn record_verify(
        &self,
        job: &str,
        at: DateTime<Utc>,
        orders_wrong: u64,
        orders_missing: u64,
        effects_missing: u64,
    ) {
        let last = LastVerify {
            at,
            orders_wrong,
            orders_missing,
            effects_missing,
        };
        self.lock().verify.insert(job.to_string(), last);
    }

    pub fn add_sweep(&self, outcome: &SweepOutcome) {
        let mut c = self.lock();
        for (action, n) in [
            ("retaken", outcome.retaken),
            ("completed", outcome.completed),
            ("released", outcome.released),
            ("uncertain", outcome.uncertain),
            ("resent", outcome.resent),
        ] {
            *c.sweeper.entry(action).or_default() += n;
        }
    }

    /// Records that the scheduler is alive.
    pub fn beat(&self, now: DateTime<Utc>) {
        self.heartbeat.store(now.timestamp(), Ordering::Relaxed);
    }

    /// How long ago the scheduler last beat; `None` before the first beat.
    pub fn heartbeat_age(&self, now: DateTime<Utc>) -> Option<Duration> {
        match self.heartbeat.load(Ordering::Relaxed) {
            0 => None,
            t => Some(Duration::from_secs((now.timestamp() - t).max(0) as u64)),
        }
    }

    /// What the counters hold now, for the exposition (`metrics`).
    pub fn counts(&self) -> Counters {
        self.lock().clone()
    }

    /// Unix seconds of the last heartbeat; 0 before the first.
    pub fn heartbeat_unix(&self) -> i64 {
        self.heartbeat.load(Ordering::Relaxed)
    }
}
