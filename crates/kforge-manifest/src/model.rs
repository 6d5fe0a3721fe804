//! The `build.toml` model. Editions 3 and 4 are normalized into the edition-5 shape.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{Backend, Version};

/// A parsed and validated `build.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// 3, 4 or 5, as read (3 also stands for the older legacy formats without `edition`).
    pub edition: u8,
    pub general: General,
    pub framework: Framework,
    /// `[kernel.<name>]`, sorted by name.
    pub kernels: BTreeMap<String, Kernel>,
}

impl Manifest {
    /// The `[torch]` table, when the project is an AOT torch extension.
    pub fn torch(&self) -> Option<&TorchExt> {
        match &self.framework {
            Framework::Torch(t) => Some(t),
            _ => None,
        }
    }

    /// The kernels built for `backend`, in name order.
    pub fn kernels_for(&self, backend: Backend) -> impl Iterator<Item = (&String, &Kernel)> {
        self.kernels
            .iter()
            .filter(move |(_, k)| k.backend == backend)
    }

    /// Backends of `general.backends` that no `[kernel.*]` compiles: HF builds them as noarch `torch-<backend>`.
    pub fn noarch_backends(&self) -> Vec<Backend> {
        self.general
            .backends
            .iter()
            .copied()
            .filter(|b| {
                matches!(self.framework, Framework::TorchNoarch(_))
                    || self.kernels_for(*b).next().is_none()
            })
            .collect()
    }
}

/// `[general]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct General {
    /// Kernel name, `^[a-z][-a-z0-9]*[a-z0-9]$`.
    pub name: String,
    /// Kernel major version (required from edition 4; `update-build` defaults it to 1).
    pub version: Option<u64>,
    pub license: Option<String>,
    pub upstream: Option<String>,
    pub source: Option<String>,
    pub backends: Vec<Backend>,
    pub python_depends: Vec<String>,
    pub kernel_depends: Vec<KernelDepend>,
    pub hub: Option<Hub>,
    pub cuda: Option<CudaGeneral>,
    pub xpu: Option<BackendDepends>,
    pub neuron: Option<BackendDepends>,
    pub tpu: Option<BackendDepends>,
}

impl General {
    /// The Python package name: `name` with `-` replaced by `_`.
    pub fn python_name(&self) -> String {
        self.name.replace('-', "_")
    }

    /// General plus backend-specific Python dependencies, as written to `metadata.json`.
    pub fn python_depends_for(&self, backend: Backend) -> Vec<String> {
        let mut out = self.python_depends.clone();
        if let Some(t) = self.backend_depends(backend) {
            out.extend(t.python_depends.iter().cloned());
        }
        out
    }

    /// General plus backend-specific kernel dependencies, as written to `metadata.json`.
    pub fn kernel_depends_for(&self, backend: Backend) -> Vec<KernelDepend> {
        let mut out = self.kernel_depends.clone();
        if let Some(t) = self.backend_depends(backend) {
            out.extend(t.kernel_depends.iter().cloned());
        }
        out
    }

    fn backend_depends(&self, backend: Backend) -> Option<&BackendDepends> {
        match backend {
            Backend::Cuda => self.cuda.as_ref().map(|c| &c.depends),
            Backend::Xpu => self.xpu.as_ref(),
            Backend::Neuron => self.neuron.as_ref(),
            Backend::Tpu => self.tpu.as_ref(),
            _ => None,
        }
    }
}

/// `[general.hub]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hub {
    pub repo_id: Option<String>,
    pub branch: Option<String>,
}

/// `[general.cuda]`: the toolkit range and CUDA-only dependencies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CudaGeneral {
    pub minver: Option<Version>,
    pub maxver: Option<Version>,
    pub depends: BackendDepends,
}

/// Backend-specific `python-depends` / `kernel-depends` (`[general.xpu]`, `[general.neuron]`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BackendDepends {
    pub python_depends: Vec<String>,
    pub kernel_depends: Vec<KernelDepend>,
}

/// One `kernel-depends` entry: `{ repo-id, version }` or `{ repo-id, revision }` (exactly one of the two).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct KernelDepend {
    pub repo_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// The framework table (exactly one per project).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framework {
    /// `[torch]`: an AOT-compiled torch extension, python package in `torch-ext/<python_name>/`.
    Torch(TorchExt),
    /// `[torch-noarch]`: JIT or pure-Python kernels.
    TorchNoarch(TorchNoarch),
    /// `[tvm-ffi]`: python package in `tvm-ffi-ext/<python_name>/`.
    TvmFfi(TorchExt),
}

impl Framework {
    /// The directory holding the binding and the python package (`torch-ext` or `tvm-ffi-ext`).
    pub fn ext_dir(&self) -> &'static str {
        match self {
            Framework::TvmFfi(_) => "tvm-ffi-ext",
            _ => "torch-ext",
        }
    }

    /// The table name as written in `build.toml`.
    pub fn table_name(&self) -> &'static str {
        match self {
            Framework::Torch(_) => "torch",
            Framework::TorchNoarch(_) => "torch-noarch",
            Framework::TvmFfi(_) => "tvm-ffi",
        }
    }

    /// Extensions of files shipped from the python package directory.
    pub fn pyext(&self) -> &[String] {
        match self {
            Framework::Torch(t) | Framework::TvmFfi(t) => &t.pyext,
            Framework::TorchNoarch(n) => &n.pyext,
        }
    }
}

/// `[torch]` / `[tvm-ffi]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchExt {
    /// Binding sources and headers, relative to the project root.
    pub src: Vec<PathBuf>,
    /// Include directories, relative to the project root.
    pub include: Vec<PathBuf>,
    /// Defaults to `["py", "pyi"]`.
    pub pyext: Vec<String>,
    pub minver: Option<Version>,
    pub maxver: Option<Version>,
    pub cxx_flags: Vec<String>,
    /// `[torch] stable-abi` (torch only).
    pub stable_abi: Option<StableAbi>,
}

impl Default for TorchExt {
    fn default() -> Self {
        TorchExt {
            src: Vec::new(),
            include: Vec::new(),
            pyext: default_pyext(),
            minver: None,
            maxver: None,
            cxx_flags: Vec::new(),
            stable_abi: None,
        }
    }
}

pub(crate) fn default_pyext() -> Vec<String> {
    vec!["py".to_string(), "pyi".to_string()]
}

/// `stable-abi = "2.11"` or `[torch.stable-abi] cuda = "2.11"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StableAbi {
    All(Version),
    PerBackend(BTreeMap<Backend, Version>),
}

impl StableAbi {
    /// The stable-ABI torch version for `backend`, if that backend builds against the stable ABI.
    pub fn for_backend(&self, backend: Backend) -> Option<&Version> {
        match self {
            StableAbi::All(v) => Some(v),
            StableAbi::PerBackend(m) => m.get(&backend),
        }
    }
}

/// `[torch-noarch]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchNoarch {
    pub pyext: Vec<String>,
    /// Written to `metadata.json` `backend.archs` for cuda.
    pub cuda_capabilities: Option<Vec<String>>,
    /// Written to `metadata.json` `backend.archs` for rocm.
    pub rocm_archs: Option<Vec<String>>,
}

impl Default for TorchNoarch {
    fn default() -> Self {
        TorchNoarch {
            pyext: default_pyext(),
            cuda_capabilities: None,
            rocm_archs: None,
        }
    }
}

/// `[kernel.<name>]`: one compiled component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    pub backend: Backend,
    /// `torch`, `cutlass_3_6`, ... (see [`DEPENDS`]).
    pub depends: Vec<String>,
    /// Sources and headers, relative to the project root.
    pub src: Vec<PathBuf>,
    pub include: Vec<PathBuf>,
    pub cxx_flags: Vec<String>,
    /// cuda: requested capabilities, `None` = the toolkit's default table.
    pub cuda_capabilities: Option<Vec<String>>,
    /// cuda: nvcc flags for `.cu` files.
    pub cuda_flags: Vec<String>,
    /// cuda: skip this component when the toolkit is older.
    pub cuda_minver: Option<Version>,
    /// rocm: requested archs, `None` = every supported arch.
    pub rocm_archs: Option<Vec<String>>,
    /// rocm: flags for `.cu`/`.hip` sources.
    pub hip_flags: Vec<String>,
    /// xpu: flags for SYCL sources.
    pub sycl_flags: Vec<String>,
}

impl Kernel {
    pub fn new(backend: Backend) -> Self {
        Kernel {
            backend,
            depends: Vec::new(),
            src: Vec::new(),
            include: Vec::new(),
            cxx_flags: Vec::new(),
            cuda_capabilities: None,
            cuda_flags: Vec::new(),
            cuda_minver: None,
            rocm_archs: None,
            hip_flags: Vec::new(),
            sycl_flags: Vec::new(),
        }
    }
}

/// Every accepted `[kernel.*] depends` value.
pub const DEPENDS: [&str; 11] = [
    "torch",
    "cutlass_2_10",
    "cutlass_3_5",
    "cutlass_3_6",
    "cutlass_3_8",
    "cutlass_3_9",
    "cutlass_4_0",
    "cutlass_4_4",
    "cutlass_4_5",
    "sycl_tla",
    "metal-cpp",
];

/// Backends a `[kernel.*]` may name (the compiled ones).
pub const KERNEL_BACKENDS: [Backend; 5] = [
    Backend::Cpu,
    Backend::Cuda,
    Backend::Metal,
    Backend::Rocm,
    Backend::Xpu,
];

/// Accepted `python-depends` names: general, then per backend (kernels-data `python_dependencies.json`).
pub const GENERAL_PYTHON_DEPENDS: [&str; 3] = ["einops", "helion", "tvm-ffi"];

pub fn backend_python_depends(backend: Backend) -> &'static [&'static str] {
    match backend {
        Backend::Cuda => &["nvidia-cutlass-dsl"],
        Backend::Xpu => &["onednn"],
        Backend::Neuron => &["nki"],
        _ => &[],
    }
}
