//! Vectors of Nova 34's `nova/tests/unit/virt/test_hardware.py` (`VirtNUMAHostTopologyTestCase`,
//! `CPUPinningCellTestCase`); the whole of `numa_fit_instance_to_host` is compared with
//! Nova's own on generated cases in tests/numa_pci.rs.

use super::*;
use crate::domain::numa::{InstanceCell, Pages};

fn host_cell(id: i64, pcpus: &[u32], siblings: &[&[u32]], memory: i64) -> HostCell {
    HostCell {
        id,
        cpuset: CpuSet::new(),
        pcpuset: pcpus.iter().copied().collect(),
        memory,
        siblings: siblings
            .iter()
            .map(|s| s.iter().copied().collect())
            .collect(),
        mempages: vec![Pages {
            size_kb: 4,
            total: memory * 256,
            used: 0,
            reserved: 0,
        }],
        ..HostCell::default()
    }
}

fn pinned_cell(cpus: &[u32], memory: i64, thread: Option<ThreadPolicy>) -> InstanceCell {
    InstanceCell {
        pcpuset: cpus.iter().copied().collect(),
        memory,
        cpu_policy: Some(CpuAllocation::Dedicated),
        cpu_thread_policy: thread,
        ..InstanceCell::default()
    }
}

fn fit(host: &HostCell, inst: &InstanceCell) -> Option<InstanceCell> {
    let topology = HostNuma {
        cells: vec![host.clone()],
    };
    let request = InstanceNuma {
        cells: vec![inst.clone()],
        emulator_threads_policy: None,
    };
    fit_instance(&topology, &request, None, PciFit::default(), false).map(|t| t.cells[0].clone())
}

fn pins(cell: &InstanceCell) -> Vec<u32> {
    cell.cpu_pinning.values().copied().collect()
}

#[test]
fn pinning_follows_the_thread_policies() {
    // test_get_pinning_inst_too_large_cpu: 5 vCPUs on 4 host CPUs.
    let host = host_cell(0, &[0, 1, 2, 3], &[&[0], &[1], &[2], &[3]], 2048);
    assert!(fit(&host, &pinned_cell(&[0, 1, 2, 3, 4], 512, None)).is_none());
    // test_get_pinning_host_siblings_fit: 4 vCPUs on 2 cores of 2 threads, siblings first.
    let smt = host_cell(0, &[0, 1, 2, 3], &[&[0, 1], &[2, 3]], 2048);
    assert_eq!(
        pins(&fit(&smt, &pinned_cell(&[0, 1, 2, 3], 512, None)).unwrap()),
        [0, 1, 2, 3]
    );
    // require: needs SMT; isolate: a whole core per vCPU (legacy host, pcpuset = cpuset).
    let flat = host_cell(0, &[0, 1, 2, 3], &[&[0], &[1], &[2], &[3]], 2048);
    assert!(fit(
        &flat,
        &pinned_cell(&[0, 1], 512, Some(ThreadPolicy::Require))
    )
    .is_none());
    let mut legacy = smt.clone();
    legacy.cpuset = legacy.pcpuset.clone();
    let isolated = fit(
        &legacy,
        &pinned_cell(&[0, 1], 512, Some(ThreadPolicy::Isolate)),
    )
    .unwrap();
    assert_eq!(pins(&isolated), [0, 2]);
    assert!(fit(
        &legacy,
        &pinned_cell(&[0, 1, 2], 512, Some(ThreadPolicy::Isolate))
    )
    .is_none());
    // isolate on a host with SMT and a separate dedicated set: bug #1889633, no fit.
    assert!(fit(&smt, &pinned_cell(&[0], 512, Some(ThreadPolicy::Isolate))).is_none());
    // A pinned CPU is no longer free.
    let mut busy = smt.clone();
    busy.pinned_cpus = CpuSet::from([0, 1, 2]);
    assert!(fit(&busy, &pinned_cell(&[0, 1], 512, None)).is_none());
    assert_eq!(
        pins(&fit(&busy, &pinned_cell(&[0], 512, None)).unwrap()),
        [3]
    );
}

#[test]
fn memory_pages_and_limits_bound_a_cell() {
    let mut host = host_cell(0, &[], &[], 1024);
    host.cpuset = CpuSet::from([0, 1]);
    host.mempages.push(Pages {
        size_kb: 2048,
        total: 128,
        used: 0,
        reserved: 0,
    });
    let shared = |memory, pagesize| InstanceCell {
        cpuset: CpuSet::from([0, 1]),
        memory,
        pagesize,
        ..InstanceCell::default()
    };
    // Large pages: 256 MiB fits in 128 × 2 MiB, 512 MiB does not; small pages overcommit.
    assert_eq!(
        fit(&host, &shared(256, Some(MEMPAGES_LARGE)))
            .unwrap()
            .pagesize,
        Some(2048)
    );
    assert!(fit(&host, &shared(512, Some(MEMPAGES_LARGE))).is_none());
    assert_eq!(
        fit(&host, &shared(512, Some(MEMPAGES_ANY)))
            .unwrap()
            .pagesize,
        Some(4)
    );
    assert!(
        fit(&host, &shared(512, Some(1_048_576))).is_none(),
        "no 1 GiB pages"
    );
    // Limits: 2 more shared CPUs on 2 CPUs with 1 used exceed ratio 1.0, not 2.0.
    host.cpu_usage = 1;
    let numa = HostNuma { cells: vec![host] };
    let inst = InstanceNuma {
        cells: vec![shared(256, None)],
        emulator_threads_policy: None,
    };
    let limits = |cpu| NumaLimits {
        cpu_allocation_ratio: cpu,
        ram_allocation_ratio: 1.0,
        network_metadata: None,
    };
    assert!(fit_instance(&numa, &inst, Some(&limits(1.0)), PciFit::default(), false).is_none());
    let fitted = fit_instance(&numa, &inst, Some(&limits(2.0)), PciFit::default(), false).unwrap();
    // And the usage it adds.
    let after = add_usage(&numa, &fitted);
    assert_eq!(
        (after.cells[0].cpu_usage, after.cells[0].memory_usage),
        (3, 256)
    );
    assert_eq!(after.cells[0].mempages[0].used, 256 * 256);
}
