//! `kforge key` (placeholder until its owner lands it; the owning work replaces this file).

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`kforge key` is not available in this build yet")
}
