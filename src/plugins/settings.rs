//! `[plugins]`: how many candidates the `filter` and `weigh` chains see, and the plugins
//! themselves, one `[[plugins.chain]]` table each (docs/plugins.md §4). TOML cannot hold a
//! `[plugins]` table and a `[[plugins]]` array at once, hence `plugins.chain`.

use crate::choice::Choice;
use serde::{Deserialize, Serialize};

/// The events a plugin can be registered for (Usher's event chains, thesis §2.4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum PluginEvent {
    /// Before a decision, once per call: approve, add constraints, or deny.
    Select,
    /// Per instance, on the ranked candidates: remove hosts (Kubernetes' extender `filter`).
    Filter,
    /// Per instance, on the candidates left: add weights (Kubernetes' `prioritize`).
    Weigh,
    /// After a call's claims hold: told, asynchronously, never on the answer's path.
    Claimed,
    /// Each move of a rebalancing plan, in the plan's order: approve, change its destination
    /// (re-validated; the rest of the plan is made again), or deny (the instance stays).
    Move,
}

crate::choice_from_string!(PluginEvent);

impl Choice for PluginEvent {
    const ALL: &'static [Self] = &[
        PluginEvent::Select,
        PluginEvent::Filter,
        PluginEvent::Weigh,
        PluginEvent::Claimed,
        PluginEvent::Move,
    ];
    fn as_str(self) -> &'static str {
        PluginEvent::as_str(self)
    }
}

impl PluginEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            PluginEvent::Select => "select",
            PluginEvent::Filter => "filter",
            PluginEvent::Weigh => "weigh",
            PluginEvent::Claimed => "claimed",
            PluginEvent::Move => "move",
        }
    }
}

/// How Parasol reaches a plugin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum Transport {
    /// A JSON `POST` to `url` (docs/plugins.md §5, `etc/plugin-schema.json`).
    #[default]
    Http,
    /// A WebAssembly module run in process (cargo feature `wasm-plugins`), given the same JSON.
    Wasm,
}

crate::choice_from_string!(Transport);

impl Choice for Transport {
    const ALL: &'static [Self] = &[Transport::Http, Transport::Wasm];
    fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Wasm => "wasm",
        }
    }
}

/// The default `timeout_ms`: a plugin on the same site answers in milliseconds; a second is
/// what one decision can afford to wait before it is a failure.
pub const DEFAULT_TIMEOUT_MS: u64 = 1000;
/// The longest `timeout_ms`: Nova's RPC caller waits 60 s for the whole call.
pub const MAX_TIMEOUT_MS: u64 = 30_000;
/// The most candidates `[plugins] candidates` may ask for.
pub const MAX_CANDIDATES: usize = 10_000;
/// The default `[plugins] claimed_queue`.
pub const DEFAULT_CLAIMED_QUEUE: usize = 1024;
/// The largest `[plugins] claimed_queue`.
pub const MAX_CLAIMED_QUEUE: usize = 1_000_000;
/// The default `[plugins] breaker_failures`: a plugin that fails five calls in a row is taken
/// to be down, not unlucky.
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
/// The default `[plugins] breaker_open_s`: long enough that a dead plugin costs one timeout
/// per half-minute, short enough that a restarted one is back soon.
pub const DEFAULT_BREAKER_OPEN_S: u64 = 30;
/// The longest `[plugins] breaker_open_s`.
pub const MAX_BREAKER_OPEN_S: u64 = 3600;
/// The default `fuel` of a `wasm` plugin's call: about ten million WebAssembly instructions,
/// some milliseconds of wasmi; a module in an endless loop costs that, once per call.
pub const DEFAULT_FUEL: u64 = 10_000_000;
/// The most `fuel` a call may be given (about a second of wasmi).
pub const MAX_FUEL: u64 = 1_000_000_000;
/// The default `memory_pages` of a `wasm` plugin (64 KiB each: 16 MiB).
pub const DEFAULT_MEMORY_PAGES: u32 = 256;
/// The most `memory_pages` (1 GiB).
pub const MAX_MEMORY_PAGES: u32 = 16_384;
/// Whether this build runs `wasm` plugins.
pub const WASM_BUILT: bool = cfg!(feature = "wasm-plugins");
/// The largest bearer token file read.
pub const MAX_TOKEN_BYTES: usize = 8192;

/// One plugin registered for one event.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    /// Names the plugin in errors, logs, `/v1/stats` and `/metrics`; unique per event.
    pub name: String,
    pub event: PluginEvent,
    /// Place in the event's chain: lower first; equal orders keep the file's order (Usher's
    /// `order` parameter, thesis §2.4.4).
    #[serde(default)]
    pub order: i64,
    #[serde(default)]
    pub transport: Transport,
    /// `http`: the `http://` or `https://` URL the request is `POST`ed to.
    #[serde(default)]
    pub url: String,
    /// `wasm`: the WebAssembly module's file (docs/plugins.md §8 for its exports).
    #[serde(default)]
    pub module: Option<String>,
    /// `wasm`: the fuel one call may burn (about one unit per instruction); default
    /// [`DEFAULT_FUEL`].
    #[serde(default)]
    pub fuel: Option<u64>,
    /// `wasm`: the most 64 KiB pages its memory may reach; default [`DEFAULT_MEMORY_PAGES`].
    #[serde(default)]
    pub memory_pages: Option<u32>,
    /// `http`: how long a call may take before it is a timeout (a `wasm` call is bounded by its
    /// fuel instead).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// On a timeout, an error or a refused answer: `true` skips the plugin (counted), `false`
    /// fails the call with NoValidHost naming the plugin. (`claimed` plugins never stop a
    /// call: their failures are always skipped.)
    #[serde(default)]
    pub ignorable: bool,
    /// `weigh` only: the plugin's normalised weights are multiplied by this before they are
    /// added to the ranking (Nova's `*_weight_multiplier`, Kubernetes' extender `weight`).
    #[serde(default = "default_multiplier")]
    pub weight_multiplier: f64,
    /// A file holding the token sent as `Authorization: Bearer <token>` (read at start and on
    /// each reload, surrounding whitespace trimmed); none: no `Authorization` header.
    #[serde(default)]
    pub token_file: Option<String>,
    /// A PEM file of the CA certificates an `https://` plugin's certificate must chain to,
    /// instead of the system's trust store.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// A PEM file of the client certificate (and any intermediates) Parasol presents to an
    /// `https://` plugin that asks for one (mutual TLS); with `key_file`.
    #[serde(default)]
    pub cert_file: Option<String>,
    /// The PEM file of `cert_file`'s private key (PKCS#8, PKCS#1 or SEC1).
    #[serde(default)]
    pub key_file: Option<String>,
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn default_multiplier() -> f64 {
    1.0
}

/// The `[plugins]` section.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginSettings {
    /// How many of the ranked candidates the `filter` and `weigh` plugins see (at least; a
    /// multi-create ranks more to replace alternates). 0: 2 × max(`[scheduler] max_attempts`,
    /// `[policy] host_subset_size`).
    pub candidates: usize,
    /// Calls' claims waiting to be told to the `claimed` plugins; past it a call's are
    /// dropped (counted), never waited for.
    pub claimed_queue: usize,
    /// Failures in a row after which a plugin's circuit breaker opens: it is not called for
    /// `breaker_open_s` (skipped when ignorable, else the call fails at once). 0: never.
    pub breaker_failures: u32,
    /// How long an open breaker spares its plugin before one trial call (half-open).
    pub breaker_open_s: u64,
    /// The plugins, in any order: each event's chain is ordered by `order`.
    pub chain: Vec<PluginSpec>,
}

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            candidates: 0,
            claimed_queue: DEFAULT_CLAIMED_QUEUE,
            breaker_failures: DEFAULT_BREAKER_FAILURES,
            breaker_open_s: DEFAULT_BREAKER_OPEN_S,
            chain: Vec::new(),
        }
    }
}

impl PluginSettings {
    /// The candidates plugins see for these `max_attempts` and `host_subset_size`.
    pub fn candidates_for(&self, max_attempts: usize, host_subset_size: usize) -> usize {
        match self.candidates {
            0 => 2 * max_attempts.max(host_subset_size).max(1),
            k => k,
        }
    }

    /// Checks serde cannot make; the error is `(key under [plugins], message)`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.candidates > MAX_CANDIDATES {
            return Err((
                "candidates".into(),
                format!(
                    "must be at most {MAX_CANDIDATES} (0: 2 × max(max_attempts, host_subset_size))"
                ),
            ));
        }
        if !(1..=MAX_CLAIMED_QUEUE).contains(&self.claimed_queue) {
            return Err((
                "claimed_queue".into(),
                format!(
                    "must be from 1 to {MAX_CLAIMED_QUEUE}, not {}",
                    self.claimed_queue
                ),
            ));
        }
        if !(1..=MAX_BREAKER_OPEN_S).contains(&self.breaker_open_s) {
            return Err((
                "breaker_open_s".into(),
                format!(
                    "must be from 1 to {MAX_BREAKER_OPEN_S}, not {} (breaker_failures = 0 turns \
                     the breaker off)",
                    self.breaker_open_s
                ),
            ));
        }
        (0..self.chain.len()).try_for_each(|i| self.validate_plugin(i))
    }

    /// The checks of `chain[i]`, against itself and the entries before it.
    fn validate_plugin(&self, i: usize) -> Result<(), (String, String)> {
        let p = &self.chain[i];
        let key = |field: &str| format!("chain[{i}].{field}");
        let named = |message: String| format!("{message} (plugin {:?})", p.name);
        if p.name.is_empty()
            || p.name.len() > 64
            || !p
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err((
                key("name"),
                format!(
                    "{:?} must be 1 to 64 letters, digits, '-', '_' or '.' (it names the \
                     plugin in errors and metrics)",
                    p.name
                ),
            ));
        }
        if let Some(j) = self.chain[..i]
            .iter()
            .position(|q| q.name == p.name && q.event == p.event)
        {
            return Err((
                key("name"),
                named(format!(
                    "is registered twice for event {:?} (also chain[{j}]): give each its own name",
                    p.event.as_str()
                )),
            ));
        }
        match p.transport {
            Transport::Http => self.validate_http(i)?,
            Transport::Wasm => self.validate_wasm(i)?,
        }
        if !(1..=MAX_TIMEOUT_MS).contains(&p.timeout_ms) {
            return Err((
                key("timeout_ms"),
                named(format!(
                    "must be from 1 to {MAX_TIMEOUT_MS}, not {}",
                    p.timeout_ms
                )),
            ));
        }
        if !p.weight_multiplier.is_finite() {
            return Err((
                key("weight_multiplier"),
                named("must be a finite number".into()),
            ));
        }
        if p.event != PluginEvent::Weigh && p.weight_multiplier != 1.0 {
            return Err((
                key("weight_multiplier"),
                named(format!(
                    "is for weigh plugins; this one is registered for {:?}",
                    p.event.as_str()
                )),
            ));
        }
        Ok(())
    }

    /// The checks of an `http` plugin: its URL, token and CA files; no `wasm` keys.
    fn validate_http(&self, i: usize) -> Result<(), (String, String)> {
        let p = &self.chain[i];
        let key = |field: &str| format!("chain[{i}].{field}");
        let named = |message: String| format!("{message} (plugin {:?})", p.name);
        for (field, set) in [
            ("module", p.module.is_some()),
            ("fuel", p.fuel.is_some()),
            ("memory_pages", p.memory_pages.is_some()),
        ] {
            if set {
                return Err((key(field), named("is for transport = \"wasm\"".into())));
            }
        }
        match reqwest::Url::parse(&p.url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {}
            Ok(url) => {
                return Err((
                    key("url"),
                    named(format!(
                        "has scheme {:?}: a plugin is reached at http:// or https://",
                        url.scheme()
                    )),
                ))
            }
            Err(e) => return Err((key("url"), named(format!("{:?} is not a URL: {e}", p.url)))),
        }
        if let Some(path) = &p.token_file {
            read_token(path).map_err(|m| (key("token_file"), named(m)))?;
        }
        if let Some(path) = &p.ca_file {
            read_ca(path).map_err(|m| (key("ca_file"), named(m)))?;
        }
        match (&p.cert_file, &p.key_file) {
            (None, None) => {}
            (Some(_), None) => {
                return Err((
                    key("key_file"),
                    named("is needed with cert_file: the client certificate's key".into()),
                ))
            }
            (None, Some(_)) => {
                return Err((
                    key("cert_file"),
                    named("is needed with key_file: the client certificate".into()),
                ))
            }
            (Some(cert), Some(pkey)) => {
                read_identity(cert, pkey).map_err(|(field, m)| (key(field), named(m)))?;
                // rustls checks the key against the certificate only when the client is built.
                super::plugin::build_client(p).map_err(|m| (key("cert_file"), named(m)))?;
            }
        }
        Ok(())
    }

    /// The checks of a `wasm` plugin: this build runs them, its module loads and exports what
    /// its event needs, its limits are in range; no `http` keys.
    fn validate_wasm(&self, i: usize) -> Result<(), (String, String)> {
        let p = &self.chain[i];
        let key = |field: &str| format!("chain[{i}].{field}");
        let named = |message: String| format!("{message} (plugin {:?})", p.name);
        if !WASM_BUILT {
            return Err((
                key("transport"),
                named(
                    "is \"wasm\", but this parasol was built without the cargo feature \
                     `wasm-plugins` (cargo build --features wasm-plugins)"
                        .into(),
                ),
            ));
        }
        for (field, set) in [
            ("url", !p.url.is_empty()),
            ("token_file", p.token_file.is_some()),
            ("ca_file", p.ca_file.is_some()),
            ("cert_file", p.cert_file.is_some()),
            ("key_file", p.key_file.is_some()),
        ] {
            if set {
                return Err((key(field), named("is for transport = \"http\"".into())));
            }
        }
        let fuel = p.fuel.unwrap_or(DEFAULT_FUEL);
        if !(1..=MAX_FUEL).contains(&fuel) {
            return Err((
                key("fuel"),
                named(format!("must be from 1 to {MAX_FUEL}, not {fuel}")),
            ));
        }
        let pages = p.memory_pages.unwrap_or(DEFAULT_MEMORY_PAGES);
        if !(1..=MAX_MEMORY_PAGES).contains(&pages) {
            return Err((
                key("memory_pages"),
                named(format!("must be from 1 to {MAX_MEMORY_PAGES}, not {pages}")),
            ));
        }
        let Some(_module) = &p.module else {
            return Err((
                key("module"),
                named("is needed: the WebAssembly module's file".into()),
            ));
        };
        #[cfg(feature = "wasm-plugins")]
        super::wasm::WasmHook::load(_module, p.event.as_str(), fuel, pages)
            .map_err(|m| (key("module"), named(m)))?;
        Ok(())
    }
}

/// The bearer token in `path`: one line, surrounding whitespace trimmed, header-safe.
pub fn read_token(path: &str) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
    if bytes.len() > MAX_TOKEN_BYTES {
        return Err(format!(
            "{path:?} holds {} bytes, more than a token's {MAX_TOKEN_BYTES}",
            bytes.len()
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("{path:?} is not UTF-8"))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("{path:?} is empty"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(format!(
            "{path:?} holds characters an HTTP header cannot carry (more than one line?)"
        ));
    }
    Ok(token.to_string())
}

/// The CA certificates in the PEM file `path` (at least one).
pub fn read_ca(path: &str) -> Result<Vec<reqwest::Certificate>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
    let certs = reqwest::Certificate::from_pem_bundle(&bytes)
        .map_err(|e| format!("{path:?} is not a PEM bundle of certificates: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{path:?} holds no PEM certificate"));
    }
    Ok(certs)
}

/// The client identity of mutual TLS: the certificates in the PEM file `cert` and the private
/// key in the PEM file `key`. An error names the key (`cert_file` or `key_file`) at fault.
pub fn read_identity(cert: &str, key: &str) -> Result<reqwest::Identity, (&'static str, String)> {
    let certs =
        std::fs::read(cert).map_err(|e| ("cert_file", format!("cannot read {cert:?}: {e}")))?;
    if !String::from_utf8_lossy(&certs).contains("-----BEGIN CERTIFICATE-----") {
        return Err(("cert_file", format!("{cert:?} holds no PEM certificate")));
    }
    let private =
        std::fs::read(key).map_err(|e| ("key_file", format!("cannot read {key:?}: {e}")))?;
    let text = String::from_utf8_lossy(&private);
    if ![
        "PRIVATE KEY-----",
        "RSA PRIVATE KEY-----",
        "EC PRIVATE KEY-----",
    ]
    .iter()
    .any(|tag| text.contains(&format!("-----BEGIN {tag}")))
    {
        return Err(("key_file", format!("{key:?} holds no PEM private key")));
    }
    if text.contains("-----BEGIN CERTIFICATE-----") {
        return Err((
            "key_file",
            format!("{key:?} holds a certificate too: the certificates go in cert_file"),
        ));
    }
    // rustls' identity reads the key and the certificates from one PEM buffer.
    let mut pem = private;
    pem.push(b'\n');
    pem.extend_from_slice(&certs);
    reqwest::Identity::from_pem(&pem).map_err(|e| {
        (
            "cert_file",
            format!("{cert:?} and {key:?} are not a usable certificate and key: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, event: PluginEvent, url: &str) -> PluginSpec {
        PluginSpec {
            name: name.into(),
            event,
            order: 0,
            transport: Transport::Http,
            url: url.into(),
            module: None,
            fuel: None,
            memory_pages: None,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            ignorable: false,
            weight_multiplier: 1.0,
            token_file: None,
            ca_file: None,
            cert_file: None,
            key_file: None,
        }
    }

    /// The client certificate's keys: one without the other, a file that is not what its key
    /// says, a key that is not the certificate's, the keys on a `wasm` plugin.
    fn certificate_cases(
        empty: &tempfile::NamedTempFile,
        dir: &std::path::Path,
    ) -> Vec<(PluginSpec, &'static str)> {
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = rcgen::CertificateParams::new(vec!["parasol".to_string()])
            .expect("parameters")
            .self_signed(&key)
            .expect("a certificate");
        let other = rcgen::KeyPair::generate().expect("another key");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            Some(path.display().to_string())
        };
        let (cert_pem, key_pem) = (
            write("c.pem", &cert.pem()),
            write("k.pem", &key.serialize_pem()),
        );
        let other_pem = write("o.pem", &other.serialize_pem());
        let both = write(
            "both.pem",
            &format!("{}{}", key.serialize_pem(), cert.pem()),
        );
        let empty = Some(empty.path().display().to_string());
        let with = |cert_file: &Option<String>, key_file: &Option<String>| PluginSpec {
            cert_file: cert_file.clone(),
            key_file: key_file.clone(),
            ..spec("x", PluginEvent::Filter, "https://a/")
        };
        // The pair that is right is accepted: the cases below fail for what they name.
        let good = PluginSettings {
            chain: vec![with(&cert_pem, &key_pem)],
            ..PluginSettings::default()
        };
        assert_eq!(good.validate(), Ok(()));
        vec![
            (with(&cert_pem, &None), "chain[1].key_file"),
            (with(&None, &key_pem), "chain[1].cert_file"),
            (with(&empty, &key_pem), "chain[1].cert_file"),
            (with(&key_pem, &key_pem), "chain[1].cert_file"),
            (with(&cert_pem, &cert_pem), "chain[1].key_file"),
            (with(&cert_pem, &both), "chain[1].key_file"),
            (
                with(&cert_pem, &Some("/nonexistent/k.pem".into())),
                "chain[1].key_file",
            ),
            (with(&cert_pem, &other_pem), "chain[1].cert_file"),
            (
                PluginSpec {
                    transport: Transport::Wasm,
                    url: String::new(),
                    ..with(&cert_pem, &key_pem)
                },
                // A build without the runtime refuses the transport itself first.
                if WASM_BUILT {
                    "chain[1].cert_file"
                } else {
                    "chain[1].transport"
                },
            ),
        ]
    }

    #[test]
    fn bad_entries_are_refused_naming_their_key() {
        let empty = tempfile::NamedTempFile::new().expect("a temporary file");
        let two_lines = tempfile::NamedTempFile::new().expect("a temporary file");
        std::fs::write(two_lines.path(), "abc\ndef\n").expect("write");
        let ok = spec("tenant", PluginEvent::Select, "http://127.0.0.1:9/x");
        let cases: Vec<(PluginSpec, &str)> = vec![
            (spec("", PluginEvent::Select, "http://a/"), "chain[1].name"),
            (
                spec("a b", PluginEvent::Select, "http://a/"),
                "chain[1].name",
            ),
            (
                spec("tenant", PluginEvent::Select, "http://a/"),
                "chain[1].name",
            ),
            (spec("x", PluginEvent::Filter, "ftp://a/"), "chain[1].url"),
            (spec("x", PluginEvent::Filter, "not a url"), "chain[1].url"),
            (
                PluginSpec {
                    timeout_ms: 0,
                    ..spec("x", PluginEvent::Filter, "http://a/")
                },
                "chain[1].timeout_ms",
            ),
            (
                PluginSpec {
                    weight_multiplier: 2.0,
                    ..spec("x", PluginEvent::Filter, "http://a/")
                },
                "chain[1].weight_multiplier",
            ),
            (
                PluginSpec {
                    token_file: Some("/nonexistent/token".into()),
                    ..spec("x", PluginEvent::Filter, "http://a/")
                },
                "chain[1].token_file",
            ),
            (
                PluginSpec {
                    ca_file: Some(empty.path().display().to_string()),
                    ..spec("x", PluginEvent::Filter, "https://a/")
                },
                "chain[1].ca_file",
            ),
            (
                PluginSpec {
                    token_file: Some(two_lines.path().display().to_string()),
                    ..spec("x", PluginEvent::Filter, "https://a/")
                },
                "chain[1].token_file",
            ),
            (
                PluginSpec {
                    fuel: Some(1000),
                    ..spec("x", PluginEvent::Filter, "https://a/")
                },
                "chain[1].fuel",
            ),
        ];
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (bad, key) in cases
            .into_iter()
            .chain(certificate_cases(&empty, dir.path()))
        {
            let settings = PluginSettings {
                chain: vec![ok.clone(), bad.clone()],
                ..PluginSettings::default()
            };
            let err = settings.validate().expect_err(&format!("{bad:?} accepted"));
            assert_eq!(err.0, key, "{bad:?}: {}", err.1);
        }
        // The same name on another event is another registration.
        let settings = PluginSettings {
            chain: vec![
                ok,
                spec("tenant", PluginEvent::Filter, "https://p.example/f"),
            ],
            ..PluginSettings::default()
        };
        assert_eq!(settings.validate(), Ok(()));
        let big = PluginSettings {
            candidates: MAX_CANDIDATES + 1,
            ..PluginSettings::default()
        };
        assert_eq!(big.validate().unwrap_err().0, "candidates");
        let none = PluginSettings {
            claimed_queue: 0,
            ..PluginSettings::default()
        };
        assert_eq!(none.validate().unwrap_err().0, "claimed_queue");
        let never = PluginSettings {
            breaker_open_s: 0,
            ..PluginSettings::default()
        };
        assert_eq!(never.validate().unwrap_err().0, "breaker_open_s");
    }

    #[test]
    fn candidates_default_to_twice_the_larger_of_attempts_and_subset() {
        let s = PluginSettings::default();
        assert_eq!(s.candidates_for(3, 1), 6);
        assert_eq!(s.candidates_for(3, 10), 20);
        let set = PluginSettings {
            candidates: 4,
            ..PluginSettings::default()
        };
        assert_eq!(set.candidates_for(3, 10), 4);
    }

    #[cfg(not(feature = "wasm-plugins"))]
    #[test]
    fn a_wasm_plugin_is_refused_naming_the_feature_this_build_lacks() {
        let settings = PluginSettings {
            chain: vec![PluginSpec {
                transport: Transport::Wasm,
                module: Some("/srv/site-rule.wasm".into()),
                ..spec("site-rule", PluginEvent::Filter, "")
            }],
            ..PluginSettings::default()
        };
        let (key, message) = settings.validate().expect_err("a wasm plugin accepted");
        assert_eq!(key, "chain[0].transport");
        assert!(
            message.contains("cargo feature `wasm-plugins`"),
            "{message}"
        );
    }
}
