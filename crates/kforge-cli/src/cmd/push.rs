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
    /// Target repository, ORG/NAME. Default: `[general.hub] repo-id` of DIR/build.toml.
    #[arg(long, alias = "repo-id", value_name = "ORG/NAME")]
    pub repo: Option<String>,
    /// Major version: the branch is v<N>. Default: `version` from the variants' metadata.json.
    #[arg(long)]
    pub version: Option<u64>,
    /// Branch to upload to instead of v<N>. Default: `[general.hub] branch` of DIR/build.toml, if set.
    #[arg(long, conflicts_with = "version")]
    pub branch: Option<String>,
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
    /// Sign every variant with this secret key (`kforge key generate`) before uploading; the signature
    /// (metadata.json.kforge-sig) travels with the variant and loaders that trust the key verify it.
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
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

/// `[general.hub]` of DIR/build.toml, when the project has one.
fn hub_defaults(dir: &std::path::Path) -> anyhow::Result<kforge_manifest::Hub> {
    if !dir.join("build.toml").is_file() {
        return Ok(kforge_manifest::Hub::default());
    }
    let project = kforge_manifest::load_project(dir)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| {
            format!(
                "reading [general.hub] from {}",
                dir.join("build.toml").display()
            )
        })?;
    Ok(project.manifest.general.hub.unwrap_or_default())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let endpoint = endpoint(args.endpoint)?;
    if let Some(key) = &args.sign {
        super::key::sign_all(&args.dir.join("build"), key, "--sign")?;
    }
    let defaults = if args.repo.is_none() || (args.branch.is_none() && args.version.is_none()) {
        hub_defaults(&args.dir)?
    } else {
        kforge_manifest::Hub::default()
    };
    let repo = args.repo.or(defaults.repo_id).with_context(|| {
        format!(
            "no target repository: pass --repo ORG/NAME or set `repo-id` under [general.hub] in {}",
            args.dir.join("build.toml").display()
        )
    })?;
    // An explicit --version wins over the project's configured branch.
    let branch = args.branch.or(if args.version.is_none() {
        defaults.branch
    } else {
        None
    });
    let client = HubClient::new(&endpoint, args.token);
    let opts = PushOptions {
        project: args.dir.clone(),
        repo_id: repo.clone(),
        repo_type: repo_type(&args.repo_type),
        version: args.version,
        branch,
        private: args.private,
    };
    let report = push(&client, &opts)
        .with_context(|| format!("pushing {} to {repo} on {endpoint}", args.dir.display()))?;
    println!(
        "pushed {} variant(s), {} files to {}@{} (commit {}): {} object(s) uploaded ({} bytes), the rest already in the repo",
        report.variants.len(),
        report.files,
        repo,
        report.branch,
        report.commit,
        report.uploaded_objects,
        report.uploaded_bytes
    );
    for v in &report.variants {
        println!("  build/{v}");
    }
    for s in &report.skipped {
        println!("  skipped build/{s}/ (not a variant name)");
    }
    if let Some(c) = report.readme_commit {
        println!("README.md updated on main (commit {c})");
    }
    Ok(())
}
