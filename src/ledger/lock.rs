//! One `parasol serve` per SQLite ledger: each keeps its live table in memory and SQLite tells
//! no other process what it wrote, so a second process on the same file would decide on views
//! that drift apart. `serve` holds an exclusive `flock` on `<file>.lock` for its whole life
//! (the kernel drops it when the process ends, even by SIGKILL); a second one is refused.
//! PostgreSQL ledgers are shared by design and take no lock.

use super::LedgerError;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The lock held on a SQLite ledger; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct ProcessLock {
    path: PathBuf,
    _file: std::fs::File,
}

impl ProcessLock {
    /// The lock file (`<ledger file>.lock`).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Locks the SQLite ledger `url` for this process, or says which process holds it; `None`
/// for PostgreSQL and in-memory SQLite (nothing another process could open).
pub fn lock_for_process(url: &str) -> Result<Option<ProcessLock>, LedgerError> {
    if !url.starts_with("sqlite:") {
        return Ok(None);
    }
    let opts = sqlx::sqlite::SqliteConnectOptions::from_str(url).map_err(LedgerError::Database)?;
    let file = opts.get_filename();
    let name = file.to_string_lossy();
    if name == ":memory:" || name.starts_with("file:sqlx-in-memory") || url.contains("mode=memory")
    {
        return Ok(None);
    }
    let path = PathBuf::from(format!("{name}.lock"));
    let cannot = |e: std::io::Error| {
        LedgerError::Invalid(format!(
            "cannot open the ledger's lock file {}: {e}",
            path.display()
        ))
    };
    let mut lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(cannot)?;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(cannot(e));
        }
        let mut holder = String::new();
        let _ = lock.read_to_string(&mut holder);
        let holder = match holder.trim() {
            "" => String::new(),
            pid => format!(" (pid {pid})"),
        };
        return Err(LedgerError::Invalid(format!(
            "the SQLite ledger {} is in use by another parasol serve{holder}, which holds {}: \
             one process per SQLite ledger (each would decide on its own view of it). Stop \
             that process, point [ledger] url at another file, or share a PostgreSQL ledger \
             between several processes",
            file.display(),
            path.display()
        )));
    }
    // The holder's pid, for the message of the next one refused (advisory, best effort).
    let _ = lock
        .set_len(0)
        .and_then(|()| lock.rewind())
        .and_then(|()| writeln!(lock, "{}", std::process::id()));
    Ok(Some(ProcessLock { path, _file: lock }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_file_is_refused_naming_the_holder_and_freed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/ledger.db", dir.path().display());
        let held = lock_for_process(&url)
            .unwrap()
            .expect("a file ledger is locked");
        assert!(held.path().ends_with("ledger.db.lock"));
        let err = lock_for_process(&url).unwrap_err().to_string();
        assert!(err.contains("is in use by another parasol serve"), "{err}");
        assert!(
            err.contains(&format!("(pid {})", std::process::id())),
            "{err}"
        );
        drop(held);
        lock_for_process(&url).unwrap().expect("free again");
        assert!(lock_for_process("sqlite::memory:").unwrap().is_none());
        assert!(lock_for_process("postgres://u@h/db").unwrap().is_none());
    }
}
