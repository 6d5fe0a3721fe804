//! The trust file: which public keys speak for which publisher (the namespace of a repo id).
//!
//! ```toml
//! [publishers.acme]
//! keys = ["kforge-ed25519 3q2+7w... release-2026"]
//! require-signature = true   # the default
//! ```
//!
//! Found at `$KFORGE_TRUST`, else `$XDG_CONFIG_HOME/kforge/trust.toml`, else `~/.config/kforge/trust.toml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use serde::Deserialize;

use crate::SignError;
use crate::keys::parse_public_key;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrust {
    #[serde(default)]
    publishers: BTreeMap<String, RawPublisher>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RawPublisher {
    keys: Vec<String>,
    #[serde(default = "yes")]
    require_signature: bool,
}

fn yes() -> bool {
    true
}

/// One publisher's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publisher {
    pub keys: Vec<VerifyingKey>,
    /// Loaders refuse this publisher's unsigned variants.
    pub require_signature: bool,
}

/// A parsed trust file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustStore {
    pub path: PathBuf,
    pub publishers: BTreeMap<String, Publisher>,
}

/// Where the trust file is looked for when none is named.
pub fn default_trust_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KFORGE_TRUST").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("kforge").join("trust.toml"))
}

impl TrustStore {
    /// Parse trust-file text; `path` is named in errors.
    pub fn parse(text: &str, path: &Path) -> Result<TrustStore, SignError> {
        let raw: RawTrust = toml_edit::de::from_str(text).map_err(|e| SignError::Trust {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let mut publishers = BTreeMap::new();
        for (name, p) in raw.publishers {
            if p.keys.is_empty() {
                return Err(SignError::Trust {
                    path: path.to_path_buf(),
                    message: format!(
                        "publishers.{name}.keys is empty; list the content of each KEY.pub that signs for {name}"
                    ),
                });
            }
            let keys = p
                .keys
                .iter()
                .map(|line| {
                    parse_public_key(line, path).map_err(|e| SignError::Trust {
                        path: path.to_path_buf(),
                        message: format!("publishers.{name}.keys: {e}"),
                    })
                })
                .collect::<Result<_, _>>()?;
            publishers.insert(
                name,
                Publisher {
                    keys,
                    require_signature: p.require_signature,
                },
            );
        }
        Ok(TrustStore {
            path: path.to_path_buf(),
            publishers,
        })
    }

    pub fn load(path: &Path) -> Result<TrustStore, SignError> {
        let text = std::fs::read_to_string(path).map_err(|source| SignError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// The named file, else the default one if it exists, else an empty store.
    pub fn load_default(explicit: Option<&Path>) -> Result<TrustStore, SignError> {
        match explicit {
            Some(p) => Self::load(p),
            None => match default_trust_path() {
                Some(p) if p.exists() => Self::load(&p),
                _ => Ok(TrustStore::default()),
            },
        }
    }

    /// Keys trusted for `publisher`, or for any publisher when `None`.
    pub fn keys(&self, publisher: Option<&str>) -> Result<Vec<VerifyingKey>, SignError> {
        match publisher {
            Some(name) => self
                .publishers
                .get(name)
                .map(|p| p.keys.clone())
                .ok_or_else(|| SignError::UnknownPublisher {
                    publisher: name.to_string(),
                    path: self.path.clone(),
                }),
            None => Ok(self
                .publishers
                .values()
                .flat_map(|p| p.keys.iter().copied())
                .collect()),
        }
    }

    /// Whether `publisher` requires signed variants.
    pub fn requires_signature(&self, publisher: &str) -> bool {
        self.publishers
            .get(publisher)
            .is_some_and(|p| p.require_signature)
    }
}
