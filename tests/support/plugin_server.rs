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
/// The trait `/select/flavor-family` requires of the `gpu.` flavor family.
pub const GPU_TRAIT: &str = "CUSTOM_GPU_FAMILY";
/// The reason `/move/deny` gives.
pub const MOVE_DENY_REASON: &str = "no live migration during the change freeze";
/// The bearer token paths under `/auth/` ask for (else 401).
pub const TOKEN: &str = "s3cret-plugin-token";

/// Each request's path, body, and the headers a plugin is sent (`authorization`,
/// `x-project-id`, `x-user-id`, as a JSON object of those present).
type Seen = Arc<Mutex<Vec<(String, Value, Value)>>>;

/// What the handlers share: the requests seen (and a count of them to wait on), and the gate
/// `/gate` waits at.
#[derive(Clone)]
struct Shared {
    seen: Seen,
    arrivals: Arc<tokio::sync::watch::Sender<usize>>,
    gate: Arc<tokio::sync::Semaphore>,
    /// Whether `/toggle` answers 500 (else it approves).
    failing: Arc<std::sync::atomic::AtomicBool>,
    /// The carbon-intensity feed `/weigh/carbon` reads on every call (a file the test writes).
    feed: Arc<Mutex<Option<std::path::PathBuf>>>,
}

pub struct PluginServer {
    pub base: String,
    handle: actix_web::dev::ServerHandle,
    shared: Shared,
}

impl PluginServer {
    pub async fn start() -> PluginServer {
        let shared = Shared {
            seen: Arc::default(),
            arrivals: Arc::new(tokio::sync::watch::channel(0).0),
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
            failing: Arc::default(),
            feed: Arc::default(),
        };
        let data = web::Data::new(shared.clone());
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
            shared,
        }
    }

    /// Returns once `path` has been sent `n` requests (each arrival is an event to wait on).
    pub async fn wait_for(&self, path: &str, n: usize) {
        let mut arrivals = self.shared.arrivals.subscribe();
        while self.seen(path).len() < n {
            arrivals.changed().await.expect("the server runs");
        }
    }

    /// Lets `n` more requests through `/gate`.
    pub fn open_gate(&self, n: usize) {
        self.shared.gate.add_permits(n);
    }

    /// Makes `/toggle` fail (500) or answer (an approval that keeps every candidate).
    pub fn set_failing(&self, failing: bool) {
        self.shared
            .failing
            .store(failing, std::sync::atomic::Ordering::SeqCst);
    }

    /// Points `/weigh/carbon` at a feed: a JSON file `{"<host>": gCO2 per kWh, …}`.
    pub fn set_carbon_feed(&self, path: &std::path::Path) {
        *self.shared.feed.lock() = Some(path.to_path_buf());
    }

    /// The headers of the requests `path` was sent, in order (see [`Seen`]).
    pub fn headers(&self, path: &str) -> Vec<Value> {
        self.shared
            .seen
            .lock()
            .iter()
            .filter(|(p, _, _)| p == path)
            .map(|(_, _, h)| h.clone())
            .collect()
    }

    /// The URL of behaviour `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The bodies `path` was sent, in order.
    pub fn seen(&self, path: &str) -> Vec<Value> {
        self.shared
            .seen
            .lock()
            .iter()
            .filter(|(p, _, _)| p == path)
            .map(|(_, v, _)| v.clone())
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

async fn answer(
    req: HttpRequest,
    body: web::Json<Value>,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let path = req.path().to_string();
    let body = body.into_inner();
    let mut headers = serde_json::Map::new();
    for name in ["authorization", "x-project-id", "x-user-id"] {
        if let Some(v) = req.headers().get(name).and_then(|v| v.to_str().ok()) {
            headers.insert(name.into(), json!(v));
        }
    }
    let bearer = headers.get("authorization").cloned();
    shared
        .seen
        .lock()
        .push((path.clone(), body.clone(), Value::Object(headers)));
    shared.arrivals.send_modify(|n| *n += 1);
    // `/auth/<behaviour>`: `<behaviour>` for the holder of [`TOKEN`], 401 for anyone else.
    let path = match path.strip_prefix("/auth") {
        Some(rest) if bearer == Some(json!(format!("Bearer {TOKEN}"))) => rest.to_string(),
        Some(_) => return HttpResponse::Unauthorized().body("no valid bearer token"),
        None => path,
    };
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
        // Issue 47's second example: the `gpu.` flavor family needs hosts with its trait.
        "/select/flavor-family" => {
            let family = body["request"]["flavor"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("gpu."));
            if !family {
                return ok(json!({"decision": "approve"}));
            }
            let mut required = body["request"]["required_traits"].clone();
            if let Some(list) = required.as_array_mut() {
                list.push(json!(GPU_TRAIT));
            }
            ok(json!({"decision": "modify", "request": {"required_traits": required}}))
        }
        // Issue 47's third example: weighs each candidate by the carbon intensity of its
        // host's power, read from an outside feed on every call; the cleaner, the heavier.
        "/weigh/carbon" => {
            let feed: Value = shared
                .feed
                .lock()
                .as_ref()
                .and_then(|p| std::fs::read(p).ok())
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or(Value::Null);
            let mut weights = serde_json::Map::new();
            for c in body["candidates"].as_array().into_iter().flatten() {
                let intensity = c["host"].as_str().and_then(|h| feed[h].as_f64());
                if let (Some(uuid), Some(g)) = (c["uuid"].as_str(), intensity) {
                    weights.insert(uuid.to_string(), json!(1000.0 - g));
                }
            }
            ok(json!({"weights": weights}))
        }
        p if p.starts_with("/weigh/prefer/") => {
            let host = json!(&p["/weigh/prefer/".len()..]);
            match candidate_where(&body, "host", &host) {
                Some(uuid) => ok(json!({"weights": {uuid: 1.0}})),
                None => ok(json!({"weights": {}})),
            }
        }
        "/claimed" => HttpResponse::Ok().finish(),
        "/move/approve" => ok(json!({"decision": "approve"})),
        "/move/deny" => ok(json!({"decision": "deny", "reason": MOVE_DENY_REASON})),
        // Sends every planned move to one host.
        p if p.starts_with("/move/to/") => {
            let host = &p["/move/to/".len()..];
            ok(json!({"decision": "modify", "move": {"destination": host}}))
        }
        // Answers once the test opens the gate for it.
        "/gate" => {
            if let Ok(permit) = shared.gate.acquire().await {
                permit.forget();
            }
            ok(json!({}))
        }
        // Never answers: the caller's timeout ends the call.
        "/slow" => std::future::pending().await,
        "/fail" => HttpResponse::InternalServerError().body("the plugin crashed"),
        "/toggle" if shared.failing.load(std::sync::atomic::Ordering::SeqCst) => {
            HttpResponse::InternalServerError().body("the plugin is down")
        }
        "/toggle" => ok(json!({"decision": "approve"})),
        "/garbage" => HttpResponse::Ok()
            .content_type("application/json")
            .body("{not json"),
        _ => HttpResponse::NotFound().finish(),
    }
}

/// A webhook plugin of `event` at `url`: order 0, a 5 s timeout, not ignorable, no token or
/// CA file (each test changes what it needs).
pub fn plugin(
    name: &str,
    event: parasol::plugins::PluginEvent,
    url: String,
) -> parasol::plugins::PluginSpec {
    parasol::plugins::PluginSpec {
        name: name.into(),
        event,
        order: 0,
        transport: parasol::plugins::Transport::Http,
        url,
        module: None,
        fuel: None,
        memory_pages: None,
        timeout_ms: 5_000,
        ignorable: false,
        weight_multiplier: 1.0,
        token_file: None,
        ca_file: None,
        cert_file: None,
        key_file: None,
    }
}

/// A WebAssembly plugin of `event` running `module` (feature `wasm-plugins`): the default fuel
/// and memory, not ignorable.
pub fn wasm_plugin(
    name: &str,
    event: parasol::plugins::PluginEvent,
    module: &std::path::Path,
) -> parasol::plugins::PluginSpec {
    parasol::plugins::PluginSpec {
        transport: parasol::plugins::Transport::Wasm,
        url: String::new(),
        module: Some(module.display().to_string()),
        ..plugin(name, event, String::new())
    }
}

/// The test plugin module `name` (`tests/wasm/<name>.wat` after the shared prelude), compiled
/// to a temporary file that lives as long as the path returned.
pub fn wasm_module(name: &str) -> tempfile::TempPath {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/wasm");
    let read = |file: &str| {
        std::fs::read_to_string(format!("{dir}/{file}")).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let text = format!(
        "(module\n{}\n{}\n)",
        read("prelude.wat"),
        read(&format!("{name}.wat"))
    );
    let binary = wat::parse_str(&text).unwrap_or_else(|e| panic!("{name}.wat: {e}"));
    let file = tempfile::Builder::new()
        .suffix(".wasm")
        .tempfile()
        .expect("a temporary file");
    std::fs::write(file.path(), binary).expect("write the module");
    file.into_temp_path()
}
