//! Hostile input, in bounded time: random and mutated job files through the YAML loader, random
//! and extreme payloads through the domain, and odd events (huge, deeply nested, odd Unicode,
//! positions at the ends of `i64`) through a real run against PostgreSQL. Nothing may panic,
//! hang or blow memory; bad input ends as a clean error (config) or a rejected event (archive).

mod archive;
mod bounds;
mod files;
mod memory;
mod payloads;
mod reasons;
mod terminal;
mod yaml;
