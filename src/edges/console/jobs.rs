//! The console's view of the jobs directory: loaded once, and loaded again only when the directory
//! changes, not on every page. A load parses every job file (up to 1 MiB each); done per request,
//! a large or hostile directory would make every page pay for it.
//!
//! "Changes" is judged by a stamp of the directory: each entry's name, size, modification time
//! and inode (following symlinks, as the loader does), and the directory's own modification time.
//! A change that keeps all of these (the same size written within the filesystem's time
//! resolution) is picked up by the next change that does not.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use replay_ledger_core::config::{self, ConfigErrors, EffectCatalog, Job, LoadedConfig};

/// What a load gave: the directory's jobs, or its errors.
pub(crate) type Loaded = Arc<Result<LoadedConfig, ConfigErrors>>;

/// One entry of the directory as the stamp sees it.
type EntryStamp = (OsString, u64, Option<SystemTime>, u64);

/// What must stay the same for a load to still hold.
#[derive(Debug, PartialEq, Eq)]
struct Stamp {
    dir_modified: Option<SystemTime>,
    entries: Vec<EntryStamp>,
}

/// The jobs directory, loaded on first use and again whenever its stamp changes.
#[derive(Debug)]
pub(crate) struct JobsCache {
    dir: PathBuf,
    held: Mutex<Option<(Stamp, Loaded)>>,
    loads: AtomicU64,
}

impl JobsCache {
    pub(crate) fn new(dir: PathBuf) -> JobsCache {
        JobsCache {
            dir,
            held: Mutex::new(None),
            loads: AtomicU64::new(0),
        }
    }

    /// The directory as loaded, loading it (without secrets) if it changed since the last load.
    pub(crate) fn get(&self) -> Loaded {
        let now = stamp(&self.dir);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((stamp, loaded)) = held.as_ref() {
            if *stamp == now {
                return Arc::clone(loaded);
            }
        }
        let loaded = Arc::new(config::without_secrets(|| config::load_dir(&self.dir)));
        self.loads.fetch_add(1, Ordering::Relaxed);
        *held = Some((now, Arc::clone(&loaded)));
        loaded
    }

    /// The job named `name`, as [`config::find_job`] would answer from the directory.
    pub(crate) fn find_job(&self, name: &str) -> Result<(EffectCatalog, Job), ConfigErrors> {
        match self.get().as_ref() {
            Ok(loaded) => config::job_in(loaded, &self.dir, name),
            Err(errors) => Err(errors.clone()),
        }
    }

    /// How many times the directory was loaded.
    #[cfg(test)]
    fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }
}

/// The stamp of `dir` now; an entry that cannot be read is stamped as such (and its error shows
/// when the loader reads it).
fn stamp(dir: &Path) -> Stamp {
    let dir_modified = std::fs::metadata(dir).and_then(|m| m.modified()).ok();
    let mut entries: Vec<EntryStamp> = std::fs::read_dir(dir)
        .map(|read| {
            read.filter_map(Result::ok)
                .map(|entry| {
                    let meta = std::fs::metadata(entry.path()).ok();
                    (
                        entry.file_name(),
                        meta.as_ref().map_or(0, |m| m.len()),
                        meta.as_ref().and_then(|m| m.modified().ok()),
                        meta.as_ref().map_or(0, |m| m.ino()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    Stamp {
        dir_modified,
        entries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EFFECTS: &str = "t:\n  webhook: { url: 'http://127.0.0.1:9/' }\n  idempotent: true\n";

    fn job(timezone: &str) -> String {
        format!("name: j\ntimezone: {timezone}\nwindow: {{ previous: day }}\n")
    }

    fn timezone_of(cache: &JobsCache) -> String {
        cache.find_job("j").expect("job j").1.timezone.to_string()
    }

    #[test]
    fn an_unchanged_directory_is_read_once_and_a_changed_one_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("effects.yaml"), EFFECTS).expect("write");
        std::fs::write(dir.path().join("j.yaml"), job("UTC")).expect("write");
        let cache = JobsCache::new(dir.path().to_path_buf());

        for _ in 0..5 {
            assert_eq!(timezone_of(&cache), "UTC");
        }
        assert_eq!(cache.loads(), 1);

        std::fs::write(dir.path().join("j.yaml"), job("America/Sao_Paulo")).expect("write");
        assert_eq!(timezone_of(&cache), "America/Sao_Paulo");
        assert_eq!(timezone_of(&cache), "America/Sao_Paulo");
        assert_eq!(cache.loads(), 2);

        std::fs::remove_file(dir.path().join("j.yaml")).expect("remove");
        assert!(cache.find_job("j").is_err());
        assert_eq!(cache.loads(), 3);
    }
}
