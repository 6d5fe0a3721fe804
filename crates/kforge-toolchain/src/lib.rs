//! Hermetic toolchains for kforge builds: pinned wheels fetched by name, verified, unpacked into a shared cache.

mod cache;
mod gxx;
mod python;
mod sets;

pub use cache::{Cache, CacheStats};
pub use gxx::{Gxx, detect_gxx};
pub use python::{PythonHeaders, detect_python};
pub use sets::{BuildSet, LockedPackage, build_sets, locked_package};

use std::path::PathBuf;

/// Everything wrong with obtaining a toolchain, each with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "could not download {package}=={version} with `{python} -m pip download`: {detail}\n  fix: check network access and that pip works in {python}, or set KFORGE_PYTHON to a python with pip"
    )]
    Download {
        package: String,
        version: String,
        python: String,
        detail: String,
    },
    #[error(
        "sha256 mismatch for {file}: expected {expected}, got {actual}\n  fix: the download is corrupt or the lock file in crates/kforge-toolchain/data/toolchain.lock is wrong; nothing was cached"
    )]
    HashMismatch {
        file: String,
        expected: String,
        actual: String,
    },
    #[error("cannot unpack {file}: {detail}")]
    Unpack { file: String, detail: String },
    #[error("package {0} is used by a build set but has no pin in toolchain.lock")]
    NotLocked(String),
    #[error(
        "no C++ compiler: `{command}` failed ({detail})\n  fix: install g++ (e.g. `apt-get install g++`) or set CXX"
    )]
    NoCompiler { command: String, detail: String },
    #[error(
        "no usable Python for headers: `{command}`: {detail}\n  fix: set KFORGE_PYTHON to a python (3.9+) that has its C headers"
    )]
    NoPython { command: String, detail: String },
    #[error("embedded toolchain data is invalid: {0}")]
    Data(String),
}

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ToolchainError {
    let path = path.into();
    move |source| ToolchainError::Io { path, source }
}

/// The directories a build uses for one build set, all inside the cache.
#[derive(Debug, Clone)]
pub struct Toolchain {
    pub set: BuildSet,
    /// `torch/include` and `torch/include/torch/csrc/api/include`.
    pub torch_includes: Vec<PathBuf>,
    pub torch_lib: PathBuf,
    /// Merged CUDA tree (bin/nvcc, include/, lib/, nvvm/), for CUDA sets.
    pub cuda_root: Option<PathBuf>,
    pub gxx: Gxx,
    pub python: PythonHeaders,
    /// The cache root everything above lives in (mapped away in outputs for reproducibility).
    pub cache_root: PathBuf,
    /// Hash of every pinned wheel and the host compiler: part of every action-cache key.
    pub id: String,
}

impl Toolchain {
    pub fn nvcc(&self) -> Option<PathBuf> {
        self.cuda_root.as_ref().map(|r| r.join("bin/nvcc"))
    }
}

/// Fetch (once) and assemble the toolchain of a build set.
pub fn prepare(cache: &Cache, set: &BuildSet) -> Result<Toolchain, ToolchainError> {
    // Asked once per process: a pyenv shim alone takes ~0.4 s per start.
    static HOST: std::sync::OnceLock<Result<(Gxx, PythonHeaders), String>> =
        std::sync::OnceLock::new();
    let (gxx, python) = match HOST.get_or_init(|| {
        let gxx = detect_gxx().map_err(|e| e.to_string())?;
        let python = detect_python().map_err(|e| e.to_string())?;
        Ok((gxx, python))
    }) {
        Ok(host) => host.clone(),
        Err(_) => {
            // Report the original, typed error.
            detect_gxx()?;
            detect_python()?;
            return Err(ToolchainError::Data("host detection failed".into()));
        }
    };
    let mut pins = Vec::new();
    for name in &set.packages {
        pins.push(locked_package(name)?);
    }
    let torch = pins
        .iter()
        .find(|p| p.name == "torch")
        .ok_or_else(|| ToolchainError::Data(format!("build set {} lacks torch", set.key())))?;
    let torch_dir = cache.ensure_unpacked(&[torch])?;
    let cuda: Vec<&LockedPackage> = pins.iter().filter(|p| p.name != "torch").collect();
    let cuda_root = if cuda.is_empty() {
        None
    } else {
        Some(cache.ensure_unpacked(&cuda)?)
    };
    let mut id_src = format!(
        "gxx={};python={}:{};",
        gxx.version_line,
        python.version,
        python.include.display()
    );
    for p in &pins {
        id_src.push_str(&format!("{}={}:{};", p.name, p.version, p.sha256));
    }
    let inc = torch_dir.join("torch/include");
    Ok(Toolchain {
        set: set.clone(),
        torch_includes: vec![inc.clone(), inc.join("torch/csrc/api/include")],
        torch_lib: torch_dir.join("torch/lib"),
        cuda_root,
        gxx,
        python,
        cache_root: cache.root().to_path_buf(),
        id: cache::sha256_hex(id_src.as_bytes())[..16].to_string(),
    })
}
