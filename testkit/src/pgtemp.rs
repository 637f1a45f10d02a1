//! A throwaway PostgreSQL cluster built from the local server binaries: `initdb` into a temporary
//! directory, a `postgres` on a free loopback port, and everything stopped and deleted on drop.
//! Used by `replay-ledger demo` when `DATABASE_URL` is unset and by tests that must stop and
//! restart a database of their own. Never a fake database: the real server, just disposable.
//!
//! `initdb` and `postgres` refuse to run as root. When this process is root (containers, CI),
//! both run as the `postgres` OS user: the temporary directory is created under a world-
//! traversable parent and handed to that user, and the children drop privileges before `exec`.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::{Pid, User};
use sqlx::Connection;
use tempfile::TempDir;
use tokio::process::{Child, Command};

/// How long the server may take to accept connections (initdb is not included).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a fast shutdown may take before it is escalated.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// How many free ports are tried when another process grabs ours between probe and bind.
const PORT_ATTEMPTS: usize = 5;
/// Bytes of the server log quoted in errors: enough for the fatal lines, not a whole log.
const LOG_TAIL: u64 = 2_000;

pub type Result<T = ()> = std::result::Result<T, PgTempError>;

#[derive(Debug, thiserror::Error)]
pub enum PgTempError {
    #[error(
        "no PostgreSQL server binaries found (looked for initdb and postgres in {searched}): \
         install postgresql (Debian: apt-get install postgresql) or set PG_BIN to their \
         directory, or set DATABASE_URL to use an existing database"
    )]
    NoBinaries { searched: String },
    #[error("PG_BIN={0} does not contain the initdb and postgres executables")]
    BadPgBin(PathBuf),
    #[error(
        "running as root, but there is no `postgres` OS user to run the server as \
         (initdb refuses root): create one (useradd --system postgres), run as a normal user, \
         or set DATABASE_URL"
    )]
    NoPostgresUser,
    #[error("{action}: {source}")]
    Io {
        action: String,
        #[source]
        source: io::Error,
    },
    #[error("initdb failed ({status}):\n{output}")]
    Initdb { status: ExitStatus, output: String },
    #[error("postgres exited during startup ({status}); log tail:\n{log_tail}")]
    Exited {
        status: ExitStatus,
        log_tail: String,
    },
    #[error("postgres did not accept connections within {after:?}; log tail:\n{log_tail}")]
    NotReady { after: Duration, log_tail: String },
}

fn io_err(action: impl Into<String>) -> impl FnOnce(io::Error) -> PgTempError {
    let action = action.into();
    move |source| PgTempError::Io { action, source }
}

/// A running (or stopped, between [`TempCluster::stop`] and [`TempCluster::start_again`])
/// throwaway cluster. Dropping it stops the server and removes its directory.
#[derive(Debug)]
pub struct TempCluster {
    bin: PathBuf,
    owner: Option<Owner>,
    port: u16,
    /// The superuser's password when the cluster authenticates with scram-sha-256.
    password: Option<String>,
    server: Option<Child>,
    /// Last field: dropped (deleted) after `Drop::drop` has stopped the server.
    dir: TempDir,
}

/// The OS user the server runs as when we are root.
#[derive(Debug, Clone, Copy)]
struct Owner {
    uid: u32,
    gid: u32,
}

impl TempCluster {
    /// Finds the binaries, runs `initdb`, starts the server and waits until it accepts
    /// connections.
    #[tracing::instrument(skip_all, err)]
    pub async fn start() -> Result<TempCluster> {
        TempCluster::start_with(None).await
    }

    /// As [`TempCluster::start`], but every connection authenticates with scram-sha-256 as the
    /// superuser `postgres` with `password` (letters and digits: it goes into the URL as is).
    /// For tests of what a wrong password does, which the shared server's trust auth hides.
    pub async fn start_with_password(password: &str) -> Result<TempCluster> {
        TempCluster::start_with(Some(password.to_string())).await
    }

    /// As [`TempCluster::start`], with the whole cluster (data and write-ahead log, in segments
    /// of 1 MB) in a new directory under `parent` (writable by the server's user), so that a test
    /// can run it out of space.
    pub async fn start_in(parent: &Path) -> Result<TempCluster> {
        TempCluster::start_with_options(None, Some(parent)).await
    }

    /// The uid and gid the server runs as (ours when we are not root).
    pub fn server_user() -> Result<(u32, u32)> {
        match is_root().then(postgres_user).transpose()? {
            Some(o) => Ok((o.uid, o.gid)),
            None => Ok((
                nix::unistd::getuid().as_raw(),
                nix::unistd::getgid().as_raw(),
            )),
        }
    }

    async fn start_with(password: Option<String>) -> Result<TempCluster> {
        TempCluster::start_with_options(password, None).await
    }

    async fn start_with_options(
        password: Option<String>,
        parent: Option<&Path>,
    ) -> Result<TempCluster> {
        let bin = find_bin_dir().await?;
        let owner = is_root().then(postgres_user).transpose()?;
        let dir = make_dir(owner, parent)?;
        let small_wal = parent.is_some();
        initdb(&bin, dir.path(), owner, password.as_deref(), small_wal).await?;
        let mut cluster = TempCluster {
            bin,
            owner,
            port: 0,
            password,
            server: None,
            dir,
        };
        cluster.start_on_a_free_port().await?;
        tracing::info!(port = cluster.port, "temporary postgres cluster started");
        Ok(cluster)
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres` (trust authentication, no password), or
    /// `postgres://postgres:PASSWORD@…` for a cluster started with a password.
    pub fn url(&self) -> String {
        let password = self
            .password
            .as_deref()
            .map(|p| format!(":{p}"))
            .unwrap_or_default();
        format!(
            "postgres://postgres{password}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temporary directory: `data/` (the cluster) and `postgres.log`. Also the socket dir.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log (appended to by every start), for diagnosing a failed test.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// Whether the server process is up (it may be stopped by [`TempCluster::stop`]).
    pub fn is_running(&self) -> bool {
        self.server.is_some()
    }

    /// Whether the server exited on its own (a failed crash recovery, say); then
    /// [`TempCluster::start_again`] starts it.
    pub fn has_exited(&mut self) -> bool {
        let exited = match self.server.as_mut() {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => false,
        };
        if exited {
            self.server = None;
        }
        exited
    }

    /// Fast shutdown (sessions are disconnected, a shutdown checkpoint is written), awaited.
    /// The data directory and port are kept for [`TempCluster::start_again`].
    pub async fn stop(&mut self) {
        self.stop_with(Signal::SIGINT).await;
    }

    /// Immediate shutdown (`pg_ctl stop -m immediate`): every session is cut at once, nothing is
    /// written, and the next start runs crash recovery, as after a power cut of the server.
    pub async fn crash(&mut self) {
        self.stop_with(Signal::SIGQUIT).await;
    }

    /// Sends `how` (SIGINT: fast, SIGQUIT: immediate) and waits; kills it if it takes too long.
    async fn stop_with(&mut self, how: Signal) {
        let Some(mut child) = self.server.take() else {
            return;
        };
        signal(&child, how);
        if tokio::time::timeout(STOP_TIMEOUT, child.wait())
            .await
            .is_err()
        {
            tracing::warn!(port = self.port, "postgres shutdown timed out; killing it");
            signal(&child, Signal::SIGQUIT);
            let _ = child.kill().await;
        }
    }

    /// Starts the server again on the same data directory and port.
    pub async fn start_again(&mut self) -> Result {
        if self.server.is_some() {
            return Ok(());
        }
        self.spawn_and_wait().await
    }

    /// Probes a free port and starts on it; retries when the port was taken in the meantime.
    async fn start_on_a_free_port(&mut self) -> Result {
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.port = free_port()?;
            match self.spawn_and_wait().await {
                Err(PgTempError::Exited { log_tail, .. })
                    if attempt < PORT_ATTEMPTS && log_tail.contains("could not bind") =>
                {
                    tracing::debug!(port = self.port, "port taken before postgres bound it");
                }
                other => return other,
            }
        }
    }

    async fn spawn_and_wait(&mut self) -> Result {
        let log_path = self.log_path();
        let log_start = fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io_err(format!("opening {}", log_path.display())))?;
        let stderr = log
            .try_clone()
            .map_err(io_err("duplicating the log handle"))?;
        let mut cmd = self.command("postgres");
        cmd.arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            // A throwaway: losing it on power failure is fine; process crashes still are safe.
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "max_connections=200"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr);
        let child = cmd.spawn().map_err(io_err("starting postgres"))?;
        self.server = Some(child);
        self.wait_ready(&log_path, log_start).await
    }

    /// Polls with a real connection (not just a TCP connect): "starting up" is not ready.
    async fn wait_ready(&mut self, log_path: &Path, log_start: u64) -> Result {
        let deadline = Instant::now() + READY_TIMEOUT;
        let url = self.url();
        loop {
            let child = self.server.as_mut().expect("spawned above");
            if let Some(status) = child.try_wait().map_err(io_err("waiting for postgres"))? {
                self.server = None;
                let log_tail = log_tail(log_path, log_start);
                return Err(PgTempError::Exited { status, log_tail });
            }
            if let Ok(conn) = sqlx::PgConnection::connect(&url).await {
                let _ = conn.close().await;
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.stop().await;
                let log_tail = log_tail(log_path, log_start);
                return Err(PgTempError::NotReady {
                    after: READY_TIMEOUT,
                    log_tail,
                });
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    fn command(&self, program: &str) -> Command {
        command(&self.bin, program, self.dir.path(), self.owner)
    }
}

impl Drop for TempCluster {
    /// Immediate shutdown, synchronously: the directory is deleted next, so there is nothing to
    /// checkpoint, and a `Drop` cannot await.
    fn drop(&mut self) {
        let Some(mut child) = self.server.take() else {
            return;
        };
        signal(&child, Signal::SIGQUIT);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.start_kill();
        let _ = child.try_wait();
    }
}

/// A command for one of the server binaries, run as `owner` when we are root.
fn command(bin: &Path, program: &str, cwd: &Path, owner: Option<Owner>) -> Command {
    let mut cmd = Command::new(bin.join(program));
    // Our environment must not redirect the cluster (PGDATA) or leak into its messages (LANG).
    cmd.current_dir(cwd)
        .env_remove("PGDATA")
        .env("LC_ALL", "C")
        .kill_on_drop(false);
    if let Some(owner) = owner {
        // std drops supplementary groups (setgroups(0)) before setuid when run by root.
        cmd.uid(owner.uid).gid(owner.gid);
    }
    cmd
}

fn signal(child: &Child, sig: Signal) {
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        // Our own child's pid; an error means it has exited already.
        let _ = nix::sys::signal::kill(Pid::from_raw(pid), sig);
    }
}

async fn initdb(
    bin: &Path,
    dir: &Path,
    owner: Option<Owner>,
    password: Option<&str>,
    small_wal: bool,
) -> Result {
    let mut cmd = command(bin, "initdb", dir, owner);
    if small_wal {
        cmd.arg("--wal-segsize=1");
    }
    match password {
        Some(password) => {
            let file = dir.join("pwfile");
            fs::write(&file, password).map_err(io_err("writing the password file"))?;
            cmd.args(["-A", "scram-sha-256", "--pwfile"]).arg(&file);
        }
        None => {
            cmd.args(["-A", "trust"]);
        }
    }
    let out = cmd
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-U", "postgres", "-E", "UTF8"])
        .args(["--no-sync", "--no-locale"])
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(io_err(format!("running {}", bin.join("initdb").display())))?;
    if out.status.success() {
        return Ok(());
    }
    let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&out.stderr));
    Err(PgTempError::Initdb {
        status: out.status,
        output,
    })
}

/// The temporary directory, owned by `owner` when there is one, under `parent` or else the
/// temporary directory. Its parent must let that user through, so a private `TMPDIR` (e.g. under
/// /root) is replaced by /tmp.
fn make_dir(owner: Option<Owner>, parent: Option<&Path>) -> Result<TempDir> {
    let mut parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
    if owner.is_some() && !world_traversable(&parent) {
        parent = PathBuf::from("/tmp");
    }
    let dir = tempfile::Builder::new()
        .prefix("replay-ledger-pg.")
        .tempdir_in(&parent)
        .map_err(io_err(format!(
            "creating a directory in {}",
            parent.display()
        )))?;
    if let Some(o) = owner {
        std::os::unix::fs::chown(dir.path(), Some(o.uid), Some(o.gid)).map_err(io_err(format!(
            "handing {} to the postgres user",
            dir.path().display()
        )))?;
    }
    Ok(dir)
}

fn world_traversable(path: &Path) -> bool {
    path.ancestors().all(|p| {
        p.as_os_str().is_empty()
            || fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o001 != 0)
                .unwrap_or(false)
    })
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn postgres_user() -> Result<Owner> {
    match User::from_name("postgres") {
        Ok(Some(user)) => Ok(Owner {
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
        }),
        _ => Err(PgTempError::NoPostgresUser),
    }
}

/// A port nobody listens on right now. Racy by nature; [`TempCluster::start`] retries.
fn free_port() -> Result<u16> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(io_err("probing for a free port"))?;
    let port = listener
        .local_addr()
        .map_err(io_err("probing for a free port"))?
        .port();
    Ok(port)
}

/// The end of the server log written since `from` (this start), for error messages.
fn log_tail(path: &Path, from: u64) -> String {
    let read = || -> io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(from.max(len.saturating_sub(LOG_TAIL))))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    read().unwrap_or_else(|e| format!("(could not read {}: {e})", path.display()))
}

/// `PG_BIN` if set (and then it must be right), else `pg_config --bindir`, else `initdb` on the
/// `PATH`, else the highest version under /usr/lib/postgresql/*/bin.
async fn find_bin_dir() -> Result<PathBuf> {
    let pg_bin = std::env::var_os("PG_BIN").filter(|v| !v.is_empty());
    let mut candidates = Vec::new();
    if pg_bin.is_none() {
        candidates.extend(pg_config_bindir().await);
        candidates.extend(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths),
        );
        candidates.extend(debian_bin_dirs(Path::new("/usr/lib/postgresql")));
    }
    locate(pg_bin, &candidates)
}

fn locate(pg_bin: Option<OsString>, candidates: &[PathBuf]) -> Result<PathBuf> {
    if let Some(dir) = pg_bin.map(PathBuf::from) {
        return if has_server(&dir) {
            Ok(dir)
        } else {
            Err(PgTempError::BadPgBin(dir))
        };
    }
    if let Some(dir) = candidates.iter().find(|d| has_server(d)) {
        return Ok(dir.clone());
    }
    let searched = "PG_BIN, `pg_config --bindir`, PATH and /usr/lib/postgresql/*/bin".to_string();
    Err(PgTempError::NoBinaries { searched })
}

fn has_server(dir: &Path) -> bool {
    let executable = |name: &str| {
        fs::metadata(dir.join(name)).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    executable("initdb").unwrap_or(false) && executable("postgres").unwrap_or(false)
}

/// Debian's client-only `pg_config` may name a bindir without a server; [`locate`] checks.
async fn pg_config_bindir() -> Option<PathBuf> {
    let out = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .await
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| PathBuf::from(text.trim()))
}

/// `/usr/lib/postgresql/<version>/bin`, highest version first (numerically: 16 before 9.6).
fn debian_bin_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut versions: Vec<(Vec<u64>, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let key = name
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<Vec<u64>>>()?;
            Some((key, e.path().join("bin")))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pg_bin_without_a_server_is_an_error_naming_it() {
        let empty = tempfile::tempdir().unwrap();
        let err = locate(Some(empty.path().into()), &[]).unwrap_err();
        assert!(err.to_string().contains("PG_BIN="), "{err}");
    }

    #[test]
    fn no_binaries_anywhere_says_what_to_install() {
        let empty = tempfile::tempdir().unwrap();
        let err = locate(None, &[empty.path().into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("apt-get install postgresql"), "{err}");
        assert!(err.contains("DATABASE_URL"), "{err}");
    }

    #[test]
    fn debian_versions_are_ordered_numerically() {
        let root = tempfile::tempdir().unwrap();
        for v in ["9.6", "16", "13", "notaversion"] {
            fs::create_dir_all(root.path().join(v).join("bin")).unwrap();
        }
        let dirs = debian_bin_dirs(root.path());
        let names: Vec<_> = dirs
            .iter()
            .map(|d| d.parent().unwrap().file_name().unwrap())
            .collect();
        assert_eq!(names, ["16", "13", "9.6"]);
    }
}
