//! The owners of the tables: each module holds every statement on its tables (SQL lives with its
//! table), and the connection and migrations they run on. A module's doc names its tables.
//!
//! A statement that reads several tables lives with the one it is about, and may read another's
//! rows; only the owner writes. These read across:
//!
//! - `archive` reads `comissao` beside the events (`rebuild.rs`: which events the rebuild applies;
//!   `reconcile.rs`: each order's events with its row) and `efeito_aplicado` (`reconcile.rs`,
//!   `unsent.rs`: which effects of a range the ledger lacks): each answer is about the archive's
//!   events, in one snapshot, where two statements could disagree;
//! - `ledger` reads `evento_arquivado` (an effect's event: the review list shows it, and the
//!   settlement of a partition's reservations finds their orders' partition by it);
//! - `commission` reads `reprocessamento_aprovacao` (`diff.rs`: the latest approval, whose kept
//!   diff is compared with what was applied; `rebuild/swap.rs`: the approval of the rebuild's
//!   comparison, and who gave it) and `evento_arquivado` (`rebuild/swap.rs`: whether an event archived since
//!   the comparison explains a row that changed).
//!
//! Tables whose one home is not under `tables/`:
//!
//! - `reprocessamento_aprovacao`, in `engine::approval` (`store.rs`): its rows are the approval
//!   and the fingerprint of what was approved, the engine's types; `tables/` sits below the
//!   engine and cannot name them;
//! - `consumo_ao_vivo`, in `services::consumer` (`state.rs`): written in one transaction with the
//!   live consumer's checkpoint and tallies, from its own state type, for the same reason;
//! - the periphery's own tables, in the periphery crate, which the core does not know: the
//!   console's (`console_usuario`, `console_sessao`, `console_tentativa_login`,
//!   `console_auditoria`), the scheduler's `job_rodada` and the reports' `relatorio_job`.

pub mod archive;
pub mod commission;
pub mod db;
pub mod execution;
pub mod grants;
pub mod ledger;
pub mod proposals;
pub mod requests;
pub mod tally;
