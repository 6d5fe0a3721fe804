//! `kforge variants [DIR]`: the build/<variant>/ directories a project yields and the archs of each
//! component, for kforge's configured build sets (or Hugging Face's full matrix with --all).

use std::path::PathBuf;

use anyhow::Context as _;
use kforge_manifest::plan::{BuildTarget, Plan, hf_build_matrix, plan};
use kforge_manifest::{Compute, Version};

use super::check::{emit, load_and_report};

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kforge variants kernels/relu         # what `kforge build` produces here
  kforge variants --all                # against Hugging Face's build matrix (torch 2.12/2.13)
  kforge variants --json | jq '.variants[].variant'")]
pub struct Args {
    /// The project directory (the one holding build.toml).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Use Hugging Face's full build matrix instead of kforge's configured build sets.
    #[arg(long)]
    pub all: bool,
    /// Print JSON: {"variants": [{variant, backend, kind, archs, components, skipped, error}], "unplanned": [...]}.
    #[arg(long)]
    pub json: bool,
}

fn configured_targets() -> anyhow::Result<Vec<BuildTarget>> {
    let sets = kforge_toolchain::build_sets().context("reading kforge's build sets")?;
    sets.iter()
        .map(|s| {
            let torch: Version = s
                .torch
                .parse()
                .with_context(|| format!("build set {}", s.key()))?;
            let compute = match (s.backend.as_str(), &s.cuda) {
                ("cuda", Some(v)) => Compute::Cuda(
                    v.parse()
                        .with_context(|| format!("build set {}", s.key()))?,
                ),
                ("cpu", None) => Compute::Cpu,
                (b, _) => anyhow::bail!("build set {} has unsupported backend {b}", s.key()),
            };
            let (cpu, os) = s.platform.split_once('-').with_context(|| {
                format!(
                    "build set {}: platform `{}` is not <cpu>-<os>",
                    s.key(),
                    s.platform
                )
            })?;
            Ok(BuildTarget {
                torch,
                compute,
                cpu: cpu.into(),
                os: os.into(),
                tvm_ffi: None,
            })
        })
        .collect()
}

fn render_text(p: &Plan) -> String {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let mut o = String::new();
    for v in &p.variants {
        let archs = v
            .archs
            .as_ref()
            .map(|a| format!("  archs: {}", a.join(";")))
            .unwrap_or_default();
        let _ = writeln!(o, "{}  ({} {}){archs}", v.variant, v.backend, v.kind);
        for c in &v.components {
            let _ = match &c.archs {
                Some(a) => writeln!(o, "  {}: {}", c.name, a.join(", ")),
                None => writeln!(o, "  {}", c.name),
            };
        }
        for s in &v.skipped {
            let _ = writeln!(o, "  {} skipped: {}", s.component, s.reason);
        }
        if let Some(e) = &v.error {
            let _ = writeln!(o, "  error: {e}");
        }
    }
    for u in &p.unplanned {
        let _ = writeln!(o, "no {} variant: {}", u.backend, u.reason);
    }
    o
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let project = load_and_report(&args.dir)?;
    let targets = if args.all {
        hf_build_matrix()
    } else {
        configured_targets()?
    };
    let p = plan(&project.manifest, &targets);
    if args.json {
        emit(&format!("{}\n", p.to_json()))?;
    } else {
        let mut text = render_text(&p);
        if !args.all && !p.unplanned.is_empty() {
            text.push_str(
                "(kforge builds the sets in its toolchain lock; `--all` shows Hugging Face's matrix)\n",
            );
        }
        emit(&text)?;
    }
    if let Some(v) = p.variants.iter().find(|v| v.error.is_some()) {
        anyhow::bail!(
            "variant {} cannot be built: {}",
            v.variant,
            v.error.as_deref().unwrap_or("")
        );
    }
    Ok(())
}
