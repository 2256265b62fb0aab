//! `parasol serve`: the service until SIGINT/SIGTERM, with SIGHUP reloading the configuration.

use crate::configuration::Settings;
use crate::scheduling::Scheduler;
use crate::startup::{Application, StartupError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Builds the service from `settings` and runs it until SIGINT/SIGTERM, which reaches every
/// part at once (HTTP, notification consumer, RPC server, Placement sync); `config` is
/// re-read on SIGHUP.
pub async fn serve(settings: Settings, config: (PathBuf, bool)) -> Result<(), StartupError> {
    // Held until the process ends: one `serve` per SQLite ledger.
    let url = settings
        .ledger
        .resolve_url()
        .map_err(StartupError::DataDir)?;
    let _lock = crate::ledger::lock_for_process(&url)?;
    huge_pages(&settings.server);
    let app = Application::build(settings).await?;
    app.start_background();
    let shutdown = app.shutdown();
    tokio::spawn(reload_on_sighup(app.scheduler().clone(), config));
    tokio::spawn(async move {
        shutdown_signal().await;
        crate::systemd::stopping();
        tracing::info!("stopping: no new work; finishing what is in flight");
        shutdown.stop().await;
    });
    crate::systemd::ready("serving");
    app.run_until_stopped()
        .await
        .map_err(|source| StartupError::Bind {
            addr: "http".into(),
            source,
        })
}

/// `[server] huge_pages`: unless asked for, the process opts out of transparent huge pages
/// before the ledger and the host table are read in (the allocator's arena asked the kernel for
/// them when the process started; from here the kernel neither faults in nor assembles any).
fn huge_pages(server: &crate::configuration::ServerSettings) {
    if server.huge_pages {
        tracing::info!("transparent huge pages allowed ([server] huge_pages = true)");
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_THP_DISABLE takes integers only and changes no memory of ours.
        let rc = unsafe {
            libc::prctl(
                libc::PR_SET_THP_DISABLE,
                1 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
        if rc != 0 {
            tracing::warn!(error = %std::io::Error::last_os_error(),
                "could not opt out of transparent huge pages ([server] huge_pages = false); \
                 the resident memory may grow in 2 MiB steps");
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// On every SIGHUP: re-read the file; an invalid one is refused and the old config keeps running.
async fn reload_on_sighup(scheduler: Arc<Scheduler>, (path, explicit): (PathBuf, bool)) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!("cannot listen for SIGHUP; reload by restarting");
            return;
        };
        while hup.recv().await.is_some() {
            crate::systemd::reloading();
            let applied = reload(&scheduler, &path, explicit).await;
            crate::systemd::ready(if applied {
                "serving"
            } else {
                "serving; last reload refused"
            });
        }
    }
}

/// Applies the configuration in `path` to the running service, or logs why it was refused.
/// The log says which changed keys were applied and which wait for a restart (see
/// [`Settings::reload`]).
pub async fn reload(scheduler: &Scheduler, path: &Path, explicit: bool) -> bool {
    match Settings::load_with_source(path, explicit) {
        Ok((settings, source)) => {
            let reload = scheduler.settings().reload(settings);
            let summary = reload.summary();
            let waiting = !reload.waiting.is_empty();
            match scheduler.reconfigure(Arc::new(reload.settings)).await {
                Ok(()) => {
                    if waiting {
                        tracing::warn!(%source, "configuration reloaded; {summary}");
                    } else {
                        tracing::info!(%source, "configuration reloaded; {summary}");
                    }
                    true
                }
                Err(e) => {
                    tracing::error!(error = %e, "new configuration refused; the old one keeps running");
                    false
                }
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "new configuration refused; the old one keeps running");
            false
        }
    }
}
