//! `kforge check [DIR]`: validate build.toml and the project layout without building.

use std::path::PathBuf;

use kforge_manifest::{Problem, ProjectError, load_project};

use super::AlreadyReported;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kforge check                 # the project in the current directory
  kforge check kernels/relu    # another project
  kforge check --deny-warnings # also fail on warnings (e.g. an edition 4 build.toml)")]
pub struct Args {
    /// The project directory (the one holding build.toml).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Exit non-zero on warnings too.
    #[arg(long)]
    pub deny_warnings: bool,
}

/// Write `text` to stdout; a closed pipe (`kforge variants | head`) is not an error.
pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Render problems with their source snippets (file:line:col, a marker under the offending text, help).
pub fn report_problems(problems: &[Problem]) {
    for p in problems {
        eprintln!("{:?}", miette::Report::new(p.clone()));
    }
}

/// Print a project error the same way `kforge check` does; other commands reuse it.
pub fn report_project_error(err: &ProjectError) {
    report_problems(&err.problems);
    let n = err.errors().count();
    eprintln!(
        "error: {} has {n} problem{} (see above)",
        err.dir.join("build.toml").display(),
        if n == 1 { "" } else { "s" }
    );
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let project = match load_project(&args.dir) {
        Ok(p) => p,
        Err(err) => {
            report_project_error(&err);
            return Err(AlreadyReported.into());
        }
    };
    report_problems(&project.warnings);
    let m = &project.manifest;
    let backends: Vec<&str> = m.general.backends.iter().map(|b| b.as_str()).collect();
    emit(&format!(
        "ok: {} (edition {}, {} framework, backends {}, {} kernel component{})\n",
        m.general.name,
        m.edition,
        m.framework.table_name(),
        backends.join(","),
        m.kernels.len(),
        if m.kernels.len() == 1 { "" } else { "s" }
    ))?;
    if args.deny_warnings && !project.warnings.is_empty() {
        eprintln!(
            "error: {} warning{} and --deny-warnings was given",
            project.warnings.len(),
            if project.warnings.len() == 1 { "" } else { "s" }
        );
        return Err(AlreadyReported.into());
    }
    Ok(())
}
