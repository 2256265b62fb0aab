//! Following other processes (PostgreSQL): a trigger notifies channel `parasol_hosts` with the
//! ids of the hosts each statement changed and the writing process' name; each process listens
//! and loads the hosts others changed into its live table, several notifications at a time.
//! A notification may be lost while the listening connection is down, so after a reconnection
//! the whole table is loaded again. SQLite has one process per ledger: nothing to follow.

use super::{Ledger, LedgerError, Pools};
use crate::clock::SharedClock;
use crate::domain::HostId;
use sqlx::postgres::PgListener;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The channel the ledger's trigger notifies.
pub const CHANNEL: &str = "parasol_hosts";

/// Most notifications gathered into one reload.
const GATHER: usize = 256;

/// What one notification asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Changed {
    /// This process wrote it: its table has it already.
    Own,
    Hosts(Vec<HostId>),
    /// Too many to list: load everything.
    All,
}

/// Reads a payload `"<process>|<id>,<id>…"` or `"<process>|*"`.
pub(crate) fn parse(payload: &str, own: &str) -> Changed {
    let (process, ids) = payload.split_once('|').unwrap_or(("", payload));
    if process == own {
        return Changed::Own;
    }
    if ids == "*" {
        return Changed::All;
    }
    let parsed: Option<Vec<HostId>> = ids
        .split(',')
        .map(|id| id.trim().parse::<i64>().ok().map(HostId))
        .collect();
    parsed.map_or(Changed::All, Changed::Hosts)
}

impl Ledger {
    /// Keeps the live table in step with the other processes' writes until `shutdown`;
    /// returns at once on SQLite.
    pub async fn follow(&self, clock: SharedClock, shutdown: CancellationToken) {
        let Pools::Postgres(pool) = &self.pools else {
            return;
        };
        let mut backoff =
            crate::backoff::Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
        while !shutdown.is_cancelled() {
            let listener = async {
                let mut l = PgListener::connect_with(pool).await?;
                l.listen(CHANNEL).await?;
                Ok::<_, sqlx::Error>(l)
            };
            let mut listener = tokio::select! {
                l = listener => match l {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot listen for other processes' changes; retrying");
                        tokio::select! {
                            _ = clock.sleep_ms(backoff.next_delay_ms()) => continue,
                            _ = shutdown.cancelled() => return,
                        }
                    }
                },
                _ = shutdown.cancelled() => return,
            };
            // Whatever changed while nobody listened.
            if let Err(e) = self.reload_all().await {
                tracing::warn!(error = %e, "reloading the host table failed");
            }
            backoff.reset();
            tokio::select! {
                result = self.follow_on(&mut listener) => {
                    if let Err(e) = result {
                        tracing::warn!(error = %e, "lost the change notifications; listening again");
                    }
                }
                _ = shutdown.cancelled() => return,
            }
        }
    }

    /// Applies notifications as they come, until the listening connection fails.
    async fn follow_on(&self, listener: &mut PgListener) -> Result<(), LedgerError> {
        loop {
            let Some(first) = listener.try_recv().await? else {
                return Err(LedgerError::Invalid(
                    "the listening connection closed".into(),
                ));
            };
            let mut ids = Vec::new();
            let mut all = false;
            let mut take = |payload: &str| match parse(payload, &self.process) {
                Changed::Own => {}
                Changed::All => all = true,
                Changed::Hosts(h) => ids.extend(h),
            };
            take(first.payload());
            // Notifications that are already here go into the same reload.
            for _ in 0..GATHER {
                match tokio::time::timeout(Duration::ZERO, listener.try_recv()).await {
                    Ok(Ok(Some(n))) => take(n.payload()),
                    Ok(Ok(None)) => {
                        return Err(LedgerError::Invalid(
                            "the listening connection closed".into(),
                        ))
                    }
                    Ok(Err(e)) => return Err(e.into()),
                    Err(_) => break,
                }
            }
            if all {
                self.reload_all().await?;
            } else if !ids.is_empty() {
                ids.sort();
                ids.dedup();
                self.reload(&ids).await?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_the_hosts_or_everything_and_own_changes_are_skipped() {
        assert_eq!(parse("me|1,2", "me"), Changed::Own);
        assert_eq!(
            parse("other|3,1", "me"),
            Changed::Hosts(vec![HostId(3), HostId(1)])
        );
        assert_eq!(parse("other|*", "me"), Changed::All);
        assert_eq!(parse("other|x", "me"), Changed::All, "unreadable: load all");
    }
}
