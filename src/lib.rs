//! replay-ledger: replays archived domain events on PostgreSQL to correct derived state and to
//! perform the external side effects that are still missing, through an effects ledger shared by
//! the live consumer and every replay.
//!
//! Map of the crate (one module per part of the design):
//!
//! - [`config`]   — `jobs/*.yaml` and `jobs/effects.yaml` parsed into checked types.
//! - [`archive`]  — reads `evento_arquivado` in `posicao` order, in batches, inside a window.
//! - [`domain`]   — the commission rule and the `pedido.pago` handler; pure, no I/O.
//! - [`commission`] — every statement on `comissao` and `reprocessamento_diff`.
//! - [`ledger`]   — every statement on `efeito_aplicado`.
//! - [`execution`] — executions, checkpoints, rejected events and the per-execution lock.
//! - [`effects`]  — providers behind one trait (the HTTP webhook), concurrency and rate limits.
//! - [`applier`]  — the one code path for live processing and replay.
//! - [`runner`]   — the batch loop: checkpoint, batch, apply, advance; shutdown; retries.
//! - [`scheduler`] — `serve`: fires the jobs that have a `schedule`, one process at a time per job.
//! - [`counters`] — what this process did since it started (runs, effects, sweeps, heartbeat).
//! - [`metrics`]  — `/metrics` (Prometheus) and `/healthz` for `serve`.
//! - [`http_server`] — serves a router with bounded connections and timeouts (no flood exhausts it).
//! - [`report`]   — reports to finance (text, HTML, CSV; SMTP or `.eml`), exactly once or flagged.
//! - [`approval`] — the approval gate between a simulation and its real run.
//! - [`identity`] — who did it: the authenticated role, and the notes people type.
//! - [`grants`]   — what each database role may do (worker, approver, reviewer, console), said once.
//! - [`text`]     — archive text made inert for a terminal.
//! - [`console`]  — the web console: executions, diffs, approvals, the review queue, the audit.
//! - [`cli`]      — the `replay-ledger` command line.
//! - [`demo`]     — the end-to-end story on a throwaway database; its rigs (the throwaway
//!   cluster, the loopback webhook, the generated archive) live in the `testkit` crate.

pub mod applier;
pub mod approval;
pub mod archive;
pub mod cli;
pub mod commission;
pub mod config;
pub mod console;
pub mod consumer;
pub mod counters;
pub mod db;
pub mod definition;
pub mod demo;
pub mod domain;
pub mod effects;
pub mod execution;
pub mod grants;
pub mod held;
pub mod http_server;
pub mod identity;
pub mod ledger;
pub mod metrics;
pub mod money;
pub mod plan;
pub mod report;
pub mod runner;
pub mod scheduler;
pub mod shutdown;
pub mod summary;
pub mod sweeper;
pub mod tally;
pub mod text;
pub mod words;
