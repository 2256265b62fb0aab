//! `parasol serve`: the service until SIGINT/SIGTERM, with SIGHUP reloading the configuration.

use crate::configuration::Settings;
use crate::startup::{AppState, Application, StartupError};
use actix_web::web;
use std::path::PathBuf;
use std::sync::Arc;

/// Builds the service from `settings` and runs it; `config` is re-read on SIGHUP.
pub async fn serve(settings: Settings, config: (PathBuf, bool)) -> Result<(), StartupError> {
    let app = Application::build(settings).await?;
    let state = app.state();
    let handle = app.handle();
    crate::amqp::spawn_consumers(state.clone());
    crate::placement::spawn_sync(state.clone());
    crate::rpc::spawn_rpc_server(state.clone());
    tokio::spawn(reload_on_sighup(state, config));
    tokio::spawn(async move {
        shutdown_signal().await;
        crate::systemd::stopping();
        tracing::info!("stopping: finishing in-flight requests");
        handle.stop(true).await;
    });
    crate::systemd::ready("serving");
    app.run_until_stopped()
        .await
        .map_err(|source| StartupError::Bind {
            addr: "http".into(),
            source,
        })
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
async fn reload_on_sighup(state: web::Data<AppState>, (path, explicit): (PathBuf, bool)) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!("cannot listen for SIGHUP; reload by restarting");
            return;
        };
        while hup.recv().await.is_some() {
            crate::systemd::reloading();
            let applied = reload(&state, &path, explicit).await;
            crate::systemd::ready(if applied {
                "serving"
            } else {
                "serving; last reload refused"
            });
        }
    }
}

/// Applies the configuration in `path` to the running service, or logs why it was refused.
pub async fn reload(state: &AppState, path: &std::path::Path, explicit: bool) -> bool {
    match Settings::load_with_source(path, explicit) {
        Ok((settings, source)) => match state.scheduler.reconfigure(Arc::new(settings)).await {
            Ok(()) => {
                tracing::info!(%source, "configuration reloaded");
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "new configuration refused; the old one keeps running");
                false
            }
        },
        Err(e) => {
            tracing::error!(error = %e, "new configuration refused; the old one keeps running");
            false
        }
    }
}
