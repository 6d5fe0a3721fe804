//! `kforge push`: upload a built project's `build/<variant>/` directories to branch `v<version>` of a hub repo.

use std::path::PathBuf;

use anyhow::Context;
use kforge_hub::client::{HubClient, PushOptions, push};
use kforge_hub::model::RepoType;

#[derive(clap::Args)]
pub struct Args {
    /// Kernel project directory holding build/<variant>/ (default: the current directory).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Target repository, ORG/NAME.
    #[arg(long, alias = "repo-id", value_name = "ORG/NAME")]
    pub repo: String,
    /// Major version: the branch is v<N>. Default: `version` from the variants' metadata.json.
    #[arg(long)]
    pub version: Option<u64>,
    /// Hub URL (e.g. http://127.0.0.1:8790).
    #[arg(long, alias = "hub", env = "HF_ENDPOINT", value_name = "URL")]
    pub endpoint: Option<String>,
    /// Access token with write rights on ORG.
    #[arg(long, env = "HF_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Create the repository as private if it does not exist yet.
    #[arg(long)]
    pub private: bool,
    /// Repository type.
    #[arg(long, default_value = "kernel", value_parser = ["kernel", "model"])]
    pub repo_type: String,
}

/// `kernel` or `model`, as accepted by the clap value parser.
pub fn repo_type(name: &str) -> RepoType {
    RepoType::parse(name).unwrap_or(RepoType::Kernel)
}

/// The hub URL from --endpoint / HF_ENDPOINT, or a clear error.
pub fn endpoint(given: Option<String>) -> anyhow::Result<String> {
    given.filter(|e| !e.is_empty()).context(
        "no hub given: pass --endpoint URL or set HF_ENDPOINT (e.g. http://127.0.0.1:8790)",
    )
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let endpoint = endpoint(args.endpoint)?;
    let client = HubClient::new(&endpoint, args.token);
    let opts = PushOptions {
        project: args.dir.clone(),
        repo_id: args.repo.clone(),
        repo_type: repo_type(&args.repo_type),
        version: args.version,
        private: args.private,
    };
    let report = push(&client, &opts).with_context(|| {
        format!(
            "pushing {} to {} on {endpoint}",
            args.dir.display(),
            args.repo
        )
    })?;
    println!(
        "pushed {} variant(s), {} files to {}@{} (commit {}): {} object(s) uploaded ({} bytes), the rest already on the hub",
        report.variants.len(),
        report.files,
        args.repo,
        report.branch,
        report.commit,
        report.uploaded_objects,
        report.uploaded_bytes
    );
    for v in &report.variants {
        println!("  build/{v}");
    }
    if let Some(c) = report.readme_commit {
        println!("README.md updated on main (commit {c})");
    }
    Ok(())
}
