use super::*;
use crate::domain::{HostId, Resources};
use crate::ledger::{ClaimOutcome, HostRegistration, Ledger};
use std::sync::mpsc as std_mpsc;
use tokio::sync::oneshot;

/// Holds the writer inside its group until the test lets it go.
pub(crate) struct Hold {
    entered: std_mpsc::Sender<()>,
    release: std_mpsc::Receiver<()>,
}

impl Work for Hold {
    fn run(&mut self, _db: &rusqlite::Connection, _table: &HostTable) -> Step {
        let _ = self.entered.send(());
        let _ = self.release.recv();
        Step::Keep
    }
    fn committed(self: Box<Self>, _table: &HostTable) {}
    fn failed(self: Box<Self>, _table: &HostTable, _error: LedgerError) {}
}

/// A job with a bug: it panics in the middle of its group.
pub(crate) struct Panics(pub Option<oneshot::Sender<Result<(), String>>>);

impl Work for Panics {
    fn run(&mut self, _db: &rusqlite::Connection, _table: &HostTable) -> Step {
        panic!("a job of the hot writer panicked (on purpose, in a test)");
    }
    fn committed(mut self: Box<Self>, _table: &HostTable) {
        let _ = self.0.take().unwrap().send(Ok(()));
    }
    fn failed(mut self: Box<Self>, _table: &HostTable, error: LedgerError) {
        let _ = self.0.take().unwrap().send(Err(error.to_string()));
    }
}

/// Records a message id, then keeps or undoes it; answers whether its group committed.
struct Marks {
    id: &'static str,
    keep: bool,
    answer: Option<oneshot::Sender<Result<(), String>>>,
}

impl Marks {
    fn new(id: &'static str, step: Step) -> (Box<Self>, oneshot::Receiver<Result<(), String>>) {
        let (answer, answered) = oneshot::channel();
        let job = Marks {
            id,
            keep: matches!(step, Step::Keep),
            answer: Some(answer),
        };
        (Box::new(job), answered)
    }
}

impl Work for Marks {
    fn run(&mut self, db: &rusqlite::Connection, _table: &HostTable) -> Step {
        db.execute(
            "INSERT INTO processed_messages (sent_at, message_id, processed_ms) VALUES ('', ?1, 1)",
            [self.id],
        )
        .unwrap();
        if self.keep {
            Step::Keep
        } else {
            Step::Undo
        }
    }
    fn committed(mut self: Box<Self>, _table: &HostTable) {
        let _ = self.answer.take().unwrap().send(Ok(()));
    }
    fn failed(mut self: Box<Self>, _table: &HostTable, error: LedgerError) {
        let _ = self.answer.take().unwrap().send(Err(error.to_string()));
    }
}

/// Holds the writer inside a group of its own until the returned sender is sent to.
pub(crate) fn hold_writer(hot: &HotWriter) -> std_mpsc::Sender<()> {
    let (entered, entered_rx) = std_mpsc::channel();
    let (release, release_rx) = std_mpsc::channel();
    assert!(hot
        .submit(Box::new(Hold {
            entered,
            release: release_rx
        }))
        .is_ok());
    entered_rx.recv().unwrap();
    release
}

/// A SQLite ledger in a directory of its own: (the directory, the ledger's file, the ledger).
pub(crate) async fn sqlite_ledger() -> (tempfile::TempDir, std::path::PathBuf, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ledger.db");
    let ledger = Ledger::open(&format!("sqlite://{}", file.display()), 2)
        .await
        .unwrap();
    (dir, file, ledger)
}

fn vcpus(n: i64) -> Resources {
    let mut r = Resources::default();
    r.0[0] = n;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_panics_fails_its_group_whole_and_the_writer_serves_on() {
    let (_dir, _, ledger) = sqlite_ledger().await;
    let reg = HostRegistration::simple(
        "host1",
        "00000000-0000-0000-0000-000000000101",
        4,
        8192,
        100,
    );
    ledger.register_host(&reg, 1_000).await.unwrap();
    let host = ledger.table().by_name("host1", None).unwrap().id;
    let hot = ledger.hot.clone().unwrap();

    // The writer is held inside a group of its own; a claim and a job that panics queue
    // behind it and make the next group together.
    let release = hold_writer(&hot);
    let queued = hot.submitted();
    let claiming = {
        let ledger = ledger.clone();
        tokio::spawn(async move {
            ledger
                .claim(
                    host,
                    "00000000-0000-0000-0000-0000000000c1",
                    &vcpus(1),
                    2_000,
                )
                .await
        })
    };
    // The claim reserves in the table, then queues its job: the job must be queued before
    // the panicking one, or the two make different groups.
    while ledger.table().pending(host) != Some(vcpus(1)) || hot.submitted() == queued {
        tokio::task::yield_now().await;
    }
    let (answer, answered) = oneshot::channel();
    assert!(hot.submit(Box::new(Panics(Some(answer)))).is_ok());
    release.send(()).unwrap();

    let panicked = answered.await.expect("the panicking job is answered");
    assert!(
        panicked.as_ref().is_err_and(|e| e.contains("panicked")),
        "{panicked:?}"
    );
    let claimed = claiming.await.unwrap();
    assert!(
        claimed.is_err(),
        "the claim shared the failed group: {claimed:?}"
    );
    assert_eq!(
        ledger.table().pending(host),
        Some(Resources::default()),
        "the failed claim's reservation is given back"
    );
    assert!(ledger
        .allocation("00000000-0000-0000-0000-0000000000c1")
        .await
        .unwrap()
        .is_none());

    // The thread is alive and takes the next claim.
    let again = ledger
        .claim(
            host,
            "00000000-0000-0000-0000-0000000000c2",
            &vcpus(1),
            3_000,
        )
        .await
        .unwrap();
    assert_eq!(again, ClaimOutcome::Claimed);
    assert!(ledger
        .allocation("00000000-0000-0000-0000-0000000000c2")
        .await
        .unwrap()
        .is_some());
}

/// A job alone in its group has the transaction to itself (no savepoint): kept, it is
/// committed; undone, nothing of it is written, and it is answered all the same. In a group
/// of several, an undone job still rolls back alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_alone_is_kept_or_undone_whole_and_in_a_group_alone() {
    let (_dir, file, ledger) = sqlite_ledger().await;
    let hot = ledger.hot.clone().unwrap();
    let recorded = |id: &str| -> bool {
        let db = rusqlite::Connection::open(&file).unwrap();
        db.query_row(
            "SELECT count(*) FROM processed_messages WHERE message_id = ?1",
            [id],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
            == 1
    };

    let (job, answered) = Marks::new("alone-undone", Step::Undo);
    assert!(hot.submit(job).is_ok());
    assert_eq!(answered.await.unwrap(), Ok(()));
    assert!(!recorded("alone-undone"), "an undone job wrote its id");
    let (job, answered) = Marks::new("alone-kept", Step::Keep);
    assert!(hot.submit(job).is_ok());
    assert_eq!(answered.await.unwrap(), Ok(()));
    assert!(recorded("alone-kept"), "a kept job's id is not there");

    // Two jobs behind one that holds the writer make the next group together.
    let release = hold_writer(&hot);
    let (undone, undone_answered) = Marks::new("grouped-undone", Step::Undo);
    let (kept, kept_answered) = Marks::new("grouped-kept", Step::Keep);
    assert!(hot.submit(undone).is_ok());
    assert!(hot.submit(kept).is_ok());
    release.send(()).unwrap();
    assert_eq!(undone_answered.await.unwrap(), Ok(()));
    assert_eq!(kept_answered.await.unwrap(), Ok(()));
    assert!(
        !recorded("grouped-undone"),
        "the undone job of a group wrote its id"
    );
    assert!(
        recorded("grouped-kept"),
        "the kept job of a group lost its id"
    );
}

/// Under steady writes a passive checkpoint never copies the whole log (the writer appends
/// while it copies), so SQLite never started the log over: its file grew by every frame ever
/// written. Past its limit the checkpoint thread copies the end of the log with the writers
/// held, and the next group starts the log over. (How soon depends on how long the disk
/// takes to sync, so the callers go on until it has happened three times, or give up.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_ahead_log_starts_over_under_steady_writes() {
    const CALLERS: usize = 16;
    const MAX_CLAIMS: usize = 40_000;
    let (_dir, file, ledger) = sqlite_ledger().await;
    let reg = HostRegistration::simple(
        "big",
        "00000000-0000-0000-0000-000000000201",
        1_000_000,
        100_000_000,
        10_000_000,
    );
    ledger.register_host(&reg, 1_000).await.unwrap();
    let host = ledger.table().by_name("big", None).unwrap().id;
    ledger.hot.as_ref().unwrap().set_wal_limit(256);
    // The log's header counts the times it started over (its checkpoint sequence number,
    // bytes 12..16).
    let wal = file.with_file_name("ledger.db-wal");
    let restarts = move || {
        let mut header = [0u8; 16];
        std::io::Read::read_exact(&mut std::fs::File::open(&wal).unwrap(), &mut header).unwrap();
        u32::from_be_bytes(header[12..16].try_into().unwrap())
    };

    // Callers that always have a claim queued (the writer is never idle for a whole
    // checkpoint's time), until the log has started over three times or enough is enough.
    let made = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let callers: Vec<_> = (0..CALLERS)
        .map(|c| {
            let (ledger, made, restarts) = (ledger.clone(), made.clone(), restarts.clone());
            tokio::spawn(async move {
                for i in 0.. {
                    if restarts() >= 3 || made.load(Ordering::Relaxed) >= MAX_CLAIMS {
                        return;
                    }
                    let uuid = format!("00000000-0000-0000-{c:04x}-{i:012x}");
                    let out = ledger.claim(host, &uuid, &vcpus(1), 2_000).await;
                    assert_eq!(out.unwrap(), ClaimOutcome::Claimed);
                    made.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for c in callers {
        c.await.unwrap();
    }
    assert!(
        restarts() >= 3,
        "{} claims committed and the log started over {} times",
        made.load(Ordering::Relaxed),
        restarts()
    );
    assert_eq!(ledger.table().pending(host), Some(Resources::default()));
}

/// The log written out at start (`prewrite`) is where commits go from then on: its file does
/// not grow, and a copy of the files taken while the ledger is open (a crash: no checkpoint,
/// no clean close) reads back every committed claim, the zeros after the last frame ending
/// the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prewritten_log_takes_the_commits_and_loses_none_through_a_crash() {
    let (_dir, file, ledger) = sqlite_ledger().await;
    let reg = HostRegistration::simple(
        "host1",
        "00000000-0000-0000-0000-000000000301",
        1_000,
        100_000,
        10_000,
    );
    ledger.register_host(&reg, 1_000).await.unwrap();
    let host = ledger.table().by_name("host1", None).unwrap().id;
    let claim = |i: usize| {
        let ledger = ledger.clone();
        async move {
            let uuid = format!("00000000-0000-0000-0000-{i:012x}");
            let out = ledger.claim(host, &uuid, &vcpus(1), 2_000).await;
            assert_eq!(out.unwrap(), ClaimOutcome::Claimed);
        }
    };
    for i in 0..10 {
        claim(i).await;
    }
    let wal = file.with_file_name("ledger.db-wal");
    let before = std::fs::metadata(&wal).unwrap().len();
    let added = ledger.prewrite_log(4).await.unwrap();
    assert_eq!(before + added, 4 << 20, "the log's file was {before} bytes");
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 4 << 20);
    assert_eq!(
        ledger.prewrite_log(4).await.unwrap(),
        0,
        "written out already"
    );

    for i in 10..40 {
        claim(i).await;
    }
    assert_eq!(
        std::fs::metadata(&wal).unwrap().len(),
        4 << 20,
        "the commits overwrite the written-out file"
    );

    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(&file, copy.path().join("ledger.db")).unwrap();
    std::fs::copy(&wal, copy.path().join("ledger.db-wal")).unwrap();
    let db = rusqlite::Connection::open(copy.path().join("ledger.db")).unwrap();
    let integrity: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let claims: i64 = db
        .query_row("SELECT count(*) FROM allocations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(claims, 40, "every committed claim is in the copy");
    let used: i64 = db
        .query_row(
            "SELECT used FROM inventories WHERE resource_class = 'VCPU'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(used, 40);
}

/// Claims take no savepoint: in one group, a claim the database declines (its host's memory
/// was used up behind the table's back) leaves nothing written, not even the class that still
/// had room; a claim beside it is made; and a reschedule (the instance holds an allocation)
/// moves the allocation whole, in a savepoint of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_of_one_group_are_each_made_or_declined_whole_without_savepoints() {
    let (_dir, file, ledger) = sqlite_ledger().await;
    let mut ids = Vec::new();
    for (i, name) in ["free", "full", "target"].into_iter().enumerate() {
        let uuid = format!("00000000-0000-0000-0000-00000000010{i}");
        let reg = HostRegistration::simple(name, &uuid, 4, 8192, 100);
        ledger.register_host(&reg, 1_000).await.unwrap();
        ids.push(ledger.table().by_name(name, None).unwrap().id);
    }
    let (free, full, target) = (ids[0], ids[1], ids[2]);
    let small = Resources::new(1, 512, 1);
    let moved = "00000000-0000-0000-0000-0000000000a1";
    assert_eq!(
        ledger.claim(free, moved, &small, 1_500).await.unwrap(),
        ClaimOutcome::Claimed
    );
    // Another writer uses up the memory of "full"; the table does not know.
    let other = rusqlite::Connection::open(&file).unwrap();
    other
        .execute(
            "UPDATE inventories SET used = usable WHERE host_id = ?1 AND resource_class = 'MEMORY_MB'",
            [full.0],
        )
        .unwrap();
    let used = |host: HostId| -> Vec<(String, i64)> {
        let mut rows = other
            .prepare("SELECT resource_class, used FROM inventories WHERE host_id = ?1 ORDER BY 1")
            .unwrap();
        let rows = rows
            .query_map([host.0], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        rows.map(Result::unwrap).collect()
    };
    let full_before = used(full);

    let release = hold_writer(&ledger.hot.clone().unwrap());
    let hot = ledger.hot.clone().unwrap();
    let queued = hot.submitted();
    let claim = |host: HostId, uuid: &'static str| {
        let ledger = ledger.clone();
        tokio::spawn(async move { ledger.claim(host, uuid, &small, 2_000).await })
    };
    let made = claim(free, "00000000-0000-0000-0000-0000000000b1");
    let declined = claim(full, "00000000-0000-0000-0000-0000000000b2");
    let rescheduled = claim(target, moved);
    while hot.submitted() < queued + 3 {
        tokio::task::yield_now().await;
    }
    release.send(()).unwrap();
    assert_eq!(made.await.unwrap().unwrap(), ClaimOutcome::Claimed);
    assert_eq!(declined.await.unwrap().unwrap(), ClaimOutcome::Declined);
    assert_eq!(rescheduled.await.unwrap().unwrap(), ClaimOutcome::Claimed);

    assert_eq!(used(full), full_before, "the declined claim took nothing");
    assert!(ledger
        .allocation("00000000-0000-0000-0000-0000000000b2")
        .await
        .unwrap()
        .is_none());
    let one = vec![
        ("DISK_GB".to_string(), 1),
        ("MEMORY_MB".to_string(), 512),
        ("VCPU".to_string(), 1),
    ];
    assert_eq!(used(free), one, "the made claim alone, the moved one gone");
    assert_eq!(used(target), one, "the moved claim");
    let a = ledger.allocation(moved).await.unwrap().unwrap();
    assert_eq!(a.host_id, target);
    assert_eq!(ledger.table().pending(full), Some(Resources::default()));
}

/// What the service writes out at start is sized by the ledger: 64 times its database file,
/// at least 1 MiB, at most the ceiling (`[ledger] wal_prewrite_mib`).
#[test]
fn the_log_written_out_for_a_ledger_grows_with_its_file_within_floor_and_ceiling() {
    use super::prewrite::for_ledger;
    let working = 256 << 20;
    assert_eq!(
        for_ledger(4096, working),
        1 << 20,
        "an empty ledger: the floor"
    );
    assert_eq!(for_ledger(1 << 20, working), 64 << 20);
    // A ledger of 10,000 hosts (4,247,552 bytes measured) gets the whole working size.
    assert_eq!(for_ledger(4_247_552, working), working);
    assert_eq!(for_ledger(u64::MAX, 8 << 20), 8 << 20, "the ceiling");
}

/// On a real ledger: a fresh one gets the floor; one whose file is 2 MiB larger gets the
/// ceiling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_ledger_gets_a_small_log_and_a_large_one_the_ceiling() {
    let (_dir, file, ledger) = sqlite_ledger().await;
    let wal = file.with_file_name("ledger.db-wal");
    ledger.prewrite_log_for_ledger(256).await.unwrap();
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 1 << 20);
    drop(ledger);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ledger.db");
    let db = rusqlite::Connection::open(&file).unwrap();
    db.execute_batch(
        "CREATE TABLE padding (b BLOB); INSERT INTO padding VALUES (zeroblob(2097152));",
    )
    .unwrap();
    drop(db);
    let ledger = Ledger::open(&format!("sqlite://{}", file.display()), 2)
        .await
        .unwrap();
    ledger.prewrite_log_for_ledger(16).await.unwrap();
    let wal = file.with_file_name("ledger.db-wal");
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 16 << 20);
}

/// Each connection maps at most `MMAP_BYTES` of the file: a page mapped by two counts twice
/// in the service's resident memory (with 1,000,000 instances the 256 MiB maps held 492 MB).
#[tokio::test]
async fn every_connection_maps_at_most_mmap_bytes_of_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("l.db");
    let ledger = Ledger::connect(&format!("sqlite://{}", file.display()), 2)
        .await
        .unwrap();
    ledger.migrate().await.unwrap();
    let writer = open(&file).unwrap();
    let mapped: i64 = writer
        .pragma_query_value(None, "mmap_size", |row| row.get(0))
        .unwrap();
    assert_eq!(mapped as u64, crate::ledger::MMAP_BYTES);
    let crate::ledger::Pools::Sqlite { read, .. } = &ledger.pools else {
        panic!("a SQLite ledger without SQLite pools");
    };
    let pooled: i64 = sqlx::query_scalar("PRAGMA mmap_size")
        .fetch_one(read)
        .await
        .unwrap();
    assert_eq!(pooled as u64, crate::ledger::MMAP_BYTES);
}
