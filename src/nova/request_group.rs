//! One request group of Nova's resource request (`objects.RequestGroup` 1.x): the flavor's
//! numbered or suffixed groups (`resources<S>:…`, `trait<S>:…`) and the groups that come
//! from outside the flavor in `RequestSpec.requested_resources` — a Neutron port's
//! bandwidth or packet-rate request, a Cyborg device profile's groups, the PCI devices of
//! `[filter_scheduler] pci_in_placement` — each carried with its `requester_id` as suffix.

use super::bounds::{check_count, check_len, strings, MAX_NAME_BYTES};
use super::error::{CodecError, Result};
use super::object::{Fields, NovaObject};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Where a suffixed request group comes from, as its `requester_id` tells (Nova writes
/// each kind in its own form).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupOrigin {
    /// `resources<S>` / `trait<S>` extra specs of the flavor.
    Flavor,
    /// A Neutron port's resource request: the port's uuid, or the request group's uuid of
    /// an extended resource request (bandwidth, packet rate).
    NeutronPort,
    /// A Cyborg device profile's group: `device_profile_<n>[<port uuid>]`.
    DeviceProfile,
    /// A PCI device of `[filter_scheduler] pci_in_placement`: `<pci request uuid>-<n>`.
    PciDevice,
    /// Any other `requester_id`.
    #[default]
    Outside,
}

impl GroupOrigin {
    /// The origin a `requester_id` of `requested_resources` names.
    pub fn of_requester(id: &str) -> Self {
        if id.starts_with("device_profile_") {
            return GroupOrigin::DeviceProfile;
        }
        if is_uuid(id) {
            return GroupOrigin::NeutronPort;
        }
        match id.rsplit_once('-') {
            Some((request, n))
                if is_uuid(request) && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
            {
                GroupOrigin::PciDevice
            }
            _ => GroupOrigin::Outside,
        }
    }

    /// Words for a reason: "from a Neutron port".
    pub fn describe(self) -> &'static str {
        match self {
            GroupOrigin::Flavor => "from the flavor",
            GroupOrigin::NeutronPort => "from a Neutron port",
            GroupOrigin::DeviceProfile => "from a Cyborg device profile",
            GroupOrigin::PciDevice => "from a PCI device in Placement",
            GroupOrigin::Outside => "from outside the flavor",
        }
    }
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// A suffixed request group (RequestGroup 1.3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RequestGroup {
    /// The group's suffix: the flavor's `<S>`, or the requester of an outside group.
    pub requester_id: Option<String>,
    pub origin: GroupOrigin,
    /// Resource class → amount (zeros kept until the request strips them).
    pub resources: BTreeMap<String, u64>,
    pub required_traits: BTreeSet<String>,
    pub forbidden_traits: BTreeSet<String>,
    /// `member_of<S>`: in one aggregate of every inner list.
    pub aggregates: Vec<Vec<String>>,
    /// `member_of<S>=!in:`.
    pub forbidden_aggregates: BTreeSet<String>,
    /// `in_tree<S>`.
    pub in_tree: Option<String>,
}

impl RequestGroup {
    /// A flavor group of suffix `suffix`, empty.
    pub fn flavor(suffix: &str) -> Self {
        RequestGroup {
            requester_id: Some(suffix.to_string()),
            origin: GroupOrigin::Flavor,
            ..RequestGroup::default()
        }
    }

    /// Nova's `RequestGroup.is_empty`: no resources (zeros count), traits or aggregates.
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
            && self.required_traits.is_empty()
            && self.forbidden_traits.is_empty()
            && self.aggregates.is_empty()
            && self.forbidden_aggregates.is_empty()
    }

    /// The suffix, `""` for none.
    pub fn suffix(&self) -> &str {
        self.requester_id.as_deref().unwrap_or_default()
    }

    /// Reads `requested_resources`, a list of RequestGroup objects. Each must have a
    /// `requester_id`, ask for something and be the only one of its id: Nova's
    /// `ResourceRequest._add_request_group` raises otherwise.
    pub fn list(d: &Fields<'_>, key: &str) -> Result<Vec<Self>> {
        let Some(items) = d.opt_list(key)? else {
            return Ok(Vec::new());
        };
        let mut seen = BTreeMap::new();
        let mut groups = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = format!("{}[{i}]", d.path_of(key));
            let g = Self::from_fields(&NovaObject::parse(item, "RequestGroup", &path)?.data)?;
            let Some(id) = g.requester_id.clone().filter(|id| !id.is_empty()) else {
                return Err(CodecError::invalid(
                    path,
                    "has no requester_id (a port, device profile or PCI group must name its requester)",
                ));
            };
            if g.is_empty() {
                return Err(CodecError::invalid(
                    path,
                    format!("(requester {id:?}) asks for no resources, traits or aggregates"),
                ));
            }
            if let Some(first) = seen.insert(id.clone(), i) {
                return Err(CodecError::invalid(
                    path,
                    format!("repeats the requester_id {id:?} of [{first}]: each group needs its own suffix"),
                ));
            }
            groups.push(g);
        }
        Ok(groups)
    }

    /// Reads a RequestGroup object's data; its origin comes from its `requester_id`.
    pub fn from_fields(g: &Fields<'_>) -> Result<Self> {
        let mut resources = BTreeMap::new();
        if let Some(r) = g.opt_dict("resources")? {
            check_count(r.path(), r.map().len())?;
            for name in r.map().keys() {
                check_len(&r.path_of(name), name, MAX_NAME_BYTES)?;
                resources.insert(name.clone(), r.req_size(name)? as u64);
            }
        }
        let set = |key: &str| -> Result<BTreeSet<String>> {
            Ok(g.opt_str_list(key)?
                .unwrap_or_default()
                .into_iter()
                .collect())
        };
        let aggregates = match g.opt_list("aggregates")? {
            None => Vec::new(),
            Some(lists) => lists
                .iter()
                .enumerate()
                .map(|(i, l)| strings(l, &format!("{}[{i}]", g.path_of("aggregates"))))
                .collect::<Result<Vec<_>>>()?,
        };
        let requester_id = g.opt_str("requester_id")?;
        Ok(RequestGroup {
            origin: requester_id
                .as_deref()
                .map(GroupOrigin::of_requester)
                .unwrap_or_default(),
            requester_id,
            resources,
            required_traits: set("required_traits")?,
            forbidden_traits: set("forbidden_traits")?,
            aggregates,
            forbidden_aggregates: set("forbidden_aggregates")?,
            in_tree: g.opt_uuid("in_tree")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requester_id_names_the_origin() {
        let port = "2f6a2c1e-8f0c-4b7a-9d3e-0a1b2c3d4e5f";
        let cases = [
            (port.to_string(), GroupOrigin::NeutronPort),
            (format!("{port}-0"), GroupOrigin::PciDevice),
            (format!("{port}-12"), GroupOrigin::PciDevice),
            ("device_profile_0".into(), GroupOrigin::DeviceProfile),
            (
                format!("device_profile_1{port}"),
                GroupOrigin::DeviceProfile,
            ),
            (format!("{port}-x"), GroupOrigin::Outside),
            ("gpu".into(), GroupOrigin::Outside),
        ];
        for (id, want) in cases {
            assert_eq!(GroupOrigin::of_requester(&id), want, "{id}");
        }
    }
}
