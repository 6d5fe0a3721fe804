//! Builds kernel projects into HF-compatible `build/<variant>/` directories from pinned toolchains.

mod actions;
mod commands;
mod error;
mod exec;
mod generate;
mod install;
mod plan;

pub use commands::gencode_flags;
pub use error::BuildError;
pub use generate::{REGISTRATION_H, SINGLE_THREADED_CPP, glibc_compat_h, noarch_ops_py, ops_py};
pub use install::Outcome;
pub use plan::{Lang, Plan, Selection, Unit, VariantKind, VariantPlan, plan};

/// ROCm device-only builds (`kforge build --backend rocm --device-only`): no ROCm torch is needed.
pub use kforge_rocm::{DeviceOnlyOptions, DeviceReport, RocmError, compile_device_only};

use std::path::PathBuf;

use kforge_manifest::{Project, project_id};
use kforge_toolchain::Cache;

/// How to build.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Parallel compile/link jobs (at least 1).
    pub jobs: usize,
    pub selection: Selection,
    /// Where `<variant>/` directories go; default `<project>/build`.
    pub out_dir: Option<PathBuf>,
    pub cache: Cache,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Install variants that fail the ABI check (reporting the findings) instead of failing.
    pub abi_warn_only: bool,
    /// The unique id in the ops name; default: [`project_id`].
    pub id: Option<String>,
}

impl BuildOptions {
    pub fn new(cache: Cache) -> Self {
        BuildOptions {
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            selection: Selection::default(),
            out_dir: None,
            cache,
            progress: false,
            abi_warn_only: false,
            id: None,
        }
    }
}

/// What one variant's build did.
#[derive(Debug, Clone)]
pub struct VariantReport {
    pub name: String,
    pub dir: PathBuf,
    pub outcome: Outcome,
    /// Compile and link actions run, and those answered by the action cache.
    pub actions_run: usize,
    pub actions_cached: usize,
    /// ABI findings that did not fail the build (warnings, or errors under --abi-warn-only).
    pub abi_findings: Vec<String>,
}

/// What a build did, plus notes on what was left out and why.
#[derive(Debug, Clone)]
pub struct BuildReport {
    pub id: String,
    pub variants: Vec<VariantReport>,
    pub notes: Vec<String>,
}

/// Build every selected variant of `project`. A variant is installed only when it is complete and
/// passed the ABI check; on any failure nothing of that variant is left behind.
pub fn build(project: &Project, options: &BuildOptions) -> Result<BuildReport, BuildError> {
    let id = options
        .id
        .clone()
        .unwrap_or_else(|| project_id(&project.root));
    let plan = plan::plan(project, &id, &options.selection)?;
    let out_dir = options
        .out_dir
        .clone()
        .unwrap_or_else(|| project.root.join("build"));
    let built = exec::compile_and_link(project, &plan, options)?;
    let installer = install::Installer::new(project, &plan, &out_dir, options)?;
    let mut variants = Vec::new();
    let mut errors = Vec::new();
    // One variant failing its ABI check does not keep the others from being installed.
    for (variant, artifact) in plan.variants.iter().zip(built) {
        match installer.install(variant, artifact) {
            Ok(report) => variants.push(report),
            Err(e) => errors.push(e),
        }
    }
    if errors.len() == 1 {
        return Err(errors.remove(0));
    }
    if !errors.is_empty() {
        return Err(BuildError::Many(errors));
    }
    Ok(BuildReport {
        id,
        variants,
        notes: plan.notes,
    })
}
