//! The broker (`[DEFAULT] transport_url`, `[oslo_messaging_rabbit]`) and Placement's Keystone
//! credentials (`[placement]`, keystoneauth's option names).

use super::Out;
use crate::configuration::nova_conf::NovaConf;
use toml::Value;

const RABBIT: &str = "oslo_messaging_rabbit";
const PLACEMENT: &str = "placement";

pub(super) fn transport(conf: &NovaConf, out: &mut Out) {
    if let Some(v) = out.typed(conf, RABBIT, "amqp_durable_queues", &Value::Boolean(false)) {
        out.set(
            "amqp",
            "durable_exchange",
            v,
            format!("[{RABBIT}] amqp_durable_queues"),
        );
    }
    if let Some(v) = out.typed(conf, RABBIT, "rabbit_quorum_queue", &Value::Boolean(false)) {
        let kind = if v == Value::Boolean(true) {
            "quorum"
        } else {
            "classic"
        };
        out.set(
            "amqp",
            "queue_type",
            Value::String(kind.into()),
            format!("[{RABBIT}] rabbit_quorum_queue"),
        );
    }
    let ssl = out.typed(conf, RABBIT, "ssl", &Value::Boolean(false)) == Some(Value::Boolean(true));
    let Some(url) = out.typed(
        conf,
        "DEFAULT",
        "transport_url",
        &Value::String(String::new()),
    ) else {
        out.warn("[DEFAULT] transport_url is not set: [amqp] url keeps Parasol's default");
        return;
    };
    let url = url.as_str().unwrap_or_default().to_string();
    match amqp_url(&url, ssl) {
        Ok((amqp, notes)) => {
            let from = if ssl {
                format!("[DEFAULT] transport_url, with [{RABBIT}] ssl")
            } else {
                "[DEFAULT] transport_url".to_string()
            };
            out.set("amqp", "url", Value::String(amqp), from);
            for note in notes {
                out.warn(note);
            }
        }
        Err(why) => out.warn(format!("[DEFAULT] transport_url is not carried: {why}")),
    }
}

/// oslo.messaging's `rabbit://user:pass@host:port[,user:pass@host2:port]/vhost[?opts]` as
/// Parasol's `[amqp] url`: the same URL (Parasol fails over between its brokers as oslo does),
/// with `ssl=1` when `[oslo_messaging_rabbit] ssl` is set; options Parasol ignores are named.
pub fn amqp_url(url: &str, ssl: bool) -> Result<(String, Vec<String>), String> {
    let parsed: crate::transport_url::TransportUrl = url.parse()?;
    let mut notes = Vec::new();
    if !parsed.ignored_options.is_empty() {
        notes.push(format!(
            "[DEFAULT] transport_url options {} are ignored by Parasol",
            parsed.ignored_options.join("&")
        ));
    }
    let mut out = url.to_string();
    if ssl && !out.starts_with("amqps:") && !out.contains("ssl=") {
        out.push(if out.contains('?') { '&' } else { '?' });
        out.push_str("ssl=1");
    }
    Ok((out, notes))
}

pub(super) fn placement(conf: &NovaConf, out: &mut Out) {
    let auth = out.typed(conf, PLACEMENT, "auth_type", &Value::String(String::new()));
    match auth.as_ref().and_then(Value::as_str) {
        Some("password" | "v3password") => {}
        Some(other) => {
            out.warn(format!(
                "[{PLACEMENT}] auth_type = {other:?} is not carried: Parasol authenticates with a \
                 Keystone password; Placement sync left off"
            ));
            return;
        }
        None => {
            out.warn(format!(
                "[{PLACEMENT}] has no auth_type: Placement sync left off ([placement] enabled = false)"
            ));
            return;
        }
    }
    out.set(
        "placement",
        "enabled",
        Value::Boolean(true),
        format!("[{PLACEMENT}] auth_type"),
    );
    out.set(
        "placement",
        "auth",
        Value::String("keystone".into()),
        format!("[{PLACEMENT}] auth_type"),
    );
    let text = Value::String(String::new());
    let simple = [
        ("auth_url", "keystone_url"),
        ("username", "username"),
        ("password", "password"),
        ("project_name", "project_name"),
        ("user_domain_name", "user_domain_name"),
        ("project_domain_name", "project_domain_name"),
        ("endpoint_override", "url"),
        ("cafile", "cafile"),
    ];
    for (nova, parasol) in simple {
        if let Some(v) = out.typed(conf, PLACEMENT, nova, &text) {
            out.set("placement", parasol, v, format!("[{PLACEMENT}] {nova}"));
        }
    }
    if let Some(v) = out.typed(conf, PLACEMENT, "default_domain_name", &text) {
        for key in ["user_domain_name", "project_domain_name"] {
            if conf.get(PLACEMENT, key).is_none() {
                out.set(
                    "placement",
                    key,
                    v.clone(),
                    format!("[{PLACEMENT}] default_domain_name"),
                );
            }
        }
    }
    if let Some(v) = out.typed(conf, PLACEMENT, "timeout", &Value::Float(0.0)) {
        out.set(
            "placement",
            "timeout_s",
            v,
            format!("[{PLACEMENT}] timeout"),
        );
    }
    if let Some(Value::String(v)) = out.typed(conf, PLACEMENT, "valid_interfaces", &text) {
        let interfaces = crate::configuration::nova_conf::list(&v);
        if let Some(first) = interfaces.first() {
            out.set(
                "placement",
                "interface",
                Value::String(first.clone()),
                format!("[{PLACEMENT}] valid_interfaces"),
            );
        }
        if interfaces.len() > 1 {
            out.warn(format!(
                "[{PLACEMENT}] valid_interfaces = {v:?}: Parasol uses the first only ({})",
                interfaces[0]
            ));
        }
    }
}

/// Nova's database connections, for `[nova_db]`: the API database's (cells from its
/// `cell_mappings`) and the cell's own (to fill templated cell mappings), and
/// `service_down_time` (when a compute service counts as down). No API database: left off.
pub(super) fn nova_db(conf: &NovaConf, out: &mut Out) {
    let text = Value::String(String::new());
    let Some(api) = out.typed(conf, "api_database", "connection", &text) else {
        out.warn(
            "[api_database] has no connection: [nova_db] left off (Selections name each host by \
             its Placement provider name; set [nova_db] for clouds where host and node differ)",
        );
        return;
    };
    out.set(
        "nova_db",
        "enabled",
        Value::Boolean(true),
        "[api_database] connection (read-only: a read-only database user is enough)",
    );
    out.set(
        "nova_db",
        "api_database_url",
        api,
        "[api_database] connection",
    );
    if let Some(v) = out.typed(conf, "database", "connection", &text) {
        out.set("nova_db", "database_url", v, "[database] connection");
    }
    if let Some(v) = out.typed(conf, "DEFAULT", "service_down_time", &Value::Float(0.0)) {
        out.set(
            "nova_db",
            "service_down_time_s",
            v,
            "[DEFAULT] service_down_time",
        );
    }
}

/// nova-scheduler's versioned notifications: emitted when `[notifications]
/// notification_format` is `versioned` or `both` and `[oslo_messaging_notifications] driver`
/// names a driver other than `noop` (`nova.rpc.if_notifications_enabled`).
pub(super) fn notifications(conf: &NovaConf, out: &mut Out) {
    const SECTION: &str = "notifications";
    const DRIVER: &str = "oslo_messaging_notifications";
    let text = Value::String(String::new());
    let format = out.typed(conf, SECTION, "notification_format", &text);
    let format = format
        .as_ref()
        .and_then(Value::as_str)
        .unwrap_or("unversioned")
        .to_string();
    let driver = out.typed(conf, DRIVER, "driver", &text);
    let driver = driver.as_ref().and_then(Value::as_str).unwrap_or("").trim();
    let sends = !driver.is_empty() && driver != "noop";
    let versioned = matches!(format.as_str(), "versioned" | "both");
    if sends && versioned {
        out.set(
            "rpc",
            "versioned_notifications",
            Value::Boolean(true),
            format!("[{SECTION}] notification_format = {format}, [{DRIVER}] driver = {driver}"),
        );
    }
    if let Some(topics) = out.typed(conf, SECTION, "versioned_notifications_topics", &text) {
        let topics: Vec<Value> = topics
            .as_str()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| Value::String(t.to_string()))
            .collect();
        if topics.is_empty() {
            out.warn(format!(
                "[{SECTION}] versioned_notifications_topics names no topic: not carried"
            ));
        } else {
            out.set(
                "rpc",
                "versioned_notifications_topics",
                Value::Array(topics),
                format!("[{SECTION}] versioned_notifications_topics"),
            );
        }
    }
    if sends && matches!(format.as_str(), "unversioned" | "both") {
        out.warn(format!(
            "[{SECTION}] notification_format = {format}: Parasol emits no legacy unversioned \
             scheduler.select_destinations notifications (only the versioned ones)"
        ));
    }
}
