//! `kforge pull`: download the build variants of a kernel version (or any revision) from a hub.

use std::path::PathBuf;

use anyhow::Context;
use kforge_hub::client::{HubClient, PullOptions, pull};

use super::push::{endpoint, repo_type};

#[derive(clap::Args)]
pub struct Args {
    /// Repository, ORG/NAME.
    #[arg(value_name = "ORG/NAME")]
    pub repo: String,
    /// Major version (branch v<N>). Default: the highest v<N> branch.
    #[arg(long, conflicts_with = "revision")]
    pub version: Option<u64>,
    /// A branch, tag or commit id instead of a version.
    #[arg(long)]
    pub revision: Option<String>,
    /// Only this variant (e.g. torch211-cxx11-cpu-x86_64-linux). Default: all.
    #[arg(long)]
    pub variant: Option<String>,
    /// Files land in DEST/build/<variant>/.
    #[arg(long, default_value = ".")]
    pub dest: PathBuf,
    /// Hub URL.
    #[arg(long, alias = "hub", env = "HF_ENDPOINT", value_name = "URL")]
    pub endpoint: Option<String>,
    /// Access token (needed for private repositories).
    #[arg(long, env = "HF_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Repository type.
    #[arg(long, default_value = "kernel", value_parser = ["kernel", "model"])]
    pub repo_type: String,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let endpoint = endpoint(args.endpoint)?;
    let client = HubClient::new(&endpoint, args.token);
    let opts = PullOptions {
        repo_id: args.repo.clone(),
        repo_type: repo_type(&args.repo_type),
        version: args.version,
        revision: args.revision,
        variant: args.variant,
        dest: args.dest.clone(),
    };
    let report =
        pull(&client, &opts).with_context(|| format!("pulling {} from {endpoint}", args.repo))?;
    println!(
        "pulled {} variant(s), {} files ({} bytes) of {}@{} (commit {}) into {}",
        report.variants.len(),
        report.files,
        report.bytes,
        args.repo,
        report.revision,
        report.commit,
        args.dest.join("build").display()
    );
    for v in &report.variants {
        println!("  build/{v}");
    }
    Ok(())
}
