//! Nova 34's `PciPassthroughFilter` (`pci_passthrough_filter.py`): a host passes a request
//! with PCI requests when its free devices can serve them all (`PciDeviceStats
//! .support_requests`, `domain::numa::pci`), NUMA placement aside (that is
//! `NUMATopologyFilter`'s). A host with no pool passes no such request. Per allocation
//! candidate: a host passes when one of its candidates does (docs/numa-pci.md).

use super::numa_topology::{candidate_mappings, Judged};
use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Keeps hosts whose PCI device pools can serve the request's PCI requests.
pub struct PciPassthroughFilter {
    pack: bool,
}

impl PciPassthroughFilter {
    pub const NAME: &'static str = "PciPassthroughFilter";

    pub fn new(config: &crate::policy::config::PolicyConfig) -> Self {
        PciPassthroughFilter {
            pack: config.packing_host_numa_cells_allocation_strategy,
        }
    }
}

impl Filter for PciPassthroughFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.numa_pci.as_deref().is_some_and(|n| !n.pci.is_empty())
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let Some(np) = req.numa_pci.as_deref().filter(|n| !n.pci.is_empty()) else {
            return true;
        };
        let judged = Judged::new(host, req, np, self.pack);
        let mappings = candidate_mappings(host, req);
        // Nova's filters keep the candidates that pass (`filter_candidates`): on a host of
        // several candidates this one judges those the NUMA fit leaves, as when it runs after
        // `NUMATopologyFilter` (either order keeps the same hosts); a flat host's one
        // candidate is judged on its devices alone.
        let numa_too = mappings.len() > 1;
        mappings
            .iter()
            .any(|m| judged.pci_fits(m) && (!numa_too || judged.numa_fits(m)))
    }
}
