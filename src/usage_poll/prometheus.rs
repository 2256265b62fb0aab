//! Prometheus' HTTP API: one instant query (`GET <url>/api/v1/query?query=…`), its answer
//! parsed into samples, and the samples of a class's query as usage readings.

use super::settings::{query_url, PrometheusSettings};
use crate::domain::UsageSource;
use crate::table::{Amount, NodeRef, UsageReading};
use serde::de::IgnoredAny;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The most an answer may hold (a vector of 10,000 hosts is about 1.5 MB).
pub const MAX_ANSWER_BYTES: usize = 32 << 20;

/// One series of an instant vector: its labels, the evaluation time and the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    /// ms since the epoch.
    pub at_ms: i64,
    pub value: f64,
}

/// Sends instant queries to one Prometheus.
#[derive(Debug)]
pub struct PrometheusClient {
    client: reqwest::Client,
    query_url: reqwest::Url,
    token: Option<String>,
    timeout_s: f64,
}

impl PrometheusClient {
    /// A client of `settings`' Prometheus, reading its CA and token files now.
    pub fn new(settings: &PrometheusSettings) -> Result<Self, String> {
        let query_url = query_url(&settings.url)?;
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("parasol/", env!("CARGO_PKG_VERSION")))
            .timeout(Duration::from_secs_f64(settings.timeout_s));
        if !settings.cafile.is_empty() {
            for cert in crate::plugins::read_ca(&settings.cafile)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let token = match settings.token_file.as_str() {
            "" => None,
            path => Some(crate::plugins::read_token(path)?),
        };
        let client = builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(PrometheusClient {
            client,
            query_url,
            token,
            timeout_s: settings.timeout_s,
        })
    }

    /// The instant vector `promql` evaluates to now, or why there is none (Prometheus
    /// unreachable or slow, an error it answered, an answer that is not an instant vector).
    pub async fn query(&self, promql: &str) -> Result<Vec<Sample>, String> {
        let mut request = self
            .client
            .get(self.query_url.clone())
            .query(&[("query", promql)]);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let where_ = crate::redact::redact_url(self.query_url.as_str());
        let mut response = request.send().await.map_err(|e| match e.is_timeout() {
            true => format!("{where_}: no answer within {} s", self.timeout_s),
            false => format!("{where_}: {}", innermost(&e)),
        })?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("{where_}: reading the answer: {}", innermost(&e)))?
        {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(format!("answer larger than {MAX_ANSWER_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        parse_answer(status.as_u16(), &body)
    }
}

/// The innermost cause of a transport error (`Connection refused (os error 111)`, not
/// reqwest's wrapper, which repeats the URL with its query).
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Prometheus' answer envelope (`/api/v1/query`).
#[derive(Deserialize)]
struct Answer {
    status: String,
    data: Option<Data>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum Data {
    Vector(Vec<VectorSample>),
    Scalar(IgnoredAny),
    Matrix(IgnoredAny),
    #[serde(rename = "string")]
    Text(IgnoredAny),
}

#[derive(Deserialize)]
struct VectorSample {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    /// [evaluation time in s, the value as text ("3", "NaN", "+Inf")].
    value: (f64, String),
}

/// The samples of an answer with HTTP `status` and `body`, or what is wrong with it.
pub fn parse_answer(status: u16, body: &[u8]) -> Result<Vec<Sample>, String> {
    let answer: Answer = serde_json::from_slice(body).map_err(|e| {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        format!("HTTP {status}, not Prometheus' JSON ({e}): {text:?}")
    })?;
    if answer.status != "success" {
        return Err(format!(
            "HTTP {status}, Prometheus: {} ({})",
            answer.error.as_deref().unwrap_or("no error given"),
            answer.error_type.as_deref().unwrap_or("no type")
        ));
    }
    let kind = match answer.data {
        Some(Data::Vector(samples)) => {
            return samples
                .into_iter()
                .map(|s| {
                    let value =
                        s.value.1.parse::<f64>().map_err(|_| {
                            format!("the sample value {:?} is not a number", s.value.1)
                        })?;
                    Ok(Sample {
                        labels: s.metric,
                        at_ms: (s.value.0 * 1_000.0).round() as i64,
                        value,
                    })
                })
                .collect();
        }
        Some(Data::Scalar(_)) => "a scalar",
        Some(Data::Matrix(_)) => "a range vector",
        Some(Data::Text(_)) => "a string",
        None => "no data",
    };
    Err(format!(
        "the query gave {kind}, not an instant vector (one series per host)"
    ))
}

/// The readings of `class` in `samples`, one per series, named by its `host_label` (a
/// series without it names no host: refused as `unknown_host`). Two series of one host are
/// refused together, naming the host: the query must aggregate by the label.
pub fn readings(
    class: &str,
    host_label: &str,
    samples: &[Sample],
) -> Result<Vec<UsageReading>, String> {
    let mut hosts: Vec<&str> = samples
        .iter()
        .map(|s| s.labels.get(host_label).map_or("", String::as_str))
        .collect();
    hosts.sort_unstable();
    if let Some(twice) = hosts.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "{class}: several series for {host_label}={:?}; aggregate the query by {host_label} \
             (`sum by ({host_label}) (…)`)",
            twice[0]
        ));
    }
    Ok(samples
        .iter()
        .map(|s| UsageReading {
            node: NodeRef::Service(s.labels.get(host_label).cloned().unwrap_or_default()),
            source: UsageSource::Prometheus,
            at_ms: Some(s.at_ms),
            classes: vec![(class.to_string(), Amount::Units(s.value))],
            instances: Vec::new(),
            metrics: Vec::new(),
            qos: Vec::new(),
        })
        .collect())
}

/// Checks the answer of one per-instance query (`name`: a QoS signal of `qos_queries`, or a
/// class of `instance_queries`): every series names a host (`host_label`) and an instance by
/// its uuid (`instance_label`), once each. The error names what is wrong: the query must
/// keep both labels (`max by (host, uuid) (…)`).
pub fn check_instance_samples(
    name: &str,
    host_label: &str,
    instance_label: &str,
    samples: &[Sample],
) -> Result<(), String> {
    let mut keys = Vec::with_capacity(samples.len());
    for s in samples {
        let label = |name: &str| s.labels.get(name).map(String::as_str);
        let (Some(host), Some(instance)) = (label(host_label), label(instance_label)) else {
            return Err(format!(
                "{name}: a series without the labels {host_label} and {instance_label}; keep \
                 both (`max by ({host_label}, {instance_label}) (…)`)"
            ));
        };
        if uuid::Uuid::try_parse(instance).is_err() || instance.len() != 36 {
            let shown: String = instance.chars().take(40).collect();
            return Err(format!(
                "{name}: {instance_label}={shown:?} is not an instance uuid; name the label that \
                 holds Nova's instance uuid (instance_label)"
            ));
        }
        keys.push((host, instance));
    }
    keys.sort_unstable();
    if let Some(twice) = keys.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "{name}: several series for {host_label}={:?}, {instance_label}={:?}; aggregate \
             the query by both",
            twice[0].0, twice[0].1
        ));
    }
    Ok(())
}

/// One host's instances out of per-instance answers: its name, the latest evaluation time
/// among its samples, and each instance (lower-case uuid) with the value of every name that
/// has a series for it.
type HostInstances = (String, i64, InstanceList);

/// Instances (uuid) with a value per name (a class or a QoS signal).
type InstanceList = Vec<(String, Vec<(String, f64)>)>;

/// Each host's instances in the checked answers of per-instance queries (name, samples).
fn by_host(
    host_label: &str,
    instance_label: &str,
    answers: &[(String, Vec<Sample>)],
) -> Vec<HostInstances> {
    type Instances = BTreeMap<String, Vec<(String, f64)>>;
    let mut hosts: BTreeMap<&str, (i64, Instances)> = BTreeMap::new();
    for (name, samples) in answers {
        for s in samples {
            let (Some(host), Some(instance)) =
                (s.labels.get(host_label), s.labels.get(instance_label))
            else {
                continue;
            };
            let (at_ms, instances) = hosts
                .entry(host.as_str())
                .or_insert((s.at_ms, Instances::new()));
            *at_ms = (*at_ms).max(s.at_ms);
            instances
                .entry(instance.to_ascii_lowercase())
                .or_default()
                .push((name.clone(), s.value));
        }
    }
    hosts
        .into_iter()
        .map(|(host, (at_ms, instances))| {
            (host.to_string(), at_ms, instances.into_iter().collect())
        })
        .collect()
}

/// One reading per host of the per-instance answers, each host's list put in place by `put`.
fn per_host(
    host_label: &str,
    instance_label: &str,
    answers: &[(String, Vec<Sample>)],
    put: fn(&mut UsageReading, InstanceList),
) -> Vec<UsageReading> {
    by_host(host_label, instance_label, answers)
        .into_iter()
        .map(|(host, at_ms, list)| {
            let mut reading = UsageReading {
                node: NodeRef::Service(host),
                source: UsageSource::Prometheus,
                at_ms: Some(at_ms),
                classes: Vec::new(),
                instances: Vec::new(),
                metrics: Vec::new(),
                qos: Vec::new(),
            };
            put(&mut reading, list);
            reading
        })
        .collect()
}

/// The hosts' instance QoS reports in the checked answers of the signals' queries (signal
/// name, samples): per host, one reading listing each of its instances with the value of
/// every signal that has a series for it, timed by the latest evaluation time among them.
pub fn qos_readings(
    host_label: &str,
    instance_label: &str,
    answers: &[(String, Vec<Sample>)],
) -> Vec<UsageReading> {
    per_host(host_label, instance_label, answers, |r, list| r.qos = list)
}

/// The hosts' per-instance usage in the checked answers of `instance_queries` (class name,
/// samples): per host, one reading listing each of its instances with its usage in every
/// class that has a series for it (its `instance_usage`), timed as [`qos_readings`].
pub fn instance_readings(
    host_label: &str,
    instance_label: &str,
    answers: &[(String, Vec<Sample>)],
) -> Vec<UsageReading> {
    per_host(host_label, instance_label, answers, |r, list| {
        r.instances = list
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_vector_gives_its_samples_with_prometheus_special_values() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"host":"cmp1"},"value":[1764800000.25,"3"]},
            {"metric":{"host":"cmp2"},"value":[1764800000.25,"NaN"]},
            {"metric":{"host":"cmp3"},"value":[1764800000.25,"+Inf"]},
            {"metric":{"host":"cmp4"},"value":[1764800000.25,"-1.5e3"]}]}}"#;
        let samples = parse_answer(200, body).unwrap();
        assert_eq!(samples.len(), 4);
        assert_eq!(samples[0].at_ms, 1_764_800_000_250);
        assert_eq!(samples[0].value, 3.0);
        assert!(samples[1].value.is_nan());
        assert_eq!(samples[2].value, f64::INFINITY);
        assert_eq!(samples[3].value, -1500.0);
        assert_eq!(samples[0].labels["host"], "cmp1");
    }

    #[test]
    fn what_is_not_an_instant_vector_is_an_error_saying_what_it_is() {
        let cases: [(u16, &[u8], &str); 5] = [
            (
                400,
                br#"{"status":"error","errorType":"bad_data","error":"parse error at char 4"}"#,
                "parse error at char 4 (bad_data)",
            ),
            (
                200,
                br#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#,
                "a scalar, not an instant vector",
            ),
            (
                200,
                br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
                "a range vector",
            ),
            (502, b"<html>Bad Gateway</html>", "HTTP 502, not Prometheus' JSON"),
            (
                200,
                br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}"#,
                "\"x\" is not a number",
            ),
        ];
        for (status, body, want) in cases {
            let err = parse_answer(status, body).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn samples_become_one_reading_each_and_a_host_twice_refuses_the_query() {
        let sample = |labels: &[(&str, &str)], value| Sample {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            at_ms: 5_000,
            value,
        };
        let samples = [
            sample(&[("host", "cmp1"), ("job", "libvirt")], 2.5),
            sample(&[("instance", "cmp2:9100")], 1.0),
        ];
        let got = readings("VCPU", "host", &samples).unwrap();
        assert_eq!(got[0].node, NodeRef::Service("cmp1".into()));
        assert_eq!(got[0].source, UsageSource::Prometheus);
        assert_eq!(got[0].at_ms, Some(5_000));
        assert_eq!(got[0].classes, vec![("VCPU".into(), Amount::Units(2.5))]);
        assert_eq!(got[1].node, NodeRef::Service(String::new()));
        let twice = [
            sample(&[("host", "cmp1")], 1.0),
            sample(&[("host", "cmp1")], 2.0),
        ];
        let err = readings("VCPU", "host", &twice).unwrap_err();
        assert!(err.contains("host=\"cmp1\""), "{err}");
    }

    #[test]
    fn qos_samples_become_each_hosts_whole_list_and_bad_labels_refuse_the_query() {
        const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
        const B: &str = "BBBBBBBB-0000-4000-8000-000000000002";
        let sample = |labels: &[(&str, &str)], at_ms, value| Sample {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            at_ms,
            value,
        };
        let wait = vec![
            sample(&[("host", "cmp1"), ("uuid", A)], 5_000, 0.3),
            sample(&[("host", "cmp2"), ("uuid", B)], 5_000, 0.0),
        ];
        let pressure = vec![sample(&[("host", "cmp1"), ("uuid", A)], 6_000, 0.01)];
        for samples in [&wait, &pressure] {
            check_instance_samples("cpu_wait", "host", "uuid", samples).unwrap();
        }
        let answers = [
            ("cpu_wait".to_string(), wait),
            ("memory_pressure".to_string(), pressure),
        ];
        let got = qos_readings("host", "uuid", &answers);
        assert_eq!(got.len(), 2, "one reading per host");
        assert_eq!(got[0].node, NodeRef::Service("cmp1".into()));
        assert_eq!(got[0].at_ms, Some(6_000), "the latest evaluation time");
        assert_eq!(
            got[0].qos,
            vec![(
                A.to_string(),
                vec![("cpu_wait".into(), 0.3), ("memory_pressure".into(), 0.01)]
            )]
        );
        assert_eq!(got[1].qos[0].0, B.to_ascii_lowercase(), "uuids lowercased");
        assert!(got
            .iter()
            .all(|r| r.classes.is_empty() && r.source == UsageSource::Prometheus));

        for (samples, want) in [
            (
                vec![sample(&[("uuid", A)], 0, 0.0)],
                "without the labels host and uuid",
            ),
            (
                vec![sample(
                    &[("host", "cmp1"), ("uuid", "instance-0000000a")],
                    0,
                    0.0,
                )],
                "is not an instance uuid",
            ),
            (
                vec![
                    sample(&[("host", "cmp1"), ("uuid", A)], 0, 0.0),
                    sample(&[("host", "cmp1"), ("uuid", A), ("vcpu", "1")], 0, 0.1),
                ],
                "several series for host=\"cmp1\"",
            ),
        ] {
            let err = check_instance_samples("cpu_wait", "host", "uuid", &samples).unwrap_err();
            assert!(err.contains(want) && err.starts_with("cpu_wait: "), "{err}");
        }
    }

    #[test]
    fn instance_usage_samples_become_each_hosts_instance_list() {
        const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
        const B: &str = "bbbbbbbb-0000-4000-8000-000000000002";
        let sample = |host: &str, uuid: &str, at_ms, value| Sample {
            labels: [("host", host), ("uuid", uuid)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            at_ms,
            value,
        };
        let answers = [
            (
                "VCPU".to_string(),
                vec![
                    sample("cmp1", A, 5_000, 1.5),
                    sample("cmp1", B, 5_000, 0.25),
                ],
            ),
            (
                "MEMORY_MB".to_string(),
                vec![sample("cmp1", A, 5_500, 900.0)],
            ),
        ];
        let got = instance_readings("host", "uuid", &answers);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].node, NodeRef::Service("cmp1".into()));
        assert_eq!(got[0].at_ms, Some(5_500));
        assert_eq!(
            got[0].instances,
            vec![
                (
                    A.to_string(),
                    vec![("VCPU".into(), 1.5), ("MEMORY_MB".into(), 900.0)]
                ),
                (B.to_string(), vec![("VCPU".into(), 0.25)]),
            ]
        );
        assert!(got[0].classes.is_empty() && got[0].qos.is_empty());
    }
}
