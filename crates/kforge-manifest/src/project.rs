//! Loading a kernel project directory (`build.toml` + layout) and its unique id.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use sha2::{Digest as _, Sha256};

use crate::Manifest;
use crate::diag::{Problem, ProjectError};
use crate::layout::{PathRules, check_package_dir};
use crate::parse::Parser;

/// A validated kernel project.
#[derive(Debug, Clone)]
pub struct Project {
    /// The canonical project directory.
    pub root: PathBuf,
    pub manifest: Manifest,
    /// Problems that do not stop a build (an older edition, a kernel for an unlisted backend, ...).
    pub warnings: Vec<Problem>,
}

impl Project {
    pub fn build_toml(&self) -> PathBuf {
        self.root.join("build.toml")
    }
}

/// Parse `build.toml` text without touching the file system (no layout checks). Errors list every problem.
pub fn parse_manifest(text: &str, file: &Path) -> Result<(Manifest, Vec<Problem>), ProjectError> {
    let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut parser = Parser::new(Arc::new(text.to_string()), file, None);
    let manifest = parser.parse();
    finish(dir, manifest, parser.problems)
}

fn finish(
    dir: PathBuf,
    manifest: Option<Manifest>,
    mut problems: Vec<Problem>,
) -> Result<(Manifest, Vec<Problem>), ProjectError> {
    // Errors first, each group in file order.
    problems.sort_by_key(|p| (!p.is_error(), p.line_col));
    match manifest {
        Some(m) if !problems.iter().any(Problem::is_error) => Ok((m, problems)),
        _ => {
            if !problems.iter().any(Problem::is_error) {
                // The parser only returns no manifest after reporting an error; keep that invariant visible.
                problems.push(Problem::new(
                    "manifest::invalid",
                    &dir.join("build.toml"),
                    "build.toml could not be read as a kernel project",
                ));
            }
            Err(ProjectError { dir, problems })
        }
    }
}

/// Read, parse and validate `<dir>/build.toml` (editions 5, 4 and 3) and the project layout.
pub fn load_project(dir: &Path) -> Result<Project, ProjectError> {
    let file = dir.join("build.toml");
    let fail = |p: Problem| ProjectError {
        dir: dir.to_path_buf(),
        problems: vec![p],
    };
    let root = dir.canonicalize().map_err(|e| {
        fail(
            Problem::new(
                "project::missing-dir",
                dir,
                format!("cannot open project directory {}: {e}", dir.display()),
            )
            .with_help("pass the directory that contains build.toml"),
        )
    })?;
    let bytes = std::fs::read(&file).map_err(|e| {
        let help = if e.kind() == std::io::ErrorKind::NotFound {
            "a kernel project has a build.toml at its top; create one with `kforge init NAME`, or pass the right directory"
        } else {
            "make the file readable"
        };
        fail(Problem::new("project::unreadable", &file, format!("cannot read {}: {e}", file.display())).with_help(help))
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        fail(
            Problem::new(
                "project::not-utf8",
                &file,
                format!(
                    "{} is not UTF-8 (invalid byte at offset {})",
                    file.display(),
                    e.utf8_error().valid_up_to()
                ),
            )
            .with_help("save build.toml as UTF-8"),
        )
    })?;
    let rules = PathRules { root: root.clone() };
    let mut parser = Parser::new(Arc::new(text), &file, Some(&rules));
    let manifest = parser.parse();
    let mut problems = parser.problems;
    if let (Some(name), Some(ext)) = parser.package {
        let pkg = dir.join(ext).join(name.replace('-', "_"));
        for (code, message, help) in check_package_dir(&root, &name, ext) {
            problems.push(Problem::new(code, &pkg, message).with_help(help));
        }
    }
    let (manifest, warnings) = finish(dir.to_path_buf(), manifest, problems)?;
    Ok(Project {
        root,
        manifest,
        warnings,
    })
}

/// The kernel's unique id: the first 7 hex digits of the git tree hash of the project directory at HEAD,
/// plus `_dirty` when tracked files under it changed; outside git (or before the first commit of the
/// directory), 7 hex digits of a content hash of the project files.
pub fn project_id(root: &Path) -> String {
    git_tree_id(root).unwrap_or_else(|| content_id(root))
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn git_tree_id(root: &Path) -> Option<String> {
    let prefix = git(root, &["rev-parse", "--show-prefix"])?;
    let prefix = prefix.trim_end_matches('/');
    let rev = if prefix.is_empty() {
        "HEAD^{tree}".to_string()
    } else {
        format!("HEAD:{prefix}")
    };
    let tree = git(root, &["rev-parse", "--verify", "--quiet", &rev])?;
    if tree.len() < 7 || !tree.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let status = git(
        root,
        &["status", "--porcelain", "--untracked-files=no", "--", "."],
    )?;
    let dirty = if status.is_empty() { "" } else { "_dirty" };
    Some(format!("{}{dirty}", &tree[..7]))
}

/// Directories that hold outputs or caches, not project content.
const SKIP_DIRS: [&str; 5] = [".git", "build", "__pycache__", "target", ".venv"];

fn content_id(root: &Path) -> String {
    let mut files = Vec::new();
    collect_files(root, Path::new(""), &mut files);
    files.sort();
    let mut h = Sha256::new();
    for rel in files {
        let data = std::fs::read(root.join(&rel)).unwrap_or_default();
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        h.update((data.len() as u64).to_le_bytes());
        h.update(&data);
    }
    let digest = h.finalize();
    digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..7]
        .to_string()
}

fn collect_files(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(root.join(rel)) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let path = rel.join(&name);
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            if !SKIP_DIRS.contains(&name.to_string_lossy().as_ref()) {
                collect_files(root, &path, out);
            }
        } else if !name.to_string_lossy().ends_with(".pyc") {
            out.push(path);
        }
    }
}
