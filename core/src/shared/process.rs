//! What the process was started with that the core needs beyond its arguments: the ownership
//! lease (`REPLAY_LEDGER_LEASE`), the server-side session settings every connection asks for
//! (`REPLAY_LEDGER_TCP_…`) and `HOSTNAME`. The binary's edge reads them once, with every other
//! variable, into its `Settings`, and installs this part here at start ([`install`]); the core
//! never reads the environment for them. Until something is installed (a test or the benchmark
//! driving the library), every value is its default.
//!
//! Why installed once rather than passed as a parameter: every connection the core opens (the
//! pool, an execution's lock, the lease's confirmer, a takeover's) and every lock it takes use
//! them, from dozens of call sites in both crates, the tests and the demo; a parameter would make
//! every library caller restate the process's environment. The values are still plain data, built
//! and checked at the edge, and kept as given so each is parsed, and refused, where it is used.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The core's part of the process's settings, as given (unparsed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessSettings {
    /// `REPLAY_LEDGER_LEASE`; `None`: the default lease.
    pub lease: Option<String>,
    /// The session settings by variable name (`REPLAY_LEDGER_TCP_KEEPALIVES_IDLE`, …); a missing
    /// one takes its default.
    pub session: BTreeMap<String, String>,
    /// `HOSTNAME`: the host word when the kernel's host name cannot be read.
    pub hostname: Option<String>,
}

static INSTALLED: OnceLock<ProcessSettings> = OnceLock::new();

static DEFAULTS: ProcessSettings = ProcessSettings {
    lease: None,
    session: BTreeMap::new(),
    hostname: None,
};

/// Installs the process's settings; the first install wins (`false` for a later one).
pub fn install(settings: ProcessSettings) -> bool {
    INSTALLED.set(settings).is_ok()
}

/// The installed settings, or the defaults.
pub fn settings() -> &'static ProcessSettings {
    INSTALLED.get().unwrap_or(&DEFAULTS)
}
