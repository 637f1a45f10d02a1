//! What people and other programs touch: the command line, the web console, the daemons'
//! `/metrics` and `/healthz`, and the HTTP server under both. (The demo is its own program, in
//! `demo/`: it needs the test rigs, which the product does not link.)

pub mod cli;
pub mod console;
pub mod http_server;
pub mod metrics;
