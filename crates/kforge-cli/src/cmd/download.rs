//! `kforge download`: fetch the kernels locked in a project's `kernels.lock` into the kernels cache, checking
//! each variant against its lock hash (runs `python -m kforge download`; see `lock.rs` for why).

use std::ffi::OsString;
use std::path::PathBuf;

use super::lock::{PythonArg, run_python_kforge};

#[derive(clap::Args)]
pub struct Args {
    /// The Python project directory holding kernels.lock.
    #[arg(default_value = ".")]
    pub project_dir: PathBuf,
    /// Download every variant, not only the one this system would load.
    #[arg(long)]
    pub all_variants: bool,
    /// `cpu` to choose CPU builds on an accelerator host.
    #[arg(long)]
    pub backend: Option<String>,
    #[command(flatten)]
    pub python: PythonArg,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut argv = vec![
        OsString::from("download"),
        args.project_dir.into_os_string(),
    ];
    if args.all_variants {
        argv.push(OsString::from("--all-variants"));
    }
    if let Some(backend) = args.backend {
        argv.push(OsString::from("--backend"));
        argv.push(OsString::from(backend));
    }
    run_python_kforge(&args.python, &argv)
}
