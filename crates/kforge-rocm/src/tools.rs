//! Finding the device compiler and disassembler (an upstream LLVM ≥ 19, which knows gfx942's FP8 MFMA).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{RocmError, io_err};

/// The LLVM tools a device-only build runs.
#[derive(Debug, Clone)]
pub struct Tools {
    pub clang: PathBuf,
    pub objdump: PathBuf,
    /// First line of `clang --version`.
    pub version: String,
}

/// LLVM major versions tried, newest first after the one the project installs (Debian 12's 19).
const MAJORS: [&str; 4] = ["19", "20", "21", "22"];

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

impl Tools {
    /// `KFORGE_HIP_CLANG` / `KFORGE_LLVM_OBJDUMP` when set, else `clang++-N` and `llvm-objdump-N` of one
    /// LLVM major N on PATH or in /usr/lib/llvm-N/bin.
    pub fn detect() -> Result<Tools, RocmError> {
        let env = |k: &str| std::env::var_os(k).map(PathBuf::from);
        let (clang, objdump) = match (env("KFORGE_HIP_CLANG"), env("KFORGE_LLVM_OBJDUMP")) {
            (Some(c), Some(o)) => (c, o),
            (Some(_), None) | (None, Some(_)) => {
                return Err(RocmError::ToolMissing {
                    detail: "set both KFORGE_HIP_CLANG and KFORGE_LLVM_OBJDUMP, or neither".into(),
                });
            }
            (None, None) => MAJORS
                .iter()
                .find_map(|n| {
                    let dir = PathBuf::from(format!("/usr/lib/llvm-{n}/bin"));
                    let clang = on_path(&format!("clang++-{n}"))
                        .or_else(|| Some(dir.join("clang++")).filter(|p| p.is_file()))?;
                    let objdump = on_path(&format!("llvm-objdump-{n}"))
                        .or_else(|| Some(dir.join("llvm-objdump")).filter(|p| p.is_file()))?;
                    Some((clang, objdump))
                })
                .ok_or_else(|| RocmError::ToolMissing {
                    detail: format!(
                        "none of clang++-N with llvm-objdump-N (N in {}) found on PATH or in /usr/lib/llvm-N/bin",
                        MAJORS.join(", ")
                    ),
                })?,
        };
        Self::with_paths(clang, objdump)
    }

    /// Use these two tools; checks that the compiler runs.
    pub fn with_paths(clang: PathBuf, objdump: PathBuf) -> Result<Tools, RocmError> {
        let out = Command::new(&clang)
            .arg("--version")
            .output()
            .map_err(|e| RocmError::ToolMissing {
                detail: format!("{}: {e}", clang.display()),
            })?;
        let version = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("clang (unknown version)")
            .trim()
            .to_string();
        if !objdump.is_file() {
            return Err(RocmError::ToolMissing {
                detail: format!("{}: no such file", objdump.display()),
            });
        }
        Ok(Tools {
            clang,
            objdump,
            version,
        })
    }

    /// `llvm-objdump -d` of a code object.
    pub fn disassemble(&self, path: &Path, arch: &str) -> Result<String, RocmError> {
        let out = Command::new(&self.objdump)
            .arg("-d")
            .arg(format!("--mcpu={arch}"))
            .arg(path)
            .output()
            .map_err(io_err(&self.objdump))?;
        if !out.status.success() {
            return Err(RocmError::Tool {
                tool: self.objdump.display().to_string(),
                path: path.to_path_buf(),
                stderr: tail(&String::from_utf8_lossy(&out.stderr), 2000),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The last `max` bytes of `s` (on a char boundary), for error messages.
pub(crate) fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &s[start..])
}

/// A command line as a user would paste it into a shell.
pub(crate) fn shell_words(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| {
            let s = a.to_string_lossy();
            if s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_=./+,:".contains(c))
            {
                s.into_owned()
            } else {
                format!("'{}'", s.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
