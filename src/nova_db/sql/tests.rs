//! Sessions are read-only on every engine (MariaDB and PostgreSQL are the machine's servers,
//! started by `./test`), and a database that is not there is an error naming it.

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

/// Creates `parasol_test_<hex>` with one table through `admin`, returns its name.
async fn scratch_database<C: Connection>(admin: &str) -> String
where
    for<'c> &'c mut C: sqlx::Executor<'c>,
{
    let name = format!("parasol_test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = C::connect(admin)
        .await
        .expect("the server runs (`./test` starts it)");
    conn.execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .expect("create database");
    name
}

async fn refused_write(url: &str) -> Result<String, String> {
    let url = DbUrl::parse(url).expect("url");
    let pool = Pool::connect(&url, Duration::from_secs(10))
        .await
        .map_err(|e| e.to_string())?;
    let outcome = match &pool {
        Pool::MySql(p) => sqlx::raw_sql("CREATE TABLE t (x INTEGER)")
            .execute(p)
            .await
            .map(drop),
        Pool::Postgres(p) => sqlx::raw_sql("CREATE TABLE t (x INTEGER)")
            .execute(p)
            .await
            .map(drop),
        Pool::Sqlite(_) => Ok(()),
    };
    pool.close().await;
    match outcome {
        Ok(()) => Err("the write went through".into()),
        Err(e) => Ok(e.to_string()),
    }
}

#[tokio::test]
async fn mariadb_and_postgresql_sessions_refuse_writes() {
    let maria = scratch_database::<sqlx::MySqlConnection>("mysql://root@127.0.0.1:3306/").await;
    let pg =
        scratch_database::<sqlx::PgConnection>("postgres://postgres@127.0.0.1:5432/test").await;
    let maria_refused = refused_write(&format!(
        "mysql+pymysql://root@127.0.0.1:3306/{maria}?charset=utf8"
    ))
    .await;
    let pg_refused = refused_write(&format!(
        "postgresql+psycopg2://postgres@127.0.0.1:5432/{pg}"
    ))
    .await;
    let mut conn = sqlx::MySqlConnection::connect("mysql://root@127.0.0.1:3306/")
        .await
        .expect("MariaDB");
    conn.execute(format!("DROP DATABASE {maria}").as_str())
        .await
        .expect("drop");
    let mut conn = sqlx::PgConnection::connect("postgres://postgres@127.0.0.1:5432/test")
        .await
        .expect("PostgreSQL");
    conn.execute(format!("DROP DATABASE {pg}").as_str())
        .await
        .expect("drop");
    let maria_refused = maria_refused.expect("MariaDB refuses the write");
    assert!(maria_refused.contains("READ ONLY"), "{maria_refused}");
    let pg_refused = pg_refused.expect("PostgreSQL refuses the write");
    assert!(pg_refused.contains("read-only transaction"), "{pg_refused}");
}
