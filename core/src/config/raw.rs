//! The raw form of a job file: one serde struct per `kind`, each refusing unknown keys, so a key
//! of another kind (`window` in a sweep job) or a typo (`on_falure`) is an error at its line and
//! column. The `kind` is read first (a probe that ignores everything else), then the file is read
//! again as that kind's struct.
//!
//! Every field's type checks its own value while it is deserialized (see `scalar`, `policy`), so
//! turning a raw struct into a [`Job`] cannot fail. A new key is one line in the struct of each
//! kind that takes it, plus its line in `into_job`.

use std::path::Path;

use chrono_tz::Tz;
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};

use super::de::checked_seq;
use super::policy::Policies;
use super::scalar::{
    BatchSize, Email, EventType, JobName, Lookback, Partitions, RuleName, Schedule, StaleAfter,
    Timestamp, Zone,
};
use super::{
    Job, JobKind, LiveJob, OnInvalidEvent, RebuildJob, ReplayJob, ReportJob, SweepJob, VerifyJob,
    WindowSpec,
};

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Kind {
    #[default]
    Replay,
    Sweep,
    Report,
    Live,
    Verify,
    Rebuild,
}

/// Reads only `kind` (default `replay`); every other key is left to the kind's struct.
#[derive(Deserialize)]
#[serde(expecting = "a job: a mapping with `name`, `kind` and the settings of that kind")]
pub(super) struct KindProbe {
    #[serde(default)]
    pub kind: Kind,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a replay job: a mapping with `name` and `window`"
)]
pub(super) struct RawReplay {
    name: JobName,
    #[serde(default, rename = "kind")]
    _kind: IgnoredAny,
    schedule: Option<Schedule>,
    timezone: Option<Zone>,
    window: Window,
    #[serde(default)]
    simulate: bool,
    batch_size: Option<BatchSize>,
    event_types: Option<EventTypes>,
    #[serde(default)]
    effects: Policies,
    #[serde(default)]
    on_invalid_event: OnInvalidEvent,
    #[serde(default)]
    require_approved_simulation: bool,
    #[serde(default)]
    report_to: Vec<Email>,
    partitions: Option<Partitions>,
    rule: Option<RuleName>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a live job: a mapping with `name`")]
pub(super) struct RawLive {
    name: JobName,
    #[serde(default, rename = "kind")]
    _kind: IgnoredAny,
    timezone: Option<Zone>,
    batch_size: Option<BatchSize>,
    event_types: Option<EventTypes>,
    #[serde(default)]
    effects: Policies,
    #[serde(default)]
    on_invalid_event: OnInvalidEvent,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a sweep job: a mapping with `name` and `stale_after`"
)]
pub(super) struct RawSweep {
    name: JobName,
    #[serde(default, rename = "kind")]
    _kind: IgnoredAny,
    schedule: Option<Schedule>,
    timezone: Option<Zone>,
    stale_after: StaleAfter,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a report job: a mapping with `name` and `to`"
)]
pub(super) struct RawReport {
    name: JobName,
    #[serde(default, rename = "kind")]
    _kind: IgnoredAny,
    schedule: Option<Schedule>,
    timezone: Option<Zone>,
    to: Recipients,
    #[serde(default)]
    cc: Vec<Email>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a verify job: a mapping with `name`, `lookback` and `report_to`"
)]
pub(super) struct RawVerify {
    name: JobName,
    #[serde(default, rename = "kind")]
    _kind: IgnoredAny,
    schedule: Option<Schedule>,
    timezone: Option<Zone>,
    lookback: Lookback,
    report_to: Recipients,
    propose: Option<bool>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a rebuild job: a mapping with `name` and `schedule`"
)]
pub(super) struct RawRebuild {
    name: JobName,
    #[serde(default, rename = "kind")]
    _kind: IgnoredAny,
    schedule: Option<Schedule>,
    timezone: Option<Zone>,
    chunk: Option<BatchSize>,
}

const DEFAULT_BATCH_SIZE: u32 = 1000;
const DEFAULT_EVENT_TYPE: &str = "pedido.pago";

fn job(
    file: &Path,
    name: JobName,
    schedule: Option<Schedule>,
    tz: Option<Zone>,
    kind: JobKind,
) -> Job {
    Job {
        name: name.0,
        file: file.to_path_buf(),
        schedule: schedule.map(|s| s.0),
        timezone: tz.map_or(Tz::UTC, |z| z.0),
        kind,
    }
}

fn batch_size(b: Option<BatchSize>) -> u32 {
    b.map_or(DEFAULT_BATCH_SIZE, |b| b.0)
}

fn event_types(e: Option<EventTypes>) -> Vec<String> {
    e.map_or_else(|| vec![DEFAULT_EVENT_TYPE.to_owned()], |e| e.0)
}

impl RawReplay {
    pub fn into_job(self, file: &Path) -> Job {
        let kind = JobKind::Replay(ReplayJob {
            window: self.window.0,
            simulate: self.simulate,
            batch_size: batch_size(self.batch_size),
            event_types: event_types(self.event_types),
            effects: self.effects.0,
            on_invalid_event: self.on_invalid_event,
            require_approved_simulation: self.require_approved_simulation,
            report_to: self.report_to.into_iter().map(|e| e.0).collect(),
            partitions: self.partitions.map_or(1, |p| p.0),
            rule: self.rule.map_or(crate::domain::Rule::IN_FORCE, |r| r.0),
        });
        job(file, self.name, self.schedule, self.timezone, kind)
    }
}

impl RawLive {
    pub fn into_job(self, file: &Path) -> Job {
        let kind = JobKind::Live(LiveJob {
            batch_size: batch_size(self.batch_size),
            event_types: event_types(self.event_types),
            effects: self.effects.0,
            on_invalid_event: self.on_invalid_event,
        });
        job(file, self.name, None, self.timezone, kind)
    }
}

impl RawSweep {
    pub fn into_job(self, file: &Path) -> Job {
        let kind = JobKind::Sweep(SweepJob {
            stale_after: self.stale_after.0,
        });
        job(file, self.name, self.schedule, self.timezone, kind)
    }
}

impl RawReport {
    pub fn into_job(self, file: &Path) -> Job {
        let kind = JobKind::Report(ReportJob {
            to: self.to.0,
            cc: self.cc.into_iter().map(|e| e.0).collect(),
        });
        job(file, self.name, self.schedule, self.timezone, kind)
    }
}

impl RawVerify {
    pub fn into_job(self, file: &Path) -> Job {
        let kind = JobKind::Verify(VerifyJob {
            lookback_days: self.lookback.0,
            report_to: self.report_to.0,
            propose: self.propose.unwrap_or(true),
        });
        job(file, self.name, self.schedule, self.timezone, kind)
    }
}

impl RawRebuild {
    pub fn into_job(self, file: &Path) -> Job {
        let kind = JobKind::Rebuild(RebuildJob {
            chunk: self.chunk.map(|c| c.0),
        });
        job(file, self.name, self.schedule, self.timezone, kind)
    }
}

/// `window: { from, to }` or `window: { previous: day }`.
pub(super) struct Window(pub WindowSpec);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWindow {
    from: Option<Timestamp>,
    to: Option<Timestamp>,
    previous: Option<Period>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Period {
    Day,
}

const WINDOW_FORMS: &str = "a window is either `from` and `to` (RFC 3339 timestamps), \
     `previous: day`, or `all` (every event of the archive: a candidate rule's simulation)";

impl<'de> Deserialize<'de> for Window {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Forms;
        impl<'de> serde::de::Visitor<'de> for Forms {
            type Value = Window;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(WINDOW_FORMS)
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Window, E> {
                match s {
                    "all" => Ok(Window(WindowSpec::All)),
                    _ => Err(E::custom(WINDOW_FORMS)),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Window, A::Error> {
                let raw =
                    RawWindow::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                window_of(raw).map_err(serde::de::Error::custom)
            }
        }
        d.deserialize_any(Forms)
    }
}

fn window_of(raw: RawWindow) -> Result<Window, String> {
    match (raw.from, raw.to, raw.previous) {
        (Some(from), Some(to), None) if from.0 < to.0 => Ok(Window(WindowSpec::Fixed {
            from: from.0,
            to: to.0,
        })),
        (Some(from), Some(to), None) => Err(format!(
            "window is empty or reversed: `from` ({}) must be before `to` ({})",
            from.0.to_rfc3339(),
            to.0.to_rfc3339()
        )),
        (None, None, Some(Period::Day)) => Ok(Window(WindowSpec::PreviousDay)),
        _ => Err(WINDOW_FORMS.to_owned()),
    }
}

/// `event_types`: a non-empty list.
pub(super) struct EventTypes(Vec<String>);

impl<'de> Deserialize<'de> for EventTypes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_seq(d, "a list of event types", |items: Vec<EventType>| {
            if items.is_empty() {
                return Err("event_types is empty: the job would process nothing".into());
            }
            Ok(EventTypes(items.into_iter().map(|e| e.0).collect()))
        })
    }
}

/// A report's `to`: a non-empty list of addresses.
pub(super) struct Recipients(Vec<String>);

impl<'de> Deserialize<'de> for Recipients {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_seq(d, "a list of e-mail addresses", |items: Vec<Email>| {
            if items.is_empty() {
                return Err("`to` is empty: a report needs at least one recipient".into());
            }
            Ok(Recipients(items.into_iter().map(|e| e.0).collect()))
        })
    }
}
