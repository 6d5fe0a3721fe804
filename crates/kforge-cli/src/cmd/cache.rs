//! `kforge cache stats | gc`: inspect or trim the toolchain and action cache ($KFORGE_CACHE or ~/.cache/kforge).

use anyhow::{Context, bail};
use kforge_toolchain::Cache;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: CacheCommand,
}

#[derive(clap::Subcommand)]
pub enum CacheCommand {
    /// Show the cache's location and the size of each area.
    Stats,
    /// Delete leftovers of interrupted work and the oldest build actions beyond --max-size.
    /// Toolchains are kept: they are pinned and expensive to fetch.
    Gc {
        /// Size the action cache may keep, e.g. 500M, 10G, 2GiB, or plain bytes.
        #[arg(long, default_value = "10G", value_name = "SIZE")]
        max_size: String,
    },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let cache = Cache::from_env();
    match args.command {
        CacheCommand::Stats => {
            let s = cache.stats();
            let total = s.toolchains + s.actions + s.tmp;
            println!("cache: {}", cache.root().display());
            println!(
                "  toolchains {:>6} entries {:>12}",
                s.toolchain_count,
                human(s.toolchains)
            );
            println!(
                "  actions    {:>6} entries {:>12}",
                s.action_count,
                human(s.actions)
            );
            println!("  tmp                       {:>12}", human(s.tmp));
            println!("  total                     {:>12}", human(total));
        }
        CacheCommand::Gc { max_size } => {
            let max = parse_size(&max_size).with_context(|| format!("--max-size {max_size}"))?;
            let freed = cache
                .gc(max)
                .with_context(|| format!("collecting garbage in {}", cache.root().display()))?;
            let s = cache.stats();
            println!(
                "freed {}; actions now {} in {} entries (limit {}), toolchains {}",
                human(freed),
                human(s.actions),
                s.action_count,
                human(max),
                human(s.toolchains)
            );
        }
    }
    Ok(())
}

/// `500M`, `10G`, `2GiB`, `1.5T`, `4096`: powers of 1024, as `du -h` prints them.
fn parse_size(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .with_context(|| format!("`{text}` is not a size; expected a number with an optional unit K, M, G or T (e.g. 10G)"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        other => bail!("unknown size unit `{other}` in `{text}`; expected K, M, G or T"),
    };
    Ok((value * (1u64 << shift) as f64) as u64)
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("500M").unwrap(), 500 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5k").unwrap(), 1536);
        assert!(
            parse_size("ten")
                .unwrap_err()
                .to_string()
                .contains("not a size")
        );
        assert!(
            parse_size("3Q")
                .unwrap_err()
                .to_string()
                .contains("unknown size unit `Q`")
        );
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(12), "12 B");
    }
}
