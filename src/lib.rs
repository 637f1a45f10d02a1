//! replay-ledger: replays archived domain events on PostgreSQL to correct derived state and to
//! perform the external side effects that are still missing, through an effects ledger shared by
//! the live consumer and every replay.
//!
//! This crate is the periphery: what people and other programs touch, and the daemons and reports
//! around the engine. The engine's core (shared, domain, config, tables, engine, and the runner,
//! consumer, sweeper, held, counters and rebuild services) is the crate `replay-ledger-core`
//! (`core/`), re-exported here at the same paths; it cannot reach back into this crate.
//!
//! Map of the crate. The folders are roles, and imports go one way, from the top of this list
//! down: edges use services, services use the engine, the engine uses the tables, and everything
//! may use the shared words, the domain and the configuration.
//!
//! - [`edges`] — what people and other programs touch:
//!   - [`edges::cli`] — the `replay-ledger` command line, and the one map to exit statuses.
//!   - [`edges::console`] — the web console: executions, diffs, approvals, the review queue,
//!     one order's story.
//!   - [`edges::metrics`] — `/metrics` (Prometheus) and `/healthz` of the daemons.
//!   - [`edges::http_server`] — serves a router with bounded connections and timeouts.
//! - [`services`] — the loops that run, to an end or until stopped:
//!   - [`services::runner`] — a replay's batch loop: checkpoint, batch, apply, advance.
//!   - [`services::consumer`] — the live consumer, through the same applier.
//!   - [`services::sweeper`] — settles reservations abandoned by dead processes.
//!   - [`services::scheduler`] — `serve`: fires the jobs that have a `schedule`.
//!   - [`services::report`] — reports to finance, mailed exactly once or flagged.
//!   - [`services::verify`] — reconciliation: every wrong day of a range, read-only.
//!   - [`services::rebuild`] — blue-green rebuild of `comissao`: build, follow, compare, swap.
//!   - [`services::held`] — an execution held by this process: lock, claim, recovery.
//!   - [`services::counters`] — what this process did since it started.
//!   - [`services::story`] — one order's story (`explain`, the console's `/pedidos/{id}`).
//!   - [`services::history`] — the commission table as of a moment, and what changed since.
//! - [`engine`] — the one path an event takes, and what decides it:
//!   - [`engine::plan`] — an execution planned once from a job and how it was asked.
//!   - [`engine::applier`] — the one code path for live processing and replay.
//!   - [`engine::effects`] — providers behind one trait, concurrency and rate limits.
//!   - [`engine::approval`] — the gate between a simulation and its real run.
//!   - [`engine::definition`] — what decides a run's outcome, so an approval can bind it.
//! - [`tables`] — the owners of the tables, each with every statement on its own:
//!   - [`tables::db`] — connections, migrations, and which failures are worth a retry.
//!   - [`tables::archive`] — reads of `evento_arquivado`, in `posicao` order, in batches.
//!   - [`tables::ledger`] — every statement on `efeito_aplicado`.
//!   - [`tables::commission`] — `comissao`, a simulation's diff, a real run's corrections, a
//!     rebuild's new table, queue, comparison and swap.
//!   - [`tables::execution`] — executions, checkpoints, ownership epochs, the execution lock.
//!   - [`tables::tally`] — the tallies every figure is read from.
//!   - [`tables::grants`] — what each database role may do, said once.
//! - [`domain`] — the commission rule and the `pedido.pago` handler; pure, no I/O.
//! - [`config`] — `jobs/*.yaml` and `jobs/effects.yaml` parsed into checked types.
//! - [`shared`] — the small words every part speaks:
//!   - [`shared::backoff`] — retry schedules (the database's steps, the providers' calls).
//!   - [`shared::summary`] — what an execution did, counted by typed outcomes.
//!   - [`shared::words`] — the one mapping between enums and the seed's words.
//!   - [`shared::money`] — BRL from integer cents.
//!   - [`shared::text`] — archive text made inert for a terminal.
//!   - [`shared::identity`] — who did it, and the notes people type.
//!   - [`shared::shutdown`] — the stop signal every loop watches.

pub mod edges;
pub mod services;

pub use replay_ledger_core::{config, domain, engine, shared, tables};
