//! `[usage.prometheus]`: where Prometheus is, how often to ask it, and one PromQL query per
//! resource class (per host, and per instance) and per QoS signal. Off (no `url`) by default.

use crate::domain::{is_valid_class_name, QosSignal};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The longest `poll_interval_s` and `timeout_s` (a day).
const MAX_SECONDS: f64 = 86_400.0;

#[derive(Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PrometheusSettings {
    /// Prometheus' base URL (`http://prometheus:9090`, or with a path prefix behind a proxy);
    /// empty: no poller.
    pub url: String,
    /// Seconds between two polls (each sends every query), on the service's clock.
    pub poll_interval_s: f64,
    /// Seconds one query may take before it counts as failed.
    pub timeout_s: f64,
    /// A PEM file of CA certificates to trust for an `https` URL, besides the built-in roots.
    pub cafile: String,
    /// A file holding the token sent as `Authorization: Bearer <token>` (read at start).
    pub token_file: String,
    /// The label whose value is the compute service's host name as Nova knows it (`CONF.host`,
    /// `openstack compute service list`'s Host).
    pub host_label: String,
    /// Per resource class, the PromQL query whose instant vector gives that class's usage
    /// per host, in the class's unit, one series per value of `host_label`.
    pub queries: BTreeMap<String, String>,
    /// The label whose value is an instance's uuid, in `instance_queries`' and
    /// `qos_queries`' series.
    pub instance_label: String,
    /// Per resource class, the PromQL query whose instant vector gives that class's usage
    /// per instance, in the class's unit, one series per `host_label` and `instance_label`:
    /// each host's instances, as its `instance_usage`.
    pub instance_queries: BTreeMap<String, String>,
    /// Per QoS signal (`cpu_wait`, `memory_pressure`), the PromQL query whose instant vector
    /// gives that signal per instance (a share of the interval, 0 to 1), one series per
    /// `host_label` and `instance_label`: each host's instances, as its `instance_qos`.
    pub qos_queries: BTreeMap<String, String>,
}

impl Default for PrometheusSettings {
    fn default() -> Self {
        PrometheusSettings {
            url: String::new(),
            poll_interval_s: 30.0,
            timeout_s: 10.0,
            cafile: String::new(),
            token_file: String::new(),
            host_label: "host".into(),
            queries: BTreeMap::new(),
            instance_label: "uuid".into(),
            instance_queries: BTreeMap::new(),
            qos_queries: BTreeMap::new(),
        }
    }
}

impl fmt::Debug for PrometheusSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusSettings")
            .field("url", &crate::redact::redact_url(&self.url))
            .field("poll_interval_s", &self.poll_interval_s)
            .field("timeout_s", &self.timeout_s)
            .field("cafile", &self.cafile)
            .field("token_file", &self.token_file)
            .field("host_label", &self.host_label)
            .field("queries", &self.queries)
            .field("instance_label", &self.instance_label)
            .field("instance_queries", &self.instance_queries)
            .field("qos_queries", &self.qos_queries)
            .finish()
    }
}

impl PrometheusSettings {
    /// Whether the poller runs.
    pub fn enabled(&self) -> bool {
        !self.url.is_empty()
    }

    /// The queries by class, with class names in capitals: the configuration's reader
    /// gives table keys in lower case (`vcpu`), and every resource class is in capitals.
    pub fn classes(&self) -> impl Iterator<Item = (String, &str)> {
        upper(&self.queries)
    }

    /// The per-instance queries by class, class names in capitals (as [`Self::classes`]).
    pub fn instance_classes(&self) -> impl Iterator<Item = (String, &str)> {
        upper(&self.instance_queries)
    }

    /// Checks every key; the error names the key (`queries.VCPU`) and what is wrong.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let seconds = [
            ("poll_interval_s", self.poll_interval_s),
            ("timeout_s", self.timeout_s),
        ];
        for (key, value) in seconds {
            if !(value.is_finite() && (0.001..=MAX_SECONDS).contains(&value)) {
                let why =
                    format!("must be a number of seconds from 0.001 to {MAX_SECONDS}, not {value}");
                return Err((key.into(), why));
            }
        }
        for (key, label) in [
            ("host_label", &self.host_label),
            ("instance_label", &self.instance_label),
        ] {
            if !is_label_name(label) {
                return Err((
                    key.into(),
                    format!("{label:?} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"),
                ));
            }
        }
        if self.instance_label == self.host_label {
            return Err((
                "instance_label".into(),
                format!(
                    "is host_label's {:?}; name the instance's uuid label",
                    self.host_label
                ),
            ));
        }
        for (name, query) in &self.qos_queries {
            let key = format!("qos_queries.{name}");
            if QosSignal::lookup(name).is_none() {
                return Err((key, format!("is not a QoS signal ({})", QosSignal::names())));
            }
            if query.trim().is_empty() {
                return Err((key, "is an empty query".into()));
            }
        }
        for (table, queries) in [
            ("queries", self.classes().collect::<Vec<_>>()),
            ("instance_queries", self.instance_classes().collect()),
        ] {
            let mut seen: Vec<String> = Vec::new();
            for (class, query) in queries {
                let key = format!("{table}.{class}");
                if !is_valid_class_name(&class) {
                    return Err((key, "is not a resource class".into()));
                }
                if seen.contains(&class) {
                    return Err((key, "is given twice".into()));
                }
                if query.trim().is_empty() {
                    return Err((key, "is an empty query".into()));
                }
                seen.push(class);
            }
        }
        if !self.cafile.is_empty() {
            crate::plugins::read_ca(&self.cafile).map_err(|e| ("cafile".to_string(), e))?;
        }
        if !self.token_file.is_empty() {
            crate::plugins::read_token(&self.token_file)
                .map_err(|e| ("token_file".to_string(), e))?;
        }
        let none = self.queries.is_empty()
            && self.instance_queries.is_empty()
            && self.qos_queries.is_empty();
        if self.url.is_empty() {
            return match none {
                true => Ok(()),
                false => Err(("url".into(), "is required when queries are given".into())),
            };
        }
        query_url(&self.url).map_err(|e| ("url".to_string(), e))?;
        if none {
            return Err((
                "queries".into(),
                "needs a query for at least one resource class (or instance_queries one, or \
                 qos_queries one for a QoS signal) when url is set"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// The instant-query endpoint under Prometheus' base `url`, or why `url` is not one.
pub(super) fn query_url(url: &str) -> Result<reqwest::Url, String> {
    let mut base = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
        return Err(format!(
            "{url:?} is not an http:// or https:// URL with a host"
        ));
    }
    if base.query().is_some() || base.fragment().is_some() {
        return Err(format!(
            "{url:?} has a query or fragment; give Prometheus' base URL"
        ));
    }
    if !base.path().ends_with('/') {
        let path = format!("{}/", base.path());
        base.set_path(&path);
    }
    base.join("api/v1/query")
        .map_err(|e| format!("{url:?} cannot take a path: {e}"))
}

/// `queries`' entries with the class names in capitals.
fn upper(queries: &BTreeMap<String, String>) -> impl Iterator<Item = (String, &str)> {
    queries
        .iter()
        .map(|(class, query)| (class.to_ascii_uppercase(), query.as_str()))
}

/// Prometheus' label names: `[a-zA-Z_][a-zA-Z0-9_]*`.
fn is_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(queries: &[(&str, &str)]) -> PrometheusSettings {
        PrometheusSettings {
            url: "http://prometheus:9090".into(),
            queries: queries
                .iter()
                .map(|(c, q)| (c.to_string(), q.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn off_by_default_and_valid() {
        let s = PrometheusSettings::default();
        assert!(!s.enabled());
        s.validate().unwrap();
        on(&[("VCPU", "up")]).validate().unwrap();
        // QoS queries alone are enough.
        let mut qos = on(&[]);
        qos.qos_queries.insert("cpu_wait".into(), "up".into());
        qos.validate().unwrap();
        // So are per-instance usage queries.
        let mut instances = on(&[]);
        instances
            .instance_queries
            .insert("vcpu".into(), "up".into());
        instances.validate().unwrap();
        assert_eq!(
            instances.instance_classes().collect::<Vec<_>>(),
            [("VCPU".to_string(), "up")]
        );
    }

    #[test]
    fn the_query_url_keeps_a_path_prefix() {
        for (base, want) in [
            ("http://p:9090", "http://p:9090/api/v1/query"),
            ("http://p:9090/", "http://p:9090/api/v1/query"),
            (
                "https://mon/prometheus",
                "https://mon/prometheus/api/v1/query",
            ),
            (
                "https://mon/prometheus/",
                "https://mon/prometheus/api/v1/query",
            ),
        ] {
            assert_eq!(query_url(base).unwrap().as_str(), want);
        }
    }

    #[test]
    fn bad_settings_are_refused_naming_the_key() {
        let with = |f: &dyn Fn(&mut PrometheusSettings)| {
            let mut s = on(&[("VCPU", "up")]);
            f(&mut s);
            s
        };
        let cases = [
            (with(&|s| s.poll_interval_s = 0.0), "poll_interval_s"),
            (with(&|s| s.poll_interval_s = f64::NAN), "poll_interval_s"),
            (with(&|s| s.timeout_s = -1.0), "timeout_s"),
            (with(&|s| s.host_label = "host-name".into()), "host_label"),
            (with(&|s| s.host_label = String::new()), "host_label"),
            (with(&|s| s.url = "prometheus:9090".into()), "url"),
            (with(&|s| s.url = "ftp://p/".into()), "url"),
            (with(&|s| s.url = "http://p:9090/?x=1".into()), "url"),
            (with(&|s| s.queries.clear()), "queries"),
            (
                with(&|s| s.instance_label = "in stance".into()),
                "instance_label",
            ),
            (
                with(&|s| s.instance_label = "host".into()),
                "instance_label",
            ),
            (
                with(&|s| {
                    s.qos_queries.insert("steal".into(), "x".into());
                }),
                "qos_queries.steal",
            ),
            (
                with(&|s| {
                    s.qos_queries.insert("cpu_wait".into(), "".into());
                }),
                "qos_queries.cpu_wait",
            ),
            (on(&[("VCPUS", "up")]), "queries.VCPUS"),
            (on(&[("VCPU", " ")]), "queries.VCPU"),
            (on(&[("VCPU", "up"), ("vcpu", "up")]), "queries.VCPU"),
            (
                with(&|s| {
                    s.instance_queries.insert("VCPUS".into(), "up".into());
                }),
                "instance_queries.VCPUS",
            ),
            (
                with(&|s| {
                    s.instance_queries.insert("MEMORY_MB".into(), "".into());
                }),
                "instance_queries.MEMORY_MB",
            ),
            (with(&|s| s.url.clear()), "url"),
            (with(&|s| s.cafile = "/nonexistent/ca.pem".into()), "cafile"),
            (
                with(&|s| s.token_file = "/nonexistent/token".into()),
                "token_file",
            ),
        ];
        for (settings, key) in cases {
            let (got, why) = settings.validate().expect_err(key);
            assert_eq!(got, key, "{why}");
        }
    }
}
