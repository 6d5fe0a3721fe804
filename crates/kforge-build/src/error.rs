//! Everything that can stop a build, each naming what failed and how to fix it.

use std::path::PathBuf;

use kforge_manifest::ArchError;
use kforge_toolchain::ToolchainError;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Toolchain(#[from] ToolchainError),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("[kernel.{kernel}] in build.toml: {source}")]
    Arch {
        kernel: String,
        #[source]
        source: ArchError,
    },
    #[error("{table} src in build.toml: {file}: {why}")]
    Source {
        table: String,
        file: PathBuf,
        why: String,
    },
    #[error("{what} is not supported by `kforge build` yet\n  fix: {fix}")]
    Unsupported { what: String, fix: String },
    #[error("{argument}: {why}")]
    Selection { argument: String, why: String },
    #[error("{variant}: {action} failed ({status})\n{output}\n  command: {command}")]
    Action {
        variant: String,
        action: String,
        status: String,
        output: String,
        command: String,
    },
    #[error(
        "{variant}: ABI check failed (manylinux/abi3/torch symbols); the variant was not installed:\n{report}\n  fix: change the code or flags named above, or pass --abi-warn-only to install it anyway"
    )]
    Abi { variant: String, report: String },
    #[error("{variant}: cannot read the built library for the ABI check: {source}")]
    AbiRead {
        variant: String,
        #[source]
        source: kforge_abi::AbiError,
    },
    #[error("{}", join(.0))]
    Many(Vec<BuildError>),
}

fn join(errors: &[BuildError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n\n")
}

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> BuildError {
    let path = path.into();
    move |source| BuildError::Io { path, source }
}
