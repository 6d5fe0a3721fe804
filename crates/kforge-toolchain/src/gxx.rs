//! Host C++ compiler detection.

use std::path::PathBuf;
use std::process::Command;

use crate::ToolchainError;

/// The system g++ (or $CXX) and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gxx {
    pub path: PathBuf,
    /// First line of `--version`, e.g. "g++ (Debian 12.2.0-14+deb12u1) 12.2.0".
    pub version_line: String,
    /// The dotted version at the end of that line, e.g. "12.2.0".
    pub version: String,
}

/// Find `$CXX` or `g++` and ask it for its version.
pub fn detect_gxx() -> Result<Gxx, ToolchainError> {
    let cmd = std::env::var("CXX").unwrap_or_else(|_| "g++".to_string());
    let out =
        Command::new(&cmd)
            .arg("--version")
            .output()
            .map_err(|e| ToolchainError::NoCompiler {
                command: format!("{cmd} --version"),
                detail: e.to_string(),
            })?;
    if !out.status.success() {
        return Err(ToolchainError::NoCompiler {
            command: format!("{cmd} --version"),
            detail: format!("exit status {}", out.status),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let version_line = text.lines().next().unwrap_or_default().trim().to_string();
    let version = version_line
        .split_whitespace()
        .rev()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .unwrap_or_default()
        .to_string();
    Ok(Gxx {
        path: PathBuf::from(cmd),
        version_line,
        version,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_a_versioned_gxx() {
        let gxx = super::detect_gxx().unwrap();
        let major: u32 = gxx.version.split('.').next().unwrap().parse().unwrap();
        assert!(major >= 9, "{gxx:?}");
    }
}
