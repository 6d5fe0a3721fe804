//! Content-addressed blob store on the filesystem: `blobs/<aa>/<sha256>`, written to `tmp/` then renamed.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Blobs keyed by the lowercase hex sha256 of their bytes. A blob is visible only once complete.
#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
}

impl BlobStore {
    /// Open (creating if needed) a store under `root`. Leftover temp files from a crash are removed.
    pub fn open(root: &Path) -> io::Result<Self> {
        let store = Self {
            root: root.to_owned(),
        };
        fs::create_dir_all(store.blobs_dir())?;
        let tmp = store.tmp_dir();
        if tmp.exists() {
            // Partial uploads from an interrupted process are never referenced by a commit.
            fs::remove_dir_all(&tmp)?;
        }
        fs::create_dir_all(tmp)?;
        Ok(store)
    }

    fn blobs_dir(&self) -> PathBuf {
        self.root.join("blobs")
    }

    fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Where the blob `sha256` lives, or `None` if `sha256` is not 64 lowercase hex digits.
    pub fn path_of(&self, sha256: &str) -> Option<PathBuf> {
        let valid = sha256.len() == 64
            && sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| self.blobs_dir().join(&sha256[..2]).join(sha256))
    }

    pub fn contains(&self, sha256: &str) -> bool {
        self.path_of(sha256).is_some_and(|p| p.is_file())
    }

    /// Stream `reader` into the store; returns `(sha256, size)`. Durable (fsync) before the rename.
    pub fn put(&self, mut reader: impl Read) -> io::Result<(String, u64)> {
        let mut tmp = tempfile_in(&self.tmp_dir())?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = fs::remove_file(&tmp.1);
                    return Err(e);
                }
            };
            hasher.update(&buf[..n]);
            tmp.0.write_all(&buf[..n])?;
            size += n as u64;
        }
        tmp.0.sync_all()?;
        let sha = hex::encode(hasher.finalize());
        let dest = self
            .path_of(&sha)
            .expect("sha256 hex is always a valid key");
        fs::create_dir_all(dest.parent().expect("blob path has a parent"))?;
        fs::rename(&tmp.1, &dest)?;
        Ok((sha, size))
    }

    /// Convenience for small in-memory content.
    pub fn put_bytes(&self, bytes: &[u8]) -> io::Result<(String, u64)> {
        self.put(bytes)
    }
}

/// A uniquely named file in `dir`, created exclusively.
fn tempfile_in(dir: &Path) -> io::Result<(fs::File, PathBuf)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{}-{n}.part", std::process::id()));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((f, path)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_is_content_addressed_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path()).unwrap();
        let (sha, size) = store.put_bytes(b"hello").unwrap();
        assert_eq!(
            sha,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(size, 5);
        assert!(store.contains(&sha));
        assert_eq!(fs::read(store.path_of(&sha).unwrap()).unwrap(), b"hello");
        assert_eq!(store.put_bytes(b"hello").unwrap().0, sha);
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn rejects_malformed_keys() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path()).unwrap();
        assert!(store.path_of("../../etc/passwd").is_none());
        assert!(store.path_of(&"A".repeat(64)).is_none());
        assert!(!store.contains("00"));
    }
}
