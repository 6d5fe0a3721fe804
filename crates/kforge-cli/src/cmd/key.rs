//! `kforge key`: generate an ed25519 signing key and sign built variants (see docs/signing.md).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Subcommand;
use kforge_sign::{
    generate, key_id, public_path, read_secret_key, sign_variant, variant_dirs, write_key_pair,
};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: KeyCommand,
}

#[derive(Subcommand)]
pub enum KeyCommand {
    /// Write a new secret key to OUT (mode 0600) and its public key to OUT.pub.
    Generate {
        /// Path of the secret key file; the public key goes to the same path + ".pub".
        #[arg(long, value_name = "KEY")]
        out: PathBuf,
        /// A comment stored after the public key (e.g. who holds the key).
        #[arg(long, default_value = "")]
        comment: String,
    },
    /// Sign every build/<variant>/ of a project (or a build/ folder, or one variant directory).
    Sign {
        /// A project, its build/ folder, or a variant directory.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// The secret key file written by `kforge key generate`.
        #[arg(long, value_name = "KEY", env = "KFORGE_SIGNING_KEY")]
        key: PathBuf,
    },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        KeyCommand::Generate { out, comment } => {
            let key = generate()?;
            write_key_pair(&out, &key, &comment)?;
            println!(
                "wrote secret key {} (mode 0600) and public key {}",
                out.display(),
                public_path(&out).display()
            );
            println!("key id {}", key_id(&key.verifying_key()));
            Ok(())
        }
        KeyCommand::Sign { dir, key } => sign_all(&dir, &key, "--key"),
    }
}

/// Sign every variant under `dir` (a project, its build/ folder or one variant) with the secret key file
/// `key`, given on the command line as `flag`; shared by `kforge key sign` and `kforge push --sign`.
pub fn sign_all(dir: &Path, key: &Path, flag: &str) -> anyhow::Result<()> {
    let key = read_secret_key(key).with_context(|| format!("{flag} {}", key.display()))?;
    let variants = variant_dirs(dir)?;
    for v in &variants {
        let sig = sign_variant(v, &key)?;
        println!("signed {} (key {})", v.display(), sig.key_id);
    }
    println!("{} variant(s) signed", variants.len());
    Ok(())
}
