//! Project × build sets → the variants to build, each with its compile units.

use std::path::{Path, PathBuf};

use kforge_manifest::plan::{BuildTarget, PlannedVariant};
use kforge_manifest::{Backend, Compute, Framework, Kernel, Project, Version, ops_name};
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

/// Decide the variants of `project` for the build sets this kforge knows. Which variants exist and
/// which archs each component gets is the manifest's planning (shared with `kforge variants`); this
/// adds the sources to compile.
pub fn plan(project: &Project, id: &str, selection: &Selection) -> Result<Plan, BuildError> {
    let manifest = &project.manifest;
    let general = &manifest.general;
    if let Some(wanted) = &selection.backends
        && let Some(b) = wanted.iter().find(|b| !general.backends.contains(b))
    {
        return Err(BuildError::Selection {
            argument: format!("--backend {b}"),
            why: format!(
                "not in general.backends of {} ({}); add it there or pick one of those",
                project.build_toml().display(),
                list(&general.backends)
            ),
        });
    }
    let wanted = |b: Backend| selection.backends.as_ref().is_none_or(|w| w.contains(&b));
    if let Framework::TvmFfi(_) = manifest.framework {
        return Err(BuildError::Unsupported {
            what: "the [tvm-ffi] framework".into(),
            fix: "build this project with HF kernel-builder, or use [torch]".into(),
        });
    }
    let python_name = general.python_name();
    let package_dir = project
        .root
        .join(manifest.framework.ext_dir())
        .join(&python_name);
    let python_files = python_files(&package_dir, manifest.framework.pyext())?;
    let sets = build_sets()?;
    let targets = sets.iter().map(target).collect::<Result<Vec<_>, _>>()?;
    let planned = kforge_manifest::plan::plan(manifest, &targets);

    let mut notes = Vec::new();
    for u in planned.unplanned.iter().filter(|u| wanted(u.backend)) {
        if sets.iter().any(|s| s.backend == u.backend.as_str()) {
            notes.push(format!("{}: skipped: {}", u.backend, u.reason));
        } else {
            notes.push(no_build_set_note(u.backend));
        }
    }
    let mut variants = Vec::new();
    for pv in planned.variants.iter().filter(|v| wanted(v.backend)) {
        if let Some(error) = &pv.error {
            return Err(BuildError::Selection {
                argument: format!("{} in build.toml", pv.variant),
                why: error.clone(),
            });
        }
        for s in &pv.skipped {
            notes.push(format!(
                "{}: [kernel.{}] left out: {}",
                pv.variant, s.component, s.reason
            ));
        }
        let kind = match pv.kind {
            "noarch" => VariantKind::Noarch,
            "arch" => {
                let set = sets
                    .iter()
                    .find(|s| s.variant_name() == pv.variant)
                    .expect("planned from these build sets");
                VariantKind::Arch {
                    set: set.clone(),
                    units: units(project, pv)?,
                }
            }
            other => {
                notes.push(format!(
                    "{}: skipped: {other} variants are not built by kforge yet",
                    pv.variant
                ));
                continue;
            }
        };
        variants.push(VariantPlan {
            name: pv.variant.clone(),
            backend: pv.backend,
            ops_name: ops_name(&python_name, pv.backend, id),
            archs: pv.archs.clone(),
            kind,
            package_dir: package_dir.clone(),
            python_files: python_files.clone(),
        });
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

/// The manifest's view of a build set.
fn target(set: &BuildSet) -> Result<BuildTarget, BuildError> {
    let compute = match &set.cuda {
        Some(cuda) => Compute::Cuda(parse_version(cuda)?),
        None => Compute::Cpu,
    };
    let (cpu, os) = set.platform.split_once('-').ok_or_else(|| {
        BuildError::Toolchain(kforge_toolchain::ToolchainError::Data(format!(
            "buildsets.toml: platform `{}` is not <cpu>-<os>",
            set.platform
        )))
    })?;
    Ok(BuildTarget {
        torch: parse_version(&set.torch)?,
        compute,
        cpu: cpu.to_string(),
        os: os.to_string(),
        tvm_ffi: None,
    })
}

/// Binding sources plus the sources of every planned component, in a fixed order (component, path)
/// that does not depend on how build.toml lists them: it is also the link order.
fn units(project: &Project, pv: &PlannedVariant) -> Result<Vec<Unit>, BuildError> {
    let manifest = &project.manifest;
    let mut units = Vec::new();
    if let Some(ext) = manifest.torch() {
        for src in &ext.src {
            let flags = (ext.cxx_flags.as_slice(), &[][..]);
            if let Some(u) = unit_for(src, "torch", Backend::Cpu, &ext.include, flags, &[])? {
                units.push(u);
            }
        }
    }
    for c in &pv.components {
        let kernel = &manifest.kernels[&c.name];
        check_depends(&c.name, kernel)?;
        let archs = c.archs.clone().unwrap_or_default();
        let flags = (kernel.cxx_flags.as_slice(), kernel.cuda_flags.as_slice());
        for src in &kernel.src {
            if let Some(u) = unit_for(src, &c.name, pv.backend, &kernel.include, flags, &archs)? {
                units.push(u);
            }
        }
    }
    units.sort_by(|a, b| (&a.component, &a.source).cmp(&(&b.component, &b.source)));
    Ok(units)
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

/// `flags` = (cxx-flags, cuda-flags).
fn unit_for(
    src: &Path,
    component: &str,
    backend: Backend,
    includes: &[PathBuf],
    (cxx_flags, cuda_flags): (&[String], &[String]),
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

#[cfg(test)]
mod tests {
    use super::*;
    use kforge_manifest::parse_manifest;

    fn project(toml: &str) -> (tempfile::TempDir, Project) {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("torch-ext/demo");
        std::fs::create_dir_all(pkg.join("sub/__pycache__")).unwrap();
        for f in [
            "__init__.py",
            "layers.py",
            "_ops.py",
            "sub/x.pyi",
            "sub/__pycache__/y.py",
            "data.json",
        ] {
            std::fs::write(pkg.join(f), "").unwrap();
        }
        let file = dir.path().join("build.toml");
        let (manifest, _) = parse_manifest(toml, &file).unwrap();
        let root = dir.path().to_path_buf();
        (
            dir,
            Project {
                root,
                manifest,
                warnings: Vec::new(),
            },
        )
    }

    const DEMO: &str = r#"
[general]
name = "demo"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda", "rocm"]

[torch]
src = ["torch-ext/b.cpp", "torch-ext/b.h"]

[kernel.z_cpu]
backend = "cpu"
depends = ["torch"]
src = ["cpu/k.cpp"]
cxx-flags = ["-fopenmp"]

[kernel.a_cuda]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["8.0", "9.0a"]
cuda-flags = ["-lineinfo"]
src = ["cuda/k.cu", "cuda/k.cuh", "cuda/host.cpp"]

[kernel.r]
backend = "rocm"
depends = ["torch"]
src = ["cuda/k.cu"]
"#;

    #[test]
    fn plans_cpu_and_cuda_with_sorted_units_and_notes_for_rocm() {
        let (_dir, p) = project(DEMO);
        let plan = plan(&p, "abc1234", &Selection::default()).unwrap();
        let names: Vec<&str> = plan.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "torch211-cxx11-cpu-x86_64-linux",
                "torch211-cxx11-cu130-x86_64-linux"
            ]
        );
        assert!(
            plan.notes
                .iter()
                .any(|n| n.starts_with("rocm: skipped: no build set")),
            "{:?}",
            plan.notes
        );

        let cuda = &plan.variants[1];
        assert_eq!(cuda.ops_name, "_demo_cuda_abc1234");
        assert_eq!(
            cuda.archs.as_deref(),
            Some(&["8.0".to_string(), "9.0a".to_string()][..])
        );
        let VariantKind::Arch { units, .. } = &cuda.kind else {
            panic!("arch")
        };
        let got: Vec<(String, Lang, Vec<String>, Vec<String>)> = units
            .iter()
            .map(|u| {
                (
                    u.source.display().to_string(),
                    u.lang,
                    u.flags.clone(),
                    u.archs.clone(),
                )
            })
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            [
                ("cuda/host.cpp".into(), Lang::Cxx, vec![], vec![]),
                (
                    "cuda/k.cu".into(),
                    Lang::Cuda,
                    s(&["-lineinfo"]),
                    s(&["8.0", "9.0a"])
                ),
                ("torch-ext/b.cpp".into(), Lang::Cxx, vec![], vec![]),
            ]
        );
        let VariantKind::Arch { units, .. } = &plan.variants[0].kind else {
            panic!("arch")
        };
        assert_eq!(units[1].flags, ["-fopenmp"]);
        assert_eq!(
            plan.variants[0].python_files,
            [
                PathBuf::from("__init__.py"),
                "layers.py".into(),
                "sub/x.pyi".into()
            ]
        );
    }

    #[test]
    fn selection_filters_and_rejects_unknown_choices() {
        let (_dir, p) = project(DEMO);
        let only_cpu = Selection {
            backends: Some(vec![Backend::Cpu]),
            variant: None,
        };
        let plan1 = plan(&p, "x", &only_cpu).unwrap();
        assert_eq!(plan1.variants.len(), 1);
        assert!(plan1.notes.is_empty(), "{:?}", plan1.notes);

        let bad = Selection {
            backends: Some(vec![Backend::Metal]),
            variant: None,
        };
        let err = plan(&p, "x", &bad).unwrap_err().to_string();
        assert!(
            err.starts_with("--backend metal: not in general.backends"),
            "{err}"
        );

        let variant = Selection {
            backends: None,
            variant: Some("torch211-cxx11-cu126-x86_64-linux".into()),
        };
        let err = plan(&p, "x", &variant).unwrap_err().to_string();
        assert!(
            err.contains(
                "available: torch211-cxx11-cpu-x86_64-linux, torch211-cxx11-cu130-x86_64-linux"
            ),
            "{err}"
        );
    }

    #[test]
    fn uncompilable_sources_and_dependencies_are_named() {
        let (_dir, p) = project(&DEMO.replace("cpu/k.cpp", "cpu/k.metal"));
        let err = plan(&p, "x", &Selection::default())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "[kernel.z_cpu] src in build.toml: cpu/k.metal: cannot compile a `.metal` file for cpu; expected .cpp/.cc/.cxx (or .cu for cuda) and headers"
        );
        let (_dir, p) = project(
            &DEMO
                .replace(
                    "cuda-flags = [\"-lineinfo\"]",
                    "depends = [\"torch\", \"cutlass_3_6\"]",
                )
                .replacen(
                    "depends = [\"torch\"]\ncuda-capabilities",
                    "cuda-capabilities",
                    1,
                ),
        );
        let err = plan(&p, "x", &Selection::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("[kernel.a_cuda] depends = [\"cutlass_3_6\"] is not supported"),
            "{err}"
        );
    }

    #[test]
    fn noarch_projects_plan_python_only_variants() {
        let toml = r#"
[general]
name = "demo"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[torch-noarch]
cuda_capabilities = ["9.0"]
"#;
        let (_dir, p) = project(toml);
        let plan = plan(&p, "abc1234", &Selection::default()).unwrap();
        let got: Vec<(&str, Option<Vec<String>>)> = plan
            .variants
            .iter()
            .map(|v| (v.name.as_str(), v.archs.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("torch-cpu", None),
                ("torch-cuda", Some(vec!["9.0".to_string()]))
            ]
        );
        assert!(matches!(plan.variants[0].kind, VariantKind::Noarch));
    }
}
