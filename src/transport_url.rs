//! `[amqp] url`, as nova.conf writes it (`[DEFAULT] transport_url`) or as an AMQP URI:
//! `rabbit://user:pass@host1:5672,user:pass@host2:5672/vhost?ssl=1` (oslo.messaging's form,
//! several brokers to fail over between) or `amqp://…` / `amqps://…` (one broker). Each
//! broker becomes one AMQP URI for lapin; the virtual host `/` is written `%2f`.

use std::str::FromStr;

/// A broker URL, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportUrl {
    /// One AMQP URI per broker, in the order written.
    pub brokers: Vec<String>,
    /// Query options Parasol does not act on (logged at start).
    pub ignored_options: Vec<String>,
}

impl FromStr for TransportUrl {
    type Err = String;

    fn from_str(url: &str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| "is not a URL: use rabbit://USER:PASS@HOST:5672/VHOST".to_string())?;
        let mut tls = match scheme {
            "rabbit" | "amqp" => false,
            "amqps" => true,
            other => {
                return Err(format!(
                "has scheme {other:?}: Parasol speaks to RabbitMQ (rabbit://, amqp:// or amqps://)"
            ))
            }
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (netloc, vhost) = rest.split_once('/').unwrap_or((rest, ""));
        let mut ignored_options = Vec::new();
        for option in query.split('&').filter(|o| !o.is_empty()) {
            let (key, value) = option.split_once('=').unwrap_or((option, ""));
            match key {
                "ssl" => tls = matches!(value.to_ascii_lowercase().as_str(), "1" | "true" | "yes"),
                _ => ignored_options.push(option.to_string()),
            }
        }
        let vhost = if vhost.is_empty() { "%2f" } else { vhost };
        let scheme = if tls { "amqps" } else { "amqp" };
        let brokers: Vec<String> = netloc
            .split(',')
            .filter(|b| !b.is_empty())
            .map(|b| format!("{scheme}://{b}/{vhost}"))
            .collect();
        if brokers.is_empty() {
            return Err("names no broker host".into());
        }
        for b in &brokers {
            lapin::uri::AMQPUri::from_str(b).map_err(|e| {
                format!(
                    "broker {} is not a valid address: {e}",
                    crate::redact::redact_url(b)
                )
            })?;
        }
        Ok(TransportUrl {
            brokers,
            ignored_options,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nova_conf_transport_urls_become_one_amqp_uri_per_broker() {
        let cases = [
            (
                "rabbit://nova:pw@r1:5672,nova:pw@r2:5672/nova",
                vec!["amqp://nova:pw@r1:5672/nova", "amqp://nova:pw@r2:5672/nova"],
            ),
            (
                "rabbit://guest:guest@h:5672/",
                vec!["amqp://guest:guest@h:5672/%2f"],
            ),
            (
                "rabbit://guest:guest@h:5672",
                vec!["amqp://guest:guest@h:5672/%2f"],
            ),
            ("rabbit://u:p@h:5671/v?ssl=1", vec!["amqps://u:p@h:5671/v"]),
            ("amqp://u:p@h:5672/%2f", vec!["amqp://u:p@h:5672/%2f"]),
            ("amqps://u:p@h/%2f", vec!["amqps://u:p@h/%2f"]),
        ];
        for (url, want) in cases {
            let got: TransportUrl = url.parse().unwrap();
            assert_eq!(got.brokers, want, "{url}");
        }
        let with_options: TransportUrl = "rabbit://u:p@h/?heartbeat=30".parse().unwrap();
        assert_eq!(with_options.ignored_options, ["heartbeat=30"]);
    }

    #[test]
    fn urls_that_cannot_reach_rabbitmq_are_refused_naming_why() {
        for (url, why) in [
            ("kafka://h:9092/", "has scheme \"kafka\""),
            ("fake:/", "is not a URL"),
            ("rabbit:///", "names no broker"),
            ("rabbit://u:p@h:notaport/", "not a valid address"),
        ] {
            let err = url.parse::<TransportUrl>().unwrap_err();
            assert!(err.contains(why), "{url}: {err}");
            assert!(!err.contains(":p@"), "password shown: {err}");
        }
    }
}
