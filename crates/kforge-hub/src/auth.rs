//! Access tokens and who may read or write what. Tokens are stored as sha256 hashes; the clear token is shown once.

use std::io::Read;

use sha2::{Digest, Sha256};

use crate::model::Repo;

/// Who a valid token belongs to and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub write: bool,
    pub orgs: Vec<String>,
}

impl Identity {
    /// The user's own namespace or one of its organisations.
    pub fn is_member(&self, namespace: &str) -> bool {
        self.user == namespace || self.orgs.iter().any(|o| o == namespace)
    }

    pub fn can_write(&self, namespace: &str) -> bool {
        self.write && self.is_member(namespace)
    }
}

/// May `who` see `repo`? Public repos are readable by anyone; private ones by members of the namespace.
pub fn can_read(who: Option<&Identity>, repo: &Repo) -> bool {
    !repo.private || who.is_some_and(|id| id.is_member(&repo.key.namespace))
}

/// The stored form of a token.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A fresh token: `hf_` + 40 hex digits from the OS random source (the Hub's `hf_` prefix keeps clients happy).
pub fn new_token() -> std::io::Result<String> {
    let mut random = [0u8; 20];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
    Ok(format!("hf_{}", hex::encode(random)))
}

/// Random hex for one-time upload tickets.
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut random = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
    Ok(hex::encode(random))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RepoKey, RepoType};

    fn repo(ns: &str, private: bool) -> Repo {
        Repo {
            rowid: 1,
            key: RepoKey {
                repo_type: RepoType::Kernel,
                namespace: ns.into(),
                name: "relu".into(),
            },
            private,
            created: 0,
        }
    }

    #[test]
    fn rights_follow_namespace_membership() {
        let alice = Identity {
            user: "alice".into(),
            write: true,
            orgs: vec!["acme".into()],
        };
        let reader = Identity {
            write: false,
            ..alice.clone()
        };
        assert!(alice.can_write("alice") && alice.can_write("acme") && !alice.can_write("bob"));
        assert!(!reader.can_write("acme"));
        assert!(can_read(None, &repo("bob", false)));
        assert!(!can_read(None, &repo("acme", true)));
        assert!(can_read(Some(&reader), &repo("acme", true)));
        assert!(!can_read(Some(&alice), &repo("bob", true)));
    }

    #[test]
    fn tokens_are_random_and_hashed() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert!(a.starts_with("hf_") && a.len() == 43);
        assert_ne!(a, b);
        assert_eq!(token_hash(&a).len(), 64);
        assert_ne!(token_hash(&a), a);
    }
}
