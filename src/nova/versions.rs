//! The major version of every Nova object this codec reads, checked on every object, nested
//! or not (Nova's `obj_from_primitive` refuses another major the same way).

use super::error::{CodecError, Result};

/// `nova_object.name` → the major version Nova 34 writes (and this codec reads).
const MAJORS: [(&str, u32); 38] = [
    ("Aggregate", 1),
    ("RequestSpec", 1),
    ("Flavor", 1),
    ("ImageMeta", 1),
    ("ImageMetaProps", 1),
    ("Destination", 1),
    ("CellMapping", 1),
    ("InstanceGroup", 1),
    ("SchedulerLimits", 1),
    ("RequestGroup", 1),
    ("RequestLevelParams", 1),
    ("InstancePCIRequests", 1),
    ("InstancePCIRequest", 1),
    ("InstanceNUMATopology", 1),
    ("InstanceNUMACell", 1),
    ("NetworkMetadata", 1),
    ("NUMATopology", 1),
    ("NUMACell", 1),
    ("NUMAPagesTopology", 1),
    ("PciDevicePoolList", 1),
    ("PciDevicePool", 1),
    ("Instance", 2),
    ("InstanceList", 2),
    ("FlavorPayload", 1),
    ("InstancePayload", 1),
    ("InstanceActionPayload", 1),
    ("InstanceCreatePayload", 1),
    ("InstanceActionRebuildPayload", 1),
    ("InstanceActionRescuePayload", 1),
    ("InstanceActionResizePrepPayload", 1),
    ("InstanceActionSnapshotPayload", 1),
    ("InstanceActionVolumePayload", 1),
    ("InstanceActionVolumeSwapPayload", 1),
    ("InstanceUpdatePayload", 2),
    ("ServiceStatusPayload", 1),
    ("MetricsPayload", 1),
    ("MetricPayload", 1),
    ("ComputeTaskPayload", 1),
];

/// The major this codec reads for `name`, when it reads that object at all.
pub fn known_major(name: &str) -> Option<u32> {
    MAJORS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
}

/// Refuses an object this codec does not know or whose major differs from the one it reads.
/// `path` locates the object in error messages.
pub fn check(name: &str, version: (u32, u32), path: &str) -> Result<()> {
    let Some(major) = known_major(name) else {
        return Err(CodecError::invalid(
            path,
            format!("is a {name} object, which this scheduler does not read"),
        ));
    };
    if version.0 == major {
        return Ok(());
    }
    Err(CodecError::UnsupportedVersion {
        path: format!("{path} ({name})"),
        version: format!("{}.{}", version.0, version.1),
        supported: format!("{major}.x"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_object_is_held_to_its_own_major() {
        let cases = [
            ("Flavor", (1, 2), true),
            ("Flavor", (9, 0), false),
            ("Instance", (2, 8), true),
            ("Instance", (1, 9), false),
            ("ImageMetaProps", (1, 44), true),
            ("Destination", (2, 0), false),
            ("Mystery", (1, 0), false),
        ];
        for (name, version, ok) in cases {
            assert_eq!(check(name, version, "x").is_ok(), ok, "{name} {version:?}");
        }
        let err = check("Flavor", (9, 0), "spec_obj.flavor").unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec_obj.flavor (Flavor): version 9.0 is not supported (expected 1.x)"
        );
    }
}
