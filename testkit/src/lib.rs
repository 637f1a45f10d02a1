//! Test rigs of replay-ledger, kept out of the product crate: real parts, just disposable.
//!
//! - [`pgtemp`]  — a throwaway PostgreSQL cluster from the local server binaries.
//! - [`sink`]    — a loopback webhook that records every key it receives and answers as told.
//! - [`archive`] — rows of `evento_arquivado` written set-based, and the demo's generated day.
//! - [`proxy`]   — a loopback TCP proxy that can go silent, closing nothing (a network cut).
//! - [`disk`]    — a small tmpfs to fill, for what a full disk does to the server.
//! - [`chromedriver`] — Debian's chromedriver and headless Chromium, for the console's browser tests.
//!
//! Used by the integration tests, the benchmark (`examples/bench/main.rs`) and `replay-ledger demo`.
//! It does not depend on the `replay-ledger` crate (which depends on it for `demo`), so the
//! archive generator speaks in plain rows and strings, not in the product's types.

pub mod archive;
pub mod chromedriver;
pub mod disk;
pub mod pgtemp;
pub mod proxy;
pub mod sink;
