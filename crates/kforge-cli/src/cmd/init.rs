//! `kforge init NAME [--backends cpu,cuda,rocm] [DIR]`: create a kernel project in the HF format.

use std::path::PathBuf;

use anyhow::Context as _;
use kforge_manifest::Backend;
use kforge_manifest::scaffold::{InitOptions, init};

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kforge init relu                         # ./relu with cpu and cuda kernels
  kforge init my-org/gelu --backends cpu,cuda,rocm
  kforge init relu --backends cpu kernels/relu-cpu
Then: kforge check <DIR> && kforge build <DIR>")]
pub struct Args {
    /// Kernel name (`^[a-z][-a-z0-9]*[a-z0-9]$`), optionally `org/name` to set [general.hub] repo-id.
    pub name: String,
    /// Where to create the project (default: ./<name>).
    pub dir: Option<PathBuf>,
    /// Comma-separated backends to generate kernels for: cpu, cuda, rocm.
    #[arg(long, value_delimiter = ',', default_value = "cpu,cuda", value_parser = parse_backend)]
    pub backends: Vec<Backend>,
    /// The Hub license identifier written to build.toml.
    #[arg(long, default_value = "Apache-2.0")]
    pub license: String,
    /// Replace generated files that already exist in DIR.
    #[arg(long)]
    pub overwrite: bool,
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    s.trim().parse::<Backend>().map_err(|_| {
        let hint = kforge_manifest::did_you_mean(s, ["cpu", "cuda", "rocm"])
            .map(|b| format!("; did you mean `{b}`?"))
            .unwrap_or_default();
        format!("unknown backend `{s}`: expected cpu, cuda or rocm{hint}")
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let leaf = args
        .name
        .rsplit('/')
        .next()
        .unwrap_or(&args.name)
        .to_string();
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&leaf));
    let opts = InitOptions {
        name: args.name,
        backends: args.backends,
        license: args.license,
        overwrite: args.overwrite,
    };
    let files = init(&dir, &opts).with_context(|| format!("kforge init into {}", dir.display()))?;
    println!("created {} ({} files):", dir.display(), files.len());
    for f in &files {
        println!("  {}", f.display());
    }
    println!(
        "next: kforge check {d} && kforge build {d} && python -m pytest {d}/tests",
        d = dir.display()
    );
    Ok(())
}
