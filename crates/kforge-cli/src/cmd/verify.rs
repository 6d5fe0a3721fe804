//! `kforge verify`: check every file of built or downloaded variants against the digest in their
//! metadata.json, then metadata.json against its signature (see docs/signing.md).

use std::path::PathBuf;

use kforge_sign::{SignError, TrustStore, check_digest, variant_dirs, verify_signature};

use super::AlreadyReported;

#[derive(clap::Args)]
pub struct Args {
    /// A variant directory, a build/ folder, or a project.
    #[arg(default_value = ".")]
    pub path: PathBuf,
    /// Trust file (default: $KFORGE_TRUST, else ~/.config/kforge/trust.toml).
    #[arg(long, value_name = "FILE")]
    pub trust: Option<PathBuf>,
    /// Accept only this publisher's keys, and require a signature if its trust entry says so.
    #[arg(long, value_name = "ORG")]
    pub publisher: Option<String>,
    /// Fail on unsigned variants.
    #[arg(long)]
    pub require_signature: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let trust = TrustStore::load_default(args.trust.as_deref())?;
    let keys = trust.keys(args.publisher.as_deref())?;
    let required = args.require_signature
        || args
            .publisher
            .as_deref()
            .is_some_and(|p| trust.requires_signature(p));
    let variants = variant_dirs(&args.path)?;
    if keys.is_empty() {
        eprintln!(
            "note: no trusted keys (no --trust, no $KFORGE_TRUST, no {}): signatures cannot be checked",
            kforge_sign::default_trust_path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "~/.config/kforge/trust.toml".into())
        );
    }
    let mut failed = 0;
    for v in &variants {
        let result = check_digest(v).and_then(|files| match verify_signature(v, &keys) {
            Ok(ok) => Ok(format!(
                "{files} files match the digest; signed by key {}",
                ok.key_id
            )),
            Err(SignError::Unsigned(_)) if !required => {
                Ok(format!("{files} files match the digest; not signed"))
            }
            Err(e) => Err(e),
        });
        match result {
            Ok(msg) => println!("ok    {}: {msg}", v.display()),
            Err(e) => {
                failed += 1;
                eprintln!("FAIL  {e}");
            }
        }
    }
    if failed > 0 {
        eprintln!(
            "{failed} of {} variant(s) failed verification",
            variants.len()
        );
        return Err(AlreadyReported.into());
    }
    println!("{} variant(s) verified", variants.len());
    Ok(())
}
