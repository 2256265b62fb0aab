//! `ResourceRequest.from_request_spec` (Nova 34, `nova/scheduler/utils.py`): every request
//! group of a RequestSpec, before the request filters and the destination touch it.

use super::ResourceRequest;
use crate::nova::cpu::CpuPolicy;
use crate::nova::request_spec::RequestSpec;
use std::collections::BTreeSet;

impl ResourceRequest {
    /// Nova's `ResourceRequest.from_request_spec(spec, pinning_translate)` with the limit
    /// `max_placement_results`: the flavor's unnumbered and suffixed groups and
    /// `group_policy`, the image's `traits_required`, the CPU policies (unless
    /// `pinning_translate` is false: the PCPU fallback), `requested_resources` as they
    /// are, the flavor's sizes where no group asked that class, the hardware features, the
    /// request-level root traits and `same_subtree`; zeros stripped, empty groups dropped.
    pub fn from_request_spec(
        spec: &RequestSpec,
        pinning_translate: bool,
        max_placement_results: u32,
    ) -> Self {
        let mut r = build(spec, pinning_translate);
        r.limit = Some(max_placement_results);
        r
    }

    /// Nova's `all_required_traits`: the required traits of every group.
    pub fn all_required_traits(&self) -> BTreeSet<String> {
        let mut all = self.required_traits.clone();
        for g in &self.groups {
            all.extend(g.required_traits.iter().cloned());
        }
        all
    }

    /// The class of `class` is asked by some group (a zero counts: Nova's
    /// `merged_resources` keeps it).
    fn asks(&self, class: &str) -> bool {
        self.resources.contains_key(class)
            || self.groups.iter().any(|g| g.resources.contains_key(class))
    }
}

/// `from_request_spec` without the limit.
pub(super) fn build(spec: &RequestSpec, pinning_translate: bool) -> ResourceRequest {
    let specs = &spec.resource_specs;
    let flavor = &spec.flavor;
    let vcpus = flavor.vcpus as u64;
    let mut r = ResourceRequest {
        resources: specs.resources.clone(),
        required_traits: specs.required_traits.clone(),
        forbidden_traits: specs.forbidden_traits.clone(),
        groups: specs.numbered.values().cloned().collect(),
        root_required: spec.request_level.root_required.clone(),
        root_forbidden: spec.request_level.root_forbidden.clone(),
        same_subtree: spec.request_level.same_subtree.clone(),
        group_policy: specs.group_policy.clone(),
        ..ResourceRequest::default()
    };
    r.required_traits.extend(specs.image_traits.iter().cloned());
    if pinning_translate {
        let cpu = &specs.cpu;
        let pcpus = match cpu.policy {
            Some(CpuPolicy::Dedicated) => {
                r.cpu_pinning_requested = true;
                Some(vcpus)
            }
            Some(CpuPolicy::Mixed) => {
                r.resources
                    .insert("VCPU".into(), vcpus - cpu.mixed_dedicated.min(vcpus));
                Some(cpu.mixed_dedicated)
            }
            _ => None,
        };
        if let Some(pcpus) = pcpus {
            r.resources
                .insert("PCPU".into(), pcpus + u64::from(cpu.emulator_isolate));
        }
        match cpu.hyperthreading {
            Some(true) => r.required_traits.insert("HW_CPU_HYPERTHREADING".into()),
            Some(false) => r.forbidden_traits.insert("HW_CPU_HYPERTHREADING".into()),
            None => false,
        };
    }
    r.groups.extend(spec.requested_resources.iter().cloned());
    if !r.asks("VCPU") && !r.asks("PCPU") {
        r.resources.insert("VCPU".into(), vcpus);
    }
    if !r.asks("MEMORY_MB") {
        r.resources
            .insert("MEMORY_MB".into(), flavor.memory_mb as u64);
    }
    let disk = flavor.disk_gb(spec.is_bfv) as u64;
    if !r.asks("DISK_GB") && disk > 0 {
        r.resources.insert("DISK_GB".into(), disk);
    }
    if specs.features.mem_encryption {
        r.resources.insert("MEM_ENCRYPTION_CONTEXT".into(), 1);
    }
    for (class, n) in &specs.features.pmem {
        r.resources.insert(class.clone(), *n);
    }
    r.required_traits
        .extend(specs.features.traits.iter().cloned());
    r.resources.retain(|_, n| *n > 0);
    for g in &mut r.groups {
        g.resources.retain(|_, n| *n > 0);
    }
    r.groups.retain(|g| !g.is_empty());
    r
}
