//! A full disk under a SQLite ledger: a batch of notifications that cannot commit changes
//! nothing (neither the ledger nor the live table), says the ledger is out of space, and
//! applies whole once the space is back.

use crate::coalescing::dump;
use crate::small_disk::SmallDisk;
use parasol::domain::Inventory;
use parasol::ledger::Ledger;
use parasol::notifications::apply_batch;
use parasol::nova::Notification;
use std::collections::BTreeMap;

/// A host-state event of a host with enough traits that a few hundred of them need far more
/// pages than a full disk has left.
fn big_host(id: &str, h: usize) -> Notification {
    let mut inventory = BTreeMap::new();
    inventory.insert("VCPU".to_string(), Inventory::of(64));
    inventory.insert("MEMORY_MB".to_string(), Inventory::of(262_144));
    inventory.insert("DISK_GB".to_string(), Inventory::of(2_000));
    let traits = (0..40)
        .map(|t| format!("CUSTOM_TRAIT_{t:03}_{}", "X".repeat(40)))
        .collect();
    crate::host_state_event(id, &format!("disk-host-{h:04}"), inventory, traits)
}

/// Checkpoints and empties the write-ahead log: every write then needs space of the disk.
async fn empty_wal(url: &str) {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .unwrap();
}

async fn table(ledger: &Ledger) -> Vec<String> {
    ledger
        .read_hosts()
        .await
        .unwrap()
        .iter()
        .map(|h| format!("{h:?}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_cannot_commit_on_a_full_disk_changes_nothing_and_applies_once_space_returns()
{
    let disk = SmallDisk::mount(8);
    let url = disk.sqlite_url();
    {
        let ledger = Ledger::open(&url, 4).await.expect("open");
        let first: Vec<Notification> = (0..10).map(|h| big_host(&format!("a{h}"), h)).collect();
        let out = apply_batch(&ledger, &first.iter().collect::<Vec<_>>(), 1)
            .await
            .unwrap();
        assert!(out.iter().all(|o| o.is_ok()), "{out:?}");
        let (ledger_before, table_before) = (dump(&url).await, table(&ledger).await);

        // An empty write-ahead log: every write now needs space the disk has not got.
        empty_wal(&url).await;
        disk.fill();
        let batch: Vec<Notification> = (10..510)
            .map(|h| big_host(&format!("b{h}"), h))
            .chain((0..10).map(|h| big_host(&format!("c{h}"), h)))
            .collect();
        let refs: Vec<&Notification> = batch.iter().collect();
        let err = apply_batch(&ledger, &refs, 2)
            .await
            .expect_err("500 hosts cannot fit on a full disk");
        assert!(err.is_out_of_space(), "{err}");
        assert!(err.is_outage(), "{err}");
        assert_eq!(dump(&url).await, ledger_before, "the ledger is as it was");
        assert_eq!(table(&ledger).await, table_before, "the table is as it was");
        for id in ["b10", "b509", "c0"] {
            assert!(!ledger.is_processed(id).await.unwrap(), "{id} not recorded");
        }

        // Once space is back, the same batch applies whole.
        disk.free();
        let out = apply_batch(&ledger, &refs, 3).await.unwrap();
        assert!(out.iter().all(|o| o.is_ok()), "{out:?}");
        assert_eq!(ledger.host_ids().await.unwrap().len(), 510);
        let applied = table(&ledger).await;
        ledger.reload_all().await.unwrap();
        assert_eq!(table(&ledger).await, applied, "the table is the ledger");
    }
}

/// Claims whose group cannot commit on a full disk are answered with the ledger's error and
/// given back in the live table: neither the ledger nor the table holds any of them, and the
/// same claims are made once space is back (issue 15: "a claim whose batch fails to commit is
/// answered with an error and released in memory").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_that_cannot_commit_on_a_full_disk_are_answered_with_the_error_and_given_back() {
    use parasol::domain::Resources;
    use parasol::ledger::{ClaimOutcome, HostRegistration};
    let disk = SmallDisk::mount(8);
    let url = disk.sqlite_url();
    let ledger = Ledger::open(&url, 4).await.expect("open");
    let mut hosts = Vec::new();
    for h in 0..20 {
        let reg = HostRegistration::simple(&format!("h{h}"), &format!("u{h}"), 64, 65_536, 1_000);
        hosts.push(ledger.register_host(&reg, 1).await.unwrap());
    }
    let demand = Resources::new(2, 1_024, 10);
    assert_eq!(
        ledger.claim(hosts[0], "before", &demand, 1).await.unwrap(),
        ClaimOutcome::Claimed
    );
    let (ledger_before, table_before) = (dump(&url).await, table(&ledger).await);
    let live_before: Vec<_> = hosts
        .iter()
        .map(|id| ledger.table().get(*id).unwrap().used)
        .collect();
    empty_wal(&url).await;
    disk.fill();
    let claim_all = |ledger: Ledger, hosts: Vec<parasol::domain::HostId>| async move {
        let calls: Vec<_> = hosts
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let (ledger, id) = (ledger.clone(), *id);
                tokio::spawn(async move { ledger.claim(id, &format!("vm{i}"), &demand, 2).await })
            })
            .collect();
        let mut out = Vec::new();
        for c in calls {
            out.push(c.await.unwrap());
        }
        out
    };
    let refused = claim_all(ledger.clone(), hosts.clone()).await;
    for r in &refused {
        let e = r.as_ref().expect_err("no claim commits on a full disk");
        assert!(e.is_outage(), "{e}");
    }
    assert!(
        refused
            .iter()
            .any(|r| r.as_ref().is_err_and(|e| e.is_out_of_space())),
        "the ledger says it is out of space: {refused:?}"
    );
    let live_after: Vec<_> = hosts
        .iter()
        .map(|id| ledger.table().get(*id).unwrap().used)
        .collect();
    assert_eq!(live_after, live_before, "the table gave every claim back");
    assert_eq!(dump(&url).await, ledger_before, "the ledger is as it was");
    assert_eq!(table(&ledger).await, table_before);

    disk.free();
    let made = claim_all(ledger.clone(), hosts.clone()).await;
    assert!(
        made.iter().all(|r| matches!(r, Ok(ClaimOutcome::Claimed))),
        "{made:?}"
    );
    assert_eq!(ledger.allocation_count().await.unwrap(), 21);
    let live: Vec<_> = hosts
        .iter()
        .map(|id| ledger.table().get(*id).unwrap().used)
        .collect();
    ledger.reload_all().await.unwrap();
    let reloaded: Vec<_> = hosts
        .iter()
        .map(|id| ledger.table().get(*id).unwrap().used)
        .collect();
    assert_eq!(live, reloaded, "the table is the ledger");
}
