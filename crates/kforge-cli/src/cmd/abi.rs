//! `kforge abi`: check built shared objects for manylinux/abi3/torch ABI problems.

use std::path::{Path, PathBuf};

use anyhow::Context;
use kforge_abi::{
    Options, Policy, Report, check_file, check_project, check_variant_dir, parse_major_minor,
    variant_dirs,
};

#[derive(clap::Args)]
pub struct Args {
    /// A .so file, a build/<variant>/ directory, or a project directory (its result/ or build/ variants).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// manylinux level to enforce (manylinux_2_17 … manylinux_2_35; manylinux2014 is accepted).
    #[arg(
        short = 'm',
        long,
        visible_alias = "policy",
        default_value = "manylinux_2_28"
    )]
    pub manylinux: String,
    /// Minimum Python version for the abi3 (limited API) check.
    #[arg(short = 'p', long, default_value = "3.9")]
    pub python_abi: String,
    /// Check a torch stable-ABI build targeting this torch version (e.g. 2.10).
    #[arg(long, value_name = "VERSION")]
    pub torch_stable_abi: Option<String>,
    /// The target torch's lib/ directory: every undefined symbol must resolve through it.
    #[arg(long, env = "KFORGE_TORCH_LIB", value_name = "DIR")]
    pub torch_lib: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut policy = Policy::parse(&args.manylinux).context("--manylinux")?;
    policy.python_abi = Some(parse_major_minor("--python-abi", &args.python_abi)?);
    if let Some(v) = &args.torch_stable_abi {
        policy.torch_stable_abi = true;
        policy.torch_stable_abi_version = Some(parse_major_minor("--torch-stable-abi", v)?);
    }
    policy.torch_lib = args.torch_lib.clone();
    let options = Options {
        policy: policy.clone(),
    };
    let mut report = Report::default();
    for path in &args.paths {
        let part = if path.is_file() {
            check_file(path, &policy)?
        } else if path.is_dir() {
            if !variant_dirs(path)?.is_empty() {
                check_project(path, &options)?
            } else if has_shared_object(path) {
                // A variant directory without metadata.json.
                check_variant_dir(path, &options)?
            } else {
                anyhow::bail!(
                    "{}: no variant found (a directory with metadata.json in result/, build/ or the directory \
                     itself) and no .so in it; pass a project, a build/<variant>/ dir or a .so file",
                    path.display()
                );
            }
        } else {
            anyhow::bail!(
                "{}: no such file or directory; expected a .so, a build/<variant>/ dir or a project dir",
                path.display()
            );
        };
        report.merge(part);
    }
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{report}");
    }
    if report.has_errors() {
        if !args.json {
            eprintln!("error: ABI compatibility issues found");
        }
        return Err(anyhow::Error::new(super::AlreadyReported));
    }
    Ok(())
}

fn has_shared_object(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "so"))
    })
}
