//! kforge-manifest: the HF kernel project model (backends, versions, variant names, arch intersections).

pub mod variant;
mod version;

pub use variant::{
    ArchError, Compute, Variant, VariantParseError, cuda_archs, ops_name, rocm_archs,
};
pub use version::{Version, VersionError};

use std::fmt;
use std::str::FromStr;

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
