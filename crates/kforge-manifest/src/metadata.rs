//! `build/<variant>/metadata.json` in the HF format (kebab-case; unknown fields tolerated on read) and
//! the `digest` over a variant directory.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256, Sha512};

use crate::{Backend, KernelDepend, Manifest};

/// The contents of `metadata.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Metadata {
    /// The kernel name (dash form).
    pub name: String,
    /// The ops/module name `_<python_name>_<backend>_<uid>`.
    pub id: String,
    pub version: u64,
    pub license: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default)]
    pub python_depends: Vec<String>,
    /// Always written, possibly empty.
    #[serde(default)]
    pub kernel_depends: Vec<KernelDepend>,
    pub backend: BackendInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

/// `backend: { "type": "cuda", "archs": [...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendInfo {
    #[serde(rename = "type")]
    pub kind: Backend,
    /// CUDA/ROCm: the union of compiled archs, sorted and deduplicated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archs: Option<Vec<String>>,
}

/// `digest: { "algorithm": "sha256", "files": { "relpath": "<base64 hash>" } }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    pub algorithm: String,
    pub files: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    #[serde(
        rename = "kernel-builder",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kernel_builder: Option<BuilderProvenance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelProvenance>,
}

/// The tool that built the variant. `commit` and `dirty` appear together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuilderProvenance {
    pub version: String,
    #[serde(default, alias = "sha", skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty: Option<bool>,
}

/// The kernel source the variant was built from (full 40- or 64-hex commit id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelProvenance {
    pub commit: String,
    pub dirty: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is not valid metadata.json (line {line}, column {column}): {message}")]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

fn full_commit(c: &str) -> bool {
    (c.len() == 40 || c.len() == 64) && c.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Metadata {
    /// The metadata of one variant of `manifest` built for `backend`.
    pub fn for_variant(
        manifest: &Manifest,
        id: &str,
        backend: Backend,
        archs: Option<Vec<String>>,
    ) -> Self {
        let g = &manifest.general;
        let archs = archs.map(|mut a| {
            a.sort();
            a.dedup();
            a
        });
        Metadata {
            name: g.name.clone(),
            id: id.to_string(),
            version: g.version.unwrap_or(1),
            license: g.license.clone().unwrap_or_default(),
            upstream: g.upstream.clone(),
            source: g.source.clone(),
            python_depends: g.python_depends_for(backend),
            kernel_depends: g.kernel_depends_for(backend),
            backend: BackendInfo {
                kind: backend,
                archs,
            },
            digest: None,
            provenance: None,
        }
    }

    /// Parse and check the invariants serde cannot express (commit ids, digest algorithm).
    pub fn from_json(text: &str, path: &Path) -> Result<Self, MetadataError> {
        let m: Metadata = serde_json::from_str(text).map_err(|e| MetadataError::Json {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        let invalid = |message: String| MetadataError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        if let Some(d) = &m.digest
            && d.algorithm != "sha256"
            && d.algorithm != "sha512"
        {
            return Err(invalid(format!(
                "digest.algorithm is \"{}\"; expected \"sha256\" or \"sha512\"",
                d.algorithm
            )));
        }
        if let Some(p) = &m.provenance {
            if let Some(b) = &p.kernel_builder {
                if b.commit.is_some() != b.dirty.is_some() {
                    return Err(invalid(
                        "provenance.kernel-builder sets only one of `commit` and `dirty`; they appear together".into(),
                    ));
                }
                if let Some(c) = b.commit.as_deref().filter(|c| !full_commit(c)) {
                    return Err(invalid(format!(
                        "provenance.kernel-builder.commit \"{c}\" is not a full 40- or 64-hex commit id"
                    )));
                }
            }
            if let Some(k) = p.kernel.as_ref().filter(|k| !full_commit(&k.commit)) {
                return Err(invalid(format!(
                    "provenance.kernel.commit \"{}\" is not a full 40- or 64-hex commit id",
                    k.commit
                )));
            }
        }
        Ok(m)
    }

    pub fn read(path: &Path) -> Result<Self, MetadataError> {
        let text = std::fs::read_to_string(path).map_err(|source| MetadataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text, path)
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("metadata serializes");
        s.push('\n');
        s
    }

    /// Write via a temporary file and rename, so a reader never sees half a file.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        crate::write_atomic(path, self.to_json().as_bytes())
    }
}

/// Files the digest leaves out: the top-level metadata (which holds the digest), the signatures over
/// it (HF's sigstore bundle and kforge's ed25519 signature) and bytecode.
fn digest_excluded(rel: &str) -> bool {
    rel == "metadata.json"
        || rel == "metadata.json.sigstore"
        || rel == "metadata.json.kforge-sig"
        || rel.ends_with(".pyc")
        || rel.split('/').any(|c| c == "__pycache__")
}

/// sha256 over every regular file of a variant directory (symlinks resolved), keyed by `/`-separated
/// relative path in sorted order.
pub fn digest_dir(dir: &Path) -> io::Result<Digest> {
    digest_dir_with(dir, "sha256")
}

/// As [`digest_dir`] with `algorithm` = "sha256" or "sha512".
pub fn digest_dir_with(dir: &Path, algorithm: &str) -> io::Result<Digest> {
    if algorithm != "sha256" && algorithm != "sha512" {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("unsupported digest algorithm \"{algorithm}\" (expected sha256 or sha512)"),
        ));
    }
    let mut rels = Vec::new();
    walk(dir, "", &mut rels)?;
    let mut files = BTreeMap::new();
    for rel in rels {
        let data = std::fs::read(dir.join(&rel))?;
        let hash = if algorithm == "sha256" {
            Sha256::digest(&data).to_vec()
        } else {
            Sha512::digest(&data).to_vec()
        };
        files.insert(rel, base64::engine::general_purpose::STANDARD.encode(hash));
    }
    Ok(Digest {
        algorithm: algorithm.to_string(),
        files,
    })
}

fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) -> io::Result<()> {
    for e in std::fs::read_dir(dir.join(rel))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().to_string();
        let r = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if digest_excluded(&r) {
            continue;
        }
        // `metadata` follows symlinks, as the HF digest does.
        let meta = std::fs::metadata(e.path())?;
        if meta.is_dir() {
            walk(dir, &r, out)?;
        } else if meta.is_file() {
            out.push(r);
        }
    }
    Ok(())
}

/// One difference between a recorded digest and a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestMismatch {
    Missing(String),
    Unexpected(String),
    Changed(String),
}

impl std::fmt::Display for DigestMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DigestMismatch::Missing(p) => write!(f, "{p}: listed in the digest but missing"),
            DigestMismatch::Unexpected(p) => write!(f, "{p}: present but not in the digest"),
            DigestMismatch::Changed(p) => write!(f, "{p}: hash differs from the digest"),
        }
    }
}

/// Compare `dir` with `expected` as a set; empty when they agree.
pub fn verify_digest(dir: &Path, expected: &Digest) -> io::Result<Vec<DigestMismatch>> {
    let actual = digest_dir_with(dir, &expected.algorithm)?;
    let mut out = Vec::new();
    for (p, h) in &expected.files {
        match actual.files.get(p) {
            None => out.push(DigestMismatch::Missing(p.clone())),
            Some(a) if a != h => out.push(DigestMismatch::Changed(p.clone())),
            Some(_) => {}
        }
    }
    for p in actual.files.keys() {
        if !expected.files.contains_key(p) {
            out.push(DigestMismatch::Unexpected(p.clone()));
        }
    }
    Ok(out)
}
