//! A real plugin webhook for the plugin tests: an actix-web server on a loopback port in the
//! test process, whose paths are the plugin behaviours the tests register (docs/plugins.md
//! §5's schema), and which records every request it is sent. Stopped when dropped.
#![allow(dead_code)]

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::Arc;

/// The reason `/select/deny` gives.
pub const DENY_REASON: &str = "tenant p is frozen during the maintenance window";
/// The trait `/select/maintenance` forbids to tenant `tenant-x`.
pub const MAINTENANCE_TRAIT: &str = "CUSTOM_MAINTENANCE";

type Seen = Arc<Mutex<Vec<(String, Value)>>>;

pub struct PluginServer {
    pub base: String,
    handle: actix_web::dev::ServerHandle,
    seen: Seen,
}

impl PluginServer {
    pub async fn start() -> PluginServer {
        let seen: Seen = Arc::default();
        let data = web::Data::new(seen.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
        let port = listener.local_addr().expect("port").port();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .default_service(web::to(answer))
        })
        .workers(2)
        .disable_signals()
        .listen(listener)
        .expect("listen")
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        PluginServer {
            base: format!("http://127.0.0.1:{port}"),
            handle,
            seen,
        }
    }

    /// The URL of behaviour `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The bodies `path` was sent, in order.
    pub fn seen(&self, path: &str) -> Vec<Value> {
        self.seen
            .lock()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

impl Drop for PluginServer {
    fn drop(&mut self) {
        // The stop command is sent now; the future only waits for it to finish.
        drop(self.handle.stop(false));
    }
}

fn ok(body: Value) -> HttpResponse {
    HttpResponse::Ok().json(body)
}

/// The candidate whose `key` is `value`, by uuid.
fn candidate_where(body: &Value, key: &str, value: &Value) -> Option<String> {
    body["candidates"]
        .as_array()?
        .iter()
        .find(|c| c[key] == *value)
        .and_then(|c| c["uuid"].as_str())
        .map(str::to_string)
}

async fn answer(req: HttpRequest, body: web::Json<Value>, seen: web::Data<Seen>) -> HttpResponse {
    let path = req.path().to_string();
    let body = body.into_inner();
    seen.lock().push((path.clone(), body.clone()));
    match path.as_str() {
        "/select/approve" => ok(json!({"decision": "approve"})),
        "/select/deny" => ok(json!({"decision": "deny", "reason": DENY_REASON})),
        // Keeps tenant X off hosts in maintenance (issue 47's first example).
        "/select/maintenance" => {
            if body["request"]["project_id"] != "tenant-x" {
                return ok(json!({"decision": "approve"}));
            }
            let mut forbidden = body["request"]["forbidden_traits"].clone();
            if let Some(list) = forbidden.as_array_mut() {
                list.push(json!(MAINTENANCE_TRAIT));
            }
            ok(json!({"decision": "modify", "request": {"forbidden_traits": forbidden}}))
        }
        "/select/change-flavor" => {
            let mut request = body["request"].clone();
            request["flavor"]["vcpus"] = json!(64);
            ok(json!({"decision": "modify", "request": request}))
        }
        "/filter/remove-best" => match candidate_where(&body, "rank", &json!(0)) {
            Some(uuid) => ok(json!({"remove": {uuid: "the best host is kept for tenant Y"}})),
            None => ok(json!({})),
        },
        "/filter/remove-unknown" => ok(json!({"remove": {"not-offered": "x"}})),
        p if p.starts_with("/weigh/prefer/") => {
            let host = json!(&p["/weigh/prefer/".len()..]);
            match candidate_where(&body, "host", &host) {
                Some(uuid) => ok(json!({"weights": {uuid: 1.0}})),
                None => ok(json!({"weights": {}})),
            }
        }
        // Never answers: the caller's timeout ends the call.
        "/slow" => std::future::pending().await,
        "/fail" => HttpResponse::InternalServerError().body("the plugin crashed"),
        "/garbage" => HttpResponse::Ok()
            .content_type("application/json")
            .body("{not json"),
        _ => HttpResponse::NotFound().finish(),
    }
}
