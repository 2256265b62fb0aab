//! Errors that explain themselves: the key, where it came from, what would be valid.

use super::*;
use crate::configuration::BackendKind;

fn refusal(toml: &str) -> String {
    Settings::from_toml(toml).unwrap_err().to_string()
}

#[test]
fn an_unknown_value_names_the_key_and_lists_the_valid_values() {
    let cases = [
        (
            "[scheduler]\nbackend = \"fastest\"",
            "invalid configuration: key `scheduler.backend` unknown value \"fastest\"; valid \
             values: filter, caching, asc, apsr",
        ),
        (
            "[policy]\nalgorithm = \"worstfit\"",
            "invalid configuration: key `policy.algorithm` unknown value \"worstfit\"; valid \
             values: nova, worst_fit, first_fit, best_fit, random, dist_from_diag, adaptive, \
             ffr, wfr (did you mean \"worst_fit\"?)",
        ),
        (
            "[placement]\nauth = \"password\"",
            "invalid configuration: key `placement.auth` unknown value \"password\"; valid \
             values: keystone, token, noauth",
        ),
        (
            "[log]\nformat = \"jsonl\"",
            "invalid configuration: key `log.format` unknown value \"jsonl\"; valid values: \
             text, json (did you mean \"json\"?)",
        ),
    ];
    for (toml, want) in cases {
        assert_eq!(refusal(toml), want, "{toml}");
    }
}

#[test]
fn an_unknown_key_suggests_the_nearest_one() {
    let cases = [
        (
            "[scheduler]\nbakend = \"apsr\"",
            "key `scheduler.bakend` is not a known key; did you mean `scheduler.backend`?",
        ),
        (
            "[schedular]\nbackend = \"apsr\"",
            "key `schedular` is not a known section; did you mean `scheduler`?",
        ),
        (
            "[scheduler]\nenabled_filters = []",
            "key `scheduler.enabled_filters` is not a known key; did you mean \
             `policy.enabled_filters`?",
        ),
        (
            "[server]\nzzz = 1",
            "key `server.zzz` is not a known key; known keys here: body_timeout_s, \
             client_request_timeout_s, host, http_workers, huge_pages, keep_alive_s, \
             max_body_bytes, max_connections, max_pipelined_requests, port, shutdown_grace_s, \
             socket_receive_buffer_bytes",
        ),
    ];
    for (toml, want) in cases {
        let err = refusal(toml);
        assert!(err.contains(want), "{toml}: {err}");
    }
}

#[test]
fn a_wrong_type_names_the_key_without_repeating_it() {
    let err = refusal("[server]\nport = \"http\"");
    assert!(
        err.starts_with("invalid configuration: key `server.port` must be"),
        "{err}"
    );
    assert_eq!(err.matches("server.port").count(), 1, "{err}");
}

#[test]
fn novas_filter_scheduler_names_are_accepted_as_policy_keys() {
    let s = Settings::from_toml(
        "[filter_scheduler]\nenabled_filters = [\"nova.scheduler.filters.compute_filter.ComputeFilter\"]\n\
         weight_classes = [\"nova.scheduler.weights.all_weighers\"]\nhost_subset_size = 4\n\
         ram_weight_multiplier = -1.0\n",
    )
    .unwrap();
    assert_eq!(s.policy.host_subset_size, 4);
    assert_eq!(s.policy.ram_weight_multiplier, -1.0);
    let limits = Settings::from_toml("[filter_scheduler]\nmax_io_ops_per_host = 3\n").unwrap();
    assert_eq!(limits.policy.max_io_ops_per_host, 3);
    assert_eq!(
        s.policy.enabled_filters,
        ["nova.scheduler.filters.compute_filter.ComputeFilter"]
    );
    let cases = [
        (
            "[filter_scheduler]\nhost_subset_size = 2\n[policy]\nhost_subset_size = 3",
            "key `filter_scheduler.host_subset_size` is also set as `policy.host_subset_size`",
        ),
        (
            "[filter_scheduler]\nshuffle_best_same_weighed_hosts = true",
            "key `filter_scheduler.shuffle_best_same_weighed_hosts` is not an option Parasol has",
        ),
        (
            "[filter_scheduler]\nalgorithm = \"nova\"",
            "key `filter_scheduler.algorithm` is not an option Parasol has",
        ),
    ];
    for (toml, want) in cases {
        let err = refusal(toml);
        assert!(err.contains(want), "{toml}: {err}");
    }
}

#[test]
fn a_file_and_the_environment_are_named_as_the_origin() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("parasol.toml");
    std::fs::write(&file, "[scheduler]\nworkerz = 2\n").unwrap();
    let err = Settings::check_file(&file).unwrap_err().to_string();
    assert!(err.contains(&format!("(in {})", file.display())), "{err}");
    let (settings, source) =
        Settings::load_with_source(&dir.path().join("absent.toml"), false).unwrap();
    assert_eq!(source, Source::DefaultsAndEnvironment);
    assert_eq!(source.to_string(), "no file: defaults and environment");
    assert_eq!(settings.scheduler.backend, BackendKind::Filter);
    std::fs::write(&file, "[scheduler]\nbackend = \"apsr\"\n").unwrap();
    let (settings, source) = Settings::load_with_source(&file, true).unwrap();
    assert_eq!(source, Source::File(file.clone()));
    assert_eq!(settings.scheduler.backend, BackendKind::Apsr);
}

#[test]
fn every_default_key_round_trips_through_the_schema() {
    let text = toml::to_string(&Settings::default()).unwrap();
    let back = Settings::from_toml(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(
        serde_json::to_value(back).unwrap(),
        serde_json::to_value(Settings::default()).unwrap()
    );
}

#[test]
fn the_environment_overrides_either_name_of_a_nova_option() {
    let value = |origin: &str, n: i64| Value::new(Some(&origin.to_string()), ValueKind::I64(n));
    let table = |key: &str, v: Value| {
        let mut m = Map::new();
        m.insert(key.to_string(), v);
        Value::new(None, ValueKind::Table(m))
    };
    let cases = [
        ("parasol.toml", ENVIRONMENT, 2),
        (ENVIRONMENT, "parasol.toml", 1),
    ];
    for (policy_origin, nova_origin, want) in cases {
        let mut tree = Map::new();
        tree.insert(
            "policy".into(),
            table("host_subset_size", value(policy_origin, 1)),
        );
        tree.insert(
            NOVA_SECTION.into(),
            table("host_subset_size", value(nova_origin, 2)),
        );
        fold_nova_section(&mut tree, Origin(None)).unwrap();
        let ValueKind::Table(policy) = &tree["policy"].kind else {
            panic!("policy is a table")
        };
        assert_eq!(policy["host_subset_size"].clone().into_int().unwrap(), want);
    }
}

#[test]
fn a_map_table_takes_any_key_lowercased() {
    let s = Settings::from_toml(
        "[policy]\nweight_classes = [\"HostNameWeigher\"]\n\
         host_name_weights = { Host1 = 100, \"host-2.example.org\" = 50.5 }\n",
    )
    .unwrap();
    let want: std::collections::BTreeMap<String, f64> = [
        ("host1".to_string(), 100.0),
        ("host-2.example.org".to_string(), 50.5),
    ]
    .into();
    // The loader lowercases keys: HostNameWeigher compares host names ignoring ASCII case.
    assert_eq!(s.policy.host_name_weights, want);
    let err = refusal("[policy]\nhost_name_weights = { host1 = \"high\" }");
    assert!(err.contains("host_name_weights"), "{err}");
}

#[test]
fn a_batch_timeout_past_ten_seconds_is_refused_by_name() {
    let err = refusal("[amqp]\nbatch_timeout_ms = 10001");
    assert!(
        err.contains("amqp.batch_timeout_ms") && err.contains("at most 10000"),
        "{err}"
    );
    let taken = Settings::from_toml("[amqp]\nbatch_timeout_ms = 0").unwrap();
    assert_eq!(taken.amqp.batch_timeout_ms, 0);
    assert_eq!(Settings::default().amqp.batch_timeout_ms, 100);
}
