//! The one integration-test binary: every test talks to a real PostgreSQL (a fresh database per
//! test, see `helpers`), a real loopback HTTP provider and, where the behaviour is about processes,
//! the real `replay-ledger` binary.

mod config;
mod console;
mod consumer;
mod consumer_horizon;
mod consumer_status;
mod database_away;
mod docs;
mod domain;
mod dst;
mod engine;
mod exits;
mod explain;
mod explain_inputs;
mod faults;
mod figures;
mod helpers;
mod hostile;
mod http_server;
mod layout;
mod ledger;
mod liveness;
mod operations;
mod operator;
mod outage;
mod ownership;
mod partitions;
mod pgtemp_sink;
mod process;
mod rebuild;
mod report;
mod resend;
mod retries;
mod review;
mod run_json;
mod security;
mod serve;
mod serve_flood;
mod sweep_counts;
mod upcast;
mod verify;
mod verify_apart;
mod verify_job;
