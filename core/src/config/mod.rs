//! Job definitions: `jobs/*.yaml` (one job each) and `jobs/effects.yaml` (the effect types shared
//! by every job and the sweeper), parsed with serde_norway into raw structs that refuse unknown keys,
//! then checked into the typed values below. Every error names file, line and column.
//!
//! The checks run *inside* deserialization (each value's type checks itself in its visitor), which
//! is what lets serde_norway attach the position of the offending value to the error:
//!
//! - `raw`: one raw struct per job `kind`; `policy`: a job's `effects:`; `effects`: the catalog;
//! - `scalar`: checked scalars (names, cron, timezone, durations, URLs, addresses, header values);
//! - `de`: the visitor helpers; `interp`: `${VAR}` interpolation of one value at a time;
//! - `context`: what a check needs beyond its value (the catalog, the names taken), per load;
//! - `load`: files and directories; `limits`: size and nesting bounds checked before parsing;
//! - `cleartext`: credentials that would go out in clear (webhooks, `DATABASE_URL`);
//! - `error`: [`ConfigError`] / [`ConfigErrors`].

mod cleartext;
mod context;
mod de;
mod effects;
mod error;
mod interp;
mod limits;
mod load;
mod policy;
mod raw;
mod scalar;
#[cfg(test)]
mod tests;

pub use cleartext::{cleartext_warnings, database_warning, is_loopback_host};
pub use effects::DEFAULT_RETRY;
pub use error::{ConfigError, ConfigErrors};
pub use load::{find_job, job_in, load_dir, load_effects, load_job, parse_job_text, LoadedConfig};
pub use scalar::{
    parse_stale_after, MAX_CONCURRENCY, MAX_DEDUP_WINDOW, MAX_RATE, MAX_RETRY_ATTEMPTS,
    MAX_RETRY_BACKOFF, MAX_RETRY_MAX_BACKOFF, MAX_STALE_AFTER, MAX_TIMEOUT, MIN_RATE,
};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, FixedOffset, Utc};
use chrono_tz::Tz;
use secrecy::SecretString;

/// The name of the effect catalog inside a jobs directory.
pub const EFFECTS_FILE: &str = "effects.yaml";

/// `jobs/effects.yaml`: effect type name → how to perform it.
#[derive(Debug, Clone, Default)]
pub struct EffectCatalog {
    pub types: BTreeMap<String, EffectType>,
}

impl EffectCatalog {
    pub fn get(&self, name: &str) -> Option<&EffectType> {
        self.types.get(name)
    }
}

#[derive(Debug, Clone)]
pub struct EffectType {
    pub name: String,
    pub webhook: WebhookConfig,
    /// The provider deduplicates by the `Idempotency-Key` header.
    pub idempotent: bool,
    /// At most this many calls of this type in flight (and, for a non-idempotent type, at most
    /// this many keys reserved but not yet answered). 1 to [`MAX_CONCURRENCY`]; default 16.
    pub concurrency: usize,
    /// Calls started per second at most, [`MIN_RATE`] to [`MAX_RATE`]; `None` = unlimited.
    pub rate_per_second: Option<f64>,
    /// How long the provider remembers a key, at most [`MAX_DEDUP_WINDOW`]; `None` =
    /// forever.
    pub dedup_window: Option<Duration>,
    /// `retry: { attempts, backoff, max_backoff }`: how a failed call of an idempotent type is
    /// tried again under `on_failure: release` (default [`DEFAULT_RETRY`]). A non-idempotent
    /// type's calls are never retried: its `attempts` is 1.
    pub retry: crate::shared::backoff::Backoff,
    /// `breaker_after`: after this many consecutive failed calls of the type (default 20), its
    /// breaker opens: the type's calls pause (no new call, so a provider outage does not fill
    /// the review queue), one probe goes out after each cooldown, and the first success closes
    /// it again.
    pub breaker_after: u32,
    /// `breaker_budget`: how long the breaker may stay open before the run gives up (exit 1,
    /// checkpoint before the first key not sent); default 5 minutes, never shorter than the
    /// retry policy's own pauses.
    pub breaker_budget: Duration,
}

#[derive(Clone)]
pub struct WebhookConfig {
    pub url: reqwest::Url,
    /// Default 10s; at most [`MAX_TIMEOUT`].
    pub timeout: Duration,
    /// Extra headers (e.g. `Authorization`); values are secrets, never logged.
    pub headers: Vec<(String, SecretString)>,
}

/// Shows only the URL's scheme, host and port: its path or query may hold a token.
impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = format!(
            "{}://{}{}/…",
            self.url.scheme(),
            self.url.host_str().unwrap_or(""),
            self.url.port().map(|p| format!(":{p}")).unwrap_or_default()
        );
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, _)| (name.as_str(), "[REDACTED]"))
            .collect();
        f.debug_struct("WebhookConfig")
            .field("url", &url)
            .field("timeout", &self.timeout)
            .field("headers", &headers)
            .finish()
    }
}

/// The cron parser of `schedule` (6 fields, seconds required; an optional 7th is the year). The
/// scheduler parses with it too (`scheduler::timing::parse`), so what `check` accepts it accepts.
/// Runs `f` (loads of the jobs directory) without reading a secret (a header value) from the
/// environment: header values stay empty. For a process that calls no provider — the console,
/// which binds an approval to the job's definition, where no secret appears.
pub fn without_secrets<T>(f: impl FnOnce() -> T) -> T {
    de::without_secrets(f)
}

pub fn schedule_parser() -> croner::parser::CronParser {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Required)
        .dom_and_dow(true)
        .build()
}

/// One `jobs/<file>.yaml`.
#[derive(Debug, Clone)]
pub struct Job {
    /// `[a-z0-9._-]+`; the execution id (a `previous: day` window appends the day).
    pub name: String,
    /// The file it came from.
    pub file: PathBuf,
    /// Cron with seconds (6 fields), parsed by the same parser the scheduler uses.
    pub schedule: Option<String>,
    /// Default UTC.
    pub timezone: Tz,
    pub kind: JobKind,
}

#[derive(Debug, Clone)]
pub enum JobKind {
    Replay(ReplayJob),
    Sweep(SweepJob),
    Report(ReportJob),
    Live(LiveJob),
    Verify(VerifyJob),
    Rebuild(RebuildJob),
}

impl JobKind {
    pub fn label(&self) -> &'static str {
        match self {
            JobKind::Replay(_) => "replay",
            JobKind::Sweep(_) => "sweep",
            JobKind::Report(_) => "report",
            JobKind::Live(_) => "live",
            JobKind::Verify(_) => "verify",
            JobKind::Rebuild(_) => "rebuild",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ReplayJob {
    pub window: WindowSpec,
    pub simulate: bool,
    /// 1..=100_000; default 1000.
    pub batch_size: u32,
    /// Event types handed to the domain; default `["pedido.pago"]`. Others are skipped and counted.
    pub event_types: Vec<String>,
    /// Effect type → policy. A type the domain requests but the job does not list is suppressed
    /// (the seed: `if (!regra || regra.modo === 'suprimir')`).
    pub effects: BTreeMap<String, EffectPolicy>,
    /// Default `record`.
    pub on_invalid_event: OnInvalidEvent,
    /// The real run refuses to start until a finished simulation of this job was approved
    /// (`replay-ledger approve`) and the window has not changed since. Default false.
    pub require_approved_simulation: bool,
    /// Recipients of the execution's report, e-mailed when a run finishes. Default none.
    pub report_to: Vec<String>,
    /// The window split by a stable hash of `pedido_id` (all events of an order in one
    /// partition, so their order is kept); each partition has its own checkpoint and is claimed by
    /// one worker at a time, in any process on any machine. 1..=1024; default 1.
    pub partitions: u32,
    /// `rule`: the commission rule the run computes with; default the one in force. Another
    /// (a candidate, `crate::domain::rules`) is only simulated: a real run of it is refused.
    pub rule: crate::domain::Rule,
}

/// `kind: live`: the policy of the live consumer (`execucao_id = 'ao-vivo'`).
#[derive(Debug, Clone)]
pub struct LiveJob {
    pub batch_size: u32,
    pub event_types: Vec<String>,
    pub effects: BTreeMap<String, EffectPolicy>,
    pub on_invalid_event: OnInvalidEvent,
}

/// `kind: verify`: `verify` of the `lookback_days` days before today (in the job's timezone),
/// mailed to `report_to` when it finds differences.
#[derive(Debug, Clone)]
pub struct VerifyJob {
    /// 1..=3660.
    pub lookback_days: u32,
    /// Non-empty.
    pub report_to: Vec<String>,
    /// Whether `serve` proposes the correction of each day found wrong (a gated replay job kept
    /// in the database, whose simulation it runs); `propose: false` turns it off. Default on.
    pub propose: bool,
}

impl VerifyJob {
    /// The days `[from, to)` of a run at `now`: the lookback days before today in `timezone`.
    pub fn range(
        &self,
        timezone: Tz,
        now: DateTime<Utc>,
    ) -> (chrono::NaiveDate, chrono::NaiveDate) {
        let today = now.with_timezone(&timezone).date_naive();
        let from = today - chrono::Days::new(u64::from(self.lookback_days));
        (from, today)
    }
}

/// `kind: rebuild`: `replay-ledger rebuild` on a schedule — builds or resumes `comissao_nova`,
/// follows the writers, compares, and swaps once the comparison shown was approved.
#[derive(Debug, Clone)]
pub struct RebuildJob {
    /// `pedido.pago` events per chunk; default the rebuild's (20,000).
    pub chunk: Option<u32>,
}

#[derive(Debug, Clone)]
pub struct SweepJob {
    /// Must exceed the timeout of every provider in the catalog; at most [`MAX_STALE_AFTER`].
    pub stale_after: Duration,
}

#[derive(Debug, Clone)]
pub struct ReportJob {
    pub to: Vec<String>,
    pub cc: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSpec {
    /// Half-open `[from, to)` on `ocorrido_em`; `from < to` is checked.
    Fixed {
        from: DateTime<FixedOffset>,
        to: DateTime<FixedOffset>,
    },
    /// The previous calendar day in the job's timezone.
    PreviousDay,
    /// `window: all`: every event of the archive, [`all_from`] to [`all_to`].
    All,
}

/// Where `window: all` starts (0001-01-01T00:00:00Z): before any event an archive holds.
pub fn all_from() -> DateTime<Utc> {
    DateTime::from_timestamp(-62_135_596_800, 0).expect("0001-01-01 is an instant")
}

/// Where `window: all` ends (9999-12-31T00:00:00Z): after any event an archive holds.
pub fn all_to() -> DateTime<Utc> {
    DateTime::from_timestamp(253_402_214_400, 0).expect("9999-12-31 is an instant")
}

/// A window made concrete for one execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedWindow {
    pub execution_id: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectPolicy {
    pub mode: EffectMode,
    pub on_failure: OnFailure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EffectMode {
    /// `apply` / `aplicar` (default).
    #[default]
    #[serde(alias = "aplicar")]
    Apply,
    /// `suppress` / `suprimir`.
    #[serde(alias = "suprimir")]
    Suppress,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    /// `release` / `liberar`: delete the reservation so a later attempt retries (idempotent only).
    #[serde(alias = "liberar")]
    Release,
    /// `keep` / `manter` (default): the outcome is unknown, the key ends `incerto`.
    #[default]
    #[serde(alias = "manter")]
    Keep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnInvalidEvent {
    /// Record it in `evento_rejeitado`, count it, go on.
    #[default]
    Record,
    /// Halt the run with exit 1.
    Stop,
}

impl Job {
    /// The window of an execution started at `now`.
    pub fn resolve_window(&self, window: &WindowSpec, now: DateTime<Utc>) -> ResolvedWindow {
        match *window {
            WindowSpec::Fixed { from, to } => ResolvedWindow {
                execution_id: self.name.clone(),
                from: from.with_timezone(&Utc),
                to: to.with_timezone(&Utc),
            },
            WindowSpec::All => ResolvedWindow {
                execution_id: self.name.clone(),
                from: all_from(),
                to: all_to(),
            },
            WindowSpec::PreviousDay => {
                let today = now.with_timezone(&self.timezone).date_naive();
                let day = today.pred_opt().unwrap_or(today);
                let start = |d| day_start(self.timezone, d);
                ResolvedWindow {
                    execution_id: format!("{}-{}", self.name, day.format("%Y-%m-%d")),
                    from: start(day),
                    to: start(today),
                }
            }
        }
    }
}

/// The first instant of `day` in `timezone` (a DST gap at midnight moves it).
pub fn day_start(timezone: Tz, day: chrono::NaiveDate) -> DateTime<Utc> {
    use chrono::TimeZone;
    let midnight = day.and_hms_opt(0, 0, 0).expect("midnight exists");
    (0..4)
        .find_map(|h| {
            timezone
                .from_local_datetime(&(midnight + chrono::Duration::hours(h)))
                .earliest()
        })
        .map(|t| t.with_timezone(&Utc))
        .expect("a day has a first instant")
}
