//! The loops that run: a replay's batch loop, the live consumer, the sweeper, the scheduler
//! daemon and the reports it mails; the one way a process holds an execution; what it counted;
//! one order's story, told from the tables.

pub mod consumer;
pub mod counters;
pub mod held;
pub mod history;
pub mod rebuild;
pub mod report;
pub mod runner;
pub mod scheduler;
pub mod story;
pub mod sweeper;
pub mod verify;
