//! The migrations of `migrations/`, embedded in the binary with `include_str!` and handed to
//! sqlx's migrator as they are: the same versions, descriptions and checksums as
//! `sqlx::migrate!` would embed (so databases migrated by earlier builds agree), without sqlx's
//! macros, whose build compiles a second sqlx, TLS stack and all, for the compiler's host.

use std::borrow::Cow;

use futures::future::BoxFuture;
use sqlx::error::BoxDynError;
use sqlx::migrate::{MigrateError, Migration, MigrationSource, MigrationType, Migrator};

macro_rules! embedded {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!("../../../../migrations/", $file)))),*]
    };
}

/// Every file of `migrations/`, in version order; a new migration is added here too (a test
/// checks that the directory holds exactly these).
const FILES: &[(&str, &str)] = embedded![
    "20261014000001_seed_schema.sql",
    "20261014000002_engine_additions.sql",
    "20261014000003_attempts_and_review.sql",
    "20261014000004_reports_and_approval.sql",
    "20261014000005_live_consumer.sql",
    "20261201000001_partition_function.sql",
    "20261201000002_tallies_and_definitions.sql",
    "20261201000003_roles_and_review.sql",
    "20261201000004_job_runs.sql",
    "20261202010000_console.sql",
    "20261202020000_live_consumer_snapshot.sql",
    "20261202040000_previous_values.sql",
    "20261202050000_comissao_previous_values.sql",
    "20261203010000_ownership_epoch.sql",
    "20261203110001_review_resend.sql",
    "20261203110002_order_story.sql",
    "20261203120001_pass_history.sql",
    "20261203120002_session_idle_rule.sql",
    "20261203140000_ledger_hot_completion.sql",
    "20261204010000_run_figures.sql",
    "20261204090000_ownership_lease.sql",
    "20261204150000_rule_payload.sql",
    "20261204151000_progress.sql",
    "20261204153000_console_requests.sql",
    "20261204160000_console_rules_in_sql.sql",
    "20261204180000_rebuild.sql",
    "20261205090000_rule_payload_inlined.sql",
    "20261205100000_console_rebuild_approval.sql",
    "20261206010000_figures_net_and_approved_diff.sql",
    "20261206020000_rebuild_safety.sql",
    "20261206030000_console_requests_bounded.sql",
    "20261206040000_rebuild_approval_noted.sql",
    "20261206050000_takeover_narrow.sql",
    "20261206060000_console_interrupt.sql",
    "20261206070000_verify_proposals.sql",
    "20261206080000_pace_samples.sql",
    "20261206090000_console_words.sql",
    "20261206100000_rebuild_load.sql",
];

/// Every release, newest last, with the last migration it shipped: a release's migrations are
/// every embedded migration up to that one. The versions are `Cargo.toml`'s and `CHANGELOG.md`'s
/// (releases before 0.5.0 were named after the fact, at the commits the changelog gives); the
/// last is this build's own version and ships every migration, so a new migration goes into the
/// version being written, and a release already out is never given one (tests hold all three).
pub const RELEASES: &[(&str, &str)] = &[
    ("0.1.0", "20261014000005_live_consumer.sql"),
    ("0.2.0", "20261202050000_comissao_previous_values.sql"),
    ("0.3.0", "20261203140000_ledger_hot_completion.sql"),
    ("0.4.0", "20261205100000_console_rebuild_approval.sql"),
    ("0.5.0", "20261206100000_rebuild_load.sql"),
];

/// How many of [`FILES`] a release shipped, or `None` for a release not in [`RELEASES`].
fn shipped_by(release: &str) -> Option<usize> {
    let (_, last) = RELEASES.iter().find(|(version, _)| *version == release)?;
    FILES
        .iter()
        .position(|(name, _)| name == last)
        .map(|at| at + 1)
}

/// The embedded migrations, as sqlx reads a directory: `<version>_<description>.sql`, the
/// description with `_` as spaces, no transaction when the file starts `-- no-transaction`.
pub fn migrations() -> Vec<Migration> {
    FILES
        .iter()
        .map(|(name, sql)| migration(name, sql))
        .collect()
}

fn migration(name: &str, sql: &'static str) -> Migration {
    let (version, rest) = name
        .split_once('_')
        .expect("a migration is named <version>_<description>.sql");
    let version = version
        .parse()
        .expect("a migration's version is an integer");
    let description = rest.trim_end_matches(".sql").replace('_', " ");
    let no_tx = sql.starts_with("-- no-transaction");
    Migration::new(
        version,
        Cow::Owned(description),
        MigrationType::Simple,
        Cow::Borrowed(sql),
        no_tx,
    )
}

/// The first `n` embedded migrations.
#[derive(Debug)]
struct Embedded(usize);

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(self) -> BoxFuture<'s, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async move { Ok(migrations().into_iter().take(self.0).collect()) })
    }
}

/// sqlx's migrator over the embedded migrations.
pub async fn migrator() -> Result<Migrator, MigrateError> {
    Migrator::new(Embedded(FILES.len())).await
}

/// sqlx's migrator over the migrations `release` shipped, as that release's binary migrated (the
/// same files, the same checksums), or `None` for a release not in [`RELEASES`]. For the upgrade
/// test: a database as the previous release left it.
pub async fn migrator_of(release: &str) -> Option<Result<Migrator, MigrateError>> {
    let n = shipped_by(release)?;
    Some(Migrator::new(Embedded(n)).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_migrations_directory_is_embedded_in_order() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("migrations/")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = FILES.iter().map(|(n, _)| *n).collect();
        assert_eq!(embedded, on_disk);
        let versions: Vec<i64> = migrations().iter().map(|m| m.version).collect();
        assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    }

    /// Every migration as released, held to its recorded checksum: sqlx refuses to start on a
    /// database whose applied migration's text changed, so a released migration is never edited.
    #[test]
    fn no_released_migration_ever_changes_and_every_one_is_recorded() {
        let recorded: std::collections::BTreeMap<&str, &str> = include_str!("migrations.sha384")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| l.split_once(' ').expect("`FILE SHA384` per line"))
            .collect();
        let mut changed = Vec::new();
        let mut unrecorded = Vec::new();
        for (name, sql) in FILES {
            let checksum: String = migration(name, sql)
                .checksum
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            match recorded.get(name) {
                Some(&hex) if hex == checksum => {}
                Some(_) => changed.push(*name),
                None => unrecorded.push(format!("{name} {checksum}")),
            }
        }
        assert!(
            changed.is_empty(),
            "released migrations changed (a database that applied them would refuse this build; \
             restore them and write a new migration): {changed:?}"
        );
        assert!(
            unrecorded.is_empty(),
            "new migrations: record them in core/src/tables/db/migrations.sha384:\n{}",
            unrecorded.join("\n")
        );
        assert_eq!(recorded.len(), FILES.len(), "a recorded migration is gone");
    }

    /// Releases in order, each shipping more than the one before; the last is this build's
    /// version and ships every migration.
    #[test]
    fn every_release_ships_the_migrations_before_its_last_and_this_version_ships_them_all() {
        let shipped: Vec<usize> = RELEASES
            .iter()
            .map(|(version, last)| {
                shipped_by(version).unwrap_or_else(|| panic!("{version}: no migration {last}"))
            })
            .collect();
        assert!(
            shipped.windows(2).all(|w| w[0] < w[1]),
            "each release ships more migrations than the one before: {shipped:?}"
        );
        let version = |v: &str| -> Vec<u32> {
            v.split('.')
                .map(|n| n.parse().expect("a version of numbers"))
                .collect()
        };
        assert!(
            RELEASES
                .windows(2)
                .all(|w| version(w[0].0) < version(w[1].0)),
            "releases in order of version: {RELEASES:?}"
        );
        let (newest, last) = RELEASES.last().expect("a release");
        assert_eq!(
            *newest,
            env!("CARGO_PKG_VERSION"),
            "the newest release is this build's version (Cargo.toml): bump both together"
        );
        assert_eq!(
            Some(*last),
            FILES.last().map(|(name, _)| *name),
            "this version ships every migration: a new migration moves its line in RELEASES \
             (a release already out is never given one: bump the version)"
        );
        assert_eq!(shipped_by("0.0.9"), None);
    }

    #[test]
    fn descriptions_and_checksums_are_what_sqlx_reads_from_the_directory() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations"));
        let mut from_dir: Vec<Migration> = sqlx::migrate::resolve_blocking(dir)
            .expect("resolve")
            .into_iter()
            .map(|(m, _)| m)
            .collect();
        from_dir.sort_by_key(|m| m.version);
        let ours = migrations();
        assert_eq!(ours.len(), from_dir.len());
        for (a, b) in ours.iter().zip(&from_dir) {
            assert_eq!(
                (a.version, &a.description, &a.checksum),
                (b.version, &b.description, &b.checksum)
            );
            assert_eq!(a.no_tx, b.no_tx);
        }
    }
}
