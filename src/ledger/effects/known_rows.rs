//! What SQLite's hot writer knows of each host's inventory rows without reading them: the
//! class and the columns a registration writes (total, reserved, min_unit, max_unit,
//! step_size, allocation_ratio, usable), as its own connection last committed them.
//!
//! `write::flush_rusqlite` read a host's rows back before writing each re-registration (to
//! leave the rows it repeats unwritten and to find the classes it no longer reports): stepping
//! three rows and reading 27 columns was a quarter of the writer's instructions per
//! re-registration. It reads them only when this memory cannot answer.
//!
//! The memory holds only what it can hold exactly:
//! - only the hot writer writes these columns on its connection (claims and instance
//!   messages change `used`, which is not kept here; a decision that needs `used` reads the
//!   rows);
//! - anything another connection commits (sqlx's writes, another process) changes the
//!   connection's `PRAGMA data_version`, which is asked at each flush, inside the
//!   transaction (no other writer can commit meanwhile): the memory is then forgotten;
//! - what a job wrote is remembered as soon as it is written, so a job whose statements are
//!   rolled back (its savepoint, or the group's transaction failing to commit) forgets the
//!   whole memory (`forget`), which the hot batch does on either.
//!
//! It lives with the writer's thread (one ledger file per thread; a connection opened again
//! starts with an empty memory).

use crate::table::FastMap;
use std::cell::RefCell;

/// An inventory row's columns that a registration writes, after its key: total, reserved,
/// min_unit, max_unit, step_size, allocation_ratio, usable.
pub(super) type InventoryValues = (i64, i64, i64, i64, i64, f64, i64);

/// A host's rows: (class, values).
pub(super) type Rows = Vec<(String, InventoryValues)>;

/// Hosts the memory holds at most (a cloud's hosts; past it, it starts over).
const MAX_HOSTS: usize = 1 << 20;

#[derive(Default)]
pub(super) struct KnownRows {
    /// The connection the memory is of (`ledger::hot::connection_serial`) and its
    /// `data_version` then.
    of: Option<(u64, i64)>,
    hosts: FastMap<i64, Rows>,
}

thread_local! {
    static KNOWN: RefCell<KnownRows> = RefCell::default();
}

impl KnownRows {
    /// Runs `f` with the memory of `db`'s thread, forgotten first when `db` is another
    /// connection or another connection committed since it was last asked.
    pub(super) fn with<R>(
        db: &rusqlite::Connection,
        f: impl FnOnce(&mut KnownRows) -> rusqlite::Result<R>,
    ) -> rusqlite::Result<R> {
        let version: i64 = db
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |row| row.get(0))?;
        let conn = crate::ledger::hot::connection_serial();
        KNOWN.with(|known| {
            let mut known = known.borrow_mut();
            if known.of != Some((conn, version)) || known.hosts.len() > MAX_HOSTS {
                known.hosts.clear();
                known.of = Some((conn, version));
            }
            f(&mut known)
        })
    }

    /// Forgets everything this thread's writer remembered (its writes were rolled back).
    pub(super) fn forget() {
        KNOWN.with(|known| {
            let mut known = known.borrow_mut();
            known.hosts.clear();
            known.of = None;
        });
    }

    /// Host `id`'s rows as committed, when known.
    pub(super) fn get(&self, id: i64) -> Option<&Rows> {
        self.hosts.get(&id)
    }

    /// Host `id`'s rows are now `rows` (each class once).
    pub(super) fn set<'a>(
        &mut self,
        id: i64,
        rows: impl IntoIterator<Item = (&'a str, InventoryValues)>,
    ) {
        let known = self.hosts.entry(id).or_default();
        let mut kept = 0;
        for (class, values) in rows {
            // In place when the classes are the ones it held, in the same order (a
            // re-registration's usual case): no string is copied.
            match known.get_mut(kept) {
                Some((c, v)) if c == class => *v = values,
                Some(slot) => *slot = (class.to_string(), values),
                None => known.push((class.to_string(), values)),
            }
            kept += 1;
        }
        known.truncate(kept);
    }
}
