//! Content-addressed blob storage behind a trait; the default keeps `blobs/<aa>/<sha256>` on the filesystem.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;

use sha1::Sha1;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::model::BlobInfo;

/// A store of immutable blobs keyed by the lowercase hex sha256 of their bytes.
pub trait BlobStore: Send + Sync + 'static {
    /// The blob `sha256`, if stored (and complete).
    fn stat(&self, sha256: &str) -> io::Result<Option<BlobInfo>>;

    /// Stream `reader` (exactly `size` bytes) into the store. With `expect_sha256`, content with another
    /// digest is refused and discarded. A blob becomes visible only once complete and durable.
    fn put(
        &self,
        reader: &mut dyn Read,
        size: u64,
        expect_sha256: Option<&str>,
    ) -> Result<BlobInfo, PutError>;

    /// `len` bytes of blob `sha256` from byte `start`, as an async reader.
    fn open_range(
        &self,
        sha256: &str,
        start: u64,
        len: u64,
    ) -> io::Result<Pin<Box<dyn AsyncRead + Send>>>;

    /// Every stored blob with its size and age (time since it was stored).
    fn list(&self) -> io::Result<Vec<(String, u64, std::time::Duration)>>;

    /// Delete a blob (garbage collection; only for blobs no commit references).
    fn remove(&self, sha256: &str) -> io::Result<()>;
}

#[derive(Debug, thiserror::Error)]
pub enum PutError {
    #[error("blob storage: {0}")]
    Io(#[from] io::Error),
    #[error("the body has {actual} bytes but {expected} were announced")]
    SizeMismatch { expected: u64, actual: u64 },
    #[error("the content's sha256 is {actual}, not the announced {expected}")]
    DigestMismatch { expected: String, actual: String },
}

/// Is `s` 64 lowercase hex digits?
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Filesystem blob store. Each blob has a sidecar `<sha256>.meta` ("<size> <git sha1>") written before the
/// blob itself is renamed into place, so a visible blob always has its metadata.
#[derive(Debug, Clone)]
pub struct FsBlobStore {
    root: PathBuf,
}

impl FsBlobStore {
    /// Open (creating if needed) a store under `root`. Leftover temp files from a crash are removed.
    pub fn open(root: &Path) -> io::Result<Self> {
        let store = Self {
            root: root.to_owned(),
        };
        fs::create_dir_all(store.root.join("blobs"))?;
        let tmp = store.tmp_dir();
        if tmp.exists() {
            // Partial uploads from an interrupted process are never referenced by a commit.
            fs::remove_dir_all(&tmp)?;
        }
        fs::create_dir_all(tmp)?;
        Ok(store)
    }

    fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Where the blob `sha256` lives, or `None` if `sha256` is not 64 lowercase hex digits.
    pub fn path_of(&self, sha256: &str) -> Option<PathBuf> {
        is_sha256(sha256).then(|| self.root.join("blobs").join(&sha256[..2]).join(sha256))
    }

    fn meta_path(blob: &Path) -> PathBuf {
        blob.with_extension("meta")
    }
}

/// Remove a temp file when dropped unless it was renamed into place.
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl BlobStore for FsBlobStore {
    fn stat(&self, sha256: &str) -> io::Result<Option<BlobInfo>> {
        let Some(path) = self.path_of(sha256) else {
            return Ok(None);
        };
        if !path.is_file() {
            return Ok(None);
        }
        let meta = fs::read_to_string(Self::meta_path(&path))?;
        let (size, sha1) = meta
            .trim()
            .split_once(' ')
            .ok_or_else(|| io::Error::other(format!("corrupt blob metadata for {sha256}")))?;
        Ok(Some(BlobInfo {
            sha256: sha256.to_owned(),
            sha1: sha1.to_owned(),
            size: size
                .parse()
                .map_err(|_| io::Error::other(format!("corrupt blob size for {sha256}")))?,
        }))
    }

    fn put(
        &self,
        reader: &mut dyn Read,
        size: u64,
        expect_sha256: Option<&str>,
    ) -> Result<BlobInfo, PutError> {
        let (mut file, path) = tempfile_in(&self.tmp_dir())?;
        let mut tmp = TempFile { path, keep: false };
        let mut sha256 = Sha256::new();
        // The git blob id needs the size up front, which is why callers announce it.
        let mut sha1 = Sha1::new();
        sha1.update(format!("blob {size}\0").as_bytes());
        let mut written = 0u64;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            written += n as u64;
            if written > size {
                return Err(PutError::SizeMismatch {
                    expected: size,
                    actual: written,
                });
            }
            sha256.update(&buf[..n]);
            sha1.update(&buf[..n]);
            file.write_all(&buf[..n])?;
        }
        if written != size {
            return Err(PutError::SizeMismatch {
                expected: size,
                actual: written,
            });
        }
        let info = BlobInfo {
            sha256: hex::encode(sha256.finalize()),
            sha1: hex::encode(sha1.finalize()),
            size,
        };
        if let Some(expected) = expect_sha256
            && expected != info.sha256
        {
            return Err(PutError::DigestMismatch {
                expected: expected.to_owned(),
                actual: info.sha256,
            });
        }
        let dest = self
            .path_of(&info.sha256)
            .expect("a sha256 hex is a valid key");
        if dest.is_file() {
            return Ok(info);
        }
        file.sync_all()?;
        drop(file);
        fs::create_dir_all(dest.parent().expect("blob path has a parent"))?;
        let (mut meta, meta_tmp) = tempfile_in(&self.tmp_dir())?;
        let meta_tmp = TempFile {
            path: meta_tmp,
            keep: false,
        };
        write!(meta, "{} {}", info.size, info.sha1)?;
        meta.sync_all()?;
        fs::rename(&meta_tmp.path, Self::meta_path(&dest))?;
        fs::rename(&tmp.path, &dest)?;
        tmp.keep = true;
        // Make both renames durable before a commit can reference the blob.
        fs::File::open(dest.parent().expect("blob path has a parent"))?.sync_all()?;
        Ok(info)
    }

    fn open_range(
        &self,
        sha256: &str,
        start: u64,
        len: u64,
    ) -> io::Result<Pin<Box<dyn AsyncRead + Send>>> {
        let path = self
            .path_of(sha256)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not a sha256"))?;
        let mut file = fs::File::open(path)?;
        if start > 0 {
            file.seek(SeekFrom::Start(start))?;
        }
        Ok(Box::pin(tokio::fs::File::from_std(file).take(len)))
    }

    fn list(&self) -> io::Result<Vec<(String, u64, std::time::Duration)>> {
        let mut out = Vec::new();
        for shard in fs::read_dir(self.root.join("blobs"))? {
            for entry in fs::read_dir(shard?.path())? {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if !is_sha256(&name) {
                    continue; // `.meta` sidecars
                }
                let meta = entry.metadata()?;
                let age = meta.modified()?.elapsed().unwrap_or_default();
                out.push((name, meta.len(), age));
            }
        }
        out.sort();
        Ok(out)
    }

    fn remove(&self, sha256: &str) -> io::Result<()> {
        let path = self
            .path_of(sha256)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a sha256"))?;
        // Blob first: a blob without its sidecar would be unreadable, a sidecar alone is ignored.
        fs::remove_file(&path)?;
        match fs::remove_file(Self::meta_path(&path)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
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

    fn put(store: &FsBlobStore, bytes: &[u8]) -> Result<BlobInfo, PutError> {
        store.put(&mut &bytes[..], bytes.len() as u64, None)
    }

    #[test]
    fn put_is_content_addressed_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let info = put(&store, b"hello").unwrap();
        assert_eq!(
            info.sha256,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        // `git hash-object` of "hello" (no newline).
        assert_eq!(info.sha1, "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0");
        assert_eq!(info.size, 5);
        assert_eq!(store.stat(&info.sha256).unwrap(), Some(info.clone()));
        assert_eq!(
            fs::read(store.path_of(&info.sha256).unwrap()).unwrap(),
            b"hello"
        );
        assert_eq!(put(&store, b"hello").unwrap(), info);
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn refuses_wrong_size_or_digest_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        assert!(matches!(
            store.put(&mut &b"hello"[..], 4, None),
            Err(PutError::SizeMismatch {
                expected: 4,
                actual: 5
            })
        ));
        assert!(matches!(
            store.put(&mut &b"hello"[..], 6, None),
            Err(PutError::SizeMismatch {
                expected: 6,
                actual: 5
            })
        ));
        assert!(matches!(
            store.put(&mut &b"hello"[..], 5, Some(&"0".repeat(64))),
            Err(PutError::DigestMismatch { .. })
        ));
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
        assert_eq!(fs::read_dir(dir.path().join("blobs")).unwrap().count(), 0);
    }

    #[test]
    fn rejects_malformed_keys() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        assert!(store.path_of("../../etc/passwd").is_none());
        assert!(store.path_of(&"A".repeat(64)).is_none());
        assert_eq!(store.stat("00").unwrap(), None);
    }

    #[tokio::test]
    async fn ranges_read_the_requested_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let info = put(&store, b"0123456789").unwrap();
        let mut out = String::new();
        store
            .open_range(&info.sha256, 3, 4)
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        assert_eq!(out, "3456");
    }
}
