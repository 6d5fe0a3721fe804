//! `kforge check [DIR]`: validate build.toml and the project layout without building.

use std::path::{Path, PathBuf};

use kforge_manifest::{Problem, Project, ProjectError, load_project};

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

/// The project in `dir` with its warnings printed; if it does not load, its problems are printed and the
/// command ends with [`AlreadyReported`].
pub fn load_and_report(dir: &Path) -> anyhow::Result<Project> {
    match load_project(dir) {
        Ok(project) => {
            report_problems(&project.warnings);
            Ok(project)
        }
        Err(err) => {
            report_project_error(&err);
            Err(AlreadyReported.into())
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let project = load_and_report(&args.dir)?;
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
