//! Test rigs of replay-ledger, kept out of the product crate: real parts, just disposable.
//!
//! - [`pgtemp`]  — a throwaway PostgreSQL cluster from the local server binaries.
//! - [`sink`]    — a loopback webhook that records every key it receives and answers as told.
//!
//! Used by the integration tests, the benchmark (`examples/bench.rs`) and `replay-ledger demo`.
//! It does not depend on the `replay-ledger` crate (which depends on it for `demo`).

pub mod pgtemp;
pub mod sink;
