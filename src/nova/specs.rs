//! What a flavor's extra specs and its image's properties ask of Placement, read and
//! checked once when the RequestSpec is decoded (`ResourceRequest._process_extra_specs`,
//! `_process_image_meta`, the CPU policies and the hardware features).
//!
//! A malformed value (`resources:VCPU=abc`, `trait:X=maybe`, `hw:cpu_policy=bogus`, a
//! flavor and image that conflict) is a [`CodecError`] naming the key, which the HTTP layer
//! answers with 400 and the RPC layer with a `ValueError`. A well-formed resource class or
//! trait that no provider has is *not* an error here: the scheduler finds no candidate and
//! answers NoValidHost, as Nova does when Placement refuses it.

use super::cpu::CpuSpecs;
use super::error::{CodecError, Result};
use super::features::Features;
use super::image::Image;
use super::request_group::RequestGroup;
use super::settings::{amount, one_of, Settings};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The validated resource-request inputs of a flavor and its image.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ResourceSpecs {
    /// `resources:CLASS=N` of the unnumbered group (0 included: it removes the class).
    pub resources: BTreeMap<String, u64>,
    /// `trait:NAME=required`.
    pub required_traits: BTreeSet<String>,
    /// `trait:NAME=forbidden`.
    pub forbidden_traits: BTreeSet<String>,
    /// The flavor's numbered or suffixed groups (`resources1:…`, `trait_gpu:…`) by suffix,
    /// zeros kept (Nova counts a group of zeros among the flavor's suffixed groups).
    pub numbered: BTreeMap<String, RequestGroup>,
    /// `group_policy` (`none` or `isolate`).
    pub group_policy: Option<String>,
    /// The image's `traits_required`.
    pub image_traits: Vec<String>,
    pub cpu: CpuSpecs,
    pub features: Features,
}

impl ResourceSpecs {
    /// Reads the extra specs of a flavor with `vcpus` vCPUs together with its image.
    pub fn parse(s: &Settings<'_>, vcpus: u64) -> Result<Self> {
        let mut specs = ResourceSpecs {
            image_traits: s
                .image
                .map(|i| i.traits_required.clone())
                .unwrap_or_default(),
            cpu: CpuSpecs::parse(s, vcpus)?,
            features: Features::parse(s)?,
            ..ResourceSpecs::default()
        };
        for (key, value) in s.extra_specs {
            let path = s.spec_path(key);
            if key == "group_policy" {
                specs.group_policy = Some(one_of(&path, value, &["none", "isolate"])?.to_string());
                continue;
            }
            let Some((prefix, suffix, name)) = split_key(key) else {
                continue;
            };
            let (resources, required, forbidden) = match suffix {
                None => (
                    &mut specs.resources,
                    &mut specs.required_traits,
                    &mut specs.forbidden_traits,
                ),
                Some(suffix) => {
                    let g = specs
                        .numbered
                        .entry(suffix.to_string())
                        .or_insert_with(|| RequestGroup::flavor(suffix));
                    (
                        &mut g.resources,
                        &mut g.required_traits,
                        &mut g.forbidden_traits,
                    )
                }
            };
            if prefix == "resources" {
                check_class(&path, name)?;
                resources.insert(name.to_string(), amount(&path, value)?);
            } else if one_of(&path, value, &["required", "forbidden"])? == "required" {
                required.insert(name.to_string());
            } else {
                forbidden.insert(name.to_string());
            }
        }
        Ok(specs)
    }
}

/// `ResourceRequest.XS_KEYPAT`: `^(resources|trait)([a-zA-Z0-9_-]{1,64})?:(.*)$` as
/// (prefix, suffix, name).
fn split_key(key: &str) -> Option<(&str, Option<&str>, &str)> {
    let prefix = ["resources", "trait"]
        .into_iter()
        .find(|p| key.starts_with(p))?;
    let (suffix, name) = key[prefix.len()..].split_once(':')?;
    let well_formed = suffix.len() <= 64
        && suffix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !well_formed {
        return None;
    }
    Some((prefix, (!suffix.is_empty()).then_some(suffix), name))
}

/// A resource class must be a standard one or `CUSTOM_[A-Z0-9_]+` (Nova's API validators;
/// its scheduler drops other names with a warning).
fn check_class(path: &str, name: &str) -> Result<()> {
    let custom = name.strip_prefix("CUSTOM_").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    });
    if custom || crate::domain::STANDARD_CLASSES.contains(&name) {
        return Ok(());
    }
    Err(CodecError::invalid(
        path,
        format!("names {name:?}, neither a standard resource class nor CUSTOM_[A-Z0-9_]+"),
    ))
}

/// The settings of `extra_specs` and `image`, located under `flavor_path` and `image_path`.
pub fn settings<'a>(
    extra_specs: &'a BTreeMap<String, String>,
    image: Option<&'a Image>,
    paths: &'a (String, String),
) -> Settings<'a> {
    Settings {
        extra_specs,
        image,
        specs_path: &paths.0,
        props_path: &paths.1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_spec_keys_split_as_nova_s_pattern_splits_them() {
        let cases = [
            ("resources:VCPU", Some(("resources", None, "VCPU"))),
            (
                "resources1:CUSTOM_X",
                Some(("resources", Some("1"), "CUSTOM_X")),
            ),
            ("trait_gpu-a:HW_X", Some(("trait", Some("_gpu-a"), "HW_X"))),
            ("trait:", Some(("trait", None, ""))),
            ("resources!:VCPU", None),
            ("hw:cpu_policy", None),
            ("traits", None),
        ];
        for (key, want) in cases {
            assert_eq!(split_key(key), want, "{key}");
        }
    }

    #[test]
    fn resource_classes_must_be_standard_or_custom() {
        for (name, ok) in [
            ("VCPU", true),
            ("VGPU", true),
            ("CUSTOM_GOLD_1", true),
            ("CUSTOM_", false),
            ("CUSTOM_gold", false),
            ("NOT_A_CLASS", false),
        ] {
            assert_eq!(check_class("k", name).is_ok(), ok, "{name}");
        }
    }
}
