//! The report as an e-mail (lettre) and how it leaves: SMTP from `SMTP_URL` (lettre's URL form:
//! `smtp://host:25`, `smtp://user:pass@host:587?tls=required` for STARTTLS, `smtps://…:465` for
//! implicit TLS; rustls, no OpenSSL), or, without `SMTP_URL`, an `.eml` file in `outbox/`.
//! `REPORT_FROM` is the sender. Credentials come from the URL or from `SMTP_USERNAME` and
//! `SMTP_PASSWORD`. The URL and the credentials are held as secrets: only the URL's scheme, host
//! and port are ever shown.
//!
//! Credentials are never sent without TLS to a host off this machine (`smtp://` without
//! `tls=required`: `tls=opportunistic` is stripped by whoever sits in between) unless the URL says
//! `allow_insecure=true`; `check` refuses such a URL, and `serve` warns at start when it is allowed.
//!
//! # Which failures mean "certainly not accepted"
//!
//! An SMTP server takes responsibility for a message only when it answers 250 to the end of DATA.
//! A failed send is classified so that only a message the server certainly did not accept is
//! retried ([`SendError::NotAccepted`]); anything else is [`SendError::Unknown`] and the report ends
//! `incerto` in the ledger:
//!
//! - a pre-flight connection (connect, TLS, EHLO, AUTH, NOOP, QUIT — lettre's
//!   `test_connection`) fails or times out: no MAIL command was ever sent → not accepted;
//! - the send fails with a 4xx or 5xx reply, at any step up to and including the reply to the end
//!   of DATA (RFC 5321 §4.2.5: a negative reply there means the server did not take the message),
//!   or with a TLS or client-side error (lettre raises those only before MAIL), or the connection
//!   is refused → not accepted;
//! - anything else — an I/O error, a garbled or missing reply, the send timing out — may have
//!   happened after the server accepted the data → unknown.

use super::smtp_url::{allows_insecure, check_smtp_url, in_clear, redacted};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::message::{Attachment, Mailbox, MultiPart};
use lettre::transport::smtp;
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use secrecy::{ExposeSecret, SecretString};

use super::{render, Report};

/// The default outbox, relative to the working directory.
pub const OUTBOX: &str = "outbox";
/// The sender when `REPORT_FROM` is unset and reports go to files.
const DEFAULT_FROM: &str = "replay-ledger <replay-ledger@localhost>";

/// Who gets a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipients {
    pub to: Vec<String>,
    pub cc: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// Our own reason, naming the part of the URL at fault, never its text (lettre's message may
    /// quote a parameter's value, and the URL may hold a password).
    #[error("SMTP_URL is not a valid SMTP URL (smtp://[user:password@]host[:port][?tls=required|opportunistic] or smtps://…): {0}")]
    SmtpUrl(String),
    #[error("REPORT_FROM is required with SMTP_URL: the sender address of the reports")]
    MissingFrom,
    #[error("SMTP_URL would send the SMTP password without TLS to {target}, off this machine: use smtps:// or ?tls=required, or accept it with allow_insecure=true in SMTP_URL (serve warns at start)")]
    Cleartext { target: String },
    #[error("{what} is not a valid e-mail address: {value}")]
    Address { what: &'static str, value: String },
    #[error("building the e-mail: {0}")]
    Build(String),
}

/// Why a send failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The server certainly did not accept the message: safe to try again.
    #[error("not accepted ({class})")]
    NotAccepted { class: String },
    /// The server may have accepted it: must not be sent again automatically.
    #[error("outcome unknown ({class})")]
    Unknown { class: String },
}

enum Transport {
    Smtp {
        transport: AsyncSmtpTransport<Tokio1Executor>,
        /// `scheme://host:port`, for messages.
        target: String,
    },
    Outbox(PathBuf),
}

/// How reports leave this process, as the process was started with it: `SMTP_URL`,
/// `SMTP_USERNAME`, `SMTP_PASSWORD`, `REPORT_FROM` and `CONSOLE_URL`, read by the edge's
/// settings and handed down.
#[derive(Clone, Default)]
pub struct MailSettings {
    pub smtp_url: Option<SecretString>,
    pub username: Option<String>,
    pub password: Option<SecretString>,
    pub from: Option<String>,
    /// The console's public address, for the links of a mailed report.
    pub console_url: Option<String>,
}

impl std::fmt::Debug for MailSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MailSettings")
            .field(
                "smtp_url",
                &self.smtp_url.as_ref().map(|u| redacted(u.expose_secret())),
            )
            .field("username", &self.username.as_ref().map(|_| "…"))
            .field("from", &self.from)
            .field("console_url", &self.console_url)
            .finish()
    }
}

/// How reports leave this process.
pub struct Mailer {
    transport: Transport,
    from: Mailbox,
    /// The pre-flight connection and the send each give up after this.
    timeout: Duration,
    /// Where a mailed report links to (`CONSOLE_URL`, when it is an http(s) URL).
    console_url: Option<String>,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailer")
            .field("target", &self.target())
            .field("from", &self.from.to_string())
            .finish()
    }
}

impl Mailer {
    /// `SMTP_URL` (optional) and `REPORT_FROM` of the settings; without `SMTP_URL`, files in
    /// `outbox/`. Reports link to `CONSOLE_URL` when it is an http(s) URL.
    pub fn from_settings(settings: &MailSettings) -> Result<Mailer, MailError> {
        let from = settings.from.clone().filter(|s| !s.trim().is_empty());
        let url = settings
            .smtp_url
            .as_ref()
            .filter(|s| !s.expose_secret().trim().is_empty());
        let mailer = match url {
            Some(url) => {
                let from = from.ok_or(MailError::MissingFrom)?;
                let credentials = match (&settings.username, &settings.password) {
                    (Some(user), Some(password)) => Some((user.clone(), password.clone())),
                    _ => None,
                };
                Mailer::smtp_with(url, &from, credentials)?
            }
            None => Mailer::outbox(OUTBOX, from.as_deref())?,
        };
        Ok(mailer.with_console_url(settings.console_url.as_deref()))
    }

    /// Links the reports it sends to the console at `url` when it is an `http(s)://` URL without
    /// a query; anything else is ignored with a warning, so a typo never puts a wrong link in a
    /// mail.
    pub fn with_console_url(mut self, url: Option<&str>) -> Mailer {
        self.console_url = super::console_url(url);
        self
    }

    /// The console's address the reports link to, if any.
    pub fn console_url(&self) -> Option<String> {
        self.console_url.clone()
    }

    /// Sends through the SMTP server of `url` (lettre's URL form).
    pub fn smtp(url: &SecretString, from: &str) -> Result<Mailer, MailError> {
        Mailer::smtp_with(url, from, None)
    }

    /// Sends through the SMTP server of `url`, authenticating with `credentials` (user, password)
    /// instead of the URL's when given (a password kept out of the URL: `SMTP_USERNAME` and
    /// `SMTP_PASSWORD`).
    pub fn smtp_with(
        url: &SecretString,
        from: &str,
        credentials: Option<(String, SecretString)>,
    ) -> Result<Mailer, MailError> {
        let parsed = check_smtp_url(url.expose_secret()).map_err(MailError::SmtpUrl)?;
        if in_clear(&parsed, credentials.is_some()) && !allows_insecure(&parsed) {
            return Err(MailError::Cleartext {
                target: redacted(url.expose_secret()),
            });
        }
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(url.expose_secret())
            .map_err(|_| {
                MailError::SmtpUrl(
                    "the SMTP client refused it (its message is not shown: it may quote the URL)"
                        .into(),
                )
            })?
            .timeout(Some(Duration::from_secs(15)));
        if let Some((user, password)) = credentials {
            builder =
                builder.credentials(Credentials::new(user, password.expose_secret().to_string()));
        }
        let transport = builder.build();
        Ok(Mailer {
            transport: Transport::Smtp {
                transport,
                target: redacted(url.expose_secret()),
            },
            from: mailbox("REPORT_FROM", from)?,
            timeout: Duration::from_secs(120),
            console_url: None,
        })
    }

    /// Writes `.eml` files into `dir`.
    pub fn outbox(dir: impl Into<PathBuf>, from: Option<&str>) -> Result<Mailer, MailError> {
        Ok(Mailer {
            transport: Transport::Outbox(dir.into()),
            from: mailbox("REPORT_FROM", from.unwrap_or(DEFAULT_FROM))?,
            timeout: Duration::from_secs(120),
            console_url: None,
        })
    }

    /// How long the pre-flight connection and the send may each take [120 s].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The warning for `serve`'s start when `SMTP_URL` sends the SMTP password without TLS off
    /// this machine (allowed by `allow_insecure=true`; else every send is refused, and said so).
    pub fn cleartext_warning(settings: &MailSettings) -> Option<String> {
        let url = settings.smtp_url.as_ref()?.expose_secret().to_string();
        let parsed = check_smtp_url(&url).ok()?;
        let env_credentials = settings.username.is_some() && settings.password.is_some();
        if !in_clear(&parsed, env_credentials) {
            return None;
        }
        let target = redacted(&url);
        Some(if allows_insecure(&parsed) {
            format!("SMTP_URL sends the SMTP password in clear (no TLS) to {target}, off this machine (allow_insecure=true)")
        } else {
            format!("SMTP_URL would send the SMTP password in clear (no TLS) to {target}, off this machine: reports will not be sent (use TLS, or allow_insecure=true)")
        })
    }

    /// `smtp://host:port` or the outbox directory; never credentials.
    pub fn target(&self) -> String {
        match &self.transport {
            Transport::Smtp { target, .. } => target.clone(),
            Transport::Outbox(dir) => format!("{}/", dir.display()),
        }
    }

    /// The outbox directory, when reports go to files.
    pub fn outbox_dir(&self) -> Option<&Path> {
        match &self.transport {
            Transport::Outbox(dir) => Some(dir),
            Transport::Smtp { .. } => None,
        }
    }

    /// The report as a message: text and HTML alternatives, and the CSV of the diff attached.
    pub fn message(
        &self,
        report: &Report,
        recipients: &Recipients,
        message_id: &str,
    ) -> Result<Message, MailError> {
        let mut builder = Message::builder()
            .from(self.from.clone())
            .subject(render::subject(report))
            .message_id(Some(format!("<{message_id}@replay-ledger.invalid>")));
        for to in &recipients.to {
            builder = builder.to(mailbox("to", to)?);
        }
        for cc in &recipients.cc {
            builder = builder.cc(mailbox("cc", cc)?);
        }
        let body = MultiPart::alternative_plain_html(render::text(report), render::html(report));
        let built = match &report.execution {
            Some(execution) => builder.multipart(
                MultiPart::mixed().multipart(body).singlepart(
                    Attachment::new(render::csv_name(execution)).body(
                        render::csv(execution),
                        ContentType::parse("text/csv; charset=utf-8")
                            .map_err(|e| MailError::Build(e.to_string()))?,
                    ),
                ),
            ),
            None => builder.multipart(body),
        };
        built.map_err(|e| MailError::Build(e.to_string()))
    }

    /// A message of text and HTML alternatives, no attachment (a verification's findings).
    pub fn plain_message(
        &self,
        subject: &str,
        recipients: &Recipients,
        message_id: &str,
        text: String,
        html: String,
    ) -> Result<Message, MailError> {
        let mut builder = Message::builder()
            .from(self.from.clone())
            .subject(replay_ledger_core::shared::text::inert(subject))
            .message_id(Some(format!("<{message_id}@replay-ledger.invalid>")));
        for to in &recipients.to {
            builder = builder.to(mailbox("to", to)?);
        }
        builder
            .multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| MailError::Build(e.to_string()))
    }

    /// Sends by SMTP; returns the server's reply code. (An outbox mailer sends nothing: callers
    /// check [`Mailer::outbox_dir`] first.)
    pub async fn send(&self, message: &Message) -> Result<String, SendError> {
        let Transport::Smtp { transport, .. } = &self.transport else {
            return Err(not_accepted("no SMTP transport"));
        };
        match tokio::time::timeout(self.timeout, transport.test_connection()).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return Err(not_accepted("noop refused")),
            Ok(Err(e)) => return Err(not_accepted(&class(&e))),
            Err(_) => return Err(not_accepted("timeout before sending")),
        }
        match tokio::time::timeout(self.timeout, transport.send(message.clone())).await {
            Ok(Ok(response)) => Ok(response.code().to_string()),
            Ok(Err(e)) => Err(classify(&e)),
            Err(_) => Err(SendError::Unknown {
                class: "timeout".into(),
            }),
        }
    }
}

/// Writes a message as an `.eml` file, atomically (a temporary file renamed into place), so a
/// reader of the outbox never sees half a message.
pub fn write_eml(path: &Path, message: &Message) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let mut file = tempfile::NamedTempFile::new_in(&dir)?;
    std::io::Write::write_all(&mut file, &message.formatted())?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A file name for a ledger key: `finance-daily:x:simulacao#1:email` →
/// `finance-daily_x_simulacao_1_email.eml`.
pub fn eml_name(key: &str) -> String {
    let stem: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{stem}.eml")
}

/// The failure classes of the module documentation.
fn classify(e: &smtp::Error) -> SendError {
    let class = class(e);
    if e.is_transient() || e.is_permanent() || e.is_tls() || e.is_client() || refused(e) {
        SendError::NotAccepted { class }
    } else {
        SendError::Unknown { class }
    }
}

/// A short class for logs and the attempt history: `smtp 550`, `refused`, `tls`, `network`, …
/// never the server's text (it may quote addresses).
fn class(e: &smtp::Error) -> String {
    if let Some(code) = e.status() {
        format!("smtp {code}")
    } else if refused(e) {
        "refused".into()
    } else if e.is_timeout() {
        "timeout".into()
    } else if e.is_tls() {
        "tls".into()
    } else if e.is_client() {
        "client".into()
    } else if e.is_response() {
        "response".into()
    } else {
        "network".into()
    }
}

/// The connection was refused: only a connect can be refused, so nothing was sent.
fn refused(e: &smtp::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        source = err.source();
    }
    false
}

fn not_accepted(class: &str) -> SendError {
    SendError::NotAccepted {
        class: class.to_string(),
    }
}

fn mailbox(what: &'static str, value: &str) -> Result<Mailbox, MailError> {
    value.trim().parse().map_err(|_| MailError::Address {
        what,
        value: value.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smtp_target_never_shows_credentials() {
        let url = SecretString::from("smtp://user:s3cret@mail.example.com:587?tls=required");
        let mailer = Mailer::smtp(&url, "relatorios@example.com").unwrap();
        assert_eq!(mailer.target(), "smtp://mail.example.com:587");
        assert!(!format!("{mailer:?}").contains("s3cret"));
    }

    #[test]
    fn an_invalid_smtp_url_is_refused_without_echoing_it() {
        let url = SecretString::from("ftp://user:s3cret@mail.example.com");
        let err = Mailer::smtp(&url, "relatorios@example.com").unwrap_err();
        assert!(matches!(err, MailError::SmtpUrl(_)));
        assert!(!err.to_string().contains("s3cret"));
    }

    #[test]
    fn each_part_of_an_smtp_url_is_checked_and_named_without_echoing_it() {
        let err = |url: &str| {
            Mailer::smtp(&SecretString::from(url), "relatorios@example.com")
                .unwrap_err()
                .to_string()
        };
        for (url, expected) in [
            (
                "smtp://u:s3cret@h:25?tls=s3cret",
                "the `tls` parameter must be `required` or `opportunistic`",
            ),
            (
                "smtp://u:s3cret@h:25?allow_insecure=s3cret",
                "the `allow_insecure` parameter must be `true` or `false`",
            ),
            (
                "smtp://u:s3cret@h:25?tsl=required&s3cret=1",
                "a parameter other than `tls` and `allow_insecure`",
            ),
            (
                "smtpx://u:s3cret@h:25",
                "the scheme must be `smtp` or `smtps`",
            ),
            (
                "smtp://u:s3cret@h:99999",
                "it does not parse (invalid port number)",
            ),
            ("s3cret", "it does not parse"),
        ] {
            let err = err(url);
            assert!(
                err.contains(expected) && !err.contains("s3cret"),
                "{url}: {err}"
            );
        }
    }

    #[test]
    fn a_password_without_tls_off_the_machine_needs_allow_insecure() {
        let mailer = |url: &str, env: bool| {
            let credentials = env.then(|| ("u".to_string(), SecretString::from("pw")));
            Mailer::smtp_with(&SecretString::from(url), "r@example.com", credentials)
        };
        for (url, env) in [
            ("smtp://u:s3cret@mail.example.com:25", false),
            ("smtp://mail.example.com:587?tls=opportunistic", true),
            ("smtp://u:s3cret@[2001:db8::1]", false),
        ] {
            let err = mailer(url, env).unwrap_err();
            assert!(matches!(err, MailError::Cleartext { .. }), "{url}: {err}");
            assert!(!err.to_string().contains("s3cret"), "{err}");
        }
        for (url, env) in [
            ("smtp://u:pw@mail.example.com:25?allow_insecure=true", false),
            ("smtp://u:pw@mail.example.com:587?tls=required", false),
            ("smtps://mail.example.com", true),
            ("smtp://u:pw@localhost:25", false),
            ("smtp://mail.example.com:25", false),
            ("smtp://u@mail.example.com:25", false),
        ] {
            assert!(mailer(url, env).is_ok(), "{url}");
        }
    }

    #[test]
    fn eml_names_keep_only_safe_characters() {
        assert_eq!(
            eml_name("finance-daily:r-1:simulacao#2:email"),
            "finance-daily_r-1_simulacao_2_email.eml"
        );
    }
}
