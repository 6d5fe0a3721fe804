//! The content-addressed cache (~/.cache/kforge or $KFORGE_CACHE): unpacked toolchains and build actions.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::{LockedPackage, ToolchainError, io_err};

/// Handle on the cache root. Every entry is created in `tmp/` and renamed into place, under a file lock.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

/// Sizes per area, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub toolchains: u64,
    pub toolchain_count: usize,
    pub actions: u64,
    pub action_count: usize,
    pub tmp: u64,
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Cache {
    /// `$KFORGE_CACHE`, else `$XDG_CACHE_HOME/kforge`, else `~/.cache/kforge`.
    pub fn from_env() -> Self {
        let root = if let Some(dir) = std::env::var_os("KFORGE_CACHE") {
            PathBuf::from(dir)
        } else if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
            PathBuf::from(dir).join("kforge")
        } else {
            let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
            PathBuf::from(home).join(".cache/kforge")
        };
        Self { root }
    }

    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where kforge-build keeps cached action outputs.
    pub fn actions_dir(&self) -> PathBuf {
        self.root.join("actions")
    }

    /// A fresh, unique directory under `tmp/` on the cache's file system (so renames out of it are atomic).
    pub fn temp_dir(&self, label: &str) -> Result<PathBuf, ToolchainError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        // The counter keeps threads of one process apart when the clock is coarse.
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self
            .root
            .join("tmp")
            .join(format!("{label}-{}-{nanos}.{n}", std::process::id()));
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        Ok(dir)
    }

    /// Run `f` while holding an exclusive lock named `name` (blocks other kforge processes on the same key).
    pub fn with_lock<T>(
        &self,
        name: &str,
        f: impl FnOnce() -> Result<T, ToolchainError>,
    ) -> Result<T, ToolchainError> {
        let dir = self.root.join("locks");
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let path = dir.join(format!("{name}.lock"));
        let file = File::create(&path).map_err(io_err(&path))?;
        file.lock().map_err(io_err(&path))?;
        let out = f();
        // Unlock also happens on drop; explicit for clarity.
        let _ = file.unlock();
        out
    }

    /// Download, verify and unpack `packages` into one merged directory, once; returns its path.
    pub fn ensure_unpacked(&self, packages: &[&LockedPackage]) -> Result<PathBuf, ToolchainError> {
        let mut key_src = String::new();
        for p in packages {
            key_src.push_str(&format!("{}:{};", p.sha256, p.extract.join(",")));
        }
        let key = sha256_hex(key_src.as_bytes())[..24].to_string();
        let label = packages.first().map(|p| p.name.as_str()).unwrap_or("set");
        let dest = self.root.join("toolchains").join(format!("{label}-{key}"));
        if dest.is_dir() {
            return Ok(dest);
        }
        self.with_lock(&format!("toolchain-{key}"), || {
            if dest.is_dir() {
                return Ok(dest.clone());
            }
            let work = self.temp_dir(label)?;
            let result = (|| {
                let out = work.join("out");
                fs::create_dir_all(&out).map_err(io_err(&out))?;
                for p in packages {
                    let wheel = download(p, &work)?;
                    verify_sha256(&wheel, p)?;
                    unpack(&wheel, p, &out)?;
                    fs::remove_file(&wheel).map_err(io_err(&wheel))?;
                }
                let parent = self.root.join("toolchains");
                fs::create_dir_all(&parent).map_err(io_err(&parent))?;
                fs::rename(&out, &dest).map_err(io_err(&dest))
            })();
            let _ = fs::remove_dir_all(&work);
            result.map(|()| dest.clone())
        })
    }

    pub fn stats(&self) -> CacheStats {
        let (toolchains, toolchain_count) = dir_size(&self.root.join("toolchains"));
        let (actions, action_count) = dir_size(&self.actions_dir());
        let (tmp, _) = dir_size(&self.root.join("tmp"));
        CacheStats {
            toolchains,
            toolchain_count,
            actions,
            action_count,
            tmp,
        }
    }

    /// Remove leftovers of interrupted work (`tmp/`) and, oldest first, action entries beyond `max_action_bytes`.
    /// Returns the bytes freed. Toolchains are kept (they are pinned and expensive to fetch).
    pub fn gc(&self, max_action_bytes: u64) -> Result<u64, ToolchainError> {
        self.with_lock("gc", || {
            let mut freed = 0;
            let tmp = self.root.join("tmp");
            if let Ok(entries) = fs::read_dir(&tmp) {
                for entry in entries.flatten() {
                    let path = entry.path();
                    // A live process may still be using its temp dir: its pid is in the name.
                    if is_live_temp(&path) {
                        continue;
                    }
                    freed += dir_size(&path).0;
                    let _ = fs::remove_dir_all(&path).or_else(|_| fs::remove_file(&path));
                }
            }
            let mut entries: Vec<(std::time::SystemTime, PathBuf, u64)> = Vec::new();
            if let Ok(rd) = fs::read_dir(self.actions_dir()) {
                for e in rd.flatten() {
                    let path = e.path();
                    let time = e
                        .metadata()
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    let size = dir_size(&path).0;
                    entries.push((time, path, size));
                }
            }
            entries.sort();
            let mut total: u64 = entries.iter().map(|e| e.2).sum();
            for (_, path, size) in entries {
                if total <= max_action_bytes {
                    break;
                }
                fs::remove_dir_all(&path).map_err(io_err(&path))?;
                total -= size;
                freed += size;
            }
            Ok(freed)
        })
    }
}

fn is_live_temp(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let mut parts = name.rsplit('-');
    let _nanos = parts.next();
    match parts.next().and_then(|p| p.parse::<u32>().ok()) {
        Some(pid) => pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists(),
        None => false,
    }
}

fn dir_size(path: &Path) -> (u64, usize) {
    let Ok(rd) = fs::read_dir(path) else {
        return (0, 0);
    };
    let mut total = 0;
    let mut count = 0;
    for e in rd.flatten() {
        count += 1;
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => total += dir_size(&p).0,
            Ok(_) => total += e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => {}
        }
    }
    (total, count)
}

/// The python used for `pip download`: $KFORGE_PYTHON, the active venv's, or `python3`.
pub fn python() -> String {
    if let Ok(p) = std::env::var("KFORGE_PYTHON") {
        return p;
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        return Path::new(&venv).join("bin/python").display().to_string();
    }
    "python3".to_string()
}

/// pip selection flags that make the download independent of the host interpreter: the wheel's own tags.
fn tag_args(file: &str) -> Vec<String> {
    let stem = file.trim_end_matches(".whl");
    let parts: Vec<&str> = stem.split('-').collect();
    let mut args = Vec::new();
    if parts.len() < 5 {
        return args;
    }
    let (py, abi, plat) = (
        parts[parts.len() - 3],
        parts[parts.len() - 2],
        parts[parts.len() - 1],
    );
    if let Some(ver) = py.strip_prefix("cp") {
        let (maj, min) = ver.split_at(1);
        args.extend(["--implementation".into(), "cp".into()]);
        args.extend(["--python-version".into(), format!("{maj}.{min}")]);
        args.extend(["--abi".into(), abi.to_string()]);
    }
    for p in plat.split('.') {
        args.extend(["--platform".into(), p.to_string()]);
    }
    args
}

fn download(p: &LockedPackage, work: &Path) -> Result<PathBuf, ToolchainError> {
    let py = python();
    let fail = |detail: String| ToolchainError::Download {
        package: p.name.clone(),
        version: p.version.clone(),
        python: py.clone(),
        detail,
    };
    let dl = work.join("dl");
    tracing::info!(package = %p.name, version = %p.version, "downloading");
    let out = Command::new(&py)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
        ])
        .args(tag_args(&p.file))
        .arg(format!("{}=={}", p.name, p.version))
        .arg("-d")
        .arg(&dl)
        .output()
        .map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(fail(tail.into_iter().rev().collect::<Vec<_>>().join(" | ")));
    }
    let wheel = dl.join(&p.file);
    if !wheel.is_file() {
        let got: Vec<String> = fs::read_dir(&dl)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        return Err(fail(format!("expected {}, pip saved {got:?}", p.file)));
    }
    Ok(wheel)
}

fn verify_sha256(wheel: &Path, p: &LockedPackage) -> Result<(), ToolchainError> {
    let mut file = File::open(wheel).map_err(io_err(wheel))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_err(wheel))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let actual = hex(&hasher.finalize());
    if actual != p.sha256 {
        return Err(ToolchainError::HashMismatch {
            file: p.file.clone(),
            expected: p.sha256.clone(),
            actual,
        });
    }
    Ok(())
}

fn unpack(wheel: &Path, p: &LockedPackage, out: &Path) -> Result<(), ToolchainError> {
    use std::os::unix::fs::PermissionsExt;
    let bad = |detail: String| ToolchainError::Unpack {
        file: p.file.clone(),
        detail,
    };
    let file = File::open(wheel).map_err(io_err(wheel))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
        let Some(name) = entry.enclosed_name() else {
            return Err(bad(format!("unsafe path {:?}", entry.name())));
        };
        let name = name.to_string_lossy().replace('\\', "/");
        if !p.extract.iter().any(|pre| name.starts_with(pre.as_str())) {
            continue;
        }
        let rel = name.strip_prefix(p.strip_prefix.as_str()).unwrap_or(&name);
        let target = out.join(rel);
        if entry.is_dir() {
            fs::create_dir_all(&target).map_err(io_err(&target))?;
            continue;
        }
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let mut f = File::create(&target).map_err(io_err(&target))?;
        std::io::copy(&mut entry, &mut f).map_err(io_err(&target))?;
        if let Some(mode) = entry.unix_mode() {
            fs::set_permissions(&target, fs::Permissions::from_mode(mode & 0o777))
                .map_err(io_err(&target))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_args_pin_interpreter_and_platforms() {
        let a = tag_args("torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl");
        assert_eq!(
            a,
            [
                "--implementation",
                "cp",
                "--python-version",
                "3.11",
                "--abi",
                "cp311",
                "--platform",
                "manylinux_2_28_x86_64"
            ]
        );
        let b =
            tag_args("nvidia_nvvm-13.0.88-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl");
        assert_eq!(
            b,
            [
                "--platform",
                "manylinux2010_x86_64",
                "--platform",
                "manylinux_2_12_x86_64"
            ]
        );
    }

    #[test]
    fn locked_crt_downloads_verifies_and_unpacks_once() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let pin = crate::locked_package("nvidia-cuda-crt").unwrap();
        let a = cache.ensure_unpacked(&[&pin]).unwrap();
        assert!(a.join("include/crt/host_defines.h").is_file());
        let b = cache.ensure_unpacked(&[&pin]).unwrap();
        assert_eq!(a, b);
        assert_eq!(cache.stats().toolchain_count, 1);
        assert_eq!(cache.stats().tmp, 0);

        let mut wrong = pin.clone();
        wrong.sha256 = "0".repeat(64);
        wrong.extract = vec!["nvidia/cu13/include/".into()]; // a different key, so it is fetched again
        let err = cache.ensure_unpacked(&[&wrong]).unwrap_err();
        assert!(matches!(err, ToolchainError::HashMismatch { .. }), "{err}");
        assert_eq!(
            cache.stats().toolchain_count,
            1,
            "nothing cached on mismatch"
        );
    }
}
