//! The loops that run: a replay's batch loop, the live consumer, the sweeper (from the core), the scheduler
//! daemon and the reports it mails; the one way a process holds an execution; what it counted;
//! one order's story, told from the tables.

pub mod history;
pub mod report;
pub mod scheduler;
pub mod story;
pub mod verify;
