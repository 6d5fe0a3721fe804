//! `kforge hub`: run a self-hosted hub (`serve`) and manage its access tokens (`token create`).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: HubCommand,
}

#[derive(clap::Subcommand)]
enum HubCommand {
    /// Serve the HF Hub API on ADDR; prints `kforge hub listening on http://HOST:PORT` once ready.
    Serve {
        /// Data directory (blobs + SQLite). Default: $KFORGE_HUB_DATA or ~/.local/share/kforge/hub.
        #[arg(long)]
        data: Option<PathBuf>,
        /// Address to bind; port 0 picks a free port.
        #[arg(long, default_value = "127.0.0.1:8790")]
        addr: SocketAddr,
    },
    /// Manage access tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(clap::Subcommand)]
enum TokenCommand {
    /// Create a token and print it on stdout (it is stored hashed and cannot be shown again).
    Create {
        #[arg(long)]
        data: Option<PathBuf>,
        /// User the token belongs to.
        #[arg(long)]
        user: String,
        /// Allow writes to the user's namespace and to its organisations.
        #[arg(long)]
        write: bool,
        /// Organisation the user belongs to (repeatable).
        #[arg(long = "org")]
        orgs: Vec<String>,
    },
}

fn data_dir(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir);
    }
    if let Some(dir) = std::env::var_os("KFORGE_HUB_DATA") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME")
        .context("cannot pick a hub data directory: set --data, $KFORGE_HUB_DATA or $HOME")?;
    Ok(PathBuf::from(home).join(".local/share/kforge/hub"))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        HubCommand::Serve { data, addr } => {
            let dir = data_dir(data)?;
            kforge_hub::server::serve_blocking(&dir, addr, |bound| {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "kforge hub listening on http://{bound}");
                let _ = out.flush();
            })
            .with_context(|| format!("serving the hub from {} on {addr}", dir.display()))
        }
        HubCommand::Token {
            command:
                TokenCommand::Create {
                    data,
                    user,
                    write,
                    orgs,
                },
        } => {
            let dir = data_dir(data)?;
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("creating hub data directory {}", dir.display()))?;
            let db = kforge_hub::server::db_path(&dir);
            let store = kforge_hub::auth::TokenStore::open(&db)
                .with_context(|| format!("opening {}", db.display()))?;
            let token = store.create(&user, write, &orgs)?;
            println!("{token}");
            Ok(())
        }
    }
}
