//! The owners of the tables: each module holds every statement on its tables (SQL lives with its
//! table), and the connection and migrations they run on.

pub mod archive;
pub mod commission;
pub mod db;
pub mod execution;
pub mod grants;
pub mod ledger;
pub mod proposals;
pub mod requests;
pub mod tally;
