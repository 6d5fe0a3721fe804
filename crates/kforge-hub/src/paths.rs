//! Validation of repository file paths sent by clients, so nothing is ever written outside the data dir.

use thiserror::Error;

/// Why a client-supplied repository path was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PathError {
    #[error("path is empty; expected a relative path such as `build/torch-cpu/__init__.py`")]
    Empty,
    #[error("path `{0}` is absolute; send it relative to the repository root")]
    Absolute(String),
    #[error("path `{0}` contains a backslash or NUL byte; use `/` as separator")]
    BadCharacter(String),
    #[error("path `{0}` has an empty, `.` or `..` component; send a normalized relative path")]
    BadComponent(String),
    #[error("path `{0}` has a `.git` component, which a repository cannot contain")]
    GitDir(String),
}

/// Check that `path` is a normalized relative repo path (`a/b/c`) and return it unchanged.
pub fn validate_repo_path(path: &str) -> Result<&str, PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.contains('\\') || path.contains('\0') {
        return Err(PathError::BadCharacter(path.escape_debug().to_string()));
    }
    if path.starts_with('/') {
        return Err(PathError::Absolute(path.to_owned()));
    }
    let components = path.split('/');
    if components
        .clone()
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(PathError::BadComponent(path.to_owned()));
    }
    // Git refuses `.git` as any component (case-insensitively, for case-folding filesystems): such a
    // file could never be mirrored to git, and checked out it would plant hooks or config.
    if components.clone().any(|c| c.eq_ignore_ascii_case(".git")) {
        return Err(PathError::GitDir(path.to_owned()));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_normal_paths() {
        assert_eq!(
            validate_repo_path("build/torch-cpu/x.py"),
            Ok("build/torch-cpu/x.py")
        );
        assert_eq!(validate_repo_path("README.md"), Ok("README.md"));
    }

    #[test]
    fn refuses_traversal_and_odd_paths() {
        assert_eq!(validate_repo_path(""), Err(PathError::Empty));
        assert!(matches!(
            validate_repo_path("/etc/passwd"),
            Err(PathError::Absolute(_))
        ));
        assert!(matches!(
            validate_repo_path("a/../../x"),
            Err(PathError::BadComponent(_))
        ));
        assert!(matches!(
            validate_repo_path("a//b"),
            Err(PathError::BadComponent(_))
        ));
        assert!(matches!(
            validate_repo_path("a/b/"),
            Err(PathError::BadComponent(_))
        ));
        assert!(matches!(
            validate_repo_path("a\\b"),
            Err(PathError::BadCharacter(_))
        ));
        assert!(matches!(
            validate_repo_path("a\0b"),
            Err(PathError::BadCharacter(_))
        ));
        for git in [".git/config", "a/.git/hooks/x", "a/.GIT", ".Git/HEAD"] {
            assert!(
                matches!(validate_repo_path(git), Err(PathError::GitDir(_))),
                "{git}"
            );
        }
        // Only an exact `.git` component is refused.
        assert_eq!(validate_repo_path("a/.github/x.yml"), Ok("a/.github/x.yml"));
        assert_eq!(validate_repo_path(".gitattributes"), Ok(".gitattributes"));
    }
}
