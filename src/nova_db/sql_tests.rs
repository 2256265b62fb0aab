//! Connections are read-only, and a database that is not there is an error naming it.

use super::*;
use sqlx::Connection;

#[tokio::test]
async fn sqlite_sessions_refuse_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nova.sqlite");
    let create = format!("sqlite://{}?mode=rwc", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&create)
        .await
        .expect("create");
    conn.execute("CREATE TABLE t (x INTEGER)")
        .await
        .expect("create table");
    conn.close().await.expect("close");
    let url = DbUrl::parse(&format!("sqlite:///{}", path.display())).expect("url");
    let pool = Pool::connect(&url, Duration::from_secs(5))
        .await
        .expect("opens");
    let Pool::Sqlite(p) = &pool else {
        panic!("a sqlite URL gives a sqlite pool")
    };
    let error = sqlx::query("INSERT INTO t VALUES (1)")
        .execute(p)
        .await
        .expect_err("read-only");
    assert!(error.to_string().contains("readonly"), "{error}");
    pool.close().await;
}

#[tokio::test]
async fn a_missing_sqlite_file_is_an_error_naming_it_and_is_not_created() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nova_cell1.sqlite");
    let url = DbUrl::parse(&format!("sqlite:///{}", path.display())).expect("url");
    let error = Pool::connect(&url, Duration::from_secs(5))
        .await
        .expect_err("missing");
    assert!(matches!(error, NovaDbError::Connect { .. }), "{error:?}");
    assert!(error.to_string().contains("nova_cell1.sqlite"), "{error}");
    assert!(!path.exists(), "a read must not create the database");
}
