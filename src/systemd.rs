//! systemd's readiness protocol (sd_notify(3)) for the unit's `Type=notify`: `READY=1` once
//! the service serves, `RELOADING=1` with `MONOTONIC_USEC` then `READY=1` around a SIGHUP
//! reload, `STOPPING=1` on shutdown. Sent with the `sd-notify` crate to `$NOTIFY_SOCKET`
//! (pure Rust, no libsystemd to link, abstract sockets supported, kept up with systemd's
//! protocol: `MONOTONIC_USEC`); without that variable (not under systemd) every call does
//! nothing.

use sd_notify::NotifyState;

/// The service serves: `READY=1` and a `STATUS=` line for `systemctl status`.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A reload starts: `RELOADING=1` with the monotonic clock, as `Type=notify-reload` requires.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the monotonic clock for RELOADING=1");
            send(&[NotifyState::Reloading]);
        }
    }
}

/// The service stops.
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}
