//! Nova 34's `PciPassthroughFilter` (`pci_passthrough_filter.py`): a host passes a request
//! with PCI requests when its free devices can serve them all (`PciDeviceStats
//! .support_requests`, `domain::numa::pci`), NUMA placement aside (that is
//! `NUMATopologyFilter`'s). A host with no pool passes no such request.

use super::numa_topology::{after_earlier, candidate_mapping};
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
        let (numa, pools) = after_earlier(host, req, np, self.pack);
        let mapping = candidate_mapping(host, req);
        pools.supports(&np.pci, Some(&mapping), &[], numa.as_ref())
    }
}
