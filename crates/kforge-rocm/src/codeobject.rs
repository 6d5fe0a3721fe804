//! Reading an AMDGPU code object: the kernels' resource usage from the `NT_AMDGPU_METADATA` note.

use std::path::Path;

use object::elf;
use object::read::elf::{FileHeader, SectionHeader};
use serde::Deserialize;

use crate::RocmError;

/// ELF note type of the msgpack-encoded HSA metadata (code object v3 and later), owner "AMDGPU".
const NT_AMDGPU_METADATA: u32 = 32;

/// One kernel as described by the code object's metadata (names as in the AMDGPU HSA metadata spec).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct KernelMeta {
    #[serde(rename = ".name")]
    pub name: String,
    #[serde(rename = ".symbol")]
    pub symbol: String,
    /// Total VGPRs; on gfx90a/gfx942/gfx950 this is the unified file (arch VGPRs rounded to 4, plus AGPRs).
    #[serde(rename = ".vgpr_count")]
    pub vgpr_count: u32,
    #[serde(rename = ".agpr_count", default)]
    pub agpr_count: u32,
    /// SGPRs including the reserved VCC / FLAT_SCRATCH / XNACK_MASK registers.
    #[serde(rename = ".sgpr_count")]
    pub sgpr_count: u32,
    #[serde(rename = ".vgpr_spill_count", default)]
    pub vgpr_spill_count: u32,
    #[serde(rename = ".sgpr_spill_count", default)]
    pub sgpr_spill_count: u32,
    #[serde(rename = ".group_segment_fixed_size")]
    pub group_segment_fixed_size: u32,
    #[serde(rename = ".private_segment_fixed_size")]
    pub private_segment_fixed_size: u32,
    #[serde(rename = ".max_flat_workgroup_size")]
    pub max_flat_workgroup_size: u32,
    #[serde(rename = ".wavefront_size")]
    pub wavefront_size: u32,
    #[serde(rename = ".uses_dynamic_stack", default)]
    pub uses_dynamic_stack: bool,
}

#[derive(Debug, Deserialize)]
struct HsaMetadata {
    #[serde(rename = "amdhsa.target", default)]
    target: Option<String>,
    #[serde(rename = "amdhsa.kernels", default)]
    kernels: Vec<KernelMeta>,
}

/// What a code object says about itself.
#[derive(Debug, Clone)]
pub(crate) struct CodeObjectMeta {
    /// e.g. `amdgcn-amd-amdhsa--gfx942`.
    pub target: Option<String>,
    pub kernels: Vec<KernelMeta>,
}

fn bad(path: &Path, reason: impl Into<String>) -> RocmError {
    RocmError::CodeObject {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Parse the metadata note of a plain (unbundled) amdgcn ELF.
pub(crate) fn read_metadata(path: &Path, data: &[u8]) -> Result<CodeObjectMeta, RocmError> {
    let perr = |e: object::read::Error| bad(path, e.to_string());
    let header = elf::FileHeader64::<object::Endianness>::parse(data).map_err(perr)?;
    let endian = header.endian().map_err(perr)?;
    if header.e_machine(endian) != elf::EM_AMDGPU {
        return Err(bad(
            path,
            format!(
                "ELF machine is {}, expected EM_AMDGPU ({}); is this an offload bundle or a host object?",
                header.e_machine(endian),
                elf::EM_AMDGPU
            ),
        ));
    }
    let sections = header.sections(endian, data).map_err(perr)?;
    for section in sections.iter() {
        let Some(mut notes) = section.notes(endian, data).map_err(perr)? else {
            continue;
        };
        while let Some(note) = notes.next().map_err(perr)? {
            if note.name() != b"AMDGPU" || note.n_type(endian).0 != NT_AMDGPU_METADATA {
                continue;
            }
            let meta: HsaMetadata = rmp_serde::from_slice(note.desc()).map_err(|e| {
                bad(
                    path,
                    format!("AMDGPU metadata note is not valid msgpack: {e}"),
                )
            })?;
            return Ok(CodeObjectMeta {
                target: meta.target,
                kernels: meta.kernels,
            });
        }
    }
    Err(bad(
        path,
        "no NT_AMDGPU_METADATA note (code object v2 or a relocatable object?)",
    ))
}
