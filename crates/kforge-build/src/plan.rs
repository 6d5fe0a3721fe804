//! Project × build sets → the variants to build, each with its compile units.

use std::path::{Path, PathBuf};

use kforge_manifest::{
    Backend, Framework, Kernel, Project, Variant, Version, cuda_archs, ops_name,
};
use kforge_toolchain::{BuildSet, build_sets};

use crate::error::{BuildError, io_err};

/// How a source file is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// g++
    Cxx,
    /// nvcc
    Cuda,
}

/// One source file of one component, compiled into one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// Relative to the project root.
    pub source: PathBuf,
    pub lang: Lang,
    /// `torch` for binding sources, else the `[kernel.<name>]` name.
    pub component: String,
    /// Include directories relative to the project root.
    pub includes: Vec<PathBuf>,
    /// `cxx-flags` for C++ sources, `cuda-flags` for CUDA sources.
    pub flags: Vec<String>,
    /// CUDA capabilities after the loose intersection (CUDA sources only).
    pub archs: Vec<String>,
}

/// What a variant is made of.
#[derive(Debug, Clone)]
pub enum VariantKind {
    /// A compiled extension from one build set.
    Arch { set: BuildSet, units: Vec<Unit> },
    /// Python files only (`torch-<backend>`).
    Noarch,
}

/// One `build/<variant>/` to produce.
#[derive(Debug, Clone)]
pub struct VariantPlan {
    pub name: String,
    pub backend: Backend,
    /// `_<python_name>_<backend>_<id>`.
    pub ops_name: String,
    /// `metadata.json` `backend.archs`.
    pub archs: Option<Vec<String>>,
    pub kind: VariantKind,
    /// The python package directory (`torch-ext/<python_name>`).
    pub package_dir: PathBuf,
    /// Files shipped from it, relative to it, sorted.
    pub python_files: Vec<PathBuf>,
}

/// Every variant to build, plus notes about what was left out and why.
#[derive(Debug, Clone)]
pub struct Plan {
    pub id: String,
    pub variants: Vec<VariantPlan>,
    pub notes: Vec<String>,
}

/// What the user asked for on the command line.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these backends (each must be in `general.backends`); None = all.
    pub backends: Option<Vec<Backend>>,
    /// Only the variant with this directory name.
    pub variant: Option<String>,
}

const CXX_EXTS: [&str; 4] = ["cpp", "cc", "cxx", "c++"];
const HEADER_EXTS: [&str; 8] = ["h", "hh", "hpp", "hxx", "cuh", "inl", "inc", "tcc"];

/// Decide the variants of `project` for the build sets this kforge knows.
pub fn plan(project: &Project, id: &str, selection: &Selection) -> Result<Plan, BuildError> {
    let manifest = &project.manifest;
    let general = &manifest.general;
    let mut backends = general.backends.clone();
    if let Some(wanted) = &selection.backends {
        for b in wanted {
            if !general.backends.contains(b) {
                return Err(BuildError::Selection {
                    argument: format!("--backend {b}"),
                    why: format!(
                        "not in general.backends of {} ({}); add it there or pick one of those",
                        project.build_toml().display(),
                        list(&general.backends)
                    ),
                });
            }
        }
        backends.retain(|b| wanted.contains(b));
    }
    let ext = match &manifest.framework {
        Framework::Torch(t) => Some(t),
        Framework::TorchNoarch(_) => None,
        Framework::TvmFfi(_) => {
            return Err(BuildError::Unsupported {
                what: "the [tvm-ffi] framework".into(),
                fix: "build this project with HF kernel-builder, or use [torch]".into(),
            });
        }
    };
    let python_name = general.python_name();
    let package_dir = project
        .root
        .join(manifest.framework.ext_dir())
        .join(&python_name);
    let python_files = python_files(&package_dir, manifest.framework.pyext())?;
    let noarch = manifest.noarch_backends();
    let sets = build_sets()?;
    let mut variants = Vec::new();
    let mut notes = Vec::new();
    for backend in backends {
        let ops = ops_name(&python_name, backend, id);
        if noarch.contains(&backend) {
            let archs = match &manifest.framework {
                Framework::TorchNoarch(n) if backend == Backend::Cuda => {
                    n.cuda_capabilities.clone()
                }
                Framework::TorchNoarch(n) if backend == Backend::Rocm => n.rocm_archs.clone(),
                _ => None,
            };
            variants.push(VariantPlan {
                name: Variant::Noarch { backend }.to_string(),
                backend,
                ops_name: ops,
                archs,
                kind: VariantKind::Noarch,
                package_dir: package_dir.clone(),
                python_files: python_files.clone(),
            });
            continue;
        }
        let Some(ext) = ext else { continue };
        if ext
            .stable_abi
            .as_ref()
            .and_then(|s| s.for_backend(backend))
            .is_some()
        {
            notes.push(format!(
                "{backend}: skipped: [torch] stable-abi builds are not supported by kforge yet"
            ));
            continue;
        }
        let matching: Vec<&BuildSet> = sets
            .iter()
            .filter(|s| s.backend == backend.as_str())
            .collect();
        if matching.is_empty() {
            notes.push(no_build_set_note(backend));
            continue;
        }
        for set in matching {
            let torch: Version = parse_version(&set.torch)?;
            if ext.minver.as_ref().is_some_and(|min| &torch < min)
                || ext.maxver.as_ref().is_some_and(|max| &torch > max)
            {
                notes.push(format!(
                    "{}: skipped: torch {torch} is outside [torch] minver/maxver",
                    set.variant_name()
                ));
                continue;
            }
            let mut units = Vec::new();
            for src in &ext.src {
                if let Some(unit) = unit_for(
                    src,
                    "torch",
                    Backend::Cpu,
                    &ext.include,
                    &ext.cxx_flags,
                    &[],
                    &[],
                )? {
                    units.push(unit);
                }
            }
            let mut archs: Vec<String> = Vec::new();
            for (name, kernel) in manifest.kernels_for(backend) {
                check_depends(name, kernel)?;
                let mut kernel_archs = Vec::new();
                if backend == Backend::Cuda {
                    let cuda = parse_version(set.cuda.as_deref().unwrap_or("0"))?;
                    if kernel.cuda_minver.as_ref().is_some_and(|min| &cuda < min) {
                        notes.push(format!(
                            "{}: [kernel.{name}] left out: cuda-minver is above CUDA {cuda}",
                            set.variant_name()
                        ));
                        continue;
                    }
                    kernel_archs = cuda_archs(kernel.cuda_capabilities.as_deref(), &cuda).map_err(
                        |source| BuildError::Arch {
                            kernel: name.clone(),
                            source,
                        },
                    )?;
                    archs.extend(kernel_archs.iter().cloned());
                }
                for src in &kernel.src {
                    if let Some(unit) = unit_for(
                        src,
                        name,
                        backend,
                        &kernel.include,
                        &kernel.cxx_flags,
                        &kernel.cuda_flags,
                        &kernel_archs,
                    )? {
                        units.push(unit);
                    }
                }
            }
            // Fixed compile and link order, independent of how build.toml lists things.
            units.sort_by(|a, b| (&a.component, &a.source).cmp(&(&b.component, &b.source)));
            variants.push(VariantPlan {
                name: set.variant_name(),
                backend,
                ops_name: ops.clone(),
                archs: (backend == Backend::Cuda).then_some(archs),
                kind: VariantKind::Arch {
                    set: set.clone(),
                    units,
                },
                package_dir: package_dir.clone(),
                python_files: python_files.clone(),
            });
        }
    }
    if let Some(name) = &selection.variant {
        let available: Vec<String> = variants.iter().map(|v| v.name.clone()).collect();
        variants.retain(|v| &v.name == name);
        if variants.is_empty() {
            return Err(BuildError::Selection {
                argument: format!("--variant {name}"),
                why: format!(
                    "this project has no such variant here; available: {}",
                    if available.is_empty() {
                        "none".into()
                    } else {
                        available.join(", ")
                    }
                ),
            });
        }
    }
    Ok(Plan {
        id: id.to_string(),
        variants,
        notes,
    })
}

fn list(backends: &[Backend]) -> String {
    backends
        .iter()
        .map(|b| b.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn no_build_set_note(backend: Backend) -> String {
    let why = match backend {
        Backend::Rocm => {
            "a ROCm variant needs a ROCm build of torch, which is not available here; \
             `kforge build --backend rocm --device-only` compiles and checks the device code"
        }
        Backend::Metal => "Metal variants are built on macOS with Xcode",
        Backend::Xpu => "XPU variants need Intel oneAPI (icpx) and an XPU torch",
        _ => "kforge has no toolchain for it",
    };
    format!("{backend}: skipped: no build set for {backend} ({why})")
}

fn parse_version(text: &str) -> Result<Version, BuildError> {
    text.parse().map_err(|e| {
        BuildError::Toolchain(kforge_toolchain::ToolchainError::Data(format!(
            "buildsets.toml: {e}"
        )))
    })
}

fn check_depends(name: &str, kernel: &Kernel) -> Result<(), BuildError> {
    match kernel.depends.iter().find(|d| d.as_str() != "torch") {
        Some(dep) => Err(BuildError::Unsupported {
            what: format!("[kernel.{name}] depends = [\"{dep}\"]"),
            fix: format!("vendor {dep}'s headers into the project and list them in `include`"),
        }),
        None => Ok(()),
    }
}

fn unit_for(
    src: &Path,
    component: &str,
    backend: Backend,
    includes: &[PathBuf],
    cxx_flags: &[String],
    cuda_flags: &[String],
    archs: &[String],
) -> Result<Option<Unit>, BuildError> {
    let ext = src
        .extension()
        .map(|e| e.to_string_lossy().to_string())
        .unwrap_or_default();
    let table = if component == "torch" {
        "[torch]".to_string()
    } else {
        format!("[kernel.{component}]")
    };
    let (lang, flags) = if CXX_EXTS.contains(&ext.as_str()) {
        (Lang::Cxx, cxx_flags)
    } else if ext == "cu" && backend == Backend::Cuda {
        (Lang::Cuda, cuda_flags)
    } else if HEADER_EXTS.contains(&ext.as_str()) {
        return Ok(None);
    } else {
        let why = if ext == "cu" {
            "a .cu file is compiled only in a [kernel.*] with backend = \"cuda\"".to_string()
        } else {
            format!(
                "cannot compile a `.{ext}` file for {backend}; expected .cpp/.cc/.cxx (or .cu for cuda) and headers"
            )
        };
        return Err(BuildError::Source {
            table,
            file: src.to_path_buf(),
            why,
        });
    };
    Ok(Some(Unit {
        source: src.to_path_buf(),
        lang,
        component: component.to_string(),
        includes: includes.to_vec(),
        flags: flags.to_vec(),
        archs: if lang == Lang::Cuda {
            archs.to_vec()
        } else {
            Vec::new()
        },
    }))
}

/// Files with an extension in `pyext` under the package dir (recursive), minus bytecode and a stale `_ops.py`.
fn python_files(package_dir: &Path, pyext: &[String]) -> Result<Vec<PathBuf>, BuildError> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = package_dir.join(&rel);
        for entry in std::fs::read_dir(&dir).map_err(io_err(&dir))? {
            let entry = entry.map_err(io_err(&dir))?;
            let name = entry.file_name();
            let path = rel.join(&name);
            let ft = entry.file_type().map_err(io_err(entry.path()))?;
            if ft.is_dir() {
                if name != "__pycache__" {
                    stack.push(path);
                }
            } else if path != Path::new("_ops.py")
                && path
                    .extension()
                    .is_some_and(|e| pyext.iter().any(|p| e == p.as_str()))
            {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}
