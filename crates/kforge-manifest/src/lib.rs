//! kforge-manifest: the HF kernel project model: `build.toml` (editions 3-5) with file:line:col
//! diagnostics, layout rules, variant names, arch intersections, project id and `metadata.json`.

pub mod diag;
mod layout;
pub mod metadata;
pub mod migrate;
mod model;
mod parse;
pub mod plan;
mod project;
pub mod scaffold;
pub mod variant;
mod version;

pub use diag::{Problem, ProjectError};
pub use model::{
    BackendDepends, CudaGeneral, DEPENDS, Framework, GENERAL_PYTHON_DEPENDS, General, Hub,
    KERNEL_BACKENDS, Kernel, KernelDepend, Manifest, StableAbi, TorchExt, TorchNoarch,
    backend_python_depends,
};
pub use parse::{did_you_mean, valid_git_url, valid_kernel_project_name};
pub use project::{Project, load_project, parse_manifest, project_id};
pub use variant::{
    ArchError, Compute, Variant, VariantParseError, cuda_archs, ops_name, rocm_archs, variant_cpu,
};
pub use version::{Version, VersionError};

use std::fmt;
use std::io::Write as _;
use std::path::Path;
use std::str::FromStr;

/// Write `bytes` to `path` through a temporary file in the same directory and a rename, so that
/// readers see the old or the new content, never a half-written file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.kforge-tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A compute backend as spelled in `general.backends` and `[kernel.*].backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    Cann,
    Cpu,
    Cuda,
    Metal,
    Neuron,
    Rocm,
    Tpu,
    Xpu,
}

impl Backend {
    pub const ALL: [Backend; 8] = [
        Backend::Cann,
        Backend::Cpu,
        Backend::Cuda,
        Backend::Metal,
        Backend::Neuron,
        Backend::Rocm,
        Backend::Tpu,
        Backend::Xpu,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cann => "cann",
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Metal => "metal",
            Backend::Neuron => "neuron",
            Backend::Rocm => "rocm",
            Backend::Tpu => "tpu",
            Backend::Xpu => "xpu",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Backend::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| format!("unknown backend `{s}`"))
    }
}

impl serde::Serialize for Backend {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Backend {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
