//! One module per subcommand. Each defines `Args` (clap) and `run(Args) -> anyhow::Result<()>`.

use std::process::ExitCode;

pub mod abi;
pub mod build;
pub mod cache;
pub mod check;
pub mod download;
pub mod hub;
pub mod init;
pub mod key;
pub mod lock;
pub mod pull;
pub mod push;
pub mod update_build;
pub mod variants;
pub mod verify;

/// Returned by a command that has already printed its own diagnostics: exit non-zero, print nothing more.
#[derive(Debug)]
pub struct AlreadyReported;

impl std::fmt::Display for AlreadyReported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("errors were reported above")
    }
}

impl std::error::Error for AlreadyReported {}

/// Turn a command's result into the process exit code, printing the error chain once.
pub fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.is::<AlreadyReported>() => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}
