//! `from-nova` on hand-written nova.conf excerpts; `tests/from_nova.rs` runs it on Nova's own
//! generated sample.

use super::links::amqp_url;
use super::*;
use crate::configuration::Settings;

fn run(text: &str) -> (Settings, Translation) {
    let conf = NovaConf::parse(text).expect("nova.conf");
    let t = translate(&conf, "nova.conf");
    let settings = Settings::from_toml(&t.toml).unwrap_or_else(|e| panic!("{e}\n{}", t.toml));
    (settings, t)
}

fn warned(t: &Translation, needle: &str) -> bool {
    t.warnings.iter().any(|w| w.contains(needle))
}

#[test]
fn novas_default_filters_keep_what_parasol_has_and_warn_for_the_rest() {
    let (s, t) = run("[DEFAULT]\n");
    assert_eq!(
        s.policy.enabled_filters,
        [
            "ForceHostsFilter",
            "IgnoreHostsFilter",
            "RequestedDestinationFilter",
            "AvailabilityZoneFilter",
            "CapacityFilter",
            "ComputeFilter",
            "ComputeCapabilitiesFilter",
            "ImagePropertiesFilter",
            "ServerGroupAntiAffinityFilter",
            "ServerGroupAffinityFilter"
        ]
    );
    assert!(!warned(&t, "filter ComputeCapabilitiesFilter"), "carried");
    assert!(!warned(&t, "filter ImagePropertiesFilter"), "carried");
    // all_weighers: Nova's thirteen, all carried.
    assert_eq!(s.policy.weight_classes.len(), 13);
    assert!(
        !t.warnings.iter().any(|w| w.starts_with("weigher ")),
        "{:?}",
        t.warnings
    );
}

#[test]
fn metrics_options_are_carried_with_the_filter_and_weigher() {
    let (s, t) = run("[filter_scheduler]\nenabled_filters = MetricsFilter\n\
                      [metrics]\nweight_setting = cpu.percent=-1.0, cpu.frequency=0.5\n\
                      required = true\nweight_of_unavailable = -500\nweight_multiplier = 2\n");
    let p = &s.policy;
    assert!(p.enabled_filters.contains(&"MetricsFilter".to_string()));
    assert!(p.weight_classes.contains(&"MetricsWeigher".to_string()));
    assert_eq!(
        p.metrics_weight_setting,
        ["cpu.percent=-1.0", "cpu.frequency=0.5"]
    );
    assert!(p.metrics_required);
    assert_eq!(p.metrics_weight_of_unavailable, -500.0);
    assert_eq!(p.metrics_weight_multiplier, 2.0);
    assert!(!warned(&t, "[metrics]"), "{:?}", t.warnings);
}

#[test]
fn metrics_required_without_the_filter_is_carried_as_false_and_named() {
    // Nova's default `required = true`, the weigher (all_weighers) and no MetricsFilter.
    let (s, t) = run("[metrics]\nweight_setting = cpu.percent=-1.0\n");
    assert!(!s.policy.metrics_required);
    assert!(
        warned(&t, "[metrics] required = true is carried as false"),
        "{:?}",
        t.warnings
    );
    // Without a setting, nothing to say.
    let (s, t) = run("[metrics]\nweight_multiplier = 3\n");
    assert!(s.policy.metrics_required);
    assert!(!warned(&t, "required"), "{:?}", t.warnings);
}

#[test]
fn weight_setting_elements_nova_ignores_are_left_out_and_named() {
    let (s, t) = run("[filter_scheduler]\nenabled_filters = MetricsFilter\n\
                      [metrics]\nweight_setting = cpu.idle.time=a1, cpu.percent, =5, \
                      cpu.frequency = 2, cpu.kernel.time=-2.1\n");
    assert_eq!(s.policy.metrics_weight_setting, ["cpu.kernel.time=-2.1"]);
    for element in ["cpu.idle.time=a1", "cpu.percent", "=5", "cpu.frequency = 2"] {
        assert!(
            warned(&t, &format!("element {element:?} is not carried")),
            "{element}: {:?}",
            t.warnings
        );
    }
}

#[test]
fn scheduler_options_are_carried_with_their_values() {
    let (s, t) = run("[DEFAULT]\nhost = ctl-1\ncontrol_exchange = openstack\nservice_down_time = 120\n\
         transport_url = rabbit://nova:s3cret@rabbit1:5672,nova:s3cret@rabbit2:5672/nova\n\
         cpu_allocation_ratio = 4.0\ndebug = true\nuse_json = yes\nlog_dir = /var/log/nova\n\
         [scheduler]\nmax_attempts = 5\nworkers = 4\n\
         [filter_scheduler]\nenabled_filters = nova.scheduler.filters.compute_filter.ComputeFilter,NUMATopologyFilter,AggregateCoreFilter\n\
         weight_classes = nova.scheduler.weights.ram.RAMWeigher,PCIWeigher\nhost_subset_size = 3\n\
         ram_weight_multiplier = -2.5\nio_ops_weight_multiplier = 0\npci_weight_multiplier = 2\n\
         [oslo_messaging_rabbit]\namqp_durable_queues = true\nssl = true\n\
         [api]\nauth_strategy = keystone\n");
    assert_eq!(s.rpc.host, "ctl-1");
    assert!(s.rpc.enabled);
    assert_eq!(s.amqp.exchange, "openstack");
    assert_eq!(
        s.amqp.url,
        "rabbit://nova:s3cret@rabbit1:5672,nova:s3cret@rabbit2:5672/nova?ssl=1"
    );
    assert!(s.amqp.durable_exchange);
    assert_eq!(s.policy.host_timeout_s, 120);
    assert_eq!(s.scheduler.max_attempts, 5);
    assert_eq!(s.policy.host_subset_size, 3);
    assert_eq!(s.policy.ram_weight_multiplier, -2.5);
    assert_eq!(s.policy.io_ops_weight_multiplier, 0.0);
    assert_eq!(s.policy.pci_weight_multiplier, 2.0);
    assert_eq!(s.policy.weight_classes, ["RAMWeigher", "PCIWeigher"]);
    assert!(s
        .policy
        .enabled_filters
        .contains(&"ComputeFilter".to_string()));
    assert!(s
        .policy
        .enabled_filters
        .contains(&"NUMATopologyFilter".to_string()));
    assert_eq!(s.log.level, "debug");
    assert_eq!(s.log.format, crate::configuration::LogFormat::Json);
    let long = t
        .toml
        .lines()
        .filter(|l| l.starts_with('#') && l.len() > 96);
    assert_eq!(long.count(), 0, "{}", t.toml);
    for needle in [
        "filter AggregateCoreFilter",
        "[scheduler] workers is not carried",
        "[DEFAULT] cpu_allocation_ratio is not carried",
        "[api]",
    ] {
        assert!(warned(&t, needle), "{needle}: {:?}", t.warnings);
    }
    assert!(!warned(&t, "log_dir"), "{:?}", t.warnings);
    assert!(
        !t.warnings.iter().any(|w| w.contains("s3cret")),
        "no password in warnings"
    );
}

#[test]
fn quorum_queues_are_carried_and_make_the_exchange_durable_as_oslo_does() {
    let (s, t) = run("[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\n\
         rabbit_transient_quorum_queue = true\n");
    assert_eq!(s.amqp.queue_type, crate::configuration::QueueType::Quorum);
    assert!(!s.amqp.durable_exchange, "amqp_durable_queues was not set");
    assert!(
        s.amqp.durable(),
        "quorum queues are durable, and so is oslo's exchange"
    );
    assert!(
        warned(
            &t,
            "[oslo_messaging_rabbit] rabbit_transient_quorum_queue is not carried"
        ),
        "{:?}",
        t.warnings
    );
    let (s, _) = run("[oslo_messaging_rabbit]\nrabbit_quorum_queue = false\n");
    assert_eq!(s.amqp.queue_type, crate::configuration::QueueType::Classic);
    assert!(!s.amqp.durable());
}

/// A CA certificate (PEM) in a file of its own.
fn ca_file(dir: &std::path::Path) -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let pem = params.self_signed(&key).expect("certificate").pem();
    let path = dir.join("ca.pem");
    std::fs::write(&path, pem).expect("write ca.pem");
    path.display().to_string()
}

#[test]
fn placement_cafile_is_carried_and_insecure_is_named_as_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = ca_file(dir.path());
    let (s, t) = run(&format!(
        "[placement]\nauth_type = password\nauth_url = https://ctl/identity\n\
         username = placement\npassword = pw\ncafile = {ca}\ninsecure = true\n\
         certfile = /etc/nova/client.pem\n"
    ));
    assert_eq!(s.placement.keystone.cafile, ca);
    assert!(
        warned(
            &t,
            "[placement] insecure is not carried: Parasol always verifies"
        ),
        "{:?}",
        t.warnings
    );
    assert!(
        warned(
            &t,
            "[placement] certfile is not carried: Parasol presents no client"
        ),
        "{:?}",
        t.warnings
    );
}

#[test]
fn a_cafile_that_is_no_pem_bundle_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").expect("write");
    let missing = dir.path().join("missing.pem");
    for path in [garbage, missing] {
        let toml = format!(
            "[placement]\nenabled = true\nauth = \"noauth\"\nurl = \"https://p\"\ncafile = \"{}\"\n",
            path.display()
        );
        let e = Settings::from_toml(&toml).expect_err("refused").to_string();
        assert!(e.contains("cafile"), "{e}");
        assert!(e.contains(&path.display().to_string()), "{e}");
    }
    let ok = format!(
        "[placement]\nenabled = true\nauth = \"noauth\"\nurl = \"https://p\"\ncafile = \"{}\"\n",
        ca_file(dir.path())
    );
    Settings::from_toml(&ok).expect("a CA bundle is accepted");
}

#[test]
fn placement_credentials_are_carried_as_keystone_auth() {
    let (s, t) = run("[placement]\nauth_type = password\nauth_url = http://ctl/identity\n\
         username = placement\npassword = pw\nproject_name = service\ndefault_domain_name = Default\n\
         project_domain_name = Proj\nvalid_interfaces = internal,public\nregion_name = RegionOne\n");
    let p = &s.placement;
    assert!(p.enabled);
    assert_eq!(
        (
            p.keystone.keystone_url.as_str(),
            p.keystone.username.as_str(),
            p.keystone.password.as_str()
        ),
        ("http://ctl/identity", "placement", "pw")
    );
    assert_eq!(
        (
            p.keystone.user_domain_name.as_str(),
            p.keystone.project_domain_name.as_str()
        ),
        ("Default", "Proj")
    );
    assert_eq!(p.interface, "internal");
    assert!(
        warned(&t, "[placement] region_name is not carried"),
        "{:?}",
        t.warnings
    );
    assert!(
        warned(&t, "uses the first only (internal)"),
        "{:?}",
        t.warnings
    );
    let (s, t) = run("[placement]\nauth_type = token\n");
    assert!(!s.placement.enabled);
    assert!(
        warned(&t, "auth_type = \"token\" is not carried"),
        "{:?}",
        t.warnings
    );
}

#[test]
fn database_connections_are_carried_to_nova_db() {
    let (s, t) = run("[DEFAULT]\nservice_down_time = 90\n\
         [api_database]\nconnection = mysql+pymysql://nova:pw@ctl/nova_api?charset=utf8\nmax_pool_size = 5\n\
         [database]\nconnection = mysql+pymysql://nova:pw@ctl/nova?charset=utf8\n");
    let n = &s.nova_db;
    assert!(n.enabled);
    assert_eq!(
        n.api_database_url.0,
        "mysql+pymysql://nova:pw@ctl/nova_api?charset=utf8"
    );
    assert_eq!(
        n.database_url.0,
        "mysql+pymysql://nova:pw@ctl/nova?charset=utf8"
    );
    assert_eq!(n.service_down_time_s, 90.0);
    let not_read = |t: &Translation| {
        t.warnings
            .iter()
            .any(|w| w.starts_with("not read") && w.contains("[api_database]"))
    };
    assert!(!not_read(&t), "{:?}", t.warnings);
    assert!(!warned(&t, "[nova_db] left off"), "{:?}", t.warnings);
    let (s, t) = run("[DEFAULT]\nservice_down_time = 90\n");
    assert!(!s.nova_db.enabled);
    assert!(warned(&t, "[nova_db] left off"), "{:?}", t.warnings);
}

#[test]
fn transport_urls_are_carried_as_written_with_ssl_added() {
    let cases = [
        ("rabbit://u:p@h:5672/", false, Ok("rabbit://u:p@h:5672/")),
        ("rabbit://u:p@h", true, Ok("rabbit://u:p@h?ssl=1")),
        (
            "rabbit://u:p@h:5672/vh?heartbeat=10",
            true,
            Ok("rabbit://u:p@h:5672/vh?heartbeat=10&ssl=1"),
        ),
        (
            "kafka://h:9092/",
            false,
            Err(
                "has scheme \"kafka\": Parasol speaks to RabbitMQ (rabbit://, amqp:// or amqps://)",
            ),
        ),
        (
            "h:5672",
            false,
            Err("is not a URL: use rabbit://USER:PASS@HOST:5672/VHOST"),
        ),
    ];
    for (url, ssl, want) in cases {
        let got = amqp_url(url, ssl).map(|(u, _)| u);
        assert_eq!(got.as_deref().map_err(String::as_str), want, "{url}");
    }
    let (_, notes) = amqp_url("rabbit://u:p@h/?heartbeat=10", false).unwrap();
    assert_eq!(
        notes,
        ["[DEFAULT] transport_url options heartbeat=10 are ignored by Parasol"]
    );
}

#[test]
fn a_value_of_the_wrong_type_is_warned_about_and_not_carried() {
    let (s, t) = run("[scheduler]\nmax_attempts = many\n");
    assert_eq!(s.scheduler.max_attempts, 3);
    assert!(
        warned(&t, "[scheduler] max_attempts = \"many\" is not integer"),
        "{:?}",
        t.warnings
    );
}

#[test]
fn the_default_availability_zone_is_carried_else_novas_default_stays() {
    let (s, t) = run("[DEFAULT]\ndefault_availability_zone = az-east\n");
    assert_eq!(s.policy.default_availability_zone, "az-east");
    assert!(
        t.toml.contains("[DEFAULT] default_availability_zone"),
        "{}",
        t.toml
    );
    assert!(!warned(&t, "default_availability_zone"), "{:?}", t.warnings);
    let (s, _) = run("[DEFAULT]\nservice_down_time = 90\n");
    assert_eq!(s.policy.default_availability_zone, "nova");
}

#[test]
fn versioned_notifications_are_carried_when_nova_would_send_them() {
    let (s, t) = run("[DEFAULT]\n");
    assert!(
        !s.rpc.versioned_notifications,
        "Nova's default format is unversioned"
    );
    assert!(!warned(&t, "unversioned"), "no driver: nothing is sent");
    let (s, t) = run(
        "[notifications]\nnotification_format = both\nversioned_notifications_topics = a, b\n\
         [oslo_messaging_notifications]\ndriver = messagingv2\n",
    );
    assert!(s.rpc.versioned_notifications);
    assert_eq!(s.rpc.versioned_notifications_topics, ["a", "b"]);
    assert!(warned(&t, "no legacy unversioned"), "{:?}", t.warnings);
    let (s, _) = run("[notifications]\nnotification_format = versioned\n\
         [oslo_messaging_notifications]\ndriver = noop\n");
    assert!(
        !s.rpc.versioned_notifications,
        "the noop driver sends nothing"
    );
}
