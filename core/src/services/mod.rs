//! The loops that run: a replay's batch loop, the live consumer, the sweeper, the blue-green
//! rebuild; the one way a process holds an execution; what it counted.

pub mod consumer;
pub mod counters;
pub mod held;
pub mod rebuild;
pub mod runner;
pub mod sweeper;
