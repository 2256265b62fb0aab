//! `AggregateImagePropertiesIsolation`: a host whose aggregates' metadata names an image
//! property takes only images whose value of it is one listed there (Nova 34's
//! `aggregate_image_properties_isolation.py`).
//!
//! As in Nova: every metadata key of the host's aggregates is compared (or only those
//! starting with `<namespace><separator>` when `aggregate_image_properties_isolation_namespace`
//! is set), with the image property of the same name; a property the image does not set (or
//! sets to a false value) passes; the value compared is Python's `str()` of the property
//! (`True` for a boolean), against the metadata values split at commas.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Nova's `AggregateImagePropertiesIsolation`; runs for a rebuild too (`RUN_ON_REBUILD =
/// True`).
#[derive(Clone, Debug, Default)]
pub struct AggregateImagePropertiesIsolation {
    /// `<namespace><separator>`, or `None` when no namespace is configured.
    prefix: Option<String>,
}

impl AggregateImagePropertiesIsolation {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "AggregateImagePropertiesIsolation";

    /// The filter with `[policy] aggregate_image_properties_isolation_namespace` and
    /// `_separator`.
    pub fn new(config: &PolicyConfig) -> Self {
        let namespace = &config.aggregate_image_properties_isolation_namespace;
        AggregateImagePropertiesIsolation {
            prefix: (!namespace.is_empty()).then(|| {
                format!(
                    "{namespace}{}",
                    config.aggregate_image_properties_isolation_separator
                )
            }),
        }
    }
}

impl Filter for AggregateImagePropertiesIsolation {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    /// Nova's `RUN_ON_REBUILD = True`: a rebuild with a new image is checked too.
    fn runs_on_rebuild(&self) -> bool {
        true
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.aggregate_metadata.is_some() && req.image_props.as_ref().is_some_and(|p| !p.is_empty())
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let (Some(metadata), Some(props)) = (
            req.aggregate_metadata
                .as_ref()
                .and_then(|m| m.of(host.host())),
            req.image_props.as_ref(),
        ) else {
            return true;
        };
        metadata.iter().all(|(key, options)| {
            if self.prefix.as_ref().is_some_and(|p| !key.starts_with(p)) {
                return true;
            }
            props.get(key).is_none_or(|value| options.contains(value))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;
    use crate::domain::HostAggregateMetadata;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Aggregates as (hosts, metadata) pairs.
    type Aggs<'a> = &'a [(&'a [&'a str], &'a [(&'a str, &'a str)])];

    fn request_with(aggs: Aggs<'_>, image: &[(&str, &str)]) -> RequestContext {
        let owned: Vec<(Vec<String>, BTreeMap<String, String>)> = aggs
            .iter()
            .map(|(hosts, meta)| (hosts.iter().map(|h| h.to_string()).collect(), map(meta)))
            .collect();
        let mut req = request();
        req.aggregate_metadata = Some(Arc::new(HostAggregateMetadata::new(
            owned.iter().map(|(h, m)| (h.as_slice(), m)),
        )));
        req.image_props = Some(Arc::new(map(image)));
        req
    }

    fn filter(namespace: &str, separator: &str) -> AggregateImagePropertiesIsolation {
        AggregateImagePropertiesIsolation::new(&PolicyConfig {
            aggregate_image_properties_isolation_namespace: namespace.into(),
            aggregate_image_properties_isolation_separator: separator.into(),
            ..PolicyConfig::default()
        })
    }

    #[test]
    fn compares_every_key_without_a_namespace() {
        let env = FilterEnv::without_heartbeats();
        let aggs: Aggs = &[
            (&["host1"], &[("os_type", "windows")]),
            (
                &["host2"],
                &[("os_type", "linux, bsd"), ("hw_qemu_guest_agent", "True")],
            ),
            (&["host3"], &[("type", "windows")]),
        ];
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], i64, bool);
        let cases: [Case; 9] = [
            ("matching value", &[("os_type", "windows")], 1, true),
            ("other value", &[("os_type", "linux")], 1, false),
            ("one of the values, trimmed", &[("os_type", "bsd")], 2, true),
            (
                "boolean as Python's str",
                &[("os_type", "linux"), ("hw_qemu_guest_agent", "True")],
                2,
                true,
            ),
            (
                "boolean spelled otherwise",
                &[("os_type", "linux"), ("hw_qemu_guest_agent", "true")],
                2,
                false,
            ),
            (
                "image without the property",
                &[("hw_disk_bus", "scsi")],
                1,
                true,
            ),
            (
                "key the image does not set",
                &[("os_type", "linux")],
                3,
                true,
            ),
            ("host in no aggregate", &[("os_type", "linux")], 4, true),
            ("no image property at all", &[], 1, true),
        ];
        let f = AggregateImagePropertiesIsolation::default();
        for (name, image, id, want) in cases {
            let req = request_with(aggs, image);
            assert_eq!(f.passes(&host(id), &req, &env), want, "{name}");
        }
    }

    #[test]
    fn a_namespace_limits_the_keys_compared() {
        let env = FilterEnv::without_heartbeats();
        let aggs: Aggs = &[(
            &["host1"],
            &[("os_type", "windows"), ("hw_firmware_type", "bios")],
        )];
        let cases = [
            (
                "namespaced key mismatch",
                "os",
                "_",
                &[("os_type", "linux")][..],
                false,
            ),
            (
                "namespaced key match",
                "os",
                "_",
                &[("os_type", "windows")][..],
                true,
            ),
            (
                "key outside the namespace",
                "os",
                "_",
                &[("hw_firmware_type", "uefi")][..],
                true,
            ),
            (
                "Nova's default separator is a dot",
                "os",
                ".",
                &[("os_type", "linux")][..],
                true,
            ),
            (
                "no namespace compares all",
                "",
                ".",
                &[("hw_firmware_type", "uefi")][..],
                false,
            ),
        ];
        for (name, namespace, separator, image, want) in cases {
            let req = request_with(aggs, image);
            assert_eq!(
                filter(namespace, separator).passes(&host(1), &req, &env),
                want,
                "{name}"
            );
        }
        assert_eq!(
            PolicyConfig::default().aggregate_image_properties_isolation_separator,
            ".",
            "Nova's default"
        );
    }

    #[test]
    fn skipped_without_metadata_or_image_properties() {
        let f = AggregateImagePropertiesIsolation::default();
        let mut req = request();
        assert!(!f.restricts(&req));
        req.image_props = Some(Arc::new(map(&[("os_type", "linux")])));
        assert!(!f.restricts(&req), "no aggregate metadata");
        let req = request_with(&[(&["host1"], &[("os_type", "windows")])], &[]);
        assert!(!f.restricts(&req), "no image property");
        let mut req = request_with(
            &[(&["host1"], &[("os_type", "windows")])],
            &[("os_type", "linux")],
        );
        assert!(f.restricts(&req));
        req.rebuild = true;
        assert!(
            super::super::applies(&f, &req),
            "Nova's RUN_ON_REBUILD is true"
        );
        assert!(
            !f.passes(&host(1), &req, &FilterEnv::without_heartbeats()),
            "runs on rebuild too"
        );
    }
}
