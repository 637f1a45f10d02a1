//! The small words every part speaks: retry schedules, counted outcomes, the seed's words, money, inert text,
//! identities and notes, the stop signal, the process's settings.

pub mod backoff;
pub mod identity;
pub mod money;
pub mod process;
pub mod shutdown;
pub mod summary;
pub mod text;
pub mod words;
