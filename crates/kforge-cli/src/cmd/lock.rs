//! `kforge lock`: resolve a Python project's `[tool.kernels.dependencies]` into `kernels.lock`.
//!
//! The binary hands this (and `kforge download`) to the `kforge` Python package (`python -m kforge`): choosing
//! a variant needs the host's torch (backend, CUDA version, C++ ABI), and the per-variant lock hashes must be
//! computed by the same code that checks them when a kernel is loaded, so there is one implementation.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

use super::AlreadyReported;

#[derive(clap::Args)]
pub struct Args {
    /// The Python project directory (holds pyproject.toml; kernels.lock is written beside it).
    #[arg(default_value = ".")]
    pub project_dir: PathBuf,
    /// `kforge`: with per-variant content hashes (checked on load by kforge); `kernels`: the bare kernels
    /// 0.17 format, for projects loading with HF's `kernels` (its parser rejects unknown fields).
    #[arg(long, default_value = "kforge", value_parser = ["kforge", "kernels"])]
    pub format: String,
    #[command(flatten)]
    pub python: PythonArg,
}

/// Which Python runs the loader half of the command.
#[derive(clap::Args)]
pub struct PythonArg {
    /// Python interpreter that has the `kforge` package installed [default: $VIRTUAL_ENV/bin/python, else python3].
    #[arg(long, env = "KFORGE_PYTHON")]
    pub python: Option<PathBuf>,
}

impl PythonArg {
    fn interpreter(&self) -> PathBuf {
        if let Some(p) = &self.python {
            return p.clone();
        }
        if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
            let p = PathBuf::from(venv).join("bin").join("python");
            if p.is_file() {
                return p;
            }
        }
        PathBuf::from("python3")
    }
}

/// Run `python -m kforge <args>`, checking first that Python and the kforge package are there so the user
/// gets one clear instruction instead of a traceback.
pub(crate) fn run_python_kforge(python: &PythonArg, args: &[OsString]) -> anyhow::Result<()> {
    let interpreter = python.interpreter();
    let probe = Command::new(&interpreter)
        .args(["-c", "import kforge.locking"])
        .output()
        .with_context(|| {
            format!(
                "cannot run Python `{}`; install Python 3.11+ or pass --python / set KFORGE_PYTHON",
                interpreter.display()
            )
        })?;
    if !probe.status.success() {
        bail!(
            "`{}` cannot import the kforge Python package ({}); install it with `pip install ./python` from the \
             kforge checkout, or pass --python / set KFORGE_PYTHON to an interpreter that has it",
            interpreter.display(),
            String::from_utf8_lossy(&probe.stderr)
                .trim()
                .lines()
                .last()
                .unwrap_or("no output")
        );
    }
    let status = Command::new(&interpreter)
        .args(["-m", "kforge"])
        .args(args)
        .status()
        .with_context(|| format!("running `{} -m kforge`", interpreter.display()))?;
    if !status.success() {
        return Err(AlreadyReported.into()); // the Python side printed the error
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let argv = vec![
        OsString::from("lock"),
        args.project_dir.into_os_string(),
        OsString::from("--format"),
        OsString::from(args.format),
    ];
    run_python_kforge(&args.python, &argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_interpreter_is_a_clear_error() {
        let python = PythonArg {
            python: Some(PathBuf::from("/nonexistent/python3.99")),
        };
        let err = run_python_kforge(&python, &[OsString::from("lock")]).unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("cannot run Python `/nonexistent/python3.99`"),
            "{msg}"
        );
        assert!(msg.contains("KFORGE_PYTHON"), "{msg}");
    }

    #[test]
    fn interpreter_without_kforge_is_a_clear_error() {
        // `python3 -I -S` ignores PYTHONPATH and every site-packages dir, so kforge is not importable even
        // when the `python3` on PATH is a venv that has it installed (as under scripts/test.sh).
        let dir = std::env::temp_dir().join(format!("kforge-lock-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let shim = dir.join("python");
        std::fs::write(&shim, "#!/bin/sh\nexec python3 -I -S \"$@\"\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let python = PythonArg { python: Some(shim) };
        let err = run_python_kforge(&python, &[OsString::from("lock")]).unwrap_err();
        let msg = format!("{err:#}");
        std::fs::remove_dir_all(&dir).ok();
        assert!(
            msg.contains("cannot import the kforge Python package"),
            "{msg}"
        );
        assert!(msg.contains("No module named 'kforge'"), "{msg}");
    }
}
