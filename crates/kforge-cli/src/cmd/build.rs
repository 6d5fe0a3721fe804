//! `kforge build [DIR]`: build every variant of a kernel project into build/<variant>/.

use std::io::IsTerminal;
use std::path::PathBuf;

use kforge_build::{
    BuildOptions, DeviceOnlyOptions, Outcome, Selection, build, compile_device_only,
};
use kforge_manifest::Backend;
use kforge_toolchain::Cache;

/// Problems with their source snippets (file:line:col, a marker, help), as miette renders them.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  kforge build kernels/relu                      # every variant this machine can build
  kforge build --backend cpu                     # only the CPU variant(s)
  kforge build --variant torch211-cxx11-cu130-x86_64-linux -j 4
  kforge build --out /tmp/out -v                 # elsewhere, logging each command
  kforge build --backend rocm --device-only      # ROCm device code only (build/device/rocm/), no ROCm torch

Toolchains (torch, nvcc, ...) are fetched once into $KFORGE_CACHE (default ~/.cache/kforge).")]
pub struct Args {
    /// The project directory (the one holding build.toml).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Parallel compile jobs (default: the number of cores).
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// Build only these backends (repeat or comma-separate: --backend cpu,cuda).
    #[arg(long = "backend", value_delimiter = ',')]
    pub backends: Vec<String>,
    /// Build only this variant, e.g. torch211-cxx11-cpu-x86_64-linux.
    #[arg(long)]
    pub variant: Option<String>,
    /// Output directory for <variant>/ dirs (default: DIR/build).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Install variants that fail the ABI check, printing the findings as warnings.
    #[arg(long)]
    pub abi_warn_only: bool,
    /// The unique id in the ops name (default: 7 hex of the git tree hash, `_dirty` if modified).
    #[arg(long)]
    pub unique_id: Option<String>,
    /// With `--backend rocm`: compile only the device code of the rocm components (clang, per gfx arch)
    /// into <out>/device/rocm/ and report registers/LDS/MFMA use. Nothing is run.
    #[arg(long)]
    pub device_only: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut selection = Selection::default();
    if !args.backends.is_empty() {
        let mut backends = Vec::new();
        for b in &args.backends {
            let backend: Backend = b.parse().map_err(|e| {
                anyhow::anyhow!(
                    "--backend {b}: {e}; expected one of cpu, cuda, rocm, metal, xpu, cann, neuron, tpu"
                )
            })?;
            backends.push(backend);
        }
        selection.backends = Some(backends);
    }
    selection.variant = args.variant.clone();
    if args.jobs == Some(0) {
        anyhow::bail!("--jobs 0: expected at least 1 parallel job");
    }
    if let Some(id) = &args.unique_id
        && (id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    {
        anyhow::bail!(
            "--unique-id {id:?}: expected letters, digits and `_` only (it becomes part of a Python identifier)"
        );
    }

    if args.device_only
        && (args.backends.len() != 1 || args.backends[0] != "rocm" || args.variant.is_some())
    {
        anyhow::bail!(
            "--device-only: valid only with `--backend rocm` (and no --variant); ROCm device code is the only device-only build"
        );
    }

    let project = super::check::load_and_report(&args.dir)?;

    if args.device_only {
        let out_dir = args
            .out
            .clone()
            .unwrap_or_else(|| project.root.join("build"))
            .join("device/rocm");
        let options = DeviceOnlyOptions {
            archs: None,
            out_dir,
        };
        let report = compile_device_only(&project, &options)?;
        print!("{report}");
        return Ok(());
    }

    let mut options = BuildOptions::new(Cache::from_env());
    if let Some(j) = args.jobs {
        options.jobs = j;
    }
    options.selection = selection;
    options.out_dir = args.out.clone();
    options.abi_warn_only = args.abi_warn_only;
    options.id = args.unique_id.clone();
    // Commands are logged at -v; a progress bar would garble them.
    options.progress = std::io::stderr().is_terminal() && !tracing::enabled!(tracing::Level::INFO);

    let started = std::time::Instant::now();
    let report = build(&project, &options)?;
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    for v in &report.variants {
        let what = match v.outcome {
            Outcome::Installed => "built",
            Outcome::Unchanged => "up to date",
        };
        println!(
            "{what}: {} ({} action{} run, {} cached)",
            v.dir.display(),
            v.actions_run,
            if v.actions_run == 1 { "" } else { "s" },
            v.actions_cached
        );
        if !v.abi_findings.is_empty() {
            eprintln!("warning: ABI findings for {}:", v.name);
            for line in &v.abi_findings {
                eprintln!("{line}");
            }
        }
    }
    if report.variants.is_empty() {
        anyhow::bail!(
            "nothing was built for {} (see the notes above)",
            project.root.display()
        );
    }
    eprintln!(
        "kforge build: {} variant{} in {:.2}s (id {})",
        report.variants.len(),
        if report.variants.len() == 1 { "" } else { "s" },
        started.elapsed().as_secs_f64(),
        report.id
    );
    Ok(())
}
