//! `kforge update-build [DIR]`: rewrite an edition 3/4 build.toml as edition 5, keeping comments.

use std::path::PathBuf;

use anyhow::Context as _;
use kforge_manifest::migrate::{MigrateError, migrate_to_edition5};
use kforge_manifest::write_atomic;

use super::AlreadyReported;
use super::check::report_project_error;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kforge update-build                 # migrate ./build.toml in place
  kforge update-build kernels/old --dry-run   # print the edition 5 file instead")]
pub struct Args {
    /// The project directory (the one holding build.toml).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Print the migrated build.toml to stdout instead of writing it.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let file = args.dir.join("build.toml");
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let migrated = match migrate_to_edition5(&text, &file) {
        Ok(m) => m,
        Err(MigrateError::Invalid(err)) => {
            report_project_error(&err);
            eprintln!("error: fix these problems first; update-build only migrates valid files");
            return Err(AlreadyReported.into());
        }
        Err(e) => return Err(e.into()),
    };
    let Some(new) = migrated else {
        println!("{} is already edition 5; nothing to do", file.display());
        return Ok(());
    };
    if args.dry_run {
        print!("{new}");
        return Ok(());
    }
    write_atomic(&file, new.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    println!("rewrote {} as edition 5", file.display());
    Ok(())
}
