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

use super::{Step, Work};
use crate::ledger::{HostTable, LedgerError};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;

/// The job: the log's file written out to `bytes`, answered with the bytes it added.
pub(crate) struct PrewriteLog {
    pub bytes: u64,
    pub outcome: Result<u64, LedgerError>,
    pub reply: tokio::sync::oneshot::Sender<Result<u64, LedgerError>>,
}

impl Work for PrewriteLog {
    fn run(&mut self, db: &rusqlite::Connection, _table: &HostTable) -> Step {
        self.outcome = prewrite(db, self.bytes);
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

/// Writes the log's file of `db` out to `bytes` with zeros, in page-sized writes (a larger
/// write leaves the kernel's cache of the file in larger pieces, each of which every later
/// frame's write walks whole); answers the bytes added: 0 when the ledger is not in WAL mode,
/// has no log file, or its log's file is that long already.
fn prewrite(db: &rusqlite::Connection, bytes: u64) -> Result<u64, LedgerError> {
    const PAGE: u64 = 4096;
    let mode: String = db.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Ok(0);
    }
    let Some(path) = db.path().filter(|p| !p.is_empty()) else {
        return Ok(0);
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
