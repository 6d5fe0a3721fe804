//! Helpers shared by the kforge-cli integration tests (each test file is its own crate and uses a subset,
//! hence the `dead_code` allowance).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

use tempfile::TempDir;

/// A scratch directory under the system temp dir, removed on drop; `prefix` names it for debugging.
pub fn scratch(prefix: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .unwrap_or_else(|e| panic!("creating a scratch dir `{prefix}*`: {e}"))
}

/// The repository root (kernels/, tests/vectors/, ...).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A process's stdout and stderr as (lossy) text.
pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `from` copied to `to`, leaving out `build` outputs and `__pycache__` (so a copied project starts clean).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let name = e.file_name();
        if name == "build" || name == "__pycache__" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(&name));
        } else {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

/// A UTF-8 path as `&str` for argument lists.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
