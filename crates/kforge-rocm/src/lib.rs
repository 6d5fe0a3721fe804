//! kforge-rocm: ROCm device-code compilation and code-object resource reports.
//!
//! Without a ROCm installation, the device code of every `backend = "rocm"` component is compiled for each
//! selected gfx arch with an upstream clang (`-x hip --cuda-device-only -nogpuinc -nogpulib`), written as a
//! plain amdgcn ELF code object, and inspected: per-kernel registers, LDS, scratch, spills and occupancy
//! from the code object's metadata note, and the matrix-core (MFMA) instructions from its disassembly.
//! Nothing is executed: there is no AMD GPU behind this.

mod codeobject;
mod disasm;
mod limits;
mod tools;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

pub use limits::{ArchLimits, arch_limits};
pub use tools::Tools;

/// Options of a device-only build.
#[derive(Debug, Clone, Default)]
pub struct DeviceOnlyOptions {
    /// Restrict to these gfx archs (each must be a supported ROCm arch); None: each component's `rocm-archs`.
    pub archs: Option<Vec<String>>,
    /// Code objects go to `<out_dir>/<gfx>/<component>.co`.
    pub out_dir: PathBuf,
}

/// One `backend = "rocm"` component, as the manifest describes it (paths relative to the project root).
#[derive(Debug, Clone, Default)]
pub struct Component {
    pub name: String,
    pub src: Vec<PathBuf>,
    pub include: Vec<PathBuf>,
    pub rocm_archs: Option<Vec<String>>,
    pub hip_flags: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RocmError {
    #[error(
        "no device compiler for ROCm: {detail}; run scripts/install-rocm-tools.sh (Debian clang-19, llvm-19, lld-19) or set KFORGE_HIP_CLANG and KFORGE_LLVM_OBJDUMP"
    )]
    ToolMissing { detail: String },
    #[error(
        "--archs {arch}: not a supported ROCm arch; expected one of {}",
        kforge_manifest::variant::ROCM_SUPPORTED_ARCHS.join(", ")
    )]
    UnknownArch { arch: String },
    #[error("[kernel.{component}] rocm-archs: {source}")]
    Archs {
        component: String,
        source: kforge_manifest::ArchError,
    },
    #[error(
        "[kernel.{component}] src {file}: .cu sources are converted by hipify, which needs the HIP headers of a ROCm installation; a device-only build compiles .hip sources only: port the file to .hip (kernels/fp8-gemm/gemm_rocm shows how) or build the full ROCm variant where a ROCm torch exists"
    )]
    CudaSource { component: String, file: PathBuf },
    #[error(
        "[kernel.{component}] src lists no .hip source (found: {found}); a ROCm component needs at least one .hip file"
    )]
    NoDeviceSource { component: String, found: String },
    #[error("[kernel.{component}] src {file}: no such file under the project root {root}")]
    MissingSource {
        component: String,
        file: PathBuf,
        root: PathBuf,
    },
    #[error("no rocm component to compile{detail}")]
    NothingToBuild { detail: String },
    #[error("compiling [kernel.{component}] for {arch} failed:\n  $ {command}\n{stderr}{hint}")]
    Compile {
        component: String,
        arch: String,
        command: String,
        stderr: String,
        hint: String,
    },
    #[error("{tool} failed on {path}: {stderr}")]
    Tool {
        tool: String,
        path: PathBuf,
        stderr: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a usable AMDGPU code object: {reason}")]
    CodeObject { path: PathBuf, reason: String },
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RocmError + '_ {
    move |source| RocmError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Resource usage of one kernel in a code object.
#[derive(Debug, Clone, Serialize)]
pub struct KernelReport {
    pub name: String,
    /// VGPRs per lane as the hardware allocates them (the unified file on gfx90a/gfx942: arch + AGPR).
    pub vgprs: u32,
    /// Architected VGPRs (`vgprs - agprs`; rounded up to 4 when AGPRs are used).
    pub arch_vgprs: u32,
    pub agprs: u32,
    /// SGPRs including the VCC/FLAT_SCRATCH/XNACK_MASK reserve.
    pub sgprs: u32,
    pub lds_bytes: u32,
    /// Private (scratch) bytes per work-item.
    pub scratch_bytes: u32,
    pub vgpr_spills: u32,
    pub sgpr_spills: u32,
    pub dynamic_stack: bool,
    /// The kernel's maximum flat workgroup size (its launch bound; 1024 when not declared).
    pub workgroup_size: u32,
    pub wavefront_size: u32,
    /// Estimated resident waves per SIMD (None for archs whose limits kforge does not model).
    pub occupancy: Option<u32>,
    /// Matrix-core instructions in the kernel's code, by mnemonic.
    pub mfma: BTreeMap<String, u32>,
    /// Spills, scratch use or a limit exceeded: things a reviewer should look at.
    pub warnings: Vec<String>,
}

/// One written code object.
#[derive(Debug, Clone, Serialize)]
pub struct CodeObjectReport {
    pub component: String,
    pub arch: String,
    pub path: PathBuf,
    /// The target the code object declares, e.g. `amdgcn-amd-amdhsa--gfx942`.
    pub target: Option<String>,
    pub limits: Option<ArchLimits>,
    pub kernels: Vec<KernelReport>,
}

/// Result of a device-only build.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceReport {
    /// `clang --version`'s first line.
    pub compiler: String,
    /// Always false: device-only builds are compiled and disassembled, never run.
    pub executed: bool,
    pub code_objects: Vec<CodeObjectReport>,
    /// Non-device sources left out (host `.cpp` files and headers), per component.
    pub skipped_sources: BTreeMap<String, Vec<PathBuf>>,
    /// Components with no arch left after `--archs` narrowed the selection.
    pub skipped_components: Vec<String>,
}

impl DeviceReport {
    pub fn warnings(&self) -> impl Iterator<Item = (&CodeObjectReport, &KernelReport, &String)> {
        self.code_objects.iter().flat_map(|co| {
            co.kernels
                .iter()
                .flat_map(move |k| k.warnings.iter().map(move |w| (co, k, w)))
        })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the report holds only plain data")
    }
}

impl fmt::Display for DeviceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "ROCm device code, compiled with {} (compiled and disassembled only, never executed here)",
            self.compiler
        )?;
        for co in &self.code_objects {
            writeln!(f, "{} {} -> {}", co.component, co.arch, co.path.display())?;
            for k in &co.kernels {
                let lim = |v: Option<u32>| v.map(|v| format!("/{v}")).unwrap_or_default();
                writeln!(
                    f,
                    "  {}: VGPR {}{} (arch {}, AGPR {}), SGPR {}{}, LDS {}{} B, scratch {} B, spills {} VGPR / {} SGPR, occupancy {} waves/SIMD (workgroup {})",
                    k.name,
                    k.vgprs,
                    lim(co.limits.map(|l| l.max_vgprs)),
                    k.arch_vgprs,
                    k.agprs,
                    k.sgprs,
                    lim(co.limits.map(|l| l.max_sgprs)),
                    k.lds_bytes,
                    lim(co.limits.map(|l| l.max_lds_bytes)),
                    k.scratch_bytes,
                    k.vgpr_spills,
                    k.sgpr_spills,
                    k.occupancy.map_or("n/a".to_string(), |o| o.to_string()),
                    k.workgroup_size,
                )?;
                for (m, n) in &k.mfma {
                    writeln!(f, "    {m} x{n}")?;
                }
                for w in &k.warnings {
                    writeln!(f, "    warning: {w}")?;
                }
            }
        }
        for (component, files) in &self.skipped_sources {
            let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
            writeln!(
                f,
                "{component}: not device code, left out: {}",
                names.join(", ")
            )?;
        }
        for c in &self.skipped_components {
            writeln!(f, "{c}: no selected arch, skipped")?;
        }
        Ok(())
    }
}

/// Compile every `backend = "rocm"` component of a project; see [`compile_components`].
pub fn compile_device_only(
    project: &kforge_manifest::Project,
    options: &DeviceOnlyOptions,
) -> Result<DeviceReport, RocmError> {
    let build_toml = project.root.join("build.toml");
    if !project
        .manifest
        .general
        .backends
        .contains(&kforge_manifest::Backend::Rocm)
    {
        return Err(RocmError::NothingToBuild {
            detail: format!(
                ": {} [general] backends does not list \"rocm\"",
                build_toml.display()
            ),
        });
    }
    let components: Vec<Component> = project
        .manifest
        .kernels_for(kforge_manifest::Backend::Rocm)
        .map(|(name, k)| Component {
            name: name.clone(),
            src: k.src.clone(),
            include: k.include.clone(),
            rocm_archs: k.rocm_archs.clone(),
            hip_flags: k.hip_flags.clone(),
        })
        .collect();
    if components.is_empty() {
        return Err(RocmError::NothingToBuild {
            detail: format!(
                ": {} has no [kernel.*] with backend = \"rocm\"",
                build_toml.display()
            ),
        });
    }
    let tools = Tools::detect()?;
    compile_components(&tools, &project.root, &components, options)
}

/// The archs one component is compiled for: the exact intersection of its `rocm-archs` with the supported
/// list, narrowed to `requested` when given.
fn select_archs(
    component: &Component,
    requested: Option<&[String]>,
) -> Result<Vec<String>, RocmError> {
    let own = kforge_manifest::rocm_archs(component.rocm_archs.as_deref()).map_err(|source| {
        RocmError::Archs {
            component: component.name.clone(),
            source,
        }
    })?;
    Ok(match requested {
        Some(req) => own.into_iter().filter(|a| req.contains(a)).collect(),
        None => own,
    })
}

/// Compile each component for each selected arch into `<out_dir>/<gfx>/<component>.co` and inspect it.
pub fn compile_components(
    tools: &Tools,
    root: &Path,
    components: &[Component],
    options: &DeviceOnlyOptions,
) -> Result<DeviceReport, RocmError> {
    if let Some(req) = &options.archs {
        let supported = kforge_manifest::rocm_archs(None).unwrap_or_default();
        if let Some(bad) = req.iter().find(|a| !supported.contains(a)) {
            return Err(RocmError::UnknownArch { arch: bad.clone() });
        }
    }
    let mut report = DeviceReport {
        compiler: tools.version.clone(),
        executed: false,
        code_objects: Vec::new(),
        skipped_sources: BTreeMap::new(),
        skipped_components: Vec::new(),
    };
    for component in components {
        let sources = classify_sources(root, component)?;
        if !sources.other.is_empty() {
            report
                .skipped_sources
                .insert(component.name.clone(), sources.other.clone());
        }
        let archs = select_archs(component, options.archs.as_deref())?;
        if archs.is_empty() {
            report.skipped_components.push(component.name.clone());
            continue;
        }
        for arch in archs {
            let dir = options.out_dir.join(&arch);
            std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
            let out = dir.join(format!("{}.co", component.name));
            compile_one(tools, root, component, &sources.hip, &arch, &out)?;
            let mut co = inspect_code_object(tools, &out, &arch)?;
            co.component = component.name.clone();
            report.code_objects.push(co);
        }
    }
    if report.code_objects.is_empty() {
        return Err(RocmError::NothingToBuild {
            detail: format!(
                ": no component targets any of the requested archs {}",
                options.archs.as_deref().unwrap_or_default().join(", ")
            ),
        });
    }
    Ok(report)
}

struct Sources {
    hip: Vec<PathBuf>,
    other: Vec<PathBuf>,
}

fn classify_sources(root: &Path, component: &Component) -> Result<Sources, RocmError> {
    let mut hip = Vec::new();
    let mut other = Vec::new();
    for rel in &component.src {
        if !root.join(rel).is_file() {
            return Err(RocmError::MissingSource {
                component: component.name.clone(),
                file: rel.clone(),
                root: root.to_path_buf(),
            });
        }
        match rel.extension().and_then(|e| e.to_str()) {
            Some("hip") => hip.push(root.join(rel)),
            Some("cu") => {
                return Err(RocmError::CudaSource {
                    component: component.name.clone(),
                    file: rel.clone(),
                });
            }
            _ => other.push(rel.clone()),
        }
    }
    if hip.is_empty() {
        let found: Vec<String> = other.iter().map(|p| p.display().to_string()).collect();
        return Err(RocmError::NoDeviceSource {
            component: component.name.clone(),
            found: if found.is_empty() {
                "nothing".into()
            } else {
                found.join(", ")
            },
        });
    }
    Ok(Sources { hip, other })
}

fn compile_one(
    tools: &Tools,
    root: &Path,
    component: &Component,
    hip: &[PathBuf],
    arch: &str,
    out: &Path,
) -> Result<(), RocmError> {
    // Written beside the target and renamed, so a failed or interrupted compile leaves no code object.
    let tmp = out.with_extension(format!("co.tmp{}", std::process::id()));
    let mut cmd = Command::new(&tools.clang);
    cmd.args(["-x", "hip"])
        .arg(format!("--offload-arch={arch}"))
        .args([
            "-nogpuinc",
            "-nogpulib",
            "--cuda-device-only",
            "--no-gpu-bundle-output",
            "-O3",
            "-std=c++17",
            "-DUSE_ROCM=1",
            "-DROCM_KERNEL",
        ]);
    for inc in &component.include {
        cmd.arg("-I").arg(root.join(inc));
    }
    cmd.args(&component.hip_flags);
    // Several translation units are linked into one code object as relocatable device code.
    if hip.len() > 1 {
        cmd.arg("-fgpu-rdc");
    }
    cmd.args(hip).arg("-o").arg(&tmp).current_dir(root);
    let command = tools::shell_words(&cmd);
    let output = cmd.output().map_err(io_err(&tools.clang))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        let hint = if stderr.contains("hip/hip_runtime.h") {
            "\nhint: device-only builds have no HIP headers (-nogpuinc); guard the include with __has_include and define the few device macros the kernel uses (kernels/fp8-gemm/gemm_rocm/hip_shim.h shows how)".to_string()
        } else {
            String::new()
        };
        return Err(RocmError::Compile {
            component: component.name.clone(),
            arch: arch.to_string(),
            command,
            stderr: tools::tail(&stderr, 6000),
            hint,
        });
    }
    std::fs::rename(&tmp, out).map_err(io_err(out))
}

/// Read a plain amdgcn code object: kernel resources from its metadata, MFMA instructions from its
/// disassembly, occupancy and limit checks for `arch`. `component` is left empty.
pub fn inspect_code_object(
    tools: &Tools,
    path: &Path,
    arch: &str,
) -> Result<CodeObjectReport, RocmError> {
    let data = std::fs::read(path).map_err(io_err(path))?;
    let meta = codeobject::read_metadata(path, &data)?;
    let listing = tools.disassemble(path, arch)?;
    let mfma = disasm::matrix_instructions(&listing);
    let limits = arch_limits(arch);
    let kernels = meta
        .kernels
        .iter()
        .map(|k| {
            let func = k.symbol.strip_suffix(".kd").unwrap_or(&k.symbol);
            kernel_report(k, limits, mfma.get(func).cloned().unwrap_or_default())
        })
        .collect();
    Ok(CodeObjectReport {
        component: String::new(),
        arch: arch.to_string(),
        path: path.to_path_buf(),
        target: meta.target,
        limits,
        kernels,
    })
}

fn kernel_report(
    k: &codeobject::KernelMeta,
    limits: Option<ArchLimits>,
    mfma: BTreeMap<String, u32>,
) -> KernelReport {
    let mut warnings = Vec::new();
    if k.vgpr_spill_count > 0 || k.sgpr_spill_count > 0 {
        warnings.push(format!(
            "register spills: {} VGPR, {} SGPR",
            k.vgpr_spill_count, k.sgpr_spill_count
        ));
    }
    if k.private_segment_fixed_size > 0 {
        warnings.push(format!(
            "uses {} B of scratch per work-item",
            k.private_segment_fixed_size
        ));
    }
    if k.uses_dynamic_stack {
        warnings.push("uses a dynamic stack (recursion or variable-size allocas)".into());
    }
    if let Some(l) = limits {
        for (what, have, max) in [
            ("VGPRs", k.vgpr_count, l.max_vgprs),
            ("SGPRs", k.sgpr_count, l.max_sgprs),
            ("LDS bytes", k.group_segment_fixed_size, l.max_lds_bytes),
        ] {
            if have > max {
                warnings.push(format!("{what} {have} exceed the limit {max}"));
            }
        }
    }
    KernelReport {
        name: k.name.clone(),
        vgprs: k.vgpr_count,
        arch_vgprs: k.vgpr_count.saturating_sub(k.agpr_count),
        agprs: k.agpr_count,
        sgprs: k.sgpr_count,
        lds_bytes: k.group_segment_fixed_size,
        scratch_bytes: k.private_segment_fixed_size,
        vgpr_spills: k.vgpr_spill_count,
        sgpr_spills: k.sgpr_spill_count,
        dynamic_stack: k.uses_dynamic_stack,
        workgroup_size: k.max_flat_workgroup_size,
        wavefront_size: k.wavefront_size,
        occupancy: limits.map(|l| {
            l.occupancy(
                k.vgpr_count,
                k.sgpr_count,
                k.group_segment_fixed_size,
                k.max_flat_workgroup_size,
                k.wavefront_size,
            )
        }),
        mfma,
        warnings,
    }
}
