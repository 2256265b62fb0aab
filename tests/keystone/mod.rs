//! The real Keystone (`keystone==30.0.0` from PyPI, pinned with its dependencies in
//! `tests/keystone/requirements.txt`) on a loopback port: SQLite, Fernet tokens. Its virtualenv
//! is cached in `$HOME/.cache/parasol/keystone-venv-<hash of the requirements>`; the database
//! and keys made by `keystone-manage` are made once per test run and copied for each Keystone.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[path = "../support/venv.rs"]
mod venv;
use venv::run;

const LAUNCHER: &str = include_str!("launcher.py");
pub const ADMIN_PASSWORD: &str = "bootstrap-admin-pw";

/// The cached virtualenv with Keystone, created on first use.
fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(venv::keystone_venv)
}

fn write_conf(dir: &Path) {
    let d = dir.display();
    let conf = format!(
        "[database]\nconnection = sqlite:///{d}/keystone.db\n\
         [token]\nprovider = fernet\nexpiration = 3600\n\
         [fernet_tokens]\nkey_repository = {d}/fernet-keys\n\
         [fernet_receipts]\nkey_repository = {d}/fernet-keys\n\
         [credential]\nkey_repository = {d}/credential-keys\n"
    );
    std::fs::write(dir.join("keystone.conf"), conf).expect("write keystone.conf");
}

/// A database and keys made by `keystone-manage` (db_sync, fernet_setup, credential_setup,
/// bootstrap), kept beside the cached virtualenv it was made with (a temporary directory held
/// by a static would never be removed); each Keystone starts from a copy.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let kept = venv().join("keystone-template");
        if kept.join(".complete").exists() {
            return kept;
        }
        // Made aside and renamed into place, so that no process copies a half-made one.
        let dir = tempfile::tempdir_in(venv()).expect("temp dir");
        write_conf(dir.path());
        let manage = |args: &[&str]| {
            run(Command::new(venv().join("bin/keystone-manage"))
                .arg("--config-file")
                .arg(dir.path().join("keystone.conf"))
                .args(args));
        };
        let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
        manage(&["db_sync"]);
        for setup in ["fernet_setup", "credential_setup"] {
            manage(&[setup, "--keystone-user", &user, "--keystone-group", &user]);
        }
        manage(&["bootstrap", "--bootstrap-password", ADMIN_PASSWORD]);
        std::fs::write(dir.path().join(".complete"), "").expect("mark template complete");
        // Another test process may have put its own in place meanwhile (a rename onto it
        // fails): either will do.
        if std::fs::rename(dir.path(), &kept).is_err() && !kept.join(".complete").exists() {
            panic!("cannot keep Keystone's template at {}", kept.display());
        }
        kept
    })
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read template") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A running Keystone; stopped (and its files removed) when dropped.
pub struct Keystone {
    child: Option<Child>,
    pub url: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Keystone {
    pub async fn start() -> Keystone {
        let template = tokio::task::spawn_blocking(template)
            .await
            .expect("template");
        let dir = tempfile::tempdir().expect("temp dir");
        copy_dir(template, dir.path());
        write_conf(dir.path());
        let port_file = dir.path().join("port");
        // stdin stays open as long as this process: the launcher exits when it closes, so a
        // test that dies without dropping this still leaves no Keystone behind.
        let child = Command::new(venv().join("bin/python"))
            .arg("-c")
            .arg(LAUNCHER)
            .arg(dir.path())
            .arg(&port_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start keystone");
        let deadline = Instant::now() + Duration::from_secs(120);
        let port = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                break port;
            }
            assert!(Instant::now() < deadline, "Keystone did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        Keystone {
            child: Some(child),
            url: format!("http://127.0.0.1:{}/v3", port.trim()),
            http: reqwest::Client::new(),
            _dir: dir,
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Calls Keystone's API; asserts a 2xx and returns the answer's JSON and subject token.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        extra: Option<(&str, &str)>,
        body: Option<Value>,
    ) -> (Value, Option<String>) {
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(token) = token {
            request = request.header("X-Auth-Token", token);
        }
        if let Some((name, value)) = extra {
            request = request.header(name, value);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("keystone answers");
        let status = response.status();
        let subject = response
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = response.text().await.expect("body");
        assert!(status.is_success(), "{path}: {status} {text}");
        (serde_json::from_str(&text).unwrap_or(Value::Null), subject)
    }

    /// A project-scoped token of `user` (password auth).
    pub async fn token(&self, user: &str, password: &str, project: &str) -> String {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": user, "password": password, "domain": {"id": "default"}}}},
            "scope": {"project": {"name": project, "domain": {"id": "default"}}}}});
        let (_, token) = self
            .call(Method::POST, "/auth/tokens", None, None, Some(body))
            .await;
        token.expect("X-Subject-Token")
    }

    /// Revokes `token` (`DELETE /v3/auth/tokens`) with `admin`'s token.
    pub async fn revoke(&self, admin: &str, token: &str) {
        let url = format!("{}/auth/tokens", self.url);
        let status = self
            .http
            .delete(url)
            .header("X-Auth-Token", admin)
            .header("X-Subject-Token", token)
            .send()
            .await
            .expect("keystone answers")
            .status();
        assert_eq!(status, StatusCode::NO_CONTENT);
    }

    async fn id_of(&self, admin: &str, kind: &str, name: &str) -> String {
        let (list, _) = self
            .call(
                Method::GET,
                &format!("/{kind}?name={name}"),
                Some(admin),
                None,
                None,
            )
            .await;
        list[kind][0]["id"].as_str().expect("id").to_string()
    }

    /// Creates `project` if missing, `user` in it with `role` (through the API, as admin).
    pub async fn user_with_role(
        &self,
        admin: &str,
        user: &str,
        password: &str,
        project: &str,
        role: &str,
    ) {
        let (projects, _) = self
            .call(
                Method::GET,
                &format!("/projects?name={project}"),
                Some(admin),
                None,
                None,
            )
            .await;
        if projects["projects"].as_array().is_none_or(Vec::is_empty) {
            let body = json!({"project": {"name": project, "domain_id": "default"}});
            self.call(Method::POST, "/projects", Some(admin), None, Some(body))
                .await;
        }
        let body = json!({"user": {"name": user, "password": password, "domain_id": "default"}});
        let (created, _) = self
            .call(Method::POST, "/users", Some(admin), None, Some(body))
            .await;
        let user_id = created["user"]["id"].as_str().expect("user id").to_string();
        let project_id = self.id_of(admin, "projects", project).await;
        let role_id = self.id_of(admin, "roles", role).await;
        let path = format!("/projects/{project_id}/users/{user_id}/roles/{role_id}");
        self.call(Method::PUT, &path, Some(admin), None, None).await;
    }
}

impl Drop for Keystone {
    fn drop(&mut self) {
        self.stop();
    }
}
