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
];

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

#[derive(Debug)]
struct Embedded;

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(self) -> BoxFuture<'s, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async { Ok(migrations()) })
    }
}

/// sqlx's migrator over the embedded migrations.
pub async fn migrator() -> Result<Migrator, MigrateError> {
    Migrator::new(Embedded).await
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
