//! Where an extension's undefined symbols come from at load time: its DT_NEEDED libraries and theirs,
//! located the way the dynamic loader would on the user's machine (the target torch's `lib/`, each
//! library's `$ORIGIN`-relative RPATH/RUNPATH, then the system directories for manylinux system libraries).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::elf::{map, parse_elf};

struct Lib {
    exports: HashSet<String>,
    needed: Vec<String>,
    /// RPATH/RUNPATH entries with `$ORIGIN` expanded.
    search: Vec<PathBuf>,
}

/// Loads and caches libraries by path; shared across the files of one check.
pub(crate) struct Resolver {
    torch_lib: PathBuf,
    system_dirs: Vec<PathBuf>,
    libs: HashMap<PathBuf, Option<Lib>>,
    /// Every soname located so far: the loader reuses an already-loaded library by soname, so a library that
    /// torch loads through its own RPATH satisfies an extension's DT_NEEDED without a search path.
    located: HashMap<String, PathBuf>,
}

/// The libraries reachable from a set of DT_NEEDED names, and what they export.
pub(crate) struct Closure {
    /// symbol -> the first library (by load order) exporting it.
    pub exports: HashMap<String, String>,
    /// Library names that could not be found anywhere.
    pub missing: Vec<String>,
    /// Every library name reached.
    pub reached: HashSet<String>,
}

pub(crate) fn expand_origin(entry: &str, origin: &Path) -> PathBuf {
    let o = origin.to_string_lossy();
    PathBuf::from(entry.replace("$ORIGIN", &o).replace("${ORIGIN}", &o))
}

impl Resolver {
    pub fn new(torch_lib: &Path, machine_triple: &str) -> Resolver {
        let system_dirs = [
            format!("/lib/{machine_triple}"),
            format!("/usr/lib/{machine_triple}"),
            "/lib64".into(),
            "/usr/lib64".into(),
            "/lib".into(),
            "/usr/lib".into(),
        ]
        .into_iter()
        .map(PathBuf::from)
        .collect();
        Resolver {
            torch_lib: torch_lib.to_path_buf(),
            system_dirs,
            libs: HashMap::new(),
            located: HashMap::new(),
        }
    }

    pub fn torch_lib(&self) -> &Path {
        &self.torch_lib
    }

    fn locate(&self, name: &str, search: &[PathBuf]) -> Option<PathBuf> {
        search
            .iter()
            .chain(std::iter::once(&self.torch_lib))
            .chain(&self.system_dirs)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
            .or_else(|| self.located.get(name).cloned())
    }

    fn load(&mut self, path: &Path) -> Option<&Lib> {
        if !self.libs.contains_key(path) {
            let lib = map(path).ok().and_then(|data| {
                let info = parse_elf(path, &data).ok()?;
                let origin = path.parent().unwrap_or(Path::new("/"));
                Some(Lib {
                    exports: info.defined.into_iter().collect(),
                    needed: info.needed,
                    search: info
                        .runpaths
                        .iter()
                        .map(|r| expand_origin(r, origin))
                        .collect(),
                })
            });
            self.libs.insert(path.to_path_buf(), lib);
        }
        self.libs.get(path).and_then(Option::as_ref)
    }

    /// Breadth-first over DT_NEEDED from `needed` (searched first in `search`), as the loader does.
    pub fn closure(&mut self, needed: &[String], search: &[PathBuf]) -> Closure {
        let mut out = Closure {
            exports: HashMap::new(),
            missing: Vec::new(),
            reached: HashSet::new(),
        };
        let mut queue: std::collections::VecDeque<(String, Vec<PathBuf>)> = needed
            .iter()
            .map(|n| (n.clone(), search.to_vec()))
            .collect();
        while let Some((name, search)) = queue.pop_front() {
            if !out.reached.insert(name.clone()) {
                continue;
            }
            let Some(path) = self.locate(&name, &search) else {
                out.missing.push(name);
                continue;
            };
            self.located.entry(name.clone()).or_insert(path.clone());
            let Some(lib) = self.load(&path) else {
                out.missing.push(name);
                continue;
            };
            for sym in &lib.exports {
                out.exports
                    .entry(sym.clone())
                    .or_insert_with(|| name.clone());
            }
            let next: Vec<(String, Vec<PathBuf>)> = lib
                .needed
                .iter()
                .map(|n| (n.clone(), lib.search.clone()))
                .collect();
            queue.extend(next);
        }
        out
    }

    /// Every torch library (`lib*.so` in the torch lib dir) and what it pulls in: for fix hints.
    pub fn torch_wide(&mut self) -> Closure {
        let mut names: Vec<String> = std::fs::read_dir(&self.torch_lib)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .filter(|n| n.starts_with("lib") && n.ends_with(".so"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        let dir = vec![self.torch_lib.clone()];
        self.closure(&names, &dir)
    }
}
