//! What the deserializer of one value needs to know beyond the value itself, for the duration of
//! one load: the effect catalog (does a job's effect type exist, is it idempotent, is
//! `stale_after` above every webhook timeout?) and the job names already taken in the directory.
//!
//! It lives in a thread-local because serde's derive cannot thread a `DeserializeSeed` through a
//! struct's fields; checking inside deserialization is what gives these errors a line and column.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::de::Check;
use super::EffectCatalog;

/// The facts about one effect type that a job's checks need.
#[derive(Debug, Clone, Copy)]
pub(super) struct TypeFacts {
    pub idempotent: bool,
    pub timeout: Duration,
}

#[derive(Debug, Default)]
pub(super) struct Context {
    /// `None` when the catalog failed to load: effect-type checks are skipped (the catalog's own
    /// errors are reported) so that the other errors of a job file still show.
    types: Option<BTreeMap<String, TypeFacts>>,
    /// Job name → the file that claimed it; `None` when loading a single file.
    names: Option<BTreeMap<String, PathBuf>>,
    file: PathBuf,
}

impl Context {
    pub fn new(catalog: Option<&EffectCatalog>, track_names: bool) -> Self {
        let types = catalog.map(|c| {
            c.types
                .iter()
                .map(|(name, t)| {
                    let facts = TypeFacts {
                        idempotent: t.idempotent,
                        timeout: t.webhook.timeout,
                    };
                    (name.clone(), facts)
                })
                .collect()
        });
        Context {
            types,
            names: track_names.then(BTreeMap::new),
            file: PathBuf::new(),
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Context>> = const { RefCell::new(None) };
}

/// Runs `f` (the deserialization of `file`) with `ctx` installed; gives `ctx` back for the next
/// file of the same load.
pub(super) fn with<T>(mut ctx: Context, file: &Path, f: impl FnOnce() -> T) -> (T, Context) {
    /// Uninstalls the context even if `f` panics.
    struct Guard;
    impl Drop for Guard {
        fn drop(&mut self) {
            CURRENT.with(|c| c.borrow_mut().take());
        }
    }
    ctx.file = file.to_path_buf();
    CURRENT.with(|c| *c.borrow_mut() = Some(ctx));
    let guard = Guard;
    let out = f();
    let ctx = CURRENT.with(|c| c.borrow_mut().take()).unwrap_or_default();
    drop(guard);
    (out, ctx)
}

fn access<T>(f: impl FnOnce(&mut Context) -> T) -> Option<T> {
    CURRENT.with(|c| c.borrow_mut().as_mut().map(f))
}

/// Registers a job name; refuses one already taken by another file of the directory.
pub(super) fn claim_job_name(name: &str) -> Check<()> {
    access(|ctx| {
        let Some(names) = ctx.names.as_mut() else {
            return Ok(());
        };
        if let Some(other) = names.get(name) {
            return Err(format!(
                "job name `{name}` is already used by {}",
                other.display()
            ));
        }
        names.insert(name.to_owned(), ctx.file.clone());
        Ok(())
    })
    .unwrap_or(Ok(()))
}

/// The facts about effect type `name`; an error if the catalog does not define it. `Ok(None)`
/// when the catalog is unknown (it failed to load).
pub(super) fn effect_type(name: &str) -> Check<Option<TypeFacts>> {
    access(|ctx| {
        let Some(types) = ctx.types.as_ref() else {
            return Ok(None);
        };
        match types.get(name) {
            Some(facts) => Ok(Some(*facts)),
            None => Err(format!(
                "unknown effect type `{name}`: effects.yaml defines {}",
                list(types.keys())
            )),
        }
    })
    .unwrap_or(Ok(None))
}

/// `stale_after` must exceed every webhook timeout: a reservation younger than the longest call
/// may still be in flight, and retaking it could send a message twice.
pub(super) fn check_stale_after(stale_after: Duration) -> Check<()> {
    access(|ctx| {
        let Some(types) = ctx.types.as_ref() else {
            return Ok(());
        };
        for (name, facts) in types {
            if stale_after <= facts.timeout {
                return Err(format!(
                    "stale_after ({}) must be greater than the webhook timeout of every effect type, \
                     but `{name}` has timeout {} (a reservation that young may still be in flight)",
                    humantime::format_duration(stale_after),
                    humantime::format_duration(facts.timeout),
                ));
            }
        }
        Ok(())
    })
    .unwrap_or(Ok(()))
}

/// `a, b, c` in backticks, or `no effect types`.
pub(super) fn list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<String> = names.map(|n| format!("`{n}`")).collect();
    if names.is_empty() {
        "no effect types".to_owned()
    } else {
        names.join(", ")
    }
}
