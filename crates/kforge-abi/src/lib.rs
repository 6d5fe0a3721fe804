//! ABI checks for built kernel extensions: manylinux symbol versions, abi3, torch symbols, GNU_UNIQUE, RPATH.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{FileHeader, Sym};
use serde::Serialize;

/// A problem found while reading a file (not a finding about its ABI).
#[derive(Debug, thiserror::Error)]
pub enum AbiError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a 64-bit little-endian ELF shared object: {reason}")]
    Parse { path: PathBuf, reason: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub code: &'static str,
    pub message: String,
    pub symbol: Option<String>,
    pub library: Option<String>,
    pub fix_hint: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    pub path: PathBuf,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub files: Vec<FileReport>,
}

impl Report {
    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    pub fn has_errors(&self) -> bool {
        self.files
            .iter()
            .flat_map(|f| &f.findings)
            .any(|f| f.severity == Severity::Error)
    }
}

/// Highest allowed version per symbol-version namespace (PEP 600 / auditwheel facts).
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    pub max_versions: Vec<(&'static str, Vec<u32>)>,
    /// Minimum Python (major, minor) for the limited API; None skips the abi3 check.
    pub python_abi: Option<(u32, u32)>,
    pub torch_stable_abi: bool,
    pub torch_lib: Option<PathBuf>,
    /// Expected ELF machine ("x86_64" / "aarch64"); None skips the check.
    pub cpu: Option<String>,
}

impl Policy {
    /// A named manylinux policy; returns None for unknown names.
    pub fn manylinux(name: &str) -> Option<Policy> {
        let max_versions = match name {
            "manylinux_2_28" => vec![
                ("GLIBC", vec![2, 28]),
                ("GLIBCXX", vec![3, 4, 24]),
                ("CXXABI", vec![1, 3, 11]),
                ("GCC", vec![7, 0, 0]),
            ],
            _ => return None,
        };
        Some(Policy {
            name: name.to_string(),
            max_versions,
            python_abi: Some((3, 9)),
            torch_stable_abi: false,
            torch_lib: None,
            cpu: None,
        })
    }
}

/// Options for checking a variant directory.
#[derive(Debug, Clone)]
pub struct Options {
    pub policy: Policy,
}

const LIMITED_API: &str = include_str!("../data/python_limited_api.txt");

fn limited_api_added(name: &str) -> Option<(u32, u32)> {
    LIMITED_API
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| {
            let (a, b) = v.split_once('.')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
}

struct Undefined {
    name: String,
    version: Option<String>,
    library: Option<String>,
    weak: bool,
}

struct ElfInfo {
    machine: u16,
    needed: Vec<String>,
    runpaths: Vec<String>,
    undefined: Vec<Undefined>,
    defined: Vec<String>,
    unique: Vec<String>,
}

fn parse_elf(path: &Path, data: &[u8]) -> Result<ElfInfo, AbiError> {
    let perr = |e: object::read::Error| AbiError::Parse {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let header = elf::FileHeader64::<object::Endianness>::parse(data).map_err(perr)?;
    let endian = header.endian().map_err(perr)?;
    let sections = header.sections(endian, data).map_err(perr)?;
    let dynsym = sections
        .symbols(endian, data, elf::SHT_DYNSYM)
        .map_err(perr)?;
    let versions = sections.versions(endian, data).map_err(perr)?;
    let mut info = ElfInfo {
        machine: header.e_machine(endian).0,
        needed: Vec::new(),
        runpaths: Vec::new(),
        undefined: Vec::new(),
        defined: Vec::new(),
        unique: Vec::new(),
    };
    for (index, sym) in dynsym.enumerate() {
        let name = String::from_utf8_lossy(sym.name(endian, dynsym.strings()).map_err(perr)?);
        if name.is_empty() {
            continue;
        }
        if sym.st_bind() == elf::STB_GNU_UNIQUE {
            info.unique.push(name.to_string());
        }
        if sym.is_undefined(endian) {
            let (mut version, mut library) = (None, None);
            if let Some(v) = &versions
                && let Ok(Some(ver)) = v.version(v.version_index(endian, index).index())
            {
                version = Some(String::from_utf8_lossy(ver.name()).to_string());
                library = ver.file().map(|f| String::from_utf8_lossy(f).to_string());
            }
            info.undefined.push(Undefined {
                name: name.to_string(),
                version,
                library,
                weak: sym.st_bind() == elf::STB_WEAK,
            });
        } else if sym.st_bind() != elf::STB_LOCAL {
            info.defined.push(name.to_string());
        }
    }
    let dynamic = sections.dynamic_table(endian, data).map_err(perr)?;
    for d in &dynamic {
        let value = || String::from_utf8_lossy(dynamic.string(d).unwrap_or_default()).to_string();
        if d.tag == elf::DT_NEEDED {
            info.needed.push(value());
        } else if d.tag == elf::DT_RPATH || d.tag == elf::DT_RUNPATH {
            info.runpaths.extend(
                value()
                    .split(':')
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            );
        }
    }
    Ok(info)
}

fn parse_version(v: &str) -> Option<Vec<u32>> {
    v.split('.').map(|p| p.parse().ok()).collect()
}

fn finding(code: &'static str, message: String, symbol: Option<&str>) -> Finding {
    Finding {
        severity: Severity::Error,
        code,
        message,
        symbol: symbol.map(String::from),
        library: None,
        fix_hint: None,
    }
}

fn system_lib_dirs(machine: u16) -> Vec<PathBuf> {
    let triple = if machine == elf::EM_AARCH64.0 {
        "aarch64-linux-gnu"
    } else {
        "x86_64-linux-gnu"
    };
    [
        format!("/lib/{triple}"),
        format!("/usr/lib/{triple}"),
        "/lib64".into(),
        "/usr/lib64".into(),
        "/usr/lib".into(),
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

/// Exported (defined, non-local) dynamic symbols of a library, plus its DT_NEEDED.
fn exports_of(path: &Path) -> Option<(Vec<String>, Vec<String>)> {
    let data = std::fs::read(path).ok()?;
    let info = parse_elf(path, &data).ok()?;
    Some((info.defined, info.needed))
}

fn resolvable_symbols(info: &ElfInfo, torch_lib: Option<&Path>) -> HashSet<String> {
    let mut dirs: Vec<PathBuf> = torch_lib.map(Path::to_path_buf).into_iter().collect();
    dirs.extend(system_lib_dirs(info.machine));
    let mut seen = HashSet::new();
    let mut queue: Vec<String> = info.needed.clone();
    if let Some(dir) = torch_lib
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if (n.starts_with("libtorch") || n.starts_with("libc10")) && n.ends_with(".so") {
                queue.push(n);
            }
        }
    }
    let mut symbols = HashSet::new();
    while let Some(lib) = queue.pop() {
        if !seen.insert(lib.clone()) {
            continue;
        }
        if let Some(path) = dirs.iter().map(|d| d.join(&lib)).find(|p| p.exists())
            && let Some((defs, needed)) = exports_of(&path)
        {
            symbols.extend(defs);
            queue.extend(needed);
        }
    }
    symbols
}

/// Check one shared object against a policy.
pub fn check_file(path: &Path, policy: &Policy) -> Result<Report, AbiError> {
    let data = std::fs::read(path).map_err(|source| AbiError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let info = parse_elf(path, &data)?;
    let mut findings = Vec::new();

    for u in &info.undefined {
        let Some(version) = &u.version else { continue };
        let Some((ns, num)) = version.split_once('_') else {
            continue;
        };
        let (Some(max), Some(have)) = (
            policy
                .max_versions
                .iter()
                .find(|(n, _)| *n == ns)
                .map(|(_, m)| m),
            parse_version(num),
        ) else {
            continue;
        };
        if &have > max {
            let max_s = max.iter().map(u32::to_string).collect::<Vec<_>>().join(".");
            let mut f = finding(
                "symbol-version",
                format!(
                    "{}@{version} is newer than {ns}_{max_s} allowed by {}",
                    u.name, policy.name
                ),
                Some(&u.name),
            );
            f.library = u.library.clone();
            f.fix_hint = Some(if u.name == "__libc_single_threaded" {
                "built with a newer libstdc++ that reads __libc_single_threaded; kforge build adds a hidden definition `char __libc_single_threaded = 0` so the atomic path is always used".into()
            } else {
                format!(
                    "build with a toolchain targeting {} (glibc 2.28 / gcc-toolset) or avoid {}",
                    policy.name, u.name
                )
            });
            findings.push(f);
        }
    }

    if let Some(min) = policy.python_abi {
        for u in info
            .undefined
            .iter()
            .filter(|u| u.name.starts_with("Py") || u.name.starts_with("_Py"))
        {
            match limited_api_added(&u.name) {
                Some(added) if added > min => findings.push(finding(
                    "abi3-too-new",
                    format!(
                        "{} is in the limited API only since Python {}.{} (declared minimum {}.{})",
                        u.name, added.0, added.1, min.0, min.1
                    ),
                    Some(&u.name),
                )),
                Some(_) => {}
                None => {
                    let mut f = finding(
                        "non-abi3",
                        format!("{} is not part of the Python limited API (abi3)", u.name),
                        Some(&u.name),
                    );
                    f.fix_hint = Some(
                        "use only limited-API calls (define Py_LIMITED_API) or drop the call"
                            .into(),
                    );
                    findings.push(f);
                }
            }
        }
    }

    if policy.torch_stable_abi {
        for u in &info.undefined {
            let Some(d) = demangle(&u.name) else { continue };
            if (d.starts_with("c10::") || d.starts_with("at::") || d.starts_with("torch::"))
                && !d.starts_with("torch::stable::")
            {
                findings.push(finding(
                    "non-stable-torch-abi",
                    format!("{d} is not in the torch stable ABI"),
                    Some(&u.name),
                ));
            }
        }
    }

    if policy.torch_lib.is_some() {
        let available = resolvable_symbols(&info, policy.torch_lib.as_deref());
        for u in info.undefined.iter().filter(|u| !u.weak) {
            // Python symbols come from the interpreter at load time.
            if u.name.starts_with("Py") || u.name.starts_with("_Py") || available.contains(&u.name)
            {
                continue;
            }
            let shown = demangle(&u.name).unwrap_or_else(|| u.name.clone());
            let mut f = finding(
                "unresolved-symbol",
                format!("{shown} is defined by no torch library and no needed library"),
                Some(&u.name),
            );
            f.fix_hint = Some(
                "link the library that defines it, or build against the torch version you target"
                    .into(),
            );
            findings.push(f);
        }
    }

    for name in &info.unique {
        let mut f = finding(
            "gnu-unique",
            format!("{name} has STB_GNU_UNIQUE binding (the library can never be unloaded)"),
            Some(name),
        );
        f.fix_hint = Some("compile with -fno-gnu-unique".into());
        findings.push(f);
    }
    for rp in &info.runpaths {
        if rp.starts_with('/') {
            let mut f = finding(
                "absolute-rpath",
                format!("RPATH/RUNPATH contains the build-machine path {rp}"),
                None,
            );
            f.fix_hint = Some("drop the rpath or use $ORIGIN-relative paths".into());
            findings.push(f);
        }
    }
    for lib in info.needed.iter().filter(|n| n.starts_with("libpython")) {
        let mut f = finding(
            "needs-libpython",
            format!("DT_NEEDED contains {lib}; extensions must not link libpython"),
            None,
        );
        f.library = Some(lib.clone());
        findings.push(f);
    }
    if let Some(cpu) = &policy.cpu {
        let expected = match cpu.as_str() {
            "x86_64" => Some(elf::EM_X86_64.0),
            "aarch64" => Some(elf::EM_AARCH64.0),
            _ => None,
        };
        if let Some(e) = expected.filter(|e| *e != info.machine) {
            findings.push(finding(
                "wrong-machine",
                format!(
                    "ELF machine {} does not match the variant cpu {cpu} ({e})",
                    info.machine
                ),
                None,
            ));
        }
    }
    Ok(Report {
        files: vec![FileReport {
            path: path.to_path_buf(),
            findings,
        }],
    })
}

fn demangle(name: &str) -> Option<String> {
    cpp_demangle::Symbol::new(name).ok().map(|s| s.to_string())
}

/// Check every *.so under a build/<variant>/ dir; the cpu and stable-ABI flag come from the variant name.
pub fn check_variant_dir(dir: &Path, options: &Options) -> Result<Report, AbiError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut policy = options.policy.clone();
    if name.starts_with("torch-stable-abi") {
        policy.torch_stable_abi = true;
    }
    if policy.cpu.is_none() {
        policy.cpu = ["x86_64", "aarch64"]
            .iter()
            .find(|c| name.contains(&format!("-{c}-")))
            .map(|c| c.to_string());
    }
    let mut report = Report::default();
    let mut stack = vec![dir.to_path_buf()];
    let mut files = Vec::new();
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|source| AbiError::Io {
            path: d.clone(),
            source,
        })?;
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "so") {
                files.push(p);
            }
        }
    }
    files.sort();
    for f in files {
        report.files.extend(check_file(&f, &policy)?.files);
    }
    Ok(report)
}
