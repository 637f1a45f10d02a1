//! The loop that fires one schedule: it sleeps until the next instant [`timing::next_fire_after`]
//! gives and hands that instant to its caller. Every fire instant comes from that one pure
//! function, so what `serve` fires is what `status` shows and what the daylight-saving table of
//! the tests checks. Time is read from a [`Clock`] the caller passes: the system clock in `serve`,
//! a clock the test sets in tests.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;

use super::timing;
use replay_ledger_core::shared::shutdown::Shutdown;

/// A fire later than this after its instant is skipped (logged), not run: the mark of a process
/// that was frozen or of a clock stepped forward. A `previous: day` job's missed night is caught
/// up on start instead.
pub const MAX_FIRE_LAG: Duration = Duration::from_secs(10 * 60);

/// The longest single sleep: the clock is read again at least this often, so a clock stepped
/// while the daemon sleeps (NTP, a suspended machine) delays a fire by at most this.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Where the loop reads the time and how it waits for an instant.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
    /// Returns at `until` or earlier (the loop reads the clock again and decides).
    fn sleep_until(&self, until: DateTime<Utc>) -> impl Future<Output = ()> + Send;
}

/// The machine's clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    async fn sleep_until(&self, until: DateTime<Utc>) {
        let wait = (until - Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(wait.min(MAX_SLEEP)).await;
    }
}

/// What the loop does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing is due before this instant.
    Wait(DateTime<Utc>),
    /// Fire for this instant: the newest one due (older ones, due while the process was frozen
    /// or the clock jumped, are not run one by one).
    Fire(DateTime<Utc>),
    /// The newest fire due is more than [`MAX_FIRE_LAG`] late: skipped.
    Late(DateTime<Utc>),
    /// The schedule never fires again.
    Never,
}

/// One schedule in its timezone, as the loop fires it.
pub struct Ticker<'a> {
    /// For the log.
    pub job: &'a str,
    pub cron: &'a Cron,
    pub tz: Tz,
}

impl Ticker<'_> {
    /// What to do at `now`, the fires up to `done` being handled.
    pub fn step(&self, done: DateTime<Utc>, now: DateTime<Utc>) -> Step {
        let Some(next) = timing::next_fire_after(self.cron, self.tz, done) else {
            return Step::Never;
        };
        if next > now {
            return Step::Wait(next);
        }
        let newest = match timing::next_fire_after(self.cron, self.tz, next) {
            Some(after_next) if after_next <= now => {
                timing::last_fire(self.cron, self.tz, now).unwrap_or(next)
            }
            _ => next,
        };
        let lag = (now - newest).to_std().unwrap_or_default();
        if lag <= MAX_FIRE_LAG {
            Step::Fire(newest)
        } else {
            Step::Late(newest)
        }
    }

    /// Calls `on_fire` with each fire instant as it comes, from the clock's now on, until
    /// `shutdown`. `on_fire` must not block: it spawns the fire's work.
    pub async fn run(
        &self,
        clock: &impl Clock,
        mut shutdown: Shutdown,
        mut on_fire: impl FnMut(DateTime<Utc>),
    ) {
        let mut done = clock.now();
        loop {
            match self.step(done, clock.now()) {
                Step::Fire(at) => {
                    done = at;
                    on_fire(at);
                }
                Step::Late(at) => {
                    tracing::warn!(job = %self.job, fire = %at, "fire skipped: more than 10 minutes late (was the process frozen or the clock stepped?)");
                    done = at;
                }
                Step::Wait(until) => tokio::select! {
                    _ = shutdown.triggered() => return,
                    _ = clock.sleep_until(until) => {}
                },
                Step::Never => {
                    tracing::info!(job = %self.job, "the schedule never fires again");
                    shutdown.triggered().await;
                    return;
                }
            }
            if shutdown.is_triggered() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::sync::watch;

    use super::*;
    use replay_ledger_core::shared::shutdown;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    /// A clock that moves only when the test sets it, and tells the test what the loop waits for.
    struct TestClock {
        now: watch::Sender<DateTime<Utc>>,
        waiting_for: watch::Sender<Option<DateTime<Utc>>>,
    }

    impl TestClock {
        fn new(start: DateTime<Utc>) -> Self {
            TestClock {
                now: watch::Sender::new(start),
                waiting_for: watch::Sender::new(None),
            }
        }

        /// Waits until the loop sleeps until an instant after now, and returns that instant.
        async fn next_wake(&self) -> DateTime<Utc> {
            let now = *self.now.borrow();
            let mut rx = self.waiting_for.subscribe();
            let until = rx.wait_for(|w| w.is_some_and(|w| w > now)).await.unwrap();
            until.unwrap()
        }
    }

    impl Clock for TestClock {
        fn now(&self) -> DateTime<Utc> {
            *self.now.borrow()
        }

        async fn sleep_until(&self, until: DateTime<Utc>) {
            let mut rx = self.now.subscribe();
            self.waiting_for.send_replace(Some(until));
            let _ = rx.wait_for(|now| *now >= until).await;
        }
    }

    /// Runs the loop of `schedule` in `zone` from `start`, moving the clock to each instant the
    /// loop sleeps until, as time passing would, up to `end`; returns the fires.
    async fn fires(schedule: &str, zone: &str, start: &str, end: &str) -> Vec<DateTime<Utc>> {
        let cron = timing::parse(schedule).unwrap();
        let ticker = Ticker {
            job: "test",
            cron: &cron,
            tz: zone.parse().unwrap(),
        };
        let clock = TestClock::new(utc(start));
        let (trigger, shutdown) = shutdown::channel();
        let fired = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&fired);
        let drive = async {
            loop {
                let wake = tokio::time::timeout(Duration::from_secs(10), clock.next_wake())
                    .await
                    .expect("the loop waits for a next instant");
                if wake > utc(end) {
                    break;
                }
                clock.now.send_replace(wake);
            }
            trigger.trigger();
        };
        let run = ticker.run(&clock, shutdown, |at| record.lock().unwrap().push(at));
        tokio::join!(run, drive);
        let fired = fired.lock().unwrap().clone();
        fired
    }

    #[tokio::test]
    async fn the_loop_fires_an_hourly_job_in_both_passes_of_berlins_repeated_hour() {
        let fired = fires(
            "0 0 * * * *",
            "Europe/Berlin",
            "2026-10-24T23:30:00Z", // 01:30 CEST
            "2026-10-25T03:30:00Z",
        )
        .await;

        let expected = [
            "2026-10-25T00:00:00Z", // 02:00 CEST
            "2026-10-25T01:00:00Z", // 02:00 CET: the repeated hour
            "2026-10-25T02:00:00Z", // 03:00 CET
            "2026-10-25T03:00:00Z", // 04:00 CET
        ];
        assert_eq!(fired, expected.map(utc));
    }

    #[tokio::test]
    async fn the_loop_fires_a_time_in_the_spring_gap_just_after_the_gap_at_its_second() {
        let fired = fires(
            "15 30 2 * * SUN",
            "Europe/Berlin",
            "2026-03-28T12:00:00Z",
            "2026-04-06T00:00:00Z",
        )
        .await;

        let expected = [
            "2026-03-29T01:00:15Z", // 03:00:15 CEST: 02:30:15 is in the gap
            "2026-04-05T00:30:15Z", // 02:30:15 CEST
        ];
        assert_eq!(fired, expected.map(utc));
    }

    #[test]
    fn a_fire_due_now_is_fired_for_its_instant() {
        let cron = timing::parse("0 0 * * * *").unwrap();
        let ticker = Ticker {
            job: "test",
            cron: &cron,
            tz: "Europe/Berlin".parse().unwrap(),
        };

        let step = ticker.step(utc("2026-10-25T00:00:00Z"), utc("2026-10-25T01:00:00.300Z"));

        assert_eq!(step, Step::Fire(utc("2026-10-25T01:00:00Z")));
    }

    #[test]
    fn after_a_freeze_only_the_newest_due_fire_runs_and_only_if_recent() {
        let cron = timing::parse("0 0 * * * *").unwrap();
        let ticker = Ticker {
            job: "test",
            cron: &cron,
            tz: Tz::UTC,
        };
        let done = utc("2026-10-15T02:00:00Z");

        let recent = ticker.step(done, utc("2026-10-15T05:04:00Z"));
        let stale = ticker.step(done, utc("2026-10-15T05:14:00Z"));

        assert_eq!(recent, Step::Fire(utc("2026-10-15T05:00:00Z")));
        assert_eq!(stale, Step::Late(utc("2026-10-15T05:00:00Z")));
    }
}
