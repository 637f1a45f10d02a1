//! The shutdown signal passed to every loop: set once on SIGINT/SIGTERM (or by a caller), observed
//! between batches, never in the middle of one.

use tokio::sync::watch;

/// A cheap, cloneable view of whether shutdown was asked for.
#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

/// The side that asks for shutdown.
#[derive(Debug, Clone)]
pub struct ShutdownTrigger {
    tx: std::sync::Arc<watch::Sender<bool>>,
}

/// A new signal, not yet triggered.
pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (
        ShutdownTrigger {
            tx: std::sync::Arc::new(tx),
        },
        Shutdown { rx },
    )
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        let _ = self.tx.send(true);
    }
}

impl Shutdown {
    /// A signal that never fires (tests, one-shot library calls).
    pub fn never() -> Shutdown {
        let (trigger, shutdown) = channel();
        std::mem::forget(trigger);
        shutdown
    }

    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once shutdown is asked for.
    pub async fn triggered(&mut self) {
        let _ = self.rx.wait_for(|v| *v).await;
    }
}

/// Triggers `trigger` on the first SIGINT or SIGTERM; a second one exits at once with 130.
pub fn on_signals(trigger: ShutdownTrigger) {
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            tracing::warn!("could not install signal handlers");
            return;
        };
        tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
        tracing::info!(
            "stop requested: finishing the batch in hand (signal again to exit at once)"
        );
        trigger.trigger();
        tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
        tracing::warn!("second stop signal: exiting now");
        std::process::exit(130);
    });
}
