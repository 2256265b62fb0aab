//! Decoding Nova's RequestSpec 1.x primitive into the parts a scheduler acts on.

use super::bounds::{check_count, check_len, MAX_NAME_BYTES, MAX_TEXT_BYTES};
use super::destination::{RequestLevelParams, RequestedDestination};
use super::error::{CodecError, Result};
pub use super::group::{InstanceGroup, Limits};
use super::image::Image;
use super::object::{Fields, NovaObject};
use super::request_group::RequestGroup;
use super::specs::{settings, ResourceSpecs};
use crate::domain::numa::NumaPciRequest;
use crate::domain::{Destination, RequestContext, Resources};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The most instances one call may ask for; a larger `num_instances` is refused rather
/// than allocated.
pub const MAX_INSTANCES: i64 = 10_000;

/// The sizes of a Nova Flavor (or FlavorPayload) that make up a demand, and its extra specs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Flavor {
    pub name: Option<String>,
    pub flavorid: Option<String>,
    pub vcpus: i64,
    pub memory_mb: i64,
    pub root_gb: i64,
    pub ephemeral_gb: i64,
    /// Swap in MB.
    pub swap: i64,
    /// `extra_specs` (keys and values at most 255 bytes, as Nova stores them).
    pub extra_specs: BTreeMap<String, String>,
}

impl Flavor {
    /// Reads the flavor fields of a Flavor object's data or of a legacy flavor dict;
    /// `vcpus`, `memory_mb` and `root_gb` are required, `ephemeral_gb` and `swap` default to 0.
    pub fn from_fields(f: &Fields<'_>) -> Result<Self> {
        let mut extra_specs = BTreeMap::new();
        if let Some(specs) = f.opt_dict("extra_specs")? {
            check_count(specs.path(), specs.map().len())?;
            for (key, value) in specs.map() {
                let path = specs.path_of(key);
                check_len(&path, key, MAX_NAME_BYTES)?;
                let Value::String(value) = value else {
                    return Err(CodecError::invalid(path, "must be a string"));
                };
                check_len(&path, value, MAX_NAME_BYTES)?;
                extra_specs.insert(key.clone(), value.clone());
            }
        }
        Ok(Flavor {
            name: f.opt_str("name")?,
            flavorid: f.opt_id("flavorid")?,
            vcpus: f.req_size("vcpus")?,
            memory_mb: f.req_size("memory_mb")?,
            root_gb: f.req_size("root_gb")?,
            ephemeral_gb: f.opt_size("ephemeral_gb")?.unwrap_or(0),
            swap: f.opt_size("swap")?.unwrap_or(0),
            extra_specs,
        })
    }

    /// The demand vector as Nova's `resources_from_request_spec` computes it without extra
    /// specs: DISK_GB = root_gb (unless boot-from-volume) + ephemeral_gb + ⌈swap / 1024⌉.
    pub fn demand(&self, is_bfv: bool) -> Resources {
        Resources::new(self.vcpus, self.memory_mb, self.disk_gb(is_bfv))
    }

    /// DISK_GB of the flavor: root (unless boot-from-volume) + ephemeral + swap in GB.
    pub fn disk_gb(&self, is_bfv: bool) -> i64 {
        let root = if is_bfv { 0 } else { self.root_gb };
        let swap_gb = self.swap / 1024 + i64::from(self.swap % 1024 != 0);
        root.saturating_add(self.ephemeral_gb)
            .saturating_add(swap_gb)
    }

    /// The name a request is counted under per flavor (name, else flavorid, else sizes).
    pub fn key(&self) -> String {
        self.name
            .clone()
            .or_else(|| self.flavorid.clone())
            .unwrap_or_else(|| format!("{}-{}-{}", self.vcpus, self.memory_mb, self.root_gb))
    }
}

/// What Parasol keeps of a RequestSpec (1.x, or the legacy 4.0 dicts).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestSpec {
    /// The object version it came as; `(1, 0)` for legacy dicts.
    pub version: (u32, u32),
    pub flavor: Flavor,
    /// The demand of one instance, from the flavor and `is_bfv` (extra specs not applied;
    /// see [`super::resource_request`] for Nova's whole resource request).
    pub demand: Resources,
    pub num_instances: i64,
    pub instance_uuid: Option<String>,
    pub availability_zone: Option<String>,
    pub ignore_hosts: Vec<String>,
    pub force_hosts: Vec<String>,
    pub force_nodes: Vec<String>,
    /// Host and node of `destination`.
    pub requested_destination: Option<Destination>,
    /// The whole `requested_destination`, aggregates included.
    pub destination: Option<RequestedDestination>,
    pub instance_group: Option<InstanceGroup>,
    pub is_bfv: bool,
    /// Hints as lists of strings (a scalar hint becomes a one-element list).
    pub scheduler_hints: BTreeMap<String, Vec<String>>,
    pub limits: Option<Limits>,
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub image_id: Option<String>,
    pub image: Option<Image>,
    /// Resource requests from outside the flavor (ports, device profiles, PCI devices).
    pub requested_resources: Vec<RequestGroup>,
    /// `request_id`s of the flavor's PCI requests (`pci_requests` whose `alias_name` is
    /// set): their groups in `requested_resources` are `<request_id>-<n>`.
    pub pci_request_ids: std::collections::BTreeSet<String>,
    pub request_level: RequestLevelParams,
    /// The extra specs and image properties that shape the resource request, checked.
    pub resource_specs: ResourceSpecs,
    /// What the instance asks of NUMA cells and PCI devices (`numa_topology`,
    /// `pci_requests`, `network_metadata`), decoded whole.
    pub numa_pci: NumaPciRequest,
}

impl RequestSpec {
    /// Decodes `RequestSpec.obj_to_primitive()`; errors are located under `spec_obj`.
    pub fn from_primitive(value: &Value) -> Result<Self> {
        Self::from_primitive_at(value, "spec_obj")
    }

    /// Decodes a RequestSpec primitive found at `path` (used in error messages).
    pub fn from_primitive_at(value: &Value, path: &str) -> Result<Self> {
        let obj = NovaObject::parse(value, "RequestSpec", path)?;
        let d = &obj.data;
        let flavor = match d.opt_object("flavor", "Flavor")? {
            Some(f) => Flavor::from_fields(&f.data)?,
            None => return Err(CodecError::missing(d.path_of("flavor"))),
        };
        let is_bfv = d.opt_bool("is_bfv")?.unwrap_or(false);
        let (destination, destination_cell) =
            match d.opt_object("requested_destination", "Destination")? {
                Some(dest) => {
                    let cell = match dest.data.opt_object("cell", "CellMapping")? {
                        Some(cell) => cell.data.opt_str("uuid")?,
                        None => None,
                    };
                    (Some(RequestedDestination::from_fields(&dest.data)?), cell)
                }
                None => (None, None),
            };
        let instance_group = match d.opt_object("instance_group", "InstanceGroup")? {
            Some(g) => Some(InstanceGroup::from_fields(&g.data)?),
            None => None,
        };
        let limits = match d.opt_object("limits", "SchedulerLimits")? {
            Some(l) => Some(Limits::from_fields(&l.data)?),
            None => None,
        };
        let image = match d.field("image").value() {
            Some(v) => Some(Image::from_value(v, d.path_of("image"))?),
            None => None,
        };
        let request_level = match d.opt_object("request_level_params", "RequestLevelParams")? {
            Some(p) => RequestLevelParams::from_fields(&p.data)?,
            None => RequestLevelParams::default(),
        };
        let paths = (
            format!("{}.flavor.extra_specs", d.path()),
            format!("{}.image.properties", d.path()),
        );
        let settings = settings(&flavor.extra_specs, image.as_ref(), &paths);
        let resource_specs = ResourceSpecs::parse(&settings, flavor.vcpus as u64)?;
        let numa_pci = numa_pci_request(d, &settings)?;
        Ok(RequestSpec {
            version: obj.version,
            demand: flavor.demand(is_bfv),
            flavor,
            num_instances: read_num_instances(d)?,
            instance_uuid: d.opt_uuid("instance_uuid")?,
            availability_zone: d.opt_str("availability_zone")?,
            ignore_hosts: d.opt_str_list("ignore_hosts")?.unwrap_or_default(),
            force_hosts: d.opt_str_list("force_hosts")?.unwrap_or_default(),
            force_nodes: d.opt_str_list("force_nodes")?.unwrap_or_default(),
            requested_destination: destination.as_ref().map(|dest| Destination {
                cell: destination_cell,
                ..dest.host_and_node()
            }),
            destination,
            instance_group,
            is_bfv,
            scheduler_hints: read_hints(d, "scheduler_hints")?,
            limits,
            project_id: d.opt_str("project_id")?,
            user_id: d.opt_str("user_id")?,
            image_id: image.as_ref().and_then(|i| i.id.clone()),
            image,
            requested_resources: requested_resources(d, &resource_specs)?,
            pci_request_ids: pci_request_ids(d)?,
            request_level,
            resource_specs,
            numa_pci,
        })
    }

    /// True for a rebuild (`_nova_check_type` hint `["rebuild"]`): Nova asks Placement
    /// nothing then, the instance keeps its allocation.
    pub fn is_rebuild(&self) -> bool {
        self.scheduler_hints
            .get("_nova_check_type")
            .is_some_and(|v| v.len() == 1 && v[0] == "rebuild")
    }

    /// One scheduling context per instance to place: one per `instance_uuids` entry; when
    /// that is empty, the spec's own `instance_uuid` first and fresh v4 uuids for the rest
    /// of `num_instances`.
    pub fn contexts(&self, instance_uuids: &[String]) -> Vec<RequestContext> {
        let uuids: Vec<String> = if instance_uuids.is_empty() {
            let count = self.num_instances.clamp(1, MAX_INSTANCES) as usize;
            let mut uuids: Vec<String> = self.instance_uuid.iter().cloned().collect();
            while uuids.len() < count {
                uuids.push(uuid::Uuid::new_v4().to_string());
            }
            uuids
        } else {
            instance_uuids.to_vec()
        };
        let group = self
            .instance_group
            .as_ref()
            .and_then(InstanceGroup::server_group);
        let flavor = self.flavor.key();
        uuids
            .into_iter()
            .map(|uuid| RequestContext {
                availability_zone: self.availability_zone.clone(),
                force_hosts: self.force_hosts.clone(),
                force_nodes: self.force_nodes.clone(),
                ignore_hosts: self.ignore_hosts.clone(),
                requested_destination: self.requested_destination.clone(),
                group: group.clone(),
                cross_cell_move: self
                    .destination
                    .as_ref()
                    .is_some_and(|d| d.allow_cross_cell_move),
                ..RequestContext::with_demand(uuid, flavor.clone(), self.demand)
            })
            .collect()
    }
}

/// `requested_resources`, none of whose requesters is also a suffix of the flavor's
/// groups (Nova's `RequestGroupSuffixConflict`).
fn requested_resources(d: &Fields<'_>, specs: &ResourceSpecs) -> Result<Vec<RequestGroup>> {
    let groups = RequestGroup::list(d, "requested_resources")?;
    for (i, g) in groups.iter().enumerate() {
        if specs.numbered.contains_key(g.suffix()) {
            return Err(CodecError::invalid(
                format!("{}[{i}]", d.path_of("requested_resources")),
                format!(
                    "has requester_id {:?}, a suffix the flavor's extra specs already use",
                    g.suffix()
                ),
            ));
        }
    }
    Ok(groups)
}

/// The `request_id`s of `pci_requests` that come from a flavor alias (Nova's
/// `request_filter._get_pci_request_ids`).
fn pci_request_ids(d: &Fields<'_>) -> Result<std::collections::BTreeSet<String>> {
    let mut ids = std::collections::BTreeSet::new();
    let Some(requests) = d.opt_object("pci_requests", "InstancePCIRequests")? else {
        return Ok(ids);
    };
    let list = requests.data.opt_list("requests")?.into_iter().flatten();
    for (i, item) in list.enumerate() {
        let path = format!("{}[{i}]", requests.data.path_of("requests"));
        let r = NovaObject::parse(item, "InstancePCIRequest", path)?.data;
        if r.opt_str("alias_name")?.is_some() {
            ids.extend(r.opt_str("request_id")?);
        }
    }
    Ok(ids)
}

/// The RequestSpec's `numa_topology`, `pci_requests` and `network_metadata`, with the CPU
/// policies `NUMATopologyFilter._satisfies_cpu_policy` reads from flavor and image as they are.
fn numa_pci_request(d: &Fields<'_>, s: &super::settings::Settings<'_>) -> Result<NumaPciRequest> {
    let asked = |spec: &str, prop: &str, value: &str| {
        s.spec(spec) == Some(value) || s.prop(prop).as_deref() == Some(value)
    };
    Ok(NumaPciRequest {
        numa: super::numa::instance_numa(d, "numa_topology")?.map(std::sync::Arc::new),
        pci: super::numa::pci_requests(d, "pci_requests")?,
        network_metadata: super::numa::network_metadata(d, "network_metadata")?,
        cpu_dedicated_asked: asked("hw:cpu_policy", "hw_cpu_policy", "dedicated"),
        thread_require_asked: asked("hw:cpu_thread_policy", "hw_cpu_thread_policy", "require"),
    })
}

/// `num_instances`: 1 when unset, otherwise between 1 and [`MAX_INSTANCES`].
pub(crate) fn read_num_instances(d: &Fields<'_>) -> Result<i64> {
    match d.opt_size("num_instances")? {
        None => Ok(1),
        Some(n) if (1..=MAX_INSTANCES).contains(&n) => Ok(n),
        Some(n) => Err(CodecError::invalid(
            d.path_of("num_instances"),
            format!("must be between 1 and {MAX_INSTANCES}, got {n}"),
        )),
    }
}

/// Scheduler hints as lists of strings; scalars become one-element lists. At most 10,000
/// hints of at most 10,000 values; keys at most 255 bytes, values at most 64 KiB.
pub(crate) fn read_hints(d: &Fields<'_>, key: &str) -> Result<BTreeMap<String, Vec<String>>> {
    let Some(hints) = d.opt_dict(key)? else {
        return Ok(BTreeMap::new());
    };
    check_count(hints.path(), hints.map().len())?;
    let text = |path: String, v: &Value| -> Result<String> {
        let s = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        check_len(&path, &s, MAX_TEXT_BYTES).map(|_| s)
    };
    hints
        .map()
        .iter()
        .map(|(k, v)| {
            let path = hints.path_of(k);
            check_len(&path, k, MAX_NAME_BYTES)?;
            let values = match v {
                Value::Array(items) => {
                    check_count(&path, items.len())?;
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| text(format!("{path}[{i}]"), item))
                        .collect::<Result<Vec<_>>>()?
                }
                Value::Null => Vec::new(),
                other => vec![text(path, other)?],
            };
            Ok((k.clone(), values))
        })
        .collect()
}

#[cfg(test)]
mod tests;
