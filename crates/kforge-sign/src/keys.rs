//! Key files: `KEY` holds the 32-byte ed25519 seed, `KEY.pub` the 32-byte public key, each as one line
//! `<tag> <base64>` (the public line may carry a trailing comment, like an OpenSSH public key).

use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest as _, Sha256};

use crate::SignError;

/// First word of a secret key file.
pub const SECRET_TAG: &str = "kforge-ed25519-secret";
/// First word of a public key line (in `KEY.pub` and in the trust file).
pub const PUBLIC_TAG: &str = "kforge-ed25519";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A short, stable name for a public key: the first 16 hex digits of sha256(public key bytes).
pub fn key_id(key: &VerifyingKey) -> String {
    hex::encode(&Sha256::digest(key.as_bytes())[..8])
}

/// A fresh key from the OS random source.
pub fn generate() -> Result<SigningKey, SignError> {
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut seed))
        .map_err(|source| SignError::Io {
            path: PathBuf::from("/dev/urandom"),
            source,
        })?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The public half as one line: `kforge-ed25519 <base64> <comment>`.
pub fn public_key_line(key: &VerifyingKey, comment: &str) -> String {
    let b64 = B64.encode(key.as_bytes());
    if comment.is_empty() {
        format!("{PUBLIC_TAG} {b64}")
    } else {
        format!("{PUBLIC_TAG} {b64} {comment}")
    }
}

/// `KEY.pub` beside `KEY`.
pub fn public_path(secret: &Path) -> PathBuf {
    let mut s = secret.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

/// Write `KEY` (mode 0600) and `KEY.pub`. Refuses to overwrite either file: a lost secret key cannot be
/// recovered, and a replaced one silently invalidates every trust entry that names the old key.
pub fn write_key_pair(
    secret_path: &Path,
    key: &SigningKey,
    comment: &str,
) -> Result<(), SignError> {
    let pub_path = public_path(secret_path);
    for p in [secret_path, pub_path.as_path()] {
        if p.exists() {
            return Err(SignError::Exists(p.to_path_buf()));
        }
    }
    let secret = format!("{SECRET_TAG} {}\n", B64.encode(key.to_bytes()));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SignError::Io { path, source }
    };
    // create_new + mode: the secret is never readable by others, not even between create and chmod.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(secret_path)
        .and_then(|mut f| {
            f.write_all(secret.as_bytes())?;
            f.sync_all()
        })
        .map_err(io(secret_path))?;
    let public = format!("{}\n", public_key_line(&key.verifying_key(), comment));
    if let Err(e) = std::fs::write(&pub_path, public).map_err(io(&pub_path)) {
        let _ = std::fs::remove_file(secret_path);
        return Err(e);
    }
    Ok(())
}

fn decode_32(b64: &str, what: &str, path: &Path) -> Result<[u8; 32], SignError> {
    let bytes = B64.decode(b64).map_err(|e| SignError::KeyFormat {
        path: path.to_path_buf(),
        message: format!("{what} is not base64 ({e})"),
    })?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| SignError::KeyFormat {
        path: path.to_path_buf(),
        message: format!("{what} decodes to {} bytes; expected 32", bytes.len()),
    })
}

/// Read a secret key file written by [`write_key_pair`].
pub fn read_secret_key(path: &Path) -> Result<SigningKey, SignError> {
    let text = std::fs::read_to_string(path).map_err(|source| SignError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut words = text.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some(SECRET_TAG), Some(b64), None) => Ok(SigningKey::from_bytes(&decode_32(
            b64,
            "the secret key",
            path,
        )?)),
        (Some(PUBLIC_TAG), ..) => Err(SignError::KeyFormat {
            path: path.to_path_buf(),
            message: "this is a public key; sign with the secret key file (the one without .pub)"
                .into(),
        }),
        _ => Err(SignError::KeyFormat {
            path: path.to_path_buf(),
            message: format!(
                "expected one line `{SECRET_TAG} <base64>`, as written by `kforge key generate`"
            ),
        }),
    }
}

/// Parse one public key line `kforge-ed25519 <base64> [comment]`; `origin` names where it came from.
pub fn parse_public_key(line: &str, origin: &Path) -> Result<VerifyingKey, SignError> {
    let mut words = line.split_whitespace();
    let (Some(PUBLIC_TAG), Some(b64)) = (words.next(), words.next()) else {
        return Err(SignError::KeyFormat {
            path: origin.to_path_buf(),
            message: format!(
                "expected a public key line `{PUBLIC_TAG} <base64> [comment]` (the content of KEY.pub), got \
                 {line:?}"
            ),
        });
    };
    let bytes = decode_32(b64, "the public key", origin)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| SignError::KeyFormat {
        path: origin.to_path_buf(),
        message: "the public key is not a valid ed25519 point".into(),
    })
}

/// Read a `KEY.pub` file.
pub fn read_public_key(path: &Path) -> Result<VerifyingKey, SignError> {
    let text = std::fs::read_to_string(path).map_err(|source| SignError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_public_key(text.trim(), path)
}
