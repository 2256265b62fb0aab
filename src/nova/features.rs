//! Hardware features of flavor and image that Nova turns into traits and resources:
//! `ResourceRequest._translate_{vtpm,mem_encryption,pci_numa_affinity_policy,secure_boot,
//! maxphysaddr,stateless_firmware,vpmems}_request` and the request filters that read only the flavor
//! and the image (`packed_virtqueue_filter`, `ephemeral_encryption_filter`,
//! `virtio_sound_filter`, `tpm_secret_security_filter`, `require_image_type_support`,
//! `transform_image_metadata`). Trait names are those of os-traits 3.9.0 (Nova 34's pin).

use super::error::{CodecError, Result};
use super::settings::Settings;
use serde::Serialize;
use std::collections::BTreeMap;

/// `MemEncryptionModel` and the CPU trait each model requires (`MemEncryptionConfig*.
/// required_trait`, `nova/virt/hardware.py`); the first is Nova's default model.
const MEM_ENCRYPTION_MODELS: [(&str, &str); 4] = [
    ("amd-sev", "HW_CPU_X86_AMD_SEV"),
    ("amd-sev-es", "HW_CPU_X86_AMD_SEV_ES"),
    ("amd-sev-snp", "HW_CPU_X86_AMD_SEV_SNP"),
    ("intel-tdx", "HW_CPU_X86_INTEL_TDX"),
];

const SOUND_MODELS: [&str; 8] = [
    "sb16", "es1370", "pcspk", "ac97", "ich6", "ich9", "usb", "virtio",
];

/// `COMPUTE_IMAGE_TYPE_*` of os-traits, by disk format.
const IMAGE_TYPES: [&str; 11] = [
    "AKI", "AMI", "ARI", "ISO", "QCOW2", "RAW", "VDI", "VHD", "VHDX", "VMDK", "PLOOP",
];

/// `transform_image_metadata`'s properties, trait prefixes and the suffixes os-traits has.
const PREFILTER: [(&str, &str, &[&str]); 7] = [
    ("hw_cdrom_bus", "COMPUTE_STORAGE_BUS", &STORAGE_BUSES),
    ("hw_disk_bus", "COMPUTE_STORAGE_BUS", &STORAGE_BUSES),
    (
        "hw_video_model",
        "COMPUTE_GRAPHICS_MODEL",
        &[
            "BOCHS", "CIRRUS", "GOP", "NONE", "QXL", "VGA", "VIRTIO", "VMVGA", "XEN",
        ],
    ),
    (
        "hw_vif_model",
        "COMPUTE_NET_VIF_MODEL",
        &[
            "E1000",
            "E1000E",
            "LAN9118",
            "NETFRONT",
            "NE2K_PCI",
            "PCNET",
            "RTL8139",
            "SPAPR_VLAN",
            "SRIOV",
            "VIRTIO",
            "VMXNET",
            "VMXNET3",
            "IGB",
        ],
    ),
    (
        "hw_architecture",
        "HW_ARCH",
        &[
            "ALPHA",
            "ARMV6",
            "ARMV7",
            "ARMV7B",
            "AARCH64",
            "CRIS",
            "I686",
            "IA64",
            "LM32",
            "M68K",
            "MICROBLAZE",
            "MICROBLAZEEL",
            "MIPS",
            "MIPSEL",
            "MIPS64",
            "MIPS64EL",
            "OPENRISC",
            "PARISC",
            "PARISC64",
            "PPC",
            "PPCLE",
            "PPC64",
            "PPC64LE",
            "PPCEMB",
            "S390",
            "S390X",
            "SH4",
            "SH4EB",
            "SPARC",
            "SPARC64",
            "UNICORE32",
            "X86_64",
            "XTENSA",
            "XTENSAEB",
        ],
    ),
    (
        "hw_emulation_architecture",
        "COMPUTE_ARCH",
        &["AARCH64", "PPC64LE", "MIPSEL", "S390X", "RISCV64", "X86_64"],
    ),
    (
        "hw_viommu_model",
        "COMPUTE_VIOMMU",
        &["MODEL_INTEL", "MODEL_SMMUV3", "MODEL_VIRTIO", "MODEL_AUTO"],
    ),
];
const STORAGE_BUSES: [&str; 9] = [
    "FDC", "IDE", "LXC", "SATA", "SCSI", "USB", "VIRTIO", "UML", "XEN",
];

/// What the hardware features of a flavor and its image ask.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Features {
    /// Traits required of the unnumbered group: vTPM, memory encryption's model, PCI NUMA
    /// `socket`, secure boot, maxphysaddr, stateless firmware.
    pub traits: Vec<String>,
    /// Memory encryption asked (`hw:mem_encryption` / `hw_mem_encryption`): the
    /// unnumbered group then asks one `MEM_ENCRYPTION_CONTEXT`.
    pub mem_encryption: bool,
    /// `hw:pmem` namespaces: `CUSTOM_PMEM_NAMESPACE_<label>` → count.
    pub pmem: BTreeMap<String, u64>,
    /// Root-provider traits of the request filters that read flavor and image only:
    /// packed virtqueue, ephemeral encryption, virtio sound, TPM secret security.
    pub root_traits: Vec<String>,
    /// `COMPUTE_IMAGE_TYPE_<disk_format>` when os-traits has it.
    pub image_type_trait: Option<String>,
    /// The traits of `transform_image_metadata`; `None` when one of them is not an
    /// os-traits trait (Nova then adds none).
    pub image_metadata_traits: Option<Vec<String>>,
    /// `accel:device_profile`: its groups come in `requested_resources`; the request
    /// filters ask the root for `COMPUTE_ACCELERATORS`.
    pub device_profile: Option<String>,
}

impl Features {
    /// Reads and checks the feature settings of `s`.
    pub fn parse(s: &Settings<'_>) -> Result<Self> {
        let mut f = Features::default();
        let vtpm = vtpm(s)?;
        if let Some((version, model)) = &vtpm {
            f.traits.push(format!(
                "COMPUTE_SECURITY_TPM_{}",
                if model == "tpm-crb" { "CRB" } else { "TIS" }
            ));
            f.traits.push(format!(
                "COMPUTE_SECURITY_TPM_{}",
                version.replace('.', "_")
            ));
        }
        if let Some(model_trait) = mem_encryption(s)? {
            f.mem_encryption = true;
            f.traits.push(model_trait.into());
        }
        let security = s.spec_enum("hw:tpm_secret_security", &["user", "host", "deployment"])?;
        if vtpm.is_some() {
            let level = security.unwrap_or("user").to_ascii_uppercase();
            f.root_traits
                .push(format!("COMPUTE_SECURITY_TPM_SECRET_SECURITY_{level}"));
        }
        if pci_numa_policy(s)?.as_deref() == Some("socket") {
            f.traits.push("COMPUTE_SOCKET_PCI_NUMA_AFFINITY".into());
        }
        if s.unique("os", "secure_boot", &["required", "disabled", "optional"])?
            .as_deref()
            == Some("required")
        {
            f.traits.push("COMPUTE_SECURITY_UEFI_SECURE_BOOT".into());
        }
        match s
            .unique("hw", "maxphysaddr_mode", &["passthrough", "emulate"])?
            .as_deref()
        {
            Some("passthrough") => f.traits.push("COMPUTE_ADDRESS_SPACE_PASSTHROUGH".into()),
            Some("emulate") => f.traits.push("COMPUTE_ADDRESS_SPACE_EMULATED".into()),
            _ => {}
        }
        let firmware = s.prop_enum("hw_firmware_type", &["uefi", "bios"])?;
        let stateless = s.prop_bool("hw_firmware_stateless")?;
        if stateless == Some(true) && firmware.as_deref() == Some("uefi") {
            f.traits.push("COMPUTE_SECURITY_STATELESS_FIRMWARE".into());
        }
        f.pmem = pmem(s);
        if s.agreeing_bools("virtio_packed_ring")? {
            f.root_traits.push("COMPUTE_NET_VIRTIO_PACKED".into());
        }
        const FORMATS: [&str; 3] = ["plain", "luks", "luksv2"];
        if s.agreeing_bools("ephemeral_encryption")? {
            f.root_traits.push("COMPUTE_EPHEMERAL_ENCRYPTION".into());
            if let Some(format) = s.unique("hw", "ephemeral_encryption_format", &FORMATS)? {
                f.root_traits.push(format!(
                    "COMPUTE_EPHEMERAL_ENCRYPTION_{}",
                    format.to_ascii_uppercase()
                ));
            }
        } else {
            s.spec_enum("hw:ephemeral_encryption_format", &FORMATS)?;
            s.prop_enum("hw_ephemeral_encryption_format", &FORMATS)?;
        }
        if s.unique("hw", "sound_model", &SOUND_MODELS)?.as_deref() == Some("virtio") {
            f.root_traits.push("COMPUTE_SOUND_MODEL_VIRTIO".into());
        }
        f.image_type_trait = s
            .image
            .and_then(|i| i.disk_format.as_deref())
            .map(str::to_ascii_uppercase)
            .filter(|t| IMAGE_TYPES.contains(&t.as_str()))
            .map(|t| format!("COMPUTE_IMAGE_TYPE_{t}"));
        f.image_metadata_traits = image_metadata_traits(s);
        f.device_profile = s
            .spec("accel:device_profile")
            .filter(|p| !p.is_empty())
            .map(str::to_string);
        Ok(f)
    }
}

/// `get_vtpm_constraint`: (version, model), model defaulting to `tpm-tis`.
fn vtpm(s: &Settings<'_>) -> Result<Option<(String, String)>> {
    const MODELS: [&str; 2] = ["tpm-tis", "tpm-crb"];
    let Some(version) = s.unique("hw", "tpm_version", &["1.2", "2.0"])? else {
        s.spec_enum("hw:tpm_model", &MODELS)?;
        s.prop_enum("hw_tpm_model", &MODELS)?;
        return Ok(None);
    };
    let model = s
        .unique("hw", "tpm_model", &MODELS)?
        .unwrap_or_else(|| "tpm-tis".into());
    if model == "tpm-crb" && version != "2.0" {
        return Err(CodecError::invalid(
            s.spec_path("hw:tpm_model"),
            "is tpm-crb, which needs TPM version 2.0",
        ));
    }
    Ok(Some((version, model)))
}

/// `get_mem_encryption_constraint`'s model, as the trait it requires, when flavor or image
/// asks for memory encryption (they must agree, and so must their models; `amd-sev` when
/// neither names one). Nova's API has already checked the firmware and machine type.
fn mem_encryption(s: &Settings<'_>) -> Result<Option<&'static str>> {
    if !s.agreeing_bools("mem_encryption")? {
        return Ok(None);
    }
    let names = MEM_ENCRYPTION_MODELS.map(|(name, _)| name);
    let model = s.unique("hw", "mem_encryption_model", &names)?;
    let model = model.as_deref().unwrap_or(MEM_ENCRYPTION_MODELS[0].0);
    Ok(MEM_ENCRYPTION_MODELS
        .iter()
        .find(|(name, _)| *name == model)
        .map(|(_, model_trait)| *model_trait))
}

/// `get_pci_numa_policy_constraint`: flavor and image must agree.
fn pci_numa_policy(s: &Settings<'_>) -> Result<Option<String>> {
    const POLICIES: [&str; 4] = ["required", "legacy", "preferred", "socket"];
    let flavor = s.spec_enum("hw:pci_numa_affinity_policy", &POLICIES)?;
    let image = s.prop_enum("hw_pci_numa_affinity_policy", &POLICIES)?;
    if let (Some(f), Some(i)) = (flavor, image.as_deref()) {
        if f != i {
            return Err(s.conflict(
                "hw:pci_numa_affinity_policy",
                f,
                "hw_pci_numa_affinity_policy",
                i,
            ));
        }
    }
    Ok(flavor.map(str::to_string).or(image))
}

/// `get_vpmems` + `orc.normalize_name("PMEM_NAMESPACE_" + label)`, counted.
fn pmem(s: &Settings<'_>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for label in s
        .spec("hw:pmem")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        let mut name = String::from("CUSTOM_");
        let mut in_run = false;
        for c in format!("PMEM_NAMESPACE_{label}").chars() {
            if c.is_ascii_alphanumeric() {
                name.push(c.to_ascii_uppercase());
                in_run = false;
            } else if !in_run {
                name.push('_');
                in_run = true;
            }
        }
        *out.entry(name).or_insert(0) += 1;
    }
    out
}

fn image_metadata_traits(s: &Settings<'_>) -> Option<Vec<String>> {
    let mut traits = Vec::new();
    for (key, prefix, known) in PREFILTER {
        if let Some(value) = s.prop(key) {
            let suffix = value.replace('-', "_").to_uppercase();
            if !known.contains(&suffix.as_str()) {
                return None;
            }
            traits.push(format!("{prefix}_{suffix}"));
        }
    }
    Some(traits)
}
