//! Debian's `chromedriver` driving Debian's `chromium` headless, for the console's browser tests:
//! one chromedriver on a free loopback port per test, one fresh profile and one download
//! directory per browser, everything removed when dropped. The WebDriver client is the test's
//! (fantoccini); this only starts the processes and says how to ask for the browser.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

/// Where Debian puts them (`apt-get install chromium chromium-driver`).
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// A running chromedriver, in a process group of its own with the browsers it starts; the whole
/// group is killed when dropped, so a failed test leaves no browser behind.
pub struct ChromeDriver {
    child: Child,
    addr: SocketAddr,
    profile: tempfile::TempDir,
    downloads: tempfile::TempDir,
}

impl ChromeDriver {
    /// Whether both binaries are installed.
    pub fn installed() -> bool {
        Path::new(CHROMEDRIVER).exists() && Path::new(CHROMIUM).exists()
    }

    /// Starts chromedriver on a free loopback port and waits (at most 30 s) until it listens.
    pub fn start() -> std::io::Result<ChromeDriver> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let driver = ChromeDriver {
            child,
            addr,
            profile: tempfile::tempdir()?,
            downloads: tempfile::tempdir()?,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if Instant::now() > deadline {
                return Err(std::io::Error::other(
                    "chromedriver did not listen within 30 s",
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(driver)
    }

    /// The WebDriver URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Where the browser saves downloads.
    pub fn downloads(&self) -> PathBuf {
        self.downloads.path().to_path_buf()
    }

    /// The capabilities of a headless Chromium that runs as root in a container: no sandbox, no
    /// GPU, no shared-memory use, nothing fetched from the network on its own, a fresh profile,
    /// downloads saved without asking.
    pub fn capabilities(&self) -> Map<String, Value> {
        let args = [
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--window-size=1400,1000".into(),
            format!("--user-data-dir={}", self.profile.path().display()),
        ];
        let options = json!({
            "binary": CHROMIUM,
            "args": args,
            "prefs": {
                "download.default_directory": self.downloads.path(),
                "download.prompt_for_download": false,
                "download.directory_upgrade": true,
                "safebrowsing.enabled": false,
            },
        });
        let mut caps = Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert("goog:chromeOptions".into(), options);
        caps
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        use nix::sys::signal::{killpg, Signal};
        use nix::unistd::Pid;
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
