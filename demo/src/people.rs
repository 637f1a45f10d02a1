//! What `demo --console` leaves for the two human loops, beside the story it ran: a gated
//! replay of the day after whose simulation waits for finance's approval, and a replay of the
//! day before whose provider failed a few calls, so their keys wait in the review queue as
//! `incerto`. Both run through the runner as any job does; nothing is written by hand.

use std::collections::HashSet;

use anyhow::Context;
use sqlx::PgPool;
use testkit::sink::{Behavior, Sink, SinkConfig};

use crate::{execute, EFFECTS_YAML, REPLAY_YAML};
use replay_ledger_core::config::{self, Job};
use replay_ledger_core::domain::{effect_key, NOTIFY_SELLER};
use replay_ledger_core::engine::effects::Effects;

/// The day after the incident, gated: its real run waits for an approved simulation.
const GATED_YAML: &str = "\
name: replay-2026-10-15
timezone: America/Sao_Paulo
window:
  from: 2026-10-15T00:00:00-03:00
  to: 2026-10-16T00:00:00-03:00
require_approved_simulation: true
effects:
  notificar-vendedor: { mode: apply, on_failure: release }
";

/// The day before, whose failed calls are kept for a person to decide (`on_failure: keep`).
const KEEP_YAML: &str = "\
name: replay-2026-10-13
timezone: America/Sao_Paulo
window:
  from: 2026-10-13T00:00:00-03:00
  to: 2026-10-14T00:00:00-03:00
effects:
  notificar-vendedor: { mode: apply, on_failure: keep }
";

/// The sweeper the console's "Rodar uma varredura agora" asks `serve` to run.
const SWEEP_YAML: &str = "\
name: sweeper
kind: sweep
schedule: \"0 */5 * * * *\"
stale_after: 5m
";

/// Calls of the day before that the provider answers 500: their keys end `incerto`.
const FAILED_CALLS: usize = 3;

/// Runs both and returns the jobs directory the console and `serve` read (the story's job, these
/// two and a sweeper) with the loopback webhook, kept up for what `serve` sends when people ask.
pub(super) async fn leave_for_people(
    pool: &PgPool,
    url: &str,
) -> anyhow::Result<(tempfile::TempDir, Sink)> {
    let jobs = tempfile::tempdir()?;
    for (file, yaml) in [
        ("effects.yaml", EFFECTS_YAML),
        ("replay-2026-10-14.yaml", REPLAY_YAML),
        ("replay-2026-10-15.yaml", GATED_YAML),
        ("replay-2026-10-13.yaml", KEEP_YAML),
        ("sweeper.yaml", SWEEP_YAML),
    ] {
        std::fs::write(jobs.path().join(file), yaml)?;
    }
    let failing = first_keys_of(pool, "2026-10-13T03:00:00Z", FAILED_CALLS).await?;
    let sink = Sink::start(SinkConfig {
        behavior: Behavior {
            dedup: true,
            fail_keys: failing,
            ..Behavior::default()
        },
        ..SinkConfig::default()
    })
    .await
    .context("starting the loopback webhook")?;
    std::env::set_var("SELLER_WEBHOOK_URL", sink.url());
    let loaded = config::load_dir(jobs.path()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let effects = Effects::from_catalog(&loaded.effects).context("providers")?;
    let job = |name: &str| -> anyhow::Result<&Job> {
        loaded
            .jobs
            .iter()
            .find(|j| j.name == name)
            .with_context(|| format!("the demo job {name}"))
    };
    println!("\nfor the console: what people decide");
    let before = execute(
        pool,
        url,
        job("replay-2026-10-13")?,
        &effects,
        Some(false),
        false,
    )
    .await?;
    println!(
        "  replay-2026-10-13 (on_failure: keep): {} key(s) incerto, waiting in the review queue",
        before
            .summary
            .effects
            .get(&replay_ledger_core::shared::summary::EffectOutcome::Uncertain)
            .copied()
            .unwrap_or(0)
    );
    let gated = execute(
        pool,
        url,
        job("replay-2026-10-15")?,
        &effects,
        Some(true),
        false,
    )
    .await?;
    println!(
        "  replay-2026-10-15 (require_approved_simulation): simulation of {} order(s) waiting for finance's approval",
        gated.summary.orders_in_diff
    );
    Ok((jobs, sink))
}

/// The ledger keys of the first `n` events archived from `from` on.
async fn first_keys_of(pool: &PgPool, from: &str, n: usize) -> anyhow::Result<HashSet<String>> {
    let ids: Vec<String> = sqlx::query_scalar(
        "select id from evento_arquivado where ocorrido_em >= $1::timestamptz order by posicao limit $2",
    )
    .bind(from)
    .bind(n as i64)
    .fetch_all(pool)
    .await?;
    Ok(ids.iter().map(|id| effect_key(id, NOTIFY_SELLER)).collect())
}
