//! The real Nova around the reader: Nova's cached virtualenv, with the MySQL and PostgreSQL
//! drivers (pinned in `tests/nova_functional/requirements.txt`), fresh databases on the
//! machine's MariaDB, PostgreSQL or a SQLite folder (dropped when the test ends, however it
//! ends), `nova-manage` to make Nova's schema, and `seed.py` to map and fill the cells.

use serde_json::Value;
use sqlx::Connection;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../support/venv.rs"]
mod venv;

pub const MARIADB_ADMIN: &str = "mysql://root@127.0.0.1:3306/";
pub const POSTGRES_ADMIN: &str = "postgres://postgres@127.0.0.1:5432/test";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    MariaDb,
    Postgres,
    Sqlite,
}

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Nova's virtualenv, the functional harness's (`support/venv.rs`'s [`venv::nova_venv`]).
pub fn venv() -> PathBuf {
    venv::nova_venv()
}

/// The output of a command that must have succeeded.
pub fn check(output: std::io::Result<Output>) -> Output {
    let out = output.expect("spawn");
    assert!(
        out.status.success(),
        "failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Fresh databases `parasol_test_<id>_<name>` of one engine; dropped on drop.
pub struct Databases {
    pub engine: Engine,
    prefix: String,
    names: Vec<String>,
    pub dir: tempfile::TempDir,
}

impl Databases {
    pub async fn create(engine: Engine, names: &[&str]) -> Databases {
        let prefix = format!("parasol_test_{}", uuid::Uuid::new_v4().simple());
        let names: Vec<String> = names.iter().map(|n| format!("{prefix}_{n}")).collect();
        for name in &names {
            let create = format!("CREATE DATABASE {name}");
            match engine {
                Engine::MariaDb => admin_mariadb(&create).await,
                Engine::Postgres => admin_postgres(&create).await,
                Engine::Sqlite => {}
            }
        }
        Databases {
            engine,
            prefix,
            names,
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// The SQLAlchemy URL (as nova.conf writes it) of database `name`, made or not.
    pub fn url(&self, name: &str) -> String {
        let db = format!("{}_{name}", self.prefix);
        match self.engine {
            Engine::MariaDb => format!("mysql+pymysql://root@127.0.0.1:3306/{db}?charset=utf8"),
            Engine::Postgres => format!("postgresql+psycopg2://postgres@127.0.0.1:5432/{db}"),
            Engine::Sqlite => format!("sqlite:///{}/{name}.sqlite", self.dir.path().display()),
        }
    }

    /// A URL with a password whose server is not there.
    pub fn unreachable_url(&self, name: &str) -> String {
        match self.engine {
            Engine::MariaDb => {
                format!("mysql+pymysql://nova:hunter2secret@127.0.0.1:1/{name}?charset=utf8")
            }
            Engine::Postgres => {
                format!("postgresql+psycopg2://nova:hunter2secret@127.0.0.1:1/{name}")
            }
            Engine::Sqlite => format!("sqlite:////nonexistent-{}/{name}.sqlite", self.prefix),
        }
    }

    /// `url("cell2")` as a template filled from `url("cell1")` (Nova's `format_db_url`).
    pub fn cell2_template(&self) -> String {
        match self.engine {
            Engine::MariaDb => format!(
                "{{scheme}}://{{username}}@{{hostname}}:{{port}}/{}_cell2?{{query}}",
                self.prefix
            ),
            Engine::Postgres => format!(
                "{{scheme}}://{{username}}@{{hostname}}:{{port}}/{}_cell2",
                self.prefix
            ),
            Engine::Sqlite => format!("{{scheme}}:///{}/cell2.sqlite", self.dir.path().display()),
        }
    }

    /// A nova.conf naming the API database and `cell` as `[database] connection`.
    pub fn nova_conf(&self, cell: &str) -> PathBuf {
        let conf = format!(
            "[DEFAULT]\ntransport_url = fake://\nservice_down_time = 60\n\
             [api_database]\nconnection = {}\nmax_retries = 0\n\
             [database]\nconnection = {}\nmax_retries = 0\n\
             [oslo_messaging_notifications]\ndriver = noop\n\
             [filter_scheduler]\ntrack_instance_changes = False\n",
            self.url("api"),
            self.url(cell)
        );
        let path = self.dir.path().join(format!("nova-{cell}.conf"));
        std::fs::write(&path, conf).expect("nova.conf");
        path
    }
}

impl Drop for Databases {
    fn drop(&mut self) {
        let (engine, names) = (self.engine, std::mem::take(&mut self.names));
        if engine == Engine::Sqlite {
            return;
        }
        // Drop runs outside any runtime the test may still hold: use a thread of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            let runtime = runtime.expect("runtime");
            for name in names {
                runtime.block_on(async {
                    match engine {
                        Engine::MariaDb => {
                            admin_mariadb(&format!("DROP DATABASE IF EXISTS {name}")).await
                        }
                        _ => {
                            admin_postgres(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                                .await
                        }
                    }
                });
            }
        });
        let _ = dropped.join();
    }
}

async fn admin_mariadb(sql: &str) {
    let mut conn = sqlx::MySqlConnection::connect(MARIADB_ADMIN)
        .await
        .expect("MariaDB must be running on 127.0.0.1:3306 (`./test` starts it)");
    sqlx::raw_sql(sql).execute(&mut conn).await.expect(sql);
}

async fn admin_postgres(sql: &str) {
    let mut conn = sqlx::PgConnection::connect(POSTGRES_ADMIN)
        .await
        .expect("PostgreSQL must be running on 127.0.0.1:5432 (`./test` starts it)");
    sqlx::raw_sql(sql).execute(&mut conn).await.expect(sql);
}

/// `nova-manage --config-file conf ARGS`, in a blocking thread. Run as its entry point
/// through the venv's python: the venv was built under another path, which its scripts name.
pub async fn nova_manage(venv: &Path, conf: &Path, args: &[&str]) {
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.args([
        "-c",
        "import sys; from nova.cmd.manage import main; sys.exit(main())",
    ])
    .arg("--config-file")
    .arg(conf)
    .args(args);
    tokio::task::spawn_blocking(move || check(cmd.output()))
        .await
        .expect("nova-manage");
}

/// Runs `seed.py` on `spec` and returns the view of nova-scheduler's `HostManager`.
pub async fn seed(venv: &Path, conf: &Path, dir: &Path, spec: &Value) -> Value {
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, spec.to_string()).expect("spec");
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.arg(manifest("tests/nova_db/seed.py"))
        .arg(conf)
        .arg(&spec_path);
    let out = tokio::task::spawn_blocking(move || check(cmd.output()))
        .await
        .expect("seed");
    serde_json::from_slice(&out.stdout).expect("seed.py prints JSON")
}
