//! The periodic read: one read now, then one every `[nova_db] refresh_interval_s` on the
//! reader's clock, published on a `watch` channel; `wake` (a host Nova's records did not know
//! was loaded: a new compute node) brings the next read forward, no sooner than
//! [`MIN_WOKEN_GAP_MS`] (or the interval, if shorter) after the last. A failed read keeps the
//! last good snapshot and records the error (as the Placement sync keeps its last known state).

use super::reader::NovaDbReader;
use super::snapshot::NovaDbSnapshot;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;

/// What the scheduler sees of the Nova databases.
#[derive(Clone, Debug, Default)]
pub struct RefreshState {
    /// The last successful read.
    pub snapshot: Option<Arc<NovaDbSnapshot>>,
    /// The error of the last read, if it failed (cleared by the next success).
    pub last_error: Option<String>,
    pub reads: u64,
    pub failures: u64,
}

/// The shortest time between two reads when woken before the interval is over.
pub const MIN_WOKEN_GAP_MS: u64 = 1_000;

/// Reads until `shutdown` resolves, publishing each outcome on `state`; `wake` resolving
/// starts the next read early (bounded in rate).
pub async fn refresh_loop<W, F>(
    reader: Arc<NovaDbReader>,
    state: watch::Sender<RefreshState>,
    wake: W,
    shutdown: impl Future<Output = ()>,
) where
    W: Fn() -> F,
    F: Future<Output = ()>,
{
    let interval_ms = (reader.settings().refresh_interval_s * 1000.0).round() as u64;
    let woken_gap_ms = interval_ms.min(MIN_WOKEN_GAP_MS);
    let clock = reader.clock();
    tokio::pin!(shutdown);
    loop {
        let outcome = tokio::select! {
            outcome = reader.read() => outcome,
            () = &mut shutdown => break,
        };
        match outcome {
            Ok(snapshot) => {
                log_read(&snapshot);
                state.send_modify(|s| {
                    s.snapshot = Some(Arc::new(snapshot));
                    s.last_error = None;
                    s.reads += 1;
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading Nova's databases failed; keeping the last read");
                state.send_modify(|s| {
                    s.last_error = Some(e.to_string());
                    s.reads += 1;
                    s.failures += 1;
                });
            }
        }
        tokio::select! {
            () = clock.sleep_ms(interval_ms) => {}
            () = async {
                wake().await;
                clock.sleep_ms(woken_gap_ms).await;
            } => {}
            () = &mut shutdown => break,
        }
    }
    reader.close().await;
}

fn log_read(snapshot: &NovaDbSnapshot) {
    for failure in &snapshot.failed_cells {
        tracing::warn!(cell = %failure.cell, error = %failure.error, "cannot read a Nova cell");
    }
    for cell in &snapshot.cells {
        for rejected in &cell.rejected {
            tracing::warn!(
                cell = %cell.cell.identity(),
                node = rejected.node.as_deref().unwrap_or("?"),
                host = rejected.host.as_deref().unwrap_or("?"),
                reason = %rejected.reason,
                "compute node skipped"
            );
        }
    }
    tracing::debug!(
        cells = snapshot.cells.len(),
        failed_cells = snapshot.failed_cells.len(),
        disabled_cells = snapshot.disabled_cells.len(),
        nodes = snapshot.nodes().count(),
        "read Nova's compute nodes"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::nova_db::{NovaDbSettings, SecretUrl};

    async fn next(rx: &mut watch::Receiver<RefreshState>) -> RefreshState {
        rx.changed().await.expect("the loop publishes");
        rx.borrow_and_update().clone()
    }

    #[tokio::test]
    async fn reads_again_every_interval_and_keeps_the_error_of_a_failed_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join("nova_api.sqlite");
        let settings = NovaDbSettings {
            enabled: true,
            api_database_url: SecretUrl(format!("sqlite:///{}", missing.display())),
            refresh_interval_s: 30.0,
            ..Default::default()
        };
        let clock = ManualClock::new(1_000);
        let reader = NovaDbReader::new(settings, Arc::new(clock.clone())).expect("valid settings");
        let (tx, mut rx) = watch::channel(RefreshState::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let never = || std::future::pending::<()>();
        let task = tokio::spawn(refresh_loop(Arc::new(reader), tx, never, async {
            let _ = stopped.await;
        }));
        let first = next(&mut rx).await;
        assert_eq!((first.reads, first.failures), (1, 1));
        let error = first.last_error.expect("an error");
        assert!(error.contains("nova_api.sqlite"), "{error}");
        assert!(first.snapshot.is_none());
        clock.advance_ms(29_999);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !rx.has_changed().expect("open"),
            "read before the interval passed"
        );
        clock.advance_ms(1);
        assert_eq!(next(&mut rx).await.reads, 2);
        stop.send(()).expect("loop running");
        task.await.expect("loop ends on shutdown");
    }
}
