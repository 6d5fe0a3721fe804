//! `build.toml` → [`Manifest`]: walks the TOML tree with spans so that every problem points at its key
//! or value, checks each key against the edition's key set, and collects every problem instead of
//! stopping at the first one.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toml_edit::{Item, TableLike, Value};

use crate::diag::Problem;
use crate::layout::PathRules;
use crate::model::*;
use crate::{Backend, Version, cuda_archs, rocm_archs, variant::ROCM_SUPPORTED_ARCHS};

/// CUDA toolkits whose default arch tables a `cuda-capabilities` list is checked against: the list
/// must keep at least one arch with one of them.
const CHECK_CUDA: [&str; 3] = ["12.6", "12.8", "13.0"];

pub(crate) struct Parser<'a> {
    src: Arc<String>,
    file: PathBuf,
    pub(crate) problems: Vec<Problem>,
    edition: u8,
    /// Checks `src`/`include` paths against the project directory (absent when parsing a string).
    paths: Option<&'a PathRules>,
    /// The valid kernel name and the framework's package directory, when known, so that layout checks
    /// run even when other keys have errors.
    pub(crate) package: (Option<String>, Option<&'static str>),
}

/// Keys of `[general]` and the first edition that knows each (3 = every edition).
const GENERAL_KEYS: &[(&str, u8)] = &[
    ("name", 3),
    ("version", 3),
    ("edition", 5),
    ("license", 3),
    ("upstream", 3),
    ("source", 4),
    ("backends", 3),
    ("python-depends", 3),
    ("kernel-depends", 5),
    ("hub", 3),
    ("cuda", 3),
    ("xpu", 3),
    ("neuron", 3),
    ("tpu", 5),
];
const ROOT_KEYS: &[(&str, u8)] = &[
    ("general", 3),
    ("torch", 3),
    ("torch-noarch", 3),
    ("tvm-ffi", 3),
    ("kernel", 3),
];
const HUB_KEYS: &[(&str, u8)] = &[("repo-id", 3), ("branch", 3)];
const CUDA_GENERAL_KEYS: &[(&str, u8)] = &[
    ("minver", 3),
    ("maxver", 3),
    ("python-depends", 3),
    ("kernel-depends", 5),
];
const BACKEND_DEPENDS_KEYS: &[(&str, u8)] = &[("python-depends", 3), ("kernel-depends", 5)];
const TPU_KEYS: &[(&str, u8)] = &[("python-depends", 5)];
const TORCH_KEYS: &[(&str, u8)] = &[
    ("src", 3),
    ("include", 3),
    ("pyext", 3),
    ("minver", 3),
    ("maxver", 3),
    ("stable-abi", 4),
    ("cxx-flags", 4),
];
const TVM_FFI_KEYS: &[(&str, u8)] = &[("src", 3), ("include", 3), ("pyext", 3), ("cxx-flags", 3)];
const NOARCH_KEYS: &[(&str, u8)] = &[
    ("pyext", 3),
    ("cuda_capabilities", 3),
    ("cuda-capabilities", 3),
    ("rocm_archs", 3),
    ("rocm-archs", 3),
];
const KERNEL_DEPEND_KEYS: &[(&str, u8)] = &[("repo-id", 3), ("version", 3), ("revision", 3)];
const KERNEL_COMMON_KEYS: [&str; 5] = ["backend", "depends", "src", "include", "cxx-flags"];

fn kernel_extra_keys(backend: Backend) -> &'static [&'static str] {
    match backend {
        Backend::Cuda => &["cuda-capabilities", "cuda-flags", "cuda-minver"],
        Backend::Rocm => &["rocm-archs", "hip-flags"],
        Backend::Xpu => &["sycl-flags"],
        _ => &[],
    }
}

/// The candidate most similar to `word`, if it is similar enough to be a likely typo.
pub fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('_', "-");
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&norm(word), &norm(c)), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

fn quoted_list<'s>(items: impl IntoIterator<Item = &'s str>) -> String {
    items
        .into_iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// TOML type names for messages.
fn kind_of(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Value(v) => value_kind(v),
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
    }
}

fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a datetime",
        Value::Array(_) => "an array",
        Value::InlineTable(_) => "a table",
    }
}

/// `^[a-z][-a-z0-9]*[a-z0-9]$`
pub fn valid_kernel_project_name(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

/// A `[kernel.<name>]` name: it becomes a CMake target and a directory-safe identifier.
fn valid_component_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Git URL forms accepted for `upstream`/`source`.
pub fn valid_git_url(url: &str) -> bool {
    const SCHEMES: [&str; 7] = [
        "https://",
        "http://",
        "git://",
        "ssh://",
        "git+ssh://",
        "git+https://",
        "git+http://",
    ];
    if let Some(rest) = SCHEMES.iter().find_map(|s| url.strip_prefix(s)) {
        let host = rest.split('/').next().unwrap_or("");
        return !host.is_empty() && !rest.contains(char::is_whitespace);
    }
    // scp-style `user@host:path`.
    match url.split_once(':') {
        Some((user_host, path)) => match user_host.split_once('@') {
            Some((user, host)) => {
                !user.is_empty()
                    && !host.is_empty()
                    && !path.is_empty()
                    && !url.contains(char::is_whitespace)
                    && !host.contains('/')
            }
            None => false,
        },
        None => false,
    }
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: Arc<String>, file: &Path, paths: Option<&'a PathRules>) -> Self {
        Parser {
            src,
            file: file.to_path_buf(),
            problems: Vec::new(),
            edition: 5,
            paths,
            package: (None, None),
        }
    }

    fn problem(&self, code: &'static str, message: impl Into<String>) -> Problem {
        Problem::new(code, &self.file, message)
    }

    fn push_at(
        &mut self,
        code: &'static str,
        span: Option<Range<usize>>,
        label: &str,
        message: impl Into<String>,
        help: Option<String>,
    ) {
        let mut p = self.problem(code, message);
        if let Some(span) = span {
            p = p.at(&self.src, span, label);
        }
        if let Some(h) = help {
            p = p.with_help(h);
        }
        self.problems.push(p);
    }

    fn warn_at(
        &mut self,
        code: &'static str,
        span: Option<Range<usize>>,
        label: &str,
        message: String,
        help: Option<String>,
    ) {
        self.push_at(code, span, label, message, help);
        if let Some(p) = self.problems.last_mut() {
            p.severity = miette::Severity::Warning;
        }
    }

    fn type_error(&mut self, path: &str, item: &Item, expected: &str, example: &str) {
        self.push_at(
            "manifest::wrong-type",
            item.span(),
            &format!("expected {expected}"),
            format!("`{path}` must be {expected}, found {}", kind_of(item)),
            Some(format!("write it as {example}")),
        );
    }

    /// Parse the whole document; `None` when it could not be turned into a manifest at all.
    pub(crate) fn parse(&mut self) -> Option<Manifest> {
        let src = Arc::clone(&self.src);
        let doc = match toml_edit::Document::parse(src.as_str()) {
            Ok(doc) => doc,
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let msg = e.message().trim().to_string();
                self.push_at(
                    "manifest::toml-syntax",
                    Some(span),
                    "here",
                    format!("TOML syntax error: {msg}"),
                    Some("fix the TOML syntax (strings need quotes, tables are `[name]`, arrays are `[\"a\", \"b\"]`)".into()),
                );
                return None;
            }
        };
        let root = doc.as_table();
        let Some(general_item) = root.get("general") else {
            self.push_at(
                "manifest::missing-key",
                Some(0..0),
                "expected [general] in this file",
                "missing required table [general]",
                Some("add a [general] table with `name`, `version`, `edition = 5`, `license` and `backends`".into()),
            );
            return None;
        };
        let Some(general_tbl) = general_item.as_table_like() else {
            self.type_error("general", general_item, "a table", "[general]");
            return None;
        };
        self.edition = self.detect_edition(root, general_tbl)?;
        if self.edition < 5 {
            let what = if self.edition == 4 {
                "an edition 4"
            } else {
                "a legacy (edition 3)"
            };
            self.warn_at(
                "manifest::old-edition",
                general_item.span(),
                "no `edition = 5`",
                format!("{what} build.toml; the current format is edition 5"),
                Some("run `kforge update-build` to rewrite it as edition 5".into()),
            );
        }
        self.check_keys(root, "the top level", ROOT_KEYS);
        let general = self.general(general_tbl, general_item.span());
        let framework = self.framework(root);
        self.package.1 = match (&framework, root.contains_key("tvm-ffi")) {
            (Some(f), _) => Some(f.ext_dir()),
            (None, true) => Some("tvm-ffi-ext"),
            (None, false) => Some("torch-ext"),
        };
        let kernels = self.kernels(root, general.as_ref().map(|g| g.backends.as_slice()));
        let framework = framework?;
        if let (Framework::TorchNoarch(_), Some(k)) = (&framework, root.get("kernel"))
            && let Some(t) = k.as_table_like().filter(|t| !t.is_empty())
        {
            let first = t
                .iter()
                .next()
                .map(|(n, _)| n.to_string())
                .unwrap_or_default();
            let span = t.key(&first).and_then(|k| k.span());
            // A legacy file without any framework table is noarch too: say so rather than name a table it lacks.
            let why = if root.contains_key("torch-noarch") {
                "the project uses [torch-noarch]"
            } else {
                "the project has no [torch] table (a legacy build.toml without one is a noarch project)"
            };
            self.push_at(
                    "manifest::noarch-kernel",
                    span,
                    "compiled component",
                    format!("[kernel.{first}] is a compiled component, but {why}"),
                    Some("use [torch] (an AOT extension) for compiled kernels, or remove the [kernel.*] tables".into()),
                );
        }
        Some(Manifest {
            edition: self.edition,
            general: general?,
            framework,
            kernels: kernels?,
        })
    }

    fn detect_edition(&mut self, root: &toml_edit::Table, general: &dyn TableLike) -> Option<u8> {
        if let Some((key, item)) = general.get_key_value("edition") {
            return match item.as_integer() {
                Some(5) => Some(5),
                Some(n) => {
                    self.push_at(
                        "manifest::edition",
                        item.span().or(key.span()),
                        "unsupported edition",
                        format!("unsupported build edition {n}"),
                        Some("kforge reads `edition = 5`, and editions 3 and 4 (which have no `edition` key)".into()),
                    );
                    None
                }
                None => {
                    self.type_error("general.edition", item, "an integer", "`edition = 5`");
                    None
                }
            };
        }
        let has_framework = ["torch", "torch-noarch", "tvm-ffi"]
            .iter()
            .any(|k| root.contains_key(k));
        // Edition 4 is the stricter format: required license, version and framework table.
        if general.contains_key("license") && general.contains_key("version") && has_framework {
            Some(4)
        } else {
            Some(3)
        }
    }

    fn edition_help(&self) -> String {
        "add `edition = 5` to [general] (`kforge update-build` migrates an older build.toml)"
            .to_string()
    }

    /// Report unknown keys (with a did-you-mean) and keys newer than the file's edition.
    fn check_keys(&mut self, table: &dyn TableLike, where_: &str, allowed: &[(&str, u8)]) {
        for (name, _) in table.iter() {
            let span = table.key(name).and_then(|k| k.span());
            match allowed.iter().find(|(k, _)| *k == name) {
                Some((_, min)) if *min > self.edition => {
                    let help = self.edition_help();
                    self.push_at(
                        "manifest::edition-key",
                        span,
                        &format!("needs edition {min}"),
                        format!(
                            "`{name}` in {where_} is not part of edition {} build.toml files",
                            self.edition
                        ),
                        Some(help),
                    );
                }
                Some(_) => {}
                None => {
                    let edition = self.edition;
                    let known = allowed
                        .iter()
                        .filter(move |(_, m)| *m <= edition)
                        .map(|(k, _)| *k);
                    self.unknown_key(name, span, where_, known)
                }
            }
        }
    }

    fn unknown_key<'k>(
        &mut self,
        name: &str,
        span: Option<Range<usize>>,
        where_: &str,
        allowed: impl Iterator<Item = &'k str> + Clone,
    ) {
        let help = match did_you_mean(name, allowed.clone()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("the keys of {where_} are {}", quoted_list(allowed)),
        };
        self.push_at(
            "manifest::unknown-key",
            span,
            "unknown key",
            format!("unknown key `{name}` in {where_}"),
            Some(help),
        );
    }

    fn missing_key(
        &mut self,
        t: &dyn TableLike,
        key: &str,
        where_: &str,
        span: Option<Range<usize>>,
        example: &str,
    ) {
        // A misspelling of `key` already got an "unknown key, did you mean" error.
        if let Some((typo, _)) = t
            .iter()
            .find(|(k, _)| *k != key && did_you_mean(k, [key]).is_some())
        {
            if !self
                .problems
                .iter()
                .any(|p| p.message.contains(&format!("`{typo}`")))
            {
                let tspan = t.key(typo).and_then(|k| k.span());
                self.unknown_key(typo, tspan, where_, [key].into_iter());
            }
            return;
        }
        self.push_at(
            "manifest::missing-key",
            span,
            &format!("`{key}` is missing here"),
            format!("missing required key `{key}` in {where_}"),
            Some(format!("add {example}")),
        );
    }

    fn string(
        &mut self,
        table: &dyn TableLike,
        key: &str,
        path: &str,
    ) -> Option<(String, Option<Range<usize>>)> {
        let item = table.get(key)?;
        match item.as_str() {
            Some(s) => Some((s.to_string(), item.span())),
            None => {
                self.type_error(path, item, "a string", &format!("`{key} = \"...\"`"));
                None
            }
        }
    }

    /// An array of strings with the span of each element.
    fn strings(
        &mut self,
        table: &dyn TableLike,
        key: &str,
        path: &str,
    ) -> Option<Vec<(String, Option<Range<usize>>)>> {
        let item = table.get(key)?;
        let Some(arr) = item.as_array() else {
            self.type_error(
                path,
                item,
                "an array of strings",
                &format!("`{key} = [\"...\"]`"),
            );
            return None;
        };
        let mut out = Vec::new();
        let mut ok = true;
        for v in arr.iter() {
            match v.as_str() {
                Some(s) => out.push((s.to_string(), v.span())),
                None => {
                    ok = false;
                    self.push_at(
                        "manifest::wrong-type",
                        v.span(),
                        "expected a string",
                        format!(
                            "every element of `{path}` must be a string, found {}",
                            value_kind(v)
                        ),
                        Some("quote it, e.g. \"8.0\"".into()),
                    );
                }
            }
        }
        ok.then_some(out)
    }

    fn plain_strings(&mut self, table: &dyn TableLike, key: &str, path: &str) -> Vec<String> {
        self.strings(table, key, path)
            .map(|v| v.into_iter().map(|(s, _)| s).collect())
            .unwrap_or_default()
    }

    fn version(&mut self, table: &dyn TableLike, key: &str, path: &str) -> Option<Version> {
        let item = table.get(key)?;
        let Some(s) = item.as_str() else {
            let example = match item.as_value() {
                Some(Value::Float(f)) => {
                    format!("`{key} = \"{}\"` (versions are strings)", f.value())
                }
                _ => format!("`{key} = \"2.11\"` (versions are strings)"),
            };
            self.type_error(path, item, "a version string", &example);
            return None;
        };
        match s.parse::<Version>() {
            Ok(v) => Some(v),
            Err(e) => {
                self.push_at(
                    "manifest::bad-version",
                    item.span(),
                    "not a version",
                    format!("`{path}`: {e}"),
                    Some(format!("write it as `{key} = \"2.11\"`")),
                );
                None
            }
        }
    }

    fn uint(&mut self, table: &dyn TableLike, key: &str, path: &str) -> Option<u64> {
        let item = table.get(key)?;
        match item.as_integer() {
            Some(n) if n >= 0 => Some(n as u64),
            Some(n) => {
                self.push_at(
                    "manifest::wrong-type",
                    item.span(),
                    "negative",
                    format!("`{path}` must be a non-negative integer, found {n}"),
                    Some(format!("write it as `{key} = 1`")),
                );
                None
            }
            None => {
                self.type_error(
                    path,
                    item,
                    "a non-negative integer",
                    &format!("`{key} = 1` (no quotes)"),
                );
                None
            }
        }
    }

    /// A sub-table; reports a type error when the key holds something else.
    fn subtable<'t>(
        &mut self,
        table: &'t dyn TableLike,
        key: &str,
        path: &str,
    ) -> Option<(&'t dyn TableLike, Option<Range<usize>>)> {
        let item = table.get(key)?;
        match item.as_table_like() {
            Some(t) => Some((
                t,
                item.span()
                    .or_else(|| table.key(key).and_then(|k| k.span())),
            )),
            None => {
                self.type_error(path, item, "a table", &format!("`[{path}]`"));
                None
            }
        }
    }

    fn general(&mut self, t: &dyn TableLike, span: Option<Range<usize>>) -> Option<General> {
        self.check_keys(t, "[general]", GENERAL_KEYS);
        let mut ok = true;
        let mut g = General::default();
        match self.string(t, "name", "general.name") {
            Some((name, nspan)) => {
                if !valid_kernel_project_name(&name) {
                    let suggestion: String = name
                        .to_ascii_lowercase()
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                        .collect::<String>()
                        .trim_matches('-')
                        .to_string();
                    self.push_at(
                        "manifest::bad-name",
                        nspan,
                        "invalid name",
                        format!("invalid kernel name `{name}`: expected lowercase letters, digits and `-`, starting with a letter and not ending with `-` (at least 2 characters)"),
                        Some(format!("e.g. name = \"{}\"", if valid_kernel_project_name(&suggestion) { suggestion.as_str() } else { "my-kernel" })),
                    );
                    ok = false;
                } else {
                    self.package.0 = Some(name.clone());
                }
                g.name = name;
            }
            None => {
                if !t.contains_key("name") {
                    self.missing_key(
                        t,
                        "name",
                        "[general]",
                        span.clone(),
                        "`name = \"my-kernel\"`",
                    );
                }
                ok = false;
            }
        }
        g.version = self.uint(t, "version", "general.version");
        if g.version.is_none() && self.edition >= 4 && !t.contains_key("version") {
            self.missing_key(
                t,
                "version",
                "[general]",
                span.clone(),
                "`version = 1` (the kernel's major version)",
            );
        }
        g.license = self.string(t, "license", "general.license").map(|(s, _)| s);
        if g.license.is_none() && self.edition >= 4 && !t.contains_key("license") {
            self.missing_key(
                t,
                "license",
                "[general]",
                span.clone(),
                "`license = \"Apache-2.0\"` (a Hub license identifier)",
            );
        }
        for key in ["upstream", "source"] {
            if let Some((url, uspan)) = self.string(t, key, &format!("general.{key}")) {
                if !valid_git_url(&url) {
                    self.push_at(
                        "manifest::bad-url",
                        uspan,
                        "not a git URL",
                        format!("`general.{key}` = \"{url}\" is not a git URL: expected an https, http, git, ssh, git+ssh, git+https or git+http URL, or scp-style user@host:path"),
                        Some(format!("e.g. {key} = \"https://github.com/org/repo\"")),
                    );
                }
                if key == "upstream" {
                    g.upstream = Some(url);
                } else {
                    g.source = Some(url);
                }
            }
        }
        match self.strings(t, "backends", "general.backends") {
            Some(list) => {
                if list.is_empty() {
                    self.push_at(
                        "manifest::missing-key",
                        t.get("backends").and_then(|i| i.span()),
                        "empty",
                        "`general.backends` is empty",
                        Some(
                            "list at least one backend, e.g. backends = [\"cpu\", \"cuda\"]".into(),
                        ),
                    );
                }
                for (b, bspan) in list {
                    match b.parse::<Backend>() {
                        Ok(backend) if g.backends.contains(&backend) => self.warn_at(
                            "manifest::duplicate",
                            bspan,
                            "listed twice",
                            format!("backend `{b}` is listed twice in `general.backends`"),
                            None,
                        ),
                        Ok(backend) => g.backends.push(backend),
                        Err(_) => self.unknown_backend(
                            &b,
                            bspan,
                            "general.backends",
                            Backend::ALL.map(|b| b.as_str()).into_iter(),
                        ),
                    }
                }
            }
            None => {
                if !t.contains_key("backends") {
                    let help = if self.edition == 3 {
                        "add `backends = [\"cuda\"]` (the backends this kernel supports); build.toml files older than edition 3 are not supported".to_string()
                    } else {
                        "add `backends = [\"cpu\", \"cuda\"]` (the backends this kernel supports)"
                            .to_string()
                    };
                    self.push_at(
                        "manifest::missing-key",
                        span.clone(),
                        "`backends` is missing here",
                        "missing required key `backends` in [general]",
                        Some(help),
                    );
                }
                ok = false;
            }
        }
        g.python_depends =
            self.python_depends(t, "general.python-depends", &GENERAL_PYTHON_DEPENDS, None);
        g.kernel_depends = self.kernel_depends(t, "general.kernel-depends");
        if let Some((h, _)) = self.subtable(t, "hub", "general.hub") {
            self.check_keys(h, "[general.hub]", HUB_KEYS);
            g.hub = Some(Hub {
                repo_id: self
                    .string(h, "repo-id", "general.hub.repo-id")
                    .map(|(s, _)| s),
                branch: self
                    .string(h, "branch", "general.hub.branch")
                    .map(|(s, _)| s),
            });
        }
        if let Some((c, _)) = self.subtable(t, "cuda", "general.cuda") {
            self.check_keys(c, "[general.cuda]", CUDA_GENERAL_KEYS);
            let minver = self.version(c, "minver", "general.cuda.minver");
            let maxver = self.version(c, "maxver", "general.cuda.maxver");
            self.check_bounds(c, "general.cuda", minver.as_ref(), maxver.as_ref());
            g.cuda = Some(CudaGeneral {
                minver,
                maxver,
                depends: self.backend_depends(c, Backend::Cuda),
            });
        }
        for (key, backend) in [
            ("xpu", Backend::Xpu),
            ("neuron", Backend::Neuron),
            ("tpu", Backend::Tpu),
        ] {
            if let Some((sub, _)) = self.subtable(t, key, &format!("general.{key}")) {
                let keys = if backend == Backend::Tpu {
                    TPU_KEYS
                } else {
                    BACKEND_DEPENDS_KEYS
                };
                self.check_keys(sub, &format!("[general.{key}]"), keys);
                let deps = self.backend_depends(sub, backend);
                match backend {
                    Backend::Xpu => g.xpu = Some(deps),
                    Backend::Neuron => g.neuron = Some(deps),
                    _ => g.tpu = Some(deps),
                }
            }
        }
        ok.then_some(g)
    }

    fn check_bounds(
        &mut self,
        t: &dyn TableLike,
        path: &str,
        min: Option<&Version>,
        max: Option<&Version>,
    ) {
        if let (Some(lo), Some(hi)) = (min, max)
            && lo > hi
        {
            self.push_at(
                    "manifest::bad-version",
                    t.get("minver").and_then(|i| i.span()),
                    "greater than maxver",
                    format!("`{path}.minver` ({lo}) is greater than `{path}.maxver` ({hi}): no version can satisfy both"),
                    Some("swap the two bounds or widen the range".into()),
                );
        }
    }

    fn unknown_backend<'k>(
        &mut self,
        b: &str,
        span: Option<Range<usize>>,
        path: &str,
        allowed: impl Iterator<Item = &'k str> + Clone,
    ) {
        let help = match did_you_mean(b, allowed.clone()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("use one of {}", quoted_list(allowed)),
        };
        self.push_at(
            "manifest::unknown-backend",
            span,
            "unknown backend",
            format!("unknown backend `{b}` in `{path}`"),
            Some(help),
        );
    }

    fn backend_depends(&mut self, t: &dyn TableLike, backend: Backend) -> BackendDepends {
        let key = backend.as_str();
        BackendDepends {
            python_depends: self.python_depends(
                t,
                &format!("general.{key}.python-depends"),
                backend_python_depends(backend),
                Some(backend),
            ),
            kernel_depends: self.kernel_depends(t, &format!("general.{key}.kernel-depends")),
        }
    }

    fn python_depends(
        &mut self,
        t: &dyn TableLike,
        path: &str,
        allowed: &[&str],
        backend: Option<Backend>,
    ) -> Vec<String> {
        let Some(list) = self.strings(t, "python-depends", path) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (dep, span) in list {
            if allowed.contains(&dep.as_str()) {
                out.push(dep);
                continue;
            }
            let help = match (did_you_mean(&dep, allowed.iter().copied()), backend) {
                (Some(s), _) => format!("did you mean `{s}`?"),
                (None, Some(b)) if allowed.is_empty() => {
                    format!("no Python dependencies are defined for backend {b}; remove the entry")
                }
                (None, _) => format!(
                    "the allowed dependencies are {}",
                    quoted_list(allowed.iter().copied())
                ),
            };
            let ctx = backend
                .map(|b| format!(" for backend {b}"))
                .unwrap_or_default();
            self.push_at(
                "manifest::unknown-dependency",
                span,
                "unknown dependency",
                format!("unknown Python dependency `{dep}` in `{path}`{ctx}"),
                Some(help),
            );
        }
        out
    }

    fn kernel_depends(&mut self, t: &dyn TableLike, path: &str) -> Vec<KernelDepend> {
        let Some(item) = t.get("kernel-depends") else {
            return Vec::new();
        };
        let tables: Vec<(&dyn TableLike, Option<Range<usize>>)> = match item {
            Item::ArrayOfTables(a) => a.iter().map(|t| (t as &dyn TableLike, t.span())).collect(),
            Item::Value(Value::Array(a)) => {
                let mut v = Vec::new();
                for e in a.iter() {
                    match e.as_inline_table() {
                        Some(it) => v.push((it as &dyn TableLike, e.span())),
                        None => self.push_at(
                            "manifest::wrong-type",
                            e.span(),
                            "expected a table",
                            format!(
                                "every element of `{path}` must be a table, found {}",
                                value_kind(e)
                            ),
                            Some("write { repo-id = \"org/name\", version = 1 }".into()),
                        ),
                    }
                }
                v
            }
            other => {
                self.type_error(
                    path,
                    other,
                    "an array of tables",
                    "`kernel-depends = [{ repo-id = \"org/name\", version = 1 }]`",
                );
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (i, (dt, span)) in tables.into_iter().enumerate() {
            let where_ = format!("`{path}[{i}]`");
            self.check_keys(dt, &where_, KERNEL_DEPEND_KEYS);
            let repo_id = self.string(dt, "repo-id", &format!("{path}[{i}].repo-id"));
            let version = self.uint(dt, "version", &format!("{path}[{i}].version"));
            let revision = self
                .string(dt, "revision", &format!("{path}[{i}].revision"))
                .map(|(s, _)| s);
            if repo_id.is_none() && !dt.contains_key("repo-id") {
                self.missing_key(
                    dt,
                    "repo-id",
                    &where_,
                    span.clone(),
                    "`repo-id = \"org/name\"`",
                );
            }
            if let Some((r, rspan)) = &repo_id {
                let parts: Vec<&str> = r.split('/').collect();
                if parts.len() != 2 || parts.iter().any(|p| p.is_empty()) {
                    self.push_at(
                        "manifest::bad-repo-id",
                        rspan.clone(),
                        "expected org/name",
                        format!("`{path}[{i}].repo-id` = \"{r}\" is not a Hub repo id"),
                        Some("write it as \"org/name\"".into()),
                    );
                }
            }
            match (dt.contains_key("version"), dt.contains_key("revision")) {
                (true, true) => self.push_at(
                    "manifest::kernel-depends-pin",
                    dt.key("revision").and_then(|k| k.span()).or(span.clone()),
                    "both version and revision",
                    format!("{where_} sets both `version` and `revision`; they are mutually exclusive"),
                    Some("keep `version = N` to follow a version branch, or `revision = \"...\"` to pin a commit/branch, not both".into()),
                ),
                (false, false) => self.push_at(
                    "manifest::kernel-depends-pin",
                    span.clone(),
                    "needs version or revision",
                    format!("{where_} needs `version` or `revision`"),
                    Some("add `version = 1` (a version branch) or `revision = \"<commit or branch>\"`".into()),
                ),
                _ => {}
            }
            if let Some((repo_id, _)) = repo_id {
                out.push(KernelDepend {
                    repo_id,
                    version,
                    revision,
                });
            }
        }
        out
    }

    fn framework(&mut self, root: &toml_edit::Table) -> Option<Framework> {
        let present: Vec<&str> = ["torch", "torch-noarch", "tvm-ffi"]
            .into_iter()
            .filter(|k| root.contains_key(k))
            .collect();
        if present.len() > 1 {
            let span = root
                .key(present[1])
                .and_then(|k| k.span())
                .or_else(|| root.get(present[1]).and_then(|i| i.span()));
            self.push_at(
                "manifest::framework",
                span,
                "second framework table",
                format!(
                    "a project has exactly one framework table, found {}",
                    present
                        .iter()
                        .map(|p| format!("[{p}]"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
                Some("keep one of [torch], [torch-noarch] and [tvm-ffi]".into()),
            );
            return None;
        }
        let Some(&which) = present.first() else {
            if self.edition >= 4 {
                self.push_at(
                    "manifest::missing-key",
                    Some(0..0),
                    "no framework table in this file",
                    "missing framework table: expected [torch], [torch-noarch] or [tvm-ffi]",
                    Some("add [torch] with `src = [\"torch-ext/torch_binding.cpp\", \"torch-ext/torch_binding.h\"]`, or [torch-noarch] for pure-Python kernels".into()),
                );
                return None;
            }
            // Legacy files without a framework table are noarch.
            return Some(Framework::TorchNoarch(TorchNoarch::default()));
        };
        let (t, span) = self.subtable(root, which, which)?;
        match which {
            "torch" => {
                self.check_keys(t, "[torch]", TORCH_KEYS);
                let ext = self.torch_ext(t, "torch", span)?;
                Some(Framework::Torch(ext))
            }
            "tvm-ffi" => {
                self.check_keys(t, "[tvm-ffi]", TVM_FFI_KEYS);
                if !t.contains_key("src") {
                    self.missing_key(
                        t,
                        "src",
                        "[tvm-ffi]",
                        span.clone(),
                        "`src = [\"tvm-ffi-ext/tvm_ffi_binding.cpp\"]`",
                    );
                }
                let ext = self.torch_ext(t, "tvm-ffi", span)?;
                Some(Framework::TvmFfi(ext))
            }
            _ => {
                self.check_keys(t, "[torch-noarch]", NOARCH_KEYS);
                let mut n = TorchNoarch::default();
                if t.contains_key("pyext") {
                    n.pyext = self.plain_strings(t, "pyext", "torch-noarch.pyext");
                }
                n.cuda_capabilities =
                    self.either_spelling(t, "cuda_capabilities", "cuda-capabilities");
                n.rocm_archs = self.either_spelling(t, "rocm_archs", "rocm-archs");
                Some(Framework::TorchNoarch(n))
            }
        }
    }

    /// `[torch-noarch]` accepts both the snake_case spelling the HF code reads and the documented kebab-case.
    fn either_spelling(
        &mut self,
        t: &dyn TableLike,
        snake: &str,
        kebab: &str,
    ) -> Option<Vec<String>> {
        if t.contains_key(snake) && t.contains_key(kebab) {
            self.push_at(
                "manifest::duplicate",
                t.key(kebab).and_then(|k| k.span()),
                "second spelling",
                format!("[torch-noarch] sets both `{snake}` and `{kebab}`"),
                Some("keep one of the two spellings".into()),
            );
        }
        let key = if t.contains_key(kebab) { kebab } else { snake };
        t.contains_key(key)
            .then(|| self.plain_strings(t, key, &format!("torch-noarch.{key}")))
    }

    fn torch_ext(
        &mut self,
        t: &dyn TableLike,
        table: &str,
        span: Option<Range<usize>>,
    ) -> Option<TorchExt> {
        let mut ext = TorchExt {
            src: self.paths_of(t, "src", &format!("{table}.src"), true),
            include: self.paths_of(t, "include", &format!("{table}.include"), false),
            ..TorchExt::default()
        };
        if t.contains_key("pyext") {
            ext.pyext = self.plain_strings(t, "pyext", &format!("{table}.pyext"));
        }
        ext.cxx_flags = self.plain_strings(t, "cxx-flags", &format!("{table}.cxx-flags"));
        if table == "torch" {
            ext.minver = self.version(t, "minver", "torch.minver");
            ext.maxver = self.version(t, "maxver", "torch.maxver");
            self.check_bounds(t, "torch", ext.minver.as_ref(), ext.maxver.as_ref());
            ext.stable_abi = self.stable_abi(t);
            if ext.src.is_empty() && !t.contains_key("src") {
                self.warn_at(
                    "manifest::missing-key",
                    span,
                    "no `src`",
                    "[torch] has no `src`: no binding registers the kernels with torch".to_string(),
                    Some("add `src = [\"torch-ext/torch_binding.cpp\", \"torch-ext/torch_binding.h\"]`".into()),
                );
            }
        }
        Some(ext)
    }

    fn stable_abi(&mut self, t: &dyn TableLike) -> Option<StableAbi> {
        let item = t.get("stable-abi")?;
        if item.is_str() {
            return self
                .version(t, "stable-abi", "torch.stable-abi")
                .map(StableAbi::All);
        }
        let Some(tbl) = item.as_table_like() else {
            self.type_error(
                "torch.stable-abi",
                item,
                "a version string or a table of backend = version",
                "`stable-abi = \"2.11\"` or `[torch.stable-abi] cuda = \"2.11\"`",
            );
            return None;
        };
        if self.edition < 5 {
            let help = self.edition_help();
            self.push_at(
                "manifest::edition-key",
                item.span(),
                "needs edition 5",
                "a per-backend [torch.stable-abi] table needs edition 5",
                Some(help),
            );
        }
        let mut map = BTreeMap::new();
        for (name, _) in tbl.iter() {
            let span = tbl.key(name).and_then(|k| k.span());
            match name.parse::<Backend>() {
                Ok(b) => {
                    if let Some(v) = self.version(tbl, name, &format!("torch.stable-abi.{name}")) {
                        map.insert(b, v);
                    }
                }
                Err(_) => self.unknown_backend(
                    name,
                    span,
                    "torch.stable-abi",
                    Backend::ALL.map(|b| b.as_str()).into_iter(),
                ),
            }
        }
        Some(StableAbi::PerBackend(map))
    }

    /// Paths of `src`/`include`, each checked against the project directory when one is known.
    fn paths_of(&mut self, t: &dyn TableLike, key: &str, path: &str, files: bool) -> Vec<PathBuf> {
        let Some(list) = self.strings(t, key, path) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (p, span) in list {
            if let Some(rules) = self.paths
                && let Err(e) = rules.check(&p, files)
            {
                let mut prob = self.problem(e.code, e.message).with_help(e.help);
                if let Some(span) = span {
                    prob = prob.at(&self.src, span, e.label);
                }
                self.problems.push(prob);
                continue;
            }
            out.push(PathBuf::from(p));
        }
        out
    }

    fn kernels(
        &mut self,
        root: &toml_edit::Table,
        backends: Option<&[Backend]>,
    ) -> Option<BTreeMap<String, Kernel>> {
        let mut out = BTreeMap::new();
        let Some((tbl, _)) = self.subtable(root, "kernel", "kernel") else {
            return Some(out);
        };
        let mut ok = true;
        for (name, item) in tbl.iter() {
            let key_span = tbl.key(name).and_then(|k| k.span());
            if !valid_component_name(name) {
                self.push_at(
                    "manifest::bad-kernel-name",
                    key_span.clone(),
                    "invalid component name",
                    format!("invalid kernel name `{name}`: expected letters, digits, `_` and `-`, starting with a letter or `_`"),
                    Some(format!("rename it, e.g. [kernel.{}]", sanitize_component(name))),
                );
                ok = false;
                continue;
            }
            let Some(kt) = item.as_table_like() else {
                self.type_error(
                    &format!("kernel.{name}"),
                    item,
                    "a table",
                    &format!("`[kernel.{name}]` with `backend`, `depends` and `src`"),
                );
                ok = false;
                continue;
            };
            let span = item.span().or(key_span);
            match self.kernel(name, kt, span, backends) {
                Some(k) => {
                    out.insert(name.to_string(), k);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn kernel(
        &mut self,
        name: &str,
        t: &dyn TableLike,
        span: Option<Range<usize>>,
        backends: Option<&[Backend]>,
    ) -> Option<Kernel> {
        let where_ = format!("[kernel.{name}]");
        let compiled = KERNEL_BACKENDS.map(|b| b.as_str());
        let backend = match self.string(t, "backend", &format!("kernel.{name}.backend")) {
            Some((b, bspan)) => match b.parse::<Backend>() {
                Ok(backend) if KERNEL_BACKENDS.contains(&backend) => backend,
                Ok(backend) => {
                    self.push_at(
                        "manifest::unknown-backend",
                        bspan,
                        "not a compiled backend",
                        format!("{where_} uses backend `{backend}`, which has no compiled kernels"),
                        Some(format!("compiled kernels use one of {}; {backend} kernels are noarch (list it in general.backends only)", quoted_list(compiled))),
                    );
                    return None;
                }
                Err(_) => {
                    self.unknown_backend(
                        &b,
                        bspan,
                        &format!("kernel.{name}.backend"),
                        compiled.into_iter(),
                    );
                    return None;
                }
            },
            None => {
                if !t.contains_key("backend") {
                    if t.contains_key("language") {
                        self.push_at(
                            "manifest::legacy",
                            t.key("language").and_then(|k| k.span()),
                            "pre-edition-3 key",
                            format!("{where_} uses `language`, a key of the pre-edition-3 format"),
                            Some(
                                "replace it with `backend = \"cuda\"` (or rocm, metal, ...)".into(),
                            ),
                        );
                    } else {
                        self.missing_key(
                            t,
                            "backend",
                            &where_,
                            span,
                            "`backend = \"cuda\"` (one of cpu, cuda, metal, rocm, xpu)",
                        );
                    }
                }
                return None;
            }
        };
        if let Some(bs) = backends
            && !bs.contains(&backend)
        {
            self.warn_at(
                    "manifest::unused-kernel",
                    t.get("backend").and_then(|i| i.span()),
                    "not in general.backends",
                    format!("{where_} has backend {backend}, which is not in `general.backends`: it will not be built"),
                    Some(format!("add \"{backend}\" to `general.backends` or remove {where_}")),
                );
        }
        let extra = kernel_extra_keys(backend);
        for (key, _) in t.iter() {
            if KERNEL_COMMON_KEYS.contains(&key) || extra.contains(&key) {
                continue;
            }
            let kspan = t.key(key).and_then(|k| k.span());
            let other = KERNEL_BACKENDS
                .iter()
                .find(|b| kernel_extra_keys(**b).contains(&key));
            if let Some(b) = other {
                self.push_at(
                    "manifest::unknown-key",
                    kspan,
                    &format!("a {b} key"),
                    format!("`{key}` is a {b} key, but {where_} has backend {backend}"),
                    Some(format!("remove `{key}` or set `backend = \"{b}\"`")),
                );
            } else {
                let allowed: Vec<&str> = KERNEL_COMMON_KEYS
                    .iter()
                    .chain(extra.iter())
                    .copied()
                    .collect();
                self.unknown_key(key, kspan, &where_, allowed.into_iter());
            }
        }
        let mut k = Kernel::new(backend);
        match self.strings(t, "depends", &format!("kernel.{name}.depends")) {
            Some(list) => {
                for (d, dspan) in list {
                    if DEPENDS.contains(&d.as_str()) {
                        k.depends.push(d);
                    } else {
                        let help = match did_you_mean(&d, DEPENDS) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => format!("use one of {}", quoted_list(DEPENDS)),
                        };
                        self.push_at(
                            "manifest::unknown-depends",
                            dspan,
                            "unknown dependency",
                            format!("unknown dependency `{d}` in `kernel.{name}.depends`"),
                            Some(help),
                        );
                    }
                }
            }
            None if !t.contains_key("depends") => {
                self.missing_key(
                    t,
                    "depends",
                    &where_,
                    span.clone(),
                    "`depends = [\"torch\"]`",
                );
            }
            None => {}
        }
        if !t.contains_key("src") {
            self.missing_key(
                t,
                "src",
                &where_,
                span.clone(),
                &format!("`src = [\"{name}/{name}.cu\"]` (sources and headers)"),
            );
        }
        k.src = self.paths_of(t, "src", &format!("kernel.{name}.src"), true);
        k.include = self.paths_of(t, "include", &format!("kernel.{name}.include"), false);
        k.cxx_flags = self.plain_strings(t, "cxx-flags", &format!("kernel.{name}.cxx-flags"));
        match backend {
            Backend::Cuda => {
                k.cuda_flags =
                    self.plain_strings(t, "cuda-flags", &format!("kernel.{name}.cuda-flags"));
                k.cuda_minver =
                    self.version(t, "cuda-minver", &format!("kernel.{name}.cuda-minver"));
                if let Some(caps) = self.strings(
                    t,
                    "cuda-capabilities",
                    &format!("kernel.{name}.cuda-capabilities"),
                ) {
                    k.cuda_capabilities = Some(self.check_cuda_caps(name, t, caps));
                }
            }
            Backend::Rocm => {
                k.hip_flags =
                    self.plain_strings(t, "hip-flags", &format!("kernel.{name}.hip-flags"));
                if let Some(archs) =
                    self.strings(t, "rocm-archs", &format!("kernel.{name}.rocm-archs"))
                {
                    k.rocm_archs = Some(self.check_rocm_archs(name, t, archs));
                }
            }
            Backend::Xpu => {
                k.sycl_flags =
                    self.plain_strings(t, "sycl-flags", &format!("kernel.{name}.sycl-flags"));
            }
            _ => {}
        }
        Some(k)
    }

    fn check_cuda_caps(
        &mut self,
        name: &str,
        t: &dyn TableLike,
        caps: Vec<(String, Option<Range<usize>>)>,
    ) -> Vec<String> {
        let mut good = Vec::new();
        for (c, span) in caps {
            match cuda_archs(Some(std::slice::from_ref(&c)), &Version::new(&[13, 0])) {
                Err(crate::ArchError::BadCuda(_)) => self.push_at(
                    "manifest::bad-arch",
                    span,
                    "not a CUDA capability",
                    format!("invalid CUDA capability `{c}` in `kernel.{name}.cuda-capabilities`"),
                    Some("write MAJOR.MINOR with an optional `a`/`f` suffix and `+PTX`, e.g. \"8.0\", \"9.0a\", \"10.0f\", \"8.0+PTX\"".into()),
                ),
                _ => good.push(c),
            }
        }
        let nonempty = CHECK_CUDA.iter().any(|v| {
            let v: Version = v.parse().expect("valid built-in version");
            cuda_archs(Some(&good), &v).is_ok()
        });
        if !good.is_empty() && !nonempty {
            self.push_at(
                "manifest::empty-archs",
                t.get("cuda-capabilities").and_then(|i| i.span()),
                "intersects to nothing",
                format!("`kernel.{name}.cuda-capabilities` {good:?} leaves no arch to build with CUDA {}", CHECK_CUDA.join(", ")),
                Some(format!("list capabilities the toolkits support, e.g. {:?}", crate::variant::cuda_default_archs(&Version::new(&[13, 0])))),
            );
        }
        good
    }

    fn check_rocm_archs(
        &mut self,
        name: &str,
        t: &dyn TableLike,
        archs: Vec<(String, Option<Range<usize>>)>,
    ) -> Vec<String> {
        let list: Vec<String> = archs.iter().map(|(a, _)| a.clone()).collect();
        if rocm_archs(Some(&list)).is_err() {
            self.push_at(
                "manifest::empty-archs",
                t.get("rocm-archs").and_then(|i| i.span()),
                "intersects to nothing",
                format!("`kernel.{name}.rocm-archs` {list:?} contains no supported ROCm arch"),
                Some(format!(
                    "use archs from {}",
                    quoted_list(ROCM_SUPPORTED_ARCHS)
                )),
            );
        } else {
            for (a, span) in &archs {
                if !ROCM_SUPPORTED_ARCHS.contains(&a.as_str()) {
                    self.warn_at(
                        "manifest::dropped-arch",
                        span.clone(),
                        "unsupported",
                        format!("ROCm arch `{a}` is not supported and is dropped"),
                        Some(format!(
                            "supported archs: {}",
                            quoted_list(ROCM_SUPPORTED_ARCHS)
                        )),
                    );
                }
            }
        }
        list
    }
}

fn sanitize_component(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("k{s}")
    } else if s.is_empty() {
        "my_kernel".to_string()
    } else {
        s
    }
}
