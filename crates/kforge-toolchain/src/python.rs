//! The host Python whose headers the extension includes (`Python.h` for `PyInit_*`; abi3, so any 3.9+ works).

use std::path::PathBuf;
use std::process::Command;

use crate::ToolchainError;
use crate::cache::python;

/// The interpreter found and where its C headers are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonHeaders {
    /// The command used ($KFORGE_PYTHON, the active venv's python, or python3).
    pub command: String,
    /// `major.minor.micro`, e.g. "3.11.7".
    pub version: String,
    /// The directory holding `Python.h`.
    pub include: PathBuf,
}

/// Ask the build Python for its version and include directory, and check that `Python.h` is there.
pub fn detect_python() -> Result<PythonHeaders, ToolchainError> {
    let command = python();
    let fail = |detail: String| ToolchainError::NoPython {
        command: command.clone(),
        detail,
    };
    let out = Command::new(&command)
        .args([
            "-c",
            "import sys, sysconfig; print('%d.%d.%d' % sys.version_info[:3]); print(sysconfig.get_paths()['include'])",
        ])
        .output()
        .map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        return Err(fail(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let (Some(version), Some(include)) = (lines.next(), lines.next()) else {
        return Err(fail(format!("unexpected output {text:?}")));
    };
    let include = PathBuf::from(include.trim());
    if !include.join("Python.h").is_file() {
        return Err(fail(format!(
            "{} has no Python.h (install the python3-dev package or use a Python with headers)",
            include.display()
        )));
    }
    Ok(PythonHeaders {
        command: command.clone(),
        version: version.trim().to_string(),
        include,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_python_headers() {
        let py = super::detect_python().unwrap();
        assert!(py.include.join("Python.h").is_file(), "{py:?}");
        let minor: u32 = py.version.split('.').nth(1).unwrap().parse().unwrap();
        assert!(py.version.starts_with("3.") && minor >= 9, "{py:?}");
    }
}
