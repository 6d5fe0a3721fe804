//! The build-set and lock data compiled into the binary (crates/kforge-toolchain/data/).

use serde::Deserialize;

use crate::ToolchainError;

const BUILD_SETS: &str = include_str!("../data/buildsets.toml");
const LOCK: &str = include_str!("../data/toolchain.lock");

/// One (torch, backend[, cuda], platform) combination the builder can produce a variant for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSet {
    /// Torch major.minor, e.g. "2.11".
    pub torch: String,
    /// "cpu" or "cuda".
    pub backend: String,
    /// CUDA major.minor for cuda sets.
    #[serde(default)]
    pub cuda: Option<String>,
    /// e.g. "x86_64-linux".
    pub platform: String,
    pub packages: Vec<String>,
}

impl BuildSet {
    /// The HF variant name, e.g. `torch211-cxx11-cu130-x86_64-linux`.
    pub fn variant_name(&self) -> String {
        let torch: String = self.torch.split('.').collect();
        let compute = match &self.cuda {
            Some(cuda) => format!("cu{}", cuda.split('.').collect::<String>()),
            None => self.backend.clone(),
        };
        format!("torch{torch}-cxx11-{compute}-{}", self.platform)
    }

    /// A short key for messages.
    pub fn key(&self) -> String {
        self.variant_name()
    }

    /// Torch (major, minor) as numbers.
    pub fn torch_version(&self) -> (u32, u32) {
        let mut it = self.torch.split('.').map(|p| p.parse().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    }
}

/// One pinned wheel from toolchain.lock.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LockedPackage {
    pub name: String,
    pub version: String,
    pub file: String,
    pub sha256: String,
    /// Archive path prefixes to unpack (others are skipped).
    pub extract: Vec<String>,
    /// Prefix removed from every unpacked path.
    pub strip_prefix: String,
}

#[derive(Deserialize)]
struct SetsFile {
    set: Vec<BuildSet>,
}

#[derive(Deserialize)]
struct LockFile {
    package: Vec<LockedPackage>,
}

/// Every build set known to this kforge.
pub fn build_sets() -> Result<Vec<BuildSet>, ToolchainError> {
    toml_edit::de::from_str::<SetsFile>(BUILD_SETS)
        .map(|f| f.set)
        .map_err(|e| ToolchainError::Data(format!("buildsets.toml: {e}")))
}

/// The pin of one package.
pub fn locked_package(name: &str) -> Result<LockedPackage, ToolchainError> {
    let lock = toml_edit::de::from_str::<LockFile>(LOCK)
        .map_err(|e| ToolchainError::Data(format!("toolchain.lock: {e}")))?;
    lock.package
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| ToolchainError::NotLocked(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_follow_hf() {
        let names: Vec<String> = build_sets()
            .unwrap()
            .iter()
            .map(|s| s.variant_name())
            .collect();
        assert_eq!(
            names,
            [
                "torch211-cxx11-cpu-x86_64-linux",
                "torch211-cxx11-cu130-x86_64-linux"
            ]
        );
    }

    #[test]
    fn every_set_package_is_pinned() {
        for set in build_sets().unwrap() {
            for p in &set.packages {
                let pin = locked_package(p).unwrap();
                assert_eq!(pin.sha256.len(), 64, "{p}");
                assert!(pin.file.ends_with(".whl"));
            }
        }
    }
}
