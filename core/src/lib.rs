//! replay-ledger's core: the commission rule, the jobs' configuration, the statements on every
//! table, the one path an event takes, and the loops that drive it. The periphery (the
//! `replay-ledger` package: command line, console, metrics, reports, scheduler, verify) is built
//! on this crate; this crate knows nothing of it, and the compiler holds that.
//!
//! Map of the crate. The folders are roles, and imports go one way, from the top of this list
//! down: services use the engine, the engine uses the tables, and everything may use the shared
//! words, the domain and the configuration.
//!
//! - [`services`] — the loops that run, to an end or until stopped:
//!   - [`services::runner`] — a replay's batch loop: checkpoint, batch, apply, advance.
//!   - [`services::consumer`] — the live consumer, through the same applier.
//!   - [`services::sweeper`] — settles reservations abandoned by dead processes.
//!   - [`services::rebuild`] — blue-green rebuild of `comissao`: build, follow, compare, swap.
//!   - [`services::held`] — an execution held by this process: lock, claim, recovery.
//!   - [`services::counters`] — what this process did since it started.
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

pub mod config;
pub mod domain;
pub mod engine;
pub mod services;
pub mod shared;
pub mod tables;
