use super::*;
use crate::domain::Resources;
use crate::ledger::{ClaimOutcome, HostRegistration, Ledger};
use std::sync::mpsc as std_mpsc;
use tokio::sync::oneshot;

/// Holds the writer inside its group until the test lets it go.
struct Hold {
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
struct Panics(Option<oneshot::Sender<Result<(), String>>>);

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

fn vcpus(n: i64) -> Resources {
    let mut r = Resources::default();
    r.0[0] = n;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_panics_fails_its_group_whole_and_the_writer_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let ledger = Ledger::open(&url, 2).await.unwrap();
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
    let (entered, entered_rx) = std_mpsc::channel();
    let (release, release_rx) = std_mpsc::channel();
    assert!(hot
        .submit(Box::new(Hold {
            entered,
            release: release_rx
        }))
        .is_ok());
    entered_rx.recv().unwrap();
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
    while ledger.table().pending(host) != Some(vcpus(1)) {
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
