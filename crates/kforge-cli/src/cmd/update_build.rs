//! `kforge update-build` (placeholder until its crate lands; the owning work replaces this file).

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`kforge update-build` is not available in this build yet")
}
