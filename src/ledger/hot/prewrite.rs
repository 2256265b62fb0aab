//! The write-ahead log's file written out to its working size when the service starts.
//!
//! The log's file only grows until the checkpoint thread starts the log over at
//! [`WAL_LIMIT_FRAMES`](super::WAL_LIMIT_FRAMES); from then on each commit overwrites pages of
//! it that the kernel already caches. Until then every frame is written past the file's end,
//! where the kernel allocates, zeroes and maps new blocks and pages for it: on a freshly
//! started service at 5,000 decisions/s (80 MB of log a second) that was 8 % of the service's
//! CPU (BENCHMARKS.md, "The log laid out at start"). Written out once at start, in page-sized
//! writes, the log's file is overwritten from its first commit on, as it is after its first
//! start-over.
//!
//! Zeros after the log's last frame are what SQLite finds there after every start-over (frames
//! of an older generation): a frame whose salt is not the header's ends the log, whether it is
//! read back after a crash or by a reader. The file is laid out as a job of the hot writer, so
//! that it holds SQLite's write lock: no connection, of this process or another, appends a
//! frame while the file grows. The space is reserved first (`posix_fallocate`); a file system
//! that cannot hold it gets its bytes back and the log grows as it is written, as before.
//!
//! At start the service writes out what the ledger needs ([`Size::ForLedger`]), not always the
//! whole working size: [`LEDGER_MULTIPLE`] times the database file, at least [`FLOOR`], at
//! most `[ledger] wal_prewrite_mib`. The log fills at the rate of the cloud's traffic, which
//! grows with its hosts, as the file does: a ledger of 10,000 hosts is about 4 MiB and gets
//! the whole 256 MiB; an empty one (a first run: its schema still in the log) gets 1 MiB
//! instead of 256 MiB of zeros.

use super::{Step, Work};
use crate::ledger::{HostTable, LedgerError};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;

/// The log's file written out at start for a ledger of this many bytes: this many times the
/// database file.
pub const LEDGER_MULTIPLE: u64 = 64;

/// The least the log's file is written out to for a ledger (1 MiB: a few milliseconds).
pub const FLOOR: u64 = 1 << 20;

/// How far the log's file is written out.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Size {
    /// To exactly this many bytes.
    Exactly(u64),
    /// To what the ledger needs ([`for_ledger`]), at most this many bytes.
    ForLedger { ceiling: u64 },
}

/// The bytes of log written out for a database file of `file` bytes: [`LEDGER_MULTIPLE`]
/// times it, at least [`FLOOR`], at most `ceiling`.
pub fn for_ledger(file: u64, ceiling: u64) -> u64 {
    file.saturating_mul(LEDGER_MULTIPLE).max(FLOOR).min(ceiling)
}

/// The job: the log's file written out to `size`, answered with the bytes it added.
pub(crate) struct PrewriteLog {
    pub size: Size,
    pub outcome: Result<u64, LedgerError>,
    pub reply: tokio::sync::oneshot::Sender<Result<u64, LedgerError>>,
}

impl Work for PrewriteLog {
    fn run(&mut self, db: &rusqlite::Connection, _table: &HostTable) -> Step {
        self.outcome = prewrite(db, self.size);
        // It wrote nothing through SQLite: there is nothing to keep or undo.
        Step::Keep
    }

    fn committed(self: Box<Self>, _table: &HostTable) {
        let _ = self.reply.send(self.outcome);
    }

    fn failed(self: Box<Self>, _table: &HostTable, error: LedgerError) {
        let _ = self.reply.send(Err(error));
    }

    fn writes(&self) -> u64 {
        0
    }
}

/// Writes the log's file of `db` out to `size` with zeros, in page-sized writes (a larger
/// write leaves the kernel's cache of the file in larger pieces, each of which every later
/// frame's write walks whole); answers the bytes added: 0 when the ledger is not in WAL mode,
/// has no log file, or its log's file is that long already.
fn prewrite(db: &rusqlite::Connection, size: Size) -> Result<u64, LedgerError> {
    const PAGE: u64 = 4096;
    let mode: String = db.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Ok(0);
    }
    let Some(path) = db.path().filter(|p| !p.is_empty()) else {
        return Ok(0);
    };
    let bytes = match size {
        Size::Exactly(bytes) => bytes,
        Size::ForLedger { ceiling } => {
            let file = std::fs::metadata(path).map_err(|e| {
                LedgerError::Invalid(format!("cannot read the size of the ledger {path}: {e}"))
            })?;
            for_ledger(file.len(), ceiling)
        }
    };
    let log = format!("{path}-wal");
    let failed = |what: &str, e: std::io::Error| {
        LedgerError::Invalid(format!("cannot {what} the write-ahead log {log}: {e}"))
    };
    let file = match std::fs::OpenOptions::new().write(true).open(&log) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(failed("open", e)),
    };
    let start = file
        .metadata()
        .map_err(|e| failed("read the size of", e))?
        .len();
    if start >= bytes {
        return Ok(0);
    }
    let give_back = |e: LedgerError| {
        let _ = file.set_len(start);
        Err(e)
    };
    let (Ok(offset), Ok(len)) = (i64::try_from(start), i64::try_from(bytes - start)) else {
        return Ok(0);
    };
    // SAFETY: `file` is open for the whole call; posix_fallocate reads nothing from memory.
    let reserved = unsafe { libc::posix_fallocate(file.as_raw_fd(), offset, len) };
    if reserved != 0 {
        return give_back(failed(
            "reserve space for",
            std::io::Error::from_raw_os_error(reserved),
        ));
    }
    let zeros = [0u8; PAGE as usize];
    let mut at = start;
    while at < bytes {
        let n = (PAGE - at % PAGE).min(bytes - at);
        if let Err(e) = file.write_all_at(&zeros[..n as usize], at) {
            return give_back(failed("write", e));
        }
        at += n;
    }
    // Synced now, at start, rather than by the first checkpoint's sync of the log.
    if let Err(e) = file.sync_data() {
        return give_back(failed("sync", e));
    }
    Ok(bytes - start)
}
