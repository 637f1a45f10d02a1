//! What people and other programs touch: the command line, the web console, the daemons'
//! `/metrics` and `/healthz`, the HTTP server under both, and the demo.

pub mod cli;
pub mod console;
pub mod demo;
pub mod http_server;
pub mod metrics;
