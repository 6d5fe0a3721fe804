//! `kforge abi`: check built shared objects for manylinux/abi3/torch ABI problems.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use kforge_abi::{Options, Policy, Report, check_file, check_variant_dir};

#[derive(clap::Args)]
pub struct Args {
    /// A .so file, a build/<variant>/ directory, or a project directory (all build/*/).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// manylinux policy to enforce.
    #[arg(long, alias = "manylinux", default_value = "manylinux_2_28")]
    pub policy: String,
    /// Minimum Python version for the abi3 check (e.g. 3.9).
    #[arg(long, default_value = "3.9")]
    pub python_abi: String,
    /// Torch lib directory used to resolve undefined symbols.
    #[arg(long)]
    pub torch_lib: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Some(mut policy) = Policy::manylinux(&args.policy) else {
        bail!(
            "--policy {}: unknown policy; expected manylinux_2_28",
            args.policy
        );
    };
    let (ma, mi) = args
        .python_abi
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .with_context(|| {
            format!(
                "--python-abi {}: expected MAJOR.MINOR such as 3.9",
                args.python_abi
            )
        })?;
    policy.python_abi = Some((ma, mi));
    policy.torch_lib = args.torch_lib.clone();
    let options = Options {
        policy: policy.clone(),
    };
    let mut report = Report::default();
    for path in &args.paths {
        let part = if path.is_file() {
            check_file(path, &policy)?
        } else if path.join("build").is_dir() {
            let mut r = Report::default();
            for dir in variant_dirs(&path.join("build"))? {
                r.files.extend(check_variant_dir(&dir, &options)?.files);
            }
            r
        } else if path.is_dir() {
            check_variant_dir(path, &options)?
        } else {
            bail!(
                "{}: no such file or directory; expected a .so, a build/<variant>/ dir or a project dir",
                path.display()
            );
        };
        report.files.extend(part.files);
    }
    if args.json {
        println!("{}", report.to_json());
    } else {
        for file in &report.files {
            println!("{}", file.path.display());
            if file.findings.is_empty() {
                println!("  ok: no ABI issues for {}", policy.name);
            }
            for f in &file.findings {
                let lib = f
                    .library
                    .as_deref()
                    .map(|l| format!(" (from {l})"))
                    .unwrap_or_default();
                println!("  {:?} [{}] {}{lib}", f.severity, f.code, f.message);
                if let Some(h) = &f.fix_hint {
                    println!("    hint: {h}");
                }
            }
        }
    }
    if report.has_errors() {
        return Err(anyhow::Error::new(super::AlreadyReported));
    }
    Ok(())
}

fn variant_dirs(build: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(build)
        .with_context(|| format!("reading {}", build.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}
