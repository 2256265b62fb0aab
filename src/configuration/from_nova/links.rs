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
/// the AMQP URI Parasol connects to (the first broker; an empty vhost is `/`, written `%2f`).
pub fn amqp_url(url: &str, ssl: bool) -> Result<(String, Vec<String>), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "it is not a URL".to_string())?;
    if scheme != "rabbit" && scheme != "amqp" {
        return Err(format!("driver {scheme:?} is not RabbitMQ (rabbit://)"));
    }
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (netloc, vhost) = rest.split_once('/').unwrap_or((rest, ""));
    let brokers: Vec<&str> = netloc.split(',').filter(|b| !b.is_empty()).collect();
    let first = brokers
        .first()
        .ok_or_else(|| "it names no broker".to_string())?;
    let mut notes = Vec::new();
    if brokers.len() > 1 {
        let hosts: Vec<&str> = brokers
            .iter()
            .map(|b| b.rsplit_once('@').map_or(*b, |(_, h)| h))
            .collect();
        notes.push(format!(
            "[DEFAULT] transport_url names {} brokers ({}): Parasol connects to the first only",
            brokers.len(),
            hosts.join(", ")
        ));
    }
    if !query.is_empty() {
        notes.push(format!(
            "[DEFAULT] transport_url options ?{query} are not carried"
        ));
    }
    let vhost = if vhost.is_empty() { "%2f" } else { vhost };
    let scheme = if ssl { "amqps" } else { "amqp" };
    Ok((format!("{scheme}://{first}/{vhost}"), notes))
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
