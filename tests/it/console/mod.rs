//! The web console, against the real binary (`replay-ledger console`, `serve --console-addr`):
//! HTTP-level rules (`http.rs`, `sessions.rs`), what the pages show and record (`pages.rs`), and
//! the whole daily loop in a real Chromium (`browser.rs`). Helpers here: a console process, an
//! HTTP client that keeps one session's cookie and never follows redirects, accounts made with
//! `users add`.

mod approval_binding;
mod approval_browser;
mod bounded;
mod browser;
mod decisions_browser;
mod demo;
mod history;
mod hostile;
mod http;
mod interrupt_browser;
mod lists_browser;
mod live;
mod order_page;
mod orders;
mod pace;
mod pages;
mod phone;
mod proposal_browser;
mod rebuild;
mod requests;
mod requests_browser;
mod resend_browser;
mod scheduled;
mod sessions;
mod sql_rules;
mod truth;
mod words;
mod workplace;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use reqwest::header::{COOKIE, SET_COOKIE};
use reqwest::StatusCode;

use crate::helpers::*;

pub(crate) const JOB: &str = "replay-2026-10-14-v2";
pub(crate) const PASSWORD: &str = "correct horse battery staple";

/// A console process, killed when dropped.
pub(crate) struct ConsoleProc {
    child: tokio::process::Child,
    pub addr: SocketAddr,
    log: PathBuf,
}

/// A loopback address nobody listens on right now.
pub(crate) fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address")
}

impl ConsoleProc {
    /// `replay-ledger console --addr FREE --insecure-cookies ARGS`, once `/login` answers.
    pub async fn start(db_url: &str, jobs: &Path, args: &[&str]) -> ConsoleProc {
        let addr = free_addr();
        let mut all = vec!["console", "--insecure-cookies"];
        all.extend_from_slice(args);
        let addr_text = addr.to_string();
        all.extend(["--addr", &addr_text]);
        ConsoleProc::spawn(db_url, jobs, &all, addr).await
    }

    /// The binary with `args` (which make it listen on `addr`), once `/login` answers there.
    pub async fn spawn(db_url: &str, jobs: &Path, args: &[&str], addr: SocketAddr) -> ConsoleProc {
        let log = jobs.join(format!("console-{}.log", addr.port()));
        let file = std::fs::File::create(&log).expect("create the log file");
        let child = command(db_url, jobs)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone the log handle"))
            .stderr(file)
            .spawn()
            .expect("spawn replay-ledger console");
        let console = ConsoleProc { child, addr, log };
        let url = console.url("/login");
        let up = eventually(PROCESS_LIMIT, || async {
            reqwest::get(&url).await.is_ok_and(|r| r.status() == 200)
        })
        .await;
        assert!(up, "the console did not answer; log:\n{}", console.log());
        console
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ConsoleProc {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Creates an account with `users add … --password-stdin` (the real binary).
pub(crate) async fn add_user(db_url: &str, jobs: &Path, email: &str, role: &str) {
    use tokio::io::AsyncWriteExt;
    let mut child = command(db_url, jobs)
        .args(["users", "add", email, "--role", role, "--password-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn users add");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(format!("{PASSWORD}\n").as_bytes())
        .await
        .expect("write the password");
    drop(stdin);
    let out = finish(child, "users add").await;
    assert_success(&out, "users add");
}

/// An answer, read whole.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn location(&self) -> Option<&str> {
        self.headers.get("location").and_then(|v| v.to_str().ok())
    }

    /// The session token a `Set-Cookie` of this answer gives, if any.
    pub fn session_cookie(&self) -> Option<String> {
        self.headers
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.split(';').next()?.strip_prefix("rl_console="))
            .find(|t| !t.is_empty())
            .map(str::to_string)
    }

    /// The value of the first hidden `csrf_token` field of the page.
    pub fn csrf(&self) -> Option<String> {
        self.field("csrf_token")
    }

    /// The value of the first input named `name` on the page (a form's hidden field).
    pub fn field(&self, name: &str) -> Option<String> {
        let marker = format!("name=\"{name}\" value=\"");
        let at = self.body.find(&marker)? + marker.len();
        let end = self.body[at..].find('"')?;
        Some(self.body[at..at + end].to_string())
    }
}

/// A browser of one session, for HTTP-level tests: keeps the session cookie, follows no
/// redirect, and may claim to come from an address (for a console that trusts the proxy).
#[derive(Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    pub base: String,
    pub token: Option<String>,
    pub forwarded_for: Option<String>,
}

impl Client {
    pub fn new(console: &ConsoleProc) -> Client {
        Client::at(&console.url(""))
    }

    pub fn at(base: &str) -> Client {
        Client {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(60))
                .build()
                .expect("an HTTP client"),
            base: base.to_string(),
            token: None,
            forwarded_for: None,
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.header(COOKIE, format!("rl_console={token}"));
        }
        if let Some(address) = &self.forwarded_for {
            request = request.header("x-forwarded-for", address);
        }
        request
    }

    async fn read(response: reqwest::Response) -> Answer {
        Answer {
            status: response.status(),
            headers: response.headers().clone(),
            body: response.text().await.expect("read the body"),
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        let response = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .expect("GET");
        Client::read(response).await
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Answer {
        let response = self
            .request(reqwest::Method::POST, path)
            .form(form)
            .send()
            .await
            .expect("POST");
        Client::read(response).await
    }

    /// `POST /login`; keeps the new session's token when it succeeds.
    pub async fn login(&mut self, email: &str, password: &str) -> Answer {
        let answer = self
            .post("/login", &[("email", email), ("password", password)])
            .await;
        if let Some(token) = answer.session_cookie() {
            self.token = Some(token);
        }
        answer
    }

    /// Logs in, asserting the contract's 303 to `/`.
    pub async fn logged_in(console: &ConsoleProc, email: &str) -> Client {
        let mut client = Client::new(console);
        let answer = client.login(email, PASSWORD).await;
        assert_eq!(answer.status, 303, "login of {email}: {}", answer.body);
        assert_eq!(answer.location(), Some("/"));
        client
    }

    /// The CSRF token of this session, read from a page.
    pub async fn csrf(&self) -> String {
        self.get("/")
            .await
            .csrf()
            .expect("a csrf_token on the page")
    }
}

/// A database with 10 orders of 2026-10-14 under the buggy commission, a gated job (its real run
/// needs an approved simulation) whose provider does not deduplicate, and a finished simulation.
/// The provider is up but answers 500 to everything: each message of a real run is called once
/// and ends `incerto`, in the review queue (a refused connection would be released instead).
pub(crate) struct Simulated {
    pub db: TestDb,
    pub jobs: tempfile::TempDir,
    /// Held so it keeps answering while the test runs.
    pub _provider: testkit::sink::Sink,
}

pub(crate) async fn simulated() -> Simulated {
    let events = paid_orders(10);
    let db = seeded_db(&events, &[]).await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        extra: "require_approved_simulation: true\n".into(),
        ..JobSpec::default()
    };
    let provider = sink(testkit::sink::Behavior {
        fail_status: Some(500),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &spec);
    run_job(&db, jobs.path(), JOB, Some(true), false)
        .await
        .expect("the simulation");
    Simulated {
        db,
        jobs,
        _provider: provider,
    }
}

/// The finance account most console tests sign in as.
pub(crate) const FINANCE: &str = "ana@financeiro.example";

/// A console over `s` and a browser logged in as a new account `email` of `role`.
pub(crate) async fn signed_in(s: &Simulated, email: &str, role: &str) -> (ConsoleProc, Client) {
    add_user(&s.db.url, s.jobs.path(), email, role).await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let client = Client::logged_in(&console, email).await;
    (console, client)
}

/// An `incerto` key, as a crashed non-idempotent call leaves it.
pub(crate) async fn uncertain(db: &TestDb, event_id: &str) -> String {
    let key = format!("{event_id}:notificar-vendedor");
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id, motivo_incerto, incerto_desde)
        values ($1, $2, 'notificar-vendedor', 'incerto', $3, 'tempo-esgotado', now())
        "#,
    )
    .bind(&key)
    .bind(event_id)
    .bind(JOB)
    .execute(&db.pool)
    .await
    .expect("an incerto key");
    key
}

/// The audit trail as (quem, acao, alvo), oldest first.
pub(crate) async fn audit(db: &TestDb) -> Vec<(String, String, Option<String>)> {
    sqlx::query_as("select quem, acao, alvo from console_auditoria order by id")
        .fetch_all(&db.pool)
        .await
        .expect("read the audit")
}

/// The named fields of a page's form, as the browser would post them.
pub(crate) fn form_fields(page: &Answer, names: &[&'static str]) -> Vec<(&'static str, String)> {
    names
        .iter()
        .map(|&name| {
            let value = page
                .field(name)
                .unwrap_or_else(|| panic!("a {name} field on the page: {}", page.body));
            (name, value)
        })
        .collect()
}

/// Posts `form` to `path`.
pub(crate) async fn post_fields(
    client: &Client,
    path: &str,
    form: &[(&'static str, String)],
) -> Answer {
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    client.post(path, &pairs).await
}
