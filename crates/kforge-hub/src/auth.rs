//! Access tokens: stored as sha256 hashes in SQLite; the clear token is shown once, at creation.

use std::io::Read;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum AuthError {
    #[error("token database: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("reading random bytes for a token: {0}")]
    Random(#[from] std::io::Error),
    #[error("invalid name `{0}`: expected 1-96 characters of letters, digits, `-`, `_` or `.`")]
    BadName(String),
}

/// Who a valid token belongs to and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub write: bool,
    pub orgs: Vec<String>,
}

/// Token table inside the hub's SQLite database.
pub struct TokenStore {
    conn: Connection,
}

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn check_name(name: &str) -> Result<(), AuthError> {
    let ok = !name.is_empty()
        && name.len() <= 96
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(AuthError::BadName(name.to_owned()))
    }
}

impl TokenStore {
    pub fn open(db_path: &Path) -> Result<Self, AuthError> {
        let conn = Connection::open(db_path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE IF NOT EXISTS tokens (
                 hash TEXT PRIMARY KEY, user TEXT NOT NULL, write INTEGER NOT NULL, orgs TEXT NOT NULL);",
        )?;
        Ok(Self { conn })
    }

    /// Create a token for `user` and return it in clear (only its hash is stored).
    pub fn create(&self, user: &str, write: bool, orgs: &[String]) -> Result<String, AuthError> {
        check_name(user)?;
        for org in orgs {
            check_name(org)?;
        }
        let mut random = [0u8; 20];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
        let token = format!("hf_{}", hex::encode(random));
        self.conn.execute(
            "INSERT INTO tokens (hash, user, write, orgs) VALUES (?1, ?2, ?3, ?4)",
            params![hash(&token), user, write, orgs.join(",")],
        )?;
        Ok(token)
    }

    /// The identity of `token`, or `None` if it is unknown.
    pub fn lookup(&self, token: &str) -> Result<Option<Identity>, AuthError> {
        let row = self
            .conn
            .query_row(
                "SELECT user, write, orgs FROM tokens WHERE hash = ?1",
                params![hash(token)],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, bool>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                },
            )
            .optional()?;
        Ok(row.map(|(user, write, orgs)| Identity {
            user,
            write,
            orgs: orgs
                .split(',')
                .filter(|o| !o.is_empty())
                .map(str::to_owned)
                .collect(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_are_stored_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("hub.sqlite");
        let store = TokenStore::open(&db).unwrap();
        let token = store.create("alice", true, &["acme".into()]).unwrap();
        let id = store.lookup(&token).unwrap().unwrap();
        assert_eq!(
            id,
            Identity {
                user: "alice".into(),
                write: true,
                orgs: vec!["acme".into()]
            }
        );
        assert_eq!(store.lookup("hf_wrong").unwrap(), None);
        let stored: String = store
            .conn
            .query_row("SELECT hash FROM tokens", [], |r| r.get(0))
            .unwrap();
        assert_ne!(stored, token);
        assert!(matches!(
            store.create("../x", false, &[]),
            Err(AuthError::BadName(_))
        ));
    }
}
