//! `kforge`: build, check, share and load PyTorch kernels. Thin glue over the library crates.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "kforge", version, about = "Build, check, share and load PyTorch kernels", long_about = None)]
struct Cli {
    /// Show tracing logs (-v: info, -vv: debug, -vvv: trace). `RUST_LOG` overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a kernel project (build.toml and layout) without building it.
    Check(cmd::check::Args),
    /// Create a new kernel project that `kforge check` accepts and `kforge build` builds.
    Init(cmd::init::Args),
    /// List the build variants a project yields, with the archs of each component.
    Variants(cmd::variants::Args),
    /// Rewrite an edition 3/4 build.toml as edition 5.
    UpdateBuild(cmd::update_build::Args),
    /// Build every variant of a kernel project into build/<variant>/.
    Build(cmd::build::Args),
    /// Inspect or trim the toolchain and action cache.
    Cache(cmd::cache::Args),
    /// Check built artifacts for ABI problems (manylinux, abi3, torch symbols).
    Abi(cmd::abi::Args),
    /// Run or administer a kernel hub.
    Hub(cmd::hub::Args),
    /// Upload build/<variant>/ directories to a hub.
    Push(cmd::push::Args),
    /// Download a kernel version from a hub.
    Pull(cmd::pull::Args),
    /// Resolve the kernels a Python project depends on into kernels.lock, with per-variant hashes.
    Lock(cmd::lock::Args),
    /// Download the locked kernels of a Python project into the cache.
    Download(cmd::download::Args),
    /// Verify a built or downloaded variant: digest and signature.
    Verify(cmd::verify::Args),
    /// Generate signing keys and sign built variants.
    Key(cmd::key::Args),
}

fn init_tracing(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let result = match cli.command {
        Command::Check(args) => cmd::check::run(args),
        Command::Init(args) => cmd::init::run(args),
        Command::Variants(args) => cmd::variants::run(args),
        Command::UpdateBuild(args) => cmd::update_build::run(args),
        Command::Build(args) => cmd::build::run(args),
        Command::Cache(args) => cmd::cache::run(args),
        Command::Abi(args) => cmd::abi::run(args),
        Command::Hub(args) => cmd::hub::run(args),
        Command::Push(args) => cmd::push::run(args),
        Command::Pull(args) => cmd::pull::run(args),
        Command::Lock(args) => cmd::lock::run(args),
        Command::Download(args) => cmd::download::run(args),
        Command::Verify(args) => cmd::verify::run(args),
        Command::Key(args) => cmd::key::run(args),
    };
    cmd::finish(result)
}
