//! replay-ledger's core: the commission rule, the jobs' configuration, the statements on every
//! table, the one path an event takes, and the loops that drive it. The periphery (the
//! `replay-ledger` package: command line, console, metrics, reports, scheduler, verify) is built
//! on this crate; this crate knows nothing of it, and the compiler holds that.
//!
//! The folders are roles ([`services`], [`engine`], [`tables`], [`domain`], [`config`],
//! [`shared`]) and imports go one way, from the first down. The map of both crates, module by
//! module, is one page of the book: `docs/src/layout.md`.

pub mod config;
pub mod domain;
pub mod engine;
pub mod services;
pub mod shared;
pub mod tables;
