//! kforge-sign: ed25519 signatures over a variant's metadata.json, key files and the trust file.

pub mod keys;
pub mod sig;
pub mod trust;

use std::path::PathBuf;

pub use ed25519_dalek::{SigningKey, VerifyingKey};
pub use keys::{
    generate, key_id, parse_public_key, public_key_line, public_path, read_public_key,
    read_secret_key, write_key_pair,
};
pub use sig::{
    SIG_FILE, SignatureFile, Verified, check_digest, read_signature, sign_variant, variant_dirs,
    verify_signature,
};
pub use trust::{Publisher, TrustStore, default_trust_path};

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{0} already exists; refusing to overwrite a key (pick another --out or move the old key away)"
    )]
    Exists(PathBuf),
    #[error("{path}: {message}")]
    KeyFormat { path: PathBuf, message: String },
    #[error(transparent)]
    Metadata(#[from] kforge_manifest::metadata::MetadataError),
    #[error(
        "{0} has no `digest`, so its files cannot be checked or signed; rebuild the variant with `kforge build`"
    )]
    NoDigest(PathBuf),
    #[error("{dir}: files do not match the digest in metadata.json:\n  {}", problems.join("\n  "))]
    DigestMismatch { dir: PathBuf, problems: Vec<String> },
    #[error("{0} is not signed (no {SIG_FILE}); sign it with `kforge key sign`")]
    Unsigned(PathBuf),
    #[error("{path}: {message}")]
    SigFormat { path: PathBuf, message: String },
    #[error(
        "{path}: signed by key {key_id}, which is not trusted here (trusted: {}); add the signer's KEY.pub line \
         to the trust file if you trust it",
        if trusted.is_empty() { "none".to_string() } else { trusted.join(", ") }
    )]
    UntrustedKey {
        path: PathBuf,
        key_id: String,
        trusted: Vec<String>,
    },
    #[error("{path}: signature check failed: {message}")]
    BadSignature { path: PathBuf, message: String },
    #[error("{path}: invalid trust file: {message}")]
    Trust { path: PathBuf, message: String },
    #[error(
        "publisher `{publisher}` is not in the trust file{}; add a [publishers.{publisher}] table with its keys",
        if path.as_os_str().is_empty() { String::new() } else { format!(" {}", path.display()) }
    )]
    UnknownPublisher { publisher: String, path: PathBuf },
    #[error(
        "{0}: no variant directories (a directory with metadata.json, a build/ folder or a project)"
    )]
    NoVariants(PathBuf),
}
