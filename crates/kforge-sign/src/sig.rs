//! `build/<variant>/metadata.json.kforge-sig`: an ed25519 signature over the exact bytes of
//! `metadata.json`, which lists the sha256 of every other file of the variant.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use kforge_manifest::metadata::{DigestMismatch, Metadata, verify_digest};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::SignError;
use crate::keys::key_id;

/// The signature file, beside `metadata.json` in a variant directory.
pub const SIG_FILE: &str = "metadata.json.kforge-sig";
/// The only algorithm written and accepted.
pub const ALGORITHM: &str = "ed25519";
/// Domain separation: a kforge signature can never be replayed as a signature over anything else.
const CONTEXT: &[u8] = b"kforge-sig-v1\n";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The content of [`SIG_FILE`] (pretty JSON, this field order, trailing newline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct SignatureFile {
    /// Always [`ALGORITHM`].
    pub algorithm: String,
    /// [`key_id`] of the signing key.
    pub key_id: String,
    /// Always `metadata.json`.
    pub signed_file: String,
    /// Lowercase hex sha256 of the signed file: names the exact bytes that were signed.
    pub signed_sha256: String,
    /// base64 of the 64-byte ed25519 signature over `"kforge-sig-v1\n" || sha256(metadata.json)`.
    pub signature: String,
}

impl SignatureFile {
    /// The canonical bytes. Verification insists on them, so no byte of a signature file can change
    /// without the change being refused.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut s = serde_json::to_string_pretty(self).expect("a signature file serializes");
        s.push('\n');
        s.into_bytes()
    }
}

/// The message that is signed for a metadata.json with this sha256.
fn message(sha256: &[u8]) -> Vec<u8> {
    [CONTEXT, sha256].concat()
}

fn read(path: &Path) -> Result<Vec<u8>, SignError> {
    std::fs::read(path).map_err(|source| SignError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Check a variant's files against the digest its metadata.json records: Ok(number of files) or the list
/// of differences. The signature file itself is not part of the digest.
pub fn check_digest(dir: &Path) -> Result<usize, SignError> {
    let md = dir.join("metadata.json");
    let meta = Metadata::read(&md)?;
    let digest = meta.digest.ok_or_else(|| SignError::NoDigest(md.clone()))?;
    let mismatches: Vec<DigestMismatch> = verify_digest(dir, &digest)
        .map_err(|source| SignError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .into_iter()
        .filter(|m| !matches!(m, DigestMismatch::Unexpected(p) if p == SIG_FILE))
        .collect();
    if mismatches.is_empty() {
        Ok(digest.files.len())
    } else {
        Err(SignError::DigestMismatch {
            dir: dir.to_path_buf(),
            problems: mismatches.iter().map(ToString::to_string).collect(),
        })
    }
}

/// Sign `dir/metadata.json` into `dir/metadata.json.kforge-sig` (written atomically). The files must
/// match the digest first: signing a tampered variant would vouch for it.
pub fn sign_variant(dir: &Path, key: &SigningKey) -> Result<SignatureFile, SignError> {
    check_digest(dir)?;
    let bytes = read(&dir.join("metadata.json"))?;
    let sha = Sha256::digest(&bytes);
    let sig = SignatureFile {
        algorithm: ALGORITHM.into(),
        key_id: key_id(&key.verifying_key()),
        signed_file: "metadata.json".into(),
        signed_sha256: hex::encode(sha),
        signature: B64.encode(key.sign(&message(&sha)).to_bytes()),
    };
    let path = dir.join(SIG_FILE);
    kforge_manifest::write_atomic(&path, &sig.to_bytes())
        .map_err(|source| SignError::Io { path, source })?;
    Ok(sig)
}

/// What a successful verification established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub key_id: String,
}

/// Read and check the signature file's form (canonical JSON, known algorithm, 64-byte signature).
pub fn read_signature(dir: &Path) -> Result<(SignatureFile, Signature), SignError> {
    let path = dir.join(SIG_FILE);
    if !path.exists() {
        return Err(SignError::Unsigned(dir.to_path_buf()));
    }
    let bytes = read(&path)?;
    let bad = |message: String| SignError::SigFormat {
        path: path.clone(),
        message,
    };
    let sig: SignatureFile = serde_json::from_slice(&bytes).map_err(|e| {
        bad(format!(
            "not a kforge signature file (line {}, column {}): {e}",
            e.line(),
            e.column()
        ))
    })?;
    if sig.algorithm != ALGORITHM {
        return Err(bad(format!(
            "algorithm is {:?}; expected {ALGORITHM:?}",
            sig.algorithm
        )));
    }
    if sig.signed_file != "metadata.json" {
        return Err(bad(format!(
            "signed-file is {:?}; expected \"metadata.json\"",
            sig.signed_file
        )));
    }
    if sig.to_bytes() != bytes {
        return Err(bad(
            "the file is not in canonical form (it was edited after signing); sign the variant again".into(),
        ));
    }
    let raw = B64
        .decode(&sig.signature)
        .map_err(|e| bad(format!("signature is not base64: {e}")))?;
    let raw = <[u8; 64]>::try_from(raw.as_slice())
        .map_err(|_| bad(format!("signature is {} bytes; expected 64", raw.len())))?;
    Ok((sig, Signature::from_bytes(&raw)))
}

/// Verify `dir/metadata.json` against its signature with one of `trusted` keys. This covers the
/// metadata only; call [`check_digest`] as well to cover the other files.
pub fn verify_signature(dir: &Path, trusted: &[VerifyingKey]) -> Result<Verified, SignError> {
    let (file, sig) = read_signature(dir)?;
    let sig_path = dir.join(SIG_FILE);
    let Some(key) = trusted.iter().find(|k| key_id(k) == file.key_id) else {
        return Err(SignError::UntrustedKey {
            path: sig_path,
            key_id: file.key_id,
            trusted: trusted.iter().map(key_id).collect(),
        });
    };
    let md = read(&dir.join("metadata.json"))?;
    let sha = Sha256::digest(&md);
    if hex::encode(sha) != file.signed_sha256 {
        return Err(SignError::BadSignature {
            path: sig_path,
            message: format!(
                "metadata.json has sha256 {} but the signature was made over {}: metadata.json changed \
                 after signing",
                hex::encode(sha),
                file.signed_sha256
            ),
        });
    }
    key.verify_strict(&message(&sha), &sig)
        .map_err(|_| SignError::BadSignature {
            path: sig_path,
            message: format!(
                "the ed25519 signature does not verify with key {}",
                file.key_id
            ),
        })?;
    Ok(Verified {
        key_id: file.key_id,
    })
}

/// The variant directories under `path`: `path` itself when it holds a `metadata.json`, else every
/// sub-directory of `path` (a `build/` folder) or of `path/build` (a project) that holds one.
pub fn variant_dirs(path: &Path) -> Result<Vec<PathBuf>, SignError> {
    if path.join("metadata.json").is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let build = if path.join("build").is_dir() {
        path.join("build")
    } else {
        path.to_path_buf()
    };
    let entries = std::fs::read_dir(&build).map_err(|source| SignError::Io {
        path: build.clone(),
        source,
    })?;
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("metadata.json").is_file())
        .collect();
    out.sort();
    if out.is_empty() {
        return Err(SignError::NoVariants(path.to_path_buf()));
    }
    Ok(out)
}
