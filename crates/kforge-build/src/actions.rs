//! The action cache: outputs of compile and link commands keyed by the content of everything that
//! went in. A compile's key covers the command, the toolchain and the source; the headers it read
//! (from its depfile) are recorded with their hashes and checked on lookup, so editing a header
//! recompiles exactly the sources that include it.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{BuildError, io_err};

/// Name of the output file inside an entry.
const OUT: &str = "out";
const DEPS: &str = "deps.json";

/// A dependency recorded for a cache entry: a path (relative to the project root or absolute) and its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dep {
    pub path: String,
    pub sha256: String,
}

/// Handle on `<cache>/actions`, with a per-run memo of file hashes.
pub struct ActionCache {
    dir: PathBuf,
    hashes: Mutex<HashMap<PathBuf, String>>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A key from labelled parts (the labels keep ("ab","c") and ("a","bc") apart).
pub fn key_of(parts: &[(&str, &str)]) -> String {
    let mut h = Sha256::new();
    for (label, value) in parts {
        h.update(label.as_bytes());
        h.update([0]);
        h.update((value.len() as u64).to_le_bytes());
        h.update(value.as_bytes());
    }
    hex(&h.finalize())
}

impl ActionCache {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            hashes: Mutex::new(HashMap::new()),
        }
    }

    /// sha256 of a file's content (memoized for this run: sources do not change during a build).
    pub fn file_hash(&self, path: &Path) -> std::io::Result<String> {
        if let Some(h) = self.hashes.lock().expect("hash memo").get(path) {
            return Ok(h.clone());
        }
        let mut file = fs::File::open(path)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let h = hex(&hasher.finalize());
        self.hashes
            .lock()
            .expect("hash memo")
            .insert(path.to_path_buf(), h.clone());
        Ok(h)
    }

    /// The output of entry `key` if it exists and every recorded dependency (resolved against `root`)
    /// still has its recorded hash.
    pub fn lookup(&self, key: &str, root: &Path) -> Option<PathBuf> {
        let entry = self.dir.join(key);
        let out = entry.join(OUT);
        let deps: Vec<Dep> = serde_json::from_slice(&fs::read(entry.join(DEPS)).ok()?).ok()?;
        if !out.is_file() {
            return None;
        }
        for dep in deps {
            let hash = self.file_hash(&root.join(&dep.path)).ok()?;
            if hash != dep.sha256 {
                return None;
            }
        }
        Some(out)
    }

    /// Move `output` into entry `key` with its dependency list, replacing a stale entry atomically
    /// (readers see the old or the new entry, never a partial one). Returns the stored output path.
    pub fn store(
        &self,
        key: &str,
        work: &Path,
        output: &Path,
        deps: &[Dep],
    ) -> Result<PathBuf, BuildError> {
        let staged = work.join("entry");
        fs::create_dir_all(&staged).map_err(io_err(&staged))?;
        fs::rename(output, staged.join(OUT)).map_err(io_err(output))?;
        let json = serde_json::to_vec(deps).expect("deps serialize");
        fs::write(staged.join(DEPS), json).map_err(io_err(staged.join(DEPS)))?;
        fs::create_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        let entry = self.dir.join(key);
        if entry.exists() {
            // Stale (a header changed) or written concurrently by another build: move it aside first.
            let old = work.join("old");
            if fs::rename(&entry, &old).is_ok() {
                let _ = fs::remove_dir_all(&old);
            }
        }
        if let Err(e) = fs::rename(&staged, &entry) {
            // Another build stored the same key in between; its entry is as good as ours.
            if !entry.join(OUT).is_file() {
                return Err(BuildError::Io {
                    path: entry,
                    source: e,
                });
            }
        }
        Ok(entry.join(OUT))
    }

    /// A marker entry (no output), e.g. "this library passed the ABI check".
    pub fn has_marker(&self, key: &str) -> bool {
        self.dir.join(format!("{key}.ok")).is_file()
    }

    pub fn set_marker(&self, key: &str) -> Result<(), BuildError> {
        fs::create_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        let path = self.dir.join(format!("{key}.ok"));
        fs::write(&path, b"").map_err(io_err(&path))
    }
}

/// The prerequisites listed in a make-style depfile (`out.o: a.cpp b.h \` ...), in order, without the target.
pub fn parse_depfile(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some('\n') => {
                    chars.next();
                    push_word(&mut words, &mut cur);
                }
                Some('\r') => {
                    chars.next();
                    if chars.peek() == Some(&'\n') {
                        chars.next();
                    }
                    push_word(&mut words, &mut cur);
                }
                Some(' ') | Some('#') | Some('\\') => cur.push(chars.next().expect("peeked")),
                _ => cur.push('\\'),
            },
            '$' if chars.peek() == Some(&'$') => {
                chars.next();
                cur.push('$');
            }
            ' ' | '\t' | '\n' | '\r' => push_word(&mut words, &mut cur),
            _ => cur.push(c),
        }
    }
    push_word(&mut words, &mut cur);
    // Drop targets ("x.o:" or "x.o" followed by ":"), keep prerequisites.
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w.ends_with(':') {
            i += 1;
            continue;
        }
        if words.get(i + 1).is_some_and(|n| n == ":") {
            i += 2;
            continue;
        }
        if w != ":" {
            out.push(w.clone());
        }
        i += 1;
    }
    out.sort();
    out.dedup();
    out
}

fn push_word(words: &mut Vec<String>, cur: &mut String) {
    if !cur.is_empty() {
        words.push(std::mem::take(cur));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depfile_prerequisites_with_continuations_and_escapes() {
        let text =
            "/tmp/x/out.o: torch-ext/b.cpp \\\n  /opt/a\\ b/c.h torch-ext/b.h \\\n torch-ext/b.h\n";
        assert_eq!(
            parse_depfile(text),
            ["/opt/a b/c.h", "torch-ext/b.cpp", "torch-ext/b.h"]
        );
        // nvcc writes "target : deps"
        assert_eq!(
            parse_depfile("o.o : a.cu \\\n    b.cuh\n"),
            ["a.cu", "b.cuh"]
        );
    }

    #[test]
    fn entries_hit_until_a_dependency_changes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proj");
        fs::create_dir_all(&root).unwrap();
        fs::write(root.join("a.h"), "v1").unwrap();
        let cache = ActionCache::new(dir.path().join("actions"));
        let work = dir.path().join("work");
        fs::create_dir_all(&work).unwrap();
        fs::write(work.join("o"), "object").unwrap();
        let deps = vec![Dep {
            path: "a.h".into(),
            sha256: cache.file_hash(&root.join("a.h")).unwrap(),
        }];
        let stored = cache.store("k1", &work, &work.join("o"), &deps).unwrap();
        assert_eq!(fs::read_to_string(&stored).unwrap(), "object");
        assert_eq!(cache.lookup("k1", &root), Some(stored));
        assert_eq!(cache.lookup("k2", &root), None);

        fs::write(root.join("a.h"), "v2").unwrap();
        let fresh = ActionCache::new(dir.path().join("actions"));
        assert_eq!(fresh.lookup("k1", &root), None, "changed header must miss");
    }

    #[test]
    fn keys_separate_parts() {
        assert_ne!(key_of(&[("a", "bc")]), key_of(&[("a", "b"), ("", "c")]));
        assert_eq!(key_of(&[("x", "1")]), key_of(&[("x", "1")]));
    }
}
