//! Repository metadata (repos, commits, trees, refs, tokens, orgs) behind a trait; the default is SQLite.
//!
//! Handlers only see [`MetaStore`], so a Postgres implementation can replace [`SqliteStore`] without
//! touching them. Every write is one transaction: a commit and its ref move become visible together or not at all.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use sha1::{Digest, Sha1};

use crate::auth::{Identity, new_token, token_hash};
use crate::model::{
    ApplyError, Commit, CommitRequest, Op, RefEntry, RefKind, Repo, RepoKey, RepoType, Tree,
    apply_ops, is_commit_id, validate_name, validate_ref_name,
};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("storage I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("corrupt stored tree {0}: {1}")]
    CorruptTree(String, serde_json::Error),
    #[error("{0}")]
    Invalid(String),
    #[error("You already created this {0} repo")]
    RepoExists(RepoKey),
    #[error(
        "repo `{}` would differ from the existing `{}` only in letter case, which the Hub treats as one name; \
         use `{}` or pick another name",
        requested.id(), existing.id(), existing.id()
    )]
    RepoCaseConflict {
        requested: RepoKey,
        existing: RepoKey,
    },
    #[error("Repository {0} not found")]
    RepoNotFound(RepoKey),
    #[error("Invalid rev id: {0}")]
    RevisionNotFound(String),
    #[error("{0} `{1}` already exists")]
    RefExists(&'static str, String),
    #[error("{0} `{1}` not found")]
    RefNotFound(&'static str, String),
    #[error(
        "a {other} named `{name}` already exists; a {kind} of the same name would make revision `{name}` \
         ambiguous (the {other} would shadow it); pick another name"
    )]
    RefNameTaken {
        kind: &'static str,
        other: &'static str,
        name: String,
    },
    #[error("cannot delete the default branch `main`")]
    DeleteMain,
    #[error(
        "parentCommit {expected} is not the head of `{branch}` (now {actual}): someone committed in between; \
         fetch the new head and retry"
    )]
    ParentMismatch {
        branch: String,
        expected: String,
        actual: String,
    },
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

/// An organisation as the overview endpoint shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgInfo {
    pub name: String,
    pub trusted: bool,
}

/// Metadata storage used by the HTTP handlers. All methods are blocking; call them off the async runtime.
pub trait MetaStore: Send + Sync + 'static {
    fn create_token(&self, user: &str, write: bool, orgs: &[String]) -> Result<String, StoreError>;
    fn lookup_token(&self, token: &str) -> Result<Option<Identity>, StoreError>;
    /// Forget a token; returns whether it existed.
    fn revoke_token(&self, token: &str) -> Result<bool, StoreError>;

    /// Mark an organisation as a trusted kernel publisher (or not); creates the organisation if needed.
    fn set_org_trusted(&self, org: &str, trusted: bool) -> Result<(), StoreError>;
    /// An organisation known from `set_org_trusted` or from a token's `--org`.
    fn org(&self, name: &str) -> Result<Option<OrgInfo>, StoreError>;

    /// Create a repository with an empty initial commit on `main`.
    fn create_repo(&self, key: &RepoKey, private: bool, author: &str) -> Result<Repo, StoreError>;
    fn delete_repo(&self, key: &RepoKey) -> Result<(), StoreError>;
    /// Rename `from` to `to` (same type), keeping its commits, refs and settings; the old name is free after.
    fn move_repo(&self, from: &RepoKey, to: &RepoKey) -> Result<Repo, StoreError>;
    fn repo(&self, key: &RepoKey) -> Result<Option<Repo>, StoreError>;
    fn list_repos(&self) -> Result<Vec<Repo>, StoreError>;
    fn set_private(&self, repo: &Repo, private: bool) -> Result<(), StoreError>;

    /// A branch, tag, `refs/heads/x`, `refs/tags/x` or full commit id of `repo`.
    fn resolve(&self, repo: &Repo, rev: &str) -> Result<Commit, StoreError>;
    fn tree(&self, tree_id: &str) -> Result<Arc<Tree>, StoreError>;
    fn refs(&self, repo: &Repo) -> Result<Vec<RefEntry>, StoreError>;
    /// Point a new branch or tag at the commit `rev` resolves to.
    fn create_ref(
        &self,
        repo: &Repo,
        kind: RefKind,
        name: &str,
        rev: &str,
    ) -> Result<(), StoreError>;
    fn delete_ref(&self, repo: &Repo, kind: RefKind, name: &str) -> Result<(), StoreError>;
    /// Apply `req` on top of its branch head and move the branch, atomically.
    fn commit(&self, repo: &Repo, req: &CommitRequest) -> Result<Commit, StoreError>;
    /// Replace `branch`'s history by one parentless commit of its current tree, then drop the repo's commits
    /// that no branch or tag reaches any more (their blobs become garbage for `kforge hub gc`).
    fn squash_branch(
        &self,
        repo: &Repo,
        branch: &str,
        title: &str,
        author: &str,
    ) -> Result<Commit, StoreError>;
    /// Commits reachable from `rev`, newest first, at most `limit`.
    fn history(&self, repo: &Repo, rev: &str, limit: usize) -> Result<Vec<Commit>, StoreError>;
    /// Record that a writer of `repo` proved it holds blob `sha256` (it uploaded the bytes or sent them inline).
    /// Blobs are shared across repos, so only a grant lets a commit reference one without uploading it:
    /// otherwise knowing a hash would be enough to copy a private repo's file.
    fn grant_blob(&self, repo: &Repo, sha256: &str) -> Result<(), StoreError>;
    /// May `repo` reference blob `sha256` without uploading it?
    fn blob_granted(&self, repo: &Repo, sha256: &str) -> Result<bool, StoreError>;
    /// Drop every repo's grant of these blobs (garbage collection deleted them): whoever stores one again
    /// must send its bytes, whichever repo it is for.
    fn forget_blobs(&self, sha256s: &[String]) -> Result<(), StoreError>;
    /// Drop trees no commit uses, then return the sha256 of every blob a remaining tree references.
    fn prune_and_list_referenced(&self) -> Result<std::collections::HashSet<String>, StoreError>;
}

/// The SQLite implementation: one database file, a small connection pool, and one in-process write lock so
/// concurrent commits queue instead of failing with `SQLITE_BUSY`.
pub struct SqliteStore {
    path: PathBuf,
    pool: Mutex<Vec<Connection>>,
    write_lock: Mutex<()>,
    trees: Mutex<HashMap<String, Arc<Tree>>>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tokens (
    hash TEXT PRIMARY KEY, user TEXT NOT NULL, write INTEGER NOT NULL, orgs TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS orgs (name TEXT PRIMARY KEY, trusted INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS repos (
    id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    private INTEGER NOT NULL, created INTEGER NOT NULL, UNIQUE (type, namespace, name));
CREATE TABLE IF NOT EXISTS trees (id TEXT PRIMARY KEY, files TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commits (
    id TEXT PRIMARY KEY, repo INTEGER NOT NULL, parent TEXT, tree TEXT NOT NULL, title TEXT NOT NULL,
    message TEXT NOT NULL, author TEXT NOT NULL, created INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS commits_repo ON commits (repo);
CREATE TABLE IF NOT EXISTS refs (
    repo INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, target TEXT NOT NULL,
    PRIMARY KEY (repo, kind, name));
CREATE TABLE IF NOT EXISTS blob_grants (
    repo INTEGER NOT NULL, sha256 TEXT NOT NULL, PRIMARY KEY (repo, sha256));
";

fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

fn commit_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Commit> {
    Ok(Commit {
        id: r.get(0)?,
        parent: r.get(1)?,
        tree_id: r.get(2)?,
        title: r.get(3)?,
        message: r.get(4)?,
        author: r.get(5)?,
        created: r.get(6)?,
    })
}

const COMMIT_COLUMNS: &str = "id, parent, tree, title, message, author, created";

fn repo_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Repo> {
    let ty: String = r.get(1)?;
    Ok(Repo {
        rowid: r.get(0)?,
        key: RepoKey {
            repo_type: RepoType::parse(&ty).unwrap_or(RepoType::Model),
            namespace: r.get(2)?,
            name: r.get(3)?,
        },
        private: r.get(4)?,
        created: r.get(5)?,
    })
}

const GRANT_BLOB: &str = "INSERT OR IGNORE INTO blob_grants (repo, sha256) VALUES (?1, ?2)";

fn find_repo(conn: &Connection, key: &RepoKey) -> rusqlite::Result<Option<Repo>> {
    conn.query_row(
        "SELECT id, type, namespace, name, private, created FROM repos
         WHERE type = ?1 AND namespace = ?2 AND name = ?3",
        params![key.repo_type.as_str(), key.namespace, key.name],
        repo_from_row,
    )
    .optional()
}

/// The commit a branch or tag points at, if it exists.
fn ref_target(
    conn: &Connection,
    repo: &Repo,
    kind: RefKind,
    name: &str,
) -> rusqlite::Result<Option<String>> {
    conn.query_row(
        "SELECT target FROM refs WHERE repo = ?1 AND kind = ?2 AND name = ?3",
        params![repo.rowid, kind.as_str(), name],
        |r| r.get(0),
    )
    .optional()
}

fn branch_head(conn: &Connection, repo: &Repo, branch: &str) -> rusqlite::Result<Option<String>> {
    ref_target(conn, repo, RefKind::Branch, branch)
}

fn move_branch(conn: &Connection, repo: &Repo, branch: &str, target: &str) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE refs SET target = ?1 WHERE repo = ?2 AND kind = 'branch' AND name = ?3",
        params![target, repo.rowid, branch],
    )?;
    Ok(())
}

fn commit_tree(conn: &Connection, commit: &str) -> rusqlite::Result<String> {
    conn.query_row(
        "SELECT tree FROM commits WHERE id = ?1",
        params![commit],
        |r| r.get(0),
    )
}

/// The repo whose namespace and name equal `key`'s ignoring ASCII case (names are ASCII): the Hub treats
/// such names as one, so a second one would be a confusable twin.
fn find_repo_any_case(conn: &Connection, key: &RepoKey) -> rusqlite::Result<Option<Repo>> {
    conn.query_row(
        "SELECT id, type, namespace, name, private, created FROM repos
         WHERE type = ?1 AND namespace = ?2 COLLATE NOCASE AND name = ?3 COLLATE NOCASE
         ORDER BY namespace = ?2 AND name = ?3 DESC LIMIT 1",
        params![key.repo_type.as_str(), key.namespace, key.name],
        repo_from_row,
    )
    .optional()
}

/// Refuses a user or organisation name that differs only in letter case from a namespace already known (a
/// token's user, an organisation, or the owner of a stored repo): the Hub treats those as one name, and two such
/// namespaces would let a repo-name case conflict name a repo its caller cannot read. A name already known as
/// spelled (a data directory from before this rule) keeps working.
fn refuse_namespace_case_variant(
    conn: &Connection,
    what: &str,
    name: &str,
) -> Result<(), StoreError> {
    let existing: Option<String> = conn
        .query_row(
            "WITH known(name) AS (SELECT user FROM tokens UNION SELECT name FROM orgs
                                  UNION SELECT namespace FROM repos)
             SELECT name FROM known WHERE name = ?1 COLLATE NOCASE AND name != ?1
               AND NOT EXISTS (SELECT 1 FROM known WHERE name = ?1) LIMIT 1",
            params![name],
            |r| r.get(0),
        )
        .optional()?;
    match existing {
        Some(existing) => Err(StoreError::Invalid(format!(
            "{what} `{name}` differs from the existing namespace `{existing}` only in letter case, which the Hub \
             treats as one name; use `{existing}` or pick another name"
        ))),
        None => Ok(()),
    }
}

fn conflict(requested: &RepoKey, existing: RepoKey) -> StoreError {
    if *requested == existing {
        StoreError::RepoExists(existing)
    } else {
        StoreError::RepoCaseConflict {
            requested: requested.clone(),
            existing,
        }
    }
}

/// A pooled connection, returned to the pool on drop.
struct Pooled<'a> {
    conn: Option<Connection>,
    pool: &'a Mutex<Vec<Connection>>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("present until drop")
    }
}

impl std::ops::DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("present until drop")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let (Some(conn), Ok(mut pool)) = (self.conn.take(), self.pool.lock()) {
            pool.push(conn);
        }
    }
}

impl SqliteStore {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let store = SqliteStore {
            path: path.to_owned(),
            pool: Mutex::new(Vec::new()),
            write_lock: Mutex::new(()),
            trees: Mutex::new(HashMap::new()),
        };
        let mut conn = store.conn()?;
        let had_grants: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'blob_grants')",
            [],
            |r| r.get(0),
        )?;
        conn.execute_batch(SCHEMA)?;
        if !had_grants {
            Self::grant_committed_blobs(&mut conn)?;
        }
        drop(conn);
        Ok(store)
    }

    /// A data directory from before blob grants: every repo may keep referencing the blobs its commits hold.
    fn grant_committed_blobs(conn: &mut Connection) -> Result<(), StoreError> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut select = tx.prepare(
                "SELECT DISTINCT c.repo, t.id, t.files FROM commits c JOIN trees t ON t.id = c.tree",
            )?;
            let mut insert = tx.prepare(GRANT_BLOB)?;
            let mut rows = select.query([])?;
            while let Some(row) = rows.next()? {
                let (repo, id, text): (i64, String, String) =
                    (row.get(0)?, row.get(1)?, row.get(2)?);
                let tree = Tree::from_json(&text).map_err(|e| StoreError::CorruptTree(id, e))?;
                for file in tree.files.values() {
                    insert.execute(params![repo, file.sha256])?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn connect(&self) -> Result<Connection, StoreError> {
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(Duration::from_secs(30))?;
        // WAL: readers never block the writer; FULL: a commit acknowledged to a client survives power loss.
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
        )?;
        Ok(conn)
    }

    fn conn(&self) -> Result<Pooled<'_>, StoreError> {
        let pooled = self.pool.lock().ok().and_then(|mut p| p.pop());
        let conn = match pooled {
            Some(c) => c,
            None => self.connect()?,
        };
        Ok(Pooled {
            conn: Some(conn),
            pool: &self.pool,
        })
    }

    fn write_guard(&self) -> std::sync::MutexGuard<'_, ()> {
        // A panic while holding the lock leaves no partial state (the transaction rolls back), so recover.
        self.write_lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn resolve_in(conn: &Connection, repo: &Repo, rev: &str) -> Result<Commit, StoreError> {
        let not_found = || StoreError::RevisionNotFound(rev.to_owned());
        if is_commit_id(rev) {
            return conn
                .query_row(
                    &format!("SELECT {COMMIT_COLUMNS} FROM commits WHERE id = ?1 AND repo = ?2"),
                    params![rev, repo.rowid],
                    commit_from_row,
                )
                .optional()?
                .ok_or_else(not_found);
        }
        let kinds: &[(RefKind, &str)] = if let Some(b) = rev.strip_prefix("refs/heads/") {
            &[(RefKind::Branch, b)]
        } else if let Some(t) = rev.strip_prefix("refs/tags/") {
            &[(RefKind::Tag, t)]
        } else {
            &[(RefKind::Branch, rev), (RefKind::Tag, rev)]
        };
        for (kind, name) in kinds {
            let found = conn
                .query_row(
                    &format!(
                        "SELECT {COMMIT_COLUMNS} FROM commits WHERE id = \
                         (SELECT target FROM refs WHERE repo = ?1 AND kind = ?2 AND name = ?3)"
                    ),
                    params![repo.rowid, kind.as_str(), name],
                    commit_from_row,
                )
                .optional()?;
            if let Some(c) = found {
                return Ok(c);
            }
        }
        Err(not_found())
    }

    fn load_tree(&self, conn: &Connection, tree_id: &str) -> Result<Arc<Tree>, StoreError> {
        if let Some(t) = self.trees.lock().ok().and_then(|m| m.get(tree_id).cloned()) {
            return Ok(t);
        }
        let text: String = conn.query_row(
            "SELECT files FROM trees WHERE id = ?1",
            params![tree_id],
            |r| r.get(0),
        )?;
        let tree = Arc::new(
            Tree::from_json(&text).map_err(|e| StoreError::CorruptTree(tree_id.to_owned(), e))?,
        );
        if let Ok(mut cache) = self.trees.lock() {
            // Trees are immutable, so caching is always correct; the bound only caps memory.
            if cache.len() >= 512 {
                cache.clear();
            }
            cache.insert(tree_id.to_owned(), tree.clone());
        }
        Ok(tree)
    }

    fn insert_commit(
        tx: &rusqlite::Transaction<'_>,
        repo: &Repo,
        tree: &Tree,
        parent: Option<&str>,
        title: &str,
        message: &str,
        author: &str,
    ) -> Result<Commit, StoreError> {
        let tree_id = tree.id();
        tx.execute(
            "INSERT OR IGNORE INTO trees (id, files) VALUES (?1, ?2)",
            params![tree_id, tree.to_json()],
        )?;
        let t = now();
        let mut h = Sha1::new();
        h.update(
            format!(
                "tree {tree_id}\nparent {}\nrepo {}\nauthor {author} {}\n\n{title}\n\n{message}",
                parent.unwrap_or(""),
                repo.rowid,
                t.as_nanos()
            )
            .as_bytes(),
        );
        let commit = Commit {
            id: hex::encode(h.finalize()),
            tree_id,
            parent: parent.map(str::to_owned),
            title: title.to_owned(),
            message: message.to_owned(),
            author: author.to_owned(),
            created: t.as_secs() as i64,
        };
        tx.execute(
            "INSERT INTO commits (id, repo, parent, tree, title, message, author, created)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                commit.id,
                repo.rowid,
                commit.parent,
                commit.tree_id,
                commit.title,
                commit.message,
                commit.author,
                commit.created
            ],
        )?;
        Ok(commit)
    }
}

impl MetaStore for SqliteStore {
    fn create_token(&self, user: &str, write: bool, orgs: &[String]) -> Result<String, StoreError> {
        validate_name("user name", user).map_err(StoreError::Invalid)?;
        for org in orgs {
            validate_name("organisation name", org).map_err(StoreError::Invalid)?;
        }
        let token = new_token()?;
        let _w = self.write_guard();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let names: Vec<(&str, &str)> = std::iter::once(("user name", user))
            .chain(orgs.iter().map(|o| ("organisation name", o.as_str())))
            .collect();
        for (i, &(what, name)) in names.iter().enumerate() {
            refuse_namespace_case_variant(&tx, what, name)?;
            let twin = names[..i]
                .iter()
                .map(|&(_, n)| n)
                .find(|n| n.eq_ignore_ascii_case(name) && *n != name);
            if let Some(twin) = twin {
                return Err(StoreError::Invalid(format!(
                    "{what} `{name}` differs from `{twin}` only in letter case, which the Hub treats as one \
                     name; spell both the same"
                )));
            }
        }
        tx.execute(
            "INSERT INTO tokens (hash, user, write, orgs) VALUES (?1, ?2, ?3, ?4)",
            params![token_hash(&token), user, write, orgs.join(",")],
        )?;
        for org in orgs {
            tx.execute(
                "INSERT OR IGNORE INTO orgs (name) VALUES (?1)",
                params![org],
            )?;
        }
        tx.commit()?;
        Ok(token)
    }

    fn lookup_token(&self, token: &str) -> Result<Option<Identity>, StoreError> {
        let row = self
            .conn()?
            .query_row(
                "SELECT user, write, orgs FROM tokens WHERE hash = ?1",
                params![token_hash(token)],
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

    fn revoke_token(&self, token: &str) -> Result<bool, StoreError> {
        let _w = self.write_guard();
        let n = self.conn()?.execute(
            "DELETE FROM tokens WHERE hash = ?1",
            params![token_hash(token)],
        )?;
        Ok(n > 0)
    }

    fn set_org_trusted(&self, org: &str, trusted: bool) -> Result<(), StoreError> {
        validate_name("organisation name", org).map_err(StoreError::Invalid)?;
        let _w = self.write_guard();
        let conn = self.conn()?;
        refuse_namespace_case_variant(&conn, "organisation name", org)?;
        conn.execute(
            "INSERT INTO orgs (name, trusted) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET trusted = excluded.trusted",
            params![org, trusted],
        )?;
        Ok(())
    }

    fn org(&self, name: &str) -> Result<Option<OrgInfo>, StoreError> {
        Ok(self
            .conn()?
            .query_row(
                "SELECT name, trusted FROM orgs WHERE name = ?1",
                params![name],
                |r| {
                    Ok(OrgInfo {
                        name: r.get(0)?,
                        trusted: r.get(1)?,
                    })
                },
            )
            .optional()?)
    }

    fn create_repo(&self, key: &RepoKey, private: bool, author: &str) -> Result<Repo, StoreError> {
        validate_name("namespace", &key.namespace).map_err(StoreError::Invalid)?;
        validate_name("repository name", &key.name).map_err(StoreError::Invalid)?;
        let _w = self.write_guard();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(existing) = find_repo_any_case(&tx, key)? {
            return Err(conflict(key, existing.key));
        }
        let created = now().as_secs() as i64;
        tx.execute(
            "INSERT INTO repos (type, namespace, name, private, created) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![key.repo_type.as_str(), key.namespace, key.name, private, created],
        )?;
        let repo = Repo {
            rowid: tx.last_insert_rowid(),
            key: key.clone(),
            private,
            created,
        };
        let initial = Self::insert_commit(
            &tx,
            &repo,
            &Tree::default(),
            None,
            "initial commit",
            "",
            author,
        )?;
        tx.execute(
            "INSERT INTO refs (repo, kind, name, target) VALUES (?1, 'branch', 'main', ?2)",
            params![repo.rowid, initial.id],
        )?;
        tx.commit()?;
        Ok(repo)
    }

    fn delete_repo(&self, key: &RepoKey) -> Result<(), StoreError> {
        let _w = self.write_guard();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let id: Option<i64> = tx
            .query_row(
                "SELECT id FROM repos WHERE type = ?1 AND namespace = ?2 AND name = ?3",
                params![key.repo_type.as_str(), key.namespace, key.name],
                |r| r.get(0),
            )
            .optional()?;
        let id = id.ok_or_else(|| StoreError::RepoNotFound(key.clone()))?;
        tx.execute("DELETE FROM refs WHERE repo = ?1", params![id])?;
        tx.execute("DELETE FROM commits WHERE repo = ?1", params![id])?;
        tx.execute("DELETE FROM blob_grants WHERE repo = ?1", params![id])?;
        tx.execute("DELETE FROM repos WHERE id = ?1", params![id])?;
        tx.commit()?;
        Ok(())
    }

    fn move_repo(&self, from: &RepoKey, to: &RepoKey) -> Result<Repo, StoreError> {
        validate_name("namespace", &to.namespace).map_err(StoreError::Invalid)?;
        validate_name("repository name", &to.name).map_err(StoreError::Invalid)?;
        if from.repo_type != to.repo_type {
            return Err(StoreError::Invalid(format!(
                "cannot move a {} repo to a {} repo",
                from.repo_type.as_str(),
                to.repo_type.as_str()
            )));
        }
        let _w = self.write_guard();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut repo =
            find_repo(&tx, from)?.ok_or_else(|| StoreError::RepoNotFound(from.clone()))?;
        // Changing only the letter case of a repo's own name is allowed.
        if let Some(existing) = find_repo_any_case(&tx, to)?.filter(|e| e.rowid != repo.rowid) {
            return Err(conflict(to, existing.key));
        }
        tx.execute(
            "UPDATE repos SET namespace = ?1, name = ?2 WHERE id = ?3",
            params![to.namespace, to.name, repo.rowid],
        )?;
        tx.commit()?;
        repo.key = to.clone();
        Ok(repo)
    }

    fn repo(&self, key: &RepoKey) -> Result<Option<Repo>, StoreError> {
        Ok(find_repo(&*self.conn()?, key)?)
    }

    fn list_repos(&self) -> Result<Vec<Repo>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT id, type, namespace, name, private, created FROM repos ORDER BY namespace, name, type",
        )?;
        let rows = stmt.query_map([], repo_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn set_private(&self, repo: &Repo, private: bool) -> Result<(), StoreError> {
        let _w = self.write_guard();
        self.conn()?.execute(
            "UPDATE repos SET private = ?1 WHERE id = ?2",
            params![private, repo.rowid],
        )?;
        Ok(())
    }

    fn resolve(&self, repo: &Repo, rev: &str) -> Result<Commit, StoreError> {
        Self::resolve_in(&*self.conn()?, repo, rev)
    }

    fn tree(&self, tree_id: &str) -> Result<Arc<Tree>, StoreError> {
        self.load_tree(&*self.conn()?, tree_id)
    }

    fn refs(&self, repo: &Repo) -> Result<Vec<RefEntry>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn
            .prepare("SELECT kind, name, target FROM refs WHERE repo = ?1 ORDER BY kind, name")?;
        let rows = stmt.query_map(params![repo.rowid], |r| {
            let kind: String = r.get(0)?;
            Ok(RefEntry {
                kind: if kind == "tag" {
                    RefKind::Tag
                } else {
                    RefKind::Branch
                },
                name: r.get(1)?,
                target: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn create_ref(
        &self,
        repo: &Repo,
        kind: RefKind,
        name: &str,
        rev: &str,
    ) -> Result<(), StoreError> {
        validate_ref_name(kind, name).map_err(StoreError::Invalid)?;
        let _w = self.write_guard();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let target = Self::resolve_in(&tx, repo, rev)?;
        // `resolve` tries branches before tags, so a tag named like a branch (or a branch created over a
        // tag's name) would silently serve other content for that revision.
        let other = match kind {
            RefKind::Branch => RefKind::Tag,
            RefKind::Tag => RefKind::Branch,
        };
        if ref_target(&tx, repo, other, name)?.is_some() {
            return Err(StoreError::RefNameTaken {
                kind: kind.as_str(),
                other: other.as_str(),
                name: name.to_owned(),
            });
        }
        let inserted = tx.execute(
            "INSERT OR IGNORE INTO refs (repo, kind, name, target) VALUES (?1, ?2, ?3, ?4)",
            params![repo.rowid, kind.as_str(), name, target.id],
        )?;
        if inserted == 0 {
            return Err(StoreError::RefExists(kind.as_str(), name.to_owned()));
        }
        tx.commit()?;
        Ok(())
    }

    fn delete_ref(&self, repo: &Repo, kind: RefKind, name: &str) -> Result<(), StoreError> {
        if kind == RefKind::Branch && name == "main" {
            return Err(StoreError::DeleteMain);
        }
        let _w = self.write_guard();
        let deleted = self.conn()?.execute(
            "DELETE FROM refs WHERE repo = ?1 AND kind = ?2 AND name = ?3",
            params![repo.rowid, kind.as_str(), name],
        )?;
        if deleted == 0 {
            return Err(StoreError::RefNotFound(kind.as_str(), name.to_owned()));
        }
        Ok(())
    }

    fn commit(&self, repo: &Repo, req: &CommitRequest) -> Result<Commit, StoreError> {
        let branch = req
            .branch
            .strip_prefix("refs/heads/")
            .unwrap_or(&req.branch);
        let _w = self.write_guard();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let head = branch_head(&tx, repo, branch)?.ok_or_else(|| {
            StoreError::RevisionNotFound(format!(
                "{branch} (commits go to an existing branch; create it first)"
            ))
        })?;
        if let Some(expected) = &req.parent
            && *expected != head
        {
            return Err(StoreError::ParentMismatch {
                branch: branch.to_owned(),
                expected: expected.clone(),
                actual: head,
            });
        }
        let old = self.load_tree(&tx, &commit_tree(&tx, &head)?)?;
        let new = apply_ops(&old, &req.ops)?;
        {
            let mut grant = tx.prepare(GRANT_BLOB)?;
            for op in &req.ops {
                if let Op::Put { blob, .. } = op {
                    grant.execute(params![repo.rowid, blob.sha256])?;
                }
            }
        }
        let commit = Self::insert_commit(
            &tx,
            repo,
            &new,
            Some(&head),
            &req.title,
            &req.message,
            &req.author,
        )?;
        move_branch(&tx, repo, branch, &commit.id)?;
        tx.commit()?;
        Ok(commit)
    }

    fn squash_branch(
        &self,
        repo: &Repo,
        branch: &str,
        title: &str,
        author: &str,
    ) -> Result<Commit, StoreError> {
        let _w = self.write_guard();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let head = branch_head(&tx, repo, branch)?
            .ok_or_else(|| StoreError::RefNotFound("branch", branch.to_owned()))?;
        let tree = self.load_tree(&tx, &commit_tree(&tx, &head)?)?;
        let squashed = Self::insert_commit(&tx, repo, &tree, None, title, "", author)?;
        move_branch(&tx, repo, branch, &squashed.id)?;
        let parents: HashMap<String, Option<String>> = tx
            .prepare("SELECT id, parent FROM commits WHERE repo = ?1")?
            .query_map(params![repo.rowid], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let mut reachable = std::collections::HashSet::new();
        let targets: Vec<String> = tx
            .prepare("SELECT target FROM refs WHERE repo = ?1")?
            .query_map(params![repo.rowid], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        for target in targets {
            let mut next = Some(target);
            while let Some(id) = next.filter(|id| reachable.insert(id.clone())) {
                next = parents.get(&id).cloned().flatten();
            }
        }
        {
            let mut delete = tx.prepare("DELETE FROM commits WHERE id = ?1")?;
            for id in parents.keys().filter(|id| !reachable.contains(*id)) {
                delete.execute(params![id])?;
            }
        }
        tx.commit()?;
        Ok(squashed)
    }

    fn grant_blob(&self, repo: &Repo, sha256: &str) -> Result<(), StoreError> {
        let _w = self.write_guard();
        self.conn()?
            .execute(GRANT_BLOB, params![repo.rowid, sha256])?;
        Ok(())
    }

    fn blob_granted(&self, repo: &Repo, sha256: &str) -> Result<bool, StoreError> {
        Ok(self.conn()?.query_row(
            "SELECT EXISTS (SELECT 1 FROM blob_grants WHERE repo = ?1 AND sha256 = ?2)",
            params![repo.rowid, sha256],
            |r| r.get(0),
        )?)
    }

    fn forget_blobs(&self, sha256s: &[String]) -> Result<(), StoreError> {
        let _w = self.write_guard();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut forget = tx.prepare("DELETE FROM blob_grants WHERE sha256 = ?1")?;
            for sha256 in sha256s {
                forget.execute(params![sha256])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn prune_and_list_referenced(&self) -> Result<std::collections::HashSet<String>, StoreError> {
        let _w = self.write_guard();
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "DELETE FROM trees WHERE id NOT IN (SELECT tree FROM commits)",
            [],
        )?;
        let mut referenced = std::collections::HashSet::new();
        {
            let mut stmt = tx.prepare("SELECT id, files FROM trees")?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let (id, text): (String, String) = (row.get(0)?, row.get(1)?);
                let tree = Tree::from_json(&text).map_err(|e| StoreError::CorruptTree(id, e))?;
                referenced.extend(tree.files.into_values().map(|f| f.sha256));
            }
        }
        tx.commit()?;
        Ok(referenced)
    }

    fn history(&self, repo: &Repo, rev: &str, limit: usize) -> Result<Vec<Commit>, StoreError> {
        let conn = self.conn()?;
        let mut out = vec![Self::resolve_in(&conn, repo, rev)?];
        while out.len() < limit {
            let Some(parent) = out.last().and_then(|c| c.parent.clone()) else {
                break;
            };
            out.push(conn.query_row(
                &format!("SELECT {COMMIT_COLUMNS} FROM commits WHERE id = ?1"),
                params![parent],
                commit_from_row,
            )?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BlobInfo, Op};

    fn key(name: &str) -> RepoKey {
        RepoKey {
            repo_type: RepoType::Kernel,
            namespace: "acme".into(),
            name: name.into(),
        }
    }

    fn blob(n: u8) -> BlobInfo {
        BlobInfo {
            sha256: format!("{n:064x}"),
            sha1: format!("{n:040x}"),
            size: n as u64,
        }
    }

    fn put(path: &str, n: u8) -> Op {
        Op::Put {
            path: path.into(),
            blob: blob(n),
        }
    }

    fn request(branch: &str, parent: Option<String>, ops: Vec<Op>) -> CommitRequest {
        CommitRequest {
            branch: branch.into(),
            parent,
            title: "t".into(),
            message: String::new(),
            author: "alice".into(),
            ops,
        }
    }

    #[test]
    fn blob_grants_follow_commits_and_survive_an_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.sqlite");
        let store = SqliteStore::open(&path).unwrap();
        let (a, b) = (
            store.create_repo(&key("a"), true, "alice").unwrap(),
            store.create_repo(&key("b"), false, "bob").unwrap(),
        );
        store
            .commit(&a, &request("main", None, vec![put("w", 1)]))
            .unwrap();
        store.grant_blob(&b, &blob(2).sha256).unwrap();
        let granted =
            |s: &SqliteStore, r: &Repo, n: u8| s.blob_granted(r, &blob(n).sha256).unwrap();
        assert!(granted(&store, &a, 1) && !granted(&store, &b, 1));
        assert!(granted(&store, &b, 2) && !granted(&store, &a, 2));
        drop(store);

        // A data directory written before grants existed: repos keep the blobs their commits reference, and
        // nothing else (b's uncommitted upload has no commit to prove it).
        Connection::open(&path)
            .unwrap()
            .execute_batch("DROP TABLE blob_grants")
            .unwrap();
        let store = SqliteStore::open(&path).unwrap();
        assert!(granted(&store, &a, 1) && !granted(&store, &b, 1) && !granted(&store, &b, 2));

        store.delete_repo(&key("a")).unwrap();
        let a2 = store.create_repo(&key("a"), true, "alice").unwrap();
        assert!(
            !granted(&store, &a2, 1),
            "a deleted repo's grants do not pass to a new one of that name"
        );
    }

    #[test]
    fn squashing_a_branch_frees_what_only_its_history_held() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("hub.sqlite")).unwrap();
        let repo = store.create_repo(&key("s"), false, "alice").unwrap();
        let c1 = store
            .commit(&repo, &request("main", None, vec![put("a", 1)]))
            .unwrap();
        store.create_ref(&repo, RefKind::Tag, "t1", &c1.id).unwrap();
        let c2 = store
            .commit(&repo, &request("main", None, vec![put("a", 2)]))
            .unwrap();
        store
            .commit(&repo, &request("main", None, vec![put("a", 3)]))
            .unwrap();

        let s = store
            .squash_branch(&repo, "main", "squashed", "alice")
            .unwrap();
        assert_eq!(s.parent, None);
        assert_eq!(store.history(&repo, "main", 10).unwrap(), vec![s.clone()]);
        assert_eq!(
            store.tree(&s.tree_id).unwrap().files["a"].sha256,
            blob(3).sha256
        );
        // The tag keeps c1 (and the initial commit); c2 was only on main's old history.
        assert_eq!(store.resolve(&repo, "t1").unwrap(), c1);
        assert!(matches!(
            store.resolve(&repo, &c2.id),
            Err(StoreError::RevisionNotFound(_))
        ));
        let referenced = store.prune_and_list_referenced().unwrap();
        assert!(referenced.contains(&blob(1).sha256) && referenced.contains(&blob(3).sha256));
        assert!(!referenced.contains(&blob(2).sha256));
        assert!(matches!(
            store.squash_branch(&repo, "nope", "x", "alice"),
            Err(StoreError::RefNotFound("branch", _))
        ));
    }

    #[test]
    fn commits_refs_and_history() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("hub.sqlite")).unwrap();
        let repo = store.create_repo(&key("relu"), false, "alice").unwrap();
        assert!(matches!(
            store.create_repo(&key("relu"), false, "alice"),
            Err(StoreError::RepoExists(_))
        ));
        let initial = store.resolve(&repo, "main").unwrap();
        assert!(is_commit_id(&initial.id));
        assert!(store.tree(&initial.tree_id).unwrap().files.is_empty());

        let c1 = store
            .commit(
                &repo,
                &request("main", Some(initial.id.clone()), vec![put("a/b", 1)]),
            )
            .unwrap();
        assert_eq!(c1.parent.as_deref(), Some(initial.id.as_str()));
        assert_eq!(store.resolve(&repo, "refs/heads/main").unwrap(), c1);
        assert_eq!(store.resolve(&repo, &c1.id).unwrap(), c1);
        // A stale parent is a conflict and changes nothing.
        let err = store
            .commit(
                &repo,
                &request("main", Some(initial.id.clone()), vec![put("x", 2)]),
            )
            .unwrap_err();
        assert!(matches!(err, StoreError::ParentMismatch { .. }), "{err}");
        assert_eq!(store.resolve(&repo, "main").unwrap(), c1);
        // An op that fails leaves the branch where it was.
        let err = store
            .commit(
                &repo,
                &request(
                    "main",
                    None,
                    vec![put("y", 3), Op::DeleteFile { path: "zz".into() }],
                ),
            )
            .unwrap_err();
        assert!(matches!(err, StoreError::Apply(ApplyError::MissingFile(_))));
        assert_eq!(store.resolve(&repo, "main").unwrap(), c1);

        store
            .create_ref(&repo, RefKind::Branch, "v1", "main")
            .unwrap();
        store
            .create_ref(&repo, RefKind::Tag, "t1", &initial.id)
            .unwrap();
        assert!(matches!(
            store.create_ref(&repo, RefKind::Branch, "v1", "main"),
            Err(StoreError::RefExists(..))
        ));
        // A tag may not take a branch's name (nor the reverse): the branch would shadow it.
        for (kind, name) in [
            (RefKind::Tag, "v1"),
            (RefKind::Tag, "main"),
            (RefKind::Branch, "t1"),
        ] {
            assert!(
                matches!(
                    store.create_ref(&repo, kind, name, &initial.id),
                    Err(StoreError::RefNameTaken { .. })
                ),
                "{name}"
            );
        }
        assert_eq!(store.resolve(&repo, "v1").unwrap(), c1);
        assert_eq!(store.resolve(&repo, "t1").unwrap(), initial);
        let c2 = store
            .commit(&repo, &request("v1", None, vec![put("c", 4)]))
            .unwrap();
        let names: Vec<_> = store
            .refs(&repo)
            .unwrap()
            .into_iter()
            .map(|r| (r.name, r.target))
            .collect();
        assert_eq!(
            names,
            [
                ("main".to_string(), c1.id.clone()),
                ("v1".to_string(), c2.id.clone()),
                ("t1".to_string(), initial.id.clone())
            ]
        );
        let tree = store.tree(&c2.tree_id).unwrap();
        assert_eq!(tree.files.keys().collect::<Vec<_>>(), ["a/b", "c"]);
        let log: Vec<_> = store
            .history(&repo, "v1", 10)
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(log, [c2.id.clone(), c1.id.clone(), initial.id.clone()]);
        assert!(matches!(
            store.resolve(&repo, "nope"),
            Err(StoreError::RevisionNotFound(_))
        ));
        assert!(matches!(
            store.commit(&repo, &request("nope", None, vec![])),
            Err(StoreError::RevisionNotFound(_))
        ));
        assert!(matches!(
            store.delete_ref(&repo, RefKind::Branch, "main"),
            Err(StoreError::DeleteMain)
        ));
        store.delete_ref(&repo, RefKind::Tag, "t1").unwrap();
        assert!(matches!(
            store.resolve(&repo, "t1"),
            Err(StoreError::RevisionNotFound(_))
        ));

        // Deleting and re-creating gives a fresh repository: old commits do not resolve in it.
        store.delete_repo(&key("relu")).unwrap();
        let again = store.create_repo(&key("relu"), true, "alice").unwrap();
        assert_ne!(again.rowid, repo.rowid);
        assert!(store.resolve(&again, &c1.id).is_err());
        assert!(store.repo(&key("relu")).unwrap().unwrap().private);
    }

    #[test]
    fn tokens_and_orgs() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("hub.sqlite")).unwrap();
        let token = store.create_token("alice", true, &["acme".into()]).unwrap();
        assert_eq!(
            store.lookup_token(&token).unwrap(),
            Some(Identity {
                user: "alice".into(),
                write: true,
                orgs: vec!["acme".into()]
            })
        );
        assert_eq!(store.lookup_token("hf_wrong").unwrap(), None);
        let other = store.create_token("bob", false, &[]).unwrap();
        assert!(store.revoke_token(&other).unwrap());
        assert!(!store.revoke_token(&other).unwrap());
        assert_eq!(store.lookup_token(&other).unwrap(), None);
        assert!(store.lookup_token(&token).unwrap().is_some());
        assert!(matches!(
            store.create_token("../x", false, &[]),
            Err(StoreError::Invalid(_))
        ));
        assert_eq!(
            store.org("acme").unwrap(),
            Some(OrgInfo {
                name: "acme".into(),
                trusted: false
            })
        );
        // Namespaces that differ only in letter case are one name on the Hub.
        for (user, orgs) in [
            ("Alice", vec![]),
            ("bob", vec!["ACME".to_owned()]),
            ("carol", vec!["Carol".into()]),
        ] {
            let err = store.create_token(user, true, &orgs).unwrap_err();
            assert!(err.to_string().contains("only in letter case"), "{err}");
        }
        assert!(store.set_org_trusted("Acme", true).is_err());
        assert!(store.create_token("ALICE2", true, &["acme".into()]).is_ok());
        store.set_org_trusted("acme", true).unwrap();
        assert!(store.org("acme").unwrap().unwrap().trusted);
        assert_eq!(store.org("nobody").unwrap(), None);
    }
}
