//! Assembling `build/<variant>/` in a staging directory next to it (metadata with digest and
//! provenance, ABI check) and moving it into place with a rename.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use kforge_abi::{Options, Policy, Report, Severity};
use kforge_manifest::Project;
use kforge_manifest::metadata::{
    BuilderProvenance, KernelProvenance, Metadata, Provenance, digest_dir, verify_digest,
};

use crate::actions::{ActionCache, key_of};
use crate::error::{BuildError, io_err};
use crate::exec::{Built, abi_lib_dir};
use crate::generate::{noarch_ops_py, ops_py};
use crate::plan::{Plan, VariantKind, VariantPlan};
use crate::{BuildOptions, VariantReport};

/// What happened to `build/<variant>/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written (new or changed).
    Installed,
    /// Already identical (same metadata and digest): left untouched.
    Unchanged,
}

const STAGING: &str = ".kforge-tmp";
const MANYLINUX: &str = "manylinux_2_28";

pub struct Installer<'a> {
    project: &'a Project,
    plan: &'a Plan,
    out_dir: PathBuf,
    staging: PathBuf,
    options: &'a BuildOptions,
    provenance: Provenance,
}

impl<'a> Installer<'a> {
    pub fn new(
        project: &'a Project,
        plan: &'a Plan,
        out_dir: &Path,
        options: &'a BuildOptions,
    ) -> Result<Self, BuildError> {
        fs::create_dir_all(out_dir).map_err(io_err(out_dir))?;
        let staging_root = out_dir.join(STAGING);
        remove_stale_staging(&staging_root);
        Ok(Installer {
            project,
            plan,
            out_dir: out_dir.to_path_buf(),
            staging: staging_root.join(std::process::id().to_string()),
            options,
            provenance: provenance(&project.root, &plan.id),
        })
    }

    pub fn install(
        &self,
        variant: &VariantPlan,
        built: Option<Built>,
    ) -> Result<VariantReport, BuildError> {
        let stage = self.staging.join(&variant.name);
        let result = self.install_staged(variant, built.as_ref(), &stage);
        let _ = fs::remove_dir_all(&stage);
        let _ = fs::remove_dir(&self.staging);
        let _ = fs::remove_dir(self.out_dir.join(STAGING));
        result
    }

    fn install_staged(
        &self,
        variant: &VariantPlan,
        built: Option<&Built>,
        stage: &Path,
    ) -> Result<VariantReport, BuildError> {
        if stage.exists() {
            fs::remove_dir_all(stage).map_err(io_err(stage))?;
        }
        fs::create_dir_all(stage).map_err(io_err(stage))?;
        let ops_text = match (&variant.kind, built) {
            (VariantKind::Arch { .. }, Some(built)) => {
                let so = stage.join(format!("{}.abi3.so", variant.ops_name));
                copy_file(&built.library, &so, 0o755)?;
                ops_py(&variant.ops_name)
            }
            _ => noarch_ops_py(&self.project.manifest.general.python_name(), &self.plan.id),
        };
        write_file(&stage.join("_ops.py"), ops_text.as_bytes())?;
        for rel in &variant.python_files {
            copy_file(&variant.package_dir.join(rel), &stage.join(rel), 0o644)?;
        }
        let digest = digest_dir(stage).map_err(io_err(stage))?;
        let mut metadata = Metadata::for_variant(
            &self.project.manifest,
            &variant.ops_name,
            variant.backend,
            variant.archs.clone(),
        );
        metadata.digest = Some(digest.clone());
        metadata.provenance = Some(self.provenance.clone());
        let json = metadata.to_json();
        write_file(&stage.join("metadata.json"), json.as_bytes())?;

        let abi_findings = match built {
            Some(built) => self.check_abi(variant, built, stage)?,
            None => Vec::new(),
        };

        let dest = self.out_dir.join(&variant.name);
        let unchanged = fs::read_to_string(dest.join("metadata.json")).is_ok_and(|t| t == json)
            && verify_digest(&dest, &digest).is_ok_and(|m| m.is_empty());
        if !unchanged {
            replace_dir(stage, &dest, &self.staging)?;
        }
        let (run, cached) = built.map_or((0, 0), |b| (b.actions_run, b.actions_cached));
        Ok(VariantReport {
            name: variant.name.clone(),
            dir: dest,
            outcome: if unchanged {
                Outcome::Unchanged
            } else {
                Outcome::Installed
            },
            actions_run: run,
            actions_cached: cached,
            abi_findings,
        })
    }

    /// manylinux_2_28 + abi3 (3.9) + every undefined symbol resolvable by the target torch (and CUDA
    /// runtime). A library that passed once is remembered by its hash.
    fn check_abi(
        &self,
        variant: &VariantPlan,
        built: &Built,
        stage: &Path,
    ) -> Result<Vec<String>, BuildError> {
        let cache = &self.options.cache;
        let actions = ActionCache::new(cache.actions_dir());
        let so_hash = actions
            .file_hash(&built.library)
            .map_err(io_err(&built.library))?;
        let key = key_of(&[
            ("abi", &so_hash),
            ("policy", MANYLINUX),
            ("python-abi", "3.9"),
            ("toolchain", &built.toolchain.id),
        ]);
        if actions.has_marker(&key) {
            return Ok(Vec::new());
        }
        let mut policy = Policy::manylinux(MANYLINUX).expect("manylinux_2_28 is a known policy");
        policy.python_abi = Some((3, 9));
        policy.torch_lib = Some(abi_lib_dir(cache, &built.toolchain, variant.backend)?);
        let report =
            kforge_abi::check_variant_dir(stage, &Options { policy }).map_err(|source| {
                BuildError::AbiRead {
                    variant: variant.name.clone(),
                    source,
                }
            })?;
        let lines = render(&report, stage);
        if report.has_errors() {
            if !self.options.abi_warn_only {
                return Err(BuildError::Abi {
                    variant: variant.name.clone(),
                    report: lines.join("\n"),
                });
            }
        } else if lines.is_empty() {
            actions.set_marker(&key)?;
        }
        Ok(lines)
    }
}

fn render(report: &Report, stage: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for file in &report.files {
        let name = file
            .path
            .strip_prefix(stage)
            .unwrap_or(&file.path)
            .display();
        for f in &file.findings {
            // Libraries torch itself needs at run time (libcupti, ...) are not part of a CPU build set.
            if f.code == "library-not-found" {
                tracing::debug!("{name}: {}", f.message);
                continue;
            }
            let level = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            let mut line = format!("  {name}: {level} [{}] {}", f.code, f.message);
            if let Some(h) = &f.fix_hint {
                line.push_str(&format!("\n    hint: {h}"));
            }
            lines.push(line);
        }
    }
    lines
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The builder, and the kernel commit when the id comes from git (the project dir is committed).
fn provenance(root: &Path, id: &str) -> Provenance {
    let prefix = git(root, &["rev-parse", "--show-prefix"]).unwrap_or_default();
    let tree = git(
        root,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("HEAD:{prefix}"),
        ],
    );
    let git_based = tree.is_some_and(|t| t.len() >= 7 && id.starts_with(&t[..7]));
    let kernel = git_based
        .then(|| git(root, &["rev-parse", "--verify", "--quiet", "HEAD"]))
        .flatten()
        .filter(|c| c.len() == 40 || c.len() == 64)
        .map(|commit| KernelProvenance {
            commit,
            dirty: id.ends_with("_dirty"),
        });
    Provenance {
        kernel_builder: Some(BuilderProvenance {
            version: format!("kforge {}", env!("CARGO_PKG_VERSION")),
            commit: None,
            dirty: None,
        }),
        kernel,
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), BuildError> {
    fs::write(path, bytes).map_err(io_err(path))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).map_err(io_err(path))
}

fn copy_file(from: &Path, to: &Path, mode: u32) -> Result<(), BuildError> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    fs::copy(from, to).map_err(io_err(from))?;
    fs::set_permissions(to, fs::Permissions::from_mode(mode)).map_err(io_err(to))
}

/// Put `stage` at `dest`: the old directory is renamed away first, so `dest` is always either the old
/// or the new complete variant (or briefly absent), never a mix.
fn replace_dir(stage: &Path, dest: &Path, staging: &Path) -> Result<(), BuildError> {
    if dest.exists() {
        let old = staging.join(format!(
            "old-{}",
            dest.file_name().unwrap_or_default().to_string_lossy()
        ));
        let _ = fs::remove_dir_all(&old);
        fs::rename(dest, &old).map_err(io_err(dest))?;
        fs::rename(stage, dest).map_err(io_err(dest))?;
        fs::remove_dir_all(&old).map_err(io_err(&old))?;
    } else {
        fs::rename(stage, dest).map_err(io_err(dest))?;
    }
    Ok(())
}

/// Staging directories of builds that no longer run (killed, Ctrl-C) are removed.
fn remove_stale_staging(root: &Path) {
    let Ok(rd) = fs::read_dir(root) else { return };
    for e in rd.flatten() {
        let alive = e
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|pid| {
                pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists()
            });
        if !alive {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}
