//! A real SMTP server on loopback for the report tests: Debian's aiosmtpd running
//! `tests/smtp/server.py` (store, stall, reject or hangup at the end of DATA), storing what it
//! accepts in a Maildir; and the parsing of what it received (mailparse).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use mailparse::MailHeaderMap;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Debian's python, which has aiosmtpd (the `python3` on PATH may not).
const PYTHON: &str = "/usr/bin/python3";

/// A running loopback SMTP server; killed when dropped.
pub struct Smtp {
    pub port: u16,
    pub maildir: PathBuf,
    _child: tokio::process::Child,
    _dir: Option<tempfile::TempDir>,
}

impl Smtp {
    /// A server on a free port with a Maildir of its own.
    pub async fn start(mode: &str) -> Smtp {
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("tempdir");
            let maildir = dir.path().join("maildir");
            if let Some(mut smtp) = Smtp::start_on(free_port(), &maildir, mode).await {
                smtp._dir = Some(dir);
                return smtp;
            }
        }
        panic!("could not start the loopback SMTP server (is python3-aiosmtpd installed? .ci/run installs it)");
    }

    /// A server on `port`, storing into `maildir`; `None` if it could not listen there.
    pub async fn start_on(port: u16, maildir: &Path, mode: &str) -> Option<Smtp> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/smtp/server.py");
        let mut child = tokio::process::Command::new(PYTHON)
            .arg(script)
            .arg(port.to_string())
            .arg(maildir)
            .arg(mode)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn /usr/bin/python3 (python3-aiosmtpd)");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await;
        match ready {
            Ok(Ok(Some(line))) if line == "ready" => Some(Smtp {
                port,
                maildir: maildir.to_path_buf(),
                _child: child,
                _dir: None,
            }),
            _ => None,
        }
    }

    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// The messages stored so far, oldest first.
    pub fn messages(&self) -> Vec<Vec<u8>> {
        messages_in(&self.maildir)
    }
}

/// The messages of a Maildir (`new/`), by file name (which starts with the delivery time).
pub fn messages_in(maildir: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(maildir.join("new")) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| std::fs::read(p).expect("read a stored message"))
        .collect()
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

/// A received report, taken apart.
#[derive(Debug)]
pub struct Received {
    pub subject: String,
    pub from: String,
    pub to: String,
    pub text: String,
    pub html: String,
    /// (file name, content type, bytes) of the attachment, if any.
    pub attachment: Option<(String, String, Vec<u8>)>,
}

/// Parses a message as a MIME parser independent of the one that built it sees it.
pub fn parse(raw: &[u8]) -> Received {
    let mail = mailparse::parse_mail(raw).expect("a valid MIME message");
    let header = |name: &str| mail.headers.get_first_value(name).unwrap_or_default();
    let mut received = Received {
        subject: header("Subject"),
        from: header("From"),
        to: header("To"),
        text: String::new(),
        html: String::new(),
        attachment: None,
    };
    walk(&mail, &mut received);
    received
}

fn walk(part: &mailparse::ParsedMail<'_>, into: &mut Received) {
    if !part.subparts.is_empty() {
        for sub in &part.subparts {
            walk(sub, into);
        }
        return;
    }
    let disposition = part.get_content_disposition();
    if disposition.disposition == mailparse::DispositionType::Attachment {
        let name = disposition
            .params
            .get("filename")
            .cloned()
            .unwrap_or_default();
        let body = part.get_body_raw().expect("attachment body");
        into.attachment = Some((name, part.ctype.mimetype.clone(), body));
        return;
    }
    let body = part.get_body().expect("text body");
    match part.ctype.mimetype.as_str() {
        "text/plain" => into.text = body,
        "text/html" => into.html = body,
        other => panic!("unexpected part {other}"),
    }
}

/// The CSV attachment read back: (pedido_id, antes, depois, diferenca) per row, with the
/// formula guard (a leading `'`) removed and RFC 4180 quoting undone.
pub fn csv_rows(bytes: &[u8]) -> Vec<(String, Option<i64>, i64, i64)> {
    let text = std::str::from_utf8(bytes).expect("UTF-8");
    let text = text.strip_prefix('\u{feff}').expect("a byte-order mark");
    let mut lines = text.split("\r\n");
    assert_eq!(lines.next(), Some("pedido_id,antes,depois,diferenca"));
    lines
        .filter(|l| !l.is_empty())
        .map(|line| {
            let fields = split_csv(line);
            assert_eq!(fields.len(), 4, "four fields in {line:?}");
            let id = match fields[0].strip_prefix('\'') {
                Some(rest) if rest.starts_with(['=', '+', '-', '@', '\t', '\r']) => {
                    rest.to_string()
                }
                _ => fields[0].clone(),
            };
            (
                id,
                (!fields[1].is_empty()).then(|| fields[1].parse().expect("antes")),
                fields[2].parse().expect("depois"),
                fields[3].parse().expect("diferenca"),
            )
        })
        .collect()
}

fn split_csv(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(String::new()),
            _ => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}
