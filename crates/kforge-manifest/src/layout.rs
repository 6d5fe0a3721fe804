//! Layout rules of a kernel project: every listed path stays inside the project directory (also through
//! `..` and symlinks) and exists; the python package directory exists and is not nested in itself.

use std::path::{Component, Path, PathBuf};

/// Checks paths written in `build.toml` against one project directory.
pub(crate) struct PathRules {
    /// The canonical project directory.
    pub(crate) root: PathBuf,
}

pub(crate) struct PathError {
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) label: &'static str,
    pub(crate) help: String,
}

impl PathRules {
    /// `path` as written in build.toml; `file` = it must be a regular file (else a directory).
    pub(crate) fn check(&self, path: &str, file: bool) -> Result<(), PathError> {
        let what = if file { "file" } else { "directory" };
        let escape = |message: String| {
            PathError {
            code: "layout::path-escapes",
            message,
            label: "outside the project",
            help: "paths in build.toml are relative to the project directory and must stay inside it; copy or vendor the file into the project".to_string(),
        }
        };
        if path.is_empty() {
            return Err(PathError {
                code: "layout::empty-path",
                message: "empty path".to_string(),
                label: "empty",
                help: "remove the empty entry".to_string(),
            });
        }
        let p = Path::new(path);
        if p.is_absolute() || path.starts_with('\\') || path.starts_with('~') {
            return Err(escape(format!(
                "path `{path}` is absolute; it must be relative to the project directory"
            )));
        }
        // Lexical check first: `a/../../x` leaves the project even if nothing exists there.
        let mut depth = 0usize;
        for c in p.components() {
            match c {
                Component::ParentDir if depth == 0 => {
                    return Err(escape(format!(
                        "path `{path}` leaves the project directory through `..`"
                    )));
                }
                Component::ParentDir => depth -= 1,
                Component::Normal(_) => depth += 1,
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => {
                    return Err(escape(format!("path `{path}` is absolute")));
                }
            }
        }
        let full = self.root.join(p);
        if std::fs::symlink_metadata(&full).is_err() {
            return Err(PathError {
                code: "layout::missing-path",
                message: format!("{what} `{path}` does not exist"),
                label: "no such file",
                help: missing_help(&self.root, p, file),
            });
        }
        let canon = match full.canonicalize() {
            Ok(c) => c,
            Err(e) => {
                return Err(PathError {
                    code: "layout::missing-path",
                    message: format!("{what} `{path}` cannot be resolved: {e}"),
                    label: "unresolvable",
                    help: "fix or remove the broken symlink".to_string(),
                });
            }
        };
        if !canon.starts_with(&self.root) {
            return Err(escape(format!(
                "path `{path}` resolves through a symlink to {}, outside the project directory",
                canon.display()
            )));
        }
        let is_file = canon.is_file();
        if file && !is_file {
            return Err(PathError {
                code: "layout::not-a-file",
                message: format!("`{path}` is a directory; `src` lists files"),
                label: "a directory",
                help: "list the source and header files themselves (directories go in `include`)"
                    .to_string(),
            });
        }
        if !file && is_file {
            return Err(PathError {
                code: "layout::not-a-directory",
                message: format!("`{path}` is a file; `include` lists directories"),
                label: "a file",
                help: "list the directory that contains the header".to_string(),
            });
        }
        Ok(())
    }
}

/// "did you mean" among the siblings of a missing path.
fn missing_help(root: &Path, p: &Path, file: bool) -> String {
    let parent = p.parent().unwrap_or(Path::new(""));
    let name = p.file_name().map(|n| n.to_string_lossy().to_string());
    let siblings: Vec<String> = std::fs::read_dir(root.join(parent))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    if let Some(name) = name
        && let Some(s) = crate::parse::did_you_mean(&name, siblings.iter().map(String::as_str))
    {
        return format!("did you mean `{}`?", parent.join(s).display());
    }
    if file {
        "create the file, or fix the path (relative to the project directory)".to_string()
    } else {
        "create the directory, or fix the path (relative to the project directory)".to_string()
    }
}

/// Project-level layout problems (message, help) that have no place in build.toml.
/// `name` is the kernel name of `[general]`, `ext` the framework's directory (`torch-ext`/`tvm-ffi-ext`).
pub(crate) fn check_package_dir(
    root: &Path,
    name: &str,
    ext: &str,
) -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    let py = name.replace('-', "_");
    let pkg = Path::new(ext).join(&py);
    let init = pkg.join("__init__.py");
    if !root.join(&init).is_file() {
        out.push((
            "layout::missing-package",
            format!("python package file `{}` does not exist", init.display()),
            format!(
                "the python package of kernel `{}` lives in `{}/`; create `{}` (it re-exports the ops)",
                name,
                pkg.display(),
                init.display()
            ),
        ));
    } else if let Ok(canon) = root.join(&pkg).canonicalize()
        && !canon.starts_with(root)
    {
        out.push((
                "layout::path-escapes",
                format!(
                    "python package `{}` resolves through a symlink to {}, outside the project directory",
                    pkg.display(),
                    canon.display()
                ),
                "keep the package inside the project directory".to_string(),
            ));
    }
    let nested = pkg.join(&py);
    if std::fs::symlink_metadata(root.join(&nested)).is_ok() {
        out.push((
            "layout::nested-package",
            format!("`{}` must not exist", nested.display()),
            format!(
                "the package is `{}/` itself; move the files of `{}` up one level",
                pkg.display(),
                nested.display()
            ),
        ));
    }
    out
}
