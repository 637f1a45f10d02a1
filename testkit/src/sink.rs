//! A loopback webhook standing in for the seller's provider: a real HTTP server on 127.0.0.1
//! that records every request and answers according to a [`Behavior`] that can change at
//! runtime (idempotent or not, failing, slow, hanging, "did it but answered 500"). Used by
//! `demo`, the tests and the benchmarks.
//!
//! It accepts `POST` on any path with an `Idempotency-Key` header and the JSON body
//! `{"eventoId", "pedidoId", "valorCentavos"}`; a success is `200 {"id": "<n>", "recebido": true}`.
//! It never logs bodies or header values.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use axum::Router;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Where to listen and how to answer at first.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// Default `127.0.0.1:0`: a free loopback port.
    pub addr: SocketAddr,
    pub behavior: Behavior,
    /// Keep every request (`received()`) and every key (`deliveries()`); default true. Off, the
    /// sink keeps only counts, so a benchmark of millions of keys measures the worker's memory,
    /// not the sink's. Deduplication still remembers keys.
    pub record: bool,
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            addr: (Ipv4Addr::LOCALHOST, 0).into(),
            behavior: Behavior::default(),
            record: true,
        }
    }
}

/// How the sink answers. The default accepts everything, counts every request as a new
/// delivery (a non-idempotent provider) and answers at once.
///
/// Checked in this order: `fail_status`, `fail_for`, `fail_first`, `fail_keys`, then (with
/// `dedup`) a key already delivered, then a new delivery, answered 500 if `accept_then_fail`.
/// Every error answer but `accept_then_fail`'s carries `retry_after`, when set. A request is
/// recorded, and its outcome decided, when it arrives; `delay` only postpones the answer, so a
/// request cut by the client's timeout still counts as delivered — as with a real provider that
/// did the work but answered too late.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Behavior {
    /// An idempotent provider: a key already delivered gets 200 with its first response and is
    /// not counted again.
    pub dedup: bool,
    /// Answer this status to every request, delivering nothing.
    pub fail_status: Option<u16>,
    /// Every request arriving within this long of when this behaviour was set (or the sink
    /// started) fails with `fail_with`: an outage of that length, then recovery.
    pub fail_for: Duration,
    /// The next N requests (counted from when this behaviour was set) fail with `fail_with`.
    pub fail_first: usize,
    /// These keys fail with `fail_with`, delivering nothing.
    pub fail_keys: HashSet<String>,
    /// The status of `fail_for`, `fail_first` and `fail_keys` answers; default 500.
    pub fail_with: Option<u16>,
    /// A `Retry-After` header on error answers.
    pub retry_after: Option<RetryAfter>,
    /// Wait this long before answering. Longer than the client's timeout = a hanging provider.
    pub delay: Duration,
    /// Count the delivery, then answer 500: the provider did it, the client cannot know.
    pub accept_then_fail: bool,
}

/// A `Retry-After` header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// `Retry-After: N` (delay-seconds).
    Seconds(u64),
    /// `Retry-After: <HTTP-date>` this long after the answer, in whole seconds (the date has no
    /// finer resolution, so the instant it names is up to a second earlier than this).
    DateIn(Duration),
}

impl RetryAfter {
    fn header_value(self) -> String {
        match self {
            RetryAfter::Seconds(n) => n.to_string(),
            RetryAfter::DateIn(d) => {
                let at = chrono::Utc::now() + chrono::Duration::from_std(d).unwrap_or_default();
                at.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
            }
        }
    }
}

/// What the sink did with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A new delivery, answered 200.
    Delivered,
    /// `dedup`: the key was already delivered; answered 200 with the first response.
    Replayed,
    /// Answered an error status (`fail_status`, `fail_for`, `fail_first`, `fail_keys`); nothing
    /// delivered.
    Failed,
    /// `accept_then_fail`: delivered, but answered 500.
    DeliveredThenFailed,
    /// No `Idempotency-Key` header or a body that is not JSON: answered 400.
    BadRequest,
}

impl Outcome {
    /// Whether the request counted as a new delivery.
    pub fn is_new_delivery(self) -> bool {
        matches!(self, Outcome::Delivered | Outcome::DeliveredThenFailed)
    }
}

/// One request as received, in arrival order.
#[derive(Debug, Clone)]
pub struct Received {
    /// The `Idempotency-Key` header; empty when it was missing (answered 400).
    pub key: String,
    /// The JSON body; `Null` when it was not JSON (answered 400).
    pub body: Value,
    pub authorization: Option<String>,
    /// When the request arrived (before any `delay`).
    pub at: Instant,
    /// The status it was (or, while delayed, will be) answered with.
    pub status: u16,
    pub outcome: Outcome,
}

/// A running sink. Dropping it stops the server; [`Sink::shutdown`] also waits for it.
#[derive(Debug)]
pub struct Sink {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<Recorder>,
    /// Wakes delayed answers at shutdown, so a "hanging" request cannot hold the server.
    stopping: watch::Receiver<bool>,
}

#[derive(Debug)]
struct Recorder {
    behavior: Arc<Behavior>,
    record: bool,
    requests: usize,
    fail_first_left: usize,
    /// When the behaviour was set (for `fail_for`).
    behavior_since: Instant,
    received: Vec<Received>,
    deliveries: HashMap<String, Delivery>,
    delivery_total: usize,
    next_id: u64,
    /// Requests received and not yet answered, and the most there ever were at once.
    in_flight: usize,
    peak_in_flight: usize,
}

#[derive(Debug)]
struct Delivery {
    count: usize,
    /// The first successful answer, replayed to duplicates when `dedup` is on.
    response: Bytes,
}

/// What a request gets back, decided under the lock and sent after it is released.
struct Answer {
    status: u16,
    outcome: Outcome,
    body: Bytes,
    delay: Duration,
    retry_after: Option<RetryAfter>,
}

const ERROR_BODY: &[u8] = br#"{"erro":"falha simulada"}"#;
const BAD_REQUEST_BODY: &[u8] = br#"{"erro":"Idempotency-Key e corpo JSON sao obrigatorios"}"#;

impl Sink {
    /// Binds `config.addr` and serves until [`Sink::shutdown`] or drop.
    pub async fn start(config: SinkConfig) -> std::io::Result<Sink> {
        let listener = tokio::net::TcpListener::bind(config.addr).await?;
        let addr = listener.local_addr()?;
        let (stop, stopping) = watch::channel(false);
        let shared = Arc::new(Shared {
            state: Mutex::new(Recorder::new(config.behavior, config.record)),
            stopping: stopping.clone(),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        // Small answers on keep-alive connections: without NODELAY, Nagle adds 40 ms each.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let mut signal = stopping;
        let task = tokio::spawn(async move {
            let stopped = async move {
                let _ = signal.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::warn!(error = %e, "sink server failed");
            }
        });
        tracing::debug!(%addr, "sink listening");
        Ok(Sink {
            addr,
            shared,
            stop,
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/` — any path is accepted.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Every request so far, in arrival order, failed ones included.
    pub fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    /// How many times each key was accepted as a new delivery.
    pub fn deliveries(&self) -> HashMap<String, usize> {
        self.lock()
            .deliveries
            .iter()
            .map(|(k, d)| (k.clone(), d.count))
            .collect()
    }

    /// New deliveries over all keys (the sum of [`Sink::deliveries`]), without copying them.
    pub fn delivery_count(&self) -> usize {
        self.lock().delivery_total
    }

    pub fn request_count(&self) -> usize {
        self.lock().requests
    }

    /// The most requests the sink has held at once, received and not yet answered (a `delay`
    /// holds each one for that long).
    pub fn peak_in_flight(&self) -> usize {
        self.lock().peak_in_flight
    }

    pub fn behavior(&self) -> Behavior {
        (*self.lock().behavior).clone()
    }

    /// Applies to requests arriving from now on; restarts the `fail_first` count.
    pub fn set_behavior(&self, behavior: Behavior) {
        let mut state = self.lock();
        state.fail_first_left = behavior.fail_first;
        state.behavior_since = Instant::now();
        state.behavior = Arc::new(behavior);
    }

    /// Stops accepting, wakes delayed answers, and waits (briefly) for open connections.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(mut task) = self.task.take() {
            if tokio::time::timeout(Duration::from_secs(2), &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Recorder> {
        lock(&self.shared)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A panicking test thread must not poison the recorder for the assertions that follow.
fn lock(shared: &Shared) -> MutexGuard<'_, Recorder> {
    shared.state.lock().unwrap_or_else(|e| e.into_inner())
}

impl Recorder {
    fn new(behavior: Behavior, record: bool) -> Self {
        Recorder {
            record,
            requests: 0,
            fail_first_left: behavior.fail_first,
            behavior_since: Instant::now(),
            behavior: Arc::new(behavior),
            received: Vec::with_capacity(1024),
            deliveries: HashMap::new(),
            delivery_total: 0,
            next_id: 0,
            in_flight: 0,
            peak_in_flight: 0,
        }
    }

    /// Decides the answer and records the request, in one critical section so that arrival
    /// order, `fail_first` and dedup agree under concurrency.
    fn record(
        &mut self,
        key: String,
        body: Option<Value>,
        authorization: Option<String>,
    ) -> Answer {
        let answer = self.decide(&key, body.is_some());
        self.requests += 1;
        self.in_flight += 1;
        self.peak_in_flight = self.peak_in_flight.max(self.in_flight);
        if !self.record {
            return answer;
        }
        self.received.push(Received {
            key,
            body: body.unwrap_or(Value::Null),
            authorization,
            at: Instant::now(),
            status: answer.status,
            outcome: answer.outcome,
        });
        answer
    }

    fn decide(&mut self, key: &str, body_ok: bool) -> Answer {
        let behavior = Arc::clone(&self.behavior);
        let answer = |status, outcome, body: Bytes| Answer {
            status,
            outcome,
            body,
            delay: behavior.delay,
            retry_after: None,
        };
        if key.is_empty() || !body_ok {
            return answer(
                400,
                Outcome::BadRequest,
                Bytes::from_static(BAD_REQUEST_BODY),
            );
        }
        let fail = |status| Answer {
            retry_after: behavior.retry_after,
            ..answer(status, Outcome::Failed, Bytes::from_static(ERROR_BODY))
        };
        if let Some(status) = behavior.fail_status {
            return fail(status);
        }
        let status = behavior.fail_with.unwrap_or(500);
        if self.behavior_since.elapsed() < behavior.fail_for {
            return fail(status);
        }
        if self.fail_first_left > 0 {
            self.fail_first_left -= 1;
            return fail(status);
        }
        if behavior.fail_keys.contains(key) {
            return fail(status);
        }
        if behavior.dedup {
            if let Some(first) = self.deliveries.get(key) {
                return answer(200, Outcome::Replayed, first.response.clone());
            }
        }
        let response = self.deliver(key);
        if behavior.accept_then_fail {
            return answer(
                500,
                Outcome::DeliveredThenFailed,
                Bytes::from_static(ERROR_BODY),
            );
        }
        answer(200, Outcome::Delivered, response)
    }

    fn deliver(&mut self, key: &str) -> Bytes {
        self.next_id += 1;
        self.delivery_total += 1;
        let response = Bytes::from(format!(r#"{{"id":"{}","recebido":true}}"#, self.next_id));
        if !self.record && !self.behavior.dedup {
            return response;
        }
        match self.deliveries.get_mut(key) {
            Some(first) => first.count += 1,
            None => {
                let first = Delivery {
                    count: 1,
                    response: response.clone(),
                };
                self.deliveries.insert(key.to_owned(), first);
            }
        }
        response
    }
}

/// A request counted in flight until it is answered, or its connection is gone.
struct InFlight<'a>(&'a Shared);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        lock(self.0).in_flight -= 1;
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let key = text("idempotency-key").unwrap_or_default();
    let authorization = text(header::AUTHORIZATION.as_str());
    let json = serde_json::from_slice::<Value>(&body).ok();
    let answer = lock(&shared).record(key, json, authorization);
    // Answered (or abandoned by the client) when this is dropped.
    let _in_flight = InFlight(&shared);
    if !answer.delay.is_zero() {
        let mut stopping = shared.stopping.clone();
        tokio::select! {
            _ = tokio::time::sleep(answer.delay) => {}
            _ = stopping.wait_for(|s| *s) => {}
        }
    }

    tracing::trace!(status = answer.status, outcome = ?answer.outcome, "sink answered");
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        answer.body,
    )
        .into_response();
    let retry_after = answer.retry_after.map(RetryAfter::header_value);
    if let Some(value) = retry_after.and_then(|v| header::HeaderValue::from_str(&v).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}
