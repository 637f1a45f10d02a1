//! replay-ledger: replays archived domain events on PostgreSQL to correct derived state and to
//! perform the external side effects that are still missing, through an effects ledger shared by
//! the live consumer and every replay.
//!
//! This crate is the periphery: what people and other programs touch ([`edges`]), and the
//! daemons and reports around the engine ([`services`]). The engine's core is the crate
//! `replay-ledger-core` (`core/`), named `replay_ledger_core::…` wherever this crate uses it (no
//! re-export: the crossing shows at every use); it cannot reach back into this crate. The map of both crates,
//! module by module, is one page of the book: `docs/src/layout.md`.

pub mod edges;
pub mod services;
