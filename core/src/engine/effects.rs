//! External effects: providers behind one trait, the HTTP webhook that sends the ledger key as the
//! `Idempotency-Key` header, and the per-type limits (concurrency, rate).
//!
//! Nothing here touches the ledger: the applier reserves before calling and settles after.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use secrecy::ExposeSecret;
use serde_json::Value;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::{EffectCatalog, EffectType};

/// A failed call. `Retryable` may succeed if tried again (timeout, connection, 5xx, 408, 429);
/// `Fatal` will not (another 4xx: the request itself is wrong; a 3xx, class `redirect`: the
/// webhook URL is wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EffectError {
    #[error("{class}")]
    Retryable {
        class: String,
        /// A 429 or 503 answer's `Retry-After`: how long the provider asked us to wait.
        retry_after: Option<Duration>,
    },
    #[error("{class}")]
    Fatal { class: String },
}

impl EffectError {
    /// A failure worth another try, without a `Retry-After`.
    pub fn retryable(class: impl Into<String>) -> Self {
        EffectError::Retryable {
            class: class.into(),
            retry_after: None,
        }
    }

    /// A short class for logs and the summary: `timeout`, `connect`, `http 503`, … never a body.
    pub fn class(&self) -> &str {
        match self {
            EffectError::Retryable { class, .. } | EffectError::Fatal { class } => class,
        }
    }

    /// Whether the call provably sent nothing: the connection was refused (reqwest's
    /// `is_connect`, before any byte of the request), or the type's breaker was open and no call
    /// was made. Such a key may be released even when the provider cannot deduplicate.
    pub fn sent_nothing(&self) -> bool {
        matches!(self.class(), CONNECT | BREAKER)
    }

    /// What a failed call leaves behind, decided in one place for a replay's batch, the live
    /// consumer and a sweeper's resend: released for a later try when the call provably sent
    /// nothing (whatever the policy: it cannot have been performed, so it needs no person), else
    /// what the type's `on_failure` says (`keep`: a person decides, or the sweeper retakes a key
    /// its provider deduplicates).
    pub fn release_or_keep(
        &self,
        on_failure: crate::config::OnFailure,
    ) -> crate::config::OnFailure {
        if self.sent_nothing() {
            crate::config::OnFailure::Release
        } else {
            on_failure
        }
    }

    pub fn is_retryable(&self) -> bool {
        matches!(self, EffectError::Retryable { .. })
    }

    /// How long the provider asked to wait before another try (`Retry-After` on 429 or 503).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            EffectError::Retryable { retry_after, .. } => *retry_after,
            EffectError::Fatal { .. } => None,
        }
    }
}

/// The class of a refused connection: nothing of the request was sent.
pub const CONNECT: &str = "connect";
/// The class of a call not made because its type's breaker is open.
pub const BREAKER: &str = "breaker";

/// Performs one external effect. `key` is the ledger key; a provider that can deduplicate uses
/// it to do so. Returns the provider's answer, if any, for `resultado`.
#[async_trait]
pub trait Provider: Send + Sync {
    async fn perform(&self, key: &str, body: &Value) -> Result<Option<Value>, EffectError>;
}

/// `POST url` with `Idempotency-Key: <key>` (see [`idempotency_header`] for keys HTTP cannot carry
/// verbatim), `Content-Type: application/json` and the configured headers. A 2xx answer is
/// success (its JSON body, if any, is the result); anything else, a timeout or a connection error
/// is a failure.
///
/// Redirects are never followed: a 307 or 308 would re-send the body, the key and the headers (a
/// token) to another origin, whose answer would then conclude the key. A 3xx is a failure of class
/// `redirect`, and fatal — the configured URL is wrong, asking again will not help; the job's
/// `on_failure` settles the key (released for an idempotent type, `incerto` under `keep`).
pub struct WebhookProvider {
    /// Carries the configured headers as its defaults: a call adds only its own key.
    client: reqwest::Client,
    url: reqwest::Url,
}

impl WebhookProvider {
    pub fn new(effect: &EffectType) -> Result<Self, EffectError> {
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &effect.webhook.headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                EffectError::Fatal {
                    class: format!("invalid header name {name:?}"),
                }
            })?;
            let mut value =
                reqwest::header::HeaderValue::from_str(value.expose_secret()).map_err(|_| {
                    EffectError::Fatal {
                        class: format!("invalid value for header {name}"),
                    }
                })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(effect.webhook.timeout)
            .connect_timeout(effect.webhook.timeout.min(Duration::from_secs(5)))
            .pool_max_idle_per_host(effect.concurrency)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| EffectError::Fatal {
                class: format!("http client: {e}"),
            })?;
        Ok(WebhookProvider {
            client,
            url: effect.webhook.url.clone(),
        })
    }
}

#[async_trait]
impl Provider for WebhookProvider {
    async fn perform(&self, key: &str, body: &Value) -> Result<Option<Value>, EffectError> {
        let response = self
            .client
            .post(self.url.clone())
            .header("Idempotency-Key", idempotency_header(key).as_ref())
            .json(body)
            .send()
            .await
            .map_err(|e| classify_transport(&e))?;
        let status = response.status();
        if status.is_redirection() {
            return Err(EffectError::Fatal {
                class: "redirect".into(),
            });
        }
        if !status.is_success() {
            let class = format!("http {}", status.as_u16());
            return Err(
                if status.is_server_error() || status == 408 || status == 429 {
                    let asked = matches!(status.as_u16(), 429 | 503)
                        .then(|| retry_after(response.headers(), std::time::SystemTime::now()))
                        .flatten();
                    EffectError::Retryable {
                        class,
                        retry_after: asked,
                    }
                } else {
                    EffectError::Fatal { class }
                },
            );
        }
        result_of(response).await
    }
}

/// The largest answer body kept as `resultado`: a receipt, not an archive. A group commit of
/// completions carries its answers as one jsonb value, which PostgreSQL caps at 256 MiB; the
/// group's size is checked against this bound where groups are made.
pub(crate) const MAX_RESULT_BYTES: usize = 64 << 10;

/// The result of a successful call: its JSON body, when there is one that the ledger can store. A
/// body that is not JSON, is larger than [`MAX_RESULT_BYTES`] (read no further), nests deeper than
/// serde_json reads, or holds a NUL (`\u0000`, which jsonb refuses) is not an error — the call
/// succeeded and must be recorded; there is just no result.
async fn result_of(mut response: reqwest::Response) -> Result<Option<Value>, EffectError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| classify_transport(&e))? {
        if body.len() + chunk.len() > MAX_RESULT_BYTES {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    if body.windows(6).any(|w| w == b"\\u0000") {
        return Ok(None);
    }
    Ok(serde_json::from_slice::<Value>(&body).ok())
}

/// The `Idempotency-Key` header value of a ledger key. A key of visible ASCII other than `%` (every
/// key of ordinary ids) is sent as it is. Any other key — an event id with spaces, control
/// characters or non-ASCII text — is sent with each of its UTF-8 bytes outside visible ASCII, and
/// each `%`, percent-encoded: HTTP cannot carry it verbatim (a newline cannot be sent at all,
/// leading and trailing blanks are stripped, bytes above 0x7F are refused by many servers), and
/// since only encoded keys contain `%`, two different keys never share a header.
pub fn idempotency_header(key: &str) -> std::borrow::Cow<'_, str> {
    let plain = |b: u8| b.is_ascii_graphic() && b != b'%';
    if key.bytes().all(plain) {
        return std::borrow::Cow::Borrowed(key);
    }
    let mut out = String::with_capacity(key.len() * 3);
    for b in key.bytes() {
        if plain(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A transport failure, named by kind only (reqwest's message may carry the URL and its query).
fn classify_transport(e: &reqwest::Error) -> EffectError {
    let class = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        CONNECT
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "transport"
    };
    EffectError::retryable(class)
}

/// A `Retry-After` header: delay-seconds, or an HTTP-date (any of HTTP's three formats) measured
/// from `now` (a date already past is no wait). `None` when absent or unreadable.
pub fn retry_after(
    headers: &reqwest::header::HeaderMap,
    now: std::time::SystemTime,
) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // More digits than a u64 holds is "a very long time".
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Spaces call starts of one type at `1 / rate` seconds.
struct Pacer {
    interval: Duration,
    next: Mutex<Instant>,
}

impl Pacer {
    /// Waits for this call's turn; true when it had to wait, i.e. the rate limit held it back.
    async fn wait(&self) -> bool {
        let start = {
            let mut next = self.next.lock().await;
            let now = Instant::now();
            let start = (*next).max(now);
            *next = start + self.interval;
            start
        };
        let held = start > Instant::now();
        tokio::time::sleep_until(start).await;
        held
    }
}

/// Calls of one effect type so far, and how many of them the type's rate limit held back.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CallCount {
    pub calls: u64,
    pub paced: u64,
}

/// One effect type ready to call: its provider, its rules and its limits.
pub struct Effect {
    pub config: EffectType,
    pub provider: Arc<dyn Provider>,
    permits: Arc<Semaphore>,
    pacer: Option<Pacer>,
    calls: AtomicU64,
    paced: AtomicU64,
    /// The type's breaker: consecutive failures, and whether its calls are paused.
    breaker: Breaker,
}

/// A breaker of the resilience4j / Polly kind. Closed, it counts consecutive failed calls; at
/// `breaker_after` it opens: no call of the type is made (each waits, holding what it holds —
/// a reserved key stays reserved, nothing goes `incerto`), except one probe after each cooldown
/// (half-open). The probe's success closes it and every waiting call goes on; its failure opens it
/// for another cooldown. Open longer than `breaker_budget`, it gives up: every waiting call and
/// every later one fails with class [`BREAKER`] (nothing was sent: released), so the run stops
/// with its checkpoint before the first key not sent.
struct Breaker {
    failures: AtomicU64,
    state: std::sync::Mutex<BreakerState>,
    changed: tokio::sync::Notify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BreakerState {
    Closed,
    Open {
        since: Instant,
        probe_at: Instant,
        probing: bool,
    },
    /// Open past its budget: no call any more in this run.
    GaveUp,
}

/// What a call may do now.
enum Admit {
    Call,
    Probe,
    Wait(Instant),
    GiveUp,
}

impl Breaker {
    fn new() -> Breaker {
        Breaker {
            failures: AtomicU64::new(0),
            state: std::sync::Mutex::new(BreakerState::Closed),
            changed: tokio::sync::Notify::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, BreakerState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How long an open breaker waits before each probe: the type's longest retry pause, within
/// 100 ms..30 s, and at most a quarter of the budget (so a short budget still probes).
fn cooldown(config: &EffectType) -> Duration {
    config
        .retry
        .max
        .clamp(Duration::from_millis(100), Duration::from_secs(30))
        .min(config.breaker_budget / 4)
        .max(Duration::from_millis(10))
}

/// The state of every effect type's breaker in this process, for `/metrics`
/// (`replay_ledger_breaker_open{effect}`): 1 while open (paused or probing), 0 once closed or
/// given up. Kept process-wide because the types' `Effect`s are made per run.
static BREAKERS: std::sync::Mutex<BTreeMap<String, bool>> = std::sync::Mutex::new(BTreeMap::new());

fn publish_breaker(effect: &str, open: bool) {
    BREAKERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(effect.to_string(), open);
}

/// Every effect type this process has called, and whether its breaker is open now.
pub fn breakers_open() -> BTreeMap<String, bool> {
    BREAKERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

impl Effect {
    pub fn new(config: EffectType, provider: Arc<dyn Provider>) -> Self {
        let pacer = config
            .rate_per_second
            .filter(|r| *r > 0.0)
            // A rate too small for a `Duration` interval (config refuses it) paces nothing.
            .and_then(|rate| Duration::try_from_secs_f64(1.0 / rate).ok())
            .map(|interval| Pacer {
                interval,
                next: Mutex::new(Instant::now()),
            });
        Effect {
            permits: Arc::new(Semaphore::new(config.concurrency.max(1))),
            pacer,
            config,
            provider,
            calls: AtomicU64::new(0),
            paced: AtomicU64::new(0),
            breaker: Breaker::new(),
        }
    }

    /// Waits for a slot under the type's concurrency limit. Held from before the reservation of a
    /// non-idempotent key until its call returns, so at most `concurrency` such keys are reserved
    /// but not yet sent (invariant `at-most-once`).
    pub async fn slot(&self) -> OwnedSemaphorePermit {
        Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// Calls the provider, after the type's rate limit allows it and while its breaker lets
    /// calls through; see [`Effect::call_unless`].
    pub async fn call(&self, key: &str, body: &Value) -> Result<Option<Value>, EffectError> {
        let never = AtomicBool::new(false);
        self.call_unless(
            key,
            body,
            &crate::shared::shutdown::Shutdown::never(),
            &never,
        )
        .await
    }

    /// Calls the provider, after the type's rate limit allows it. While the type's breaker is
    /// open the call waits (no call is made), or goes out as the one probe; once the breaker gave
    /// up, or when `shutdown` is asked for while it waits, or when the caller's batch already
    /// failed for good (`doomed`: the run stops at it, so waiting for the provider serves
    /// nothing), it fails with class [`BREAKER`] without sending anything.
    pub async fn call_unless(
        &self,
        key: &str,
        body: &Value,
        shutdown: &crate::shared::shutdown::Shutdown,
        doomed: &AtomicBool,
    ) -> Result<Option<Value>, EffectError> {
        loop {
            let probe = match self.admit() {
                Admit::Call => false,
                Admit::Probe => true,
                Admit::GiveUp => {
                    return Err(EffectError::Fatal {
                        class: BREAKER.into(),
                    })
                }
                Admit::Wait(until) => {
                    if doomed.load(Ordering::SeqCst) {
                        return Err(EffectError::Fatal {
                            class: BREAKER.into(),
                        });
                    }
                    let mut shutdown = shutdown.clone();
                    let until = until.min(Instant::now() + Duration::from_millis(100));
                    tokio::select! {
                        () = tokio::time::sleep_until(until) => {}
                        () = self.breaker.changed.notified() => {}
                        () = shutdown.triggered() => {
                            return Err(EffectError::Fatal { class: BREAKER.into() });
                        }
                    }
                    continue;
                }
            };
            if let Some(pacer) = &self.pacer {
                if pacer.wait().await {
                    self.paced.fetch_add(1, Ordering::Relaxed);
                }
            }
            self.calls.fetch_add(1, Ordering::Relaxed);
            let result = self.provider.perform(key, body).await;
            self.settle(probe, result.is_ok());
            // A failed probe of a type whose provider deduplicates is the breaker's, not the
            // key's: the key waits again (the next probe, or the close), its own tries untouched,
            // so only the budget ends a run in an outage. A non-idempotent probe's failure is the
            // key's: its outcome is unknown, and it is never called again.
            if probe && result.is_err() && self.config.idempotent {
                continue;
            }
            return result;
        }
    }

    /// Whether a call may go out now, and the breaker's move if it opens or gives up.
    fn admit(&self) -> Admit {
        let name = &self.config.name;
        let mut state = self.breaker.state();
        let now = Instant::now();
        match *state {
            BreakerState::Closed => {
                if self.breaker.failures.load(Ordering::SeqCst)
                    < u64::from(self.config.breaker_after).max(1)
                {
                    return Admit::Call;
                }
                let cooldown = cooldown(&self.config);
                *state = BreakerState::Open {
                    since: now,
                    probe_at: now + cooldown,
                    probing: false,
                };
                publish_breaker(name, true);
                tracing::warn!(
                    effect = %name,
                    failures = self.config.breaker_after,
                    cooldown = %humantime::format_duration(cooldown),
                    budget = %humantime::format_duration(self.config.breaker_budget),
                    "breaker open: calls of this type paused; one probe after each cooldown, the run gives up past the budget"
                );
                Admit::Wait(now + cooldown)
            }
            BreakerState::Open { since, .. } if now >= since + self.config.breaker_budget => {
                *state = BreakerState::GaveUp;
                publish_breaker(name, false);
                self.breaker.changed.notify_waiters();
                tracing::error!(
                    effect = %name,
                    open_for = %humantime::format_duration(self.config.breaker_budget),
                    "breaker stayed open past its budget: no more calls of this type in this run"
                );
                Admit::GiveUp
            }
            BreakerState::Open {
                since,
                probe_at,
                probing,
            } => {
                if !probing && now >= probe_at {
                    *state = BreakerState::Open {
                        since,
                        probe_at,
                        probing: true,
                    };
                    return Admit::Probe;
                }
                let next = if probing {
                    now + cooldown(&self.config)
                } else {
                    probe_at
                };
                Admit::Wait(next.min(since + self.config.breaker_budget))
            }
            BreakerState::GaveUp => Admit::GiveUp,
        }
    }

    /// Counts a call's outcome: a success closes the breaker (a probe's resumes every waiting
    /// call); a failed probe opens it for another cooldown.
    fn settle(&self, probe: bool, ok: bool) {
        let name = &self.config.name;
        if ok {
            self.breaker.failures.store(0, Ordering::SeqCst);
            let mut state = self.breaker.state();
            if matches!(*state, BreakerState::Open { .. }) {
                *state = BreakerState::Closed;
                publish_breaker(name, false);
                tracing::info!(effect = %name, "breaker closed: the probe succeeded; calls of this type go on");
                self.breaker.changed.notify_waiters();
            }
            return;
        }
        self.breaker.failures.fetch_add(1, Ordering::SeqCst);
        if probe {
            let mut state = self.breaker.state();
            if let BreakerState::Open { since, .. } = *state {
                *state = BreakerState::Open {
                    since,
                    probe_at: Instant::now() + cooldown(&self.config),
                    probing: false,
                };
            }
            tracing::info!(effect = %name, "breaker: the probe failed; still open");
        }
    }

    /// Whether the type's breaker is open (paused or probing) or gave up.
    pub fn breaker_open(&self) -> bool {
        !matches!(*self.breaker.state(), BreakerState::Closed)
    }

    /// Calls made so far through this type, and how many waited for its rate limit.
    pub fn call_count(&self) -> CallCount {
        CallCount {
            calls: self.calls.load(Ordering::Relaxed),
            paced: self.paced.load(Ordering::Relaxed),
        }
    }
}

/// Every effect type of the catalog, by name.
#[derive(Clone, Default)]
pub struct Effects {
    by_type: BTreeMap<String, Arc<Effect>>,
}

impl Effects {
    /// Webhook providers for every type of the catalog.
    pub fn from_catalog(catalog: &EffectCatalog) -> Result<Self, EffectError> {
        let mut by_type = BTreeMap::new();
        for (name, effect) in &catalog.types {
            let provider: Arc<dyn Provider> = Arc::new(WebhookProvider::new(effect)?);
            by_type.insert(
                name.clone(),
                Arc::new(Effect::new(effect.clone(), provider)),
            );
        }
        Ok(Effects { by_type })
    }

    pub fn insert(&mut self, effect: Effect) {
        self.by_type
            .insert(effect.config.name.clone(), Arc::new(effect));
    }

    pub fn get(&self, tipo: &str) -> Option<&Arc<Effect>> {
        self.by_type.get(tipo)
    }

    /// Calls made so far, per type (for progress: effects/s and whether a rate limit holds).
    pub fn call_counts(&self) -> BTreeMap<String, CallCount> {
        self.by_type
            .iter()
            .map(|(name, e)| (name.clone(), e.call_count()))
            .collect()
    }

    /// Every declared type.
    pub fn types(&self) -> Vec<String> {
        self.by_type.keys().cloned().collect()
    }

    /// The types whose provider deduplicates by key.
    pub fn idempotent_types(&self) -> Vec<String> {
        self.by_type
            .values()
            .filter(|e| e.config.idempotent)
            .map(|e| e.config.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
    use std::time::SystemTime;

    fn with(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn retry_after_takes_seconds_and_http_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        let later = |v: &str| retry_after(&with(v), now);
        assert_eq!(later("120"), Some(Duration::from_secs(120)));
        assert_eq!(
            later("Sun, 06 Nov 1994 08:50:07 GMT"),
            Some(Duration::from_secs(30))
        );
        // RFC 850 and asctime, which HTTP still allows.
        assert_eq!(
            later("Sunday, 06-Nov-94 08:49:47 GMT"),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            later("Sun Nov  6 08:49:57 1994"),
            Some(Duration::from_secs(20))
        );
        assert_eq!(later("Sun, 06 Nov 1994 08:00:00 GMT"), Some(Duration::ZERO));
        assert_eq!(later("soon"), None);
        assert_eq!(later("-5"), None);
        assert_eq!(
            later("99999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(retry_after(&HeaderMap::new(), SystemTime::now()), None);
    }
}
