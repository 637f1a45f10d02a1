//! `demo --console`: once the story has run, its scratch database stays up and the console
//! serves it on loopback, with a finance and an operator account of random passwords printed,
//! until Ctrl-C (or SIGTERM); then the caller removes the scratch database. `serve`'s scheduler
//! runs beside it, with the loopback webhook kept up, so what people ask from the console (start
//! the approved run, run a sweep) is done, as in production.

use std::net::SocketAddr;

use anyhow::Context;
use sqlx::PgPool;

use replay_ledger::edges::console::{self, accounts, Console, ConsoleConfig, Role};
use replay_ledger::services::scheduler::{Scheduler, SchedulerConfig};
use replay_ledger_core::config;
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::shared::shutdown;

/// The demo's accounts: who, with which role.
const ACCOUNTS: [(&str, Role); 2] = [
    ("financeiro@demo.example", Role::Finance),
    ("operacao@demo.example", Role::Operator),
];

/// Serves the console over the demo's database at `addr` (port 0: any free one; a busy port
/// falls back to a free one) until a stop signal.
pub(super) async fn serve(url: &str, addr: SocketAddr) -> anyhow::Result<()> {
    if !addr.ip().is_loopback() {
        anyhow::bail!(
            "demo --console serves on loopback only (its cookies are not Secure): {addr}"
        );
    }
    let pool = replay_ledger_core::tables::db::connect(url, "console")
        .await
        .context("connecting the console")?;
    let (jobs, webhook) = crate::people::leave_for_people(&pool, url).await?;
    let mut passwords = Vec::new();
    for (email, role) in ACCOUNTS {
        let password = accounts::generated_password();
        accounts::add(&pool, email, role, &password)
            .await
            .with_context(|| format!("creating the demo account {email}"))?;
        passwords.push((email, role, password));
    }
    let (listener, local) = match console::bind(addr).await {
        Ok(bound) => bound,
        Err(_) => console::bind(SocketAddr::new(addr.ip(), 0))
            .await
            .context("listening on loopback for the console")?,
    };
    let config = ConsoleConfig {
        addr: local,
        jobs_dir: jobs.path().to_path_buf(),
        secure_cookies: false,
        ..ConsoleConfig::default()
    };
    let console = Console::new(pool.clone(), config).map_err(anyhow::Error::msg)?;
    let daemon = scheduler(url, jobs.path()).await?;
    print_welcome(local, &passwords);
    let (trigger, stop) = shutdown::channel();
    shutdown::on_signals(trigger);
    tokio::join!(console.serve(listener, stop.clone()), daemon.run(stop));
    webhook.shutdown().await;
    close(pool).await;
    println!("\ndemo: console stopped; removing the scratch database.");
    Ok(())
}

/// `serve`'s scheduler over the demo's jobs: it carries out what the console asks for.
async fn scheduler(url: &str, jobs: &std::path::Path) -> anyhow::Result<Scheduler> {
    let loaded = config::load_dir(jobs).map_err(|e| anyhow::anyhow!("{e}"))?;
    let effects = Effects::from_catalog(&loaded.effects).context("providers")?;
    let pool = replay_ledger_core::tables::db::connect(url, "serve")
        .await
        .context("connecting serve")?;
    Scheduler::new(
        pool,
        url.to_string(),
        loaded,
        effects,
        SchedulerConfig::default(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))
}

fn print_welcome(at: SocketAddr, accounts: &[(&str, Role, String)]) {
    println!();
    println!("console: http://{at}/  (Ctrl-C to stop; the scratch database is removed then)");
    for (email, role, password) in accounts {
        println!("  {:<9} {email:<26} password: {password}", role.name());
    }
}

async fn close(pool: PgPool) {
    pool.close().await;
}
