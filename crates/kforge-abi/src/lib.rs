//! ABI checks for built kernel extensions: manylinux symbol versions, abi3, torch stable ABI, symbol
//! resolution against the target torch, GNU_UNIQUE, RPATH.

mod elf;
pub mod policy;
mod resolve;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use elf::{ElfInfo, machine_name, map, parse_elf};
use resolve::Resolver;

/// A problem found while reading input (not a finding about its ABI).
#[derive(Debug, thiserror::Error)]
pub enum AbiError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a 64-bit ELF shared object: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("unknown manylinux policy `{name}`; expected one of {}", policy::level_names().join(", "))]
    UnknownPolicy { name: String },
    #[error("{what} `{value}`: expected {expected}")]
    BadValue {
        what: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error(
        "--torch-lib {path}: not a directory holding libc10.so (expected the lib/ dir of a torch install)"
    )]
    BadTorchLib { path: PathBuf },
    #[error("{path}: no *.so file found (expected a build/<variant>/ directory)")]
    NothingToCheck { path: PathBuf },
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
    /// What was checked, e.g. `manylinux_2_28, Python ABI 3.9, symbols resolved against <dir>`.
    pub checks: String,
    pub files: Vec<FileReport>,
    /// Checks that could not run, and why.
    pub notes: Vec<String>,
}

impl Report {
    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the report holds only plain data")
    }

    pub fn has_errors(&self) -> bool {
        self.files
            .iter()
            .flat_map(|f| &f.findings)
            .any(|f| f.severity == Severity::Error)
    }

    /// Append another report's files and notes (the first `checks` description wins).
    pub fn merge(&mut self, other: Report) {
        if self.checks.is_empty() {
            self.checks = other.checks;
        }
        self.files.extend(other.files);
        for n in other.notes {
            if !self.notes.contains(&n) {
                self.notes.push(n);
            }
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for file in &self.files {
            writeln!(f, "{}", file.path.display())?;
            if file.findings.is_empty() {
                writeln!(f, "  ok: no ABI issues ({})", self.checks)?;
            }
            for x in &file.findings {
                let lib = x
                    .library
                    .as_deref()
                    .map(|l| format!(" (from {l})"))
                    .unwrap_or_default();
                let sev = match x.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                };
                writeln!(f, "  {sev} [{}] {}{lib}", x.code, x.message)?;
                if let Some(h) = &x.fix_hint {
                    writeln!(f, "    hint: {h}")?;
                }
            }
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

/// What to check against.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Canonical manylinux level, e.g. `manylinux_2_28`.
    pub name: String,
    /// Minimum Python (major, minor) for the limited API; None skips the abi3 check.
    pub python_abi: Option<(u32, u32)>,
    /// Check for torch symbols outside the stable ABI (implied by `torch_stable_abi_version`).
    pub torch_stable_abi: bool,
    /// Target torch (major, minor) of a stable-ABI build: C shim functions added later are violations.
    pub torch_stable_abi_version: Option<(u32, u32)>,
    /// The target torch's `lib/` dir: every undefined symbol must resolve through it (None skips that).
    pub torch_lib: Option<PathBuf>,
    /// Expected ELF machine ("x86_64" / "aarch64"); None skips the check.
    pub cpu: Option<String>,
}

impl Policy {
    /// A named manylinux level (or alias such as `manylinux2014`) with abi3 3.9; None for unknown names.
    pub fn manylinux(name: &str) -> Option<Policy> {
        Some(Policy {
            name: policy::canonical_name(name)?.to_string(),
            python_abi: Some((3, 9)),
            torch_stable_abi: false,
            torch_stable_abi_version: None,
            torch_lib: None,
            cpu: None,
        })
    }

    /// Like [`Policy::manylinux`], with an error naming the known levels.
    pub fn parse(name: &str) -> Result<Policy, AbiError> {
        Policy::manylinux(name).ok_or_else(|| AbiError::UnknownPolicy {
            name: name.to_string(),
        })
    }

    fn describe(&self) -> String {
        let mut parts = vec![self.name.clone()];
        if let Some((a, b)) = self.python_abi {
            parts.push(format!("Python ABI {a}.{b}"));
        }
        if let Some((a, b)) = self.torch_stable_abi_version {
            parts.push(format!("torch stable ABI {a}.{b}"));
        } else if self.torch_stable_abi {
            parts.push("torch stable ABI".into());
        }
        if let Some(t) = &self.torch_lib {
            parts.push(format!("symbols resolved against {}", t.display()));
        }
        parts.join(", ")
    }
}

/// Parse `MAJOR.MINOR` (e.g. `3.9`, `2.10`), as `--python-abi` and `--torch-stable-abi` take it.
pub fn parse_major_minor(what: &'static str, value: &str) -> Result<(u32, u32), AbiError> {
    value
        .split_once('.')
        .and_then(|(a, b)| {
            // `2.10.0` is accepted for the torch version; a patch level changes nothing.
            let b = b.split('.').next()?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .ok_or_else(|| AbiError::BadValue {
            what,
            value: value.to_string(),
            expected: "MAJOR.MINOR such as 3.9 or 2.10",
        })
}

/// Options for checking a variant directory.
#[derive(Debug, Clone)]
pub struct Options {
    pub policy: Policy,
}

const LIMITED_API: &str = include_str!("../data/python_limited_api.txt");
const TORCH_SHIM_VERSIONS: &str = include_str!("../data/torch_shim_versions.txt");

fn data_lines(text: &'static str) -> impl Iterator<Item = &'static str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
}

fn limited_api_added(name: &str) -> Option<(u32, u32)> {
    data_lines(LIMITED_API)
        .filter_map(|l| l.split_once(' '))
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| parse_major_minor("data", v).ok())
}

/// The torch version that added a stable C shim function (`TORCH_VERSION_2_10_0` -> (2, 10)).
fn shim_added(name: &str) -> Option<(u32, u32)> {
    data_lines(TORCH_SHIM_VERSIONS)
        .filter_map(|l| l.split_once(": "))
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| {
            let mut it = v.strip_prefix("TORCH_VERSION_")?.split('_');
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        })
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

fn demangle(name: &str) -> Option<String> {
    cpp_demangle::Symbol::new(name).ok().map(|s| s.to_string())
}

fn is_python(name: &str) -> bool {
    name.starts_with("Py") || name.starts_with("_Py")
}

fn version_findings(info: &ElfInfo, policy: &Policy, out: &mut Vec<Finding>) {
    let arch = machine_name(info.machine);
    let Some(limits) = policy::symbol_limits(&policy.name, arch) else {
        let mut f = finding(
            "no-policy-for-arch",
            format!("{} defines no symbol limits for {arch}", policy.name),
            None,
        );
        f.severity = Severity::Warning;
        out.push(f);
        return;
    };
    for u in &info.undefined {
        let Some(version) = &u.version else { continue };
        let Some((ns, num)) = version.split_once('_') else {
            continue;
        };
        // Versions without a numeric part (`CXXABI_TM_1`, `libcudart.so.13`) are not policed.
        let (Some(max), Some(have)) = (limits.max_for(ns), parse_version(num)) else {
            continue;
        };
        if have.as_slice() > max {
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
                "the libstdc++ headers of gcc >= 11 read __libc_single_threaded; link one object defining `char __libc_single_threaded = 0` with hidden visibility (kforge build does) so the always-correct atomic path is used".into()
            } else {
                format!(
                    "build with a toolchain targeting {} (glibc {}.{}, its libstdc++) or avoid {}",
                    policy.name, limits.glibc[0], limits.glibc[1], u.name
                )
            });
            out.push(f);
        }
    }
}

fn python_findings(info: &ElfInfo, min: (u32, u32), out: &mut Vec<Finding>) {
    for u in info.undefined.iter().filter(|u| is_python(&u.name)) {
        match limited_api_added(&u.name) {
            Some(added) if added > min => out.push(finding(
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
                    "use only limited-API calls (define Py_LIMITED_API=0x03090000) or drop the call"
                        .into(),
                );
                out.push(f);
            }
        }
    }
}

fn stable_abi_findings(info: &ElfInfo, policy: &Policy, out: &mut Vec<Finding>) {
    for u in &info.undefined {
        if let Some(added) = shim_added(&u.name) {
            if let Some(target) = policy.torch_stable_abi_version
                && added > target
            {
                let mut f = finding(
                    "torch-shim-too-new",
                    format!(
                        "{} was added to the torch stable ABI in {}.{}, after the target {}.{}",
                        u.name, added.0, added.1, target.0, target.1
                    ),
                    Some(&u.name),
                );
                f.fix_hint = Some(format!(
                    "raise the stable-abi version to {}.{} or avoid {}",
                    added.0, added.1, u.name
                ));
                out.push(f);
            }
            continue;
        }
        let Some(d) = demangle(&u.name) else { continue };
        if (d.starts_with("c10::") || d.starts_with("at::") || d.starts_with("torch::"))
            && !d.starts_with("torch::stable::")
        {
            let mut f = finding(
                "non-stable-torch-abi",
                format!("{d} is not in the torch stable ABI"),
                Some(&u.name),
            );
            f.fix_hint = Some(
                "use torch/csrc/stable/ (torch::stable::Tensor, STABLE_TORCH_LIBRARY) instead of ATen/c10 APIs"
                    .into(),
            );
            out.push(f);
        }
    }
}

fn resolution_findings(
    path: &Path,
    info: &ElfInfo,
    policy: &Policy,
    resolver: &mut Resolver,
    out: &mut Vec<Finding>,
) {
    let origin = path.parent().unwrap_or(Path::new("."));
    let search: Vec<PathBuf> = info
        .runpaths
        .iter()
        .filter(|r| r.contains("$ORIGIN") || r.contains("${ORIGIN}"))
        .map(|r| resolve::expand_origin(r, origin))
        .collect();
    // Torch first: what it loads is already in the process when the extension is loaded.
    let torch = resolver.torch_wide();
    let closure = resolver.closure(&info.needed, &search);
    for lib in &info.needed {
        let from_torch = torch.reached.contains(lib);
        if from_torch || policy::is_system_lib(&policy.name, lib) || lib.starts_with("libpython") {
            continue;
        }
        let mut f = finding(
            "library-not-allowed",
            format!(
                "needs {lib}, which is neither loaded by torch nor a {} system library",
                policy.name
            ),
            None,
        );
        f.library = Some(lib.clone());
        f.fix_hint = Some(
            "link it statically, or drop the dependency; users' machines will not have it".into(),
        );
        out.push(f);
    }
    for lib in &closure.missing {
        let mut f = finding(
            "library-not-found",
            format!(
                "{lib} was found neither in {} nor in the system library dirs",
                resolver.torch_lib().display()
            ),
            None,
        );
        f.severity = Severity::Warning;
        f.library = Some(lib.clone());
        out.push(f);
    }
    for u in info.undefined.iter().filter(|u| !u.weak) {
        // Python symbols come from the interpreter that imports the extension.
        if is_python(&u.name) || closure.exports.contains_key(&u.name) {
            continue;
        }
        let shown = demangle(&u.name).unwrap_or_else(|| u.name.clone());
        let mut f = finding(
            "unresolved-symbol",
            format!("{shown} is defined by no library the extension loads"),
            Some(&u.name),
        );
        f.fix_hint = Some(match torch.exports.get(&u.name) {
            Some(lib) => format!("{lib} defines it: link it ({})", link_flag(lib)),
            None => format!(
                "no library of the torch in {} defines it: build against the torch version you target",
                resolver.torch_lib().display()
            ),
        });
        out.push(f);
    }
}

/// `-ltorch_cpu` for `libtorch_cpu.so`, `-l:libcudart.so.13` for a versioned soname.
fn link_flag(lib: &str) -> String {
    match lib
        .strip_prefix("lib")
        .and_then(|rest| rest.strip_suffix(".so"))
    {
        Some(name) => format!("-l{name}"),
        None => format!("-l:{lib}"),
    }
}

fn layout_findings(info: &ElfInfo, policy: &Policy, out: &mut Vec<Finding>) {
    for name in &info.unique {
        let mut f = finding(
            "gnu-unique",
            format!("{name} has STB_GNU_UNIQUE binding (the library can never be unloaded)"),
            Some(name),
        );
        f.fix_hint = Some("compile with -fno-gnu-unique".into());
        out.push(f);
    }
    for rp in &info.runpaths {
        if !rp.starts_with("$ORIGIN") && !rp.starts_with("${ORIGIN}") {
            let mut f = finding(
                "build-rpath",
                format!("RPATH/RUNPATH contains {rp}, a path of the build machine"),
                None,
            );
            f.fix_hint = Some("drop the rpath or use $ORIGIN-relative paths".into());
            out.push(f);
        }
    }
    for lib in info.needed.iter().filter(|n| n.starts_with("libpython")) {
        let mut f = finding(
            "needs-libpython",
            format!("DT_NEEDED contains {lib}; extensions must not link libpython"),
            None,
        );
        f.library = Some(lib.clone());
        f.fix_hint = Some("do not pass -lpython3.x when linking".into());
        out.push(f);
    }
    if let Some(cpu) = &policy.cpu {
        let have = machine_name(info.machine);
        if have != cpu {
            out.push(finding(
                "wrong-machine",
                format!("ELF machine is {have}, the variant says {cpu}"),
                None,
            ));
        }
    }
}

fn check_one(
    path: &Path,
    policy: &Policy,
    resolver: &mut Option<Resolver>,
) -> Result<FileReport, AbiError> {
    let data = map(path)?;
    let info = parse_elf(path, &data)?;
    let mut findings = Vec::new();
    version_findings(&info, policy, &mut findings);
    if let Some(min) = policy.python_abi {
        python_findings(&info, min, &mut findings);
    }
    if policy.torch_stable_abi || policy.torch_stable_abi_version.is_some() {
        stable_abi_findings(&info, policy, &mut findings);
    }
    if let Some(torch_lib) = &policy.torch_lib {
        let triple = format!("{}-linux-gnu", machine_name(info.machine));
        let r = resolver.get_or_insert_with(|| Resolver::new(torch_lib, &triple));
        resolution_findings(path, &info, policy, r, &mut findings);
    }
    layout_findings(&info, policy, &mut findings);
    Ok(FileReport {
        path: path.to_path_buf(),
        findings,
    })
}

fn validate(policy: &Policy) -> Result<Vec<String>, AbiError> {
    policy::canonical_name(&policy.name).ok_or_else(|| AbiError::UnknownPolicy {
        name: policy.name.clone(),
    })?;
    match &policy.torch_lib {
        Some(dir) if !dir.join("libc10.so").is_file() => {
            Err(AbiError::BadTorchLib { path: dir.clone() })
        }
        Some(_) => Ok(Vec::new()),
        None => Ok(vec![
            "symbol resolution skipped: pass the target torch's lib/ dir (--torch-lib) to check that every undefined symbol resolves".into(),
        ]),
    }
}

/// Check shared objects against one policy.
pub fn check_files(paths: &[PathBuf], policy: &Policy) -> Result<Report, AbiError> {
    let notes = validate(policy)?;
    let mut resolver = None;
    let mut files = Vec::new();
    for p in paths {
        files.push(check_one(p, policy, &mut resolver)?);
    }
    Ok(Report {
        checks: policy.describe(),
        files,
        notes,
    })
}

/// Check one shared object against a policy.
pub fn check_file(path: &Path, policy: &Policy) -> Result<Report, AbiError> {
    check_files(&[path.to_path_buf()], policy)
}

fn shared_objects(dir: &Path) -> Result<Vec<PathBuf>, AbiError> {
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
    Ok(files)
}

/// Check every *.so under a build/<variant>/ dir; the expected cpu and a torch stable-ABI target come from
/// the variant name.
pub fn check_variant_dir(dir: &Path, options: &Options) -> Result<Report, AbiError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut policy = options.policy.clone();
    if policy.cpu.is_none() {
        policy.cpu = ["x86_64", "aarch64"]
            .iter()
            .find(|c| name.ends_with(&format!("-{c}-linux")))
            .map(|c| c.to_string());
    }
    // `torch-stable-abi211-cu126-x86_64-linux`: one digit of major, the rest minor.
    if policy.torch_stable_abi_version.is_none()
        && let Some(rest) = name.strip_prefix("torch-stable-abi")
        && let Some(digits) = rest.split('-').next()
        && digits.len() >= 2
        && let (Ok(major), Ok(minor)) = (digits[..1].parse(), digits[1..].parse())
    {
        policy.torch_stable_abi = true;
        policy.torch_stable_abi_version = Some((major, minor));
    }
    let files = shared_objects(dir)?;
    if files.is_empty() {
        return Err(AbiError::NothingToCheck {
            path: dir.to_path_buf(),
        });
    }
    check_files(&files, &policy)
}

/// Variant directories of a kernel project, discovered as `kernel-builder check-abi` does: the first of
/// `DIR/result`, `DIR/build`, `DIR` whose subdirectories hold `metadata.json`; or DIR itself if it holds one.
pub fn variant_dirs(dir: &Path) -> Result<Vec<PathBuf>, AbiError> {
    if dir.join("metadata.json").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    for base in [dir.join("result"), dir.join("build"), dir.to_path_buf()] {
        let Ok(entries) = std::fs::read_dir(&base) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("metadata.json").is_file())
            .collect();
        if !found.is_empty() {
            found.sort();
            return Ok(found);
        }
    }
    Ok(Vec::new())
}

/// Check every variant under a project or build dir (see [`variant_dirs`]).
pub fn check_project(dir: &Path, options: &Options) -> Result<Report, AbiError> {
    let dirs = variant_dirs(dir)?;
    if dirs.is_empty() {
        return Err(AbiError::NothingToCheck {
            path: dir.to_path_buf(),
        });
    }
    let mut report = Report::default();
    for d in dirs {
        report.merge(check_variant_dir(&d, options)?);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_tables_parse() {
        assert_eq!(limited_api_added("PyModule_Create2"), Some((3, 2)));
        assert_eq!(limited_api_added("PyUnstable_Anything"), None);
        assert_eq!(shim_added("torch_from_blob"), Some((2, 11)));
        assert_eq!(shim_added("torch_library_impl"), Some((2, 10)));
        assert_eq!(shim_added("aoti_torch_empty_strided"), None);
    }

    #[test]
    fn link_flags() {
        assert_eq!(link_flag("libtorch_cpu.so"), "-ltorch_cpu");
        assert_eq!(link_flag("libcudart.so.13"), "-l:libcudart.so.13");
    }

    #[test]
    fn major_minor() {
        assert_eq!(parse_major_minor("x", "3.9").unwrap(), (3, 9));
        assert_eq!(parse_major_minor("x", "2.10.0").unwrap(), (2, 10));
        let e = parse_major_minor("--python-abi", "39").unwrap_err();
        assert!(
            e.to_string()
                .contains("--python-abi `39`: expected MAJOR.MINOR")
        );
    }

    #[test]
    fn unknown_policy_names_the_known_levels() {
        let e = Policy::parse("manylinux_2_99").unwrap_err().to_string();
        assert!(
            e.contains("manylinux_2_28") && e.contains("manylinux_2_17"),
            "{e}"
        );
        assert_eq!(
            Policy::parse("manylinux2014").unwrap().name,
            "manylinux_2_17"
        );
    }
}
