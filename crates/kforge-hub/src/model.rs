//! The hub's data model: repositories, commits, trees and refs, independent of how they are stored.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

/// The repository types this hub serves (`model` and `kernel`, as the `kernels` loader needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RepoType {
    Model,
    Kernel,
}

impl RepoType {
    /// The singular name used in `create_repo`'s `type` field and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            RepoType::Model => "model",
            RepoType::Kernel => "kernel",
        }
    }

    /// Parse the singular name (`model`, `kernel`).
    pub fn parse(name: &str) -> Option<RepoType> {
        match name {
            "model" => Some(RepoType::Model),
            "kernel" => Some(RepoType::Kernel),
            _ => None,
        }
    }

    /// The plural used under `/api/` (`models`, `kernels`).
    pub fn api_segment(self) -> &'static str {
        match self {
            RepoType::Model => "models",
            RepoType::Kernel => "kernels",
        }
    }

    /// The prefix of web and resolve URLs: none for models, `kernels/` for kernels.
    pub fn url_prefix(self) -> &'static str {
        match self {
            RepoType::Model => "",
            RepoType::Kernel => "kernels/",
        }
    }
}

/// Namespaces that cannot hold repositories because they are URL prefixes.
pub const RESERVED_NAMESPACES: [&str; 6] =
    ["api", "buckets", "datasets", "kernels", "models", "spaces"];

/// `type` + `namespace/name`: what identifies a repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepoKey {
    pub repo_type: RepoType,
    pub namespace: String,
    pub name: String,
}

impl RepoKey {
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl fmt::Display for RepoKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}/{}",
            self.repo_type.as_str(),
            self.namespace,
            self.name
        )
    }
}

/// Check a namespace or repository name the way the Hub does: letters, digits, `-`, `_`, `.`; no `--`/`..`.
pub fn validate_name(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 96
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && !name.ends_with(['-', '.'])
        && !name.contains("--")
        && !name.contains("..");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid {what} `{name}`: expected 1-96 letters, digits, `-`, `_` or `.`, starting with a letter \
             or digit, not ending in `-`/`.`, without `--` or `..`"
        ))
    }
}

/// A stored repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// Storage-internal id; never reused, so a deleted and re-created repo has fresh history.
    pub rowid: i64,
    pub key: RepoKey,
    pub private: bool,
    /// Unix seconds.
    pub created: i64,
}

/// An immutable commit: a full tree plus its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// 40 lowercase hex digits.
    pub id: String,
    pub tree_id: String,
    pub parent: Option<String>,
    pub title: String,
    pub message: String,
    pub author: String,
    /// Unix seconds.
    pub created: i64,
}

/// A file in a tree: the content's sha256 (the blob key and the etag) and git blob sha1 (the Hub's `oid`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub sha256: String,
    pub sha1: String,
    pub size: u64,
}

/// A blob as stored: its two digests and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobInfo {
    pub sha256: String,
    pub sha1: String,
    pub size: u64,
}

impl From<&BlobInfo> for FileEntry {
    fn from(b: &BlobInfo) -> Self {
        FileEntry {
            sha256: b.sha256.clone(),
            sha1: b.sha1.clone(),
            size: b.size,
        }
    }
}

/// Every file of a commit, keyed by its full path. Immutable once stored; its id is a digest of its content.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tree {
    pub files: BTreeMap<String, FileEntry>,
}

/// One item of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listing<'a> {
    File(&'a str, &'a FileEntry),
    Dir(String),
}

impl Tree {
    /// The canonical serialization (sorted by path), which is also what the tree id digests.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.files).expect("a map of strings serializes")
    }

    pub fn from_json(text: &str) -> serde_json::Result<Tree> {
        Ok(Tree {
            files: serde_json::from_str(text)?,
        })
    }

    pub fn id(&self) -> String {
        hex::encode(Sha1::digest(self.to_json().as_bytes()))
    }

    /// Is `dir` ("" for the root) a directory of this tree?
    pub fn is_dir(&self, dir: &str) -> bool {
        dir.is_empty() || self.under(dir).next().is_some()
    }

    /// Files strictly inside directory `dir` ("" for all files), in path order.
    pub fn under<'a>(
        &'a self,
        dir: &str,
    ) -> impl Iterator<Item = (&'a String, &'a FileEntry)> + 'a {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        self.files
            .range(prefix.clone()..)
            .take_while(move |(p, _)| p.starts_with(&prefix))
    }

    /// Entries of directory `dir`: its direct children, or with `recursive` every file and folder below it.
    /// Folders come before the files they contain; otherwise the order is by path.
    pub fn list(&self, dir: &str, recursive: bool) -> Vec<Listing<'_>> {
        let skip = if dir.is_empty() { 0 } else { dir.len() + 1 };
        let mut out = Vec::new();
        let mut last_dirs: Vec<String> = Vec::new();
        for (path, entry) in self.under(dir) {
            let rel = &path[skip..];
            let parts: Vec<&str> = rel.split('/').collect();
            let depth = if recursive {
                parts.len() - 1
            } else {
                1.min(parts.len() - 1)
            };
            for level in 0..depth {
                let folder = format!("{}{}", &path[..skip], parts[..=level].join("/"));
                if last_dirs.get(level) != Some(&folder) {
                    last_dirs.truncate(level);
                    last_dirs.push(folder.clone());
                    out.push(Listing::Dir(folder));
                }
            }
            if recursive || parts.len() == 1 {
                last_dirs.truncate(parts.len() - 1);
                out.push(Listing::File(path, entry));
            }
        }
        out
    }

    /// A content digest of directory `dir` (the `oid` of folder entries), stable for equal contents.
    pub fn dir_oid(&self, dir: &str) -> String {
        let mut h = Sha1::new();
        for (path, entry) in self.under(dir) {
            h.update(path.as_bytes());
            h.update([0]);
            h.update(entry.sha1.as_bytes());
            h.update([b'\n']);
        }
        hex::encode(h.finalize())
    }

    /// The first path that is both a file and a folder prefix of another file (git cannot store that).
    pub fn file_dir_conflict(&self) -> Option<(&str, &str)> {
        for path in self.files.keys() {
            let mut cut = path.len();
            while let Some(i) = path[..cut].rfind('/') {
                if let Some((p, _)) = self.files.get_key_value(&path[..i]) {
                    return Some((p, path));
                }
                cut = i;
            }
        }
        None
    }
}

/// `branch` or `tag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    Branch,
    Tag,
}

impl RefKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RefKind::Branch => "branch",
            RefKind::Tag => "tag",
        }
    }

    /// The git ref prefix (`refs/heads/`, `refs/tags/`).
    pub fn git_prefix(self) -> &'static str {
        match self {
            RefKind::Branch => "refs/heads/",
            RefKind::Tag => "refs/tags/",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefEntry {
    pub kind: RefKind,
    pub name: String,
    pub target: String,
}

/// Is `s` a full commit id (40 lowercase hex digits)?
pub fn is_commit_id(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Check a branch or tag name: git-ref-like, and never mistakable for a commit id or a `refs/` path.
pub fn validate_ref_name(kind: RefKind, name: &str) -> Result<(), String> {
    let bad = name.is_empty()
        || name.len() > 200
        || is_commit_id(name)
        || name.starts_with("refs/")
        || name.starts_with(['/', '.', '-'])
        || name.ends_with(['/', '.'])
        || name.ends_with(".lock")
        || name.contains("..")
        || name.contains("//")
        || name.contains("/.")
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b));
    if bad {
        Err(format!(
            "invalid {} name `{name}`: use letters, digits, `-`, `_`, `.` and `/` (e.g. `v1`); \
             not a 40-hex commit id, not starting with `refs/`, no `..`",
            kind.as_str()
        ))
    } else {
        Ok(())
    }
}

/// One change of a commit, applied in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put { path: String, blob: BlobInfo },
    DeleteFile { path: String },
    DeleteFolder { path: String },
}

/// What a client asks to commit on a branch.
#[derive(Debug, Clone)]
pub struct CommitRequest {
    pub branch: String,
    /// Expected current head (optimistic locking); a mismatch is a conflict.
    pub parent: Option<String>,
    pub title: String,
    pub message: String,
    pub author: String,
    pub ops: Vec<Op>,
}

/// Apply `ops` to `tree` in order. Errors name the offending path.
pub fn apply_ops(tree: &Tree, ops: &[Op]) -> Result<Tree, ApplyError> {
    let mut out = tree.clone();
    for op in ops {
        match op {
            Op::Put { path, blob } => {
                out.files.insert(path.clone(), blob.into());
            }
            Op::DeleteFile { path } => {
                if out.files.remove(path).is_none() {
                    return Err(ApplyError::MissingFile(path.clone()));
                }
            }
            Op::DeleteFolder { path } => {
                let doomed: Vec<String> = out.under(path).map(|(p, _)| p.clone()).collect();
                for p in doomed {
                    out.files.remove(&p);
                }
            }
        }
    }
    if let Some((file, other)) = out.file_dir_conflict() {
        return Err(ApplyError::FileDirConflict(
            file.to_owned(),
            other.to_owned(),
        ));
    }
    Ok(out)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("A file with this name doesn't exist: `{0}` (deletedFile needs an existing path)")]
    MissingFile(String),
    #[error(
        "`{0}` would be both a file and the folder of `{1}`; delete one of them in the same commit"
    )]
    FileDirConflict(String, String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u8) -> FileEntry {
        FileEntry {
            sha256: format!("{n:064x}"),
            sha1: format!("{n:040x}"),
            size: n as u64,
        }
    }

    fn tree(paths: &[&str]) -> Tree {
        Tree {
            files: paths
                .iter()
                .enumerate()
                .map(|(i, p)| (p.to_string(), entry(i as u8)))
                .collect(),
        }
    }

    fn names(list: &[Listing<'_>]) -> Vec<String> {
        list.iter()
            .map(|l| match l {
                Listing::File(p, _) => format!("f:{p}"),
                Listing::Dir(d) => format!("d:{d}"),
            })
            .collect()
    }

    #[test]
    fn listing_direct_and_recursive() {
        let t = tree(&[
            "README.md",
            "build/a/x.py",
            "build/a/y/z.so",
            "build/b/x.py",
            "c",
        ]);
        assert_eq!(names(&t.list("", false)), ["f:README.md", "d:build", "f:c"]);
        assert_eq!(names(&t.list("build", false)), ["d:build/a", "d:build/b"]);
        assert_eq!(
            names(&t.list("build", true)),
            [
                "d:build/a",
                "f:build/a/x.py",
                "d:build/a/y",
                "f:build/a/y/z.so",
                "d:build/b",
                "f:build/b/x.py"
            ]
        );
        assert!(t.is_dir("build/a") && !t.is_dir("build/a/x.py") && !t.is_dir("bui"));
        assert_ne!(t.dir_oid("build/a"), t.dir_oid("build/b"));
    }

    #[test]
    fn ops_apply_in_order_and_detect_conflicts() {
        let t = tree(&["build/a/x.py", "build/a/y.py", "keep"]);
        let blob = BlobInfo {
            sha256: "1".repeat(64),
            sha1: "2".repeat(40),
            size: 3,
        };
        let out = apply_ops(
            &t,
            &[
                Op::DeleteFolder {
                    path: "build/a".into(),
                },
                Op::Put {
                    path: "build/a/new.py".into(),
                    blob: blob.clone(),
                },
            ],
        )
        .unwrap();
        assert_eq!(
            out.files.keys().collect::<Vec<_>>(),
            ["build/a/new.py", "keep"]
        );
        assert_eq!(
            apply_ops(
                &t,
                &[Op::DeleteFile {
                    path: "nope".into()
                }]
            ),
            Err(ApplyError::MissingFile("nope".into()))
        );
        assert!(matches!(
            apply_ops(
                &t,
                &[Op::Put {
                    path: "keep/inner".into(),
                    blob
                }]
            ),
            Err(ApplyError::FileDirConflict(..))
        ));
        assert_eq!(Tree::from_json(&t.to_json()).unwrap(), t);
        assert_ne!(t.id(), out.id());
    }

    #[test]
    fn names_and_refs() {
        assert!(validate_name("name", "relu-v2.x").is_ok());
        for bad in ["", "-a", "a--b", "a..b", "a/b", "a.", &"x".repeat(97)] {
            assert!(validate_name("name", bad).is_err(), "{bad}");
        }
        assert!(validate_ref_name(RefKind::Branch, "v1").is_ok());
        assert!(validate_ref_name(RefKind::Branch, "feature/x").is_ok());
        for bad in [
            "",
            "refs/heads/x",
            "a..b",
            "/a",
            &"a".repeat(40),
            "a b",
            "x.lock",
        ] {
            assert!(validate_ref_name(RefKind::Tag, bad).is_err(), "{bad}");
        }
    }
}
