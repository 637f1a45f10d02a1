//! External effects: providers behind one trait, the HTTP webhook that sends the ledger key as the
//! `Idempotency-Key` header, and the per-type limits (concurrency, rate).
//!
//! Nothing here touches the ledger: the applier reserves before calling and settles after.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use secrecy::ExposeSecret;
use serde_json::Value;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::{EffectCatalog, EffectType};

/// A failed call. `Retryable` may succeed if tried again (timeout, connection, 5xx, 408, 429);
/// `Fatal` will not (another 4xx: the request itself is wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EffectError {
    #[error("{class}")]
    Retryable { class: String },
    #[error("{class}")]
    Fatal { class: String },
}

impl EffectError {
    /// A short class for logs and the summary: `timeout`, `connect`, `http 503`, … never a body.
    pub fn class(&self) -> &str {
        match self {
            EffectError::Retryable { class } | EffectError::Fatal { class } => class,
        }
    }

    pub fn is_retryable(&self) -> bool {
        matches!(self, EffectError::Retryable { .. })
    }
}

/// Performs one external effect. `key` is the ledger key; a provider that can deduplicate uses
/// it to do so. Returns the provider's answer, if any, for `resultado`.
#[async_trait]
pub trait Provider: Send + Sync {
    async fn perform(&self, key: &str, body: &Value) -> Result<Option<Value>, EffectError>;
}

/// `POST url` with `Idempotency-Key: <key>`, `Content-Type: application/json` and the configured
/// headers. A 2xx answer is success (its JSON body, if any, is the result); anything else, a
/// timeout or a connection error is a failure.
pub struct WebhookProvider {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: reqwest::header::HeaderMap,
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
            .timeout(effect.webhook.timeout)
            .connect_timeout(effect.webhook.timeout.min(Duration::from_secs(5)))
            .pool_max_idle_per_host(effect.concurrency)
            .build()
            .map_err(|e| EffectError::Fatal {
                class: format!("http client: {e}"),
            })?;
        Ok(WebhookProvider {
            client,
            url: effect.webhook.url.clone(),
            headers,
        })
    }
}

#[async_trait]
impl Provider for WebhookProvider {
    async fn perform(&self, key: &str, body: &Value) -> Result<Option<Value>, EffectError> {
        let response = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await
            .map_err(|e| classify_transport(&e))?;
        let status = response.status();
        if !status.is_success() {
            let class = format!("http {}", status.as_u16());
            return Err(
                if status.is_server_error() || status == 408 || status == 429 {
                    EffectError::Retryable { class }
                } else {
                    EffectError::Fatal { class }
                },
            );
        }
        let bytes = response.bytes().await.map_err(|e| classify_transport(&e))?;
        // A body that is not JSON is not an error: the call succeeded; there is just no result.
        Ok(serde_json::from_slice::<Value>(&bytes).ok())
    }
}

/// A transport failure, named by kind only (reqwest's message may carry the URL and its query).
fn classify_transport(e: &reqwest::Error) -> EffectError {
    let class = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "transport"
    };
    EffectError::Retryable {
        class: class.to_string(),
    }
}

/// Spaces call starts of one type at `1 / rate` seconds.
struct Pacer {
    interval: Duration,
    next: Mutex<Instant>,
}

impl Pacer {
    async fn wait(&self) {
        let start = {
            let mut next = self.next.lock().await;
            let now = Instant::now();
            let start = (*next).max(now);
            *next = start + self.interval;
            start
        };
        tokio::time::sleep_until(start).await;
    }
}

/// One effect type ready to call: its provider, its rules and its limits.
pub struct Effect {
    pub config: EffectType,
    pub provider: Arc<dyn Provider>,
    permits: Arc<Semaphore>,
    pacer: Option<Pacer>,
}

impl Effect {
    pub fn new(config: EffectType, provider: Arc<dyn Provider>) -> Self {
        let pacer = config
            .rate_per_second
            .filter(|r| *r > 0.0)
            .map(|rate| Pacer {
                interval: Duration::from_secs_f64(1.0 / rate),
                next: Mutex::new(Instant::now()),
            });
        Effect {
            permits: Arc::new(Semaphore::new(config.concurrency.max(1))),
            pacer,
            config,
            provider,
        }
    }

    /// Waits for a slot under the type's concurrency limit. Held from before the reservation of a
    /// non-idempotent key until its call returns, so at most `concurrency` such keys are reserved
    /// but not yet sent (invariant 2).
    pub async fn slot(&self) -> OwnedSemaphorePermit {
        Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// Calls the provider, after the type's rate limit allows it.
    pub async fn call(&self, key: &str, body: &Value) -> Result<Option<Value>, EffectError> {
        if let Some(pacer) = &self.pacer {
            pacer.wait().await;
        }
        self.provider.perform(key, body).await
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

    /// The types whose provider deduplicates by key.
    pub fn idempotent_types(&self) -> Vec<String> {
        self.by_type
            .values()
            .filter(|e| e.config.idempotent)
            .map(|e| e.config.name.clone())
            .collect()
    }
}
