//! `kforge hub`: run a self-hosted hub (`serve`), manage its access tokens and trusted organisations.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use kforge_hub::server::{HubConfig, db_path, serve_blocking};
use kforge_hub::store::{MetaStore, SqliteStore};

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
        /// Largest commit request (files inlined as base64, held in memory while applied), in MiB.
        #[arg(long, default_value_t = 1024)]
        max_commit_mib: u64,
        /// Largest single uploaded file (LFS, streamed to disk), in MiB.
        #[arg(long, default_value_t = 65536)]
        max_upload_mib: u64,
        /// Close a connection on which nothing is read or written for this many seconds (stalled or
        /// slowloris-style clients, idle keep-alive connections).
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
        idle_timeout_secs: u64,
        /// LFS uploads announced but not yet sent, over all repos, before batch requests get 429 for more.
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
        max_pending_uploads: u64,
    },
    /// Manage access tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Delete blobs that no commit references (deleted repos, uploads never committed). Run it while the
    /// hub is stopped: it takes the data directory's lock.
    Gc {
        #[arg(long)]
        data: Option<PathBuf>,
        /// Keep unreferenced blobs younger than this (a client may still commit them).
        #[arg(long, default_value_t = 24)]
        grace_hours: u64,
        /// Only report what would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
    /// Manage organisations (the `trustedKernelPublisher` flag that `kernels.get_kernel` checks).
    Org {
        #[command(subcommand)]
        command: OrgCommand,
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
    /// Revoke a token: requests carrying it are refused from now on (401).
    Revoke {
        /// The token, as printed by `token create`.
        token: String,
        #[arg(long)]
        data: Option<PathBuf>,
    },
}

#[derive(clap::Subcommand)]
enum OrgCommand {
    /// Mark ORG as a trusted kernel publisher: `get_kernel` loads its kernels without `trust_remote_code`.
    Trust {
        org: String,
        #[arg(long)]
        data: Option<PathBuf>,
    },
    /// Remove ORG's trusted-publisher flag.
    Untrust {
        org: String,
        #[arg(long)]
        data: Option<PathBuf>,
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

fn open_store(data: Option<PathBuf>) -> anyhow::Result<SqliteStore> {
    let dir = data_dir(data)?;
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating hub data directory {}", dir.display()))?;
    let db = db_path(&dir);
    SqliteStore::open(&db).with_context(|| format!("opening {}", db.display()))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        HubCommand::Serve {
            data,
            addr,
            max_commit_mib,
            max_upload_mib,
            idle_timeout_secs,
            max_pending_uploads,
        } => {
            let dir = data_dir(data)?;
            let config = HubConfig {
                max_commit: max_commit_mib.saturating_mul(1 << 20),
                max_upload: max_upload_mib.saturating_mul(1 << 20),
                idle_timeout: std::time::Duration::from_secs(idle_timeout_secs),
                max_pending_uploads: usize::try_from(max_pending_uploads).unwrap_or(usize::MAX),
            };
            serve_blocking(&dir, addr, config, |bound| {
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
            let token = open_store(data)?
                .create_token(&user, write, &orgs)
                .context("creating the token")?;
            println!("{token}");
            Ok(())
        }
        HubCommand::Token {
            command: TokenCommand::Revoke { token, data },
        } => {
            if !open_store(data)?
                .revoke_token(&token)
                .context("revoking the token")?
            {
                anyhow::bail!(
                    "no such token in this hub (already revoked, or created for another --data)"
                );
            }
            eprintln!("token revoked");
            Ok(())
        }
        HubCommand::Gc {
            data,
            grace_hours,
            dry_run,
        } => {
            let dir = data_dir(data)?;
            let hub = kforge_hub::server::Hub::open(&dir, HubConfig::default())
                .with_context(|| format!("opening the hub data in {}", dir.display()))?;
            let grace = std::time::Duration::from_secs(grace_hours.saturating_mul(3600));
            let r = hub.gc(grace, dry_run).context("collecting garbage")?;
            println!(
                "{} {} unreferenced blob(s), {} bytes; kept {} referenced and {} younger than {grace_hours} h",
                if dry_run { "would remove" } else { "removed" },
                r.blobs_removed,
                r.bytes_removed,
                r.blobs_kept,
                r.blobs_too_young
            );
            Ok(())
        }
        HubCommand::Org { command } => {
            let (org, data, trusted) = match command {
                OrgCommand::Trust { org, data } => (org, data, true),
                OrgCommand::Untrust { org, data } => (org, data, false),
            };
            open_store(data)?
                .set_org_trusted(&org, trusted)
                .with_context(|| format!("updating organisation `{org}`"))?;
            eprintln!(
                "organisation `{org}` is {}a trusted kernel publisher",
                if trusted { "" } else { "no longer " }
            );
            Ok(())
        }
    }
}
